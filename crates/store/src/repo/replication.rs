//! Replication policies (migration 0025), their runs (job executions of
//! vendor type [`VENDOR_TYPE`], each starting with a planning task, which
//! Harbor's lists do not show) and the hand-off of domain events to the
//! event-based policies: the `replication` subscriber's pending events
//! become runs in the transaction that takes them.

use berth_domain::model::replication::{Filter, Policy, Trigger};
use berth_domain::query::{Paging, Query, SortKey};
use berth_domain::time;

use crate::Store;
use crate::error::{StoreError, StoreResult, conflict_on_unique};
use crate::repo::events::{self, Event, REPLICATION};
use crate::repo::flag;
use crate::repo::jobs::{self, NewExecution, NewTask, Task};
use crate::repo::registry::placeholders;
use crate::repo::sql::{Column, Kind, Sql, order_clause};

/// The job vendor type of replication runs.
pub const VENDOR_TYPE: &str = "REPLICATION";

#[derive(sqlx::FromRow)]
struct PolicyRow {
    id: i64,
    name: String,
    description: String,
    src_registry_id: Option<i64>,
    dest_registry_id: Option<i64>,
    dest_namespace: String,
    dest_namespace_replace_count: i64,
    trigger_json: String,
    filters: String,
    replicate_deletion: i64,
    override_: i64,
    enabled: i64,
    speed: i64,
    copy_by_chunk: i64,
    single_active: i64,
    creator: String,
    creation_time: String,
    update_time: String,
}

impl PolicyRow {
    fn into_policy(self) -> StoreResult<Policy> {
        let id = self.id;
        let bad = |e: serde_json::Error| {
            StoreError::Io(std::io::Error::other(format!(
                "stored replication policy {id} does not parse: {e}"
            )))
        };
        let trigger: Trigger = serde_json::from_str(&self.trigger_json).map_err(bad)?;
        let filters: Vec<Filter> = serde_json::from_str(&self.filters).map_err(bad)?;
        Ok(Policy {
            id: self.id,
            name: self.name,
            description: self.description,
            src_registry: self.src_registry_id,
            dest_registry: self.dest_registry_id,
            dest_namespace: self.dest_namespace,
            dest_namespace_replace_count: i8::try_from(self.dest_namespace_replace_count)
                .unwrap_or(-1),
            trigger,
            filters,
            replicate_deletion: flag(self.replicate_deletion),
            overwrite: flag(self.override_),
            enabled: flag(self.enabled),
            speed: i32::try_from(self.speed).unwrap_or(0),
            copy_by_chunk: flag(self.copy_by_chunk),
            single_active_replication: flag(self.single_active),
            creator: self.creator,
            creation_time: self.creation_time,
            update_time: self.update_time,
        })
    }
}

const COLUMNS: &str = "id, name, description, src_registry_id, dest_registry_id, dest_namespace, \
     dest_namespace_replace_count, trigger_json, filters, replicate_deletion, override AS override_, \
     enabled, speed, copy_by_chunk, single_active, creator, creation_time, update_time";

const FILTERS: &[Column] = &[
    Column {
        names: &["id", "ID"],
        sql: "id",
        kind: Kind::Int,
    },
    Column {
        names: &["name", "Name"],
        sql: "name",
        kind: Kind::Text,
    },
];

const SORT: &[(&[&str], &str)] = &[
    (&["id", "ID"], "id"),
    (&["name", "Name"], "name"),
    (&["creation_time", "CreationTime"], "creation_time"),
    (&["update_time", "UpdateTime"], "update_time"),
];

fn duplicate(name: &str) -> impl FnOnce() -> String + '_ {
    move || format!("policy {name} already exists")
}

/// A registry a policy names is gone (or was never there).
fn registry_missing(err: sqlx::Error) -> StoreError {
    match &err {
        sqlx::Error::Database(db) if db.kind() == sqlx::error::ErrorKind::ForeignKeyViolation => {
            StoreError::Domain(berth_domain::DomainError::bad_request(
                "the registry of the policy does not exist",
            ))
        }
        _ => StoreError::Database(err),
    }
}

/// What the executions list may be narrowed to.
#[derive(Debug, Clone, Default)]
pub struct ExecutionFilter {
    /// Of this policy.
    pub policy_id: Option<i64>,
    /// In one of these job statuses.
    pub statuses: Vec<String>,
    /// Started so (`MANUAL`, `SCHEDULE`, `EVENT`).
    pub trigger: Option<String>,
}

