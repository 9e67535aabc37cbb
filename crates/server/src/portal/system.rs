//! System administration: garbage collection now and its last runs, and the
//! statistics, through the same functions as Harbor's /system/gc and /statistics.

use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::Value;

use super::html::{self, esc};
use super::{PortalError, PortalForm, PortalUser, check_form_csrf, see_other};
use crate::error::{ApiError, ErrorKind};
use crate::service::gc::{self, job_status};
use crate::service::statistics;
use crate::state::AppState;

/// Runs shown.
const RUNS: i64 = 10;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/harbor/system", get(show_system))
        .route("/harbor/system/gc", post(run_gc))
}

/// What was just done.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ShowQuery {
    #[serde(default)]
    started: Option<i64>,
}

/// `GET /harbor/system`.
async fn show_system(
    State(state): State<AppState>,
    portal: PortalUser,
    Query(query): Query<ShowQuery>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    let principal = portal.principal();
    let failed = |err| PortalError::api(err, Some(session));
    let stats = statistics::counts(&state, &principal)
        .await
        .map_err(failed)?;
    let runs = gc::history(&state, &principal, RUNS)
        .await
        .map_err(failed)?;
    let mut rows = String::new();
    for run in &runs {
        let stats: Value = serde_json::from_str(&run.stats).unwrap_or(Value::Null);
        let count = |name: &str| stats.get(name).and_then(Value::as_i64).unwrap_or(0);
        let result = match stats.get("error").and_then(Value::as_str) {
            Some(error) => error.to_string(),
            None if run.status == "done" => format!(
                "{} blobs deleted ({} freed), {} project links dropped, {} uploads expired, {} stray files removed",
                count("blobs"),
                html::human_size(count("bytes")),
                count("links"),
                count("uploads"),
                count("stray_files")
            ),
            None => String::new(),
        };
        rows.push_str(&format!(
            r#"<tr data-gc="{id}"><td>{id}</td><td class="status">{status}</td><td>{started}</td><td>{finished}</td><td class="result">{result}</td></tr>"#,
            id = run.id,
            status = job_status(run),
            started = esc(&html::when(&run.started_at)),
            finished = esc(&html::when(run.finished_at.as_deref().unwrap_or(""))),
            result = esc(&result),
        ));
    }
    if rows.is_empty() {
        rows = r#"<tr><td colspan="5" class="muted">No runs yet.</td></tr>"#.into();
    }
    let notice = match query.started {
        Some(id) => html::notice(
            "ok",
            &format!("Garbage collection run {id} started; reload to follow it."),
        ),
        None => String::new(),
    };
    let main = format!(
        r#"<h1>System</h1>{notice}
<h2>Statistics</h2>
<dl class="stats" id="statistics">
<dt>Projects</dt><dd id="total_projects">{total_projects} ({public_projects} public, {private_projects} private)</dd>
<dt>Repositories</dt><dd id="total_repos">{total_repos} ({public_repos} public, {private_repos} private)</dd>
<dt>Storage</dt><dd id="storage">{storage}</dd>
</dl>
<h2>Garbage collection</h2>
<form class="toolbar" method="post" action="/harbor/system/gc">{csrf}<button type="submit" id="run_gc">Run garbage collection now</button></form>
<table id="gc_runs"><thead><tr><th>Run</th><th>Status</th><th>Started</th><th>Finished</th><th>Result</th></tr></thead>
<tbody>{rows}</tbody></table>"#,
        total_projects = stats.total_project_count,
        public_projects = stats.public_project_count,
        private_projects = stats.private_project_count,
        total_repos = stats.total_repo_count,
        public_repos = stats.public_repo_count,
        private_repos = stats.private_repo_count,
        storage = esc(&html::human_size(stats.total_storage_consumption)),
        csrf = html::csrf_field(session),
    );
    Ok(html::page("System", Some(session), &main).into_response())
}

/// The run form's field.
#[derive(Debug, Deserialize)]
pub(super) struct RunForm {
    #[serde(default)]
    csrf_token: String,
}

/// `POST /harbor/system/gc`: createGCSchedule's manual run.
async fn run_gc(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<RunForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let id = gc::start(&state, &portal.principal())
        .await
        .map_err(|err| {
            let err = match err.kind {
                ErrorKind::Conflict => ApiError::new(
                    ErrorKind::Conflict,
                    "A garbage collection is already running; wait for it to finish.",
                ),
                _ => err,
            };
            PortalError::api(err, Some(session))
        })?;
    Ok(see_other(&format!("/harbor/system?started={id}")))
}
