//! Harbor's management API, mounted at `/api/v2.0`.

mod artifact_copy;
pub(crate) mod artifacts;
mod audit_logs;
pub(crate) mod gc;
mod health;
mod immutable;
mod labels;
pub(crate) mod ldap;
pub(crate) mod repositories;
mod systeminfo;
pub(crate) mod tags;
pub(crate) mod users;

pub(crate) mod configurations;
pub(crate) mod members;
mod metadata;
mod ping;
pub(crate) mod projects;
mod quotas;
pub(crate) mod registries;
mod robots;
mod search;
pub(crate) mod statistics;

use axum::Router;
use axum::extract::OriginalUri;
use axum::http::Method;

use crate::error::{ApiError, ErrorKind, HarborError};
use crate::state::AppState;

/// The `/api/v2.0` router.
pub fn router() -> Router<AppState> {
    Router::new()
        .merge(health::router())
        .merge(ldap::router())
        .merge(systeminfo::router())
        .merge(users::router())
        .merge(configurations::router())
        .merge(members::router())
        .merge(metadata::router())
        .merge(ping::router())
        .merge(projects::router())
        .merge(quotas::router())
        .merge(registries::router())
        .merge(robots::router())
        .merge(immutable::router())
        .merge(audit_logs::router())
        .merge(search::router())
        .merge(statistics::router())
        .merge(repositories::router())
        .merge(artifacts::router())
        .merge(tags::router())
        .merge(labels::router())
        .merge(gc::router())
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
}

/// Unknown paths under `/api/v2.0` answer Harbor's 404 body.
async fn not_found(OriginalUri(uri): OriginalUri) -> HarborError {
    HarborError(ApiError::not_found(format!(
        "path {} was not found",
        uri.path()
    )))
}

/// A known path with the wrong method.
async fn method_not_allowed(method: Method, OriginalUri(uri): OriginalUri) -> HarborError {
    HarborError(ApiError::new(
        ErrorKind::MethodNotAllowed,
        format!("method {method} is not allowed for path {}", uri.path()),
    ))
}
