//! The portal's stylesheet and script, embedded in the binary.

use axum::Router;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::state::AppState;

const CSS: &str = include_str!("assets/portal.css");
const JS: &str = include_str!("assets/portal.js");

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/harbor/static/portal.css", get(stylesheet))
        .route("/harbor/static/portal.js", get(script))
}

/// `GET /harbor/static/portal.css`.
async fn stylesheet() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, "public, max-age=3600"),
        ],
        CSS,
    )
}

/// `GET /harbor/static/portal.js`.
async fn script() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (CACHE_CONTROL, "public, max-age=3600"),
        ],
        JS,
    )
}
