//! Garbage collection for system administrators: createGCSchedule and
//! updateGCSchedule (a manual run, started in the background, or the
//! schedule runs start on: Hourly, Daily, Weekly, Custom, None),
//! getGCSchedule, getGCHistory and getGC.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Response};
use berth_domain::rbac::{Action, SystemResource};
use berth_domain::time::ZERO_TIME;
use berth_store::repo::gc::GcRun;
use berth_store::repo::jobs::Schedule;
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
        .put("/system/gc/schedule", update_gc_schedule)
        .get("/system/gc/schedule", get_gc_schedule)
        .get("/system/gc", get_gc_history)
        .get("/system/gc/{gc_id}", get_gc)
        .get("/system/gc/{gc_id}/log", get_gc_log)
        .put("/system/gc/{gc_id}", stop_gc)
}

fn run_json(run: &GcRun) -> Value {
    let status = gc::job_status(run);
    json!({
        "id": run.id,
        "job_name": "GARBAGE_COLLECTION",
        "job_kind": run.trigger,
        "job_parameters": gc::job_parameters(run),
        "job_status": status,
        "deleted": false,
        "schedule": {"type": title_case(&run.trigger), "cron": "", "next_scheduled_time": ZERO_TIME},
        "creation_time": run.started_at,
        "update_time": run.finished_at.as_deref().unwrap_or(&run.heartbeat_at),
    })
}

/// `MANUAL` as Harbor shows it in a schedule's type: `Manual`.
pub(super) fn title_case(word: &str) -> String {
    let lower = word.to_ascii_lowercase();
    let mut chars = lower.chars();
    chars
        .next()
        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// What a GCSchedule body asks: a manual run now (`Some(parameters)` with no
/// plan), or a schedule.
pub(super) fn schedule_request(body: &[u8]) -> Result<(Option<gc::Plan>, Value), ApiError> {
    let body: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid schedule body: {e}")))?;
    let text = |pointer: &str| {
        body.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let parameters = match body.get("parameters") {
        Some(Value::Object(map)) => Value::Object(map.clone()),
        _ => json!({}),
    };
    let kind = text("/schedule/type");
    if kind.eq_ignore_ascii_case("manual") {
        return Ok((None, parameters));
    }
    Ok((
        Some(gc::Plan::parse(kind, text("/schedule/cron"))?),
        parameters,
    ))
}

/// Starts a manual run, or sets or removes the schedule, as `body` asks; the
/// id of the run started (0 for a schedule, as Harbor answers).
async fn kick(
    state: &AppState,
    principal: &Principal,
    action: Action,
    body: &[u8],
) -> Result<i64, ApiError> {
    principal.require_system(SystemResource::GarbageCollection, action)?;
    match schedule_request(body)? {
        (None, parameters) => {
            let parameters = gc::check_parameters(&parameters)?;
            gc::start(state, principal, parameters).await
        }
        (Some(plan), parameters) => {
            gc::set_schedule(state, principal, &plan, parameters).await?;
            Ok(0)
        }
    }
}

/// `POST /system/gc/schedule` with `{"schedule": {"type", "cron"}, "parameters"}`:
/// `Manual` starts a run now (409 while one runs); `Hourly`, `Daily`,
/// `Weekly` and `Custom` set the schedule, `None` removes it. 201 with the
/// run's `Location` (`.../gc/0` for a schedule, as Harbor).
pub async fn create_gc_schedule(
    State(state): State<AppState>,
    principal: Principal,
    HarborBytes(body): HarborBytes,
) -> HarborResult<Response> {
    let id = kick(&state, &principal, Action::Create, &body).await?;
    Ok((
        StatusCode::CREATED,
        [(LOCATION, format!("/api/v2.0/system/gc/{id}"))],
    )
        .into_response())
}

/// `PUT /system/gc/schedule`: as the POST, answered 200.
pub async fn update_gc_schedule(
    State(state): State<AppState>,
    principal: Principal,
    HarborBytes(body): HarborBytes,
) -> HarborResult<StatusCode> {
    kick(&state, &principal, Action::Update, &body).await?;
    Ok(StatusCode::OK)
}

/// `GET /system/gc/schedule`: Harbor's GCHistory of the schedule (its cron as
/// `job_kind`, its parameters, the next time it fires); an empty 200 without one.
pub async fn get_gc_schedule(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Response> {
    Ok(match gc::schedule(&state, &principal).await? {
        Some(schedule) => axum::Json(schedule_json(&schedule)).into_response(),
        None => StatusCode::OK.into_response(),
    })
}

/// Harbor's ExecHistory of a job's schedule: its cron as `job_kind`, its
/// parameters, the next time it fires.
pub(super) fn schedule_json(schedule: &Schedule) -> Value {
    json!({
        "id": schedule.id,
        "job_name": "",
        "job_kind": schedule.cron,
        "job_parameters": schedule.parameters,
        "job_status": "",
        "deleted": false,
        "schedule": {
            "type": schedule.schedule_type,
            "cron": schedule.cron,
            "next_scheduled_time": schedule.next_fire_at,
        },
        "creation_time": schedule.creation_time,
        "update_time": schedule.update_time,
    })
}

/// `GET /system/gc`: recent runs, newest first.
pub async fn get_gc_history(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<axum::Json<Vec<Value>>> {
    let runs = gc::history(&state, &principal, 100).await?;
    Ok(axum::Json(runs.iter().map(run_json).collect()))
}

/// Run `{gc_id}` (administrators): 400 for an id that is not a number, 404 for none.
async fn run_of(state: &AppState, principal: &Principal, gc_id: &str) -> Result<GcRun, ApiError> {
    principal.require_system(SystemResource::GarbageCollection, Action::Read)?;
    let id: i64 = gc_id
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid gc id {gc_id}")))?;
    state
        .store
        .gc_run(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("gc {id} not found")))
}

/// `GET /system/gc/{gc_id}`.
pub async fn get_gc(
    State(state): State<AppState>,
    principal: Principal,
    Path(gc_id): Path<String>,
) -> HarborResult<axum::Json<Value>> {
    let run = run_of(&state, &principal, &gc_id).await?;
    Ok(axum::Json(run_json(&run)))
}

/// `GET /system/gc/{gc_id}/log`: what the run did, as text.
pub async fn get_gc_log(
    State(state): State<AppState>,
    principal: Principal,
    Path(gc_id): Path<String>,
) -> HarborResult<Response> {
    let run = run_of(&state, &principal, &gc_id).await?;
    Ok(super::text(gc::log_of(&run)))
}

/// `PUT /system/gc/{gc_id}`: stops the run at its next step (one that ended
/// stays as it ended).
pub async fn stop_gc(
    State(state): State<AppState>,
    principal: Principal,
    Path(gc_id): Path<String>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::GarbageCollection, Action::Stop)?;
    let id: i64 = gc_id
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid gc id {gc_id}")))?;
    gc::stop(&state, &principal, id).await?;
    Ok(StatusCode::OK)
}
