//! Harbor's read-only mode (`read_only: true`): every change to the registry
//! is refused, through `/v2/`, the Harbor API and the portal, with Harbor's
//! 403 `DENIED` "The system is in read only mode. Any modification is
//! prohibited.", while pulls, listings and sign-ins go on. Garbage collection
//! does not run (`berth gc` and a scheduled run check the same setting).
//!
//! What stays open, so that an administrator can turn the mode off and people
//! can still sign in: the configuration (`PUT /api/v2.0/configurations`, the
//! portal's configuration page), the pings that only test a connection, the
//! portal's sign-in and sign-out. The generator-rest surface (`/users`,
//! `/auth`, `/articles`) holds no registry content and is not affected.

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, HarborError, OciError};
use crate::portal::PortalError;
use crate::state::AppState;

/// Harbor's message.
pub const MESSAGE: &str = "The system is in read only mode. Any modification is prohibited.";

/// Harbor's refusal of a change in read-only mode.
pub fn refusal() -> ApiError {
    ApiError::forbidden(MESSAGE).with_code(crate::error::HarborCode::Denied)
}

/// Which surface a change is made through, when read-only mode applies to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Surface {
    Registry,
    Harbor,
    Portal,
}

/// The surface of a request that read-only mode refuses: a method that
/// changes something, on a path that is not one of the open ones.
fn refused(method: &Method, path: &str) -> Option<Surface> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    if path.starts_with("/v2/") {
        return Some(Surface::Registry);
    }
    if let Some(rest) = path.strip_prefix("/api/v2.0/") {
        let open = rest.trim_end_matches('/') == "configurations" || rest.ends_with("/ping");
        return (!open).then_some(Surface::Harbor);
    }
    if let Some(rest) = path.strip_prefix("/harbor/") {
        let open = matches!(rest, "sign-in" | "sign-out") || rest.starts_with("configuration");
        return (!open).then_some(Surface::Portal);
    }
    None
}

/// The middleware: refuses what [`refused`] names while `read_only` is set.
/// The setting is read from the configuration kept in memory (at most a
/// second old), so a push does not pay a query for it.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(surface) = refused(request.method(), request.uri().path()) else {
        return next.run(request).await;
    };
    match state.configuration().await {
        Ok(config) if config.flag("read_only") => {}
        // A store that cannot be read refuses the request below, as it would.
        _ => return next.run(request).await,
    }
    match surface {
        Surface::Registry => OciError(refusal()).into_response(),
        Surface::Harbor => HarborError(refusal()).into_response(),
        Surface::Portal => {
            let session = crate::session::from_headers(&state, request.headers())
                .await
                .ok()
                .flatten();
            PortalError::api(refusal(), session.as_ref()).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_refused() {
        let post = Method::POST;
        assert_eq!(refused(&Method::GET, "/v2/a/manifests/b"), None);
        assert_eq!(refused(&Method::HEAD, "/v2/a/blobs/x"), None);
        assert_eq!(
            refused(&Method::PUT, "/v2/a/manifests/b"),
            Some(Surface::Registry)
        );
        assert_eq!(
            refused(&Method::PATCH, "/v2/a/blobs/uploads/1"),
            Some(Surface::Registry)
        );
        assert_eq!(
            refused(&Method::DELETE, "/api/v2.0/projects/p"),
            Some(Surface::Harbor)
        );
        assert_eq!(refused(&post, "/api/v2.0/projects"), Some(Surface::Harbor));
        assert_eq!(
            refused(&post, "/api/v2.0/system/gc/schedule"),
            Some(Surface::Harbor)
        );
        assert_eq!(refused(&Method::PUT, "/api/v2.0/configurations"), None);
        assert_eq!(refused(&post, "/api/v2.0/ldap/ping"), None);
        assert_eq!(refused(&post, "/api/v2.0/registries/ping"), None);
        assert_eq!(refused(&post, "/harbor/sign-in"), None);
        assert_eq!(refused(&post, "/harbor/configuration"), None);
        assert_eq!(refused(&post, "/harbor/tags/delete"), Some(Surface::Portal));
        assert_eq!(refused(&post, "/users"), None, "generator-rest");
        assert_eq!(refused(&post, "/auth"), None);
    }
}
