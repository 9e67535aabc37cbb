//! Harbor's read-only mode (`read_only: true`): every change to the registry
//! is refused, through `/v2/`, the Harbor API and the portal, with Harbor's
//! 403 `DENIED` "The system is in read only mode. Any modification is
//! prohibited.", while pulls, listings and sign-ins go on. Garbage collection
//! does not run (`berth gc` and a scheduled run check the same setting).
//!
//! What stays open, so that an administrator can turn the mode off and people
//! can still sign in: the configuration (`updateConfigurations`, the portal's
//! configuration page), the pings that only test a connection (`pingLdap`,
//! `pingOIDC`, `pingRegistry`), the portal's sign-in and sign-out. Harbor
//! requests are told apart by the operation the route table names, never by
//! the text of their path (a repository or tag named `ping` is content). The
//! generator-rest surface (`/users`, `/auth`, `/articles`) holds no registry
//! content and is not affected.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, HarborError, OciError};
use crate::operations::OperationIndex;
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

/// The Harbor operations that stay open: the configuration, so that the mode
/// can be turned off, and the pings that only test a connection.
const OPEN_OPERATIONS: &[&str] = &[
    "updateConfigurations",
    "pingLdap",
    "pingOIDC",
    "pingRegistry",
    "pingScanner",
    "PingInstances",
];

/// The portal's pages (under `/harbor/`) whose forms stay open.
const OPEN_PAGES: &[&str] = &[
    "sign-in",
    "sign-out",
    "configuration",
    "configuration/ldap-ping",
];

/// The surface of a request that read-only mode refuses: a method that
/// changes something, other than the open operations. `operation` is the
/// route table's name of the request (`None`: no route matched).
fn refused(method: &Method, path: &str, operation: Option<&str>) -> Option<Surface> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    if path.starts_with("/v2/") {
        return Some(Surface::Registry);
    }
    if path.starts_with("/api/v2.0/") {
        let open = operation.is_some_and(|op| OPEN_OPERATIONS.contains(&op));
        return (!open).then_some(Surface::Harbor);
    }
    if let Some(rest) = path.strip_prefix("/harbor/") {
        return (!OPEN_PAGES.contains(&rest)).then_some(Surface::Portal);
    }
    None
}

/// What the middleware needs: the application and the route table's index.
#[derive(Clone)]
pub struct ReadOnly {
    /// The application (its configuration).
    pub state: AppState,
    /// Operation names by method and route template.
    pub index: Arc<OperationIndex>,
}

/// The middleware: refuses what [`refused`] names while `read_only` is set.
/// The setting is read from the configuration kept in memory (at most a
/// second old), so a push does not pay a query for it.
pub async fn guard(State(guard): State<ReadOnly>, request: Request, next: Next) -> Response {
    let operation = request
        .extensions()
        .get::<MatchedPath>()
        .and_then(|matched| guard.index.find(request.method(), matched.as_str()));
    let Some(surface) = refused(
        request.method(),
        request.uri().path(),
        operation.map(|op| &**op),
    ) else {
        return next.run(request).await;
    };
    let state = &guard.state;
    match state.configuration().await {
        Ok(config) if config.flag("read_only") => {}
        // A store that cannot be read refuses the request below, as it would.
        _ => return next.run(request).await,
    }
    match surface {
        Surface::Registry => OciError(refusal()).into_response(),
        Surface::Harbor => HarborError(refusal()).into_response(),
        Surface::Portal => {
            let session = crate::session::from_headers(state, request.headers())
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
        let refused = |method: &Method, path: &str| refused(method, path, None);
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
        assert_eq!(refused(&post, "/harbor/sign-in"), None);
        assert_eq!(refused(&post, "/harbor/configuration"), None);
        assert_eq!(refused(&post, "/harbor/configuration/ldap-ping"), None);
        assert_eq!(refused(&post, "/harbor/tags/delete"), Some(Surface::Portal));
        assert_eq!(
            refused(&post, "/harbor/configuration-x"),
            Some(Surface::Portal)
        );
        assert_eq!(refused(&post, "/users"), None, "generator-rest");
        assert_eq!(refused(&post, "/auth"), None);
    }

    #[test]
    fn harbor_requests_are_told_apart_by_operation() {
        let put = Method::PUT;
        let delete = Method::DELETE;
        let path = "/api/v2.0/configurations";
        assert_eq!(refused(&put, path, Some("updateConfigurations")), None);
        let ping = "/api/v2.0/ldap/ping";
        assert_eq!(refused(&Method::POST, ping, Some("pingLdap")), None);
        // The path says ping; the operation says delete.
        let repo = "/api/v2.0/projects/library/repositories/ping";
        assert_eq!(
            refused(&delete, repo, Some("deleteRepository")),
            Some(Surface::Harbor)
        );
        assert_eq!(refused(&delete, repo, None), Some(Surface::Harbor));
    }
}
