//! What this instance does on its own: fires the schedules that are due and
//! runs the job tasks it takes (`crates/store/src/repo/jobs.rs`), renewing
//! each task's lease while it runs. Every instance does the same; the store
//! makes a tick fire once and a task run on one instance.
//!
//! Tasks run in lanes ([`LANES`]): each job kind has a lane of its own with a
//! bounded number of workers ([`JobWorkers`], `BERTH_JOB_WORKERS`), so a task
//! never waits behind a task of another lane (a replication whose source went
//! silent holds no webhook), and within a lane at most that many run at once.
//! A lane shares its workers between vendors (a webhook policy, a replication
//! policy): a vendor holds at most half the lane, and no more than there are
//! other free workers (the lane's last free worker goes to a vendor with
//! nothing running), so a policy whose receivers never answer cannot keep
//! another policy's deliveries waiting longer than one attempt's deadline.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use berth_store::repo::jobs::{Lease, NewTask, Outcome, Task};
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::{Notify, Semaphore, watch};

use crate::service::{audit_purge, gc, replication, retention, webhooks};
use crate::state::AppState;

/// How long a task is held without a renewal before another instance may
/// take it, unless the settings say otherwise (`BERTH_JOB_LEASE`); the
/// worker renews it every third of that.
pub const LEASE: Duration = Duration::from_secs(60);
/// How often this instance notes that its workers are alive (the job
/// service's worker pools show the instances seen within a minute).
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// How often due schedules and waiting tasks are looked for.
const TICK: Duration = Duration::from_secs(1);
/// How many ended executions each vendor (a webhook policy, a retention
/// policy, the audit purge) keeps: Harbor's task sweep keeps 50.
pub const KEPT_EXECUTIONS: i64 = 50;
/// The job types whose old executions are swept (garbage collections keep
/// their own history, `gc_runs`).
const SWEPT: [&str; 5] = [
    webhooks::WEBHOOK,
    webhooks::SLACK_VENDOR,
    retention::RETENTION,
    audit_purge::VENDOR_TYPE,
    replication::REPLICATION,
];
/// How often old executions are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(600);

/// Removes ended executions beyond each vendor's newest [`KEPT_EXECUTIONS`]
/// every [`SWEEP_EVERY`], for ever (every instance; the work is idempotent).
pub async fn sweep(state: AppState) {
    let mut ticks = tokio::time::interval(SWEEP_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match state.store.jobs().sweep(&SWEPT, KEPT_EXECUTIONS).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "old job executions removed"),
            Err(err) => tracing::warn!(error = %err, "removing old job executions failed"),
        }
    }
}

/// The job types this instance runs.
pub const KINDS: [&str; 6] = [
    gc::VENDOR_TYPE,
    retention::RETENTION,
    audit_purge::VENDOR_TYPE,
    webhooks::WEBHOOK,
    webhooks::SLACK_VENDOR,
    replication::REPLICATION,
];

/// This instance's name as a task's owner: its host and process.
pub fn owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    format!("{host}:{}", std::process::id())
}

/// A lane: job kinds that share a pool of workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    /// Its name in `BERTH_JOB_WORKERS` and in the job service's worker ids.
    pub name: &'static str,
    /// The job types (vendor types) it runs.
    pub kinds: &'static [&'static str],
    /// How many workers it has unless the settings say otherwise.
    pub workers: usize,
}

/// The lanes, one per job kind; deliveries to `http` targets and to Slack
/// share one.
pub const LANES: [Lane; 5] = [
    Lane {
        name: "webhook",
        kinds: &[webhooks::WEBHOOK, webhooks::SLACK_VENDOR],
        workers: 10,
    },
    Lane {
        name: "replication",
        kinds: &[replication::REPLICATION],
        workers: 4,
    },
    Lane {
        name: "retention",
        kinds: &[retention::RETENTION],
        workers: 2,
    },
    Lane {
        name: "gc",
        kinds: &[gc::VENDOR_TYPE],
        workers: 1,
    },
    Lane {
        name: "audit-purge",
        kinds: &[audit_purge::VENDOR_TYPE],
        workers: 1,
    },
];

