//! Harbor's job service dashboard, for system administrators: worker pools
//! (getWorkerPools, getWorkers: each instance is a pool, its workers the
//! places of its job lanes, `BERTH_JOB_WORKERS`),
//! queues (listJobQueues, actionPendingJobs), stopping a job
//! (stopRunningJob) and its log (actionGetJobLog), and the schedules
//! (listSchedules, getSchedulePaused).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_domain::rbac::{Action, SystemResource};
use serde_json::{Value, json};

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, LaterJson, paged};
use crate::operations::{Routes, Surface};
use crate::service::jobservice::{self, Pool, QueueAction, Worker};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/jobservice/pools", get_worker_pools)
        .get("/jobservice/pools/{pool_id}/workers", get_workers)
        .put("/jobservice/jobs/{job_id}", stop_running_job)
        .get("/jobservice/jobs/{job_id}/log", action_get_job_log)
        .get("/jobservice/queues", list_job_queues)
        .put("/jobservice/queues/{job_type}", action_pending_jobs)
        .get("/schedules", list_schedules)
        .get("/schedules/{job_type}/paused", get_schedule_paused)
}

fn pool_json(pool: &Pool) -> Value {
    let (host, pid) = pool.owner.rsplit_once(':').unwrap_or((&pool.owner, "0"));
    json!({
        "pid": pid.parse::<i64>().unwrap_or(0),
        "worker_pool_id": pool.owner,
        "start_at": pool.started_at,
        "heartbeat_at": pool.heartbeat_at,
        "concurrency": pool.concurrency(),
        "host": host,
    })
}

fn worker_json(pool: &Pool, worker: &Worker) -> Value {
    let mut out = json!({"id": worker.id, "pool_id": pool.owner});
    if let Some(task) = &worker.running {
        out["job_name"] = json!(task.vendor_type);
        out["job_id"] = json!(task.id.to_string());
        out["start_at"] = json!(task.start_time);
        out["checkin_at"] = json!(task.update_time);
    }
    out
}

/// `GET /jobservice/pools`: the instances running jobs.
pub async fn get_worker_pools(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<axum::Json<Vec<Value>>> {
    let pools = jobservice::pools(&state, &principal).await?;
    Ok(axum::Json(pools.iter().map(pool_json).collect()))
}

/// `GET /jobservice/pools/{pool_id}/workers` (`all`: every pool's): a
/// worker per place in each of the pool's lanes.
pub async fn get_workers(
    State(state): State<AppState>,
    principal: Principal,
    Path(pool_id): Path<String>,
) -> HarborResult<axum::Json<Vec<Value>>> {
    let pools = jobservice::pools(&state, &principal).await?;
    Ok(axum::Json(
        pools
            .iter()
            .filter(|p| pool_id.eq_ignore_ascii_case("all") || p.owner == pool_id)
            .flat_map(|pool| pool.workers().into_iter().map(move |w| (pool, w)))
            .map(|(pool, worker)| worker_json(pool, &worker))
            .collect(),
    ))
}

/// `PUT /jobservice/jobs/{job_id}`: stops the job (`all`: every running one).
pub async fn stop_running_job(
    State(state): State<AppState>,
    principal: Principal,
    Path(job_id): Path<String>,
) -> HarborResult<StatusCode> {
    jobservice::stop_job(&state, &principal, &job_id).await?;
    Ok(StatusCode::OK)
}

/// `GET /jobservice/jobs/{job_id}/log`: the job's log, as text.
pub async fn action_get_job_log(
    State(state): State<AppState>,
    principal: Principal,
    Path(job_id): Path<String>,
) -> HarborResult<Response> {
    let log = jobservice::job_log(&state, &principal, &job_id).await?;
    Ok(super::text(log))
}

/// `GET /jobservice/queues`: each job type's waiting tasks.
pub async fn list_job_queues(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<axum::Json<Vec<Value>>> {
    let queues = jobservice::queues(&state, &principal).await?;
    Ok(axum::Json(
        queues
            .iter()
            .map(|q| {
                json!({"job_type": q.job_type, "count": q.count, "latency": q.latency, "paused": q.paused})
            })
            .collect(),
    ))
}

/// `PUT /jobservice/queues/{job_type}` with `{"action": "stop" | "pause" | "resume"}`.
pub async fn action_pending_jobs(
    State(state): State<AppState>,
    principal: Principal,
    Path(job_type): Path<String>,
    body: LaterJson<Value>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::JobServiceMonitor, Action::Stop)?;
    let action = match body.parse()?.get("action").and_then(Value::as_str) {
        Some("stop") => QueueAction::Stop,
        Some("pause") => QueueAction::Pause,
        Some("resume") => QueueAction::Resume,
        _ => return Err(ApiError::bad_request("the action is not supported").into()),
    };
    jobservice::act_on_queue(&state, &principal, &job_type, action).await?;
    Ok(StatusCode::OK)
}

/// `GET /schedules`: every schedule, paged.
pub async fn list_schedules(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    let paging = query.paging()?;
    let (total, page) = paging.page_of(jobservice::schedules(&state, &principal).await?);
    let items: Vec<Value> = page
        .iter()
        .map(|s| {
            // Harbor's system jobs (GC, the purge) are of vendor -1.
            let vendor_id = if s.vendor_id == 0 { -1 } else { s.vendor_id };
            json!({"id": s.id, "vendor_type": s.vendor_type, "vendor_id": vendor_id, "cron": s.cron, "update_time": s.update_time})
        })
        .collect();
    Ok(paged(&items, total, query.link(paging, total)))
}

/// `GET /schedules/{job_type}/paused`: whether every schedule is paused.
pub async fn get_schedule_paused(
    State(state): State<AppState>,
    principal: Principal,
    Path(job_type): Path<String>,
) -> HarborResult<axum::Json<Value>> {
    let paused = jobservice::schedules_paused(&state, &principal, &job_type).await?;
    Ok(axum::Json(json!({"paused": paused})))
}
