//! Proxy-cache projects: a pull of `<project>/<repository>` that the cache
//! cannot answer is fetched from the project's upstream registry, answered,
//! and stored as ordinary content (listed, counted, collected, quota'd).
//!
//! - A tag is checked upstream with a `HEAD` at most once per TTL; an
//!   unchanged digest is served from the cache. A digest is never checked
//!   again (its bytes cannot change).
//! - When upstream is down or rate-limited, what is cached is served; with
//!   nothing cached the client gets 503 `UNAVAILABLE` (429 `TOOMANYREQUESTS`).
//! - A manifest fetched upstream is answered at once; a background task
//!   fetches its blobs (the ones the client did not ask for too) and then
//!   stores it, tagged when it was pulled by tag, so a later pull by digest
//!   finds the artifact of that tag. An index is stored with the platforms
//!   pulled so far and linked to each further one as it is cached.
//! - Only a `GET` (a pull) fetches: a manifest `HEAD` the cache cannot answer
//!   is answered from upstream's `HEAD`, so anyone may check an image without
//!   making the cache download its layers.
//! - A blob is read from upstream only up to the size its manifest declares
//!   ([`MAX_BLOB_BYTES`] at most, and when no manifest fetched here declared
//!   it), and only while upstream keeps sending: a fetch of a longer or
//!   stalled body fails and stores nothing.
//! - Concurrent fetches of one manifest or blob go upstream once: the blob's
//!   bytes are spooled to an unlinked temporary file that every waiting client
//!   reads as it grows, while the same stream is hashed and stored. A
//!   client is never sent a blob's last byte before the digest checked out.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, ETAG};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use berth_domain::model::Project;
use berth_domain::oci::manifest::Descriptor;
use berth_domain::oci::{Digest, Manifest, Reference};
use berth_store::repo::manifests::{Pull, PutManifest, Signatures, StoredManifest};
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use super::blobs::DOCKER_CONTENT_DIGEST;
use super::manifests::{
    MAX_MANIFEST_BYTES, manifest_digest, manifest_response, manifest_unknown, note_pull,
    serve_stored,
};
use super::{Ctx, RegistryError, RegistryResult, oci};
use crate::error::{ApiError, ErrorKind, OciCode};
use crate::service::content::{self, manifest_record};
use crate::state::AppState;
use crate::upstream::ManifestHead;
use crate::upstream::cache::*;

/// A manifest GET or HEAD in a proxy project.
pub(super) struct ManifestPull<'a> {
    /// The project (already authorized).
    pub project: &'a Project,
    /// Its upstream registry.
    pub registry_id: i64,
    /// The repository.
    pub name: &'a str,
    /// What was asked for.
    pub reference: &'a Reference,
    /// GET (a pull) rather than HEAD.
    pub with_body: bool,
}

