//! Pulls from an upstream registry for a proxy-cache project: manifest
//! checks (`HEAD`, cheap for rate limits), manifests and blob streams of one
//! repository at a time. One [`Remote`] per registry keeps its connections
//! and its Bearer tokens (per scope, until shortly before they expire).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode, header};
use berth_domain::oci::Digest;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;

use super::challenge::{self, Challenge};
use super::{Answer, Target, Unhealthy, Upstream, basic_authorization, read_document};
/// A token is dropped this long before it expires (or at half its life, if shorter).
const TOKEN_MARGIN: Duration = Duration::from_secs(10);
/// How long a registry that asked for Basic is sent it unasked.
const BASIC_LIFETIME: Duration = Duration::from_secs(3600);
/// How many scopes' tokens one registry keeps.
const MAX_TOKENS: usize = 1024;

/// What a manifest request accepts: every manifest and index type Berth stores.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// Why the upstream gave no answer to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// Its status, when it answered (429 when rate-limited).
    pub status: Option<StatusCode>,
    /// In words.
    pub reason: String,
}

impl Unavailable {
    fn unreachable(reason: String) -> Self {
        Self {
            status: None,
            reason,
        }
    }

    /// Whether the upstream refused for its rate limit.
    pub fn rate_limited(&self) -> bool {
        self.status == Some(StatusCode::TOO_MANY_REQUESTS)
    }
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// What upstream says of a manifest, from a `HEAD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestHead {
    /// `Docker-Content-Digest`, when sent.
    pub digest: Option<String>,
    /// `Content-Type`, when sent.
    pub media_type: Option<String>,
    /// `Content-Length`, when sent.
    pub length: Option<u64>,
}

/// A manifest as upstream sent it.
#[derive(Debug, Clone)]
pub struct FetchedManifest {
    /// Its exact bytes.
    pub body: Bytes,
    /// Its `Content-Type`.
    pub media_type: String,
}

/// A blob's body as it streams in.
pub struct BlobStream {
    /// Its length, when upstream says it.
    pub length: Option<u64>,
    /// The bytes: an error ends them once they pass the limit asked for,
    /// or when upstream sends nothing for the idle deadline.
    pub body: futures_util::stream::BoxStream<'static, Result<Bytes, String>>,
}

impl std::fmt::Debug for BlobStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobStream")
            .field("length", &self.length)
            .finish_non_exhaustive()
    }
}

