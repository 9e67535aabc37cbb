//! Harbor's labels: createLabel, listLabels, getLabelByID, updateLabel, deleteLabel, and
//! addLabel/removeLabel on an artifact. Global labels (`scope: g`) belong to
//! system administrators; project labels (`scope: p`) to the project's
//! maintainers and admins.

use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use berth_domain::model::artifact::validate_label_name;
use berth_domain::model::{Label, ProjectRef};
use berth_domain::rbac::{Action, Resource, SystemResource};
use berth_store::repo::labels::NewLabel;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::artifacts::{BASE, load_artifact};
use crate::access::require_project;
use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborBytes, HarborJson, HarborQuery, paged};
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/labels", list_labels)
        .post("/labels", create_label)
        .get("/labels/{label_id}", get_label_by_id)
        .put("/labels/{label_id}", update_label)
        .delete("/labels/{label_id}", delete_label)
        .post(&format!("{BASE}/{{reference}}/labels"), add_label)
        .delete(
            &format!("{BASE}/{{reference}}/labels/{{label_id}}"),
            remove_label,
        )
}

/// Harbor's Label model (`project_id` omitted for global labels, as go-swagger does with 0).
#[derive(Serialize)]
pub(super) struct LabelJson<'a> {
    id: i64,
    name: &'a str,
    scope: &'a str,
    creation_time: &'a str,
    update_time: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    color: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    project_id: Option<i64>,
}

impl<'a> From<&'a Label> for LabelJson<'a> {
    fn from(label: &'a Label) -> Self {
        Self {
            id: label.id,
            name: &label.name,
            scope: &label.scope,
            creation_time: &label.created_at,
            update_time: &label.updated_at,
            description: &label.description,
            color: &label.color,
            project_id: label.project_id,
        }
    }
}

/// Checks `action` on a label's scope: the system `label` permission for
/// global labels (anyone reads them), the project's for project labels.
async fn require_scope(
    state: &AppState,
    principal: &Principal,
    project_id: Option<i64>,
    action: Action,
) -> Result<(), ApiError> {
    match project_id {
        Some(id) => {
            require_project(
                state,
                principal.actor(),
                &ProjectRef::Id(id),
                Resource::Label,
                action,
            )
            .await?;
        }
        None if matches!(action, Action::Read | Action::List) => {}
        None => principal.require_system(SystemResource::Label, action)?,
    }
    Ok(())
}

/// `POST /labels` with `{name, description, color, scope, project_id}`: 201 and `Location`.
pub async fn create_label(
    State(state): State<AppState>,
    principal: Principal,
    HarborBytes(body): HarborBytes,
) -> HarborResult<Response> {
    principal.require_authenticated()?;
    let body: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid label body: {e}")))?;
    let text = |key: &str| {
        body.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let name = text("name");
    validate_label_name(&name)?;
    let project_id = match text("scope").as_str() {
        "g" => None,
        "p" => Some(
            body.get("project_id")
                .and_then(Value::as_i64)
                .filter(|id| *id > 0)
                .ok_or_else(|| ApiError::bad_request("a project label needs a project_id"))?,
        ),
        other => return Err(ApiError::bad_request(format!("invalid scope: {other}")).into()),
    };
    require_scope(&state, &principal, project_id, Action::Create).await?;
    let label = state
        .store
        .labels()
        .create(&NewLabel {
            name,
            description: text("description"),
            color: text("color"),
            project_id,
        })
        .await?;
    let mut response = StatusCode::CREATED.into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/api/v2.0/labels/{}", label.id)) {
        response.headers_mut().insert(LOCATION, location);
    }
    Ok(response)
}

/// `GET /labels?scope=g|p&project_id=&name=&q=`.
pub async fn list_labels(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    let paging = query.paging()?;
    let project_id = match query.get("scope").unwrap_or("g") {
        "g" => None,
        "p" => Some(
            query
                .get("project_id")
                .and_then(|v| v.parse::<i64>().ok())
                .ok_or_else(|| {
                    ApiError::bad_request("must specify project_id for project scope labels")
                })?,
        ),
        other => return Err(ApiError::bad_request(format!("invalid scope: {other}")).into()),
    };
    require_scope(&state, &principal, project_id, Action::List).await?;
    let name = query.string("name");
    let (labels, total) = state
        .store
        .labels()
        .list(project_id, name.as_deref(), &query.query()?, paging)
        .await?;
    let body: Vec<LabelJson> = labels.iter().map(LabelJson::from).collect();
    Ok(paged(&body, total, query.link(paging, total)))
}

