//! Jobs (migration 0021): executions of work the registry does on its own and
//! the tasks workers take from them.
//!
//! A worker takes one task at a time ([`Jobs::claim`], or
//! [`Jobs::claim_shared`] for a lane whose workers vendors share): a pending
//! task whose time has come, or a running one whose lease ended (its worker
//! died). On PostgreSQL the candidate row is locked with `SKIP LOCKED`, so two
//! workers (of one instance or of two) never take the same task; on SQLite
//! one connection writes. The worker renews its lease while it works
//! ([`Jobs::renew`]), which also tells it when it was asked to stop, and ends
//! the task ([`Jobs::finish`]): a failed attempt is tried again after a
//! backoff until the task has had its attempts. An execution's status
//! follows its tasks'.

use std::time::Duration;

use ::time::OffsetDateTime;
use berth_domain::cron::Cron;
use berth_domain::query::Paging;
use berth_domain::time;
use serde_json::Value;

use crate::Store;
use crate::db::Locking;
use crate::error::StoreResult;
use crate::repo::flag;

/// Waiting for a worker (or for its retry's time).
pub const PENDING: &str = "Pending";
/// Taken by a worker.
pub const RUNNING: &str = "Running";
/// Stopped on request.
pub const STOPPED: &str = "Stopped";
/// Failed, with no attempt left.
pub const ERROR: &str = "Error";
/// Done.
pub const SUCCESS: &str = "Success";

/// The pseudo job type whose pause holds every schedule (Harbor's `scheduler` queue).
pub const SCHEDULER: &str = "SCHEDULER";

/// The first retry waits this long; each next one twice as long, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(10);
/// The longest wait before a retry.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// A task to create with its execution.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// What it does.
    pub parameters: Value,
    /// How many times it may be run (at least 1).
    pub max_attempts: i64,
    /// Tasks of one key run one after the other, in the order they were made.
    pub sequence_key: Option<String>,
}

/// An execution to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExecution {
    /// Harbor's vendor type (`GARBAGE_COLLECTION`, ...).
    pub vendor_type: String,
    /// What it is of (0 for the system's jobs).
    pub vendor_id: i64,
    /// `MANUAL`, `SCHEDULE` or `EVENT`.
    pub trigger: String,
    /// Its parameters (Harbor's `extra_attrs`).
    pub extra_attrs: Value,
}

/// A stored execution.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Execution {
    /// Its id.
    pub id: i64,
    /// Harbor's vendor type.
    pub vendor_type: String,
    /// What it is of.
    pub vendor_id: i64,
    /// `MANUAL`, `SCHEDULE` or `EVENT`.
    #[sqlx(rename = "job_trigger")]
    pub trigger: String,
    /// [`PENDING`], [`RUNNING`], [`STOPPED`], [`ERROR`] or [`SUCCESS`].
    pub status: String,
    /// Why it failed or stopped.
    pub status_message: String,
    /// Its parameters and results (JSON text).
    pub extra_attrs: String,
    /// When it was created.
    pub start_time: String,
    /// When it last changed.
    pub update_time: String,
    /// When it ended.
    pub end_time: Option<String>,
}

/// A stored task.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Task {
    /// Its id.
    pub id: i64,
    /// Its execution.
    pub execution_id: i64,
    /// Its execution's vendor type.
    pub vendor_type: String,
    /// As an execution's.
    pub status: String,
    /// Why it failed or stopped.
    pub status_message: String,
    /// What it does (JSON text).
    pub parameters: String,
    /// What it found (JSON text).
    pub extra_attrs: String,
    /// How many times it was taken.
    pub attempts: i64,
    /// How many times it may be.
    pub max_attempts: i64,
    /// The instance running it.
    pub owner: Option<String>,
    /// When it was created.
    pub creation_time: String,
    /// When it was first taken.
    pub start_time: Option<String>,
    /// When it last changed.
    pub update_time: String,
    /// When it ended.
    pub end_time: Option<String>,
}

/// How an attempt at a task ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Done, with what it found.
    Success(Value),
    /// Failed; tried again after a backoff while attempts are left.
    Failed(String),
    /// Stopped on request.
    Stopped,
}

/// What a renewal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// Still held until the new end.
    Held,
    /// Held, and a stop was asked: the worker should stop and finish with
    /// [`Outcome::Stopped`].
    StopAsked,
    /// Lost (it ended and another worker took the task, or the task is gone):
    /// the worker must stop without finishing.
    Lost,
}

/// An instance running jobs, as its last heartbeat said.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Worker {
    /// `host:pid`.
    pub owner: String,
    /// When its workers started.
    pub started_at: String,
    /// When it was last heard from.
    pub heartbeat_at: String,
    /// Its lanes and how many workers each has: `webhook=10,gc=1` (empty
    /// from an instance that does not say).
    pub lanes: String,
}

