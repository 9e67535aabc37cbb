//! Signing in and out of the portal. Passwords are checked by
//! [`identity::verify_password`], as on every surface: the same throttle of
//! failed sign-ins, the same LDAP mode.

use axum::Router;
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use berth_domain::model::User;
use serde::Deserialize;

use super::html::{self, esc};
use super::{PortalError, PortalForm, see_other};
use crate::error::{ApiError, ErrorKind};
use crate::identity;
use crate::session;
use crate::state::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/harbor/sign-in", get(sign_in_page).post(sign_in))
        .route("/harbor/sign-out", post(sign_out))
}

/// The sign-in form; `error` above it when set. Under `oidc_auth`, the
/// provider's button comes first and the form is for the local `admin`.
async fn sign_in_form(
    state: &AppState,
    status: StatusCode,
    login: &str,
    error: Option<&str>,
) -> Response {
    let error = error.map(|e| html::notice("error", e)).unwrap_or_default();
    let provider = match crate::service::oidc::active_settings(state).await {
        Ok(Some(settings)) => format!(
            r#"<a class="provider" id="log_in_oidc" href="/c/oidc/login">Log in with {name}</a>
<p class="muted">Or, as the local administrator:</p>"#,
            name = esc(if settings.name.is_empty() {
                "the OIDC provider"
            } else {
                &settings.name
            }),
        ),
        _ => String::new(),
    };
    let main = format!(
        r#"<form class="signin" method="post" action="/harbor/sign-in">
<h1>Sign in to Berth</h1>{error}{provider}
<label for="login_username">Username or e-mail</label>
<input type="text" id="login_username" name="principal" value="{login}" autocomplete="username" required autofocus>
<label for="login_password">Password</label>
<input type="password" id="login_password" name="password" autocomplete="current-password" required>
<button type="submit" id="log_in">Log in</button>
</form>"#,
        login = esc(login),
    );
    html::page_with_status(status, "Sign in", None, &main).into_response()
}

/// `GET /harbor/sign-in`: the form, or the projects for a signed-in browser.
async fn sign_in_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    match session::from_headers(&state, &headers).await {
        Ok(Some(_)) => see_other("/harbor/projects"),
        _ => sign_in_form(&state, StatusCode::OK, "", None).await,
    }
}

/// The sign-in form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct SignInForm {
    #[serde(default)]
    principal: String,
    #[serde(default)]
    password: String,
}

/// `POST /harbor/sign-in`: starts a session and sets the `sid` cookie.
async fn sign_in(
    State(state): State<AppState>,
    parts: RequestFacts,
    PortalForm(form): PortalForm<SignInForm>,
) -> Result<Response, PortalError> {
    if !same_origin(&state, &parts.headers) {
        return Err(PortalError::api(
            ApiError::forbidden("sign-in forms are accepted from this site only"),
            None,
        ));
    }
    let client = state.signin.client(&parts.extensions, &parts.headers);
    let login = form.principal.trim();
    let verified = identity::verify_password(&state, client, login, &form.password).await;
    let user = match verified {
        Ok(Some(user)) => user,
        Ok(None) => {
            return Ok(sign_in_form(
                &state,
                StatusCode::UNAUTHORIZED,
                login,
                Some("Invalid user name or password."),
            )
            .await);
        }
        Err(err) if err.kind == ErrorKind::TooManyRequests => {
            let wait = err.retry_after.unwrap_or(60);
            let message = format!("Too many failed sign-ins. Try again in {wait} seconds.");
            let mut response =
                sign_in_form(&state, StatusCode::TOO_MANY_REQUESTS, login, Some(&message)).await;
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, wait.into());
            return Ok(response);
        }
        Err(err) => return Err(PortalError::api(err, None)),
    };
    start_session(&state, &parts, &user, "/harbor/projects").await
}

/// Signs `user` in: a new session (the one the browser held ends), its
/// cookie, and a 303 to `next`.
pub(super) async fn start_session(
    state: &AppState,
    parts: &RequestFacts,
    user: &User,
    next: &str,
) -> Result<Response, PortalError> {
    session::end(state, &parts.headers)
        .await
        .map_err(|e| PortalError::api(e, None))?;
    let (id, _csrf) = session::start(state, user)
        .await
        .map_err(|e| PortalError::api(e, None))?;
    let mut response = see_other(next);
    session::add_cookie(
        response.headers_mut(),
        session::set_cookie(Some(&id), parts.secure(state)),
    );
    Ok(response)
}

/// Whether a sign-in came from this site's own form: no `Origin` (older
/// browsers), or one naming the request's `Host` or the external URL. Sign-in
/// has no session and so no CSRF token; this keeps other sites from signing a
/// browser into an account of theirs.
pub(super) fn same_origin(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(authority) = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, authority)| authority)
    else {
        return false;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let external = state
        .external_url
        .split_once("://")
        .map_or("", |(_, rest)| rest.split('/').next().unwrap_or(""));
    host.is_some_and(|h| h.eq_ignore_ascii_case(authority))
        || external.eq_ignore_ascii_case(authority)
}

/// The sign-out form's field.
#[derive(Debug, Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    csrf_token: String,
}

/// `POST /harbor/sign-out`: ends the session and clears the cookie.
async fn sign_out(
    State(state): State<AppState>,
    parts: RequestFacts,
    PortalForm(form): PortalForm<CsrfForm>,
) -> Result<Response, PortalError> {
    let mut ended_user = None;
    if let Some(current) = session::from_headers(&state, &parts.headers)
        .await
        .map_err(|e| PortalError::api(e, None))?
    {
        super::check_form_csrf(&current, &form.csrf_token)?;
        session::end(&state, &parts.headers)
            .await
            .map_err(|e| PortalError::api(e, None))?;
        ended_user = Some(current.user);
    }
    let next = match ended_user {
        Some(user) => super::oidc::sign_out_location(&state, &user)
            .await
            .unwrap_or_else(|| "/harbor/sign-in".to_string()),
        None => "/harbor/sign-in".to_string(),
    };
    let mut response = see_other(&next);
    session::add_cookie(
        response.headers_mut(),
        session::set_cookie(None, parts.secure(&state)),
    );
    Ok(response)
}

/// The request's headers and extensions (peer address), for handlers that also read a body.
pub(super) struct RequestFacts {
    pub(super) headers: HeaderMap,
    extensions: axum::http::Extensions,
}

impl RequestFacts {
    /// Whether the browser reached us over https (cookies are then `Secure`).
    pub(super) fn secure(&self, state: &AppState) -> bool {
        session::is_https(state, &self.extensions, &self.headers)
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for RequestFacts {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            headers: parts.headers.clone(),
            extensions: parts.extensions.clone(),
        })
    }
}
