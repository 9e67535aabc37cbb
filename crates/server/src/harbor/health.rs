//! `GET /health`: Harbor's OverallHealthStatus.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use crate::operations::{Routes, Surface};
use crate::state::AppState;

/// How long one component may take to answer before it counts as unhealthy.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// The health of one component.
#[derive(Debug, Serialize)]
pub struct ComponentHealthStatus {
    name: &'static str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
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

fn component(name: &'static str, result: Result<(), String>) -> ComponentHealthStatus {
    match result {
        Ok(()) => ComponentHealthStatus {
            name,
            status: "healthy",
            error: None,
        },
        Err(error) => ComponentHealthStatus {
            name,
            status: "unhealthy",
            error: Some(error),
        },
    }
}

async fn check_database(state: &AppState) -> Result<(), String> {
    match tokio::time::timeout(CHECK_TIMEOUT, state.store.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "database health check failed");
            Err("failed to check the health status: database unreachable".into())
        }
        Err(_) => Err("failed to check the health status: timeout".into()),
    }
}

async fn check_storage(state: &AppState) -> Result<(), String> {
    match tokio::time::timeout(CHECK_TIMEOUT, state.registry.blobs.check()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "blob storage health check failed");
            Err(err)
        }
        Err(_) => Err("failed to check the health status: timeout".into()),
    }
}

/// The health of core, the database and blob storage, checked together.
pub(crate) async fn check_components(state: &AppState) -> Vec<ComponentHealthStatus> {
    let (database, storage) = tokio::join!(check_database(state), check_storage(state));
    vec![
        component("core", Ok(())),
        component("database", database),
        component("storage", storage),
    ]
}

impl ComponentHealthStatus {
    /// The component's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether it answered healthy.
    pub fn is_healthy(&self) -> bool {
        self.status == "healthy"
    }
}

/// Reports the health of core, the database and blob storage. Always 200, as Harbor.
pub async fn get_health(State(state): State<AppState>) -> Json<OverallHealthStatus> {
    let components = check_components(&state).await;
    let healthy = components.iter().all(ComponentHealthStatus::is_healthy);
    Json(OverallHealthStatus {
        status: if healthy { "healthy" } else { "unhealthy" },
        components,
    })
}
