//! Harbor's CopyArtifact (`POST .../artifacts?from=project/repo@digest|:tag`)
//! and listAccessories (`GET .../artifacts/{reference}/accessories`).
//!
//! A copy pushes the source's manifests again into the target repository
//! (children of an index first, accessories such as signatures last), after
//! mounting their blobs there: no blob bytes are copied, the target project's
//! quota is charged, and the root's tags are set on the copy, as Harbor does.

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::Artifact;
use berth_domain::rbac::{Action, Resource};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use super::artifacts::load_artifact;
use super::repositories::full_name;
use super::repositories::name_in_project;
use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, paged};
use crate::service::artifacts::{self, ArtifactAt};
use crate::state::AppState;

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
    let from = ArtifactAt {
        project: source_project,
        repository: &name_in_project(source_repository),
        reference,
    };
    let digest =
        artifacts::copy(&state, &principal, from, &project_name, &target_repository).await?;
    let location = format!(
        "/api/v2.0/projects/{project_name}/repositories/{}/artifacts/{}",
        utf8_percent_encode(&repository_name, NON_ALPHANUMERIC),
        digest
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
        "icon": if a.icon.is_empty() {
            super::icons::of_accessory(a.accessory_type.as_deref())
        } else {
            a.icon.as_str()
        },
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
