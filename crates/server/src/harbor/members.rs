//! Project members: listProjectMembers, createProjectMember, getProjectMember,
//! updateProjectMember, deleteProjectMember.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::Member;
use berth_domain::rbac::{Action, Resource, Role};
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, HarborResult};
use crate::extract::harbor::{HarborQuery, LaterJson, paged, path_int};
use crate::harbor::projects::ProjectCaller;
use crate::operations::{Routes, Surface};
use crate::service::members::{self, ProjectMemberReq};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get(
            "/projects/{project_name_or_id}/members",
            list_project_members,
        )
        .post(
            "/projects/{project_name_or_id}/members",
            create_project_member,
        )
        .get(
            "/projects/{project_name_or_id}/members/{mid}",
            get_project_member,
        )
        .put(
            "/projects/{project_name_or_id}/members/{mid}",
            update_project_member,
        )
        .delete(
            "/projects/{project_name_or_id}/members/{mid}",
            delete_project_member,
        )
}

/// Harbor's ProjectMemberEntity.
#[derive(Debug, Serialize)]
pub struct ProjectMemberEntity {
    id: i64,
    project_id: i64,
    entity_name: String,
    role_name: &'static str,
    role_id: i64,
    entity_id: i64,
    entity_type: &'static str,
}

impl From<&Member> for ProjectMemberEntity {
    fn from(m: &Member) -> Self {
        Self {
            id: m.id,
            project_id: m.project_id,
            entity_name: m.entity_name.clone(),
            role_name: Role::from_id(m.role_id).map_or("", Role::name),
            role_id: m.role_id,
            entity_id: m.entity.id(),
            entity_type: m.entity.kind(),
        }
    }
}

fn parse_mid(text: &str) -> Result<i64, ApiError> {
    path_int("mid", text)
}

/// A page of the project's members, ordered by entity name.
pub async fn list_project_members(
    State(state): State<AppState>,
    caller: ProjectCaller,
    query: HarborQuery,
    Path(project_name_or_id): Path<String>,
) -> HarborResult<Response> {
    let paging = query.paging()?;
    let access = caller
        .require(&state, &project_name_or_id, Resource::Member, Action::List)
        .await?;
    let project_id = access.project.id;
    let total = state.store.members().count(project_id).await?;
    if total == 0 {
        return Ok(paged(&Vec::<ProjectMemberEntity>::new(), 0, None));
    }
    let entity_name = query.string("entityname");
    let members = state
        .store
        .members()
        .list(project_id, entity_name.as_deref(), paging)
        .await?;
    let wire: Vec<ProjectMemberEntity> = members.iter().map(ProjectMemberEntity::from).collect();
    Ok(paged(&wire, total, query.link(paging, total)))
}

/// Adds a user or group member with a role; 201 with its `Location`.
pub async fn create_project_member(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project_name_or_id): Path<String>,
    body: LaterJson<ProjectMemberReq>,
) -> HarborResult<Response> {
    let access = caller
        .require(
            &state,
            &project_name_or_id,
            Resource::Member,
            Action::Create,
        )
        .await?;
    let req = body.parse()?;
    let reference = caller.project_ref(&project_name_or_id);
    let id = members::add(&state, &caller.principal, &access, &req).await?;
    let location = format!("/api/v2.0/projects/{reference}/members/{id}");
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
}

/// One member of the project.
pub async fn get_project_member(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project_name_or_id, mid)): Path<(String, String)>,
) -> HarborResult<Json<ProjectMemberEntity>> {
    let mid = parse_mid(&mid)?;
    let access = caller
        .require(&state, &project_name_or_id, Resource::Member, Action::Read)
        .await?;
    if mid == 0 {
        return Err(ApiError::bad_request("the member id can not be empty!").into());
    }
    let project_id = access.project.id;
    match state.store.members().find(project_id, mid).await? {
        Some(member) => Ok(Json(ProjectMemberEntity::from(&member))),
        None => Err(ApiError::not_found(format!(
            "the project member is not found, project id {project_id}, member id {mid}"
        ))
        .into()),
    }
}

/// Harbor's RoleRequest.
#[derive(Debug, Deserialize)]
pub struct RoleRequest {
    #[serde(default)]
    role_id: Option<i64>,
}

/// Changes a member's role (a missing member is a no-op, as in Harbor).
pub async fn update_project_member(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project_name_or_id, mid)): Path<(String, String)>,
    body: LaterJson<RoleRequest>,
) -> HarborResult<StatusCode> {
    let mid = parse_mid(&mid)?;
    let access = caller
        .require(
            &state,
            &project_name_or_id,
            Resource::Member,
            Action::Update,
        )
        .await?;
    let req = body.parse()?;
    if mid == 0 {
        return Err(ApiError::bad_request("member id can not be empty").into());
    }
    let Some(role) = req.role_id else {
        return Err(ApiError::bad_request("role can not be empty").into());
    };
    members::change_role(&state, &caller.principal, &access, mid, role).await?;
    Ok(StatusCode::OK)
}

/// Removes a member (a missing member is a no-op, as in Harbor).
pub async fn delete_project_member(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project_name_or_id, mid)): Path<(String, String)>,
) -> HarborResult<StatusCode> {
    let mid = parse_mid(&mid)?;
    let access = caller
        .require(
            &state,
            &project_name_or_id,
            Resource::Member,
            Action::Delete,
        )
        .await?;
    if mid == 0 {
        return Err(ApiError::bad_request("the project member id is required.").into());
    }
    members::remove(&state, &caller.principal, &access, mid).await?;
    Ok(StatusCode::OK)
}