/// `GET`/`HEAD /v2/<proxy project>/<repository>/manifests/<reference>`:
/// `stored` is the cached manifest (and whether its project requires
/// signatures), if any.
pub(super) async fn get_manifest(
    ctx: &Ctx,
    pull: ManifestPull<'_>,
    stored: Option<(StoredManifest, Signatures)>,
) -> RegistryResult<Response> {
    let cache = &ctx.state.registry.proxy;
    let reference = pull.reference.to_string();
    let key = |reference: &str| {
        (
            pull.project.id,
            pull.name.to_string(),
            reference.to_string(),
        )
    };
    let serve = |(manifest, required): (StoredManifest, Signatures)| {
        serve_stored(
            ctx,
            pull.project,
            pull.name,
            &reference,
            manifest,
            required,
            pull.with_body,
        )
    };
    // What the cache answers without asking upstream: a digest, and a tag
    // checked within the TTL (stored, or still being stored).
    let known = match pull.reference {
        Reference::Digest(digest) => Some(digest.to_string()),
        Reference::Tag(tag) => cache.fresh(&key(tag)),
    };
    if let Some(digest) = known {
        match stored {
            Some(stored) if stored.0.digest == digest => return serve(stored).await,
            Some(_) => {}
            None => {
                if let Some(fetched) = cache.pending(&key(&digest)) {
                    return Ok(serve_fetched(ctx, &pull, &fetched));
                }
            }
        }
    }
    let upstream = cache
        .upstream(&ctx.state, pull.project, pull.registry_id, pull.name)
        .await?;
    if let (Reference::Tag(tag), Some((manifest, _))) = (pull.reference, &stored) {
        match cache.head(&upstream, key(tag)).await {
            Ok(Some(head)) if head.digest.as_deref() == Some(manifest.digest.as_str()) => {
                cache.mark_checked(key(tag), &manifest.digest);
                return serve(stored.expect("matched")).await;
            }
            Ok(Some(head)) => {
                if let Some(answer) = head_answer(&pull, &head) {
                    return Ok(answer);
                }
            }
            // Gone upstream: the cached copy, where the project says so.
            Ok(None) if upstream.local_on_not_found => {
                return serve(stored.expect("matched")).await;
            }
            Ok(None) => return Err(manifest_unknown(pull.name, tag)),
            Err(why) => {
                tracing::warn!(repository = pull.name, %why, "upstream unavailable: serving the cached manifest");
                return serve(stored.expect("matched")).await;
            }
        }
    }
    if !pull.with_body && stored.is_none() {
        // A HEAD is no pull: upstream's HEAD answers it, and nothing is fetched.
        match cache.head(&upstream, key(&reference)).await {
            Ok(Some(head)) => {
                if let Some(answer) = head_answer(&pull, &head) {
                    return Ok(answer);
                }
            }
            Ok(None) => return Err(manifest_unknown(pull.name, &reference)),
            Err(why) => return Err(unavailable(&why).into()),
        }
    }
    let fetch = async {
        // A fetch that ended a moment ago (before this one started) answers too.
        let known = match pull.reference {
            Reference::Digest(digest) => Some(digest.to_string()),
            Reference::Tag(tag) => cache.fresh(&key(tag)),
        };
        if let Some(fetched) = known.and_then(|digest| cache.pending(&key(&digest))) {
            return Ok(fetched);
        }
        fetch_manifest(&upstream, pull.reference).await
    };
    let fetched = cache.manifest_flights.run(key(&reference), fetch).await;
    let fetched = match (fetched, stored) {
        (Ok(fetched), Some(stored)) if fetched.digest.as_str() == stored.0.digest => {
            cache.mark_checked(key(&reference), &stored.0.digest);
            return serve(stored).await;
        }
        (Ok(fetched), _) => fetched,
        (Err(Miss::Unavailable(why)), Some(stored)) => {
            tracing::warn!(repository = pull.name, %why, "upstream unavailable: serving the cached manifest");
            return serve(stored).await;
        }
        (Err(miss), _) => return Err(miss_error(&miss, pull.name, &reference)),
    };
    if !pull.with_body {
        // A HEAD upstream's HEAD could not answer: answered, not stored.
        return Ok(serve_fetched(ctx, &pull, &fetched));
    }
    cache.declare(pull.project.id, pull.name, &fetched.manifest);
    // The first to hold this fetch stores it.
    let first = {
        let mut pending = lock(&cache.pending);
        let digest_key = key(fetched.digest.as_str());
        match pending.get(&digest_key) {
            Some(held) if Arc::ptr_eq(held, &fetched) => false,
            _ => {
                pending.insert(digest_key, Arc::clone(&fetched));
                true
            }
        }
    };
    let tag = match pull.reference {
        Reference::Tag(tag) => {
            cache.mark_checked(key(tag), fetched.digest.as_str());
            Some(tag.clone())
        }
        Reference::Digest(_) => None,
    };
    if let Some(children) = index_children(&fetched.manifest) {
        let mut parents = lock(&cache.parents);
        if parents.len() + children.len() > MAX_PARENTS {
            parents.clear();
        }
        for child in children {
            parents.insert(key(child.digest.as_str()), Arc::clone(&fetched));
        }
    }
    if first {
        tokio::spawn(keep(
            ctx.state.clone(),
            pull.project.clone(),
            pull.name.to_string(),
            upstream,
            Arc::clone(&fetched),
            tag,
            pull.with_body,
        ));
    }
    Ok(serve_fetched(ctx, &pull, &fetched))
}