/// The most workers a lane may have.
pub const MAX_LANE_WORKERS: usize = 256;

/// How many workers each of the [`LANES`] has on this instance
/// (`BERTH_JOB_WORKERS`): comma-separated `lane=count` pairs over the
/// defaults `webhook=10,replication=4,retention=2,gc=1,audit-purge=1`; a
/// lane of 0 runs nothing here (another instance runs its tasks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobWorkers([usize; LANES.len()]);

impl Default for JobWorkers {
    fn default() -> Self {
        Self(LANES.map(|lane| lane.workers))
    }
}

impl JobWorkers {
    /// Each lane with its count of workers, in [`LANES`]' order.
    pub fn lanes(&self) -> impl Iterator<Item = (&'static Lane, usize)> + '_ {
        LANES.iter().zip(self.0.iter().copied())
    }
}

impl FromStr for JobWorkers {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut workers = Self::default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, count) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not lane=count"))?;
            let Some(index) = LANES.iter().position(|lane| lane.name == name.trim()) else {
                let names: Vec<&str> = LANES.iter().map(|lane| lane.name).collect();
                return Err(format!(
                    "unknown job lane `{}` ({})",
                    name.trim(),
                    names.join(", ")
                ));
            };
            workers.0[index] = count
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= MAX_LANE_WORKERS)
                .ok_or_else(|| {
                    format!(
                        "`{}` is not a count of workers (0 to {MAX_LANE_WORKERS})",
                        count.trim()
                    )
                })?;
        }
        Ok(workers)
    }
}

impl fmt::Display for JobWorkers {
    /// `webhook=10,replication=4,...`: what [`JobWorkers::from_str`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs: Vec<String> = self
            .lanes()
            .map(|(lane, count)| format!("{}={count}", lane.name))
            .collect();
        f.write_str(&pairs.join(","))
    }
}

/// How many tasks of one vendor a lane of `workers` workers, `free` of them
/// free, may take another for: half the lane at most, and fewer than the
/// free workers (the last free one waits for a vendor with none running).
pub fn share(workers: usize, free: usize) -> i64 {
    let half = workers.div_ceil(2).max(1);
    i64::try_from(half.min(free)).unwrap_or(i64::MAX)
}

/// Wakes this instance's lanes that wait for work.
static NEW_TASKS: Notify = Notify::const_new();

/// Tells this instance's idle lanes that tasks were just made here (other
/// instances find them at their next tick).
pub fn wake() {
    NEW_TASKS.notify_waiters();
}

/// Fires due schedules every second and runs each lane of `workers`, for
/// ever, holding each task it takes for `lease` at a time.
pub async fn run(state: AppState, lease: Duration, workers: JobWorkers) {
    let owner: Arc<str> = owner().into();
    let started = berth_domain::time::now();
    state
        .metrics
        .jobservice_started(&owner, workers.lanes().map(|(_, count)| count).sum());
    for (lane, count) in workers.lanes().filter(|(_, count)| *count > 0) {
        tokio::spawn(run_lane(state.clone(), owner.clone(), lane, count, lease));
    }
    let lanes = workers.to_string();
    let mut noted = None::<std::time::Instant>;
    loop {
        if noted.is_none_or(|at| at.elapsed() >= HEARTBEAT) {
            match state.store.jobs().heartbeat(&owner, &started, &lanes).await {
                Ok(()) => noted = Some(std::time::Instant::now()),
                Err(err) => tracing::warn!(error = %err, "noting this instance's workers failed"),
            }
        }
        if let Err(err) = state
            .store
            .jobs()
            .fire_due(OffsetDateTime::now_utc(), tasks_of)
            .await
        {
            tracing::warn!(error = %err, "firing due schedules failed; trying again");
        }
        tokio::time::sleep(TICK).await;
    }
}

