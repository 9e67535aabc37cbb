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
//!
//! Every request to another registry runs under its [`Deadlines`]: the
//! connection, each answer's headers (per redirect), a small document's
//! body (a token, a manifest, a page of a listing), and each silence of a
//! body streamed in or out. A peer that goes silent fails the step with
//! the reason (`no data from <host> for 30 s`) instead of holding it.

pub mod cache;
mod challenge;
mod remote;
pub mod tls;

pub use berth_net::Deadlines;
pub use remote::{BlobStream, FetchedManifest, ManifestHead, Remote, Unavailable};

use challenge::Challenge;

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use base64::Engine;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
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
    /// How long each step of a request may take.
    pub deadlines: Deadlines,
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
    deadlines: Deadlines,
}

/// The `host[:port]` of an absolute URL, as log lines name a peer.
fn host(url: &str) -> &str {
    let origin = origin(url);
    origin.find("://").map_or(origin, |i| &origin[i + 3..])
}

/// Why a peer's silence ended a step.
fn silent(url: &str, deadline: Duration) -> String {
    format!(
        "no data from {} for {}",
        host(url),
        berth_net::spoken(deadline)
    )
}

/// The whole of a small document's `body` (a token, a manifest, a page of a
/// listing): at most `limit` bytes, arrived within `deadline`; `what` names
/// it in the reason why not.
async fn read_document(
    body: hyper::body::Incoming,
    limit: usize,
    deadline: Duration,
    url: &str,
    what: &str,
) -> Result<Bytes, String> {
    let read = Limited::new(body, limit).collect();
    match tokio::time::timeout(deadline, read).await {
        Err(_) => Err(format!(
            "{}: {what} did not arrive whole within {}",
            host(url),
            berth_net::spoken(deadline)
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(format!(
            "{}: {what} is longer than {limit} bytes",
            host(url)
        )),
        Ok(Err(e)) => Err(format!("{}: reading {what}: {e}", host(url))),
        Ok(Ok(body)) => Ok(body.to_bytes()),
    }
}

/// `body` (of blob `digest`, from `url`) ended by an error once it passes
/// `limit` bytes or sends nothing for `idle`: a peer sending for ever or
/// stalling neither fills a disk nor holds the step.
pub(crate) fn bounded<S>(
    body: S,
    url: &str,
    digest: &str,
    limit: u64,
    idle: Duration,
) -> impl Stream<Item = Result<Bytes, String>> + Send + 'static + use<S>
where
    S: Stream<Item = Result<Bytes, String>> + Send + 'static,
{
    let (url, digest) = (url.to_string(), digest.to_string());
    futures_util::stream::unfold(Some((body.boxed(), 0u64)), move |state| {
        let (url, digest) = (url.clone(), digest.clone());
        async move {
            let (mut body, received) = state?;
            let piece = match tokio::time::timeout(idle, body.next()).await {
                Ok(None) => return None,
                Ok(Some(piece)) => piece,
                Err(_) => Err(format!("{} (blob {digest})", silent(&url, idle))),
            };
            match piece.map(|bytes| (received + bytes.len() as u64, bytes)) {
                Ok((received, bytes)) if received <= limit => {
                    Some((Ok(bytes), Some((body, received))))
                }
                Ok(_) => Some((Err(too_long(&url, &digest, limit)), None)),
                Err(why) => Some((Err(why), None)),
            }
        }
    })
}

/// Why a blob body of more than `limit` bytes is refused.
pub(crate) fn too_long(url: &str, digest: &str, limit: u64) -> String {
    format!(
        "{} sends more than the {limit} bytes blob {digest} may have",
        host(url)
    )
}

/// When a request whose body streams out last moved: a byte of its body
/// went, or (once `done`) its body ended.
#[derive(Debug)]
struct Moved {
    at: Mutex<(Instant, bool)>,
}

impl Moved {
    fn new(done: bool) -> Arc<Self> {
        Arc::new(Self {
            at: Mutex::new((Instant::now(), done)),
        })
    }

    fn note(&self, done: bool) {
        *self.at.lock().unwrap_or_else(|e| e.into_inner()) = (Instant::now(), done);
    }

    /// When the exchange is overdue: `idle` after the last byte sent while
    /// the body goes out, `answer` after its end.
    fn due(&self, deadlines: &Deadlines) -> (Instant, Duration) {
        let (at, done) = *self.at.lock().unwrap_or_else(|e| e.into_inner());
        let wait = if done {
            deadlines.answer
        } else {
            deadlines.idle
        };
        (at + wait, wait)
    }
}

/// A request body that notes in [`Moved`] each piece it hands out and its end.
struct Watched {
    inner: Body,
    moved: Arc<Moved>,
}

impl hyper::body::Body for Watched {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, std::io::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(_))) => self.moved.note(self.inner.is_end_stream()),
            Poll::Ready(_) => self.moved.note(true),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
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
        let connector = tls::connector(
            target.insecure,
            target.ca_certificate,
            target.deadlines.connect,
        )
        .map_err(Unhealthy)?;
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            deadlines: target.deadlines,
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
            let answer = self.deadlines.answer;
            let response = tokio::time::timeout(answer, self.client.request(request))
                .await
                .map_err(|_| {
                    Unhealthy(format!(
                        "{url}: no answer within {}",
                        berth_net::spoken(answer)
                    ))
                })?
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
    /// `authorization`, `headers` and `body`: failed when the body stops
    /// going out for the idle deadline (the peer takes nothing), or no
    /// answer comes within the answer deadline after its end.
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
        let moved = Moved::new(hyper::body::Body::is_end_stream(&body));
        let body = Watched {
            inner: body,
            moved: Arc::clone(&moved),
        }
        .boxed_unsync();
        let request = request
            .body(body)
            .map_err(|e| Unhealthy(format!("invalid request to {url}: {e}")))?;
        let exchange = self.client.request(request);
        tokio::pin!(exchange);
        let response = loop {
            let (due, waited) = moved.due(&self.deadlines);
            tokio::select! {
                response = &mut exchange => break response,
                () = tokio::time::sleep_until(due.into()) => {
                    if moved.due(&self.deadlines).0 <= Instant::now() {
                        return Err(Unhealthy(format!("{url}: {}", silent(url, waited))));
                    }
                }
            }
        }
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
        let body = read_document(
            answer.body,
            MAX_TOKEN_BODY,
            self.deadlines.answer,
            &url,
            "the token",
        )
        .await
        .map_err(Unhealthy)?;
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

    fn body(
        pieces: &[&'static [u8]],
    ) -> impl Stream<Item = Result<Bytes, String>> + Send + 'static {
        let pieces: Vec<_> = pieces.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        futures_util::stream::iter(pieces)
    }

    async fn read(stream: impl Stream<Item = Result<Bytes, String>>) -> Result<Vec<u8>, String> {
        let mut read = Vec::new();
        let mut stream = std::pin::pin!(stream);
        while let Some(piece) = stream.next().await {
            read.extend_from_slice(&piece?);
        }
        Ok(read)
    }

    #[tokio::test]
    async fn a_blob_body_ends_at_its_limit_or_when_upstream_stalls() {
        let (url, digest) = ("http://peer:5000/v2/", "sha256:0");
        let idle = Duration::from_millis(50);
        let exact = bounded(body(&[b"abc", b"def"]), url, digest, 6, idle);
        assert_eq!(read(exact).await.unwrap(), b"abcdef");
        let longer = bounded(body(&[b"abc", b"defg"]), url, digest, 6, idle);
        assert_eq!(read(longer).await.unwrap_err(), too_long(url, digest, 6));
        let stalled = body(&[b"abc"]).chain(futures_util::stream::pending());
        let why = read(bounded(stalled, url, digest, 6, idle))
            .await
            .unwrap_err();
        assert_eq!(why, "no data from peer:5000 for 50 ms (blob sha256:0)");
    }

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
        assert_eq!(host("https://h:5000/v2/x"), "h:5000");
        assert_eq!(host("http://h"), "h");
    }
}
