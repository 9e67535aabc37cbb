//! Garbage collection for system administrators: createGCSchedule (a manual
//! run, started in the background), getGCHistory and getGC.

use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use berth_store::repo::gc::{GcOptions, GcRun, run_garbage_collection};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::HarborBytes;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .post("/system/gc/schedule", create_gc_schedule)
        .get("/system/gc", get_gc_history)
        .get("/system/gc/{gc_id}", get_gc)
}

/// Harbor's job status of a run: `Running`, `Success` or `Error`.
pub fn job_status(run: &GcRun) -> &'static str {
    match run.status.as_str() {
        "running" => "Running",
        "done" => "Success",
        _ => "Error",
    }
}

fn run_json(run: &GcRun) -> Value {
    let status = job_status(run);
    json!({
        "id": run.id,
        "job_name": "GARBAGE_COLLECTION",
        "job_kind": "MANUAL",
        "job_parameters": run.stats,
        "job_status": status,
        "creation_time": run.started_at,
        "update_time": run.finished_at.as_deref().unwrap_or(&run.heartbeat_at),
    })
}

/// `POST /system/gc/schedule` with `{"schedule": {"type": "Manual"}}`: starts a
/// run now; 201 with its `Location`, 409 while one runs.
pub async fn create_gc_schedule(
    State(state): State<AppState>,
    principal: Principal,
    HarborBytes(body): HarborBytes,
) -> HarborResult<Response> {
    principal.require_sysadmin()?;
    let body: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid schedule body: {e}")))?;
    let kind = body
        .pointer("/schedule/type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !kind.eq_ignore_ascii_case("manual") {
        return Err(ApiError::bad_request(format!(
            "unsupported schedule type {kind:?}: only Manual runs are supported"
        ))
        .into());
    }
    let id = start_gc_as(&state, &principal).await?;
    let mut response = StatusCode::CREATED.into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/api/v2.0/system/gc/{id}")) {
        response.headers_mut().insert(LOCATION, location);
    }
    Ok(response)
}

/// Starts a manual run in the background for `principal` (the API and the
/// portal); its id. A run already going is a 409.
pub async fn start_gc_as(state: &AppState, principal: &Principal) -> Result<i64, ApiError> {
    principal.require_sysadmin()?;
    if state.configuration().await?.flag("read_only") {
        return Err(crate::read_only::refusal());
    }
    let run = state.store.start_gc_run().await?;
    let id = run.id;
    let worker = state.clone();
    // The run's log lines carry the id of the request that started it.
    let task = async move {
        match run_garbage_collection(
            &worker.store,
            &worker.registry.blobs,
            GcOptions::default(),
            run,
        )
        .await
        {
            Ok(stats) => worker.metrics.gc_finished(Some(stats.bytes)),
            Err(err) => {
                worker.metrics.gc_finished(None);
                tracing::error!(error = %err, run = id, "garbage collection failed");
            }
        }
    };
    tokio::spawn(task.in_current_span());
    Ok(id)
}

/// The latest `limit` runs, newest first, for `principal` (the API and the portal).
pub async fn gc_history_as(
    state: &AppState,
    principal: &Principal,
    limit: i64,
) -> Result<Vec<GcRun>, ApiError> {
    principal.require_sysadmin()?;
    Ok(state.store.gc_runs(limit).await?)
}

/// `GET /system/gc`: recent runs, newest first.
pub async fn get_gc_history(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<axum::Json<Vec<Value>>> {
    let runs = gc_history_as(&state, &principal, 100).await?;
    Ok(axum::Json(runs.iter().map(run_json).collect()))
}

/// `GET /system/gc/{gc_id}`.
pub async fn get_gc(
    State(state): State<AppState>,
    principal: Principal,
    Path(gc_id): Path<String>,
) -> HarborResult<axum::Json<Value>> {
    principal.require_sysadmin()?;
    let id: i64 = gc_id
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid gc id {gc_id}")))?;
    let run = state
        .store
        .gc_run(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("gc {id} not found")))?;
    Ok(axum::Json(run_json(&run)))
}
