//! Artifacts and their tags: deleting an artifact, adding and deleting a tag,
//! copying an artifact into another repository, the same for every surface
//! (permission, write, event).

use std::future::Future;
use std::pin::Pin;

use berth_domain::model::ProjectRef;
use berth_domain::oci::reference::Reference;
use berth_domain::oci::{Digest, Manifest, is_valid_tag};
use berth_domain::rbac::{Action, Resource};
use berth_store::repo::manifests::{DeleteManifest, PutManifest};

use super::content::{self, manifest_record};
use super::repositories::find_artifact;
use crate::access::require_project;
use crate::error::{ApiError, ErrorKind, HarborCode};
use crate::extract::Principal;
use crate::state::AppState;

/// Where an artifact is: its project, its repository within the project
/// (decoded) and the digest or tag that names it.
#[derive(Debug, Clone, Copy)]
pub struct ArtifactAt<'a> {
    /// The project's name.
    pub project: &'a str,
    /// The repository's name within the project.
    pub repository: &'a str,
    /// A digest or a tag.
    pub reference: &'a str,
}

/// Deletes the artifact `at` names, with its tags and accessories (artifact
/// delete permission): 412 while an index refers to it or an immutable rule
/// protects one of its tags; records `artifact.deleted`.
pub async fn delete(
    state: &AppState,
    principal: &Principal,
    at: ArtifactAt<'_>,
) -> Result<(), ApiError> {
    let artifact = find(state, principal, at, Resource::Artifact, Action::Delete).await?;
    let by = principal.audit_name();
    match content::delete_manifest(state, &artifact.repository_name, &artifact.digest, by).await? {
        DeleteManifest::Deleted => Ok(()),
        DeleteManifest::NotFound => Err(ApiError::not_found(format!(
            "artifact {}@{} not found",
            artifact.repository_name, artifact.digest
        ))),
        DeleteManifest::Referenced => Err(ApiError::new(
            ErrorKind::Precondition,
            "the deleting artifact is referenced by others",
        )
        .with_code(HarborCode::ViolateForeignKeyConstraint)),
    }
}

/// Tags the artifact `at` names with `name` (tag create permission).
pub async fn create_tag(
    state: &AppState,
    principal: &Principal,
    at: ArtifactAt<'_>,
    name: &str,
) -> Result<(), ApiError> {
    let artifact = find(state, principal, at, Resource::Tag, Action::Create).await?;
    if !is_valid_tag(name) {
        return Err(ApiError::bad_request(format!(
            "bad request: invalid tag name: {name}"
        )));
    }
    state
        .store
        .artifacts()
        .create_tag(artifact.repository_id, artifact.id, name)
        .await?;
    Ok(())
}

/// Deletes tag `name` of the artifact `at` names (tag delete permission);
/// 404 when either is missing; records `tag.deleted`.
pub async fn delete_tag(
    state: &AppState,
    principal: &Principal,
    at: ArtifactAt<'_>,
    name: &str,
) -> Result<(), ApiError> {
    let artifact = find(state, principal, at, Resource::Tag, Action::Delete).await?;
    let by = principal.audit_name();
    let deleted = content::delete_tag(
        state,
        &artifact.repository_name,
        name,
        Some(artifact.id),
        by,
    )
    .await?;
    if !deleted {
        return Err(ApiError::not_found(format!(
            "tag {name} attached to artifact {} not found",
            artifact.id
        )));
    }
    Ok(())
}

