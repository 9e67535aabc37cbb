//! Content: what the store keeps of a pushed manifest, and reading an image
//! config back from the blob store, for every writer of manifests (a push, a
//! proxy fetch, a copy) and every reader of image details.

use berth_domain::TagChange;
use berth_domain::oci::manifest::{Descriptor, image_extra_attrs};
use berth_domain::oci::{Digest, Manifest};
use berth_store::repo::manifests::{DeleteManifest, NewManifest, NewReference, PutManifest};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::state::AppState;

/// The largest image config read for `extra_attrs` (as large as a manifest may be);
/// a larger config is stored like any blob, only not read.
const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// What the store keeps of `manifest` (parsed from `body`, whose digest is
/// `digest`) pushed to `repository` of project `project_id`, tagged `tag`.
pub async fn manifest_record(
    state: &AppState,
    manifest: &Manifest,
    project_id: i64,
    repository: &str,
    digest: &Digest,
    body: &[u8],
    tag: Option<String>,
) -> NewManifest {
    let harbor_type = manifest.harbor_type();
    let extra_attrs = match &manifest.kind {
        berth_domain::oci::ManifestKind::Image { config, .. } if harbor_type == "IMAGE" => {
            match read_config(state, config).await {
                Some(bytes) => image_extra_attrs(&bytes),
                None => json!({}),
            }
        }
        _ => json!({}),
    };
    let to_json = |v: &Option<Value>| v.as_ref().map(Value::to_string);
    NewManifest {
        project_id,
        repository: repository.to_string(),
        digest: digest.to_string(),
        body: body.to_vec(),
        manifest_media_type: manifest.media_type.clone(),
        media_type: manifest.config_media_type().to_string(),
        artifact_type: manifest.effective_artifact_type().to_string(),
        harbor_type: harbor_type.to_string(),
        size: manifest.artifact_size(body.len()),
        subject_digest: manifest.subject.as_ref().map(|s| s.digest.to_string()),
        accessory_type: manifest.accessory_type().map(str::to_string),
        extra_attrs: extra_attrs.to_string(),
        annotations: manifest
            .annotations
            .as_ref()
            .map(|a| serde_json::to_string(a).unwrap_or_default()),
        blobs: manifest
            .blob_dependencies()
            .iter()
            .map(|d| d.digest.to_string())
            .collect(),
        children: manifest
            .children()
            .iter()
            .map(|c| NewReference {
                digest: c.digest.to_string(),
                platform: to_json(&c.platform),
                urls: c
                    .urls
                    .as_ref()
                    .map(|u| serde_json::to_string(u).unwrap_or_default()),
                annotations: to_json(&c.annotations),
            })
            .collect(),
        partial_children: false,
        tag,
        pushed_by: None,
    }
}

/// The bytes of an image config, for `extra_attrs` and the build history; `None` when the blob is
/// missing or unreadable, or when its declared or stored size is over
/// [`MAX_CONFIG_BYTES`]. Reads at most one byte past the limit, whatever the
/// manifest declares.
pub async fn read_config(state: &AppState, config: &Descriptor) -> Option<Vec<u8>> {
    read_bounded(state, config, MAX_CONFIG_BYTES).await
}

/// The bytes of the blob `descriptor` names; `None` when it is missing or
/// unreadable, or when its declared or stored size is over `max`. Reads at
/// most one piece past the limit, whatever the manifest declares.
pub async fn read_bounded(state: &AppState, descriptor: &Descriptor, max: u64) -> Option<Vec<u8>> {
    let declared = u64::try_from(descriptor.size).ok()?;
    if declared > max {
        return None;
    }
    let mut stream = state
        .registry
        .blobs
        .read(&descriptor.digest, 0, declared)
        .await
        .ok()??;
    let mut bytes = Vec::with_capacity(usize::try_from(declared).ok()?);
    while let Some(piece) = stream.next().await {
        bytes.extend_from_slice(&piece.ok()?);
        if bytes.len() as u64 > max {
            return None;
        }
    }
    (u64::try_from(bytes.len()).ok()? <= max).then_some(bytes)
}