/// Answers a manifest `HEAD` with what upstream's `HEAD` said, when it said
/// all a client is told (digest, type and length) of a manifest the cache
/// would take: the digest asked for, no longer than a manifest may be.
/// `None` for a GET, which fetches.
fn head_answer(pull: &ManifestPull<'_>, head: &ManifestHead) -> Option<Response> {
    if pull.with_body {
        return None;
    }
    let digest = Digest::parse(head.digest.as_deref()?).ok()?;
    if let Reference::Digest(asked) = pull.reference
        && *asked != digest
    {
        return None;
    }
    let length = head
        .length
        .filter(|&length| length <= MAX_MANIFEST_BYTES as u64)?;
    let media_type = head.media_type.as_deref()?;
    let mut response = manifest_response(Bytes::new(), media_type, digest.as_str(), false);
    response
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(length));
    Some(response)
}

/// The children of an index (`None` for an image).
fn index_children(manifest: &Manifest) -> Option<&[Descriptor]> {
    Some(manifest.children()).filter(|c| !c.is_empty())
}

/// Answers with a manifest fetched from upstream.
fn serve_fetched(ctx: &Ctx, pull: &ManifestPull<'_>, fetched: &Fetched) -> Response {
    if pull.with_body {
        note_pull(
            ctx,
            pull.project,
            pull.name,
            &pull.reference.to_string(),
            fetched.digest.as_str(),
        );
    }
    manifest_response(
        fetched.body.clone(),
        &fetched.media_type,
        fetched.digest.as_str(),
        pull.with_body,
    )
}

/// Fetches manifest `reference` from `upstream`, checking it is what was asked for.
async fn fetch_manifest(upstream: &Upstream, reference: &Reference) -> Result<Arc<Fetched>, Miss> {
    let _connection = upstream.connection().await;
    let fetched = upstream
        .remote
        .manifest(
            &upstream.repository,
            &reference.to_string(),
            MAX_MANIFEST_BYTES,
        )
        .await
        .map_err(Miss::Unavailable)?
        .ok_or(Miss::NotFound)?;
    let digest = manifest_digest(&fetched.body, reference);
    if let Reference::Digest(asked) = reference
        && *asked != digest
    {
        return Err(Miss::Invalid(format!(
            "the upstream sent a manifest of digest {digest} for {asked}"
        )));
    }
    let content_type = Some(fetched.media_type.as_str()).filter(|t| !t.is_empty());
    let manifest = Manifest::parse(&fetched.body, content_type).map_err(|err| {
        Miss::Invalid(format!("the upstream sent an invalid manifest: {}", err.0))
    })?;
    Ok(Arc::new(Fetched {
        digest,
        media_type: manifest.media_type.clone(),
        body: fetched.body,
        manifest,
    }))
}

/// The client's error for a fetch that found nothing.
fn miss_error(miss: &Miss, name: &str, reference: &str) -> RegistryError {
    match miss {
        Miss::NotFound => manifest_unknown(name, reference),
        Miss::Unavailable(why) => unavailable(why).into(),
        Miss::Invalid(why) => oci(ErrorKind::BadGateway, OciCode::Unknown, why).into(),
    }
}