/// A job's schedule.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Schedule {
    /// Its id.
    pub id: i64,
    /// The job's vendor type.
    pub vendor_type: String,
    /// What the job is of.
    pub vendor_id: i64,
    /// Harbor's schedule type: `Hourly`, `Daily`, `Weekly` or `Custom`.
    pub schedule_type: String,
    /// Six fields, seconds first.
    pub cron: String,
    /// What each execution it starts gets (JSON text).
    pub parameters: String,
    /// When it fires next.
    pub next_fire_at: String,
    /// When it was made.
    pub creation_time: String,
    /// When it last changed.
    pub update_time: String,
}

/// A schedule to set.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSchedule {
    /// The job's vendor type.
    pub vendor_type: String,
    /// What the job is of (0 for the system's jobs).
    pub vendor_id: i64,
    /// Harbor's schedule type.
    pub schedule_type: String,
    /// The cron expression (checked by the caller).
    pub cron: Cron,
    /// The cron expression as given.
    pub cron_text: String,
    /// What each execution gets.
    pub parameters: Value,
}

const SCHEDULE_COLUMNS: &str = "id, vendor_type, vendor_id, schedule_type, cron, parameters, \
     next_fire_at, creation_time, update_time";

pub(crate) const TASK_COLUMNS: &str = "id, execution_id, vendor_type, status, status_message, parameters, \
     extra_attrs, attempts, max_attempts, owner, creation_time, start_time, update_time, end_time";
pub(crate) const EXECUTION_COLUMNS: &str = "id, vendor_type, vendor_id, job_trigger, status, status_message, \
     extra_attrs, start_time, update_time, end_time";

/// Access to jobs.
pub struct Jobs<'a>(&'a Store);

impl Store {
    /// The job repository.
    pub fn jobs(&self) -> Jobs<'_> {
        Jobs(self)
    }
}

/// The wait before attempt `attempts + 1` of a task that failed `attempts` times.
pub fn backoff(attempts: i64) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1).clamp(0, 16)).unwrap_or(16);
    FIRST_BACKOFF
        .saturating_mul(1 << doublings)
        .min(MAX_BACKOFF)
}

fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

