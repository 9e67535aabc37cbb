//! Where the S3 client's keys come from: the keys Berth was given
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, or their
//! `_FILE` variants), or else AWS's standard credential chain as reqsign
//! implements it (shared profile, SSO and `credential_process`, web identity
//! as EKS's IAM roles for service accounts set it up, the ECS task role, EC2
//! instance metadata). Temporary keys are renewed before they expire: from
//! [`REFRESH_AHEAD`] before, in the background while the current ones still
//! sign; a request waits only for keys that are missing or expired.
//!
//! The chain's own HTTP requests to STS go out through the S3 client's
//! connections, so proxies and `AWS_CA_BUNDLE` apply to them too; those to
//! link-local agents (EC2 instance metadata, the ECS and EKS Pod Identity
//! credential endpoints) never go through a proxy;
//! `AWS_ENDPOINT_URL_STS` sends STS calls to another endpoint (a VPC endpoint,
//! or an S3-compatible server's own STS).

use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Uri;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use reqsign_aws_core::{Credential, DefaultCredentialProvider};
use reqsign_core::{
    CommandExecute, CommandOutput, Context, FileRead, HttpSend, OsEnv, ProvideCredential,
};

use super::S3Error;

/// How long before temporary keys expire they are renewed.
pub const REFRESH_AHEAD: Duration = Duration::from_secs(5 * 60);
/// The least time between two renewals ahead of expiry.
const RENEWAL_INTERVAL: Duration = Duration::from_secs(30);
/// Keys this close to expiry are not used any more.
const EXPIRY_MARGIN: Duration = Duration::from_secs(10);
/// How long a credential service (STS, ECS) may take to answer.
const SERVICE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long EC2 instance metadata may take (it answers at once on EC2, never elsewhere).
const METADATA_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest answer of a credential service read.
const MAX_ANSWER: usize = 1 << 20;

/// A key pair and, for temporary keys, the session token.
#[derive(Clone, PartialEq, Eq)]
pub struct Keys {
    /// The access key id.
    pub access_key: String,
    /// The secret access key.
    pub secret_key: String,
    /// A temporary credential's session token.
    pub session_token: Option<String>,
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keys")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Keys, the ones given or the chain's current ones.
pub(super) enum Credentials {
    Given(Arc<Keys>),
    Chain(Arc<Chain>),
}

impl Credentials {
    /// The keys to sign a request with now.
    pub async fn keys(&self) -> Result<Arc<Keys>, S3Error> {
        match self {
            Credentials::Given(keys) => Ok(keys.clone()),
            Credentials::Chain(chain) => chain.keys().await,
        }
    }
}

/// Something that renews keys: AWS's chain, or a test's own.
pub(super) trait Renew: Send + Sync + 'static {
    fn renew(&self) -> futures_util::future::BoxFuture<'_, Result<Option<Credential>, String>>;
}

/// AWS's default chain, with its context.
pub(super) struct AwsChain {
    provider: DefaultCredentialProvider,
    context: Context,
}

impl AwsChain {
    pub fn new(
        http: Client<HttpsConnector<berth_net::Connector>, Full<Bytes>>,
        sts_endpoint: Option<String>,
    ) -> Result<Self, S3Error> {
        let direct = Client::builder(TokioExecutor::new()).build(
            berth_net::direct_connector(berth_net::Trust::Platform).map_err(S3Error::Setup)?,
        );
        let context = Context::new()
            .with_env(OsEnv)
            .with_file_read(Files)
            .with_command_execute(Commands)
            .with_http_send(Services {
                http,
                direct,
                sts_endpoint,
            });
        Ok(Self {
            provider: DefaultCredentialProvider::new(),
            context,
        })
    }
}