/// Copies the artifact `from` names into repository `target_repository` (its
/// full name) of project `target_project`: pull permission on the source,
/// push on the target, which may not be a proxy cache. The source's manifests
/// are pushed again there (children of an index first, accessories such as
/// signatures last) after mounting their blobs: no blob bytes are copied, the
/// target project's quota is charged, and the root's tags are set on the copy,
/// as Harbor does. Records one `artifact.pushed` for the copied artifact; the
/// copy's digest.
pub async fn copy(
    state: &AppState,
    principal: &Principal,
    from: ArtifactAt<'_>,
    target_project: &str,
    target_repository: &str,
) -> Result<String, ApiError> {
    let source = find(state, principal, from, Resource::Artifact, Action::Read).await?;
    let target = require_project(
        state,
        principal.actor(),
        &ProjectRef::Name(target_project.to_string()),
        Resource::Artifact,
        Action::Create,
    )
    .await?;
    if target.project.registry_id.is_some() {
        return Err(ApiError::new(
            ErrorKind::MethodNotAllowed,
            "the operation isn't supported for a proxy cache project",
        ));
    }
    let copy = Copy {
        state,
        source_project: from.project,
        source_repository: &source.repository_name,
        target_project: target.project.id,
        target_repository,
        subject: &source.digest,
        by: principal.audit_name(),
    };
    copy.manifest(&source.digest, None, 0).await?;
    for tag in state.store.artifacts().tags_of(&[source.id]).await? {
        copy.manifest(&source.digest, Some(tag.name), 0).await?;
    }
    // Its signatures and other accessories come along, as in Harbor.
    let all = berth_domain::query::Paging {
        page: 1,
        page_size: 0,
    };
    let (accessories, _) = state.store.artifacts().accessories_of(&source, all).await?;
    for accessory in accessories {
        copy.manifest(&accessory.digest, None, 0).await?;
    }
    Ok(source.digest)
}

/// How deep indexes of indexes are followed.
const MAX_DEPTH: usize = 8;

/// One copy between two repositories.
struct Copy<'a> {
    state: &'a AppState,
    source_project: &'a str,
    source_repository: &'a str,
    target_project: i64,
    target_repository: &'a str,
    /// The digest of the artifact copied: its push is the copy's event.
    subject: &'a str,
    /// Who copies.
    by: &'a str,
}

impl Copy<'_> {
    /// Pushes manifest `digest` of the source (and what it needs) to the target,
    /// tagged `tag`.
    fn manifest<'s>(
        &'s self,
        digest: &'s str,
        tag: Option<String>,
        depth: usize,
    ) -> Pin<Box<dyn Future<Output = Result<(), ApiError>> + Send + 's>> {
        Box::pin(async move {
            if depth > MAX_DEPTH {
                return Err(ApiError::bad_request(format!(
                    "indexes nest deeper than {MAX_DEPTH} levels"
                )));
            }
            let parsed = Digest::parse(digest).map_err(|_| {
                ApiError::internal(format!("stored digest {digest} does not parse"))
            })?;
            let registry = self.state.store.registry();
            let stored = registry
                .manifest_lookup(
                    self.source_project,
                    self.source_repository,
                    &Reference::Digest(parsed.clone()),
                )
                .await?
                .and_then(|lookup| lookup.manifest)
                .ok_or_else(|| ApiError::not_found(format!("artifact {digest} not found")))?;
            let manifest = Manifest::parse(&stored.body, Some(&stored.media_type))
                .map_err(|e| ApiError::internal(e.0))?;
            for child in manifest.children() {
                self.manifest(child.digest.as_str(), None, depth + 1)
                    .await?;
            }
            for blob in manifest.blob_dependencies() {
                registry
                    .mount_blob(
                        self.source_repository,
                        self.target_project,
                        self.target_repository,
                        blob.digest.as_str(),
                    )
                    .await?
                    .ok_or_else(|| {
                        ApiError::not_found(format!("blob {} of {digest} not found", blob.digest))
                    })?;
            }
            let announce = depth == 0 && tag.is_none() && digest == self.subject;
            let mut record = manifest_record(
                self.state,
                &manifest,
                self.target_project,
                self.target_repository,
                &parsed,
                &stored.body,
                tag,
            )
            .await;
            record.pushed_by = announce.then(|| self.by.to_string());
            match content::copy_manifest(self.state, &record).await? {
                PutManifest::Stored(_) => Ok(()),
                PutManifest::MissingBlob(missing) | PutManifest::MissingChild(missing) => Err(
                    ApiError::not_found(format!("{missing} of {digest} is missing")),
                ),
            }
        })
    }
}

async fn find(
    state: &AppState,
    principal: &Principal,
    at: ArtifactAt<'_>,
    resource: Resource,
    action: Action,
) -> Result<berth_domain::model::Artifact, ApiError> {
    find_artifact(
        state,
        principal,
        at.project,
        at.repository,
        at.reference,
        resource,
        action,
    )
    .await
}
