//! Project members: adding a user or group (onboarding it from the LDAP
//! directory when needed), changing a role, removing one, for every surface.

use berth_auth::ldap;
use berth_domain::model::MemberEntity;
use berth_domain::model::group::GROUP_TYPE_OIDC;
use berth_domain::rbac::{Action, Resource, Role};
use berth_store::repo::members::MemberChange;
use serde::Deserialize;

use crate::access::ProjectAccess;
use crate::directory;
use crate::error::{ApiError, ErrorKind};
use crate::extract::Principal;
use crate::state::AppState;

/// Harbor's message for a duplicate membership.
const DUPLICATE_MEMBER: &str = "The project member specified already exist";

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
    pub fn user(username: String, role_id: i64) -> Self {
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
        let groups = state.store.groups();
        return match groups.find_by_name(group_type, name).await? {
            Some(found) => Ok(MemberEntity::Group(found.id)),
            // An OIDC group is only a name: like Harbor, add it before anyone
            // of it has signed in.
            None if group_type == GROUP_TYPE_OIDC => {
                let ids = groups
                    .onboard_by_names(GROUP_TYPE_OIDC, &[name.to_string()])
                    .await?;
                ids.first()
                    .map(|id| MemberEntity::Group(*id))
                    .ok_or_else(|| ApiError::internal("an OIDC group was not created"))
            }
            None => Err(ApiError::bad_request(format!(
                "the group {name} is not known here and directory onboarding is not available"
            ))),
        };
    }
    Err(ApiError::bad_request(
        "at least one of member_user or member_group must be provided",
    ))
}

/// Adds the user or group `req` names to the project of `access` with its
/// role (member create permission there); the new member's id. Records
/// `member.added`.
pub async fn add(
    state: &AppState,
    principal: &Principal,
    access: &ProjectAccess,
    req: &ProjectMemberReq,
) -> Result<i64, ApiError> {
    access.require(Resource::Member, Action::Create)?;
    let project = &access.project;
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
    let change = change_of(access, principal);
    let id = state
        .store
        .members()
        .create(project.id, entity, role, &change)
        .await
        .map_err(|err| match ApiError::from(err) {
            // Added by a request racing this one.
            err if err.kind == ErrorKind::Conflict => {
                ApiError::new(ErrorKind::Conflict, DUPLICATE_MEMBER)
            }
            err => err,
        })?;
    state.deliver_events();
    Ok(id)
}

/// Who changes the members of the project of `access`, as the store records it.
fn change_of<'a>(access: &'a ProjectAccess, principal: &'a Principal) -> MemberChange<'a> {
    MemberChange {
        project_name: &access.project.name,
        by: principal.audit_name(),
    }
}

/// Gives member `mid` of the project of `access` role `role` (member update
/// permission; Harbor's 400 for a role outside 1-5; a missing member is a
/// no-op); records `member.changed`.
pub async fn change_role(
    state: &AppState,
    principal: &Principal,
    access: &ProjectAccess,
    mid: i64,
    role: i64,
) -> Result<(), ApiError> {
    access.require(Resource::Member, Action::Update)?;
    let project = &access.project;
    if Role::from_id(role).is_none() {
        return Err(ApiError::bad_request(
            "Failed to update project member, role is not in 1,2,3,4,5",
        ));
    }
    let change = change_of(access, principal);
    state
        .store
        .members()
        .update_role(project.id, mid, role, &change)
        .await?;
    state.deliver_events();
    Ok(())
}

/// Removes member `mid` of the project of `access` (member delete
/// permission; a missing member is a no-op); records `member.removed`.
pub async fn remove(
    state: &AppState,
    principal: &Principal,
    access: &ProjectAccess,
    mid: i64,
) -> Result<(), ApiError> {
    access.require(Resource::Member, Action::Delete)?;
    let project = &access.project;
    let change = change_of(access, principal);
    state
        .store
        .members()
        .delete(project.id, mid, &change)
        .await?;
    state.deliver_events();
    Ok(())
}

/// Whether users and groups unknown here are looked up in the LDAP directory.
async fn ldap_mode(state: &AppState) -> Result<bool, ApiError> {
    let config = state.store.configurations().load().await?;
    Ok(config.string("auth_mode") == directory::LDAP_AUTH)
}
