//! User administration for system administrators: the list (search by name,
//! paging), creating users, the administrator flag, password resets and
//! deletes, through the same functions as Harbor's users API.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use berth_domain::query::Paging;
use berth_store::repo::users::UserFilter;
use serde::Deserialize;

use super::html::{self, esc, url_part};
use super::{PortalError, PortalForm, PortalUser, check_form_csrf, pager, see_other};
use crate::error::{ApiError, ErrorKind};
use crate::service::users::{self, LocalUser};
use crate::state::AppState;

/// Users per page.
const PAGE_SIZE: i64 = 15;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/harbor/users", get(list_users).post(create_user))
        .route("/harbor/users/{user_id}/sysadmin", post(set_sysadmin))
        .route("/harbor/users/{user_id}/password", post(reset_password))
        .route("/harbor/users/{user_id}/delete", post(delete_user))
}

/// The list's query: search text, page, and what was just done.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ListQuery {
    #[serde(default)]
    username: String,
    #[serde(default)]
    page: Option<i64>,
    #[serde(default)]
    done: Option<String>,
}

/// `GET /harbor/users`.
async fn list_users(
    State(state): State<AppState>,
    portal: PortalUser,
    Query(query): Query<ListQuery>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    let page = query.page.unwrap_or(1).clamp(1, 1_000_000);
    let name = query.username.trim().to_string();
    let filter = UserFilter {
        query: Default::default(),
        sort: Vec::new(),
        paging: Paging {
            page,
            page_size: PAGE_SIZE,
        },
        username: (!name.is_empty()).then(|| name.clone()),
        email: None,
    };
    let (total, users) = state
        .store
        .users()
        .list_harbor(&filter)
        .await
        .map_err(|e| PortalError::api(e.into(), Some(session)))?;
    let csrf = html::csrf_field(session);
    let mut rows = String::new();
    for user in &users {
        let id = user.id;
        let (flag, toggle) = if user.sysadmin {
            ("false", "Revoke admin")
        } else {
            ("true", "Make admin")
        };
        let actions = if id == session.user.id {
            r#"<span class="muted">you</span>"#.to_string()
        } else {
            format!(
                r#"<form class="inline" method="post" action="/harbor/users/{id}/sysadmin">{csrf}<input type="hidden" name="sysadmin" value="{flag}"><button class="secondary small" type="submit">{toggle}</button></form>
<form class="inline" method="post" action="/harbor/users/{id}/password">{csrf}<input type="password" name="new_password" placeholder="New password" required autocomplete="new-password" aria-label="New password for {name}"><button class="secondary small" type="submit">Reset password</button></form>
<form class="inline" method="post" action="/harbor/users/{id}/delete" data-confirm="Delete user {name}?">{csrf}<button class="danger small" type="submit">Delete</button></form>"#,
                name = esc(&user.username),
            )
        };
        rows.push_str(&format!(
            r#"<tr data-user="{name}"><td>{name}</td><td>{email}</td><td>{realname}</td><td class="admin">{admin}</td><td>{created}</td><td class="actions">{actions}</td></tr>"#,
            name = esc(&user.username),
            email = esc(user.email.as_deref().unwrap_or("")),
            realname = esc(user.realname.as_deref().unwrap_or("")),
            admin = if user.sysadmin { "Yes" } else { "No" },
            created = esc(&html::when(&user.created_at)),
        ));
    }
    if rows.is_empty() {
        rows = r#"<tr><td colspan="6" class="muted">No users.</td></tr>"#.into();
    }
    let notice = match query.done.as_deref() {
        Some("created") => html::notice("ok", "The user was created."),
        Some("sysadmin") => html::notice("ok", "The administrator role was changed."),
        Some("password") => html::notice("ok", "The password was reset."),
        Some("deleted") => html::notice("ok", "The user was deleted."),
        _ => String::new(),
    };
    let main = format!(
        r#"<h1>Users</h1>{notice}
<div class="toolbar">
<form method="get" action="/harbor/users" role="search">
<input type="search" name="username" id="user_search" value="{name}" placeholder="Search by username" aria-label="Search users by username">
<button class="secondary" type="submit">Search</button></form>
</div>
<form class="toolbar" method="post" action="/harbor/users" id="create_user_form">{csrf}
<input type="text" name="username" id="new_username" placeholder="Username" required aria-label="Username">
<input type="email" name="email" id="new_email" placeholder="E-mail" required aria-label="E-mail">
<input type="text" name="realname" id="new_realname" placeholder="Full name" required aria-label="Full name">
<input type="password" name="password" id="new_password" placeholder="Password" required autocomplete="new-password" aria-label="Password">
<button type="submit" id="create_user">New user</button></form>
<p class="muted">Passwords are 8 to 128 characters with at least one upper-case letter, one lower-case letter and one digit.</p>
<table id="users"><thead><tr><th>Username</th><th>E-mail</th><th>Full name</th><th>Administrator</th><th>Created</th><th></th></tr></thead>
<tbody>{rows}</tbody></table>
{pager}"#,
        name = esc(&name),
        pager = pager(
            &format!("/harbor/users?username={}&", url_part(&name)),
            page,
            PAGE_SIZE,
            total,
            "users"
        ),
    );
    Ok(html::page("Users", Some(session), &main).into_response())
}

