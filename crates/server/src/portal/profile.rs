//! The signed-in user's own page: who they are and, for a user of the OpenID
//! provider, the CLI secret docker, podman, skopeo and helm sign in with
//! (copied from here, or replaced by a new random one).

use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::html::{self, esc};
use super::{PortalError, PortalForm, PortalUser, TokenForm, check_form_csrf, see_other};
use crate::service::oidc;
use crate::state::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/harbor/profile", get(show_profile))
        .route("/harbor/profile/cli-secret", post(renew_cli_secret))
}

/// What was just done.
#[derive(Debug, Default, Deserialize)]
struct ProfileQuery {
    #[serde(default)]
    renewed: Option<String>,
}

/// `GET /harbor/profile`.
async fn show_profile(
    State(state): State<AppState>,
    portal: PortalUser,
    Query(query): Query<ProfileQuery>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    let user = &session.user;
    let link = oidc::user_meta(&state, user.id)
        .await
        .map_err(|e| PortalError::api(e, Some(session)))?;
    let secret = match link {
        Some(link) => {
            let notice = if query.renewed.is_some() {
                html::notice(
                    "ok",
                    "A new CLI secret is in effect; the old one no longer works.",
                )
            } else {
                String::new()
            };
            format!(
                r#"<h2>CLI secret</h2>{notice}
<p class="muted">Your password for <code>docker login</code>, podman, skopeo, helm and the API: you sign in to this page through the OIDC provider, which they cannot do. It works while the provider still knows you.</p>
<p><code id="cli_secret" class="secret">{masked}</code> <button type="button" class="secondary small" id="copy_cli_secret" data-copy="{secret}">Copy</button></p>
<form method="post" action="/harbor/profile/cli-secret">{csrf}<button type="submit" class="secondary" id="renew_cli_secret">Generate a new secret</button></form>"#,
                masked = "•".repeat(12),
                secret = esc(&link.secret),
                csrf = html::csrf_field(session),
            )
        }
        None => String::new(),
    };
    let main = format!(
        r#"<h1>Your profile</h1>
<dl class="stats" id="profile"><dt>Username</dt><dd>{username}</dd><dt>E-mail</dt><dd>{email}</dd><dt>Name</dt><dd>{realname}</dd><dt>Administrator</dt><dd>{admin}</dd></dl>
{secret}"#,
        username = esc(&user.username),
        email = esc(user.email.as_deref().unwrap_or("")),
        realname = esc(user.realname.as_deref().unwrap_or("")),
        admin = if user.is_sysadmin() { "yes" } else { "no" },
    );
    Ok(html::page("Profile", Some(session), &main).into_response())
}

/// `POST /harbor/profile/cli-secret`: a new random CLI secret.
async fn renew_cli_secret(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<TokenForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    oidc::set_cli_secret(&state, &portal.principal(), session.user.id, "")
        .await
        .map_err(|e| PortalError::api(e, Some(session)))?;
    Ok(see_other("/harbor/profile?renewed=1"))
}
