//! `GET /statistics`: project and repository counts the caller may see.

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use crate::error::HarborResult;
use crate::extract::Principal;
use crate::operations::{Routes, Surface};
use crate::service::statistics;
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor).get("/statistics", get_statistic)
}

/// Harbor's Statistic (every field always present).
#[derive(Debug, Serialize)]
pub struct Statistic {
    /// Private projects.
    pub private_project_count: i64,
    /// Repositories in private projects.
    pub private_repo_count: i64,
    /// Public projects.
    pub public_project_count: i64,
    /// Repositories in public projects.
    pub public_repo_count: i64,
    /// All projects.
    pub total_project_count: i64,
    /// All repositories.
    pub total_repo_count: i64,
    /// Bytes stored.
    pub total_storage_consumption: i64,
}

/// Counts for a signed-in caller: public ones for everybody, private ones of
/// the caller's projects, totals for administrators.
pub async fn get_statistic(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Json<Statistic>> {
    let counts = statistics::counts(&state, &principal).await?;
    Ok(Json(statistic_wire(&counts)))
}

/// getStatistic's wire shape of the counts.
fn statistic_wire(s: &berth_store::repo::statistics::Statistic) -> Statistic {
    Statistic {
        private_project_count: s.private_project_count,
        private_repo_count: s.private_repo_count,
        public_project_count: s.public_project_count,
        public_repo_count: s.public_repo_count,
        total_project_count: s.total_project_count,
        total_repo_count: s.total_repo_count,
        total_storage_consumption: s.total_storage_consumption,
    }
}
