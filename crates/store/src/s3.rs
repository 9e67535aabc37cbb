//! A minimal S3 client for blob storage.
//!
//! Requests are signed with AWS Signature Version 4 (headers; bodies travel as
//! `UNSIGNED-PAYLOAD` with a `Content-MD5` the server checks), with the keys of
//! [`credentials`] (given, or AWS's credential chain), and sent over the
//! workspace's hyper-util client: pooled keep-alive connections through the
//! environment's proxies (`berth_net`), rustls with ring and the platform's roots, or
//! the CA bundle `AWS_CA_BUNDLE` names. Throttled and failed requests are retried
//! with exponential backoff and full jitter, as the AWS SDKs' standard mode does. An S3-compatible endpoint is addressed path-style
//! (`http://HOST:PORT/BUCKET/KEY`), AWS itself virtual-hosted style
//! (`https://BUCKET.s3.REGION.amazonaws.com/KEY`). Keys are relative to the configured
//! prefix. Object bodies are streamed, never buffered whole.

mod config;
mod credentials;
mod response;
mod sign;
#[cfg(test)]
mod tests;
mod xml;

pub use config::S3Config;
pub use credentials::Keys;

use credentials::{AwsChain, Chain, Credentials};

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use bytes::Bytes;
use futures_util::Stream;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use md5::{Digest as _, Md5};

use response::{body_stream, chain, content_length, drain, parse_entries, read_xml, status_error};
use sign::{Canonical, EMPTY_SHA256, Signer, Stamp, UNSIGNED_PAYLOAD};

/// How long an idle pooled connection is kept (below the usual server-side limits).
const IDLE_TIMEOUT: Duration = Duration::from_secs(15);
/// How many times a request the server failed or throttled is sent at most
/// (the SDKs' standard mode).
const ATTEMPTS: u32 = 3;
/// The longest pause before a second try of a failed request; doubled before each next one.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// As [`RETRY_PAUSE`], for a throttled request (429, `SlowDown`, ...).
const THROTTLED_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause between two tries (the SDKs' 20 seconds).
const MAX_PAUSE: Duration = Duration::from_secs(20);
/// The largest XML document (a listing page, an error) read into memory.
const MAX_XML: usize = 16 << 20;
/// Bodies at least this large are hashed on a blocking thread, off the runtime's workers.
const HASH_INLINE_MAX: usize = 256 << 10;
/// The longest a presigned URL may be valid (SigV4's limit: seven days).
const MAX_PRESIGN: Duration = Duration::from_secs(7 * 24 * 3600);

/// One object of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectEntry {
    /// The key, relative to the configured prefix.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written.
    pub last_modified: SystemTime,
}

/// The bytes of an object (or of a range of it), as they arrive.
pub struct ObjectBody {
    /// How many bytes this response carries.
    pub len: u64,
    /// The bytes; a body that ends short of `len` (or runs past it) ends with an error.
    pub stream: Pin<Box<dyn Stream<Item = Result<Bytes, io::Error>> + Send>>,
}

impl fmt::Debug for ObjectBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectBody")
            .field("len", &self.len)
            .finish()
    }
}

/// Why an S3 call failed.
#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    /// The HTTP client could not be set up (TLS configuration).
    #[error("S3 client setup failed: {0}")]
    Setup(String),
    /// The server could not be reached, the connection broke, or the request could not
    /// be built.
    #[error("S3 request failed: {0}")]
    Transport(String),
    /// The server refused the request: its HTTP status and S3 error code and message
    /// (status 200 for errors S3 reports inside a successful CopyObject or
    /// CompleteMultipartUpload response).
    #[error("S3 answered {status} {code}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// S3's error code (`NoSuchKey`, `SignatureDoesNotMatch`, ...); for answers
        /// without an error document (HEAD), the status's reason phrase without spaces.
        code: String,
        /// S3's message.
        message: String,
    },
    /// The answer is not one S3 gives (a missing header, unreadable XML).
    #[error("unexpected S3 response: {0}")]
    BadResponse(String),
    /// No keys to sign with: none given and the credential chain found none or failed.
    #[error("{0}")]
    Credentials(String),
}

impl S3Error {
    /// True when the key (or multipart upload) does not exist; a missing bucket is not
    /// "not found" but an error of the configuration.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Status { status: 404, code, .. } if code != "NoSuchBucket")
    }
}