async fn load_label(state: &AppState, label_id: &str) -> Result<Label, ApiError> {
    let id: i64 = label_id
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid label id {label_id}")))?;
    state
        .store
        .labels()
        .find(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("label {id} not found")))
}

/// `GET /labels/{label_id}`.
pub async fn get_label_by_id(
    State(state): State<AppState>,
    principal: Principal,
    Path(label_id): Path<String>,
) -> HarborResult<Response> {
    let label = load_label(&state, &label_id).await?;
    require_scope(&state, &principal, label.project_id, Action::Read).await?;
    Ok(axum::Json(LabelJson::from(&label)).into_response())
}

/// Harbor's Label as updateLabel reads it: the name, description and color
/// replace the label's (an absent description or color clears it); the scope,
/// project and times cannot change.
#[derive(Debug, Deserialize)]
pub struct LabelUpdate {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    color: Option<String>,
}

/// `PUT /labels/{label_id}`: 404 for no such label, then the scope's rule
/// (system administrators for a global label, the project's maintainers and
/// admins for a project label), 400 for a bad name, 409 for a name taken in
/// the scope.
pub async fn update_label(
    State(state): State<AppState>,
    principal: Principal,
    Path(label_id): Path<String>,
    HarborJson(body): HarborJson<LabelUpdate>,
) -> HarborResult<()> {
    let label = load_label(&state, &label_id).await?;
    require_scope(&state, &principal, label.project_id, Action::Update).await?;
    let name = body.name.unwrap_or_default().trim().to_string();
    validate_label_name(&name)?;
    let trimmed = |text: Option<String>| text.unwrap_or_default().trim().to_string();
    state
        .store
        .labels()
        .update(
            label.id,
            &name,
            &trimmed(body.description),
            &trimmed(body.color),
        )
        .await?
        .ok_or_else(|| ApiError::not_found(format!("label {} not found", label.id)))?;
    Ok(())
}

/// `DELETE /labels/{label_id}`: also takes it off every artifact.
pub async fn delete_label(
    State(state): State<AppState>,
    principal: Principal,
    Path(label_id): Path<String>,
) -> HarborResult<()> {
    principal.require_authenticated()?;
    let label = load_label(&state, &label_id).await?;
    require_scope(&state, &principal, label.project_id, Action::Delete).await?;
    state.store.labels().delete(label.id).await?;
    Ok(())
}

/// `POST .../artifacts/{reference}/labels` with `{"id"}`: a global label or one of the project.
pub async fn add_label(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name, reference)): Path<(String, String, String)>,
    HarborBytes(body): HarborBytes,
) -> HarborResult<()> {
    let artifact = load_artifact(
        &state,
        &principal,
        &project_name,
        &repository_name,
        &reference,
        Resource::ArtifactLabel,
        Action::Create,
    )
    .await?;
    let body: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid label body: {e}")))?;
    let id = body
        .get("id")
        .and_then(Value::as_i64)
        .ok_or_else(|| ApiError::bad_request("the label id is required"))?;
    let label = state
        .store
        .labels()
        .find(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("label {id} not found")))?;
    if label.project_id.is_some_and(|p| p != artifact.project_id) {
        return Err(ApiError::bad_request(format!("label {id} belongs to another project")).into());
    }
    state
        .store
        .labels()
        .add_to_artifact(artifact.id, id)
        .await?;
    Ok(())
}

/// `DELETE .../artifacts/{reference}/labels/{label_id}`.
pub async fn remove_label(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name, reference, label_id)): Path<(
        String,
        String,
        String,
        String,
    )>,
) -> HarborResult<()> {
    let label_id: i64 = label_id
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid label id {label_id}")))?;
    let artifact = load_artifact(
        &state,
        &principal,
        &project_name,
        &repository_name,
        &reference,
        Resource::ArtifactLabel,
        Action::Delete,
    )
    .await?;
    if !state
        .store
        .labels()
        .remove_from_artifact(artifact.id, label_id)
        .await?
    {
        return Err(ApiError::not_found(format!(
            "label {label_id} is not added to the artifact {}",
            artifact.id
        ))
        .into());
    }
    Ok(())
}
