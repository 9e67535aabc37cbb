//! The whole HTTP application: the three surfaces and the layers around them.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
use axum::http::{HeaderName, Uri};
use tower::ServiceBuilder;
use tower::util::MapRequest;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{
    MakeRequestUuid, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::error::{ApiError, HarborError};
use crate::harbor;
use crate::headers;
use crate::metrics::{MetricsSettings, Recorder};
use crate::openapi::ApiDocument;
use crate::operations::{self, OperationIndex, Routes, Surface};
use crate::portal;
use crate::registry;
use crate::rest;
use crate::state::AppState;

/// The application as a service: the router behind path normalization.
pub type App = MapRequest<Router, fn(Request) -> Request>;

const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Builds the application for `state`, with `/metrics` open on the main port.
pub fn build(state: AppState) -> App {
    build_with(state, &MetricsSettings::default())
}

/// The routes of every API surface (the route table), `/metrics` where
/// `metrics` puts it on the main port.
pub fn routes(state: &AppState, metrics: &MetricsSettings) -> Routes {
    let routes = Routes::new(Surface::Berth)
        .merge(crate::openapi::routes())
        .merge(crate::probes::routes())
        .nest("/api/v2.0", harbor::routes())
        .merge(rest::routes(&state.rest))
        .adopt(
            registry::router(state.clone()),
            operations::registry_operations(),
        );
    if metrics.addr.is_none() {
        routes.merge(crate::metrics::routes(metrics))
    } else {
        routes
    }
}

/// Builds the application for `state`; `metrics` says where `/metrics` is served.
pub fn build_with(state: AppState, metrics: &MetricsSettings) -> App {
    let (router, operations) = routes(&state, metrics).into_parts();
    let index = Arc::new(OperationIndex::new(&operations));
    let recorder = Recorder::new(state.clone(), index.clone());
    let read_only = crate::read_only::ReadOnly {
        state: state.clone(),
        index,
    };
    let router = router
        .layer(axum::Extension(ApiDocument::new(&operations)))
        .merge(portal::router())
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            note_changes,
        ))
        .layer(axum::middleware::from_fn_with_state(
            read_only,
            crate::read_only::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            recorder,
            crate::metrics::record,
        ))
        .with_state(state)
        .layer(
            ServiceBuilder::new()
                .layer(axum::middleware::map_response(headers::nosniff))
                .layer(axum::middleware::from_fn(headers::close_after_unread_body))
                .layer(axum::middleware::from_fn(portal::redirect_browsers))
                .layer(SetSensitiveRequestHeadersLayer::new([
                    AUTHORIZATION,
                    PROXY_AUTHORIZATION,
                    COOKIE,
                ]))
                .layer(SetRequestIdLayer::new(X_REQUEST_ID, MakeRequestUuid))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(|request: &Request| {
                            let request_id = request
                                .extensions()
                                .get::<RequestId>()
                                .and_then(|id| id.header_value().to_str().ok())
                                .unwrap_or("");
                            // The path only: query strings may carry access tokens.
                            tracing::info_span!(
                                "request",
                                method = %request.method(),
                                path = %request.uri().path(),
                                request_id,
                            )
                        })
                        .on_request(())
                        .on_response(DefaultOnResponse::new().level(Level::INFO)),
                )
                .layer(PropagateRequestIdLayer::new(X_REQUEST_ID))
                .layer(CatchPanicLayer::custom(|_| {
                    axum::response::IntoResponse::into_response(HarborError(ApiError::internal(
                        "handler panicked",
                    )))
                })),
        );
    ServiceBuilder::new()
        .map_request(normalize_path as fn(Request) -> Request)
        .service(router)
}

/// Moves the registry's change generation once a request that may have
/// changed something is answered (its writes are committed by then), so no
/// manifest lookup kept before it is served after it
/// ([`crate::service::registry_state::Lookups`]). A guard does it, so a request
/// dropped after its commit (the client went away) moves it too.
async fn note_changes(
    State(state): State<AppState>,
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    struct Changed(AppState);
    impl Drop for Changed {
        fn drop(&mut self) {
            self.0.store.changes().bump(berth_store::Topic::Registry);
        }
    }
    let _changed = crate::session::changes_state(request.method()).then(|| Changed(state));
    next.run(request).await
}

/// Paths outside every surface: a JSON 404, never an HTML page.
async fn not_found(uri: Uri) -> HarborError {
    HarborError(ApiError::not_found(format!(
        "path {} was not found",
        uri.path()
    )))
}

/// Collapses repeated slashes and drops a trailing slash before routing, as
/// Harbor's router does (`/projects/1/metadatas/` is `/projects/1/metadatas`).
fn normalize_path(mut request: Request) -> Request {
    let path = request.uri().path();
    let needs_work = path.len() > 1 && (path.ends_with('/') || path.contains("//"));
    if !needs_work {
        return request;
    }
    let mut clean = String::with_capacity(path.len());
    for ch in path.chars() {
        if !(ch == '/' && clean.ends_with('/')) {
            clean.push(ch);
        }
    }
    while clean.len() > 1 && clean.ends_with('/') {
        clean.pop();
    }
    if let Some(query) = request.uri().query() {
        clean.push('?');
        clean.push_str(query);
    }
    let mut parts = request.uri().clone().into_parts();
    if let Ok(path_and_query) = clean.parse() {
        parts.path_and_query = Some(path_and_query);
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    request
}

/// How long in-flight requests may run after a shutdown signal.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    fn path_of(uri: &str) -> String {
        let request = Request::builder()
            .uri(uri)
            .body(axum::body::Body::empty())
            .unwrap();
        normalize_path(request).uri().to_string()
    }

    #[test]
    fn paths_are_normalized() {
        assert_eq!(
            path_of("/api/v2.0/projects/1/metadatas/"),
            "/api/v2.0/projects/1/metadatas"
        );
        assert_eq!(path_of("//api//v2.0/health?x=1"), "/api/v2.0/health?x=1");
        assert_eq!(path_of("/"), "/");
        assert_eq!(path_of("/v2/"), "/v2");
    }
}
