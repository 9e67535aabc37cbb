//! The job service as Harbor's dashboard shows it: the instances running
//! jobs (each a worker pool of one worker), the queues of waiting tasks by
//! job type, stopping tasks, pausing queues and schedules. System
//! administrators only.

use berth_domain::rbac::{Action, SystemResource};
use berth_domain::time;
use berth_store::repo::jobs::{SCHEDULER, Schedule, Task};

use crate::error::ApiError;
use crate::extract::Principal;
use crate::state::AppState;
use crate::workers::{HEARTBEAT, KINDS};

/// An instance running jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// `host:pid`.
    pub owner: String,
    /// When its workers started (store format).
    pub started_at: String,
    /// When it was last seen (store format).
    pub heartbeat_at: String,
    /// The task it runs, if any.
    pub running: Option<Task>,
}

/// How long an instance not heard from still counts (six heartbeats).
const SEEN_WITHIN: i64 = 6 * HEARTBEAT.as_secs() as i64;

/// The instances heard from lately, and those running a task.
pub async fn pools(state: &AppState, principal: &Principal) -> Result<Vec<Pool>, ApiError> {
    principal.require_system(SystemResource::JobServiceMonitor, Action::List)?;
    let jobs = state.store.jobs();
    let seen = jobs.workers(&time::now_plus_seconds(-SEEN_WITHIN)).await?;
    let running = jobs.running().await?;
    let mut pools: Vec<Pool> = seen
        .into_iter()
        .map(|(owner, started_at, heartbeat_at)| Pool {
            running: running
                .iter()
                .find(|t| t.owner.as_deref() == Some(&owner))
                .cloned(),
            owner,
            started_at,
            heartbeat_at,
        })
        .collect();
    for task in running {
        let Some(owner) = task.owner.clone() else {
            continue;
        };
        if !pools.iter().any(|p| p.owner == owner) {
            pools.push(Pool {
                started_at: task.start_time.clone().unwrap_or_default(),
                heartbeat_at: task.update_time.clone(),
                owner,
                running: Some(task),
            });
        }
    }
    Ok(pools)
}

/// A queue: a job type, its waiting tasks, how long the oldest has waited
/// (seconds) and whether it is paused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    /// Harbor's job type.
    pub job_type: String,
    /// Waiting tasks.
    pub count: i64,
    /// Seconds the oldest has waited.
    pub latency: i64,
    /// Paused.
    pub paused: bool,
}

/// Every job type's queue, by name.
pub async fn queues(state: &AppState, principal: &Principal) -> Result<Vec<Queue>, ApiError> {
    principal.require_system(SystemResource::JobServiceMonitor, Action::List)?;
    let jobs = state.store.jobs();
    let waiting = jobs.queues().await?;
    let paused = jobs.paused_types().await?;
    let now = time::unix_now();
    let mut kinds: Vec<&str> = KINDS.to_vec();
    kinds.sort_unstable();
    Ok(kinds
        .into_iter()
        .map(|kind| {
            let (count, latency) =
                waiting
                    .iter()
                    .find(|(k, ..)| k == kind)
                    .map_or((0, 0), |(_, count, oldest)| {
                        let since =
                            time::parse_timestamp(oldest).map_or(now, |t| t.unix_timestamp());
                        (*count, (now - since).max(0))
                    });
            Queue {
                job_type: kind.to_string(),
                count,
                latency,
                paused: paused.iter().any(|p| p == kind),
            }
        })
        .collect())
}

/// What `PUT /jobservice/queues/{job_type}` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueAction {
    /// Stop every waiting task.
    Stop,
    /// Let the waiting tasks wait.
    Pause,
    /// Let them run again.
    Resume,
}

/// Does `action` to the queue of `job_type` (`all`: every queue;
/// `scheduler`: every schedule, which pause and resume only).
pub async fn act_on_queue(
    state: &AppState,
    principal: &Principal,
    job_type: &str,
    action: QueueAction,
) -> Result<(), ApiError> {
    principal.require_system(SystemResource::JobServiceMonitor, Action::Stop)?;
    let job_type = job_type.to_ascii_uppercase();
    let jobs = state.store.jobs();
    let kinds: Vec<&str> = match job_type.as_str() {
        "ALL" => KINDS.to_vec(),
        SCHEDULER => vec![SCHEDULER],
        kind if KINDS.contains(&kind) => vec![kind],
        other => {
            return Err(ApiError::not_found(format!("no job queue {other}")));
        }
    };
    for kind in kinds {
        match action {
            QueueAction::Stop if kind == SCHEDULER => {
                return Err(ApiError::bad_request(
                    "the scheduler's queue pauses and resumes; it does not stop",
                ));
            }
            QueueAction::Stop => {
                jobs.stop_waiting(Some(kind)).await?;
            }
            QueueAction::Pause => jobs.set_paused(kind, true).await?,
            QueueAction::Resume => jobs.set_paused(kind, false).await?,
        }
    }
    Ok(())
}

/// Stops task `id` (`all`: every running task).
pub async fn stop_job(state: &AppState, principal: &Principal, id: &str) -> Result<(), ApiError> {
    principal.require_system(SystemResource::JobServiceMonitor, Action::Stop)?;
    let jobs = state.store.jobs();
    if id.eq_ignore_ascii_case("all") {
        for task in jobs.running().await? {
            jobs.stop_task(task.id).await?;
        }
        return Ok(());
    }
    if jobs.stop_task(job_id(id)?).await? {
        Ok(())
    } else {
        Err(ApiError::not_found(format!("job {id} not found")))
    }
}

fn job_id(id: &str) -> Result<i64, ApiError> {
    id.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid job id {id}")))
}

/// The log of task `id`.
pub async fn job_log(
    state: &AppState,
    principal: &Principal,
    id: &str,
) -> Result<String, ApiError> {
    principal.require_system(SystemResource::JobServiceMonitor, Action::List)?;
    let jobs = state.store.jobs();
    let id = job_id(id)?;
    match jobs.task(id).await? {
        Some(_) => Ok(jobs.log_text(id).await?),
        None => Err(ApiError::not_found(format!("job {id} not found"))),
    }
}

/// Every schedule, by id.
pub async fn schedules(state: &AppState, principal: &Principal) -> Result<Vec<Schedule>, ApiError> {
    principal.require_system(SystemResource::JobServiceMonitor, Action::List)?;
    Ok(state.store.jobs().schedules().await?)
}

/// Whether every schedule is paused (`job_type` must be `all`); any
/// signed-in caller may ask, as in Harbor.
pub async fn schedules_paused(
    state: &AppState,
    principal: &Principal,
    job_type: &str,
) -> Result<bool, ApiError> {
    principal.require_authenticated()?;
    if !job_type.eq_ignore_ascii_case("all") {
        return Err(ApiError::bad_request("job_type can only be 'all'"));
    }
    Ok(state.store.jobs().paused(SCHEDULER).await?)
}
