//! Harbor's management API, mounted at `/api/v2.0`.

mod artifact_copy;
pub(crate) mod artifacts;
mod audit_logs;
pub(crate) mod gc;
pub(crate) mod health;
mod icons;
mod immutable;
mod labels;
pub(crate) mod ldap;
pub(crate) mod repositories;
pub(crate) mod systeminfo;
pub(crate) mod tags;
pub(crate) mod users;
mod webhooks;

pub(crate) mod configurations;
mod jobservice;
pub(crate) mod members;
mod metadata;
mod oidc;
mod permissions;
mod ping;
pub(crate) mod projects;
mod purge;
mod quotas;
pub(crate) mod registries;
mod replication;
mod retentions;
mod robots;
mod search;
pub(crate) mod statistics;
mod system_cve_allowlist;
mod usergroups;

use axum::extract::OriginalUri;
use axum::http::Method;

use crate::error::{ApiError, ErrorKind, HarborError};
use crate::operations::{Routes, Surface};

/// A `text/plain` answer: a job's log.
pub(crate) fn text(body: String) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

/// The `/api/v2.0` routes (paths relative to the mount).
pub fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .merge(health::routes())
        .merge(ldap::routes())
        .merge(oidc::routes())
        .merge(systeminfo::routes())
        .merge(system_cve_allowlist::routes())
        .merge(users::routes())
        .merge(permissions::routes())
        .merge(configurations::routes())
        .merge(members::routes())
        .merge(metadata::routes())
        .merge(ping::routes())
        .merge(projects::routes())
        .merge(quotas::routes())
        .merge(registries::routes())
        .merge(replication::routes())
        .merge(usergroups::routes())
        .merge(robots::routes())
        .merge(immutable::routes())
        .merge(audit_logs::routes())
        .merge(search::routes())
        .merge(statistics::routes())
        .merge(repositories::routes())
        .merge(artifacts::routes())
        .merge(icons::routes())
        .merge(tags::routes())
        .merge(labels::routes())
        .merge(gc::routes())
        .merge(retentions::routes())
        .merge(webhooks::routes())
        .merge(purge::routes())
        .merge(jobservice::routes())
        .map_router(|router| {
            router
                .method_not_allowed_fallback(method_not_allowed)
                .fallback(not_found)
        })
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
