//! Garbage collection for system administrators: createGCSchedule (a manual
//! run, started in the background), getGCHistory and getGC.

use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use berth_store::repo::gc::GcRun;
use serde_json::{Value, json};

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::HarborBytes;
use crate::operations::{Routes, Surface};
use crate::service::gc;
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .post("/system/gc/schedule", create_gc_schedule)
        .get("/system/gc", get_gc_history)
        .get("/system/gc/{gc_id}", get_gc)
}

fn run_json(run: &GcRun) -> Value {
    let status = gc::job_status(run);
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
    let id = gc::start(&state, &principal).await?;
    let mut response = StatusCode::CREATED.into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/api/v2.0/system/gc/{id}")) {
        response.headers_mut().insert(LOCATION, location);
    }
    Ok(response)
}

/// `GET /system/gc`: recent runs, newest first.
pub async fn get_gc_history(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<axum::Json<Vec<Value>>> {
    let runs = gc::history(&state, &principal, 100).await?;
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