/// Stores `fetched` in repository `name` once its blobs are (tagged `tag`,
/// with a pull noted when it was pulled), and links the index it belongs to.
async fn keep(
    state: AppState,
    project: Project,
    name: String,
    upstream: Upstream,
    fetched: Arc<Fetched>,
    tag: Option<String>,
    pulled: bool,
) {
    let cache = &state.registry.proxy;
    let key = (project.id, name.clone(), fetched.digest.to_string());
    if let Err(why) = store_fetched(&state, &project, &name, &upstream, &fetched, tag, pulled).await
    {
        tracing::warn!(repository = name, digest = %fetched.digest, %why, "caching a proxied manifest failed");
    }
    {
        let mut pending = lock(&cache.pending);
        if pending.get(&key).is_some_and(|f| Arc::ptr_eq(f, &fetched)) {
            pending.remove(&key);
        }
    }
    let parent = lock(&cache.parents).remove(&key);
    if let Some(parent) = parent
        && let Err(why) =
            store_fetched(&state, &project, &name, &upstream, &parent, None, false).await
    {
        tracing::warn!(repository = name, digest = %parent.digest, %why, "linking a proxied index failed");
    }
}

async fn store_fetched(
    state: &AppState,
    project: &Project,
    name: &str,
    upstream: &Upstream,
    fetched: &Fetched,
    tag: Option<String>,
    pulled: bool,
) -> Result<(), String> {
    let fetches: Vec<_> = fetched
        .manifest
        .blob_dependencies()
        .into_iter()
        .map(|blob| cache_blob(state, project, name, upstream, blob))
        .collect();
    let mut fetches = futures_util::stream::iter(fetches).buffer_unordered(PARALLEL_BLOBS);
    while let Some(done) = fetches.next().await {
        done?;
    }
    let mut record = manifest_record(
        state,
        &fetched.manifest,
        project.id,
        name,
        &fetched.digest,
        &fetched.body,
        tag.clone(),
    )
    .await;
    record.partial_children = true;
    let registry = state.store.registry();
    match content::put_fetched_manifest(state, &record)
        .await
        .map_err(|e| e.message)?
    {
        PutManifest::Stored(_) => {}
        PutManifest::MissingBlob(digest) => return Err(format!("blob {digest} is not cached")),
        PutManifest::MissingChild(digest) => return Err(format!("child {digest} is not cached")),
    }
    if pulled {
        // The first pull, answered from upstream, counts as any other.
        let reference =
            tag.map_or_else(|| Reference::Digest(fetched.digest.clone()), Reference::Tag);
        let found = registry
            .manifest_lookup(&project.name, name, &reference)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(manifest) = found.and_then(|f| f.manifest) {
            state.registry.record_pull(
                &state.store,
                Pull {
                    artifact_id: manifest.artifact_id,
                    tag_id: manifest.tag_id,
                    repository_id: manifest.repository_id,
                },
            );
        }
    }
    Ok(())
}

/// Waits until blob `blob` of `name` is cached (fetching it, no longer than
/// declared, unless a fetch is under way or it is there already).
async fn cache_blob(
    state: &AppState,
    project: &Project,
    name: &str,
    upstream: &Upstream,
    blob: &Descriptor,
) -> Result<(), String> {
    let digest = &blob.digest;
    if state
        .store
        .registry()
        .repository_blob(name, digest.as_str())
        .await
        .map_err(|e| e.to_string())?
        .is_some()
    {
        return Ok(());
    }
    let limit = declared_limit(blob);
    let flight =
        blob_flight(state, project.id, name, upstream, digest, limit).map_err(|e| e.to_string())?;
    let mut progress = flight.progress.clone();
    let end = progress
        .wait_for(|p| {
            matches!(
                p,
                Progress::Stored { .. }
                    | Progress::Cached { .. }
                    | Progress::Missing
                    | Progress::Failed(_)
            )
        })
        .await
        .map(|p| p.clone())
        .map_err(|_| "the blob fetch ended without a word".to_string())?;
    match end {
        Progress::Stored { .. } | Progress::Cached { .. } => Ok(()),
        Progress::Missing => Err(format!("the upstream has no blob {digest}")),
        Progress::Failed(miss) => Err(format!("{miss:?}")),
        Progress::Asking | Progress::Streaming { .. } => unreachable!("waited for the end"),
    }
}