/// Runs the tasks of `lane` with `workers` workers, for ever: while a worker
/// is free, takes a task (shared between vendors, [`share`]) and runs it on
/// a task of its own; when there is none to take, looks again at the next
/// tick, when one of its tasks ends or when tasks were made here ([`wake`]).
async fn run_lane(
    state: AppState,
    owner: Arc<str>,
    lane: &'static Lane,
    workers: usize,
    lease: Duration,
) {
    let free = Arc::new(Semaphore::new(workers));
    let ended = Arc::new(Notify::new());
    loop {
        let Ok(worker) = free.clone().acquire_owned().await else {
            return;
        };
        let share = share(workers, free.available_permits() + 1);
        let claimed = state
            .store
            .jobs()
            .claim_shared(&owner, lane.kinds, lease, share)
            .await;
        match claimed {
            Ok(Some(task)) => {
                let state = state.clone();
                let owner = owner.clone();
                let ended = ended.clone();
                tokio::spawn(async move {
                    if let Err(err) = run_claimed(&state, &owner, &task, lease).await {
                        tracing::warn!(error = %err, task = task.id, "ending a job task failed");
                    }
                    drop(worker);
                    ended.notify_one();
                });
            }
            Ok(None) => {
                drop(worker);
                tokio::select! {
                    () = tokio::time::sleep(TICK) => {}
                    () = ended.notified() => {}
                    () = NEW_TASKS.notified() => {}
                }
            }
            Err(err) => {
                drop(worker);
                tracing::warn!(error = %err, lane = lane.name, "taking a job task failed; trying again");
                tokio::time::sleep(TICK).await;
            }
        }
    }
}

/// Runs `task`, which `owner` took, under its lease and records how it
/// ended (unless another instance took it over meanwhile).
async fn run_claimed(
    state: &AppState,
    owner: &str,
    task: &Task,
    lease: Duration,
) -> Result<(), berth_store::StoreError> {
    let started = std::time::Instant::now();
    let outcome = run_task(state, owner, task, lease).await;
    if let Some(outcome) = outcome {
        if state.store.jobs().finish(task.id, owner, &outcome).await? {
            state
                .metrics
                .task_finished(&task.vendor_type, &outcome, started.elapsed());
        } else {
            tracing::warn!(
                task = task.id,
                "a job task was taken over before it finished"
            );
        }
    }
    Ok(())
}

/// Fires the schedules due now, then runs the tasks waiting, one after the
/// other on the caller's task (without lanes: for tests and tools), until
/// none is left; how many tasks ran.
pub async fn run_due(state: &AppState, owner: &str) -> Result<usize, berth_store::StoreError> {
    let jobs = state.store.jobs();
    jobs.fire_due(OffsetDateTime::now_utc(), tasks_of).await?;
    let mut ran = 0;
    while let Some(task) = jobs.claim(owner, &KINDS, LEASE).await? {
        run_claimed(state, owner, &task, LEASE).await?;
        ran += 1;
    }
    Ok(ran)
}

/// The tasks an execution of a schedule starts with.
fn tasks_of(schedule: &berth_store::repo::jobs::Schedule) -> Vec<NewTask> {
    match schedule.vendor_type.as_str() {
        retention::RETENTION => return retention::tasks_of(schedule),
        audit_purge::VENDOR_TYPE => return audit_purge::tasks_of(schedule),
        replication::REPLICATION => return replication::tasks_of(schedule),
        _ => {}
    }
    vec![NewTask {
        parameters: serde_json::from_str(&schedule.parameters).unwrap_or(Value::Null),
        max_attempts: 1,
        sequence_key: None,
    }]
}

