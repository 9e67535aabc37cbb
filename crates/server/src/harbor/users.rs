//! Harbor's users API (the part clients need).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::user::{validate_password, validate_profile, validate_username};
use berth_domain::model::{ADMIN_USER_ID, NewUser, User};
use berth_store::repo::users::UserFilter;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorKind, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborJson, HarborQuery, paged, path_int};
use crate::identity;
use crate::operations::{Routes, Surface};
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
        }
    }
}

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/users/current", get_current_user_info)
        .get("/users", list_users)
        .post("/users", create_user)
        .get("/users/search", search_users)
        .get("/users/{user_id}", get_user)
        .put("/users/{user_id}", update_user_profile)
        .delete("/users/{user_id}", delete_user)
        .put("/users/{user_id}/password", update_user_password)
        .put("/users/{user_id}/sysadmin", set_user_sys_admin)
}

/// The signed-in caller; 401 for anonymous callers.
pub async fn get_current_user_info(principal: Principal) -> HarborResult<Json<UserResp>> {
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
    Ok(Json(UserResp::from(principal.require_user()?)))
}

fn parse_user_id(text: &str) -> Result<i64, ApiError> {
    path_int("user_id", text)
}

fn user_not_found(id: i64) -> ApiError {
    ApiError::not_found(format!("user {id} not found"))
}

/// Passes the user themself and system administrators; 401/403 otherwise.
fn require_self_or_admin(principal: &Principal, id: i64) -> Result<&User, ApiError> {
    let caller = principal.require_user()?;
    if caller.sysadmin || caller.id == id {
        Ok(caller)
    } else {
        Err(ApiError::forbidden("forbidden"))
    }
}

/// The user `{user_id}` names, for that user or an administrator, with the caller.
async fn user_for_self_or_admin<'p>(
    state: &AppState,
    principal: &'p Principal,
    user_id: &str,
) -> Result<(&'p User, User), ApiError> {
    let id = parse_user_id(user_id)?;
    let caller = require_self_or_admin(principal, id)?;
    let user = state
        .store
        .users()
        .find_by_id(id)
        .await?
        .ok_or_else(|| user_not_found(id))?;
    Ok((caller, user))
}

