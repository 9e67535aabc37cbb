//! `/users` (generator-rest.md §4.1): sign-up with the master key, the admin
//! list, public and own views, profile and password changes, deletion.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use berth_domain::model::{ADMIN_USER_ID, NewUser, User};
use berth_domain::rest_query::{self, keywords_of};
use berth_store::StoreError;
use md5::{Digest, Md5};

use super::input::{PathParam, RestInput, not_found, parse_id, rule_error};
use super::views::UserView;
use crate::error::{ApiError, ErrorKind, RestMessage, RestResult};
use crate::identity;
use crate::operations::{Routes, Surface};
use crate::service::users;
use crate::state::AppState;
use axum::http::Method;
use axum::routing::{delete, put};

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Rest)
        .get("/users", index_users)
        .post("/users", create_user)
        .get("/users/me", show_me)
        .named(Method::PUT, "/users/me", "update_me", put(update_user))
        .named(
            Method::DELETE,
            "/users/me",
            "destroy_me",
            delete(destroy_user),
        )
        .get("/users/{id}", show_user)
        .put("/users/{id}", update_user)
        .delete("/users/{id}", destroy_user)
        .put("/users/{id}/password", update_password)
}

/// generator-rest's avatar default: the identicon of the e-mail's MD5.
pub(super) fn gravatar(email: &str) -> String {
    let hash = Md5::digest(email.trim().to_lowercase().as_bytes());
    format!(
        "https://gravatar.com/avatar/{}?d=identicon",
        hex::encode(hash)
    )
}

/// generator-rest's default name: the e-mail's part before the last `@`.
pub(super) fn default_name(email: &str) -> Option<String> {
    email.rsplit_once('@').map(|(local, _)| local.to_string())
}

/// The search keywords of a user: normalized e-mail and name.
pub(super) fn user_keywords(email: Option<&str>, name: Option<&str>) -> String {
    keywords_of([email, name])
}

/// 409 `email already registered`.
fn email_taken() -> ApiError {
    ApiError {
        detail: Some(RestMessage::about("email", "email already registered").to_json()),
        ..ApiError::new(ErrorKind::Conflict, "email already registered")
    }
}

/// The live (non-deleted) user with `id`, or 404.
pub(super) async fn live_user(state: &AppState, id: i64) -> RestResult<User> {
    Ok(state
        .store
        .users()
        .find_by_id(id)
        .await?
        .ok_or_else(not_found)?)
}

/// The user a path id names: `me` is the caller; a malformed or unknown id is 404.
async fn target_user(state: &AppState, id: Option<&str>, caller: &User) -> RestResult<User> {
    let id = match id {
        None | Some("me") => caller.id,
        Some(text) => parse_id(text).ok_or_else(not_found)?,
    };
    live_user(state, id).await
}

/// `POST /users` (master key): 201 with the full view; 403 outside `db_auth`, as Harbor's createUser.
pub async fn create_user(
    State(state): State<AppState>,
    input: RestInput,
) -> RestResult<(StatusCode, Json<UserView>)> {
    input.require_master(&state)?;
    crate::directory::local_users_allowed(&state).await?;
    let email =
        rest_query::validate_email("email", input.field("email").as_deref()).map_err(rule_error)?;
    let password = rest_query::validate_password("password", input.field("password").as_deref())
        .map_err(rule_error)?;
    let name =
        rest_query::validate_name("name", input.trimmed_field("name")).map_err(rule_error)?;
    let picture = input.trimmed_field("picture");
    let sysadmin = rest_query::validate_role(input.field("role").as_deref()).map_err(rule_error)?;
    if state.store.users().find_by_login(&email).await?.is_some() {
        return Err(email_taken().into());
    }
    let name = name.or_else(|| default_name(&email));
    let picture = picture.unwrap_or_else(|| gravatar(&email));
    let password_hash = identity::hash_password(&password).await?;
    let new = NewUser {
        username: email.clone(),
        keywords: user_keywords(Some(&email), name.as_deref()),
        email: Some(email),
        realname: name,
        picture: Some(picture),
        password_hash: Some(password_hash),
        sysadmin,
        ..NewUser::default()
    };
    let user = match state.store.users().create(&new).await {
        Ok(user) => user,
        Err(StoreError::Domain(berth_domain::DomainError::Conflict(_))) => {
            return Err(email_taken().into());
        }
        Err(other) => return Err(other.into()),
    };
    Ok((StatusCode::CREATED, Json(UserView::full(&user))))
}

