//! Project members: listProjectMembers, createProjectMember, getProjectMember,
//! updateProjectMember, deleteProjectMember.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_auth::ldap;
use berth_domain::model::{Member, MemberEntity, Project};
use berth_domain::rbac::{Action, Resource, Role};
use berth_store::repo::members::DUPLICATE_MEMBER;
use serde::{Deserialize, Serialize};

use crate::directory;
use crate::error::{ApiError, ErrorKind, HarborResult};
use crate::extract::harbor::{HarborQuery, LaterJson, paged, path_int};
use crate::harbor::projects::ProjectCaller;
use crate::operations::{Routes, Surface};
use crate::state::AppState;
use berth_store::repo::members::MemberChange;

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

/// Harbor's UserEntity.
#[derive(Debug, Default, Deserialize)]
pub struct UserEntity {
    #[serde(default)]
    user_id: Option<i64>,
    #[serde(default)]
    username: Option<String>,
}

/// Harbor's UserGroup as a member request names it.
#[derive(Debug, Default, Deserialize)]
pub struct UserGroupReq {
    #[serde(default)]
    id: Option<i64>,
    #[serde(default)]
    group_name: Option<String>,
    #[serde(default)]
    group_type: Option<i64>,
    #[serde(default)]
    ldap_group_dn: Option<String>,
}

/// Harbor's ProjectMember request.
#[derive(Debug, Deserialize)]
pub struct ProjectMemberReq {
    #[serde(default)]
    role_id: Option<i64>,
    #[serde(default)]
    member_user: Option<UserEntity>,
    #[serde(default)]
    member_group: Option<UserGroupReq>,
}

impl ProjectMemberReq {
    /// A request adding the user named `username` with role `role_id`.
    pub(crate) fn user(username: String, role_id: i64) -> Self {
        Self {
            role_id: Some(role_id),
            member_user: Some(UserEntity {
                user_id: None,
                username: Some(username),
            }),
            member_group: None,
        }
    }
}

async fn resolve_entity(
    state: &AppState,
    req: &ProjectMemberReq,
) -> Result<MemberEntity, ApiError> {
    let user = req.member_user.as_ref();
    let group = req.member_group.as_ref();
    if let Some(id) = user.and_then(|u| u.user_id).filter(|id| *id > 0) {
        return match state.store.users().find_by_id(id).await? {
            Some(u) => Ok(MemberEntity::User(u.id)),
            None => Err(ApiError::bad_request(format!("User {id} not found"))),
        };
    }
    if let Some(id) = group.and_then(|g| g.id).filter(|id| *id > 0) {
        return match state.store.groups().find_by_id(id).await? {
            Some(g) => Ok(MemberEntity::Group(g.id)),
            None => Err(ApiError::bad_request(format!("Group {id} not found"))),
        };
    }
    if let Some(name) = user
        .and_then(|u| u.username.as_deref())
        .filter(|n| !n.is_empty())
    {
        let found = match state.store.users().find_by_username(name).await? {
            Some(u) => Some(u),
            None if ldap_mode(state).await? => directory::onboard_username(state, name).await?,
            None => None,
        };
        return match found {
            Some(u) => Ok(MemberEntity::User(u.id)),
            None => Err(ApiError::not_found(format!("user {name} is not found"))),
        };
    }
    if let Some(dn) = group
        .and_then(|g| g.ldap_group_dn.as_deref())
        .filter(|d| !d.is_empty())
    {
        let alias = group.and_then(|g| g.group_name.as_deref());
        let found = match state
            .store
            .groups()
            .find_by_ldap_dn(&ldap::normalize_dn(dn))
            .await?
        {
            Some(g) => Some(g),
            None if ldap_mode(state).await? => directory::onboard_group(state, dn, alias).await?,
            None => None,
        };
        return match found {
            Some(g) => Ok(MemberEntity::Group(g.id)),
            None => Err(ApiError::not_found(format!(
                "the LDAP group {dn} is not found"
            ))),
        };
    }
    if let Some(g) = group
        && let Some(name) = g.group_name.as_deref().filter(|n| !n.is_empty())
    {
        let group_type = g.group_type.unwrap_or(0);
        return match state.store.groups().find_by_name(group_type, name).await? {
            Some(found) => Ok(MemberEntity::Group(found.id)),
            None => Err(ApiError::bad_request(format!(
                "the group {name} is not known here and directory onboarding is not available"
            ))),
        };
    }
    Err(ApiError::bad_request(
        "at least one of member_user or member_group must be provided",
    ))
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
    let id = add_member(&state, &access.project, &req, caller.principal.audit_name()).await?;
    let location = format!("/api/v2.0/projects/{reference}/members/{id}");
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
}

/// Adds the user or group `req` names to `project` with its role (the caller,
/// `actor`, was allowed to create members there); the new member's id.
pub(crate) async fn add_member(
    state: &AppState,
    project: &berth_domain::model::Project,
    req: &ProjectMemberReq,
    actor: &str,
) -> Result<i64, ApiError> {
    let entity = resolve_entity(state, req).await?;
    if state.store.members().is_member(project.id, entity).await? {
        return Err(ApiError::new(ErrorKind::Conflict, DUPLICATE_MEMBER));
    }
    let role = req.role_id.unwrap_or(0);
    if Role::from_id(role).is_none() {
        return Err(ApiError::bad_request(
            "Failed to update project member, role is not in 1,2,3,4,5",
        ));
    }
    let change = MemberChange {
        project_name: &project.name,
        by: actor,
    };
    let id = state
        .store
        .members()
        .create(project.id, entity, role, &change)
        .await?;
    state.deliver_events();
    Ok(id)
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
    change_member_role(
        &state,
        &access.project,
        mid,
        role,
        caller.principal.audit_name(),
    )
    .await?;
    Ok(StatusCode::OK)
}

/// Gives member `mid` of `project` role `role` (Harbor's 400 for a role
/// outside 1-5; a missing member is a no-op) and notes it in the audit log:
/// updateProjectMember's rules, for every surface.
pub(crate) async fn change_member_role(
    state: &AppState,
    project: &Project,
    mid: i64,
    role: i64,
    who: &str,
) -> Result<(), ApiError> {
    if Role::from_id(role).is_none() {
        return Err(ApiError::bad_request(
            "Failed to update project member, role is not in 1,2,3,4,5",
        ));
    }
    let change = MemberChange {
        project_name: &project.name,
        by: who,
    };
    state
        .store
        .members()
        .update_role(project.id, mid, role, &change)
        .await?;
    state.deliver_events();
    Ok(())
}

/// Removes member `mid` of `project` (a missing member is a no-op) and notes
/// it in the audit log: deleteProjectMember's rules, for every surface.
pub(crate) async fn remove_member(
    state: &AppState,
    project: &Project,
    mid: i64,
    who: &str,
) -> Result<(), ApiError> {
    let change = MemberChange {
        project_name: &project.name,
        by: who,
    };
    state
        .store
        .members()
        .delete(project.id, mid, &change)
        .await?;
    state.deliver_events();
    Ok(())
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
    remove_member(&state, &access.project, mid, caller.principal.audit_name()).await?;
    Ok(StatusCode::OK)
}

/// Whether users and groups unknown here are looked up in the LDAP directory.
async fn ldap_mode(state: &AppState) -> Result<bool, ApiError> {
    let config = state.store.configurations().load().await?;
    Ok(config.string("auth_mode") == directory::LDAP_AUTH)
}
