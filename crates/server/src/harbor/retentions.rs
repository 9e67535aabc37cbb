//! Harbor's tag retention (`/retentions`, all ten operations): a project's
//! policy (its `retention_id` metadata names it), its runs, their tasks (one
//! per repository) and the tasks' logs. Project administrators, maintainers
//! and developers manage them.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Response};
use berth_domain::model::retention::{RetentionPolicy, metadata};
use berth_domain::time::ZERO_TIME;
use berth_store::repo::jobs::{Execution, Task};
use serde_json::{Value, json};

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, LaterJson, paged, path_int};
use crate::operations::{Routes, Surface};
use crate::service::retention;
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/retentions/metadatas", get_rentenition_metadata)
        .post("/retentions", create_retention)
        .get("/retentions/{id}", get_retention)
        .put("/retentions/{id}", update_retention)
        .delete("/retentions/{id}", delete_retention)
        .post("/retentions/{id}/executions", trigger_retention_execution)
        .get("/retentions/{id}/executions", list_retention_executions)
        .patch(
            "/retentions/{id}/executions/{eid}",
            operate_retention_execution,
        )
        .get(
            "/retentions/{id}/executions/{eid}/tasks",
            list_retention_tasks,
        )
        .get(
            "/retentions/{id}/executions/{eid}/tasks/{tid}",
            get_retention_task_log,
        )
}

/// Harbor's status code of a job status: Pending 0, Scheduled 1, Running 2, ended 3.
fn status_code(status: &str) -> i64 {
    match status {
        "Pending" => 0,
        "Scheduled" => 1,
        "Running" => 2,
        _ => 3,
    }
}

fn attrs(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn execution_json(execution: &Execution) -> Value {
    let trigger = match execution.trigger.as_str() {
        "SCHEDULE" => "Schedule",
        other => other,
    };
    json!({
        "id": execution.id,
        "policy_id": execution.vendor_id,
        "start_time": execution.start_time,
        "end_time": execution.end_time.as_deref().unwrap_or(ZERO_TIME),
        "status": execution.status,
        "trigger": trigger,
        "dry_run": attrs(&execution.extra_attrs)["dry_run"].as_bool().unwrap_or(false),
    })
}

fn task_json(task: &Task) -> Value {
    let parameters = attrs(&task.parameters);
    let found = attrs(&task.extra_attrs);
    let repository = parameters["repository"].as_str().unwrap_or_default();
    let count = |name: &str| found[name].as_i64().unwrap_or(0);
    json!({
        "id": task.id,
        "execution_id": task.execution_id,
        "repository": berth_domain::oci::within_project(repository),
        "job_id": task.id.to_string(),
        "status": task.status,
        "status_code": status_code(&task.status),
        "status_revision": task.attempts,
        "start_time": task.start_time.as_deref().unwrap_or(ZERO_TIME),
        "end_time": task.end_time.as_deref().unwrap_or(ZERO_TIME),
        "total": count("total"),
        "retained": count("retained"),
    })
}

fn id_of(text: &str) -> Result<i64, ApiError> {
    path_int("id", text)
}

/// `GET /retentions/metadatas`: the templates and selectors a rule may use.
pub async fn get_rentenition_metadata(principal: Principal) -> HarborResult<axum::Json<Value>> {
    principal.require_authenticated()?;
    Ok(axum::Json(metadata()))
}

/// `POST /retentions`: 201 with the new policy's `Location`.
pub async fn create_retention(
    State(state): State<AppState>,
    principal: Principal,
    body: LaterJson<RetentionPolicy>,
) -> HarborResult<Response> {
    principal.require_authenticated()?;
    let id = retention::create(&state, &principal, body.parse()?).await?;
    Ok((
        StatusCode::CREATED,
        [(LOCATION, format!("/api/v2.0/retentions/{id}"))],
    )
        .into_response())
}

/// `GET /retentions/{id}`.
pub async fn get_retention(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<axum::Json<RetentionPolicy>> {
    Ok(axum::Json(
        retention::get(&state, &principal, id_of(&id)?).await?,
    ))
}

/// `PUT /retentions/{id}`.
pub async fn update_retention(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: LaterJson<RetentionPolicy>,
) -> HarborResult<StatusCode> {
    let id = id_of(&id)?;
    principal.require_authenticated()?;
    retention::update(&state, &principal, id, body.parse()?).await?;
    Ok(StatusCode::OK)
}

/// `DELETE /retentions/{id}`.
pub async fn delete_retention(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<StatusCode> {
    retention::delete(&state, &principal, id_of(&id)?).await?;
    Ok(StatusCode::OK)
}

/// `POST /retentions/{id}/executions` with `{"dry_run": bool}`: 201 with the
/// run's `Location`.
pub async fn trigger_retention_execution(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: LaterJson<Value>,
) -> HarborResult<Response> {
    let id = id_of(&id)?;
    principal.require_authenticated()?;
    let body = body.parse()?;
    let dry_run = match body.get("dry_run") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(dry_run)) => *dry_run,
        Some(other) => {
            return Err(
                ApiError::bad_request(format!("dry_run must be a boolean, not {other}")).into(),
            );
        }
    };
    let eid = retention::trigger(&state, &principal, id, dry_run).await?;
    Ok((
        StatusCode::CREATED,
        [(
            LOCATION,
            format!("/api/v2.0/retentions/{id}/executions/{eid}"),
        )],
    )
        .into_response())
}

/// `GET /retentions/{id}/executions`: newest first, paged.
pub async fn list_retention_executions(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let paging = query.paging()?;
    let (total, executions) =
        retention::executions(&state, &principal, id_of(&id)?, paging).await?;
    let items: Vec<Value> = executions.iter().map(execution_json).collect();
    Ok(paged(&items, total, query.link(paging, total)))
}

/// `PATCH /retentions/{id}/executions/{eid}` with `{"action": "stop"}`.
pub async fn operate_retention_execution(
    State(state): State<AppState>,
    principal: Principal,
    Path((id, eid)): Path<(String, String)>,
    body: LaterJson<Value>,
) -> HarborResult<StatusCode> {
    let (id, eid) = (id_of(&id)?, path_int("eid", &eid)?);
    principal.require_authenticated()?;
    if body.parse()?.get("action").and_then(Value::as_str) != Some("stop") {
        return Err(ApiError::bad_request("action should be 'stop'").into());
    }
    retention::stop(&state, &principal, id, eid).await?;
    Ok(StatusCode::OK)
}

/// `GET /retentions/{id}/executions/{eid}/tasks`: one per repository, paged.
pub async fn list_retention_tasks(
    State(state): State<AppState>,
    principal: Principal,
    Path((id, eid)): Path<(String, String)>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let paging = query.paging()?;
    let (id, eid) = (id_of(&id)?, path_int("eid", &eid)?);
    let (total, tasks) = retention::tasks(&state, &principal, id, eid, paging).await?;
    let items: Vec<Value> = tasks.iter().map(task_json).collect();
    Ok(paged(&items, total, query.link(paging, total)))
}

/// `GET /retentions/{id}/executions/{eid}/tasks/{tid}`: the task's log, as text.
pub async fn get_retention_task_log(
    State(state): State<AppState>,
    principal: Principal,
    Path((id, eid, tid)): Path<(String, String, String)>,
) -> HarborResult<Response> {
    let (id, eid, tid) = (id_of(&id)?, path_int("eid", &eid)?, path_int("tid", &tid)?);
    let log = retention::task_log(&state, &principal, id, eid, tid).await?;
    Ok(super::text(log))
}