/// What the generator-rest `q` searches: the e-mail and the name, normalized as there.
fn keywords(email: &str, realname: &str) -> String {
    berth_domain::rest_query::keywords_of([Some(email), Some(realname)])
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
    let user = create_user_as(&state, &principal, &req).await?;
    let location = format!("/api/v2.0/users/{}", user.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
}

impl UserCreationReq {
    /// A request with these fields (an empty comment).
    pub fn new(username: &str, email: &str, realname: &str, password: &str) -> Self {
        Self {
            email: Some(email.to_string()),
            realname: Some(realname.to_string()),
            comment: None,
            password: Some(password.to_string()),
            username: Some(username.to_string()),
        }
    }
}

/// createUser's rules for `principal` (the API and the portal): local users
/// only, administrators unless self-registration is on, Harbor's validation.
pub async fn create_user_as(
    state: &AppState,
    principal: &Principal,
    req: &UserCreationReq,
) -> Result<User, ApiError> {
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let (username, email, realname, comment, password) = (
        text(&req.username),
        text(&req.email),
        text(&req.realname),
        text(&req.comment),
        text(&req.password),
    );
    let config = crate::directory::local_users_allowed(state).await?;
    if !config.flag("self_registration") {
        principal.require_sysadmin()?;
    }
    validate_username(&username)?;
    validate_profile(&email, &realname, &comment)?;
    validate_password(&password)?;
    let hash = identity::hash_password(&password).await?;
    let user = state
        .store
        .users()
        .create(&NewUser {
            keywords: keywords(&email, &realname),
            username,
            email: Some(email),
            realname: Some(realname),
            comment: Some(comment).filter(|c| !c.is_empty()),
            password_hash: Some(hash),
            ..NewUser::default()
        })
        .await?;
    Ok(user)
}

/// A page of users (administrators); the built-in admin is not counted.
pub async fn list_users(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_sysadmin()?;
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
    let (_, user) = user_for_self_or_admin(&state, &principal, &user_id).await?;
    Ok(Json(UserResp::from(&user)))
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
    let (_, user) = user_for_self_or_admin(&state, &principal, &user_id).await?;
    let id = user.id;
    crate::directory::locally_modifiable(&state, id).await?;
    let email = req.email.or(user.email).unwrap_or_default();
    let realname = req.realname.or(user.realname).unwrap_or_default();
    let comment = req.comment.or(user.comment).unwrap_or_default();
    validate_profile(&email, &realname, &comment)?;
    if !state
        .store
        .users()
        .update_harbor_profile(
            id,
            &email,
            &realname,
            &comment,
            &keywords(&email, &realname),
        )
        .await?
    {
        return Err(user_not_found(id).into());
    }
    identity::forget_user(&state, id);
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
    set_password_as(&state, &principal, id, &req).await?;
    Ok(StatusCode::OK)
}

impl PasswordReq {
    /// An administrator's reset: a new password only.
    pub fn reset(new_password: &str) -> Self {
        Self {
            old_password: None,
            new_password: Some(new_password.to_string()),
        }
    }
}

/// updateUserPassword's rules for `principal` on user `id` (the API and the portal).
pub async fn set_password_as(
    state: &AppState,
    principal: &Principal,
    id: i64,
    req: &PasswordReq,
) -> Result<(), ApiError> {
    let caller = require_self_or_admin(principal, id)?;
    crate::directory::locally_modifiable(state, id).await?;
    let user = state
        .store
        .users()
        .find_by_id(id)
        .await?
        .ok_or_else(|| user_not_found(id))?;
    let stored = user.password_hash.clone().unwrap_or_default();
    let old_password = req.old_password.clone().unwrap_or_default();
    let new_password = req.new_password.clone().unwrap_or_default();
    if caller.id == id {
        let matches =
            !stored.is_empty() && identity::check_password(&old_password, &stored).await?;
        if !matches {
            return Err(ApiError::forbidden("the old password is incorrect"));
        }
    }
    validate_password(&new_password)?;
    if new_password == old_password && caller.id == id {
        return Err(ApiError::bad_request(
            "the new password can not be same with the old one",
        ));
    }
    let hash = identity::hash_password(&new_password).await?;
    if !state.store.users().set_password(id, &hash).await? {
        return Err(user_not_found(id));
    }
    identity::forget_user(state, id);
    Ok(())
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
    principal.require_sysadmin()?;
    let flag = req.sysadmin_flag.unwrap_or(false);
    set_sysadmin_as(&state, &principal, id, flag).await?;
    Ok(StatusCode::OK)
}

/// setUserSysAdmin's rules for `principal` (the API and the portal).
pub async fn set_sysadmin_as(
    state: &AppState,
    principal: &Principal,
    id: i64,
    flag: bool,
) -> Result<(), ApiError> {
    principal.require_sysadmin()?;
    if id == ADMIN_USER_ID && !flag {
        return Err(ApiError::forbidden(
            "the built-in admin cannot lose its administrator role",
        ));
    }
    if !state.store.users().set_sysadmin(id, flag).await? {
        return Err(user_not_found(id));
    }
    identity::forget_user(state, id);
    Ok(())
}

/// Marks a user deleted (administrators; not oneself nor the built-in admin).
pub async fn delete_user(
    State(state): State<AppState>,
    principal: Principal,
    Path(user_id): Path<String>,
) -> HarborResult<StatusCode> {
    let id = parse_user_id(&user_id)?;
    delete_user_as(&state, &principal, id).await?;
    Ok(StatusCode::OK)
}

/// deleteUser's rules for `principal` (the API and the portal).
pub async fn delete_user_as(
    state: &AppState,
    principal: &Principal,
    id: i64,
) -> Result<(), ApiError> {
    let caller = principal.require_sysadmin()?;
    if id == caller.id || id == ADMIN_USER_ID {
        return Err(ApiError::forbidden(format!(
            "the user {id} cannot be deleted"
        )));
    }
    if !state.store.users().tombstone(id).await? {
        return Err(user_not_found(id));
    }
    identity::forget_user(state, id);
    Ok(())
}