impl Renew for AwsChain {
    fn renew(&self) -> futures_util::future::BoxFuture<'_, Result<Option<Credential>, String>> {
        Box::pin(async move {
            self.provider
                .provide_credential(&self.context)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// The current keys of a [`Renew`] and their expiry.
pub(super) struct Chain {
    source: Box<dyn Renew>,
    current: RwLock<Option<Current>>,
    /// Held while renewing: one renewal at a time.
    renewing: tokio::sync::Mutex<()>,
    /// When a renewal ahead of expiry was last started: a source that keeps
    /// handing out keys close to their expiry is asked at most every
    /// [`RENEWAL_INTERVAL`], not at every request.
    ahead: std::sync::Mutex<Option<std::time::Instant>>,
}

#[derive(Clone)]
struct Current {
    keys: Arc<Keys>,
    expires: Option<SystemTime>,
}

impl Chain {
    pub fn new(source: impl Renew) -> Arc<Self> {
        Arc::new(Self {
            source: Box::new(source),
            current: RwLock::new(None),
            renewing: tokio::sync::Mutex::new(()),
            ahead: std::sync::Mutex::new(None),
        })
    }

    /// The current keys; renewed first when missing or expired, in the
    /// background when they expire within [`REFRESH_AHEAD`].
    pub async fn keys(self: &Arc<Self>) -> Result<Arc<Keys>, S3Error> {
        let now = SystemTime::now();
        if let Some(current) = self.current() {
            match current.expires {
                None => return Ok(current.keys),
                Some(expires) if expires > now + REFRESH_AHEAD => return Ok(current.keys),
                Some(expires) if expires > now + EXPIRY_MARGIN => {
                    if !self.may_renew_ahead() {
                        return Ok(current.keys);
                    }
                    let chain = self.clone();
                    tokio::spawn(async move {
                        if let Err(e) = chain.renew(false).await {
                            tracing::warn!(error = %e, "renewing the S3 credentials failed; the current ones are used until they expire");
                        }
                    });
                    return Ok(current.keys);
                }
                Some(_) => {}
            }
        }
        self.renew(true).await
    }

    /// Whether a renewal ahead of expiry may start now (none did within
    /// [`RENEWAL_INTERVAL`]); notes that one does.
    fn may_renew_ahead(&self) -> bool {
        let mut last = self.ahead.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|at| at.elapsed() < RENEWAL_INTERVAL) {
            return false;
        }
        *last = Some(std::time::Instant::now());
        true
    }

    fn current(&self) -> Option<Current> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Renews the keys unless another renewal did meanwhile. `wait`: wait for
    /// a renewal under way; else leave it to that one.
    async fn renew(&self, wait: bool) -> Result<Arc<Keys>, S3Error> {
        let _turn = if wait {
            self.renewing.lock().await
        } else {
            match self.renewing.try_lock() {
                Ok(turn) => turn,
                Err(_) => return self.current().map(|c| c.keys).ok_or_else(no_credentials),
            }
        };
        if let Some(current) = self.current()
            && current
                .expires
                .is_none_or(|expires| expires > SystemTime::now() + REFRESH_AHEAD)
        {
            return Ok(current.keys);
        }
        let credential = self
            .source
            .renew()
            .await
            .map_err(S3Error::Credentials)?
            .ok_or_else(no_credentials)?;
        let current = Current {
            keys: Arc::new(Keys {
                access_key: credential.access_key_id,
                secret_key: credential.secret_access_key,
                session_token: credential.session_token.filter(|t| !t.is_empty()),
            }),
            expires: credential.expires_in.map(|t| t.as_system_time()),
        };
        if let Some(expires) = current.expires {
            let left = expires
                .duration_since(SystemTime::now())
                .unwrap_or_default();
            tracing::info!(access_key = %current.keys.access_key, expires_in_s = left.as_secs(), "S3 credentials renewed");
        }
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(current.clone());
        Ok(current.keys)
    }
}

fn no_credentials() -> S3Error {
    S3Error::Credentials(
        "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or their _FILE \
         variants), a profile (AWS_PROFILE, ~/.aws), web identity (AWS_ROLE_ARN and \
         AWS_WEB_IDENTITY_TOKEN_FILE), or run with an ECS task role or an EC2 instance profile \
         (what each source said is logged as a warning)"
            .into(),
    )
}

/// Files the chain reads (profiles, the web identity token): read afresh each time.
#[derive(Debug)]
struct Files;

impl FileRead for Files {
    async fn file_read(&self, path: &str) -> reqsign_core::Result<Vec<u8>> {
        tokio::fs::read(path)
            .await
            .map_err(|e| reqsign_core::Error::unexpected(format!("cannot read {path}: {e}")))
    }
}

/// A profile's `credential_process`.
#[derive(Debug)]
struct Commands;

impl CommandExecute for Commands {
    async fn command_execute<'a>(
        &'a self,
        program: &'a str,
        args: &'a [&'a str],
    ) -> reqsign_core::Result<CommandOutput> {
        let mut command = std::process::Command::new(program);
        command.args(args);
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .map_err(|e| reqsign_core::Error::unexpected(e.to_string()))?
            .map_err(|e| reqsign_core::Error::unexpected(format!("cannot run {program}: {e}")))?;
        Ok(CommandOutput {
            status: output.status.code().unwrap_or(-1),
            stdout: output.stdout,
            stderr: output.stderr,
        })
    }
}

