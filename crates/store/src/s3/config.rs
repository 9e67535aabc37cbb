//! `s3://BUCKET[/PREFIX]?endpoint=...&region=...`, and from the environment the
//! keys (if given), the CA bundle and the STS endpoint.

use std::fmt;

use percent_encoding::percent_decode_str;

use super::Keys;

/// Where and how to reach a bucket.
#[derive(Clone)]
pub struct S3Config {
    /// The bucket's name.
    pub bucket: String,
    /// The key prefix every key lives under: no leading or trailing `/`; may be empty.
    pub prefix: String,
    /// An S3-compatible server (`http://127.0.0.1:9000`), addressed path-style; `None` is
    /// AWS itself, addressed virtual-hosted style (`https://BUCKET.s3.REGION.amazonaws.com`).
    pub endpoint: Option<String>,
    /// The signing region (`us-east-1`).
    pub region: String,
    /// The keys given (`AWS_ACCESS_KEY_ID`, ...); `None`: AWS's credential chain finds them.
    pub keys: Option<Keys>,
    /// `AWS_CA_BUNDLE`: a PEM file of the certificate authorities trusted
    /// instead of the platform's, for S3 and the credential services.
    pub ca_bundle: Option<String>,
    /// `AWS_ENDPOINT_URL_STS`: where STS requests of the credential chain go.
    pub sts_endpoint: Option<String>,
}

impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Config")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("keys", &self.keys)
            .field("ca_bundle", &self.ca_bundle)
            .field("sts_endpoint", &self.sts_endpoint)
            .finish()
    }
}

impl S3Config {
    /// Parses `s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT&region=REGION` (both query
    /// parameters optional). Keys come from `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` as `env` answers them, or
    /// (none set) from AWS's credential chain when the client starts; the region
    /// is the query's `region`, else `AWS_REGION`, else `AWS_DEFAULT_REGION`, else
    /// `us-east-1`. The error names what is wrong.
    pub fn parse(url: &str, env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let env = |name: &str| env(name).filter(|value| !value.is_empty());
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| format!("{url:?} is not an s3://BUCKET[/PREFIX] URL"))?;
        let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bucket, prefix) = location.split_once('/').unwrap_or((location, ""));
        if bucket.is_empty() {
            return Err(format!("{url:?} names no bucket (s3://BUCKET[/PREFIX])"));
        }
        if !bucket
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        {
            return Err(format!("{bucket:?} is not a valid bucket name"));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(str::is_empty) && !prefix.is_empty() {
            return Err(format!("the prefix {prefix:?} has an empty path segment"));
        }

        let mut endpoint = None;
        let mut region = None;
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode_str(value)
                .decode_utf8()
                .map_err(|_| format!("the query parameter {name} is not UTF-8"))?
                .into_owned();
            let slot = match name {
                "endpoint" => &mut endpoint,
                "region" => &mut region,
                _ => {
                    return Err(format!(
                        "unknown query parameter {name:?} in the S3 URL (known: endpoint, region)"
                    ));
                }
            };
            if slot.replace(value).is_some() {
                return Err(format!("the query parameter {name} is given twice"));
            }
        }
        let endpoint = endpoint.map(|e| check_endpoint(&e)).transpose()?;
        let region = match region {
            Some(region) if region.is_empty() => return Err("the region is empty".into()),
            Some(region) => region,
            None => env("AWS_REGION")
                .or_else(|| env("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|| "us-east-1".into()),
        };
        let keys = match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            (Some(access_key), Some(secret_key)) => Some(Keys {
                access_key,
                secret_key,
                session_token: env("AWS_SESSION_TOKEN"),
            }),
            (None, None) => None,
            (Some(_), None) => {
                return Err("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY".into());
            }
            (None, Some(_)) => {
                return Err("AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID".into());
            }
        };
        let sts_endpoint = env("AWS_ENDPOINT_URL_STS")
            .map(|e| check_endpoint(&e).map_err(|why| format!("AWS_ENDPOINT_URL_STS: {why}")))
            .transpose()?;
        Ok(Self {
            bucket: bucket.into(),
            prefix: prefix.into(),
            endpoint,
            region,
            keys,
            ca_bundle: env("AWS_CA_BUNDLE"),
            sts_endpoint,
        })
    }
}

