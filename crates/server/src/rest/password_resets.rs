//! `/password-resets` (generator-rest.md §4.3): a one-hour, single-use token
//! mailed as a link; the token itself is stored only as its SHA-256.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use berth_auth::secret::random_alphanumeric;
use berth_domain::rest_query;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::input::{PathParam, RestInput, not_found, rule_error};
use super::users::live_user;
use super::views::UserView;
use crate::error::{ApiError, ErrorKind, RestResult};
use crate::operations::{Routes, Surface};
use crate::service::users;
use crate::state::AppState;

/// How long a reset token lives.
const RESET_TTL_SECS: i64 = 3600;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Rest)
        .post("/password-resets", create_password_reset)
        .get("/password-resets/{token}", show_password_reset)
        .put("/password-resets/{token}", update_password_reset)
}

/// `{user, token}`.
#[derive(Debug, Serialize)]
pub struct PasswordResetView {
    user: UserView,
    token: String,
}

fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Only well-formed tokens are looked up (32 characters `[A-Za-z0-9]`).
fn well_formed(token: &str) -> bool {
    token.len() == 32 && token.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `POST /password-resets` (master key; `email`, `link`): 202, empty body,
/// after the mail was handed to the SMTP server.
pub async fn create_password_reset(
    State(state): State<AppState>,
    input: RestInput,
) -> RestResult<StatusCode> {
    input.require_master(&state)?;
    let email =
        rest_query::validate_email("email", input.field("email").as_deref()).map_err(rule_error)?;
    let link =
        rest_query::required_text("link", input.field("link").as_deref()).map_err(rule_error)?;
    // An unknown e-mail is a 404 before anything else, as in the reference.
    let user = state
        .store
        .users()
        .find_by_email(&email)
        .await?
        .ok_or_else(not_found)?;
    let Some(mailer) = state.rest.mailer.clone() else {
        return Err(ApiError::new(
            ErrorKind::Unavailable,
            "password reset by e-mail is not configured on this server (SMTP_URL)",
        )
        .into());
    };
    let token = random_alphanumeric(32);
    let hash = token_hash(&token);
    state
        .store
        .password_resets()
        .create(&hash, user.id, RESET_TTL_SECS)
        .await?;
    let link = format!("{}/{token}", link.strip_suffix('/').unwrap_or(&link));
    let name = escape_html(user.realname.as_deref().unwrap_or(""));
    let html = format!(
        "Hey, {name}.<br><br>\r\n\
         You requested a new password for your {app} account.<br>\r\n\
         Please use the following link to set a new password. It will expire in 1 hour.<br><br>\r\n\
         <a href=\"{href}\">{text}</a><br><br>\r\n\
         If you didn't make this request then you can safely ignore this email. :)<br><br>\r\n\
         &mdash; {app} Team\r\n",
        app = escape_html(&state.rest.config.app_name),
        href = escape_html(&link),
        text = escape_html(&link),
    );
    let subject = format!("{} - Password Reset", state.rest.config.app_name);
    let to = user.email.clone().unwrap_or(email);
    if let Err(cause) = mailer.send_html(&to, &subject, html).await {
        state.store.password_resets().delete(&hash).await?;
        tracing::warn!(%cause, "password reset e-mail not sent");
        return Err(ApiError::new(ErrorKind::BadGateway, "the e-mail could not be sent").into());
    }
    Ok(StatusCode::ACCEPTED)
}

/// `GET /password-resets/:token` (anyone): 200 `{user, token}` while the token is live.
pub async fn show_password_reset(
    State(state): State<AppState>,
    PathParam(token): PathParam,
) -> RestResult<Json<PasswordResetView>> {
    let token = token.unwrap_or_default();
    if !well_formed(&token) {
        return Err(not_found().into());
    }
    let user_id = state
        .store
        .password_resets()
        .find_user_id(&token_hash(&token))
        .await?
        .ok_or_else(not_found)?;
    let user = live_user(&state, user_id).await?;
    Ok(Json(PasswordResetView {
        user: UserView::full(&user),
        token,
    }))
}

/// `PUT /password-resets/:token` (`password`): sets the password, then every
/// reset of the user is gone; 200 with the full user view.
pub async fn update_password_reset(
    State(state): State<AppState>,
    token: PathParam,
    input: RestInput,
) -> RestResult<Json<UserView>> {
    let token = token.as_str();
    let password = rest_query::validate_password("password", input.field("password").as_deref())
        .map_err(rule_error)?;
    if !well_formed(token) {
        return Err(not_found().into());
    }
    let hash = token_hash(token);
    let user_id = users::redeem_reset(&state, &hash, &password)
        .await?
        .ok_or_else(not_found)?;
    let user = live_user(&state, user_id).await?;
    Ok(Json(UserView::full(&user)))
}
