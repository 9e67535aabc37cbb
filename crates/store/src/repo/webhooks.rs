//! Webhook policies (migration 0024), a project's or the system's (project
//! id 0 here, no project in the table: every project's events), and the
//! hand-off of domain events to them: the `webhook` subscriber's pending events become delivery jobs in
//! the transaction that takes them, so each event is handed over once.

use berth_domain::model::webhook::Policy;
use berth_domain::query::Paging;
use berth_domain::time;

use crate::Store;
use crate::error::{StoreError, StoreResult, conflict_on_unique};
use crate::repo::events::{self, Event, WEBHOOK};
use crate::repo::jobs::{EXECUTION_COLUMNS, Execution, NewExecution, NewTask};
use crate::repo::registry::placeholders;

#[derive(sqlx::FromRow)]
struct PolicyRow {
    id: i64,
    project_id: Option<i64>,
    name: String,
    description: String,
    targets: String,
    event_types: String,
    enabled: i64,
    creator: String,
    creation_time: String,
    update_time: String,
}

impl PolicyRow {
    fn into_policy(self) -> StoreResult<Policy> {
        let id = self.id;
        let bad = |e: serde_json::Error| {
            StoreError::Io(std::io::Error::other(format!(
                "stored webhook policy {id} does not parse: {e}"
            )))
        };
        Ok(Policy {
            id: self.id,
            name: self.name,
            description: self.description,
            project_id: self.project_id.unwrap_or(SYSTEM),
            targets: serde_json::from_str(&self.targets).map_err(bad)?,
            event_types: serde_json::from_str(&self.event_types).map_err(bad)?,
            creator: self.creator,
            creation_time: self.creation_time,
            update_time: self.update_time,
            enabled: self.enabled != 0,
        })
    }
}

/// The project id of the system's policies.
pub const SYSTEM: i64 = 0;

/// The stored project of scope `project_id` ([`SYSTEM`]: none).
fn stored_project(project_id: i64) -> Option<i64> {
    (project_id != SYSTEM).then_some(project_id)
}

/// The vendor types of deliveries: to http receivers, to Slack.
pub const VENDOR_TYPES: [&str; 2] = ["WEBHOOK", "SLACK"];

const COLUMNS: &str = "id, project_id, name, description, targets, event_types, enabled, creator, \
     creation_time, update_time";

fn duplicate(name: &str) -> impl FnOnce() -> String + '_ {
    move || format!("notification policy named {name} already exists")
}

/// Access to webhook policies.
pub struct Webhooks<'a>(&'a Store);

impl Store {
    /// The webhook policy repository.
    pub fn webhooks(&self) -> Webhooks<'_> {
        Webhooks(self)
    }
}

