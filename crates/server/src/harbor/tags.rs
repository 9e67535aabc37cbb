//! Harbor's tags of an artifact: listTags, createTag, deleteTag.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_domain::model::Tag;
use berth_domain::model::immutable::Protection;
use berth_domain::oci::within_project;
use berth_domain::rbac::{Action, Resource};
use serde::Serialize;
use serde_json::Value;

use super::artifacts::{BASE, load_artifact};
use super::repositories::name_in_project;
use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, paged};
use crate::operations::{Routes, Surface};
use crate::service::artifacts::{self, ArtifactAt};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get(&format!("{BASE}/{{reference}}/tags"), list_tags)
        .post(&format!("{BASE}/{{reference}}/tags"), create_tag)
        .delete(
            &format!("{BASE}/{{reference}}/tags/{{tag_name}}"),
            delete_tag,
        )
}

/// Harbor's Tag model.
#[derive(Serialize)]
pub(super) struct TagJson<'a> {
    id: i64,
    repository_id: i64,
    artifact_id: i64,
    name: &'a str,
    push_time: &'a str,
    pull_time: &'a str,
    immutable: bool,
}

impl<'a> TagJson<'a> {
    /// `tag` of repository `repository` (its name within the project), with
    /// `immutable` from `protection` when `with_immutable_status` asked for it.
    pub(super) fn new(tag: &'a Tag, repository: &str, protection: Option<&Protection>) -> Self {
        Self {
            id: tag.id,
            repository_id: tag.repository_id,
            artifact_id: tag.artifact_id,
            name: &tag.name,
            push_time: &tag.push_time,
            pull_time: &tag.pull_time,
            immutable: protection.is_some_and(|p| p.protects(repository, &tag.name)),
        }
    }
}

/// The project's immutable tag rules, when `with_immutable_status=true` asks
/// for each tag's status.
pub(super) async fn immutable_status(
    state: &AppState,
    query: &HarborQuery,
    project_id: i64,
) -> Result<Option<Protection>, ApiError> {
    if !query.bool("with_immutable_status", false) {
        return Ok(None);
    }
    Ok(Some(
        state.store.immutable_rules().protection(project_id).await?,
    ))
}

/// `GET .../artifacts/{reference}/tags`.
pub async fn list_tags(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name, reference)): Path<(String, String, String)>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let paging = query.paging()?;
    let (q, sort) = (query.query()?, query.sort()?);
    let artifact = load_artifact(
        &state,
        &principal,
        &project_name,
        &repository_name,
        &reference,
        Resource::Tag,
        Action::List,
    )
    .await?;
    let (tags, total) = state
        .store
        .artifacts()
        .list_tags(artifact.id, &q, &sort, paging)
        .await?;
    let protection = immutable_status(&state, &query, artifact.project_id).await?;
    let repository = within_project(&artifact.repository_name);
    let body: Vec<TagJson> = tags
        .iter()
        .map(|tag| TagJson::new(tag, repository, protection.as_ref()))
        .collect();
    Ok(paged(&body, total, query.link(paging, total)))
}

/// `POST .../artifacts/{reference}/tags` with `{"name"}`: 201, no `Location`.
pub async fn create_tag(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name, reference)): Path<(String, String, String)>,
    body: Bytes,
) -> HarborResult<StatusCode> {
    let body: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid tag body: {e}")))?;
    let name = body.get("name").and_then(Value::as_str).unwrap_or_default();
    let at = ArtifactAt {
        project: &project_name,
        repository: &name_in_project(&repository_name),
        reference: &reference,
    };
    artifacts::create_tag(&state, &principal, at, name).await?;
    Ok(StatusCode::CREATED)
}

/// `DELETE .../artifacts/{reference}/tags/{tag_name}`.
pub async fn delete_tag(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name, reference, tag_name)): Path<(
        String,
        String,
        String,
        String,
    )>,
) -> HarborResult<()> {
    let at = ArtifactAt {
        project: &project_name,
        repository: &name_in_project(&repository_name),
        reference: &reference,
    };
    artifacts::delete_tag(&state, &principal, at, &tag_name).await?;
    Ok(())
}
