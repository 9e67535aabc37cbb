//! Orchestrators' probes, beside Harbor's `/api/v2.0/health` (which answers
//! 200 whatever its components say, as Harbor's does):
//! - `GET /livez`: 200 while the process answers requests;
//! - `GET /readyz`: 200 when the database and the blob store answer, 503 with
//!   what failed otherwise, so that a load balancer takes the instance out.
//!
//! The listener opens after the migrations ran, so an instance still
//! migrating refuses the connection: not ready either.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::operations::{Routes, Surface};
use crate::service::health;
use crate::state::AppState;

/// The probes' routes.
pub fn routes() -> Routes {
    Routes::new(Surface::Berth)
        .get("/livez", get_livez)
        .get("/readyz", get_readyz)
}

/// The process answers.
pub async fn get_livez() -> &'static str {
    "ok\n"
}

/// Whether the instance can serve: `ok`, or 503 with one line per failing component.
pub async fn get_readyz(State(state): State<AppState>) -> Response {
    let failing: Vec<String> = health::check_components(&state)
        .await
        .into_iter()
        .filter_map(|c| Some(format!("{}: {}\n", c.name, c.error?)))
        .collect();
    if failing.is_empty() {
        "ok\n".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, failing.concat()).into_response()
    }
}
