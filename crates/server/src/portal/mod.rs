//! The web portal under `/harbor/`: server-rendered pages over the same access
//! checks and store functions as the Harbor API, signed in with a session
//! cookie (see [`crate::session`]). Assets are embedded in the binary.

mod artifacts;
mod assets;
mod configuration;
mod html;
mod labels;
mod members;
mod oidc;
mod profile;
mod project_settings;
mod projects;
mod repositories;
mod retention;
mod signin;
mod system;
mod tabs;
mod users;

use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use berth_domain::model::ProjectRef;
use berth_domain::rbac::{Action, Resource};

use crate::access::ProjectAccess;
use crate::error::{ApiError, ErrorKind};
use crate::extract::Principal;
use crate::session::{self, SessionUser};
use crate::state::AppState;

/// Where the portal lives.
pub const BASE: &str = "/harbor";

/// The `/harbor` router.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/harbor",
            get(|| async { Redirect::to("/harbor/projects") }),
        )
        .merge(assets::router())
        .merge(signin::router())
        .merge(oidc::router())
        .merge(profile::router())
        .merge(projects::router())
        .merge(members::router())
        .merge(labels::router())
        .merge(project_settings::router())
        .merge(retention::router())
        .merge(repositories::router())
        .merge(artifacts::router())
        .merge(users::router())
        .merge(configuration::router())
        .merge(system::router())
        .route("/harbor/{*path}", get(page_not_found))
}

/// Unknown portal paths: an HTML 404 page (the JSON 404 is for the APIs).
async fn page_not_found(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let session = session::from_headers(&state, &headers).await.ok().flatten();
    let err = ApiError::not_found("There is no such page.");
    PortalError::api(err, session.as_ref()).into_response()
}

/// A signed-in portal user; pages that need one send everyone else to the sign-in page.
pub struct PortalUser(pub SessionUser);

impl PortalUser {
    /// The caller as the API's access checks know it.
    pub fn principal(&self) -> Principal {
        Principal::User(self.0.user.clone())
    }

    /// Project `name`, after the API's check of `action` on `resource` in it
    /// (everyone else gets the portal's 403 or 404 page).
    pub async fn require_project(
        &self,
        state: &AppState,
        name: String,
        resource: Resource,
        action: Action,
    ) -> Result<ProjectAccess, PortalError> {
        crate::access::require_project(
            state,
            crate::access::Actor::User(&self.0.user),
            &ProjectRef::Name(name),
            resource,
            action,
        )
        .await
        .map_err(|err| PortalError::api(err, Some(&self.0)))
    }

    /// Passes system administrators; everyone else gets the 403 page.
    pub fn require_admin(&self) -> Result<(), PortalError> {
        if self.0.user.is_sysadmin() {
            Ok(())
        } else {
            Err(PortalError::api(
                ApiError::forbidden("This page is for system administrators."),
                Some(&self.0),
            ))
        }
    }
}

impl FromRequestParts<AppState> for PortalUser {
    type Rejection = PortalError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        match session::from_headers(state, &parts.headers).await {
            Ok(Some(session)) => Ok(Self(session)),
            Ok(None) => Err(PortalError::SignIn),
            Err(err) => Err(PortalError::api(err, None)),
        }
    }
}

/// A portal failure, rendered as an HTML page (or a trip to the sign-in page).
pub enum PortalError {
    /// No session: go and sign in.
    SignIn,
    /// A failed operation, with the session when there is one.
    Api(Box<(ApiError, Option<SessionUser>)>),
}

impl PortalError {
    /// A failed operation, shown inside the frame of `session`'s pages.
    pub fn api(err: ApiError, session: Option<&SessionUser>) -> Self {
        Self::Api(Box::new((err, session.cloned())))
    }
}