/// The chain's requests to STS, ECS and instance metadata.
struct Services {
    http: Client<HttpsConnector<berth_net::Connector>, Full<Bytes>>,
    /// For link-local hosts: no proxy.
    direct: Client<HttpsConnector<berth_net::Connector>, Full<Bytes>>,
    sts_endpoint: Option<String>,
}

impl fmt::Debug for Services {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Services")
            .field("sts_endpoint", &self.sts_endpoint)
            .finish()
    }
}

impl HttpSend for Services {
    async fn http_send(
        &self,
        request: hyper::Request<Bytes>,
    ) -> reqsign_core::Result<hyper::Response<Bytes>> {
        let (mut parts, body) = request.into_parts();
        if let Some(endpoint) = &self.sts_endpoint
            && parts.uri.host().is_some_and(is_sts_host)
        {
            parts.uri = redirect(&parts.uri, endpoint)?;
        }
        let timeout = if parts.uri.host().is_some_and(is_metadata_host) {
            METADATA_TIMEOUT
        } else {
            SERVICE_TIMEOUT
        };
        let client = if parts.uri.host().is_some_and(is_link_local) {
            &self.direct
        } else {
            &self.http
        };
        let uri = parts.uri.clone();
        let request = hyper::Request::from_parts(parts, Full::new(body));
        let exchange = async {
            let response = client.request(request).await.map_err(|e| {
                reqsign_core::Error::unexpected(format!("{uri}: {e}")).set_retryable(true)
            })?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| reqsign_core::Error::unexpected(format!("{uri}: {e}")))?
                .to_bytes();
            Ok(hyper::Response::from_parts(parts, body))
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| {
            reqsign_core::Error::unexpected(format!(
                "{uri}: no answer within {}s",
                timeout.as_secs()
            ))
            .set_retryable(true)
        })?
    }
}

/// `sts.amazonaws.com`, `sts.eu-west-1.amazonaws.com`, `sts.cn-north-1.amazonaws.com.cn`.
fn is_sts_host(host: &str) -> bool {
    host.starts_with("sts.")
        && (host.ends_with(".amazonaws.com") || host.ends_with(".amazonaws.com.cn"))
}

/// EC2 instance metadata's addresses.
fn is_metadata_host(host: &str) -> bool {
    host == "169.254.169.254" || host == "[fd00:ec2::254]"
}

/// A link-local address (`169.254.0.0/16`, `fe80::/10`, EC2's `fd00:ec2::254`):
/// reachable from this host only, never through a proxy.
fn is_link_local(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_link_local(),
        Ok(std::net::IpAddr::V6(ip)) => {
            (ip.segments()[0] & 0xffc0) == 0xfe80 || host == "fd00:ec2::254"
        }
        Err(_) => false,
    }
}

