//! What this instance does on its own: fires the schedules that are due and
//! runs the job tasks it takes (`crates/store/src/repo/jobs.rs`), one at a
//! time, renewing its lease while a task runs. Every instance does the same;
//! the store makes a tick fire once and a task run on one instance.

use std::time::Duration;

use berth_store::repo::jobs::{Lease, NewTask, Outcome, Task};
use serde_json::Value;
use time::OffsetDateTime;

use crate::service::{audit_purge, gc, retention};
use crate::state::AppState;

/// How long a task is held without a renewal before another instance may take it.
pub const LEASE: Duration = Duration::from_secs(60);
/// How often a running task's lease is renewed.
const RENEW: Duration = Duration::from_secs(20);
/// How often due schedules and waiting tasks are looked for.
const TICK: Duration = Duration::from_secs(1);

/// The job types this instance runs.
const KINDS: [&str; 3] = [
    gc::VENDOR_TYPE,
    retention::RETENTION,
    audit_purge::VENDOR_TYPE,
];

/// This instance's name as a task's owner: its host and process.
pub fn owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    format!("{host}:{}", std::process::id())
}

/// Looks for due schedules and tasks every second, for ever.
pub async fn run(state: AppState) {
    let owner = owner();
    loop {
        if let Err(err) = run_due(&state, &owner).await {
            tracing::warn!(error = %err, "running jobs failed; trying again");
        }
        tokio::time::sleep(TICK).await;
    }
}

/// Fires the schedules due now, then runs the tasks waiting, one after the
/// other, until none is left; how many tasks ran.
pub async fn run_due(state: &AppState, owner: &str) -> Result<usize, berth_store::StoreError> {
    let jobs = state.store.jobs();
    jobs.fire_due(OffsetDateTime::now_utc(), tasks_of).await?;
    let mut ran = 0;
    while let Some(task) = jobs.claim(owner, &KINDS, LEASE).await? {
        let outcome = run_task(state, owner, &task).await;
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
        _ => {}
    }
    vec![NewTask {
        parameters: serde_json::from_str(&schedule.parameters).unwrap_or(Value::Null),
        max_attempts: 1,
    }]
}

/// Runs `task` under its lease; `None` when the lease was lost (another
/// instance took the task, which it then finishes).
async fn run_task(state: &AppState, owner: &str, task: &Task) -> Option<Outcome> {
    let jobs = state.store.jobs();
    let _ = jobs
        .log(
            task.id,
            &format!("started on {owner}, attempt {}", task.attempts),
        )
        .await;
    let work = async {
        match task.vendor_type.as_str() {
            gc::VENDOR_TYPE => gc::run_scheduled(state).await,
            retention::RETENTION => retention::run_task(state, task).await,
            audit_purge::VENDOR_TYPE => audit_purge::run_task(state, task).await,
            other => Err(format!("no worker runs {other} jobs")),
        }
    };
    tokio::pin!(work);
    let mut renew = tokio::time::interval(RENEW);
    renew.tick().await;
    let result = loop {
        tokio::select! {
            result = &mut work => break result,
            _ = renew.tick() => match jobs.renew(task.id, owner, LEASE).await {
                Ok(Lease::Held) => {}
                // A collection stops on its own terms; the rest stops here.
                Ok(Lease::StopAsked) if task.vendor_type != gc::VENDOR_TYPE => {
                    return Some(Outcome::Stopped);
                }
                Ok(Lease::StopAsked) => {}
                Ok(Lease::Lost) => return None,
                Err(err) => tracing::warn!(error = %err, task = task.id, "renewing a job's lease failed"),
            },
        }
    };
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