impl Jobs<'_> {
    /// Creates an execution with its tasks, all pending, in one transaction;
    /// the execution's id. An execution without tasks is a success at once.
    pub async fn create(&self, new: &NewExecution, tasks: &[NewTask]) -> StoreResult<i64> {
        let mut tx = self.0.begin_write().await?;
        let id = create_in(&mut tx, new, tasks, &time::now()).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Takes a task of one of `vendor_types` for `owner` until `lease` from
    /// now: the oldest pending one whose time has come, or a running one
    /// whose lease ended with attempts left. `None` when there is none.
    pub async fn claim(
        &self,
        owner: &str,
        vendor_types: &[&str],
        lease: Duration,
    ) -> StoreResult<Option<Task>> {
        self.claim_shared(owner, vendor_types, lease, i64::MAX)
            .await
    }

    /// [`Jobs::claim`] shared between vendors (an execution's vendor type
    /// and id: a webhook policy, a replication policy): a task whose vendor
    /// has `share` or more tasks running (under a lease not ended, on any
    /// instance) is passed over, and the tasks of vendors with none running
    /// go first, each group oldest first. So a vendor whose tasks hang (a
    /// receiver that never answers) holds at most `share` workers, and the
    /// next free worker goes to another vendor's task. Two instances
    /// claiming at the same moment on PostgreSQL may both count a vendor
    /// below its share: it then runs one task more than `share`; no task is
    /// ever taken twice.
    pub async fn claim_shared(
        &self,
        owner: &str,
        vendor_types: &[&str],
        lease: Duration,
        share: i64,
    ) -> StoreResult<Option<Task>> {
        let paused = self.paused_types().await?;
        let vendor_types: Vec<&str> = vendor_types
            .iter()
            .copied()
            .filter(|kind| !paused.iter().any(|p| p == kind))
            .collect();
        let vendor_types = vendor_types.as_slice();
        if vendor_types.is_empty() || share < 1 {
            return Ok(None);
        }
        self.fail_abandoned().await?;
        let now = time::now();
        let until = time::now_plus_seconds(seconds(lease));
        let busy = if share == i64::MAX {
            Vec::new()
        } else {
            self.busy_vendors(vendor_types, &now).await?
        };
        // Vendors with nothing running first, then those below their share.
        let tiers: &[i64] = if busy.is_empty() {
            &[i64::MAX]
        } else if share > 1 {
            &[1, share]
        } else {
            &[1]
        };
        let kinds = (0..vendor_types.len())
            .map(|i| format!("${}", i + 4))
            .collect::<Vec<_>>()
            .join(", ");
        let running = if busy.is_empty() {
            "0".to_string()
        } else {
            let first = vendor_types.len() + 4;
            let arms: String = busy
                .iter()
                .enumerate()
                .map(|(i, (_, _, count))| {
                    format!(
                        " WHEN e.vendor_type = ${} AND e.vendor_id = ${} THEN {count}",
                        first + 2 * i,
                        first + 2 * i + 1
                    )
                })
                .collect();
            format!("CASE{arms} ELSE 0 END")
        };
        let locking = match self.0.locking(Locking::Update) {
            "" => "",
            _ => " FOR UPDATE OF t SKIP LOCKED",
        };
        let candidate = format!(
            "SELECT t.id FROM job_tasks t JOIN job_executions e ON e.id = t.execution_id \
             WHERE t.vendor_type IN ({kinds}) AND \
             ((t.status = $1 AND t.run_after <= $2) OR (t.status = 'Running' AND t.lease_until < $2 \
             AND t.attempts < t.max_attempts)) AND (t.sequence_key IS NULL OR NOT EXISTS \
             (SELECT 1 FROM job_tasks earlier WHERE earlier.sequence_key = t.sequence_key \
             AND earlier.id < t.id AND earlier.status IN ($1, 'Running'))) AND {running} < $3 \
             ORDER BY t.id LIMIT 1"
        );
        let query = |sql: String, tier: i64| {
            let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(PENDING)
                .bind(&now)
                .bind(tier);
            for kind in vendor_types {
                query = query.bind(*kind);
            }
            for (kind, id, _) in &busy {
                query = query.bind(kind.clone()).bind(*id);
            }
            query
        };
        // A look without the write lock first: an idle instance asks every
        // second, and must not stall writers for nothing.
        let mut chosen = None;
        for &tier in tiers {
            let waiting: Option<(i64,)> = query(candidate.clone(), tier)
                .fetch_optional(&self.0.pool)
                .await?;
            if waiting.is_some() {
                chosen = Some(tier);
                break;
            }
        }
        let Some(tier) = chosen else {
            return Ok(None);
        };
        let mut tx = self.0.begin_write().await?;
        let found: Option<(i64,)> = query(format!("{candidate}{locking}"), tier)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((id,)) = found else {
            return Ok(None);
        };
        let task: Task = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "UPDATE job_tasks SET status = $2, owner = $3, lease_until = $4, attempts = attempts + 1, \
             start_time = COALESCE(start_time, $5), update_time = $5 WHERE id = $1 RETURNING {TASK_COLUMNS}"
        )))
        .bind(id)
        .bind(RUNNING)
        .bind(owner)
        .bind(&until)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        // After the task's commit, not in its transaction: every change of an
        // execution and its tasks takes the execution's row first.
        sqlx::query(
            "UPDATE job_executions SET status = $2, update_time = $3 WHERE id = $1 AND status = $4",
        )
        .bind(task.execution_id)
        .bind(RUNNING)
        .bind(&now)
        .bind(PENDING)
        .execute(&self.0.pool)
        .await?;
        Ok(Some(task))
    }

    /// The vendors (vendor type, vendor id) of `vendor_types` with tasks
    /// running under a lease not ended at `now`, and how many each.
    async fn busy_vendors(
        &self,
        vendor_types: &[&str],
        now: &str,
    ) -> StoreResult<Vec<(String, i64, i64)>> {
        let kinds = (0..vendor_types.len())
            .map(|i| format!("${}", i + 3))
            .collect::<Vec<_>>()
            .join(", ");
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT e.vendor_type, e.vendor_id, COUNT(*) FROM job_tasks t \
             JOIN job_executions e ON e.id = t.execution_id \
             WHERE t.status = $1 AND t.lease_until >= $2 AND t.vendor_type IN ({kinds}) \
             GROUP BY e.vendor_type, e.vendor_id"
        )))
        .bind(RUNNING)
        .bind(now);
        for kind in vendor_types {
            query = query.bind(*kind);
        }
        Ok(query.fetch_all(&self.0.pool).await?)
    }

    /// Marks failed the running tasks whose lease ended with no attempt
    /// left: their worker died on their last attempt.
    async fn fail_abandoned(&self) -> StoreResult<()> {
        let now = time::now();
        let abandoned: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT id, execution_id FROM job_tasks \
             WHERE status = $1 AND lease_until < $2 AND attempts >= max_attempts",
        )
        .bind(RUNNING)
        .bind(&now)
        .fetch_all(&self.0.pool)
        .await?;
        for (id, execution_id) in abandoned {
            let mut tx = self.0.begin_write().await?;
            self.lock_execution(&mut tx, execution_id).await?;
            let done = sqlx::query(
                "UPDATE job_tasks SET status = $2, status_message = $3, end_time = $4, update_time = $4, \
                 owner = NULL, lease_until = NULL \
                 WHERE id = $1 AND status = $5 AND lease_until < $4 AND attempts >= max_attempts",
            )
            .bind(id)
            .bind(ERROR)
            .bind("the worker running the task's last attempt stopped answering")
            .bind(&now)
            .bind(RUNNING)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() > 0 {
                settle_execution(&mut tx, execution_id, &now).await?;
            }
            tx.commit().await?;
        }
        Ok(())
    }

    /// Extends `owner`'s lease of task `id` to `lease` from now.
    pub async fn renew(&self, id: i64, owner: &str, lease: Duration) -> StoreResult<Lease> {
        let until = time::now_plus_seconds(seconds(lease));
        let row: Option<(i64,)> = sqlx::query_as(
            "UPDATE job_tasks SET lease_until = $3 WHERE id = $1 AND owner = $2 AND status = $4 \
             RETURNING stop_requested",
        )
        .bind(id)
        .bind(owner)
        .bind(&until)
        .bind(RUNNING)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(match row {
            None => Lease::Lost,
            Some((stop,)) if flag(stop) => Lease::StopAsked,
            Some(_) => Lease::Held,
        })
    }

    /// Ends `owner`'s attempt at task `id` as `outcome` says; `false` when
    /// the task was no longer `owner`'s (its lease ended and another took it).
    pub async fn finish(&self, id: i64, owner: &str, outcome: &Outcome) -> StoreResult<bool> {
        let now = time::now();
        let execution: Option<(i64,)> =
            sqlx::query_as("SELECT execution_id FROM job_tasks WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.0.pool)
                .await?;
        let Some((execution_id,)) = execution else {
            return Ok(false);
        };
        let mut tx = self.0.begin_write().await?;
        self.lock_execution(&mut tx, execution_id).await?;
        let held: Option<(i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT attempts, max_attempts, vendor_type FROM job_tasks WHERE id = $1 AND owner = $2 AND status = $3{}",
            self.0.locking(Locking::Update)
        )))
        .bind(id)
        .bind(owner)
        .bind(RUNNING)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((attempts, max_attempts, vendor_type)) = held else {
            return Ok(false);
        };
        let retry = matches!(outcome, Outcome::Failed(_)) && attempts < max_attempts;
        let (status, message, extra) = match outcome {
            Outcome::Success(found) => (SUCCESS, String::new(), Some(found.to_string())),
            Outcome::Failed(why) if retry => (PENDING, why.clone(), None),
            Outcome::Failed(why) => (ERROR, why.clone(), None),
            Outcome::Stopped => (STOPPED, "stopped on request".to_string(), None),
        };
        let run_after = time::now_plus_seconds(seconds(backoff(attempts)));
        sqlx::query(
            "UPDATE job_tasks SET status = $2, status_message = $3, extra_attrs = COALESCE($4, extra_attrs), \
             owner = NULL, lease_until = NULL, update_time = $5, \
             end_time = CASE WHEN $6 = 1 THEN NULL ELSE $5 END, run_after = $7 WHERE id = $1",
        )
        .bind(id)
        .bind(status)
        .bind(&message)
        .bind(extra)
        .bind(&now)
        .bind(i64::from(retry))
        .bind(&run_after)
        .execute(&mut *tx)
        .await?;
        if !retry {
            if vendor_type == crate::repo::replication::VENDOR_TYPE
                && matches!(status, SUCCESS | ERROR)
            {
                crate::repo::replication::record_task_finished(&mut tx, id, status).await?;
            }
            settle_execution(&mut tx, execution_id, &now).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Asks execution `id` to stop: its pending tasks stop now, its running
    /// ones at their worker's next renewal. `false` when there is no such
    /// execution.
    pub async fn stop(&self, id: i64) -> StoreResult<bool> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        if !self.lock_execution(&mut tx, id).await? {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE job_tasks SET status = $2, status_message = 'stopped on request', end_time = $3, \
             update_time = $3 WHERE execution_id = $1 AND status = $4",
        )
        .bind(id)
        .bind(STOPPED)
        .bind(&now)
        .bind(PENDING)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE job_tasks SET stop_requested = 1, update_time = $2 WHERE execution_id = $1 AND status = $3",
        )
        .bind(id)
        .bind(&now)
        .bind(RUNNING)
        .execute(&mut *tx)
        .await?;
        settle_execution(&mut tx, id, &now).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Sets the schedule of `new.vendor_type`/`new.vendor_id` (replacing the
    /// one it had), first firing at the cron's next time; `None` when the
    /// cron never fires.
    pub async fn set_schedule(&self, new: &NewSchedule) -> StoreResult<Option<Schedule>> {
        let Some(next) = new.cron.next_after(OffsetDateTime::now_utc()) else {
            return Ok(None);
        };
        let now = time::now();
        let row: Schedule = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO job_schedules (vendor_type, vendor_id, schedule_type, cron, parameters, \
             next_fire_at, creation_time, update_time) VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
             ON CONFLICT (vendor_type, vendor_id) DO UPDATE SET schedule_type = excluded.schedule_type, \
             cron = excluded.cron, parameters = excluded.parameters, next_fire_at = excluded.next_fire_at, \
             update_time = excluded.update_time RETURNING {SCHEDULE_COLUMNS}"
        )))
        .bind(&new.vendor_type)
        .bind(new.vendor_id)
        .bind(&new.schedule_type)
        .bind(&new.cron_text)
        .bind(new.parameters.to_string())
        .bind(time::format_timestamp(next))
        .bind(&now)
        .fetch_one(&self.0.pool)
        .await?;
        Ok(Some(row))
    }

    /// Removes the schedule of `vendor_type`/`vendor_id`; `false` when there was none.
    pub async fn delete_schedule(&self, vendor_type: &str, vendor_id: i64) -> StoreResult<bool> {
        let done =
            sqlx::query("DELETE FROM job_schedules WHERE vendor_type = $1 AND vendor_id = $2")
                .bind(vendor_type)
                .bind(vendor_id)
                .execute(&self.0.pool)
                .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The schedule of `vendor_type`/`vendor_id`.
    pub async fn schedule(
        &self,
        vendor_type: &str,
        vendor_id: i64,
    ) -> StoreResult<Option<Schedule>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {SCHEDULE_COLUMNS} FROM job_schedules WHERE vendor_type = $1 AND vendor_id = $2"
        )))
        .bind(vendor_type)
        .bind(vendor_id)
        .fetch_optional(&self.0.pool)
        .await?)
    }

    /// Every schedule, by id.
    pub async fn schedules(&self) -> StoreResult<Vec<Schedule>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {SCHEDULE_COLUMNS} FROM job_schedules ORDER BY id"
        )))
        .fetch_all(&self.0.pool)
        .await?)
    }

    /// How many schedules there are (one aggregate, for the metrics).
    pub async fn schedule_count(&self) -> StoreResult<i64> {
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM job_schedules")
            .fetch_one(&self.0.pool)
            .await?;
        Ok(count)
    }

    /// Pauses or resumes the queue of `vendor_type` (its tasks wait; a task
    /// running goes on), or, for [`SCHEDULER`], every schedule.
    pub async fn set_paused(&self, vendor_type: &str, paused: bool) -> StoreResult<()> {
        let sql = if paused {
            "INSERT INTO job_pauses (vendor_type) VALUES ($1) ON CONFLICT (vendor_type) DO NOTHING"
        } else {
            "DELETE FROM job_pauses WHERE vendor_type = $1"
        };
        sqlx::query(sql)
            .bind(vendor_type)
            .execute(&self.0.pool)
            .await?;
        Ok(())
    }

    /// Whether the queue of `vendor_type` (or, for [`SCHEDULER`], the schedules) is paused.
    pub async fn paused(&self, vendor_type: &str) -> StoreResult<bool> {
        let found: Option<(String,)> =
            sqlx::query_as("SELECT vendor_type FROM job_pauses WHERE vendor_type = $1")
                .bind(vendor_type)
                .fetch_optional(&self.0.pool)
                .await?;
        Ok(found.is_some())
    }

    /// The job types paused.
    pub async fn paused_types(&self) -> StoreResult<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as("SELECT vendor_type FROM job_pauses")
            .fetch_all(&self.0.pool)
            .await?;
        Ok(rows.into_iter().map(|(kind,)| kind).collect())
    }

    /// The waiting tasks of each job type: how many, and since when the
    /// oldest may run.
    pub async fn queues(&self) -> StoreResult<Vec<(String, i64, String)>> {
        Ok(sqlx::query_as(
            "SELECT vendor_type, COUNT(*), MIN(run_after) FROM job_tasks WHERE status = $1 \
             GROUP BY vendor_type ORDER BY vendor_type",
        )
        .bind(PENDING)
        .fetch_all(&self.0.pool)
        .await?)
    }

    /// The tasks running now, by id.
    pub async fn running(&self) -> StoreResult<Vec<Task>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM job_tasks WHERE status = $1 ORDER BY id"
        )))
        .bind(RUNNING)
        .fetch_all(&self.0.pool)
        .await?)
    }

    /// Stops the waiting tasks of `vendor_type` (of every type with `None`),
    /// execution by execution; how many.
    pub async fn stop_waiting(&self, vendor_type: Option<&str>) -> StoreResult<u64> {
        let executions: Vec<(i64,)> = match vendor_type {
            Some(kind) => sqlx::query_as(
                "SELECT DISTINCT execution_id FROM job_tasks WHERE status = $1 AND vendor_type = $2",
            )
            .bind(PENDING)
            .bind(kind),
            None => sqlx::query_as("SELECT DISTINCT execution_id FROM job_tasks WHERE status = $1")
                .bind(PENDING),
        }
        .fetch_all(&self.0.pool)
        .await?;
        let now = time::now();
        let mut stopped = 0;
        for (execution_id,) in executions {
            let mut tx = self.0.begin_write().await?;
            self.lock_execution(&mut tx, execution_id).await?;
            let done = sqlx::query(
                "UPDATE job_tasks SET status = $2, status_message = 'stopped on request', end_time = $3, \
                 update_time = $3 WHERE execution_id = $1 AND status = $4",
            )
            .bind(execution_id)
            .bind(STOPPED)
            .bind(&now)
            .bind(PENDING)
            .execute(&mut *tx)
            .await?;
            settle_execution(&mut tx, execution_id, &now).await?;
            tx.commit().await?;
            stopped += done.rows_affected();
        }
        Ok(stopped)
    }

    /// Stops task `id`: a waiting one now, a running one at its worker's
    /// next renewal; `false` when there is no such task.
    pub async fn stop_task(&self, id: i64) -> StoreResult<bool> {
        let Some(task) = self.task(id).await? else {
            return Ok(false);
        };
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        self.lock_execution(&mut tx, task.execution_id).await?;
        sqlx::query(
            "UPDATE job_tasks SET status = CASE WHEN status = $2 THEN $3 ELSE status END, \
             stop_requested = CASE WHEN status = $4 THEN 1 ELSE stop_requested END, \
             end_time = CASE WHEN status = $2 THEN $5 ELSE end_time END, update_time = $5 WHERE id = $1",
        )
        .bind(id)
        .bind(PENDING)
        .bind(STOPPED)
        .bind(RUNNING)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        settle_execution(&mut tx, task.execution_id, &now).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Notes that `owner`'s workers, running since `started_at` in `lanes`
    /// (`webhook=10,gc=1`, as [`Worker::lanes`]), are alive.
    pub async fn heartbeat(&self, owner: &str, started_at: &str, lanes: &str) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO job_workers (owner, started_at, heartbeat_at, lanes) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (owner) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, lanes = excluded.lanes",
        )
        .bind(owner)
        .bind(started_at)
        .bind(time::now())
        .bind(lanes)
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }

    /// The instances seen since `since` (store format), by owner. Those not
    /// seen since are forgotten.
    pub async fn workers(&self, since: &str) -> StoreResult<Vec<Worker>> {
        sqlx::query("DELETE FROM job_workers WHERE heartbeat_at < $1")
            .bind(since)
            .execute(&self.0.pool)
            .await?;
        Ok(sqlx::query_as(
            "SELECT owner, started_at, heartbeat_at, lanes FROM job_workers ORDER BY owner",
        )
        .fetch_all(&self.0.pool)
        .await?)
    }

    /// Fires the schedules due at `now`: each moves to its next time and
    /// starts an execution (trigger `SCHEDULE`, the schedule's parameters,
    /// the tasks `tasks_of` gives it) in one transaction, only where its
    /// `next_fire_at` was still the one read, so a tick fires once whichever
    /// instances look. While [`SCHEDULER`] is paused, schedules move on
    /// without firing. The executions started.
    pub async fn fire_due(
        &self,
        now: OffsetDateTime,
        tasks_of: impl Fn(&Schedule) -> Vec<NewTask>,
    ) -> StoreResult<Vec<i64>> {
        let stamp = time::format_timestamp(now);
        let due: Vec<Schedule> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {SCHEDULE_COLUMNS} FROM job_schedules WHERE next_fire_at <= $1 ORDER BY next_fire_at"
        )))
        .bind(&stamp)
        .fetch_all(&self.0.pool)
        .await?;
        let mut started = Vec::new();
        let paused = self.paused(SCHEDULER).await?;
        for schedule in due {
            let next = schedule
                .cron
                .parse::<Cron>()
                .ok()
                .and_then(|cron| cron.next_after(now))
                .map(time::format_timestamp);
            let mut tx = self.0.begin_write().await?;
            let moved = match &next {
                Some(next) => sqlx::query(
                    "UPDATE job_schedules SET next_fire_at = $3, update_time = $4 \
                     WHERE id = $1 AND next_fire_at = $2",
                )
                .bind(schedule.id)
                .bind(&schedule.next_fire_at)
                .bind(next)
                .bind(&stamp),
                // A cron that never fires again: the schedule goes.
                None => {
                    sqlx::query("DELETE FROM job_schedules WHERE id = $1 AND next_fire_at = $2")
                        .bind(schedule.id)
                        .bind(&schedule.next_fire_at)
                }
            }
            .execute(&mut *tx)
            .await?;
            if moved.rows_affected() == 0 || paused {
                tx.commit().await?;
                continue;
            }
            let new = NewExecution {
                vendor_type: schedule.vendor_type.clone(),
                vendor_id: schedule.vendor_id,
                trigger: "SCHEDULE".into(),
                extra_attrs: serde_json::from_str(&schedule.parameters).unwrap_or(Value::Null),
            };
            let id = create_in(&mut tx, &new, &tasks_of(&schedule), &stamp).await?;
            tx.commit().await?;
            started.push(id);
        }
        Ok(started)
    }

    /// Locks execution `id` (on PostgreSQL) for the rest of `tx`: every
    /// change of an execution or its tasks takes it first, so their statuses
    /// are settled one change at a time. `false` when there is none.
    async fn lock_execution(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        id: i64,
    ) -> StoreResult<bool> {
        let found: Option<(i64,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT id FROM job_executions WHERE id = $1{}",
            self.0.locking(Locking::Update)
        )))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
        Ok(found.is_some())
    }

    /// Adds `line` to the log of task `id`.
    pub async fn log(&self, id: i64, line: &str) -> StoreResult<()> {
        let mut tx = self.0.begin_write().await?;
        let (next,): (i64,) = sqlx::query_as(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM job_task_logs WHERE task_id = $1",
        )
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO job_task_logs (task_id, seq, logged_at, line) VALUES ($1, $2, $3, $4)",
        )
        .bind(id)
        .bind(next)
        .bind(time::now())
        .bind(line)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The log of task `id`, one line per entry, each after its time.
    pub async fn log_text(&self, id: i64) -> StoreResult<String> {
        let lines: Vec<(String, String)> = sqlx::query_as(
            "SELECT logged_at, line FROM job_task_logs WHERE task_id = $1 ORDER BY seq",
        )
        .bind(id)
        .fetch_all(&self.0.pool)
        .await?;
        Ok(lines
            .iter()
            .map(|(at, line)| format!("{at} {line}\n"))
            .collect())
    }

    /// Execution `id`.
    pub async fn execution(&self, id: i64) -> StoreResult<Option<Execution>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {EXECUTION_COLUMNS} FROM job_executions WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?)
    }

    /// A page of the executions of `vendor_type` (of `vendor_id`), newest
    /// first, and how many there are.
    pub async fn executions(
        &self,
        vendor_type: &str,
        vendor_id: i64,
        paging: Paging,
    ) -> StoreResult<(i64, Vec<Execution>)> {
        let (total,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM job_executions WHERE vendor_type = $1 AND vendor_id = $2",
        )
        .bind(vendor_type)
        .bind(vendor_id)
        .fetch_one(&self.0.pool)
        .await?;
        let (limit, offset) = paging.limit_offset().unwrap_or((i64::MAX, 0));
        let page = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {EXECUTION_COLUMNS} FROM job_executions WHERE vendor_type = $1 AND vendor_id = $2 \
             ORDER BY id DESC LIMIT $3 OFFSET $4"
        )))
        .bind(vendor_type)
        .bind(vendor_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.0.pool)
        .await?;
        Ok((total, page))
    }

    /// Removes the ended executions of `vendor_types` (and their tasks and
    /// logs) but the newest `keep` of each vendor; how many were removed.
    /// Idempotent: every instance may run it at once.
    pub async fn sweep(&self, vendor_types: &[&str], keep: i64) -> StoreResult<u64> {
        if vendor_types.is_empty() {
            return Ok(0);
        }
        let kinds = (0..vendor_types.len())
            .map(|i| format!("${}", i + 2))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "DELETE FROM job_executions WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() \
             OVER (PARTITION BY vendor_type, vendor_id ORDER BY id DESC) AS newer \
             FROM job_executions WHERE vendor_type IN ({kinds}) AND end_time IS NOT NULL) ranked \
             WHERE newer > $1)"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(keep);
        for kind in vendor_types {
            query = query.bind(*kind);
        }
        Ok(query.execute(&self.0.pool).await?.rows_affected())
    }

    /// Task `id`.
    pub async fn task(&self, id: i64) -> StoreResult<Option<Task>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM job_tasks WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?)
    }

    /// Adds `tasks`, pending, to execution `execution_id` (a running task
    /// planning the rest of its execution adds them before it finishes, so
    /// the execution does not end in between).
    pub async fn add_tasks(&self, execution_id: i64, tasks: &[NewTask]) -> StoreResult<()> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        self.lock_execution(&mut tx, execution_id).await?;
        let (vendor_type,): (String,) =
            sqlx::query_as("SELECT vendor_type FROM job_executions WHERE id = $1")
                .bind(execution_id)
                .fetch_one(&mut *tx)
                .await?;
        insert_tasks(&mut tx, execution_id, &vendor_type, tasks, &now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The tasks of execution `id`, in order.
    pub async fn tasks(&self, execution_id: i64) -> StoreResult<Vec<Task>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM job_tasks WHERE execution_id = $1 ORDER BY id"
        )))
        .bind(execution_id)
        .fetch_all(&self.0.pool)
        .await?)
    }

    /// The tasks of `executions`, by execution then id, in one query.
    pub async fn tasks_of(&self, executions: &[i64]) -> StoreResult<Vec<Task>> {
        if executions.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM job_tasks WHERE execution_id IN ({}) ORDER BY execution_id, id",
            crate::repo::registry::placeholders(1, executions.len())
        );
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
        for id in executions {
            query = query.bind(*id);
        }
        Ok(query.fetch_all(&self.0.pool).await?)
    }
}

