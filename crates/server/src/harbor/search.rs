//! `GET /search`: projects and repositories the caller may see.

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use crate::error::HarborResult;
use crate::extract::Principal;
use crate::extract::harbor::HarborQuery;
use crate::harbor::projects::{ProjectWire, project_wire};
use crate::operations::{Routes, Surface};
use crate::service::projects::viewer;
use crate::state::AppState;
use berth_store::repo::projects::Viewer;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor).get("/search", search)
}

/// Harbor's SearchRepository (zero values omitted).
#[derive(Debug, Serialize)]
pub struct SearchRepository {
    #[serde(skip_serializing_if = "is_zero")]
    project_id: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    project_name: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    project_public: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    repository_name: String,
    #[serde(skip_serializing_if = "is_zero")]
    pull_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    artifact_count: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// Harbor's Search.
#[derive(Debug, Serialize)]
pub struct Search {
    project: Vec<ProjectWire>,
    repository: Vec<SearchRepository>,
}

/// Visible projects whose name contains `q` (case-sensitive) and visible
/// repositories whose full name contains it (case-insensitive).
pub async fn search(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Json<Search>> {
    let text = query.required("q")?;
    // Robots search public projects only (Harbor).
    let viewer = match principal {
        Principal::Robot(_) => Viewer::Anonymous,
        _ => viewer(&principal),
    };
    // Two independent statements, run at the same time.
    let (project_store, statistics) = (state.store.projects(), state.store.statistics());
    let ((projects, details), repositories) = tokio::try_join!(
        project_store.search(viewer, &text, principal.user().map(|u| u.id)),
        statistics.search_repositories(viewer, &text),
    )?;
    let project = projects
        .iter()
        .map(|p| {
            let mut wire = project_wire(p, &details, true);
            wire.clear_owner_name();
            wire
        })
        .collect();
    let repository = repositories
        .into_iter()
        .map(|hit| SearchRepository {
            project_id: hit.project_id,
            project_name: hit.project_name,
            project_public: hit.project_public != 0,
            repository_name: hit.repository_name,
            pull_count: hit.pull_count,
            artifact_count: hit.artifact_count,
        })
        .collect();
    Ok(Json(Search {
        project,
        repository,
    }))
}
