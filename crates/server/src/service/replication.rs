//! Replication (issue #30), its copy step: one artifact of this registry
//! pushed to another registry ([`crate::upstream::Remote`]) as a client
//! would push it: the children of an index first, then each blob the
//! destination does not have yet (asked with `HEAD`, streamed from the blob
//! store without staging), then the manifest's exact bytes, so digests stay
//! the same. An artifact the destination already has under the same
//! reference and digest is left as it is. Policies, executions and adapters
//! come next; nothing calls this from the API yet.

use berth_domain::oci::{Manifest, Reference};
use futures_util::TryStreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;

use crate::state::AppState;
use crate::upstream::Remote;

/// How deep indexes may nest (an index of indexes of images is two).
const MAX_DEPTH: usize = 4;

/// What a copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Copied {
    /// Manifests pushed (the artifact, its children).
    pub manifests: usize,
    /// Manifests the destination had already.
    pub manifests_present: usize,
    /// Blobs pushed.
    pub blobs: usize,
    /// Blobs the destination had already.
    pub blobs_present: usize,
    /// Bytes of the blobs pushed.
    pub bytes: u64,
}

/// Pushes artifact `reference` (a tag or a digest) of local `repository` to
/// `remote` as `to` (a repository there) under the same reference.
pub async fn push_artifact(
    state: &AppState,
    remote: &Remote,
    repository: &str,
    reference: &str,
    to: &str,
) -> Result<Copied, String> {
    let mut copied = Copied::default();
    push_manifest(state, remote, repository, reference, to, 0, &mut copied).await?;
    Ok(copied)
}

/// Pushes manifest `reference` of `repository` and what it needs.
async fn push_manifest(
    state: &AppState,
    remote: &Remote,
    repository: &str,
    reference: &str,
    to: &str,
    depth: usize,
    copied: &mut Copied,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("{repository}:{reference}: indexes nest too deep"));
    }
    let parsed = Reference::parse(reference)
        .map_err(|_| format!("{reference:?} is neither a tag nor a digest"))?;
    let (project, _) = repository
        .split_once('/')
        .ok_or_else(|| format!("{repository} has no project"))?;
    let stored = state
        .store
        .registry()
        .manifest_lookup(project, repository, &parsed)
        .await
        .map_err(|e| e.to_string())?
        .and_then(|lookup| lookup.manifest)
        .ok_or_else(|| format!("{repository}:{reference} is not here"))?;
    if remote
        .has_manifest(to, reference, &stored.digest)
        .await
        .map_err(|e| e.to_string())?
    {
        copied.manifests_present += 1;
        return Ok(());
    }
    let manifest = Manifest::parse(&stored.body, Some(&stored.media_type))
        .map_err(|e| format!("{repository}@{}: {e}", stored.digest))?;
    for child in manifest.children() {
        Box::pin(push_manifest(
            state,
            remote,
            repository,
            child.digest.as_str(),
            to,
            depth + 1,
            copied,
        ))
        .await?;
    }
    for blob in manifest.blob_dependencies() {
        let digest = blob.digest.as_str();
        if remote
            .has_blob(to, digest)
            .await
            .map_err(|e| e.to_string())?
        {
            copied.blobs_present += 1;
            continue;
        }
        let size = u64::try_from(blob.size).map_err(|_| format!("{digest}: a negative size"))?;
        let stream = state
            .registry
            .blobs
            .read(&blob.digest, 0, size)
            .await
            .map_err(|e| format!("{digest}: {e}"))?
            .ok_or_else(|| format!("{digest}: its bytes are not stored here"))?;
        let body = StreamBody::new(stream.map_ok(Frame::data)).boxed_unsync();
        remote
            .push_blob(to, digest, size, body)
            .await
            .map_err(|e| format!("{digest}: {e}"))?;
        copied.blobs += 1;
        copied.bytes += size;
    }
    remote
        .push_manifest(to, reference, &stored.media_type, stored.body.into())
        .await
        .map_err(|e| e.to_string())?;
    copied.manifests += 1;
    Ok(())
}