impl Webhooks<'_> {
    /// A page of project `project_id`'s policies (by id) and how many it has.
    pub async fn list(&self, project_id: i64, paging: Paging) -> StoreResult<(i64, Vec<Policy>)> {
        let (total,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM webhook_policies WHERE COALESCE(project_id, 0) = $1",
        )
        .bind(project_id)
        .fetch_one(&self.0.pool)
        .await?;
        let (limit, offset) = paging.limit_offset().unwrap_or((i64::MAX, 0));
        let rows: Vec<PolicyRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM webhook_policies WHERE COALESCE(project_id, 0) = $1 ORDER BY id LIMIT $2 OFFSET $3"
        )))
        .bind(project_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.0.pool)
        .await?;
        let policies = rows
            .into_iter()
            .map(PolicyRow::into_policy)
            .collect::<StoreResult<_>>()?;
        Ok((total, policies))
    }

    /// Policy `id` of project `project_id`.
    pub async fn get(&self, project_id: i64, id: i64) -> StoreResult<Option<Policy>> {
        let row: Option<PolicyRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM webhook_policies WHERE COALESCE(project_id, 0) = $1 AND id = $2"
        )))
        .bind(project_id)
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?;
        row.map(PolicyRow::into_policy).transpose()
    }

    /// Adds a (validated) policy made by `creator`; `Conflict` when the
    /// project has one of that name. Its id.
    pub async fn create(
        &self,
        project_id: i64,
        policy: &Policy,
        creator: &str,
    ) -> StoreResult<i64> {
        let now = time::now();
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO webhook_policies (project_id, name, description, targets, event_types, \
             enabled, creator, creation_time, update_time) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING id",
        )
        .bind(stored_project(project_id))
        .bind(&policy.name)
        .bind(&policy.description)
        .bind(serde_json::to_string(&policy.targets).unwrap_or_default())
        .bind(serde_json::to_string(&policy.event_types).unwrap_or_default())
        .bind(i64::from(policy.enabled))
        .bind(creator)
        .bind(&now)
        .fetch_one(&self.0.pool)
        .await
        .map_err(|e| conflict_on_unique(e, duplicate(&policy.name)))?;
        Ok(id)
    }

    /// Replaces policy `id` of project `project_id` (validated); `false` when
    /// there is none, `Conflict` when another has its new name.
    pub async fn update(&self, project_id: i64, id: i64, policy: &Policy) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE webhook_policies SET name = $3, description = $4, targets = $5, \
             event_types = $6, enabled = $7, update_time = $8 WHERE COALESCE(project_id, 0) = $1 AND id = $2",
        )
        .bind(project_id)
        .bind(id)
        .bind(&policy.name)
        .bind(&policy.description)
        .bind(serde_json::to_string(&policy.targets).unwrap_or_default())
        .bind(serde_json::to_string(&policy.event_types).unwrap_or_default())
        .bind(i64::from(policy.enabled))
        .bind(time::now())
        .execute(&self.0.pool)
        .await
        .map_err(|e| conflict_on_unique(e, duplicate(&policy.name)))?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes policy `id` of project `project_id` and its deliveries;
    /// `false` when there was none.
    pub async fn delete(&self, project_id: i64, id: i64) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let done = sqlx::query(
            "DELETE FROM webhook_policies WHERE COALESCE(project_id, 0) = $1 AND id = $2",
        )
        .bind(project_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 1 {
            sqlx::query(
                "DELETE FROM job_executions WHERE vendor_type IN ($1, $2) AND vendor_id = $3",
            )
            .bind(VENDOR_TYPES[0])
            .bind(VENDOR_TYPES[1])
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// A page of policy `id`'s deliveries, newest first, and how many it has.
    pub async fn executions(&self, id: i64, paging: Paging) -> StoreResult<(i64, Vec<Execution>)> {
        let (total,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM job_executions WHERE vendor_type IN ($1, $2) AND vendor_id = $3",
        )
        .bind(VENDOR_TYPES[0])
        .bind(VENDOR_TYPES[1])
        .bind(id)
        .fetch_one(&self.0.pool)
        .await?;
        let (limit, offset) = paging.limit_offset().unwrap_or((i64::MAX, 0));
        let page = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {EXECUTION_COLUMNS} FROM job_executions WHERE vendor_type IN ($1, $2) \
             AND vendor_id = $3 ORDER BY id DESC LIMIT $4 OFFSET $5"
        )))
        .bind(VENDOR_TYPES[0])
        .bind(VENDOR_TYPES[1])
        .bind(id)
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.0.pool)
        .await?;
        Ok((total, page))
    }

    /// When each of `policies` last started a delivery, per event type:
    /// `(policy id, event type, start time)`.
    pub async fn last_triggers(&self, policies: &[i64]) -> StoreResult<Vec<(i64, String, String)>> {
        if policies.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT vendor_id, extra_attrs, MAX(start_time) FROM job_executions \
             WHERE vendor_type IN ($1, $2) AND vendor_id IN ({}) GROUP BY vendor_id, extra_attrs",
            placeholders(3, policies.len())
        );
        let mut query = sqlx::query_as::<_, (i64, String, String)>(sqlx::AssertSqlSafe(sql))
            .bind(VENDOR_TYPES[0])
            .bind(VENDOR_TYPES[1]);
        for id in policies {
            query = query.bind(*id);
        }
        let rows = query.fetch_all(&self.0.pool).await?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, attrs, at)| {
                let attrs: serde_json::Value = serde_json::from_str(&attrs).ok()?;
                Some((id, attrs["event_type"].as_str()?.to_string(), at))
            })
            .collect())
    }

    /// The projects with an enabled policy naming `event_type` ([`SYSTEM`]
    /// among them when a system policy does: every project).
    pub async fn projects_watching(&self, event_type: &str) -> StoreResult<Vec<i64>> {
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT DISTINCT COALESCE(project_id, 0), event_types FROM webhook_policies WHERE enabled = 1",
        )
        .fetch_all(&self.0.pool)
        .await?;
        let mut projects: Vec<i64> = rows
            .into_iter()
            .filter(|(_, types)| {
                serde_json::from_str::<Vec<String>>(types)
                    .is_ok_and(|types| types.iter().any(|t| t == event_type))
            })
            .map(|(project, _)| project)
            .collect();
        projects.sort_unstable();
        projects.dedup();
        Ok(projects)
    }

    /// Hands up to `limit` pending events over: `plan` turns them, with the
    /// enabled policies of their projects and the system's, into delivery executions, which are
    /// created as the events are taken, in one transaction. How many events
    /// were taken (0: none was pending).
    pub async fn hand_off(
        &self,
        limit: i64,
        plan: impl FnOnce(&[Event], &[Policy]) -> Vec<(NewExecution, Vec<NewTask>)>,
    ) -> StoreResult<usize> {
        let Some((mut tx, taken)) = events::start_hand_off(self.0, WEBHOOK, limit).await? else {
            return Ok(0);
        };
        let mut projects: Vec<i64> = taken.iter().filter_map(|e| e.project_id).collect();
        projects.sort_unstable();
        projects.dedup();
        let mut policies = Vec::new();
        {
            let listed = if projects.is_empty() {
                String::new()
            } else {
                format!(" OR project_id IN ({})", placeholders(1, projects.len()))
            };
            let sql = format!(
                "SELECT {COLUMNS} FROM webhook_policies WHERE enabled = 1 \
                 AND (project_id IS NULL{listed}) ORDER BY id"
            );
            let mut query = sqlx::query_as::<_, PolicyRow>(sqlx::AssertSqlSafe(sql));
            for project in &projects {
                query = query.bind(*project);
            }
            for row in query.fetch_all(&mut *tx).await? {
                policies.push(row.into_policy()?);
            }
        }
        let runs = plan(&taken, &policies);
        events::finish_hand_off(tx, WEBHOOK, &taken, runs).await
    }
}