/// Checks an endpoint is `http(s)://host[:port]` (a trailing `/` is dropped).
fn check_endpoint(endpoint: &str) -> Result<String, String> {
    let bad =
        |why: &str| format!("the endpoint {endpoint:?} {why} (expected http(s)://HOST[:PORT])");
    let trimmed = endpoint.strip_suffix('/').unwrap_or(endpoint);
    let authority = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"))
        .ok_or_else(|| bad("is not http:// or https://"))?;
    let port = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| bad("has an unclosed '['"))?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or_else(|| bad("is malformed"))?),
        };
        if host.is_empty() || !host.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
            return Err(bad("has a malformed IPv6 address"));
        }
        port
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if host.is_empty()
            || !host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        {
            return Err(bad("has no valid host (or has a path, user or query)"));
        }
        port
    };
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err(bad("has an invalid port"));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    const KEYS: &[(&str, &str)] = &[("AWS_ACCESS_KEY_ID", "AK"), ("AWS_SECRET_ACCESS_KEY", "SK")];

    #[test]
    fn full_url() {
        let config = S3Config::parse(
            "s3://berth-test/a/b/?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=eu-west-3",
            env(&[
                ("AWS_ACCESS_KEY_ID", "AK"),
                ("AWS_SECRET_ACCESS_KEY", "SK"),
                ("AWS_SESSION_TOKEN", "TOKEN"),
                ("AWS_REGION", "ignored"),
            ]),
        )
        .unwrap();
        assert_eq!(config.bucket, "berth-test");
        assert_eq!(config.prefix, "a/b");
        assert_eq!(config.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(config.region, "eu-west-3");
        let keys = config.keys.as_ref().expect("keys given");
        assert_eq!(
            (keys.access_key.as_str(), keys.secret_key.as_str()),
            ("AK", "SK")
        );
        assert_eq!(keys.session_token.as_deref(), Some("TOKEN"));
        let debug = format!("{config:?}");
        assert!(!debug.contains("SK") && !debug.contains("TOKEN"), "{debug}");
    }

    #[test]
    fn defaults_and_region_fallbacks() {
        let config = S3Config::parse("s3://bucket", env(KEYS)).unwrap();
        assert_eq!(
            (
                config.prefix.as_str(),
                config.endpoint,
                config.region.as_str()
            ),
            ("", None, "us-east-1")
        );
        assert_eq!(config.keys.unwrap().session_token, None);
        let chain = S3Config::parse("s3://bucket", env(&[])).unwrap();
        assert!(chain.keys.is_none(), "no keys: the credential chain");
        let mut vars = KEYS.to_vec();
        vars.push(("AWS_DEFAULT_REGION", "ap-south-1"));
        let config = S3Config::parse("s3://bucket/", env(&vars)).unwrap();
        assert_eq!(
            (config.prefix.as_str(), config.region.as_str()),
            ("", "ap-south-1")
        );
        vars.push(("AWS_REGION", "eu-north-1"));
        let config = S3Config::parse(
            "s3://bucket/p?endpoint=https://minio.example:443/",
            env(&vars),
        )
        .unwrap();
        assert_eq!(config.region, "eu-north-1");
        assert_eq!(
            config.endpoint.as_deref(),
            Some("https://minio.example:443")
        );
        let config = S3Config::parse("s3://bucket?endpoint=http://[::1]:9000", env(KEYS)).unwrap();
        assert_eq!(config.endpoint.as_deref(), Some("http://[::1]:9000"));
    }

    #[test]
    fn errors_name_the_problem() {
        let error = |url: &str, vars: &[(&str, &str)]| S3Config::parse(url, env(vars)).unwrap_err();
        assert!(error("http://bucket", KEYS).contains("s3://"));
        assert!(error("s3://", KEYS).contains("no bucket"));
        assert!(error("s3:///prefix", KEYS).contains("no bucket"));
        assert!(error("s3://bu cket", KEYS).contains("bucket name"));
        assert!(error("s3://b/a//c", KEYS).contains("empty path segment"));
        assert!(
            error("s3://b?endpont=http://h", KEYS).contains("unknown query parameter \"endpont\"")
        );
        assert!(error("s3://b?region=a&region=b", KEYS).contains("twice"));
        assert!(error("s3://b?region=", KEYS).contains("region is empty"));
        for endpoint in [
            "ftp://h",
            "h:9000",
            "http://",
            "http://h:port",
            "http://h:0",
            "http://h:70000",
            "http://h/path",
            "http://u@h",
            "http://h?x",
            "http://[::1",
        ] {
            let message = error(&format!("s3://b?endpoint={endpoint}"), KEYS);
            assert!(message.contains("endpoint"), "{endpoint}: {message}");
        }
        assert!(
            error("s3://b", &[("AWS_SECRET_ACCESS_KEY", "SK")])
                .contains("without AWS_ACCESS_KEY_ID")
        );
        assert!(error("s3://b", &[("AWS_ACCESS_KEY_ID", "AK")]).contains("AWS_SECRET_ACCESS_KEY"));
        assert!(
            error("s3://b", &[("AWS_ENDPOINT_URL_STS", "sts.local")])
                .contains("AWS_ENDPOINT_URL_STS")
        );
        assert!(
            error(
                "s3://b",
                &[("AWS_ACCESS_KEY_ID", "AK"), ("AWS_SECRET_ACCESS_KEY", "")]
            )
            .contains("AWS_SECRET_ACCESS_KEY")
        );
    }
}