/// `uri`'s path and query at `endpoint` (`http(s)://HOST[:PORT]`).
fn redirect(uri: &Uri, endpoint: &str) -> reqsign_core::Result<Uri> {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    format!("{}{path}", endpoint.trim_end_matches('/'))
        .parse()
        .map_err(|e| {
            reqsign_core::Error::config_invalid(format!("AWS_ENDPOINT_URL_STS {endpoint:?}: {e}"))
        })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use reqsign_core::time::Timestamp;

    use super::*;

    /// Hands out keys `AK1`, `AK2`, ... valid for `lifetime`.
    struct Counter {
        calls: Arc<AtomicU32>,
        lifetime: Duration,
    }

    impl Renew for Counter {
        fn renew(&self) -> futures_util::future::BoxFuture<'_, Result<Option<Credential>, String>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            let lifetime = self.lifetime;
            Box::pin(async move {
                Ok(Some(Credential {
                    access_key_id: format!("AK{n}"),
                    secret_access_key: "secret".into(),
                    session_token: Some("token".into()),
                    expires_in: Some(Timestamp::now() + lifetime),
                }))
            })
        }
    }

    #[tokio::test]
    async fn keys_are_renewed_ahead_of_expiry_without_waiting() {
        let calls = Arc::new(AtomicU32::new(0));
        let chain = Chain::new(Counter {
            calls: calls.clone(),
            lifetime: REFRESH_AHEAD + Duration::from_secs(60),
        });
        assert_eq!(chain.keys().await.unwrap().access_key, "AK1");
        assert_eq!(chain.keys().await.unwrap().access_key, "AK1");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "fresh keys are kept");

        // Keys within REFRESH_AHEAD of expiry still sign while new ones come.
        let chain = Chain::new(Counter {
            calls: calls.clone(),
            lifetime: REFRESH_AHEAD - Duration::from_secs(60),
        });
        calls.store(0, Ordering::SeqCst);
        assert_eq!(chain.keys().await.unwrap().access_key, "AK1");
        assert_eq!(chain.keys().await.unwrap().access_key, "AK1");
        for _ in 0..100 {
            if chain.current().unwrap().keys.access_key != "AK1" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(chain.keys().await.unwrap().access_key, "AK2");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "keys still close to expiry are not asked again at once"
        );
    }

    #[tokio::test]
    async fn expired_keys_are_never_used() {
        let calls = Arc::new(AtomicU32::new(0));
        let chain = Chain::new(Counter {
            calls: calls.clone(),
            lifetime: EXPIRY_MARGIN / 2,
        });
        assert_eq!(chain.keys().await.unwrap().access_key, "AK1");
        assert_eq!(chain.keys().await.unwrap().access_key, "AK2");
        assert_eq!(chain.keys().await.unwrap().access_key, "AK3");
    }

    #[test]
    fn credential_agents_are_reached_directly() {
        assert!(is_link_local("169.254.169.254"));
        assert!(is_link_local("169.254.170.23"));
        assert!(is_link_local("[fd00:ec2::254]"));
        assert!(is_link_local("[fe80::1]"));
        assert!(!is_link_local("127.0.0.1"));
        assert!(!is_link_local("sts.amazonaws.com"));
    }

    #[test]
    fn sts_calls_go_to_the_endpoint_named() {
        assert!(is_sts_host("sts.amazonaws.com"));
        assert!(is_sts_host("sts.eu-west-1.amazonaws.com"));
        assert!(!is_sts_host("s3.amazonaws.com"));
        let uri: Uri = "https://sts.amazonaws.com/?Action=AssumeRoleWithWebIdentity"
            .parse()
            .unwrap();
        assert_eq!(
            redirect(&uri, "http://127.0.0.1:5000/")
                .unwrap()
                .to_string(),
            "http://127.0.0.1:5000/?Action=AssumeRoleWithWebIdentity"
        );
    }
}
