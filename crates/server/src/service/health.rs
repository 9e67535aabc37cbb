//! The health of the instance's components (core, the database, blob
//! storage), checked together: what Harbor's `/health`, the metrics and
//! orchestrators' probes report, each in its own shape.

use std::time::Duration;

use crate::state::AppState;

/// The Harbor version Berth answers as (the API it speaks), with its own.
pub const HARBOR_VERSION: &str = concat!("v2.16.0-berth-", env!("CARGO_PKG_VERSION"));

/// How long one component may take to answer before it counts as unhealthy.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// The health of one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// Its name: `core`, `database`, `storage`.
    pub name: &'static str,
    /// Why it is unhealthy; `None` when healthy.
    pub error: Option<String>,
}

impl Component {
    /// Whether it answered healthy.
    pub fn is_healthy(&self) -> bool {
        self.error.is_none()
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
pub async fn check_components(state: &AppState) -> Vec<Component> {
    let (database, storage) = tokio::join!(check_database(state), check_storage(state));
    vec![
        Component {
            name: "core",
            error: None,
        },
        Component {
            name: "database",
            error: database.err(),
        },
        Component {
            name: "storage",
            error: storage.err(),
        },
    ]
}
