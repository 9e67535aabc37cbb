//! Harbor's CopyArtifact (`POST .../artifacts?from=project/repo@digest|:tag`)
//! and listAccessories (`GET .../artifacts/{reference}/accessories`).
//!
//! A copy pushes the source's manifests again into the target repository
//! (children of an index first, accessories such as signatures last), after
//! mounting their blobs there: no blob bytes are copied, the target project's
//! quota is charged, and the root's tags are set on the copy, as Harbor does.

use std::future::Future;
use std::pin::Pin;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::{Artifact, ProjectRef};
use berth_domain::oci::reference::Reference;
use berth_domain::oci::{Digest, Manifest};
use berth_domain::rbac::{Action, Resource};
use berth_store::repo::manifests::PutManifest;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use super::artifacts::load_artifact;
use super::repositories::full_name;
use crate::access::require_project;
use crate::error::{ApiError, ErrorKind, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, paged};
use crate::registry::manifest_record;
use crate::state::AppState;

/// How deep indexes of indexes are followed.
const MAX_DEPTH: usize = 8;

/// `POST .../artifacts?from=`: needs pull on the source and push on the target.
pub async fn copy_artifact(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name)): Path<(String, String)>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let from = query.required("from")?;
    let (source_project, source_repository, reference) = parse_from(&from)?;
    // The repository a copy makes is named by the rule a push's name follows.
    let target_repository = full_name(&project_name, &repository_name);
    if !berth_domain::oci::is_valid_name(&target_repository) {
        return Err(
            ApiError::bad_request(format!("invalid repository name: {target_repository}")).into(),
        );
    }
    let source = load_artifact(
        &state,
        &principal,
        source_project,
        source_repository,
        reference,
        Resource::Artifact,
        Action::Read,
    )
    .await?;
    let target = require_project(
        &state,
        principal.actor(),
        &ProjectRef::Name(project_name.clone()),
        Resource::Artifact,
        Action::Create,
    )
    .await?;
    if target.project.registry_id.is_some() {
        return Err(ApiError::new(
            ErrorKind::MethodNotAllowed,
            "the operation isn't supported for a proxy cache project",
        )
        .into());
    }
    let copy = Copy {
        state: &state,
        source_project,
        source_repository: &source.repository_name,
        target_project: target.project.id,
        target_repository: &target_repository,
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
    state.audit(crate::audit::Event {
        project_id: Some(target.project.id),
        operation: "create",
        resource_type: "artifact",
        resource: &format!("{}@{}", copy.target_repository, source.digest),
        username: principal.audit_name(),
    });
    let location = format!(
        "/api/v2.0/projects/{project_name}/repositories/{}/artifacts/{}",
        utf8_percent_encode(&repository_name, NON_ALPHANUMERIC),
        source.digest
    );
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
}

/// `project/repository@digest` or `project/repository:tag`, as
/// `(project, repository within it, reference)`.
fn parse_from(from: &str) -> Result<(&str, &str, &str), ApiError> {
    let invalid = || {
        ApiError::bad_request(format!(
            "invalid from {from:?}: use project/repository:tag or project/repository@digest"
        ))
    };
    let (repository, reference) = match from.split_once('@') {
        Some(split) => split,
        None => from
            .rsplit_once(':')
            .filter(|(repository, _)| !repository.is_empty())
            .ok_or_else(invalid)?,
    };
    let (project, rest) = repository.split_once('/').ok_or_else(invalid)?;
    if project.is_empty() || rest.is_empty() || reference.is_empty() || reference.contains('/') {
        return Err(invalid());
    }
    Ok((project, rest, reference))
}

/// One copy between two repositories.
struct Copy<'a> {
    state: &'a AppState,
    source_project: &'a str,
    source_repository: &'a str,
    target_project: i64,
    target_repository: &'a str,
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
            let record = manifest_record(
                self.state,
                &manifest,
                self.target_project,
                self.target_repository,
                &parsed,
                &stored.body,
                tag,
            )
            .await;
            match registry.put_manifest(&record).await? {
                PutManifest::Stored(_) => Ok(()),
                PutManifest::MissingBlob(missing) | PutManifest::MissingChild(missing) => Err(
                    ApiError::not_found(format!("{missing} of {digest} is missing")),
                ),
            }
        })
    }
}

/// `GET .../artifacts/{reference}/accessories`: Harbor's Accessory list.
pub async fn list_accessories(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name, reference)): Path<(String, String, String)>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let subject = load_artifact(
        &state,
        &principal,
        &project_name,
        &repository_name,
        &reference,
        Resource::Accessory,
        Action::List,
    )
    .await?;
    let paging = query.paging()?;
    let (accessories, total) = state
        .store
        .artifacts()
        .accessories_of(&subject, paging)
        .await?;
    let wire: Vec<Value> = accessories
        .iter()
        .map(|a| accessory_json(&subject, a))
        .collect();
    Ok(paged(&wire, total, query.link(paging, total)))
}

/// Harbor's Accessory.
fn accessory_json(subject: &Artifact, a: &Artifact) -> Value {
    json!({
        "id": a.id,
        "artifact_id": a.id,
        "subject_artifact_id": subject.id,
        "subject_artifact_digest": subject.digest,
        "subject_artifact_repo": subject.repository_name,
        "size": a.size,
        "digest": a.digest,
        "type": a.accessory_type,
        "icon": a.icon,
        "creation_time": a.push_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_names_a_repository_and_a_reference() {
        assert_eq!(
            parse_from("library/app:v1").unwrap(),
            ("library", "app", "v1")
        );
        assert_eq!(
            parse_from("p/a/b@sha256:abc").unwrap(),
            ("p", "a/b", "sha256:abc")
        );
        for bad in [
            "app:v1",
            "library/app",
            ":v1",
            "/app:v1",
            "library/:v1",
            "library/app@",
        ] {
            assert!(parse_from(bad).is_err(), "{bad}");
        }
    }
}
