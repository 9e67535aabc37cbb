//! The job service as Harbor's dashboard shows it: the instances running
//! jobs (each a worker pool, its workers those of its lanes), the queues of waiting tasks by
//! job type, stopping tasks, pausing queues and schedules. System
//! administrators only.

use berth_domain::rbac::{Action, SystemResource};
use berth_domain::time;
use berth_store::StoreError;
use berth_store::repo::jobs::{SCHEDULER, Schedule, Task};

use crate::error::ApiError;
use crate::extract::Principal;
use crate::state::AppState;
use crate::workers::{HEARTBEAT, KINDS, LANES};

/// An instance running jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// `host:pid`.
    pub owner: String,
    /// When its workers started (store format).
    pub started_at: String,
    /// When it was last seen (store format).
    pub heartbeat_at: String,
    /// Its lanes and how many workers each has, as it said (none from an
    /// instance that does not say: it has one worker).
    pub lanes: Vec<(String, usize)>,
    /// The tasks it runs, by id.
    pub running: Vec<Task>,
}

/// A worker of a pool: a place in one of its lanes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    /// `host:pid/lane/n`.
    pub id: String,
    /// The task it runs, if any.
    pub running: Option<Task>,
}

impl Pool {
    /// How many tasks it runs at once.
    pub fn concurrency(&self) -> usize {
        if self.lanes.is_empty() {
            return 1;
        }
        self.lanes.iter().map(|(_, count)| count).sum()
    }

    /// Its workers, lane by lane, each lane's running tasks on its first
    /// places (a task of no lane it names gets a place of its own after).
    pub fn workers(&self) -> Vec<Worker> {
        if self.lanes.is_empty() {
            let mut workers = vec![Worker {
                id: self.owner.clone(),
                running: self.running.first().cloned(),
            }];
            workers.extend(self.running.iter().skip(1).map(|task| Worker {
                id: format!("{}/{}", self.owner, task.id),
                running: Some(task.clone()),
            }));
            return workers;
        }
        let mut workers = Vec::new();
        let mut placed = Vec::new();
        for (name, count) in &self.lanes {
            let kinds = LANES
                .iter()
                .find(|lane| lane.name == name)
                .map_or(&[][..], |lane| lane.kinds);
            let tasks: Vec<&Task> = self
                .running
                .iter()
                .filter(|t| kinds.contains(&t.vendor_type.as_str()))
                .collect();
            placed.extend(tasks.iter().map(|t| t.id));
            for place in 0..(*count).max(tasks.len()) {
                workers.push(Worker {
                    id: format!("{}/{name}/{place}", self.owner),
                    running: tasks.get(place).map(|t| (*t).clone()),
                });
            }
        }
        for task in self.running.iter().filter(|t| !placed.contains(&t.id)) {
            workers.push(Worker {
                id: format!(
                    "{}/{}/{}",
                    self.owner,
                    task.vendor_type.to_ascii_lowercase(),
                    task.id
                ),
                running: Some(task.clone()),
            });
        }
        workers
    }
}

/// The lanes an instance noted (`webhook=10,gc=1`); pairs that do not read
/// are left out.
fn lanes_of(text: &str) -> Vec<(String, usize)> {
    text.split(',')
        .filter_map(|pair| {
            let (name, count) = pair.split_once('=')?;
            Some((name.trim().to_string(), count.trim().parse().ok()?))
        })
        .collect()
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
        .map(|worker| Pool {
            running: running
                .iter()
                .filter(|t| t.owner.as_deref() == Some(&worker.owner))
                .cloned()
                .collect(),
            lanes: lanes_of(&worker.lanes),
            owner: worker.owner,
            started_at: worker.started_at,
            heartbeat_at: worker.heartbeat_at,
        })
        .collect();
    for task in running {
        let Some(owner) = task.owner.clone() else {
            continue;
        };
        match pools.iter_mut().find(|p| p.owner == owner) {
            Some(pool) if pool.running.iter().any(|t| t.id == task.id) => {}
            Some(pool) => pool.running.push(task),
            None => pools.push(Pool {
                started_at: task.start_time.clone().unwrap_or_default(),
                heartbeat_at: task.update_time.clone(),
                owner,
                lanes: Vec::new(),
                running: vec![task],
            }),
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

/// Harbor's other job types, which Berth does not run (yet): their queues
/// are listed, always empty, and take the same actions, as Harbor lists a
/// queue for every job type it knows.
const IDLE_KINDS: [&str; 6] = [
    "AUDIT_LOGS_GDPR_COMPLIANT",
    "EXECUTION_SWEEP",
    "IMAGE_SCAN",
    "P2P_PREHEAT",
    "SCAN_DATA_EXPORT",
    "SYSTEM_ARTIFACT_CLEANUP",
];

/// Every job type's queue (those Berth runs, Harbor's others, and the
/// scheduler's), by name.
pub async fn queues(state: &AppState, principal: &Principal) -> Result<Vec<Queue>, ApiError> {
    principal.require_system(SystemResource::JobServiceMonitor, Action::List)?;
    Ok(all_queues(state).await?)
}

/// [`queues`] without the permission check (for the metrics).
pub async fn all_queues(state: &AppState) -> Result<Vec<Queue>, StoreError> {
    let jobs = state.store.jobs();
    let waiting = jobs.queues().await?;
    let paused = jobs.paused_types().await?;
    let now = time::unix_now();
    let mut kinds: Vec<&str> = KINDS.iter().chain(&IDLE_KINDS).copied().collect();
    kinds.push(SCHEDULER);
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
        kind if IDLE_KINDS.contains(&kind) => Vec::new(),
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

/// Stops task `id` (`all`: every running task); one that is not running is
/// left alone.
pub async fn stop_job(state: &AppState, principal: &Principal, id: &str) -> Result<(), ApiError> {
    principal.require_system(SystemResource::JobServiceMonitor, Action::Stop)?;
    let jobs = state.store.jobs();
    if id.eq_ignore_ascii_case("all") {
        for task in jobs.running().await? {
            jobs.stop_task(task.id).await?;
        }
        return Ok(());
    }
    // As Harbor: an id that names no running task (one that ended, or a
    // job id of Harbor's own 24-hex form) stops nothing and is no error.
    let stopped = match id.parse::<i64>() {
        Ok(task) => jobs.stop_task(task).await?,
        Err(_) => false,
    };
    if !stopped {
        tracing::info!(job = id, "no running job to stop; maybe it already ended");
    }
    Ok(())
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
