//! A client for upstream registries (the `/registries` proxy-cache projects
//! pull through, and replication pushes to): the health check Harbor calls a
//! ping, with the registry's TLS settings and credential, the proxy cache's
//! pulls and replication's pushes ([`Remote`]).
//!
//! A ping is `GET <base>/v2/`. Without a credential, any answer of a
//! registry (200, or 401/403 asking for sign-in) counts: the registry is
//! reachable. With one, the credential must be accepted: a Bearer challenge
//! is followed to its token service with Basic credentials, a Basic
//! challenge answered directly, and `/v2/` must then answer 2xx.

pub mod cache;
mod challenge;
mod remote;
pub mod tls;

pub use remote::{BlobStream, FetchedManifest, ManifestHead, Remote, Unavailable};

use challenge::Challenge;

use std::time::Duration;

use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use base64::Engine;
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// How long a whole ping may take, token included.
const PING_TIMEOUT: Duration = Duration::from_secs(15);
/// The largest token response read.
const MAX_TOKEN_BODY: usize = 1024 * 1024;
/// How many redirects one request follows.
const MAX_REDIRECTS: usize = 5;

/// A registry as a request upstream needs it.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// The base URL of its distribution API (`<base>/v2/`), without a trailing slash.
    pub base: String,
    /// Whether certificates go unchecked.
    pub insecure: bool,
    /// PEM CA certificates replacing the platform's roots, or empty.
    pub ca_certificate: &'a str,
    /// `(access key, secret)`, when the registry has a credential.
    pub credential: Option<(&'a str, &'a str)>,
}

/// Why a ping failed, in words for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy(pub String);

impl std::fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A response whose body was not read.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: hyper::body::Incoming,
}

/// A request body: none, bytes, or a stream of them.
pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// An empty request body.
pub fn empty_body() -> Body {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// The HTTP client of one target.
struct Upstream {
    client: Client<HttpsConnector<berth_net::Connector>, Body>,
}

/// `scheme://authority` of an absolute URL.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url[after_scheme..]
        .find('/')
        .map_or(url.len(), |i| after_scheme + i);
    &url[..end]
}

/// `location` resolved against `base` (absolute, or absolute-path).
fn resolve(base: &str, location: &str) -> Option<String> {
    if location.starts_with("http://") || location.starts_with("https://") {
        Some(location.to_string())
    } else if location.starts_with('/') && !location.starts_with("//") {
        Some(format!("{}{location}", origin(base)))
    } else {
        None
    }
}

impl Upstream {
    fn new(target: &Target<'_>) -> Result<Self, Unhealthy> {
        let connector =
            tls::connector(target.insecure, target.ca_certificate).map_err(Unhealthy)?;
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// GETs `url` with `authorization`, following redirects.
    async fn get(&self, url: &str, authorization: Option<&str>) -> Result<Answer, Unhealthy> {
        self.send(Method::GET, url, authorization, None).await
    }

    /// Sends `method` to `url` with `authorization` and `accept`, following
    /// redirects (the authorization goes along only while the origin stays
    /// the same).
    async fn send(
        &self,
        method: Method,
        url: &str,
        authorization: Option<&str>,
        accept: Option<&str>,
    ) -> Result<Answer, Unhealthy> {
        let mut url = url.to_string();
        let first_origin = origin(&url).to_string();
        for _ in 0..=MAX_REDIRECTS {
            let mut request = Request::builder().method(method.clone()).uri(&url).header(
                header::USER_AGENT,
                concat!("berth/", env!("CARGO_PKG_VERSION")),
            );
            if let Some(value) = authorization.filter(|_| origin(&url) == first_origin) {
                request = request.header(header::AUTHORIZATION, value);
            }
            if let Some(accept) = accept {
                request = request.header(header::ACCEPT, accept);
            }
            let request = request
                .body(empty_body())
                .map_err(|e| Unhealthy(format!("invalid URL {url}: {e}")))?;
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| Unhealthy(format!("{url}: {}", berth_net::error_chain(&e))))?;
            let status = response.status();
            let (parts, body) = response.into_parts();
            if status.is_redirection()
                && let Some(next) = parts
                    .headers
                    .get(header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|l| resolve(&url, l))
            {
                url = next;
                continue;
            }
            return Ok(Answer {
                status,
                headers: parts.headers,
                body,
            });
        }
        Err(Unhealthy(format!("{url}: too many redirects")))
    }

