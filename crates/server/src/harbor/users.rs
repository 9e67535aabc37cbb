//! Harbor's users API (the part clients need).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::{ProjectRef, User};
use berth_domain::rbac::{self, Action, Resource, SystemResource};
use berth_store::repo::users::UserFilter;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorKind, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborJson, HarborQuery, paged, path_int};
use crate::operations::{Routes, Surface};
use crate::service::oidc;
use crate::service::users::{self, LocalUser, require_self_or, user_not_found};
use crate::state::AppState;

/// Harbor's UserResp; empty strings are omitted as go-swagger does.
#[derive(Debug, Serialize)]
pub struct UserResp {
    #[serde(skip_serializing_if = "str::is_empty")]
    email: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    realname: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    comment: String,
    user_id: i64,
    username: String,
    sysadmin_flag: bool,
    admin_role_in_auth: bool,
    creation_time: String,
    update_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    oidc_user_meta: Option<OidcUserMeta>,
}

/// Harbor's OIDCUserInfo: the caller's link to the OpenID provider and CLI secret.
#[derive(Debug, Serialize)]
pub struct OidcUserMeta {
    id: i64,
    user_id: i64,
    subiss: String,
    secret: String,
    creation_time: String,
    update_time: String,
}

impl From<&User> for UserResp {
    fn from(user: &User) -> Self {
        Self {
            email: user.email.clone().unwrap_or_default(),
            realname: user.realname.clone().unwrap_or_default(),
            comment: user.comment.clone().unwrap_or_default(),
            user_id: user.id,
            username: user.username.clone(),
            sysadmin_flag: user.sysadmin,
            admin_role_in_auth: false,
            creation_time: user.created_at.clone(),
            update_time: user.updated_at.clone(),
            oidc_user_meta: None,
        }
    }
}

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/users/current", get_current_user_info)
        .get("/users/current/permissions", get_current_user_permissions)
        .get("/users", list_users)
        .post("/users", create_user)
        .get("/users/search", search_users)
        .get("/users/{user_id}", get_user)
        .put("/users/{user_id}", update_user_profile)
        .delete("/users/{user_id}", delete_user)
        .put("/users/{user_id}/password", update_user_password)
        .put("/users/{user_id}/sysadmin", set_user_sys_admin)
        .put("/users/{user_id}/cli_secret", set_cli_secret)
}