impl IntoResponse for PortalError {
    fn into_response(self) -> Response {
        match self {
            Self::SignIn => Redirect::to("/harbor/sign-in").into_response(),
            Self::Api(failure) if failure.0.kind == ErrorKind::Unauthorized => {
                Redirect::to("/harbor/sign-in").into_response()
            }
            Self::Api(failure) => {
                let (err, session) = *failure;
                let status = err.status();
                let text = if status.is_server_error() {
                    "Something went wrong on the server; try again later.".to_string()
                } else {
                    err.message.clone()
                };
                let main = format!(
                    r#"<h1>{}</h1>{}<p><a href="/harbor/projects">Back to projects</a></p>"#,
                    html::esc(status.canonical_reason().unwrap_or("Error")),
                    html::notice("error", &text)
                );
                html::page_with_status(status, "Error", session.as_ref(), &main).into_response()
            }
        }
    }
}

/// Checks the CSRF token a portal form sent.
pub fn check_form_csrf(session: &SessionUser, sent: &str) -> Result<(), PortalError> {
    if session.csrf_matches(sent) {
        Ok(())
    } else {
        Err(PortalError::api(
            ApiError::forbidden(session::CSRF_INVALID),
            Some(session),
        ))
    }
}

/// Sends a browser that asks for `/` (a GET whose `Accept` prefers HTML) to
/// the portal; API clients of the generator-rest routes are unaffected.
pub async fn redirect_browsers(request: Request, next: Next) -> Response {
    if request.uri().path() == "/"
        && request.method() == Method::GET
        && prefers_html(request.headers())
    {
        return Redirect::to("/harbor/projects").into_response();
    }
    next.run(request).await
}

/// Whether the first media type of `Accept` with the highest weight is HTML.
fn prefers_html(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let mut best: Option<(f32, &str)> = None;
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if best.is_none_or(|(top, _)| q > top) {
            best = Some((q, media));
        }
    }
    best.is_some_and(|(q, media)| {
        q > 0.0
            && (media.eq_ignore_ascii_case("text/html")
                || media.eq_ignore_ascii_case("application/xhtml+xml"))
    })
}

/// A form body; one that cannot be read is a 400 page, not axum's plain text.
pub struct PortalForm<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for PortalForm<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = PortalError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Form::<T>::from_request(request, state).await {
            Ok(axum::Form(value)) => Ok(Self(value)),
            Err(rejection) => Err(PortalError::api(
                ApiError::bad_request(format!(
                    "the form could not be read: {}",
                    rejection.body_text()
                )),
                None,
            )),
        }
    }
}

/// A form that carries nothing but the CSRF token (a delete button).
#[derive(Debug, serde::Deserialize)]
pub struct TokenForm {
    /// The session's CSRF token.
    #[serde(default)]
    pub csrf_token: String,
}

/// Previous and next links of a paged list at `path` (which carries any other
/// query parameters and ends in `?` or `&`), and where the page stands.
pub fn pager(path: &str, page: i64, page_size: i64, total: i64, noun: &str) -> String {
    let pages = ((total + page_size - 1) / page_size).max(1);
    let link = |p: i64, text: &str| format!(r#"<a href="{}page={p}">{text}</a>"#, html::esc(path));
    let prev = if page > 1 {
        link(page - 1, "‹ Previous")
    } else {
        String::new()
    };
    let next = if page < pages {
        link(page + 1, "Next ›")
    } else {
        String::new()
    };
    format!(
        r#"<div class="pager">{prev}<span class="muted">Page {page} of {pages} · {total} {noun}</span>{next}</div>"#,
        noun = html::esc(noun),
    )
}

/// 303 to `location`: where a form post goes next.
pub fn see_other(location: &str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn browsers_prefer_html() {
        assert!(prefers_html(&accept(
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        )));
        assert!(!prefers_html(&accept("application/json")));
        assert!(!prefers_html(&accept("*/*")));
        assert!(!prefers_html(&accept("application/json, text/html;q=0.5")));
        assert!(!prefers_html(&HeaderMap::new()));
    }
}
