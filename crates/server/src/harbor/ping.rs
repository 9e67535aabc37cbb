//! `GET /ping`: a liveness probe answering `Pong`.

use axum::Router;
use axum::routing::get;

use crate::state::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/ping", get(get_ping))
}

/// Answers `Pong` as text, without authentication.
pub async fn get_ping() -> &'static str {
    "Pong"
}
