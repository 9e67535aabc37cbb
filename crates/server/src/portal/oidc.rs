//! Signing in through the OpenID provider (`auth_mode=oidc_auth`), at
//! Harbor's paths so that a client registered for Harbor keeps working:
//!
//! - `GET /c/oidc/login` sends the browser to the provider (authorization
//!   code flow with PKCE, `state` and `nonce`), after storing the sign-in
//!   under the hash of a random cookie that only this browser holds;
//! - `GET /c/oidc/callback` takes the provider's code back: the state must be
//!   this browser's sign-in's (once), the code is exchanged, the ID token
//!   verified (keys, issuer, audience, expiry, nonce); the user is then signed
//!   in, onboarded, or asked for a username;
//! - `GET/POST /c/oidc/onboard`: that username page (`oidc_auto_onboard` off).

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use berth_auth::secret::{constant_time_eq, random_alphanumeric};
use berth_domain::model::User;
use berth_store::repo::oidc::{LOGIN_TTL_SECS, OidcLogin};
use serde::Deserialize;

use super::html::{self, esc};
use super::signin::{RequestFacts, same_origin, start_session};
use super::{PortalError, PortalForm};
use crate::error::{ApiError, ErrorKind};
use crate::oidc::{CALLBACK_PATH, OidcSettings, TokenError, provider_failed};
use crate::service::oidc::{self as users, Identity, Outcome};
use crate::session;
use crate::state::AppState;

/// The cookie that ties a sign-in to the browser that began it.
const LOGIN_COOKIE: &str = "oidc_login";

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/c/oidc/login", get(oidc_login))
        .route(CALLBACK_PATH, get(oidc_callback))
        .route("/c/oidc/onboard", get(onboard_page).post(onboard))
}

fn failed(err: ApiError) -> PortalError {
    PortalError::api(err, None)
}

/// The settings, or a 412 page when single sign-on is not what this registry uses.
async fn settings(state: &AppState) -> Result<OidcSettings, PortalError> {
    users::active_settings(state)
        .await
        .map_err(failed)?
        .ok_or_else(|| {
            failed(ApiError::new(
                ErrorKind::Precondition,
                "Signing in through an OIDC provider is not set up on this registry.",
            ))
        })
}

/// The callback URL registered at the provider.
fn redirect_uri(state: &AppState) -> String {
    format!("{}{CALLBACK_PATH}", state.external_url)
}