/// Access to replication policies and runs.
pub struct Replication<'a>(&'a Store);

impl Store {
    /// The replication repository.
    pub fn replication(&self) -> Replication<'_> {
        Replication(self)
    }
}

impl Replication<'_> {
    /// A page of the policies matching `query` (and whose name contains
    /// `name`, the deprecated parameter), by id unless `sort` says
    /// otherwise, and how many match.
    pub async fn list(
        &self,
        query: &Query,
        name: Option<&str>,
        sort: &[SortKey],
        paging: Paging,
    ) -> StoreResult<(i64, Vec<Policy>)> {
        let mut from = Sql::new(" FROM replication_policies WHERE 1 = 1");
        from.query_terms(FILTERS, query)?;
        if let Some(name) = name {
            from.push(" AND LOWER(name)").like(name);
        }
        let order = order_clause(SORT, sort, "id", "id");
        let (rows, total): (Vec<PolicyRow>, i64) = from
            .fetch_page(&self.0.pool, COLUMNS, &order, paging)
            .await?;
        let policies = rows
            .into_iter()
            .map(PolicyRow::into_policy)
            .collect::<StoreResult<_>>()?;
        Ok((total, policies))
    }

    /// Policy `id`.
    pub async fn get(&self, id: i64) -> StoreResult<Option<Policy>> {
        let row: Option<PolicyRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM replication_policies WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?;
        row.map(PolicyRow::into_policy).transpose()
    }

    /// Adds a (validated) policy; `Conflict` when one has its name. Its id.
    pub async fn create(&self, policy: &Policy) -> StoreResult<i64> {
        let now = time::now();
        let (id,): (i64,) = bind_policy(
            sqlx::query_as(
                "INSERT INTO replication_policies (name, description, src_registry_id, \
                 dest_registry_id, dest_namespace, dest_namespace_replace_count, trigger_type, \
                 trigger_json, filters, replicate_deletion, override, enabled, speed, copy_by_chunk, \
                 single_active, creator, creation_time, update_time) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $17) \
                 RETURNING id",
            ),
            policy,
        )
        .bind(&policy.creator)
        .bind(&now)
        .fetch_one(&self.0.pool)
        .await
        .map_err(|e| match conflict_on_unique(e, duplicate(&policy.name)) {
            StoreError::Database(e) => registry_missing(e),
            other => other,
        })?;
        Ok(id)
    }

    /// Replaces policy `id` with `policy` (its creator and creation time
    /// stay); `false` when it is gone.
    pub async fn update(&self, id: i64, policy: &Policy) -> StoreResult<bool> {
        let done: Option<(i64,)> = bind_policy(
            sqlx::query_as(
                "UPDATE replication_policies SET name = $1, description = $2, src_registry_id = $3, \
                 dest_registry_id = $4, dest_namespace = $5, dest_namespace_replace_count = $6, \
                 trigger_type = $7, trigger_json = $8, filters = $9, replicate_deletion = $10, \
                 override = $11, enabled = $12, speed = $13, copy_by_chunk = $14, single_active = $15, \
                 update_time = $16 WHERE id = $17 RETURNING id",
            ),
            policy,
        )
        .bind(time::now())
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await
        .map_err(|e| match conflict_on_unique(e, duplicate(&policy.name)) {
            StoreError::Database(e) => registry_missing(e),
            other => other,
        })?;
        Ok(done.is_some())
    }

    /// Deletes policy `id` with its runs and schedule; `false` when it is
    /// gone, `Precondition` while a run of it goes on.
    pub async fn delete(&self, id: i64) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let (running,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM job_executions WHERE vendor_type = $1 AND vendor_id = $2 \
             AND end_time IS NULL",
        )
        .bind(VENDOR_TYPE)
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        if running > 0 {
            return Err(StoreError::Domain(berth_domain::DomainError::Precondition(
                format!("the policy {id} has running executions, can not be deleted"),
            )));
        }
        let done = sqlx::query("DELETE FROM replication_policies WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 1 {
            for sql in [
                "DELETE FROM job_executions WHERE vendor_type = $1 AND vendor_id = $2",
                "DELETE FROM job_schedules WHERE vendor_type = $1 AND vendor_id = $2",
            ] {
                sqlx::query(sql)
                    .bind(VENDOR_TYPE)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// A page of runs, newest first, narrowed by `filter`, and how many
    /// there are.
    pub async fn executions(
        &self,
        filter: &ExecutionFilter,
        paging: Paging,
    ) -> StoreResult<(i64, Vec<jobs::Execution>)> {
        let mut from = Sql::new(" FROM job_executions WHERE vendor_type = ");
        from.text(VENDOR_TYPE);
        if let Some(policy_id) = filter.policy_id {
            from.push(" AND vendor_id = ").int(policy_id);
        }
        if !filter.statuses.is_empty() {
            from.push(" AND status IN (");
            for (i, status) in filter.statuses.iter().enumerate() {
                if i > 0 {
                    from.push(", ");
                }
                from.text(status.clone());
            }
            from.push(")");
        }
        if let Some(trigger) = &filter.trigger {
            from.push(" AND job_trigger = ").text(trigger.clone());
        }
        let (rows, total): (Vec<jobs::Execution>, i64) = from
            .fetch_page(
                &self.0.pool,
                jobs::EXECUTION_COLUMNS,
                " ORDER BY id DESC",
                paging,
            )
            .await?;
        Ok((total, rows))
    }

    /// How many tasks of each status `executions` have, planning tasks left
    /// out: `(execution id, status, count)`.
    pub async fn task_counts(&self, executions: &[i64]) -> StoreResult<Vec<(i64, String, i64)>> {
        if executions.is_empty() {
            return Ok(Vec::new());
        }
        let ids = placeholders(1, executions.len());
        let sql = format!(
            "SELECT execution_id, status, COUNT(*) FROM job_tasks WHERE execution_id IN ({ids}) \
             AND id NOT IN (SELECT MIN(id) FROM job_tasks WHERE execution_id IN ({ids}) \
             GROUP BY execution_id) GROUP BY execution_id, status"
        );
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
        for id in executions {
            query = query.bind(*id);
        }
        Ok(query.fetch_all(&self.0.pool).await?)
    }

    /// A page of execution `execution_id`'s tasks (its planning task left
    /// out) in one of `statuses` (any when empty), by id, and how many.
    pub async fn tasks(
        &self,
        execution_id: i64,
        statuses: &[String],
        paging: Paging,
    ) -> StoreResult<(i64, Vec<Task>)> {
        let mut from = Sql::new(" FROM job_tasks WHERE execution_id = ");
        from.int(execution_id);
        from.push(" AND id > (SELECT MIN(id) FROM job_tasks WHERE execution_id = ")
            .int(execution_id)
            .push(")");
        if !statuses.is_empty() {
            from.push(" AND status IN (");
            for (i, status) in statuses.iter().enumerate() {
                if i > 0 {
                    from.push(", ");
                }
                from.text(status.clone());
            }
            from.push(")");
        }
        let (rows, total): (Vec<Task>, i64) = from
            .fetch_page(&self.0.pool, jobs::TASK_COLUMNS, " ORDER BY id", paging)
            .await?;
        Ok((total, rows))
    }

    /// The first task of execution `id` (its planning task).
    pub async fn planning_task(&self, execution_id: i64) -> StoreResult<Option<i64>> {
        Ok(
            sqlx::query_scalar("SELECT MIN(id) FROM job_tasks WHERE execution_id = $1")
                .bind(execution_id)
                .fetch_one(&self.0.pool)
                .await?,
        )
    }

    /// Whether a run of policy `id` has not ended.
    pub async fn active(&self, id: i64) -> StoreResult<bool> {
        let (running,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM job_executions WHERE vendor_type = $1 AND vendor_id = $2 \
             AND end_time IS NULL",
        )
        .bind(VENDOR_TYPE)
        .bind(id)
        .fetch_one(&self.0.pool)
        .await?;
        Ok(running > 0)
    }

    /// Every repository of this registry: id and full name, by name.
    pub async fn repositories(&self) -> StoreResult<Vec<(i64, String)>> {
        Ok(
            sqlx::query_as("SELECT id, name FROM repositories ORDER BY name")
                .fetch_all(&self.0.pool)
                .await?,
        )
    }

    /// The digests of the accessories (manifests whose subject is
    /// `subject`) of repository `repository`, oldest first.
    pub async fn accessories(&self, repository: &str, subject: &str) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT a.digest FROM artifacts a JOIN repositories r ON r.id = a.repository_id \
             WHERE r.name = $1 AND a.subject_digest = $2 AND a.accessory_type IS NOT NULL \
             ORDER BY a.id",
        )
        .bind(repository)
        .bind(subject)
        .fetch_all(&self.0.pool)
        .await?)
    }

    /// The label names of repository `repository_id`'s artifacts, by artifact id.
    pub async fn labels_of(
        &self,
        repository_id: i64,
    ) -> StoreResult<std::collections::HashMap<i64, Vec<String>>> {
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT lr.artifact_id, l.name FROM label_references lr \
             JOIN labels l ON l.id = lr.label_id \
             JOIN artifacts a ON a.id = lr.artifact_id WHERE a.repository_id = $1",
        )
        .bind(repository_id)
        .fetch_all(&self.0.pool)
        .await?;
        let mut labels = std::collections::HashMap::<i64, Vec<String>>::new();
        for (artifact, name) in rows {
            labels.entry(artifact).or_default().push(name);
        }
        Ok(labels)
    }

    /// Hands up to `limit` pending events over: `plan` turns them, with the
    /// enabled event-based policies, into runs, which are created as the
    /// events are taken, in one transaction. How many events were taken.
    pub async fn hand_off(
        &self,
        limit: i64,
        plan: impl FnOnce(&[Event], &[Policy]) -> Vec<(NewExecution, Vec<NewTask>)>,
    ) -> StoreResult<usize> {
        let Some((mut tx, taken)) = events::start_hand_off(self.0, REPLICATION, limit).await?
        else {
            return Ok(0);
        };
        let rows: Vec<PolicyRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM replication_policies WHERE trigger_type = 'event_based' \
             AND enabled = 1 ORDER BY id"
        )))
        .fetch_all(&mut *tx)
        .await?;
        let policies = rows
            .into_iter()
            .map(PolicyRow::into_policy)
            .collect::<StoreResult<Vec<_>>>()?;
        let runs = plan(&taken, &policies);
        events::finish_hand_off(tx, REPLICATION, &taken, runs).await
    }
}