/// An S3 client for one bucket and prefix; cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub struct S3Client(Arc<Inner>);

struct Inner {
    config: S3Config,
    http: Client<HttpsConnector<berth_net::Connector>, Full<Bytes>>,
    credentials: Credentials,
    /// `http://127.0.0.1:9000` or `https://BUCKET.s3.REGION.amazonaws.com`.
    origin: String,
    /// The `Host` header (the origin's authority).
    host: String,
    /// The path of the bucket: `/BUCKET` (path-style) or empty (virtual-hosted).
    bucket_path: String,
}

impl fmt::Debug for S3Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("S3Client").field(&self.describe()).finish()
    }
}

/// One request to sign and send.
struct Call<'a> {
    method: Method,
    /// The key relative to the prefix; `None` addresses the bucket.
    key: Option<&'a str>,
    query: &'a [(&'a str, &'a str)],
    /// Extra headers (lowercase names), signed too.
    headers: Vec<(&'static str, String)>,
    body: Bytes,
}

impl<'a> Call<'a> {
    fn new(method: Method, key: Option<&'a str>) -> Self {
        Self {
            method,
            key,
            query: &[],
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }
}

impl S3Client {
    /// A client for `config`'s bucket. Nothing is sent yet (see [`S3Client::head_bucket`]).
    pub fn new(config: S3Config) -> Result<Self, S3Error> {
        let trust = match &config.ca_bundle {
            None => berth_net::Trust::Platform,
            Some(path) => {
                let pem = std::fs::read_to_string(path).map_err(|e| {
                    S3Error::Setup(format!("cannot read the CA bundle {path}: {e}"))
                })?;
                berth_net::Trust::Roots(
                    berth_net::ca_roots(&pem)
                        .map_err(|e| S3Error::Setup(format!("the CA bundle {path}: {e}")))?,
                )
            }
        };
        let https = berth_net::https_connector(trust).map_err(S3Error::Setup)?;
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .build(https);
        let credentials = match &config.keys {
            Some(keys) => Credentials::Given(Arc::new(keys.clone())),
            None => Credentials::Chain(Chain::new(AwsChain::new(
                http.clone(),
                config.sts_endpoint.clone(),
            )?)),
        };
        let (origin, bucket_path) = match &config.endpoint {
            Some(endpoint) => (
                endpoint.clone(),
                format!("/{}", sign::encode(&config.bucket)),
            ),
            None => (
                format!(
                    "https://{}.s3.{}.amazonaws.com",
                    config.bucket, config.region
                ),
                String::new(),
            ),
        };
        let host = origin
            .split_once("://")
            .map_or(origin.as_str(), |(_, authority)| authority)
            .to_string();
        Ok(Self(Arc::new(Inner {
            config,
            http,
            credentials,
            origin,
            host,
            bucket_path,
        })))
    }

    /// `s3://BUCKET/PREFIX at ORIGIN`, without secrets.
    pub fn describe(&self) -> String {
        let config = &self.0.config;
        let mut out = format!("s3://{}", config.bucket);
        if !config.prefix.is_empty() {
            out.push('/');
            out.push_str(&config.prefix);
        }
        format!("{out} at {}", self.0.origin)
    }

    /// Checks the bucket is reachable with these credentials.
    pub async fn head_bucket(&self) -> Result<(), S3Error> {
        let response = self.send_ok(Call::new(Method::HEAD, None)).await?;
        drain(response).await
    }