/// `GET /users` (admin token): public views, `q`/`page`/`limit`/`sort`/`fields`.
pub async fn index_users(
    State(state): State<AppState>,
    input: RestInput,
) -> RestResult<Json<Vec<UserView>>> {
    input.require_admin(&state).await?;
    let query = input.list_query()?;
    let users = state.store.users().list_rest(&query).await?;
    Ok(Json(
        users
            .iter()
            .map(|u| UserView::public(u).project(&query.fields))
            .collect(),
    ))
}

/// `GET /users/me` (token): the caller's full view.
pub async fn show_me(
    State(state): State<AppState>,
    input: RestInput,
) -> RestResult<Json<UserView>> {
    let user = input.require_user(&state).await?;
    Ok(Json(UserView::full(&user)))
}

/// `GET /users/:id` (anyone): the public view.
pub async fn show_user(State(state): State<AppState>, id: PathParam) -> RestResult<Json<UserView>> {
    let id = parse_id(id.as_str()).ok_or_else(not_found)?;
    let user = live_user(&state, id).await?;
    Ok(Json(UserView::public(&user)))
}

/// `PUT /users/:id` (token; self or admin): replaces `name` and `picture`.
pub async fn update_user(
    State(state): State<AppState>,
    id: PathParam,
    input: RestInput,
) -> RestResult<Json<UserView>> {
    let caller = input.require_user(&state).await?;
    let target = target_user(&state, id.0.as_deref(), &caller).await?;
    if caller.id != target.id && !caller.is_sysadmin() {
        return Err(ApiError {
            detail: Some(RestMessage::new("You can't change other user's data").to_json()),
            ..ApiError::unauthorized()
        }
        .into());
    }
    let name =
        rest_query::validate_name("name", input.trimmed_field("name")).map_err(rule_error)?;
    let picture = input.trimmed_field("picture");
    let keywords = user_keywords(target.email.as_deref(), name.as_deref());
    let user = users::update_rest_profile(
        &state,
        target.id,
        name.as_deref(),
        picture.as_deref(),
        &keywords,
    )
    .await?
    .ok_or_else(not_found)?;
    Ok(Json(UserView::full(&user)))
}

/// `PUT /users/:id/password` (Basic credentials of that same user): 200 with the full view.
pub async fn update_password(
    State(state): State<AppState>,
    id: PathParam,
    input: RestInput,
) -> RestResult<Json<UserView>> {
    let caller = input.require_basic_user(&state).await?;
    let password = rest_query::validate_password("password", input.field("password").as_deref())
        .map_err(rule_error)?;
    let target = target_user(&state, Some(id.as_str()), &caller).await?;
    if caller.id != target.id {
        return Err(ApiError {
            detail: Some(
                RestMessage::about("password", "You can't change other user's password").to_json(),
            ),
            ..ApiError::unauthorized()
        }
        .into());
    }
    crate::directory::locally_modifiable(&state, target.id).await?;
    if !users::store_password(&state, target.id, &password).await? {
        return Err(not_found().into());
    }
    let user = live_user(&state, target.id).await?;
    Ok(Json(UserView::full(&user)))
}

/// `DELETE /users/:id` (admin token): 204. The user becomes a tombstone.
/// Neither the built-in administrator nor the caller can be deleted (403), as
/// Harbor's deleteUser refuses.
pub async fn destroy_user(
    State(state): State<AppState>,
    id: PathParam,
    input: RestInput,
) -> RestResult<StatusCode> {
    let caller = input.require_admin(&state).await?;
    let id = parse_id(id.as_str()).ok_or_else(not_found)?;
    if id == caller.id || id == ADMIN_USER_ID {
        return Err(ApiError::forbidden(format!("the user {id} cannot be deleted")).into());
    }
    if !users::tombstone(&state, id).await? {
        return Err(not_found().into());
    }
    Ok(StatusCode::NO_CONTENT)
}