/// The signed-in caller; 401 for anonymous callers. A user of the OpenID
/// provider also gets their link and CLI secret (`oidc_user_meta`).
pub async fn get_current_user_info(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Json<UserResp>> {
    if let Principal::Robot(robot) = &principal {
        return Err(ApiError::new(
            ErrorKind::Precondition,
            format!(
                "get current user not available for security context: {}",
                robot.login
            ),
        )
        .into());
    }
    let user = principal.require_user()?;
    let mut resp = UserResp::from(user);
    resp.admin_role_in_auth = user.admin_role_in_auth;
    resp.oidc_user_meta = oidc::user_meta(&state, user.id)
        .await?
        .map(|link| OidcUserMeta {
            id: link.id,
            user_id: link.user_id,
            subiss: link.subiss,
            secret: link.secret,
            creation_time: link.creation_time,
            update_time: link.update_time,
        });
    Ok(Json(resp))
}

/// Harbor's OIDCCliSecretReq.
#[derive(Debug, Deserialize)]
pub struct OidcCliSecretReq {
    #[serde(default)]
    secret: Option<String>,
}

/// Sets a user's CLI secret under `oidc_auth` (the user themself or an
/// administrator); an empty one makes a random secret.
pub async fn set_cli_secret(
    State(state): State<AppState>,
    principal: Principal,
    Path(user_id): Path<String>,
    HarborJson(req): HarborJson<OidcCliSecretReq>,
) -> HarborResult<StatusCode> {
    let id = parse_user_id(&user_id)?;
    let secret = req.secret.unwrap_or_default();
    oidc::set_cli_secret(&state, &principal, id, &secret).await?;
    Ok(StatusCode::OK)
}

fn parse_user_id(text: &str) -> Result<i64, ApiError> {
    path_int("user_id", text)
}

/// The user `{user_id}` names, for that user or a caller who may do
/// `action` on users.
async fn user_for_self_or(
    state: &AppState,
    principal: &Principal,
    user_id: &str,
    action: Action,
) -> Result<User, ApiError> {
    let id = parse_user_id(user_id)?;
    require_self_or(principal, id, action)?;
    let user = state
        .store
        .users()
        .find_by_id(id)
        .await?
        .ok_or_else(|| user_not_found(id))?;
    Ok(user)
}

/// Harbor's UserCreationReq.
#[derive(Debug, Deserialize)]
pub struct UserCreationReq {
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    realname: Option<String>,
    #[serde(default)]
    comment: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    username: Option<String>,
}

/// Creates a local user: administrators always, anyone while self-registration is on.
pub async fn create_user(
    State(state): State<AppState>,
    principal: Principal,
    HarborJson(req): HarborJson<UserCreationReq>,
) -> HarborResult<Response> {
    let text = |v: Option<String>| v.unwrap_or_default();
    let new = LocalUser {
        username: text(req.username),
        email: text(req.email),
        realname: text(req.realname),
        comment: text(req.comment),
        password: text(req.password),
    };
    let user = users::create(&state, &principal, &new).await?;
    let location = format!("/api/v2.0/users/{}", user.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
}

/// A page of users (administrators); the built-in admin is not counted.
pub async fn list_users(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::User, Action::List)?;
    let filter = UserFilter {
        query: query.query()?,
        sort: query.sort()?,
        paging: query.paging()?,
        username: query.string("username"),
        email: query.string("email"),
    };
    let (total, users) = state.store.users().list_harbor(&filter).await?;
    let wire: Vec<UserResp> = users.iter().map(UserResp::from).collect();
    Ok(paged(&wire, total, query.link(filter.paging, total)))
}

/// Harbor's UserSearchRespItem.
#[derive(Debug, Serialize)]
pub struct UserSearchRespItem {
    user_id: i64,
    username: String,
}

/// Users whose name contains `username`, for any signed-in caller.
pub async fn search_users(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_user()?;
    let paging = query.paging()?;
    let username = query.required("username")?;
    let (total, found) = state.store.users().search_names(&username, paging).await?;
    let wire: Vec<UserSearchRespItem> = found
        .into_iter()
        .map(|(user_id, username)| UserSearchRespItem { user_id, username })
        .collect();
    Ok(paged(&wire, total, query.link(paging, total)))
}

/// One user: the user themself or an administrator.
pub async fn get_user(
    State(state): State<AppState>,
    principal: Principal,
    Path(user_id): Path<String>,
) -> HarborResult<Json<UserResp>> {
    let user = user_for_self_or(&state, &principal, &user_id, Action::Read).await?;
    let mut resp = UserResp::from(&user);
    // Harbor tells the directory's role to the user only.
    resp.admin_role_in_auth =
        principal.user().is_some_and(|me| me.id == user.id) && user.admin_role_in_auth;
    Ok(Json(resp))
}

/// Harbor's UserProfile.
#[derive(Debug, Deserialize)]
pub struct UserProfile {
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    realname: Option<String>,
    #[serde(default)]
    comment: Option<String>,
}

/// Replaces e-mail, real name and comment: the user themself or an administrator.
pub async fn update_user_profile(
    State(state): State<AppState>,
    principal: Principal,
    Path(user_id): Path<String>,
    HarborJson(req): HarborJson<UserProfile>,
) -> HarborResult<StatusCode> {
    let user = user_for_self_or(&state, &principal, &user_id, Action::Update).await?;
    let email = req.email.or(user.email.clone()).unwrap_or_default();
    let realname = req.realname.or(user.realname.clone()).unwrap_or_default();
    let comment = req.comment.or(user.comment.clone()).unwrap_or_default();
    users::update_profile(&state, &principal, &user, &email, &realname, &comment).await?;
    Ok(StatusCode::OK)
}

/// Harbor's PasswordReq.
#[derive(Debug, Deserialize)]
pub struct PasswordReq {
    #[serde(default)]
    old_password: Option<String>,
    #[serde(default)]
    new_password: Option<String>,
}

/// Changes a password: users give their old one; administrators need none for others.
pub async fn update_user_password(
    State(state): State<AppState>,
    principal: Principal,
    Path(user_id): Path<String>,
    HarborJson(req): HarborJson<PasswordReq>,
) -> HarborResult<StatusCode> {
    let id = parse_user_id(&user_id)?;
    let old = req.old_password.unwrap_or_default();
    let new = req.new_password.unwrap_or_default();
    users::set_password(&state, &principal, id, &old, &new).await?;
    Ok(StatusCode::OK)
}

/// Harbor's UserSysAdminFlag.
#[derive(Debug, Deserialize)]
pub struct UserSysAdminFlag {
    #[serde(default)]
    sysadmin_flag: Option<bool>,
}

/// Grants or revokes system administration (administrators). An absent or
/// null `sysadmin_flag` is false, as Harbor reads it (Terraform omits it).
pub async fn set_user_sys_admin(
    State(state): State<AppState>,
    principal: Principal,
    Path(user_id): Path<String>,
    HarborJson(req): HarborJson<UserSysAdminFlag>,
) -> HarborResult<StatusCode> {
    let id = parse_user_id(&user_id)?;
    principal.require_system(SystemResource::User, Action::Update)?;
    let flag = req.sysadmin_flag.unwrap_or(false);
    users::set_sysadmin(&state, &principal, id, flag).await?;
    Ok(StatusCode::OK)
}

/// Marks a user deleted (administrators; not oneself nor the built-in admin).
pub async fn delete_user(
    State(state): State<AppState>,
    principal: Principal,
    Path(user_id): Path<String>,
) -> HarborResult<StatusCode> {
    let id = parse_user_id(&user_id)?;
    users::delete(&state, &principal, id).await?;
    Ok(StatusCode::OK)
}

/// `GET /users/current/permissions?scope&relative`: what the caller may do,
/// as Harbor's `{resource, action}` pairs, over the namespace `scope` is in:
/// a project (`/project/{id}` or `/project/{name}`, and any resource under
/// it, by the caller's roles, the project's publicity or the robot's
/// permissions) or the system (`/system...`, the default: everything for
/// system administrators, what a robot's system permissions grant, creating
/// projects for other users when the configuration lets everyone).
/// Resources are absolute; `relative=true` gives them relative to `scope`
/// (`.` for the scope itself) and leaves out those not under it, as Harbor's
/// `RelativeTo` does.
pub async fn get_current_user_permissions(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Json<Vec<serde_json::Value>>> {
    principal.require_authenticated()?;
    let scope = query
        .get("scope")
        .filter(|s| !s.is_empty())
        .unwrap_or("/system")
        .to_string();
    let relative = query.bool("relative", false);
    // Every (resource, action) of the scope's namespace the caller holds,
    // resources absolute.
    let mut held: Vec<(String, &'static str)> = Vec::new();
    if let Some(rest) = scope.strip_prefix("/project/") {
        let reference = rest.split('/').next().unwrap_or_default();
        let project = reference
            .parse::<i64>()
            .map_or_else(|_| ProjectRef::Name(reference.to_string()), ProjectRef::Id);
        if let Some(found) = state.store.projects().find(&project).await? {
            let access = crate::access::project_access(&state, principal.actor(), found).await?;
            let namespace = format!("/project/{reference}");
            for resource in Resource::ALL {
                for action in Action::ALL {
                    if rbac::project_policy(resource, action) && access.allows(resource, action) {
                        let name = match resource {
                            Resource::Project => namespace.clone(),
                            other => format!("{namespace}/{}", other.name()),
                        };
                        held.push((name, action.name()));
                    }
                }
            }
        }
    } else if scope.starts_with("/system") {
        let config = state.store.configurations().load().await?;
        let everyone_creates = config.string("project_creation_restriction") != "adminonly";
        for (resource, actions) in rbac::SYSTEM_POLICIES {
            for &action in *actions {
                let granted = match &principal {
                    Principal::Robot(robot) => robot.robot.allows_system(resource, action),
                    _ if principal.is_sysadmin() => true,
                    _ => {
                        *resource == "project"
                            && (action == "create" && everyone_creates || action == "list")
                    }
                };
                if granted {
                    held.push((format!("/system/{resource}"), action));
                }
            }
        }
    }
    Ok(Json(
        held.into_iter()
            .filter_map(|(resource, action)| {
                let resource = if relative {
                    let rest = resource.strip_prefix(scope.as_str())?;
                    match rest.strip_prefix('/').unwrap_or(rest) {
                        "" => ".".to_string(),
                        rest => rest.to_string(),
                    }
                } else {
                    resource
                };
                Some(serde_json::json!({"resource": resource, "action": action}))
            })
            .collect(),
    ))
}
