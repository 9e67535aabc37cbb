//! `GET /ping`: a liveness probe answering `Pong`.

use crate::operations::{Routes, Surface};

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor).get("/ping", get_ping)
}

/// Answers `Pong` as text, without authentication.
pub async fn get_ping() -> &'static str {
    "Pong"
}