/// The fetch of blob `digest` into repository `name`: the one under way, or
/// a new one reading at most `limit` bytes.
fn blob_flight(
    state: &AppState,
    project_id: i64,
    name: &str,
    upstream: &Upstream,
    digest: &Digest,
    limit: u64,
) -> io::Result<Arc<BlobFlight>> {
    let key = (project_id, name.to_string(), digest.to_string());
    let mut flights = lock(&state.registry.proxy.blob_flights);
    if let Some(flight) = flights.get(&key) {
        return Ok(Arc::clone(flight));
    }
    let spool = state.registry.proxy.spool()?;
    let writer = spool.try_clone()?;
    let (progress, watching) = watch::channel(Progress::Asking);
    let flight = Arc::new(BlobFlight {
        spool: Arc::new(spool),
        progress: watching,
    });
    flights.insert(key.clone(), Arc::clone(&flight));
    drop(flights);
    tokio::spawn(pump(
        state.clone(),
        key,
        upstream.clone(),
        (digest.clone(), limit),
        writer,
        progress,
    ));
    Ok(flight)
}

/// Fetches a blob into its spool and the store; the flight ends (and leaves
/// the map) with its outcome.
async fn pump(
    state: AppState,
    key: Key,
    upstream: Upstream,
    (digest, limit): (Digest, u64),
    spool: std::fs::File,
    progress: watch::Sender<Progress>,
) {
    let end = fetch_blob(&state, &key, &upstream, (&digest, limit), spool, &progress).await;
    match &end {
        Progress::Failed(miss) => {
            tracing::warn!(repository = key.1, %digest, ?miss, "fetching a proxied blob failed");
        }
        Progress::Stored { .. } | Progress::Cached { .. } => {
            state.registry.proxy.forget_declared(&key);
        }
        Progress::Asking | Progress::Streaming { .. } | Progress::Missing => {}
    }
    lock(&state.registry.proxy.blob_flights).remove(&key);
    progress.send_replace(end);
}

/// Fetches blob `digest`, of at most `limit` bytes, into `spool` and the store.
async fn fetch_blob(
    state: &AppState,
    key: &Key,
    upstream: &Upstream,
    (digest, limit): (&Digest, u64),
    spool: std::fs::File,
    progress: &watch::Sender<Progress>,
) -> Progress {
    // A fetch that ended a moment ago (before this one started) stored it.
    if let Ok(Some(blob)) = state
        .store
        .registry()
        .repository_blob(&key.1, digest.as_str())
        .await
    {
        return Progress::Cached {
            length: u64::try_from(blob.size).unwrap_or_default(),
        };
    }
    // Held while the blob streams: a download is a connection to upstream.
    let _connection = upstream.connection().await;
    let stream = match upstream
        .remote
        .blob(&upstream.repository, digest.as_str(), limit)
        .await
    {
        Ok(Some(stream)) => stream,
        Ok(None) => return Progress::Missing,
        Err(why) => return Progress::Failed(Miss::Unavailable(why)),
    };
    let length = stream.length;
    if let Some(length) = length
        && length > limit
    {
        return Progress::Failed(Miss::Invalid(crate::upstream::too_long(
            upstream.remote.base(),
            digest.as_str(),
            limit,
        )));
    }
    progress.send_replace(Progress::Streaming { written: 0, length });
    let spooled = spooled(
        throttled(stream.body, upstream.speed),
        spool,
        progress.clone(),
        length,
    );
    match state
        .store
        .content(&state.registry.blobs)
        .put(key.0, &key.1, digest, spooled)
        .await
    {
        Ok(info) => Progress::Stored {
            length: u64::try_from(info.size).unwrap_or_default(),
        },
        Err(err) => Progress::Failed(Miss::Invalid(err.to_string())),
    }
}