    /// Creates the bucket (in the client's region); a bucket that exists and
    /// is ours is no error. For set-up tools and tests.
    pub async fn create_bucket(&self) -> Result<(), S3Error> {
        match self.send_ok(Call::new(Method::PUT, None)).await {
            Ok(response) => drain(response).await,
            Err(S3Error::Status { code, .. }) if code == "BucketAlreadyOwnedByYou" => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Writes `body` at `key` in one request (S3 takes up to 5 GiB this way).
    pub async fn put_object(&self, key: &str, body: Bytes) -> Result<(), S3Error> {
        let response = self
            .send_ok(Call {
                body,
                ..Call::new(Method::PUT, Some(key))
            })
            .await?;
        drain(response).await
    }

    /// Starts a multipart upload to `key`; returns its upload id.
    pub async fn create_multipart(&self, key: &str) -> Result<String, S3Error> {
        let response = self
            .send_ok(Call {
                query: &[("uploads", "")],
                ..Call::new(Method::POST, Some(key))
            })
            .await?;
        let document = read_xml(response).await?;
        document
            .text("UploadId")
            .filter(|id| !id.is_empty())
            .map(str::to_string)
            .ok_or_else(|| S3Error::BadResponse("no UploadId in CreateMultipartUpload".into()))
    }

    /// Uploads part `number` (1 to 10000; every part but the last at least 5 MiB) of an
    /// upload; returns its ETag as the server gave it, quotes included.
    pub async fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        number: u32,
        body: Bytes,
    ) -> Result<String, S3Error> {
        let number = number.to_string();
        let response = self
            .send_ok(Call {
                query: &[("partNumber", &number), ("uploadId", upload_id)],
                body,
                ..Call::new(Method::PUT, Some(key))
            })
            .await?;
        let etag = response
            .headers()
            .get(header::ETAG)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| S3Error::BadResponse("no ETag on UploadPart".into()))?;
        drain(response).await?;
        Ok(etag)
    }

    /// Joins the uploaded `parts` (number, ETag), in ascending order, into the object.
    pub async fn complete_multipart(
        &self,
        key: &str,
        upload_id: &str,
        parts: &[(u32, String)],
    ) -> Result<(), S3Error> {
        let response = self
            .send_ok(Call {
                query: &[("uploadId", upload_id)],
                body: Bytes::from(xml::complete_body(parts)),
                ..Call::new(Method::POST, Some(key))
            })
            .await?;
        read_xml(response).await.map(drop)
    }