    /// Sends `method` to `url` once (no redirect: a body is sent once) with
    /// `authorization`, `headers` and `body`.
    async fn send_body(
        &self,
        method: Method,
        url: &str,
        authorization: Option<&str>,
        headers: &[(header::HeaderName, String)],
        body: Body,
    ) -> Result<Answer, Unhealthy> {
        let mut request = Request::builder().method(method).uri(url).header(
            header::USER_AGENT,
            concat!("berth/", env!("CARGO_PKG_VERSION")),
        );
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let request = request
            .body(body)
            .map_err(|e| Unhealthy(format!("invalid request to {url}: {e}")))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| Unhealthy(format!("{url}: {}", berth_net::error_chain(&e))))?;
        let (parts, body) = response.into_parts();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    /// A token from the token service a Bearer challenge names, asked with
    /// the challenge's `service` and `scope` (or `scope` when given) and the
    /// Basic credential, if any; with how long it lives.
    async fn token(
        &self,
        bearer: &Challenge,
        basic: Option<&str>,
        scope: Option<&str>,
    ) -> Result<(String, Duration), Unhealthy> {
        let realm = bearer
            .param("realm")
            .ok_or_else(|| Unhealthy("a Bearer challenge without a realm".into()))?;
        let mut params: Vec<(&str, &str)> = bearer
            .param("service")
            .map(|service| ("service", service))
            .into_iter()
            .collect();
        if let Some(scope) = scope.or_else(|| bearer.param("scope")) {
            params.push(("scope", scope));
        }
        let mut url = realm.to_string();
        if !params.is_empty() {
            let query =
                serde_urlencoded::to_string(&params).map_err(|e| Unhealthy(e.to_string()))?;
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&query);
        }
        let answer = self.get(&url, basic).await?;
        if !answer.status.is_success() {
            return Err(Unhealthy(format!(
                "the token service {realm} refused the credential ({})",
                answer.status
            )));
        }
        let body = Limited::new(answer.body, MAX_TOKEN_BODY)
            .collect()
            .await
            .map_err(|e| Unhealthy(format!("reading the token: {e}")))?
            .to_bytes();
        #[derive(serde::Deserialize)]
        struct TokenBody {
            #[serde(default)]
            token: String,
            #[serde(default)]
            access_token: String,
            #[serde(default)]
            expires_in: Option<u64>,
        }
        let parsed: TokenBody = serde_json::from_slice(&body)
            .map_err(|e| Unhealthy(format!("the token service {realm} answered no token: {e}")))?;
        let token = if parsed.token.is_empty() {
            parsed.access_token
        } else {
            parsed.token
        };
        if token.is_empty() {
            return Err(Unhealthy(format!(
                "the token service {realm} answered no token"
            )));
        }
        // The distribution token spec: 60 seconds when the service names none.
        let lifetime = Duration::from_secs(parsed.expires_in.unwrap_or(60));
        Ok((token, lifetime))
    }
}

/// `Basic <base64(user:secret)>`.
fn basic_authorization(user: &str, secret: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{secret}"))
    )
}

/// Checks that `target` is a reachable registry and, when it has a
/// credential, that the credential is accepted.
pub async fn ping(target: &Target<'_>) -> Result<(), Unhealthy> {
    tokio::time::timeout(PING_TIMEOUT, ping_now(target))
        .await
        .map_err(|_| {
            Unhealthy(format!(
                "{}: no answer within {PING_TIMEOUT:?}",
                target.base
            ))
        })?
}

async fn ping_now(target: &Target<'_>) -> Result<(), Unhealthy> {
    let upstream = Upstream::new(target)?;
    let url = format!("{}/v2/", target.base);
    let first = upstream.get(&url, None).await?;
    let refused = |status: StatusCode| Unhealthy(format!("{url} answered {status}"));
    if first.status.is_success() {
        return Ok(());
    }
    let Some((user, secret)) = target.credential else {
        return match first.status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Ok(()),
            status => Err(refused(status)),
        };
    };
    if first.status != StatusCode::UNAUTHORIZED {
        return Err(refused(first.status));
    }
    let basic = basic_authorization(user, secret);
    let challenges = challenge::parse(
        first
            .headers
            .get_all(header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    let authorization = if let Some(bearer) = challenges.iter().find(|c| c.scheme == "bearer") {
        format!(
            "Bearer {}",
            upstream.token(bearer, Some(&basic), None).await?.0
        )
    } else if challenges.iter().any(|c| c.scheme == "basic") {
        basic
    } else {
        return Err(Unhealthy(format!(
            "{url}: no Bearer or Basic challenge to answer"
        )));
    };
    let second = upstream.get(&url, Some(&authorization)).await?;
    if second.status.is_success() {
        Ok(())
    } else {
        Err(Unhealthy(format!(
            "{url} refused the credential ({})",
            second.status
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_resolve() {
        assert_eq!(origin("https://h:5000/v2/"), "https://h:5000");
        assert_eq!(origin("http://h"), "http://h");
        assert_eq!(
            resolve("https://h:5000/v2/", "/v2/x").as_deref(),
            Some("https://h:5000/v2/x")
        );
        assert_eq!(
            resolve("https://h/v2/", "http://o/v2/").as_deref(),
            Some("http://o/v2/")
        );
        assert_eq!(resolve("https://h/v2/", "//o/v2/"), None);
        assert_eq!(resolve("https://h/v2/", "x"), None);
    }
}