/// An upstream registry pulled from.
pub struct Remote {
    http: Upstream,
    base: String,
    /// The Basic credential, when the registry has one.
    basic: Option<String>,
    /// `Authorization` values by scope, with when they stop being used.
    tokens: Mutex<HashMap<String, (String, Instant)>>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Remote {
    /// A client of `target`.
    pub fn new(target: &Target<'_>) -> Result<Self, Unhealthy> {
        Ok(Self {
            http: Upstream::new(target)?,
            base: target.base.clone(),
            basic: target
                .credential
                .map(|(user, secret)| basic_authorization(user, secret)),
            tokens: Mutex::new(HashMap::new()),
        })
    }

    /// Checks manifest `reference` of `repository`: `None` when upstream has none.
    pub async fn head_manifest(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<Option<ManifestHead>, Unavailable> {
        let path = format!("manifests/{reference}");
        let Some(answer) = self
            .request(Method::HEAD, repository, &path, Some(MANIFEST_ACCEPT))
            .await?
        else {
            return Ok(None);
        };
        let headers = &answer.headers;
        Ok(Some(ManifestHead {
            digest: text(headers, "docker-content-digest"),
            media_type: text(headers, header::CONTENT_TYPE.as_str()).filter(|t| !t.is_empty()),
            length: text(headers, header::CONTENT_LENGTH.as_str()).and_then(|l| l.parse().ok()),
        }))
    }

    /// Manifest `reference` of `repository`, at most `max_bytes` long:
    /// `None` when upstream has none.
    pub async fn manifest(
        &self,
        repository: &str,
        reference: &str,
        max_bytes: usize,
    ) -> Result<Option<FetchedManifest>, Unavailable> {
        let path = format!("manifests/{reference}");
        let Some(answer) = self
            .request(Method::GET, repository, &path, Some(MANIFEST_ACCEPT))
            .await?
        else {
            return Ok(None);
        };
        let media_type = text(&answer.headers, header::CONTENT_TYPE.as_str()).unwrap_or_default();
        let what = format!("manifest {repository}:{reference}");
        let body = read_document(
            answer.body,
            max_bytes,
            self.deadlines().answer,
            &self.base,
            &what,
        )
        .await
        .map_err(Unavailable::unreachable)?;
        Ok(Some(FetchedManifest { body, media_type }))
    }

    /// Blob `digest` of `repository`, streaming, of at most `limit` bytes:
    /// `None` when upstream has none.
    pub async fn blob(
        &self,
        repository: &str,
        digest: &str,
        limit: u64,
    ) -> Result<Option<BlobStream>, Unavailable> {
        let path = format!("blobs/{digest}");
        let Some(answer) = self.request(Method::GET, repository, &path, None).await? else {
            return Ok(None);
        };
        let length =
            text(&answer.headers, header::CONTENT_LENGTH.as_str()).and_then(|l| l.parse().ok());
        let from = format!("reading blob {digest} from {}", super::host(&self.base));
        let data = answer
            .body
            .into_data_stream()
            .map_err(move |e| format!("{from}: {e}"));
        let body = super::bounded(data, &self.base, digest, limit, self.deadlines().idle).boxed();
        Ok(Some(BlobStream { length, body }))
    }

    /// How long each step of a request to this registry may take.
    pub fn deadlines(&self) -> &super::Deadlines {
        &self.http.deadlines
    }

    /// The base URL of the registry's distribution API.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends `method` to `<base>/v2/<repository>/<path>`, signing in when
    /// asked: a successful answer, `None` for 404, else why not.
    async fn request(
        &self,
        method: Method,
        repository: &str,
        path: &str,
        accept: Option<&str>,
    ) -> Result<Option<Answer>, Unavailable> {
        self.request_as(method, repository, path, accept, "pull")
            .await
    }

    /// [`Remote::request`] with the token scope's `actions` (`pull`, `pull,push`).
    async fn request_as(
        &self,
        method: Method,
        repository: &str,
        path: &str,
        accept: Option<&str>,
        actions: &str,
    ) -> Result<Option<Answer>, Unavailable> {
        let url = format!("{}/v2/{repository}/{path}", self.base);
        let scope = format!("repository:{repository}:{actions}");
        self.request_scoped(method, &url, &scope, accept).await
    }

    /// Sends `method` to `url`, signing in for `scope` when asked.
    async fn request_scoped(
        &self,
        method: Method,
        url: &str,
        scope: &str,
        accept: Option<&str>,
    ) -> Result<Option<Answer>, Unavailable> {
        let url = url.to_string();
        let scope = scope.to_string();
        let kept = self.kept_authorization(&scope);
        let mut answer = self
            .send(method.clone(), &url, kept.as_deref(), accept)
            .await?;
        if answer.status == StatusCode::UNAUTHORIZED {
            let challenges = challenge::parse(
                answer
                    .headers
                    .get_all(header::WWW_AUTHENTICATE)
                    .iter()
                    .filter_map(|v| v.to_str().ok()),
            );
            if let Some(authorization) = self.sign_in(&challenges, &scope).await? {
                answer = self
                    .send(method, &url, Some(&authorization), accept)
                    .await?;
            }
        }
        match answer.status {
            status if status.is_success() => Ok(Some(answer)),
            StatusCode::NOT_FOUND => Ok(None),
            status => Err(Unavailable {
                status: Some(status),
                reason: format!("{url} answered {status}"),
            }),
        }
    }

    async fn send(
        &self,
        method: Method,
        url: &str,
        authorization: Option<&str>,
        accept: Option<&str>,
    ) -> Result<Answer, Unavailable> {
        self.http
            .send(method, url, authorization, accept)
            .await
            .map_err(|why| Unavailable::unreachable(why.0))
    }

    /// Whether the registry has blob `digest` in `repository`; signs in for
    /// pushing to it on the way (what the pushes that follow use).
    pub async fn has_blob(&self, repository: &str, digest: &str) -> Result<bool, Unavailable> {
        let path = format!("blobs/{digest}");
        Ok(self
            .request_as(Method::HEAD, repository, &path, None, PUSH)
            .await?
            .is_some())
    }

    /// The digest of the registry's manifest `reference` of `repository`
    /// (`None` when it has none), asked with a push-scoped token: the sign-in
    /// that the pushes which follow use.
    pub async fn manifest_digest_for_push(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<Option<String>, Unavailable> {
        let path = format!("manifests/{reference}");
        Ok(self
            .request_as(Method::HEAD, repository, &path, Some(MANIFEST_ACCEPT), PUSH)
            .await?
            .and_then(|answer| text(&answer.headers, "docker-content-digest")))
    }

    /// Asks the registry to mount blob `digest` from `from` into `repository`
    /// (no bytes sent); `false` when it would not (the bytes must be pushed).
    pub async fn mount_blob(
        &self,
        repository: &str,
        digest: &str,
        from: &str,
    ) -> Result<bool, Unavailable> {
        let query = serde_urlencoded::to_string([("mount", digest), ("from", from)])
            .map_err(|e| Unavailable::unreachable(e.to_string()))?;
        let url = format!("{}/v2/{repository}/blobs/uploads/?{query}", self.base);
        let answer = self
            .send_pushing(Method::POST, repository, &url, &[], super::empty_body())
            .await?;
        Ok(answer.status == StatusCode::CREATED)
    }

    /// Pushes blob `digest` (`length` bytes of `body`) to `repository` in one
    /// request (a monolithic upload: a session, then its one PUT).
    pub async fn push_blob(
        &self,
        repository: &str,
        digest: &str,
        length: u64,
        body: super::Body,
    ) -> Result<(), Unavailable> {
        let url = format!("{}/v2/{repository}/blobs/uploads/", self.base);
        let started = self
            .send_pushing(Method::POST, repository, &url, &[], super::empty_body())
            .await?;
        if started.status != StatusCode::ACCEPTED {
            return Err(refused(&url, started.status));
        }
        let location = text(&started.headers, header::LOCATION.as_str())
            .and_then(|l| super::resolve(&url, &l))
            .ok_or_else(|| Unavailable::unreachable(format!("{url}: no upload location")))?;
        let separator = if location.contains('?') { '&' } else { '?' };
        let put = format!("{location}{separator}digest={}", encode(digest));
        let headers = [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, length.to_string()),
        ];
        // Bounded by the idle deadline while the blob goes out (the answer
        // comes once the whole blob is sent), by the answer one after.
        let scope = format!("repository:{repository}:{PUSH}");
        let done = self
            .http
            .send_body(
                Method::PUT,
                &put,
                self.kept_authorization(&scope).as_deref(),
                &headers,
                body,
            )
            .await
            .map_err(|why| Unavailable::unreachable(why.0))?;
        if done.status != StatusCode::CREATED {
            return Err(refused(&put, done.status));
        }
        Ok(())
    }

    /// Pushes manifest `body` of `media_type` to `repository` as `reference`
    /// (a tag, or its digest).
    pub async fn push_manifest(
        &self,
        repository: &str,
        reference: &str,
        media_type: &str,
        body: Bytes,
    ) -> Result<(), Unavailable> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let headers = [
            (header::CONTENT_TYPE, media_type.to_string()),
            (header::CONTENT_LENGTH, body.len().to_string()),
        ];
        let body = http_body_util::Full::new(body)
            .map_err(|never| match never {})
            .boxed_unsync();
        let done = self
            .send_pushing(Method::PUT, repository, &url, &headers, body)
            .await?;
        if !done.status.is_success() {
            return Err(refused(&url, done.status));
        }
        Ok(())
    }

    /// Every repository the registry lists (`/v2/_catalog`, page after page).
    pub async fn catalog(&self) -> Result<Vec<String>, Unavailable> {
        #[derive(serde::Deserialize)]
        struct Catalog {
            #[serde(default)]
            repositories: Option<Vec<String>>,
        }
        let first = format!("{}/v2/_catalog?n={LIST_PAGE}", self.base);
        let mut names = Vec::new();
        for page in self.pages::<Catalog>(&first, "registry:catalog:*").await? {
            names.extend(page.repositories.unwrap_or_default());
        }
        Ok(names)
    }

    /// The tags of `repository` (`/v2/<name>/tags/list`, page after page);
    /// none when the registry does not know it.
    pub async fn tags(&self, repository: &str) -> Result<Vec<String>, Unavailable> {
        #[derive(serde::Deserialize)]
        struct Tags {
            #[serde(default)]
            tags: Option<Vec<String>>,
        }
        let first = format!("{}/v2/{repository}/tags/list?n={LIST_PAGE}", self.base);
        let scope = format!("repository:{repository}:pull");
        let mut tags = Vec::new();
        for page in self.pages::<Tags>(&first, &scope).await? {
            tags.extend(page.tags.unwrap_or_default());
        }
        Ok(tags)
    }

    /// The JSON pages of a listing from `first` on, following `Link: <...>; rel="next"`.
    async fn pages<T: serde::de::DeserializeOwned>(
        &self,
        first: &str,
        scope: &str,
    ) -> Result<Vec<T>, Unavailable> {
        let mut pages = Vec::new();
        let mut read = 0;
        let mut next = Some(first.to_string());
        while let Some(url) = next.take() {
            if pages.len() >= MAX_LIST_PAGES {
                return Err(Unavailable::unreachable(format!(
                    "{first}: more than {MAX_LIST_PAGES} pages"
                )));
            }
            let Some(answer) = self
                .request_scoped(Method::GET, &url, scope, Some("application/json"))
                .await?
            else {
                break;
            };
            next = text(&answer.headers, header::LINK.as_str())
                .and_then(|link| next_link(&link))
                .and_then(|link| super::resolve(&url, &link));
            let body = read_document(
                answer.body,
                MAX_LIST_BODY,
                self.deadlines().answer,
                &url,
                "a page of a listing",
            )
            .await
            .map_err(Unavailable::unreachable)?;
            read += body.len();
            if read > MAX_LIST_TOTAL {
                return Err(Unavailable::unreachable(format!(
                    "{first}: a listing of more than {MAX_LIST_TOTAL} bytes"
                )));
            }
            pages.push(
                serde_json::from_slice(&body)
                    .map_err(|e| Unavailable::unreachable(format!("{url}: not a listing: {e}")))?,
            );
        }
        Ok(pages)
    }

    /// The digests of the manifests the registry lists as referrers of
    /// `digest` (the OCI 1.1 referrers API); none when it has no such API.
    /// A listed digest that is not one fails the listing.
    pub async fn referrers(
        &self,
        repository: &str,
        digest: &str,
    ) -> Result<Vec<Digest>, Unavailable> {
        #[derive(serde::Deserialize)]
        struct Descriptor {
            digest: String,
        }
        #[derive(serde::Deserialize)]
        struct Referrers {
            #[serde(default)]
            manifests: Vec<Descriptor>,
        }
        let path = format!("referrers/{digest}");
        let answer = match self
            .request(
                Method::GET,
                repository,
                &path,
                Some("application/vnd.oci.image.index.v1+json"),
            )
            .await
        {
            Ok(Some(answer)) => answer,
            // No such API (a 404 above, or a 400/405 from an older registry).
            Ok(None) => return Ok(Vec::new()),
            Err(why) if why.status.is_some_and(|s| s.is_client_error()) => return Ok(Vec::new()),
            Err(why) => return Err(why),
        };
        let what = format!("the referrers of {repository}@{digest}");
        let body = read_document(
            answer.body,
            MAX_LIST_BODY,
            self.deadlines().answer,
            &self.base,
            &what,
        )
        .await
        .map_err(Unavailable::unreachable)?;
        let listed: Referrers = serde_json::from_slice(&body).unwrap_or(Referrers {
            manifests: Vec::new(),
        });
        listed
            .manifests
            .into_iter()
            .map(|listed| {
                Digest::parse(&listed.digest).map_err(|_| {
                    Unavailable::unreachable(format!(
                        "{}: {what} name {:?}, which is not a digest",
                        super::host(&self.base),
                        listed.digest
                    ))
                })
            })
            .collect()
    }

    /// Deletes manifest `digest` of `repository`; `false` when the registry
    /// did not have it.
    pub async fn delete_manifest(
        &self,
        repository: &str,
        digest: &str,
    ) -> Result<bool, Unavailable> {
        let path = format!("manifests/{digest}");
        Ok(self
            .request_as(Method::DELETE, repository, &path, None, "delete")
            .await?
            .is_some())
    }

    /// Makes sure the Harbor (or Berth) at this registry has project `name`,
    /// creating it private when it has none (Harbor's API, with the Basic
    /// credential).
    pub async fn ensure_harbor_project(&self, name: &str) -> Result<(), Unavailable> {
        let url = format!("{}/api/v2.0/projects", self.base);
        let body = serde_json::json!({"project_name": name, "metadata": {"public": "false"}});
        let body = http_body_util::Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed_unsync();
        let headers = [(header::CONTENT_TYPE, "application/json".to_string())];
        let answer = self
            .http
            .send_body(Method::POST, &url, self.basic.as_deref(), &headers, body)
            .await
            .map_err(|why| Unavailable::unreachable(why.0))?;
        match answer.status {
            StatusCode::CREATED | StatusCode::CONFLICT => Ok(()),
            status => Err(Unavailable {
                status: Some(status),
                reason: format!("creating project {name} at {url}: it answered {status}"),
            }),
        }
    }

    /// Sends a request that changes `repository` once, with the push token
    /// a [`Remote::has_blob`] or [`Remote::has_manifest`] got (a body is sent
    /// once, so it is not sent again after a challenge).
    async fn send_pushing(
        &self,
        method: Method,
        repository: &str,
        url: &str,
        headers: &[(header::HeaderName, String)],
        body: super::Body,
    ) -> Result<Answer, Unavailable> {
        let scope = format!("repository:{repository}:{PUSH}");
        let authorization = self.kept_authorization(&scope);
        self.http
            .send_body(method, url, authorization.as_deref(), headers, body)
            .await
            .map_err(|why| Unavailable::unreachable(why.0))
    }

    /// The `Authorization` kept for `scope`: a token that has not expired,
    /// or the Basic credential of a registry that asked for it.
    fn kept_authorization(&self, scope: &str) -> Option<String> {
        let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        match tokens.get(scope) {
            Some((value, until)) if Instant::now() < *until => Some(value.clone()),
            _ => None,
        }
    }

    /// Answers a 401's challenges: a token for `scope` from the Bearer
    /// challenge's service (kept until it expires), or the Basic credential.
    async fn sign_in(
        &self,
        challenges: &[Challenge],
        scope: &str,
    ) -> Result<Option<String>, Unavailable> {
        let (authorization, lifetime) =
            if let Some(bearer) = challenges.iter().find(|c| c.scheme == "bearer") {
                let (token, lifetime) = self
                    .http
                    .token(bearer, self.basic.as_deref(), Some(scope))
                    .await
                    .map_err(|why| Unavailable {
                        status: Some(StatusCode::UNAUTHORIZED),
                        reason: why.0,
                    })?;
                (format!("Bearer {token}"), lifetime)
            } else if challenges.iter().any(|c| c.scheme == "basic")
                && let Some(basic) = &self.basic
            {
                (basic.clone(), BASIC_LIFETIME)
            } else {
                return Ok(None);
            };
        self.keep(scope, &authorization, lifetime);
        Ok(Some(authorization))
    }

    fn keep(&self, scope: &str, authorization: &str, lifetime: Duration) {
        let margin = TOKEN_MARGIN.min(lifetime / 2);
        let until = Instant::now() + lifetime - margin;
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if tokens.len() >= MAX_TOKENS {
            let now = Instant::now();
            tokens.retain(|_, (_, until)| *until > now);
            if tokens.len() >= MAX_TOKENS {
                tokens.clear();
            }
        }
        tokens.insert(scope.to_string(), (authorization.to_string(), until));
    }
}

/// How many names one page of a listing asks for.
const LIST_PAGE: usize = 1000;
/// How many pages a listing may have.
const MAX_LIST_PAGES: usize = 10_000;
/// The largest page of a listing read.
const MAX_LIST_BODY: usize = 16 << 20;
/// The most a whole listing (every page of a catalog, or of a repository's
/// tags) may weigh: a peer answering page after page for ever neither
/// fills the memory nor holds the run.
const MAX_LIST_TOTAL: usize = 64 << 20;

/// The target of a `Link` header's `rel="next"`.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        params.contains("rel=\"next\"").then(|| {
            target
                .trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string()
        })
    })
}

/// The actions of a pushing token's scope.
const PUSH: &str = "pull,push";

/// An answer that is not what a push expects.
fn refused(url: &str, status: StatusCode) -> Unavailable {
    Unavailable {
        status: Some(status),
        reason: format!("{url} answered {status}"),
    }
}

/// A query value, percent-encoded (`sha256:...` keeps nothing special but `:`).
fn encode(value: &str) -> String {
    serde_urlencoded::to_string([("v", value)])
        .map(|pair| pair[2..].to_string())
        .unwrap_or_default()
}

/// A header's value as text.
fn text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
