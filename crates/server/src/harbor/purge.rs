//! Purging the audit log, for system administrators: createPurgeSchedule and
//! updatePurgeSchedule (a purge now, or the schedule purges start on),
//! getPurgeSchedule, getPurgeHistory, getPurgeJob, getPurgeJobLog and
//! stopPurge.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Response};
use berth_domain::rbac::{Action, SystemResource};
use berth_domain::time::ZERO_TIME;
use berth_store::repo::jobs::Execution;
use serde_json::{Value, json};

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborBytes, HarborQuery, paged, path_int};
use crate::harbor::gc::{schedule_json, schedule_request, title_case};
use crate::operations::{Routes, Surface};
use crate::service::audit_purge::{self, Parameters};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .post("/system/purgeaudit/schedule", create_purge_schedule)
        .put("/system/purgeaudit/schedule", update_purge_schedule)
        .get("/system/purgeaudit/schedule", get_purge_schedule)
        .get("/system/purgeaudit", get_purge_history)
        .get("/system/purgeaudit/{purge_id}", get_purge_job)
        .put("/system/purgeaudit/{purge_id}", stop_purge)
        .get("/system/purgeaudit/{purge_id}/log", get_purge_job_log)
}

/// Harbor's ExecHistory of a purge.
fn execution_json(execution: &Execution) -> Value {
    json!({
        "id": execution.id,
        "job_name": audit_purge::VENDOR_TYPE,
        "job_kind": execution.trigger,
        "job_parameters": execution.extra_attrs,
        "job_status": execution.status,
        "deleted": false,
        "schedule": {"type": title_case(&execution.trigger), "cron": "", "next_scheduled_time": ZERO_TIME},
        "creation_time": execution.start_time,
        "update_time": execution.update_time,
    })
}

/// Starts a purge now, or sets or removes the schedule, as `body` asks; the
/// id of the purge started (0 for a schedule, as Harbor answers).
async fn kick(
    state: &AppState,
    principal: &Principal,
    action: Action,
    body: &[u8],
) -> Result<i64, ApiError> {
    principal.require_system(SystemResource::PurgeAuditLog, action)?;
    let given: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid schedule body: {e}")))?;
    if !given.get("schedule").is_some_and(Value::is_object) {
        return Err(ApiError::bad_request("schedule cann't be empty"));
    }
    let parameters = Parameters::parse(given.get("parameters"))?;
    let (plan, _) = schedule_request(body)?;
    match plan {
        None => audit_purge::start(state, principal, &parameters).await,
        Some(plan) => {
            let given = given["parameters"].as_object().cloned().unwrap_or_default();
            audit_purge::set_schedule(state, principal, &plan, &parameters, &given).await?;
            Ok(0)
        }
    }
}

/// `POST /system/purgeaudit/schedule` with `{"schedule": {"type", "cron"},
/// "parameters": {"audit_retention_hour", "include_event_types", "dry_run"}}`:
/// `Manual` purges now; `Hourly`, `Daily`, `Weekly` and `Custom` set the
/// schedule, `None` removes it. 201 with the purge's `Location` (`.../0` for
/// a schedule, as Harbor).
pub async fn create_purge_schedule(
    State(state): State<AppState>,
    principal: Principal,
    HarborBytes(body): HarborBytes,
) -> HarborResult<Response> {
    let id = kick(&state, &principal, Action::Create, &body).await?;
    Ok((
        StatusCode::CREATED,
        [(LOCATION, format!("/api/v2.0/system/purgeaudit/{id}"))],
    )
        .into_response())
}

/// `PUT /system/purgeaudit/schedule`: as the POST, answered 200.
pub async fn update_purge_schedule(
    State(state): State<AppState>,
    principal: Principal,
    HarborBytes(body): HarborBytes,
) -> HarborResult<StatusCode> {
    kick(&state, &principal, Action::Update, &body).await?;
    Ok(StatusCode::OK)
}

/// `GET /system/purgeaudit/schedule`: the schedule as Harbor's ExecHistory;
/// an empty 200 without one.
pub async fn get_purge_schedule(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Response> {
    Ok(match audit_purge::schedule(&state, &principal).await? {
        Some(schedule) => axum::Json(schedule_json(&schedule)).into_response(),
        None => StatusCode::OK.into_response(),
    })
}

/// `GET /system/purgeaudit`: the purges, newest first, paged.
pub async fn get_purge_history(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    let paging = query.paging()?;
    let (total, executions) = audit_purge::history(&state, &principal, paging).await?;
    let items: Vec<Value> = executions.iter().map(execution_json).collect();
    Ok(paged(&items, total, query.link(paging, total)))
}

/// `GET /system/purgeaudit/{purge_id}`.
pub async fn get_purge_job(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<axum::Json<Value>> {
    let id = path_int("purge_id", &id)?;
    let execution = audit_purge::execution(&state, &principal, id).await?;
    Ok(axum::Json(execution_json(&execution)))
}

/// `PUT /system/purgeaudit/{purge_id}`: stops the purge (one that ended stays as it ended).
pub async fn stop_purge(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<StatusCode> {
    let id = path_int("purge_id", &id)?;
    audit_purge::stop(&state, &principal, id).await?;
    Ok(StatusCode::OK)
}

/// `GET /system/purgeaudit/{purge_id}/log`: what the purge did, as text.
pub async fn get_purge_job_log(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<Response> {
    let id = path_int("purge_id", &id)?;
    let log = audit_purge::log(&state, &principal, id).await?;
    Ok(super::text(log))
}