/// `body` at no more than `bytes_per_second` (as given when `None`).
pub(crate) fn throttled(
    body: impl Stream<Item = Result<Bytes, String>> + Send + 'static,
    bytes_per_second: Option<u64>,
) -> futures_util::stream::BoxStream<'static, Result<Bytes, String>> {
    let Some(rate) = bytes_per_second else {
        return body.boxed();
    };
    let started = Instant::now();
    futures_util::stream::unfold((body.boxed(), 0u64), move |(mut body, sent)| async move {
        let piece = body.next().await?;
        let sent = sent + piece.as_ref().map_or(0, |b| b.len() as u64);
        let due = Duration::from_secs_f64(sent as f64 / rate as f64);
        if let Some(early) = due.checked_sub(started.elapsed()) {
            tokio::time::sleep(early).await;
        }
        Some((piece, (body, sent)))
    })
    .boxed()
}

/// `body` in pieces of [`SPOOL_BATCH`] bytes (the last one shorter), each
/// written to `spool` (and announced) before it is passed on: one write per
/// piece to the spool and one to the store, not one per network read.
fn spooled(
    body: impl Stream<Item = Result<Bytes, String>> + Send + 'static,
    spool: std::fs::File,
    progress: watch::Sender<Progress>,
    length: Option<u64>,
) -> impl Stream<Item = Result<Bytes, String>> + Send {
    struct Spooling {
        body: futures_util::stream::Fuse<
            futures_util::stream::BoxStream<'static, Result<Bytes, String>>,
        >,
        spool: tokio::fs::File,
        written: u64,
        batch: BytesMut,
    }
    impl Spooling {
        /// The next piece: read until a batch is full (or the body ends),
        /// then spooled. `None` at the end.
        async fn next_piece(
            &mut self,
            progress: &watch::Sender<Progress>,
            length: Option<u64>,
        ) -> Option<Result<Bytes, String>> {
            while self.batch.len() < SPOOL_BATCH {
                match self.body.next().await {
                    Some(Ok(chunk)) => self.batch.extend_from_slice(&chunk),
                    Some(Err(err)) => return Some(Err(err)),
                    None => break,
                }
            }
            if self.batch.is_empty() {
                return None;
            }
            let piece = self.batch.split().freeze();
            let wrote = async {
                self.spool.write_all(&piece).await?;
                self.spool.flush().await
            };
            if let Err(err) = wrote.await {
                return Some(Err(format!("spooling: {err}")));
            }
            self.written += piece.len() as u64;
            progress.send_replace(Progress::Streaming {
                written: self.written,
                length,
            });
            Some(Ok(piece))
        }
    }
    let state = Spooling {
        // Asked again after its end, once the last short piece is passed on.
        body: body.boxed().fuse(),
        spool: tokio::fs::File::from_std(spool),
        written: 0,
        batch: BytesMut::with_capacity(SPOOL_BATCH),
    };
    futures_util::stream::unfold(Some(state), move |state| {
        let progress = progress.clone();
        async move {
            let mut state = state?;
            match state.next_piece(&progress, length).await? {
                Ok(piece) => Some((Ok(piece), Some(state))),
                Err(err) => Some((Err(err), None)),
            }
        }
    })
}

/// The bytes of a spooled blob as they arrive: everything but the last byte
/// while it streams, the rest once it is stored; an error if the fetch fails.
fn follow(flight: Arc<BlobFlight>) -> impl Stream<Item = io::Result<Bytes>> + Send {
    let watching = flight.progress.clone();
    futures_util::stream::unfold(Some((flight, watching, 0u64)), |state| async move {
        let (flight, mut watching, at) = state?;
        loop {
            let progress = watching.borrow_and_update().clone();
            let (limit, complete) = match progress {
                Progress::Asking => (0, false),
                Progress::Streaming { written, .. } => (written.saturating_sub(1), false),
                Progress::Stored { length } => (length, true),
                Progress::Cached { .. } | Progress::Missing | Progress::Failed(_) => {
                    return Some((Err(io::Error::other("the upstream fetch failed")), None));
                }
            };
            if at < limit {
                let len = (limit - at).min(READ_CHUNK);
                let spool = Arc::clone(&flight.spool);
                let read = tokio::task::spawn_blocking(move || {
                    let mut buf = vec![0; usize::try_from(len).unwrap_or(0)];
                    spool.read_exact_at(&mut buf, at).map(|()| Bytes::from(buf))
                })
                .await
                .unwrap_or_else(|e| Err(io::Error::other(e)));
                return match read {
                    Ok(bytes) => Some((Ok(bytes), Some((flight, watching, at + len)))),
                    Err(err) => Some((Err(err), None)),
                };
            }
            if complete {
                return None;
            }
            if watching.changed().await.is_err() {
                return Some((Err(io::Error::other("the upstream fetch stopped")), None));
            }
        }
    })
}