fn login_cookie(id: Option<&str>, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let value = match id {
        Some(id) => format!(
            "{LOGIN_COOKIE}={id}; Path=/c/oidc; HttpOnly; SameSite=Lax; Max-Age={LOGIN_TTL_SECS}{secure}"
        ),
        None => format!("{LOGIN_COOKIE}=; Path=/c/oidc; HttpOnly; SameSite=Lax; Max-Age=0{secure}"),
    };
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The longest `redirect_url` a sign-in keeps; a longer one is dropped (the
/// sign-in goes to the projects page), so anonymous sign-ins that are never
/// finished cannot fill the database.
const MAX_REDIRECT: usize = 2048;

/// Where to go once signed in: a local path only (never another site), of at
/// most [`MAX_REDIRECT`] bytes.
fn local_path(requested: Option<&str>) -> String {
    match requested {
        Some(path)
            if path.starts_with('/')
                && path.len() <= MAX_REDIRECT
                && !path.starts_with("//")
                && !path.contains('\\')
                && !path.chars().any(char::is_control) =>
        {
            path.to_string()
        }
        _ => "/harbor/projects".to_string(),
    }
}

#[derive(Debug, Deserialize)]
struct LoginQuery {
    redirect_url: Option<String>,
}

/// `GET /c/oidc/login`: to the provider's authorization endpoint.
async fn oidc_login(
    State(state): State<AppState>,
    parts: RequestFacts,
    Query(query): Query<LoginQuery>,
) -> Result<Response, PortalError> {
    let settings = settings(&state).await?;
    let id = random_alphanumeric(session::ID_LEN);
    let login = OidcLogin {
        state: random_alphanumeric(32),
        nonce: random_alphanumeric(32),
        verifier: random_alphanumeric(64),
        redirect: local_path(query.redirect_url.as_deref()),
        pending: String::new(),
    };
    let url = state
        .oidc
        .authorization_url(
            &settings,
            &redirect_uri(&state),
            &login.state,
            &login.nonce,
            &login.verifier,
        )
        .await
        .map_err(failed)?;
    state
        .store
        .oidc()
        .begin_login(&session::id_hash(&id), &login)
        .await
        .map_err(|e| failed(e.into()))?;
    let mut response = (StatusCode::FOUND, [(header::LOCATION, url)]).into_response();
    session::add_cookie(
        response.headers_mut(),
        login_cookie(Some(&id), parts.secure(&state)),
    );
    Ok(response)
}

#[derive(Debug, Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// The sign-in this browser began (by its cookie), if it has not expired.
async fn this_browsers_login(
    state: &AppState,
    parts: &RequestFacts,
) -> Result<(String, OidcLogin), PortalError> {
    let expired = || {
        failed(ApiError::bad_request(
            "This sign-in was not started in this browser, or took too long. Sign in again.",
        ))
    };
    let id_hash = session::random_cookie(&parts.headers, LOGIN_COOKIE)
        .map(session::id_hash)
        .ok_or_else(expired)?;
    let login = state
        .store
        .oidc()
        .login(&id_hash)
        .await
        .map_err(|e| failed(e.into()))?
        .ok_or_else(expired)?;
    Ok((id_hash, login))
}

/// `GET /c/oidc/callback`: the provider's answer.
async fn oidc_callback(
    State(state): State<AppState>,
    parts: RequestFacts,
    Query(query): Query<CallbackQuery>,
) -> Result<Response, PortalError> {
    let settings = settings(&state).await?;
    let (id_hash, login) = this_browsers_login(&state, &parts).await?;
    let sent_state = query.state.as_deref().unwrap_or("");
    let matches =
        !login.state.is_empty() && constant_time_eq(login.state.as_bytes(), sent_state.as_bytes());
    // The sign-in is spent by its first callback, right or wrong: one try.
    let taken = state
        .store
        .oidc()
        .end_login(&id_hash)
        .await
        .map_err(|e| failed(e.into()))?;
    if !matches || !taken {
        return Err(failed(ApiError::bad_request(
            "The sign-in's state does not match the one this browser began. Sign in again.",
        )));
    }
    if let Some(error) = query.error.as_deref() {
        let detail = query.error_description.as_deref().unwrap_or("");
        tracing::info!(error, detail, "the OIDC provider refused a sign-in");
        return Err(failed(ApiError::forbidden(format!(
            "The OIDC provider did not sign you in: {error} {detail}"
        ))));
    }
    let code = query
        .code
        .as_deref()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| failed(ApiError::bad_request("The provider sent no code.")))?;
    let tokens = state
        .oidc
        .exchange_code(&settings, code, &redirect_uri(&state), &login.verifier)
        .await
        .map_err(failed)?;
    let id_token = tokens.id_token.as_deref().ok_or_else(|| {
        failed(provider_failed(
            "the token endpoint answered without an ID token",
        ))
    })?;
    let verified = state
        .oidc
        .verify_id_token(&settings, id_token, Some(&login.nonce))
        .await
        .map_err(|e| match e {
            TokenError::Invalid(why) => {
                tracing::warn!(%why, "an ID token was refused");
                failed(ApiError::forbidden(format!(
                    "The provider's ID token was refused: {why}"
                )))
            }
            TokenError::Provider(why) => failed(provider_failed(why)),
        })?;
    let identity = Identity::of(&settings, &verified, &tokens);
    match users::sign_in(&state, &settings, identity)
        .await
        .map_err(failed)?
    {
        Outcome::SignedIn(user) => finish(&state, &parts, &user, &login.redirect).await,
        Outcome::ChooseUsername(identity) => {
            let pending = serde_json::to_string(&identity).map_err(ApiError::internal);
            // The sign-in lives on, without a state, to wait for the username.
            let login = OidcLogin {
                state: String::new(),
                pending: pending.map_err(failed)?,
                ..login
            };
            let store = state.store.oidc();
            store
                .begin_login(&id_hash, &login)
                .await
                .map_err(|e| failed(e.into()))?;
            store
                .set_pending(&id_hash, &login.pending)
                .await
                .map_err(|e| failed(e.into()))?;
            Ok(super::see_other("/c/oidc/onboard"))
        }
    }
}

/// A signed-in user: the session, the sign-in cookie cleared.
async fn finish(
    state: &AppState,
    parts: &RequestFacts,
    user: &User,
    next: &str,
) -> Result<Response, PortalError> {
    let mut response = start_session(state, parts, user, next).await?;
    session::add_cookie(
        response.headers_mut(),
        login_cookie(None, parts.secure(state)),
    );
    Ok(response)
}

/// The sign-in waiting for a username, and who it is.
async fn pending(
    state: &AppState,
    parts: &RequestFacts,
) -> Result<(String, OidcLogin, Identity), PortalError> {
    let (id_hash, login) = this_browsers_login(state, parts).await?;
    let identity: Identity = serde_json::from_str(&login.pending).map_err(|_| {
        failed(ApiError::bad_request(
            "This sign-in has not come back from the provider yet. Sign in again.",
        ))
    })?;
    Ok((id_hash, login, identity))
}

fn onboard_form(status: StatusCode, username: &str, error: Option<&str>) -> Response {
    let error = error.map(|e| html::notice("error", e)).unwrap_or_default();
    let main = format!(
        r#"<form class="signin" method="post" action="/c/oidc/onboard">
<h1>Choose your username</h1>{error}
<p class="muted">This is your first sign-in. Your username names you in projects and is your login for docker and other registry clients.</p>
<label for="oidc_username">Username</label>
<input type="text" id="oidc_username" name="username" value="{username}" required autofocus>
<button type="submit" id="save_username">Save</button>
</form>"#,
        username = esc(username),
    );
    html::page_with_status(status, "Choose your username", None, &main).into_response()
}

/// `GET /c/oidc/onboard`: the username page, filled in with what the claims suggest.
async fn onboard_page(
    State(state): State<AppState>,
    parts: RequestFacts,
) -> Result<Response, PortalError> {
    let (_, _, identity) = pending(&state, &parts).await?;
    Ok(onboard_form(StatusCode::OK, &identity.username, None))
}

#[derive(Debug, Deserialize)]
struct OnboardForm {
    #[serde(default)]
    username: String,
}

/// `POST /c/oidc/onboard`: creates the user under the chosen name.
async fn onboard(
    State(state): State<AppState>,
    parts: RequestFacts,
    PortalForm(form): PortalForm<OnboardForm>,
) -> Result<Response, PortalError> {
    if !same_origin(&state, &parts.headers) {
        return Err(failed(ApiError::forbidden(
            "sign-in forms are accepted from this site only",
        )));
    }
    let settings = settings(&state).await?;
    let (id_hash, login, identity) = pending(&state, &parts).await?;
    match users::onboard(&state, &settings, &identity, &form.username).await {
        Ok(user) => {
            state
                .store
                .oidc()
                .end_login(&id_hash)
                .await
                .map_err(|e| failed(e.into()))?;
            finish(&state, &parts, &user, &login.redirect).await
        }
        Err(err) if matches!(err.kind, ErrorKind::BadRequest | ErrorKind::Conflict) => Ok(
            onboard_form(err.status(), &form.username, Some(&err.message)),
        ),
        Err(err) => Err(failed(err)),
    }
}

/// Where signing out sends a user of the provider when `oidc_logout` is on:
/// the provider's end-session endpoint, back to the sign-in page afterwards.
pub(super) async fn sign_out_location(state: &AppState, user: &User) -> Option<String> {
    let settings = users::active_settings(state).await.ok()??;
    if !settings.logout || state.store.oidc().find(user.id).await.ok()?.is_none() {
        return None;
    }
    let doc = state.oidc.discovery(&settings).await.ok()?;
    let mut url = url::Url::parse(doc.end_session_endpoint.as_deref()?).ok()?;
    url.query_pairs_mut()
        .append_pair("client_id", &settings.client_id)
        .append_pair(
            "post_logout_redirect_uri",
            &format!("{}/harbor/sign-in", state.external_url),
        );
    Some(url.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed() {
        assert_eq!(local_path(Some("/harbor/projects/7")), "/harbor/projects/7");
        for bad in [
            "https://evil.test/",
            "//evil.test",
            "/\\evil.test",
            "evil",
            "/a\nb",
        ] {
            assert_eq!(local_path(Some(bad)), "/harbor/projects", "{bad:?}");
        }
        assert_eq!(local_path(None), "/harbor/projects");
        let longest = format!("/harbor/{}", "a".repeat(MAX_REDIRECT - 8));
        assert_eq!(local_path(Some(&longest)), longest);
        let longer = format!("{longest}a");
        assert_eq!(local_path(Some(&longer)), "/harbor/projects", "dropped");
    }
}
