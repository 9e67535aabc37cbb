//! What this instance does on its own: fires the schedules that are due and
//! runs the job tasks it takes (`crates/store/src/repo/jobs.rs`), one at a
//! time, renewing its lease while a task runs. Every instance does the same;
//! the store makes a tick fire once and a task run on one instance.

use std::time::Duration;

use berth_store::repo::jobs::{Lease, NewTask, Outcome, Task};
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::watch;

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

/// Looks for due schedules and tasks every second, for ever, holding each
/// task it takes for `lease` at a time.
pub async fn run(state: AppState, lease: Duration) {
    let owner = owner();
    let started = berth_domain::time::now();
    let mut noted = None::<std::time::Instant>;
    loop {
        if noted.is_none_or(|at| at.elapsed() >= HEARTBEAT) {
            match state.store.jobs().heartbeat(&owner, &started).await {
                Ok(()) => noted = Some(std::time::Instant::now()),
                Err(err) => tracing::warn!(error = %err, "noting this instance's workers failed"),
            }
        }
        if let Err(err) = run_due_leased(&state, &owner, lease).await {
            tracing::warn!(error = %err, "running jobs failed; trying again");
        }
        tokio::time::sleep(TICK).await;
    }
}

/// Fires the schedules due now, then runs the tasks waiting, one after the
/// other, until none is left; how many tasks ran.
pub async fn run_due(state: &AppState, owner: &str) -> Result<usize, berth_store::StoreError> {
    run_due_leased(state, owner, LEASE).await
}

/// [`run_due`] holding each task for `lease` at a time.
async fn run_due_leased(
    state: &AppState,
    owner: &str,
    lease: Duration,
) -> Result<usize, berth_store::StoreError> {
    let jobs = state.store.jobs();
    jobs.fire_due(OffsetDateTime::now_utc(), tasks_of).await?;
    let mut ran = 0;
    while let Some(task) = jobs.claim(owner, &KINDS, lease).await? {
        let outcome = run_task(state, owner, &task, lease).await;
        if let Some(outcome) = outcome
            && !jobs.finish(task.id, owner, &outcome).await?
        {
            tracing::warn!(
                task = task.id,
                "a job task was taken over before it finished"
            );
        }
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