/// Binds `policy`'s columns as `$1` to `$15`, in the order of the insert.
fn bind_policy<'q, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments>,
    policy: &'q Policy,
) -> sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments> {
    query
        .bind(&policy.name)
        .bind(&policy.description)
        .bind(policy.src_registry)
        .bind(policy.dest_registry)
        .bind(&policy.dest_namespace)
        .bind(i64::from(policy.dest_namespace_replace_count))
        .bind(policy.trigger.kind.clone())
        .bind(serde_json::to_string(&policy.trigger).unwrap_or_default())
        .bind(serde_json::to_string(&policy.filters).unwrap_or_default())
        .bind(i64::from(policy.replicate_deletion))
        .bind(i64::from(policy.overwrite))
        .bind(i64::from(policy.enabled))
        .bind(i64::from(policy.speed))
        .bind(i64::from(policy.copy_by_chunk))
        .bind(i64::from(policy.single_active_replication))
}

/// Records the [`events::REPLICATION_FINISHED`] event of task `task_id`,
/// which ended as `status`, in the transaction that ends it (Harbor
/// announces each task): the project is that of the side of the copy that
/// is this registry, the actor the run's trigger. A planning task, or a
/// task whose project here is gone, records nothing.
pub(crate) async fn record_task_finished(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    task_id: i64,
    status: &str,
) -> StoreResult<()> {
    let found: Option<(String, String, Option<i64>)> = sqlx::query_as(
        "SELECT t.parameters, e.job_trigger, p.dest_registry_id FROM job_tasks t \
         JOIN job_executions e ON e.id = t.execution_id \
         LEFT JOIN replication_policies p ON p.id = e.vendor_id WHERE t.id = $1",
    )
    .bind(task_id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some((parameters, trigger, dest_registry)) = found else {
        return Ok(());
    };
    let parameters: serde_json::Value = serde_json::from_str(&parameters).unwrap_or_default();
    let work = &parameters["work"];
    let local = if dest_registry.is_some() {
        work["repository"].as_str()
    } else {
        work["destination"].as_str()
    };
    let Some(local) = local else {
        return Ok(());
    };
    let project = local.split_once('/').map_or(local, |(p, _)| p);
    let project_id: Option<i64> = sqlx::query_scalar("SELECT id FROM projects WHERE name = $1")
        .bind(project)
        .fetch_optional(&mut **tx)
        .await?;
    let Some(project_id) = project_id else {
        return Ok(());
    };
    events::record(
        &mut *tx,
        &events::NewEvent {
            kind: events::REPLICATION_FINISHED,
            project_id: Some(project_id),
            resource: task_id.to_string(),
            actor: trigger,
            digest: None,
            detail: Some(status.to_string()),
        },
    )
    .await
}