/// Notes a pull of `artifact` (`repo:tag` or `repo@digest`) of project
/// `project_id` by `by` in the audit log. Pulls are the one change noted in
/// memory and written in batches a moment later, not as an event in a
/// transaction: they are the hot path, and a pull changes nothing else.
pub fn pulled(state: &AppState, project_id: i64, artifact: &str, by: &str) {
    state.audit(crate::audit::Event {
        project_id: Some(project_id),
        operation: "pull",
        resource_type: "artifact",
        resource: artifact,
        username: by,
    });
}

/// Deletes artifact `digest` of `repository` as `by` (whose surface checked
/// that they may): the store's one artifact delete, its event delivered.
pub async fn delete_manifest(
    state: &AppState,
    repository: &str,
    digest: &str,
    by: &str,
) -> Result<DeleteManifest, ApiError> {
    let outcome = state
        .store
        .registry()
        .delete_manifest(repository, digest, by)
        .await?;
    if outcome == DeleteManifest::Deleted {
        state.deliver_events();
    }
    Ok(outcome)
}

/// Deletes tag `tag` of `repository` as `by` (only while it is on artifact
/// `on`, when given; whose surface checked that they may): the store's one
/// tag delete, its event delivered. `false` when there was no such tag.
pub async fn delete_tag(
    state: &AppState,
    repository: &str,
    tag: &str,
    on: Option<i64>,
    by: &str,
) -> Result<bool, ApiError> {
    let deleted = state
        .store
        .registry()
        .delete_tag(repository, tag, on, by)
        .await?;
    if deleted {
        state.deliver_events();
    }
    Ok(deleted)
}

/// Stores a manifest as pushed (a client's PUT, a copy, a proxy fetch): the
/// store's one manifest write; when `new.pushed_by` names who pushed, its
/// `artifact.pushed` event is written with it and delivered.
/// A push refused or taken near the project's storage quota is announced
/// to webhooks (`QUOTA_EXCEED`, `QUOTA_WARNING`).
pub async fn put_manifest(state: &AppState, new: &NewManifest) -> Result<PutManifest, ApiError> {
    put(state, new, TagChange::Push).await
}

/// [`put_manifest`] for a copy: moving a tag an immutable rule protects is
/// refused as an update of it, as Harbor's copy refuses it.
pub async fn copy_manifest(state: &AppState, new: &NewManifest) -> Result<PutManifest, ApiError> {
    put(state, new, TagChange::Update).await
}

/// The manifest write, a protected tag it would move refused as `moving`.
async fn put(
    state: &AppState,
    new: &NewManifest,
    moving: TagChange,
) -> Result<PutManifest, ApiError> {
    let outcome = match state.store.registry().put_manifest(new).await {
        Err(berth_store::StoreError::Domain(berth_domain::DomainError::Immutable {
            repository,
            tag,
            ..
        })) => {
            return Err(berth_domain::DomainError::Immutable {
                repository,
                tag,
                change: moving,
            }
            .into());
        }
        Err(berth_store::StoreError::Domain(berth_domain::DomainError::QuotaExceeded {
            adding,
            used,
            hard,
        })) => {
            crate::service::webhooks::quota_exceeded(state, new, adding, used, hard).await;
            return Err(berth_domain::DomainError::QuotaExceeded { adding, used, hard }.into());
        }
        outcome => outcome?,
    };
    if matches!(outcome, PutManifest::Stored(_)) && new.pushed_by.is_some() {
        crate::service::webhooks::quota_checked(state, new).await;
        state.deliver_events();
    }
    Ok(outcome)
}

/// Stores a manifest a proxy-cache project fetched from upstream, after the
/// client's GET was answered (no request's end moves the registry's change
/// generation for it): moves it here, so kept manifest lookups show it.
pub async fn put_fetched_manifest(
    state: &AppState,
    new: &NewManifest,
) -> Result<PutManifest, ApiError> {
    let outcome = put_manifest(state, new).await?;
    state.store.changes().bump(berth_store::Topic::Registry);
    Ok(outcome)
}
