//! `GET /health`: Harbor's OverallHealthStatus.

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use crate::operations::{Routes, Surface};
use crate::service::health::{self, Component};
use crate::state::AppState;

/// The health of one component.
#[derive(Debug, Serialize)]
pub struct ComponentHealthStatus {
    name: &'static str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl From<Component> for ComponentHealthStatus {
    fn from(c: Component) -> Self {
        Self {
            name: c.name,
            status: if c.is_healthy() {
                "healthy"
            } else {
                "unhealthy"
            },
            error: c.error,
        }
    }
}

/// The overall health: healthy only if every component is.
#[derive(Debug, Serialize)]
pub struct OverallHealthStatus {
    status: &'static str,
    components: Vec<ComponentHealthStatus>,
}

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor).get("/health", get_health)
}

/// Reports the health of core, the database and blob storage. Always 200, as Harbor.
pub async fn get_health(State(state): State<AppState>) -> Json<OverallHealthStatus> {
    let components = health::check_components(&state).await;
    let healthy = components.iter().all(Component::is_healthy);
    Json(OverallHealthStatus {
        status: if healthy { "healthy" } else { "unhealthy" },
        components: components.into_iter().map(Into::into).collect(),
    })
}