/// Creates an execution with its tasks in `tx` (see [`Jobs::create`]).
pub(crate) async fn create_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    new: &NewExecution,
    tasks: &[NewTask],
    now: &str,
) -> StoreResult<i64> {
    let status = if tasks.is_empty() { SUCCESS } else { PENDING };
    let end_time = tasks.is_empty().then_some(now);
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO job_executions (vendor_type, vendor_id, job_trigger, status, extra_attrs, \
         start_time, update_time, end_time) VALUES ($1, $2, $3, $4, $5, $6, $6, $7) RETURNING id",
    )
    .bind(&new.vendor_type)
    .bind(new.vendor_id)
    .bind(&new.trigger)
    .bind(status)
    .bind(new.extra_attrs.to_string())
    .bind(now)
    .bind(end_time)
    .fetch_one(&mut **tx)
    .await?;
    insert_tasks(tx, id, &new.vendor_type, tasks, now).await?;
    Ok(id)
}

/// Inserts `tasks`, pending, into execution `id` of `vendor_type`.
async fn insert_tasks(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    id: i64,
    vendor_type: &str,
    tasks: &[NewTask],
    now: &str,
) -> StoreResult<()> {
    for task in tasks {
        sqlx::query(
            "INSERT INTO job_tasks (execution_id, vendor_type, status, parameters, max_attempts, \
             run_after, creation_time, update_time, sequence_key) VALUES ($1, $2, $3, $4, $5, $6, $6, $6, $7)",
        )
        .bind(id)
        .bind(vendor_type)
        .bind(PENDING)
        .bind(task.parameters.to_string())
        .bind(task.max_attempts.max(1))
        .bind(now)
        .bind(task.sequence_key.as_deref())
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Sets execution `id`'s status from its tasks': running while any is
/// pending or running (and one was taken), else stopped if any stopped,
/// error if any failed, success otherwise.
async fn settle_execution(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    id: i64,
    now: &str,
) -> StoreResult<()> {
    let counts: Vec<(String, i64)> = sqlx::query_as(
        "SELECT status, COUNT(*) FROM job_tasks WHERE execution_id = $1 GROUP BY status",
    )
    .bind(id)
    .fetch_all(&mut **tx)
    .await?;
    let has = |status: &str| counts.iter().any(|(s, n)| s == status && *n > 0);
    let status = if has(RUNNING) || (has(PENDING) && counts.len() > 1) {
        RUNNING
    } else if has(PENDING) {
        PENDING
    } else if has(STOPPED) {
        STOPPED
    } else if has(ERROR) {
        ERROR
    } else {
        SUCCESS
    };
    let ended = matches!(status, STOPPED | ERROR | SUCCESS);
    let message: Option<(String,)> = if status == ERROR {
        sqlx::query_as(
            "SELECT status_message FROM job_tasks WHERE execution_id = $1 AND status = $2 ORDER BY id LIMIT 1",
        )
        .bind(id)
        .bind(ERROR)
        .fetch_optional(&mut **tx)
        .await?
    } else {
        None
    };
    let (vendor_type, was_ended): (String, i64) = sqlx::query_as(
        "SELECT vendor_type, CASE WHEN end_time IS NULL THEN 0 ELSE 1 END FROM job_executions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE job_executions SET status = $2, status_message = $3, update_time = $4, \
         end_time = CASE WHEN $5 = 1 THEN $4 ELSE NULL END WHERE id = $1",
    )
    .bind(id)
    .bind(status)
    .bind(message.map(|(m,)| m).unwrap_or_default())
    .bind(now)
    .bind(i64::from(ended))
    .execute(&mut **tx)
    .await?;
    if ended && was_ended == 0 && vendor_type == crate::repo::retention::VENDOR_TYPE {
        crate::repo::retention::record_finished(tx, id).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_longer_each_time_up_to_an_hour() {
        assert_eq!(backoff(1), Duration::from_secs(10));
        assert_eq!(backoff(2), Duration::from_secs(20));
        assert_eq!(backoff(3), Duration::from_secs(40));
        assert_eq!(backoff(40), MAX_BACKOFF);
        assert_eq!(backoff(0), Duration::from_secs(10));
    }
}