/// `GET`/`HEAD /v2/<proxy project>/<repository>/blobs/<digest>` for a blob
/// not cached: fetched (or joined) and answered as it streams in.
pub(super) async fn get_blob(
    ctx: &Ctx,
    project: &Project,
    registry_id: i64,
    name: &str,
    digest: &Digest,
    with_body: bool,
) -> RegistryResult<Response> {
    let cache = &ctx.state.registry.proxy;
    let upstream = cache
        .upstream(&ctx.state, project, registry_id, name)
        .await?;
    let limit = cache.blob_limit(&(project.id, name.to_string(), digest.to_string()));
    let flight = blob_flight(&ctx.state, project.id, name, &upstream, digest, limit)
        .map_err(ApiError::internal)?;
    let mut watching = flight.progress.clone();
    let started = watching
        .wait_for(|p| !matches!(p, Progress::Asking))
        .await
        .map(|p| p.clone())
        .map_err(|_| ApiError::internal("a proxied blob fetch ended without a word"))?;
    let length = match started {
        Progress::Streaming { length, .. } => length,
        Progress::Stored { length } => Some(length),
        Progress::Cached { length } => {
            let stream = ctx
                .state
                .registry
                .blobs
                .read(digest, 0, length)
                .await
                .map_err(ApiError::internal)?
                .ok_or_else(|| ApiError::internal(format!("blob {digest} has no bytes")))?;
            let body = if with_body {
                Body::from_stream(stream)
            } else {
                Body::empty()
            };
            return Ok(blob_response(body, Some(length), digest));
        }
        Progress::Missing => {
            return Err(oci(
                ErrorKind::NotFound,
                OciCode::BlobUnknown,
                &format!("blob unknown to registry: {digest}"),
            )
            .into());
        }
        Progress::Failed(miss) => return Err(miss_error(&miss, name, digest.as_str())),
        Progress::Asking => unreachable!("waited for an answer"),
    };
    let body = if with_body {
        Body::from_stream(follow(flight))
    } else {
        Body::empty()
    };
    Ok(blob_response(body, length, digest))
}

/// A blob answer: `body` with its headers.
fn blob_response(body: Body, length: Option<u64>, digest: &Digest) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Some(length) = length {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    }
    if let Ok(value) = HeaderValue::from_str(digest.as_str()) {
        headers.insert(DOCKER_CONTENT_DIGEST, value.clone());
    }
    if let Ok(value) = HeaderValue::from_str(&format!("\"{digest}\"")) {
        headers.insert(ETAG, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_no_manifest_declared_is_bounded_too() {
        let cache = ProxyCache::new(ProxySettings {
            ttl: Duration::ZERO,
            spool_dir: std::env::temp_dir(),
            deadlines: crate::upstream::Deadlines::DEFAULT,
        });
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:{}","size":{}}},"layers":[]}}"#,
            "1".repeat(64),
            config.len()
        );
        let manifest = Manifest::parse(manifest.as_bytes(), None).unwrap();
        let key = (1, "p/r".to_string(), format!("sha256:{}", "1".repeat(64)));
        assert_eq!(cache.blob_limit(&key), MAX_BLOB_BYTES);
        cache.declare(1, "p/r", &manifest);
        assert_eq!(cache.blob_limit(&key), config.len() as u64);
        cache.forget_declared(&key);
        assert_eq!(cache.blob_limit(&key), MAX_BLOB_BYTES);
    }
}
