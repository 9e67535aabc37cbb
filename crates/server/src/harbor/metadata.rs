//! Project metadata: listProjectMetadatas, addProjectMetadatas, getProjectMetadata,
//! updateProjectMetadata, deleteProjectMetadata. Values are strings; known keys only.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use berth_domain::model::metadata;
use berth_domain::rbac::{Action, Resource};

use crate::error::{ApiError, HarborResult};
use crate::extract::harbor::LaterJson;
use crate::harbor::projects::ProjectCaller;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get(
            "/projects/{project_name_or_id}/metadatas",
            list_project_metadatas,
        )
        .post(
            "/projects/{project_name_or_id}/metadatas",
            add_project_metadatas,
        )
        .get(
            "/projects/{project_name_or_id}/metadatas/{meta_name}",
            get_project_metadata,
        )
        .put(
            "/projects/{project_name_or_id}/metadatas/{meta_name}",
            update_project_metadata,
        )
        .delete(
            "/projects/{project_name_or_id}/metadatas/{meta_name}",
            delete_project_metadata,
        )
}

type MetadataMap = BTreeMap<String, String>;

async fn project_id(
    state: &AppState,
    caller: &ProjectCaller,
    project_name_or_id: &str,
    action: Action,
) -> Result<i64, ApiError> {
    let access = caller
        .require(state, project_name_or_id, Resource::Metadata, action)
        .await?;
    Ok(access.project.id)
}

/// Every stored pair (system administrators only, as in Harbor).
pub async fn list_project_metadatas(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project_name_or_id): Path<String>,
) -> HarborResult<Json<MetadataMap>> {
    let id = project_id(&state, &caller, &project_name_or_id, Action::List).await?;
    Ok(Json(
        state.store.metadata().list(id).await?.into_iter().collect(),
    ))
}

/// Adds exactly one pair; 409 when the key is already set.
pub async fn add_project_metadatas(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project_name_or_id): Path<String>,
    body: LaterJson<MetadataMap>,
) -> HarborResult<StatusCode> {
    let id = project_id(&state, &caller, &project_name_or_id, Action::Create).await?;
    let body = body.parse()?;
    if body.len() != 1 {
        return Err(ApiError::bad_request("only allow one key/value pair").into());
    }
    let (key, value) = body.into_iter().next().unwrap_or_default();
    let value = metadata::normalize(&key, &value)?;
    state.store.metadata().add(id, &key, &value).await?;
    Ok(StatusCode::OK)
}

/// `{"<meta_name>": "<value>"}`, or `{}` when the key is not set.
pub async fn get_project_metadata(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project_name_or_id, meta_name)): Path<(String, String)>,
) -> HarborResult<Json<MetadataMap>> {
    let id = project_id(&state, &caller, &project_name_or_id, Action::Read).await?;
    let value = state.store.metadata().get(id, &meta_name).await?;
    Ok(Json(value.map(|v| (meta_name, v)).into_iter().collect()))
}

/// Replaces the value of a set key with the body's value under `meta_name`.
pub async fn update_project_metadata(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project_name_or_id, meta_name)): Path<(String, String)>,
    body: LaterJson<MetadataMap>,
) -> HarborResult<StatusCode> {
    let id = project_id(&state, &caller, &project_name_or_id, Action::Update).await?;
    let body = body.parse()?;
    let given = body.get(&meta_name).map_or("", String::as_str);
    let value = metadata::normalize(&meta_name, given)?;
    state
        .store
        .metadata()
        .update(id, &meta_name, &value)
        .await?;
    Ok(StatusCode::OK)
}

/// Removes a key (200 even when it was not set).
pub async fn delete_project_metadata(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project_name_or_id, meta_name)): Path<(String, String)>,
) -> HarborResult<StatusCode> {
    let id = project_id(&state, &caller, &project_name_or_id, Action::Delete).await?;
    if !metadata::is_writable(&meta_name) {
        return Err(ApiError::bad_request(format!("invalid key: {meta_name}")).into());
    }
    state.store.metadata().delete(id, &meta_name).await?;
    Ok(StatusCode::OK)
}