    /// Abandons a multipart upload and frees its parts; an upload that no longer exists
    /// (404 `NoSuchUpload`, as S3 answers) is not an error.
    pub async fn abort_multipart(&self, key: &str, upload_id: &str) -> Result<(), S3Error> {
        let call = Call {
            query: &[("uploadId", upload_id)],
            ..Call::new(Method::DELETE, Some(key))
        };
        match self.send_ok(call).await {
            Ok(response) => drain(response).await,
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Copies `from` to `to` inside the bucket, server-side (up to 5 GiB).
    pub async fn copy_object(&self, from: &str, to: &str) -> Result<(), S3Error> {
        let source = format!(
            "{}/{}",
            self.0.config.bucket,
            sign::encode_path(&self.0.full_key(from))
        );
        let response = self
            .send_ok(Call {
                headers: vec![("x-amz-copy-source", source)],
                ..Call::new(Method::PUT, Some(to))
            })
            .await?;
        read_xml(response).await.map(drop)
    }

    /// The size of `key`; `None` when there is no such key.
    pub async fn head_object(&self, key: &str) -> Result<Option<u64>, S3Error> {
        let response = match self.send_ok(Call::new(Method::HEAD, Some(key))).await {
            Ok(response) => response,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let len = content_length(&response)?;
        drain(response).await?;
        Ok(Some(len))
    }

    /// `range`: (first byte, length); None = whole object. None when no such key.
    ///
    /// A range running past the end of the object is cut at the end (`len` says how many
    /// bytes come); a range starting past it is an error (416 `InvalidRange`).
    pub async fn get_object(
        &self,
        key: &str,
        range: Option<(u64, u64)>,
    ) -> Result<Option<ObjectBody>, S3Error> {
        let mut call = Call::new(Method::GET, Some(key));
        if let Some((first, len)) = range {
            if len == 0 {
                return Ok(self.head_object(key).await?.map(|_| ObjectBody {
                    len: 0,
                    stream: Box::pin(futures_util::stream::empty()),
                }));
            }
            let last = first.saturating_add(len - 1);
            call.headers
                .push(("range", format!("bytes={first}-{last}")));
        }
        let response = match self.send_ok(call).await {
            Ok(response) => response,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        if range.is_some() && response.status() != StatusCode::PARTIAL_CONTENT {
            return Err(S3Error::BadResponse(format!(
                "a ranged GET answered {} instead of 206",
                response.status()
            )));
        }
        let len = content_length(&response)?;
        Ok(Some(ObjectBody {
            len,
            stream: body_stream(response.into_body(), len),
        }))
    }

    /// Deletes `key`; a key that does not exist is not an error.
    pub async fn delete_object(&self, key: &str) -> Result<(), S3Error> {
        match self.send_ok(Call::new(Method::DELETE, Some(key))).await {
            Ok(response) => drain(response).await,
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every object under `prefix` (ListObjectsV2, following continuation tokens).
    pub async fn list(&self, prefix: &str) -> Result<Vec<ObjectEntry>, S3Error> {
        Ok(self.list_pages(prefix, None).await?.0)
    }

    /// [`S3Client::list`] with pages of at most `max_keys` keys; also says how many pages
    /// it took.
    async fn list_pages(
        &self,
        prefix: &str,
        max_keys: Option<u32>,
    ) -> Result<(Vec<ObjectEntry>, usize), S3Error> {
        let own = &self.0.config.prefix;
        let strip = if own.is_empty() { 0 } else { own.len() + 1 };
        let full_prefix = self.0.full_key(prefix);
        let max_keys = max_keys.map(|n| n.to_string());
        let mut entries = Vec::new();
        let mut token: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut query = vec![("list-type", "2"), ("prefix", full_prefix.as_str())];
            if let Some(token) = &token {
                query.push(("continuation-token", token));
            }
            if let Some(max_keys) = &max_keys {
                query.push(("max-keys", max_keys));
            }
            let response = self
                .send_ok(Call {
                    query: &query,
                    ..Call::new(Method::GET, None)
                })
                .await?;
            let page = read_xml(response).await?;
            pages += 1;
            parse_entries(&page, &full_prefix, strip, &mut entries)?;
            if page.text("IsTruncated") != Some("true") {
                break;
            }
            match page.text("NextContinuationToken") {
                Some(next) if !next.is_empty() && token.as_deref() != Some(next) => {
                    token = Some(next.to_string());
                }
                _ => {
                    return Err(S3Error::BadResponse(
                        "a truncated listing without a new NextContinuationToken".into(),
                    ));
                }
            }
        }
        Ok((entries, pages))
    }

    /// A presigned GET URL valid for `expires` (query-string SigV4, X-Amz-Expires; at
    /// least one second, at most seven days).
    /// Temporary keys cut the URL's life short: it stops working when they expire.
    pub async fn presign_get(&self, key: &str, expires: Duration) -> Result<String, S3Error> {
        let inner = &*self.0;
        let keys = inner.credentials.keys().await?;
        let path = inner.object_path(key);
        let seconds = expires.clamp(Duration::from_secs(1), MAX_PRESIGN).as_secs();
        let query = inner.signer(&keys).presign_query(
            &Stamp::now(),
            &inner.host,
            &path,
            seconds,
            keys.session_token.as_deref(),
        );
        Ok(format!("{}{path}?{query}", inner.origin))
    }

    /// Signs and sends `call`; an answer other than 2xx becomes [`S3Error::Status`].
    /// A request the server failed or throttled ([`retry_pause`]), or an
    /// idempotent one whose connection failed, is sent again after a pause,
    /// [`ATTEMPTS`] times in all, as S3 asks of its clients.
    async fn send_ok(&self, call: Call<'_>) -> Result<Response<Incoming>, S3Error> {
        let idempotent = call.method != Method::POST;
        let mut attempt = 1;
        loop {
            let result = self.send_once(&call).await;
            let pause = match &result {
                Err(error) if attempt < ATTEMPTS => retry_pause(error, idempotent, attempt),
                _ => None,
            };
            let Some(pause) = pause else {
                return result;
            };
            tracing::debug!(error = %result.err().map(|e| e.to_string()).unwrap_or_default(), attempt, pause_ms = pause.as_millis() as u64, "S3 request tried again");
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    /// One try of [`S3Client::send_ok`].
    async fn send_once(&self, call: &Call<'_>) -> Result<Response<Incoming>, S3Error> {
        let inner = &*self.0;
        let keys = inner.credentials.keys().await?;
        let path = match call.key {
            Some(key) => inner.object_path(key),
            None if inner.bucket_path.is_empty() => "/".to_string(),
            None => inner.bucket_path.clone(),
        };
        let query = sign::canonical_query(call.query);
        let stamp = Stamp::now();
        let mut headers = call.headers.clone();
        headers.push(("host", inner.host.clone()));
        headers.push(("x-amz-date", stamp.time.clone()));
        let payload = if call.body.is_empty() {
            EMPTY_SHA256
        } else {
            headers.push(("content-md5", content_md5(call.body.clone()).await?));
            UNSIGNED_PAYLOAD
        };
        headers.push(("x-amz-content-sha256", payload.to_string()));
        if let Some(token) = &keys.session_token {
            headers.push(("x-amz-security-token", token.clone()));
        }
        headers.sort_by_key(|(name, _)| *name);
        let signed: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect();
        let authorization = inner.signer(&keys).authorization(
            &stamp,
            &Canonical {
                method: call.method.as_str(),
                path: &path,
                query: &query,
                headers: &signed,
                payload,
            },
        );
        let uri = if query.is_empty() {
            format!("{}{path}", inner.origin)
        } else {
            format!("{}{path}?{query}", inner.origin)
        };
        let mut request = Request::builder()
            .method(call.method.clone())
            .uri(uri)
            .header(header::AUTHORIZATION, authorization)
            .header(
                header::USER_AGENT,
                concat!("berth/", env!("CARGO_PKG_VERSION")),
            );
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let request = request
            .body(Full::new(call.body.clone()))
            .map_err(|e| S3Error::Transport(format!("cannot build the request: {e}")))?;
        let response = inner
            .http
            .request(request)
            .await
            .map_err(|e| S3Error::Transport(chain(&e)))?;
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(status_error(response).await)
        }
    }
}

impl Inner {
    fn signer<'a>(&'a self, keys: &'a Keys) -> Signer<'a> {
        Signer {
            access_key: &keys.access_key,
            secret_key: &keys.secret_key,
            region: &self.config.region,
        }
    }

    /// `PREFIX/KEY`, or `KEY` without a prefix.
    fn full_key(&self, key: &str) -> String {
        if self.config.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}/{key}", self.config.prefix)
        }
    }

    /// The encoded request path of `key`.
    fn object_path(&self, key: &str) -> String {
        format!(
            "{}/{}",
            self.bucket_path,
            sign::encode_path(&self.full_key(key))
        )
    }
}

/// The pause before trying a request again after `error` on try `attempt`
/// (1, 2, ...), or `None` when it is not tried again: a random duration up to
/// [`RETRY_PAUSE`] (a server error, or a broken connection of an idempotent
/// request) or [`THROTTLED_PAUSE`] (throttling) times 2^(attempt - 1), at most
/// [`MAX_PAUSE`]: the AWS SDKs' exponential backoff with full jitter.
fn retry_pause(error: &S3Error, idempotent: bool, attempt: u32) -> Option<Duration> {
    let base = match error {
        S3Error::Status { status, code, .. } if is_throttling(*status, code) => THROTTLED_PAUSE,
        S3Error::Status {
            status: 500 | 502 | 503 | 504,
            ..
        } => RETRY_PAUSE,
        S3Error::Transport(_) if idempotent => RETRY_PAUSE,
        _ => return None,
    };
    let ceiling = (base * 2u32.saturating_pow(attempt.saturating_sub(1))).min(MAX_PAUSE);
    Some(ceiling.mul_f64(rand::random::<f64>()))
}

/// An answer that asks the client to slow down: 429, or one of the error
/// codes the SDKs treat as throttling (S3's `SlowDown` comes with a 503).
fn is_throttling(status: u16, code: &str) -> bool {
    status == 429
        || matches!(
            code,
            "SlowDown"
                | "Throttling"
                | "ThrottlingException"
                | "ThrottledException"
                | "RequestThrottled"
                | "RequestThrottledException"
                | "TooManyRequestsException"
                | "RequestLimitExceeded"
                | "BandwidthLimitExceeded"
                | "EC2ThrottledException"
                | "PriorRequestNotComplete"
                | "ProvisionedThroughputExceededException"
                | "TransactionInProgressException"
        )
}

/// Base64 of the MD5 of `body`, computed off the runtime's workers when it is large.
async fn content_md5(body: Bytes) -> Result<String, S3Error> {
    let small = body.len() < HASH_INLINE_MAX;
    let digest = move || base64::engine::general_purpose::STANDARD.encode(Md5::digest(&body));
    if small {
        return Ok(digest());
    }
    tokio::task::spawn_blocking(digest)
        .await
        .map_err(|e| S3Error::Transport(format!("hashing the body failed: {e}")))
}