/// Runs `task` under its lease; `None` when the lease was lost (another
/// instance took the task, which it then finishes).
async fn run_task(state: &AppState, owner: &str, task: &Task, lease: Duration) -> Option<Outcome> {
    let jobs = state.store.jobs();
    let _ = jobs
        .log(
            task.id,
            &format!("started on {owner}, attempt {}", task.attempts),
        )
        .await;
    let work = async {
        match task.vendor_type.as_str() {
            gc::VENDOR_TYPE => gc::run_scheduled(state, task).await,
            retention::RETENTION => retention::run_task(state, task).await,
            audit_purge::VENDOR_TYPE => audit_purge::run_task(state, task).await,
            webhooks::WEBHOOK | webhooks::SLACK_VENDOR => webhooks::deliver(state, task).await,
            replication::REPLICATION => replication::run_task(state, task).await,
            other => Err(format!("no worker runs {other} jobs")),
        }
    };
    // The lease is renewed by a task of its own, not between polls of the
    // work: on SQLite a renewal waits for the write lock, which the work may
    // hold in a transaction it cannot commit until it is polled again (a
    // renewal in the same loop waited its 5 s busy timeout for it, and the
    // missed ticks that piled up meanwhile starved the work).
    let (said, mut heard) = watch::channel(Lease::Held);
    let renewer = tokio::spawn(renew_until_dropped(
        state.clone(),
        task.id,
        owner.to_string(),
        lease,
        said,
    ));
    // A collection stops on its own terms; the rest stops here.
    let stops = task.vendor_type != gc::VENDOR_TYPE;
    let result = tokio::select! {
        result = work => Some(result),
        ended = heard.wait_for(|lease| *lease == Lease::Lost || (stops && *lease == Lease::StopAsked)) => {
            match ended.map(|lease| *lease) {
                Ok(Lease::StopAsked) => {
                    renewer.abort();
                    return Some(Outcome::Stopped);
                }
                _ => None,
            }
        }
    };
    renewer.abort();
    let result = result?;
    let line = match &result {
        Ok(found) => format!("finished: {found}"),
        Err(why) => format!("failed: {why}"),
    };
    let _ = jobs.log(task.id, &line).await;
    Some(match result {
        Ok(found) => Outcome::Success(found),
        Err(why) => Outcome::Failed(why),
    })
}

/// Renews `owner`'s lease of task `id` every third of `lease` and tells what
/// each renewal found, until aborted.
async fn renew_until_dropped(
    state: AppState,
    id: i64,
    owner: String,
    lease: Duration,
    said: watch::Sender<Lease>,
) {
    let jobs = state.store.jobs();
    loop {
        tokio::time::sleep(lease / 3).await;
        match jobs.renew(id, &owner, lease).await {
            Ok(found) => {
                said.send_replace(found);
            }
            Err(err) => {
                tracing::warn!(error = %err, task = id, "renewing a job's lease failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_workers_read_over_the_defaults_and_print_back() {
        let defaults = JobWorkers::default();
        assert_eq!(
            defaults.to_string(),
            "webhook=10,replication=4,retention=2,gc=1,audit-purge=1"
        );
        assert_eq!(defaults.to_string().parse::<JobWorkers>(), Ok(defaults));
        let set: JobWorkers = " webhook = 20 , gc=0".parse().unwrap();
        assert_eq!(
            set.to_string(),
            "webhook=20,replication=4,retention=2,gc=0,audit-purge=1"
        );
        for bad in ["webhook", "webhooks=2", "webhook=-1", "webhook=257", "gc=x"] {
            assert!(bad.parse::<JobWorkers>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_vendor_takes_half_a_lane_and_never_its_last_free_worker_twice() {
        assert_eq!(share(10, 10), 5);
        assert_eq!(share(10, 3), 3);
        assert_eq!(share(10, 1), 1);
        assert_eq!(share(1, 1), 1);
        assert_eq!(share(2, 2), 1);
        assert_eq!(share(4, 4), 2);
    }
}