/// The create form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct CreateForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    realname: String,
    #[serde(default)]
    password: String,
}

/// `POST /harbor/users`: createUser's rules and validation.
async fn create_user(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<CreateForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let new = LocalUser {
        username: form.username.trim().to_string(),
        email: form.email.trim().to_string(),
        realname: form.realname.trim().to_string(),
        comment: String::new(),
        password: form.password.clone(),
    };
    users::create(&state, &portal.principal(), &new)
        .await
        .map_err(|err| {
            let err = match err.kind {
                ErrorKind::Conflict => ApiError::new(
                    ErrorKind::Conflict,
                    "A user with this username or e-mail already exists.",
                ),
                _ => err,
            };
            PortalError::api(err, Some(session))
        })?;
    Ok(see_other("/harbor/users?done=created"))
}

/// The administrator flag form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct SysadminForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    sysadmin: String,
}

/// `POST /harbor/users/{user_id}/sysadmin`: setUserSysAdmin's rules.
async fn set_sysadmin(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(user_id): Path<String>,
    PortalForm(form): PortalForm<SysadminForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let id = user_id_of(&user_id).map_err(failed)?;
    users::set_sysadmin(&state, &portal.principal(), id, form.sysadmin == "true")
        .await
        .map_err(failed)?;
    Ok(see_other("/harbor/users?done=sysadmin"))
}

/// The password reset form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct PasswordForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    new_password: String,
}

/// `POST /harbor/users/{user_id}/password`: updateUserPassword's rules (an
/// administrator resetting another user's password needs no old one).
async fn reset_password(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(user_id): Path<String>,
    PortalForm(form): PortalForm<PasswordForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let id = user_id_of(&user_id).map_err(failed)?;
    if id == session.user.id {
        return Err(failed(ApiError::bad_request(
            "Change your own password with your current one, not here.",
        )));
    }
    users::set_password(&state, &portal.principal(), id, "", &form.new_password)
        .await
        .map_err(failed)?;
    Ok(see_other("/harbor/users?done=password"))
}

/// The delete form's field.
#[derive(Debug, Deserialize)]
pub(super) struct DeleteForm {
    #[serde(default)]
    csrf_token: String,
}

/// `POST /harbor/users/{user_id}/delete`: deleteUser's rules.
async fn delete_user(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(user_id): Path<String>,
    PortalForm(form): PortalForm<DeleteForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let id = user_id_of(&user_id).map_err(failed)?;
    users::delete(&state, &portal.principal(), id)
        .await
        .map_err(failed)?;
    Ok(see_other("/harbor/users?done=deleted"))
}

/// The numeric user id of a portal path.
fn user_id_of(text: &str) -> Result<i64, ApiError> {
    crate::extract::harbor::path_int("user_id", text)
}
