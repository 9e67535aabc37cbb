//! Tag retention (migration 0022): each project's policy, the project's
//! `retention_id` metadata that names it, what a run weighs in a repository
//! and the deletions a run makes.
//!
//! A policy is kept as the checked JSON the API took; its runs are jobs
//! (`crates/store/src/repo/jobs.rs`) of vendor type [`VENDOR_TYPE`] and
//! vendor id the policy's.

use berth_domain::time;

use crate::Store;
use crate::db::Locking;
use crate::error::{StoreResult, conflict_on_unique};
use crate::repo::events;
use std::collections::HashMap;

use crate::repo::immutable::protection_of;
use crate::repo::manifests::delete_artifacts;
use crate::repo::projects::upsert_metadata;
use crate::repo::sql::Sql;

/// The jobs' name for tag retention (Harbor's vendor type).
pub const VENDOR_TYPE: &str = "RETENTION";

/// The project metadata key naming a project's policy.
pub const METADATA_KEY: &str = "retention_id";

/// A stored policy.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredPolicy {
    /// Its id.
    pub id: i64,
    /// The project it is of.
    pub project_id: i64,
    /// Harbor's RetentionPolicy (JSON text).
    pub policy: String,
}

/// One artifact as a run weighs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The artifact's id.
    pub id: i64,
    /// Its digest.
    pub digest: String,
    /// Its tags, by name.
    pub tags: Vec<String>,
    /// When it or one of its tags was last pushed (store format).
    pub pushed: String,
    /// When it or one of its tags was last pulled (store format; Harbor's
    /// zero time when never).
    pub pulled: String,
    /// Whether an index refers to it (a delete would be refused).
    pub referenced: bool,
}

/// What became of one artifact a run meant to delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retired {
    /// Deleted, with its tags and accessories.
    Deleted,
    /// Kept: an immutable rule protects one of its tags.
    Immutable,
    /// Kept: an index refers to it.
    Referenced,
    /// Kept: it was pushed or tagged after the run looked, or is gone.
    Changed,
}

/// Access to retention policies.
pub struct Retentions<'a>(&'a Store);

impl Store {
    /// The retention repository.
    pub fn retentions(&self) -> Retentions<'_> {
        Retentions(self)
    }
}

impl Retentions<'_> {
    /// Stores `policy` as project `project_id`'s and names it in the
    /// project's metadata, in one transaction; its id. A project that has a
    /// policy already is a `Conflict`.
    pub async fn create(&self, project_id: i64, policy: &str) -> StoreResult<i64> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO retention_policies (project_id, policy, creation_time, update_time) \
             VALUES ($1, $2, $3, $3) RETURNING id",
        )
        .bind(project_id)
        .bind(policy)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await
        .map_err(|err| {
            conflict_on_unique(err, || {
                format!("project {project_id} already has a retention policy")
            })
        })?;
        upsert_metadata(&mut tx, project_id, METADATA_KEY, &id.to_string(), &now).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Policy `id`.
    pub async fn get(&self, id: i64) -> StoreResult<Option<StoredPolicy>> {
        Ok(
            sqlx::query_as("SELECT id, project_id, policy FROM retention_policies WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.0.pool)
                .await?,
        )
    }

    /// Replaces policy `id`'s text; `false` when there is none.
    pub async fn update(&self, id: i64, policy: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE retention_policies SET policy = $2, update_time = $3 WHERE id = $1",
        )
        .bind(id)
        .bind(policy)
        .bind(time::now())
        .execute(&self.0.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes policy `id`, the metadata that names it and its schedule, in
    /// one transaction; `false` when there is none. Its past runs stay.
    pub async fn delete(&self, id: i64) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let found: Option<(i64,)> =
            sqlx::query_as("DELETE FROM retention_policies WHERE id = $1 RETURNING project_id")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((project_id,)) = found else {
            return Ok(false);
        };
        sqlx::query(
            "DELETE FROM project_metadata WHERE project_id = $1 AND name = $2 AND value = $3",
        )
        .bind(project_id)
        .bind(METADATA_KEY)
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM job_schedules WHERE vendor_type = $1 AND vendor_id = $2")
            .bind(VENDOR_TYPE)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The repositories of project `project_id`: id and full name, by name.
    pub async fn repositories(&self, project_id: i64) -> StoreResult<Vec<(i64, String)>> {
        Ok(
            sqlx::query_as("SELECT id, name FROM repositories WHERE project_id = $1 ORDER BY name")
                .bind(project_id)
                .fetch_all(&self.0.pool)
                .await?,
        )
    }

    /// The artifacts of repository `repository_id` a run weighs, with their
    /// tags, by id: as Harbor's artifact list gives them, every artifact but
    /// accessories (which go with their subject) and the untagged children
    /// of an index (which go with it). Two queries whatever their number.
    pub async fn candidates(&self, repository_id: i64) -> StoreResult<Vec<Candidate>> {
        let rows: Vec<(i64, String, String, String, i64)> = sqlx::query_as(
            "SELECT a.id, a.digest, a.push_time, a.pull_time, \
             CASE WHEN EXISTS (SELECT 1 FROM artifact_references r WHERE r.child_id = a.id) \
             THEN 1 ELSE 0 END FROM artifacts a \
             WHERE a.repository_id = $1 AND a.accessory_type IS NULL ORDER BY a.id",
        )
        .bind(repository_id)
        .fetch_all(&self.0.pool)
        .await?;
        let tags: Vec<(i64, String, String, String)> = sqlx::query_as(
            "SELECT artifact_id, name, push_time, pull_time FROM tags WHERE repository_id = $1 \
             ORDER BY artifact_id, name",
        )
        .bind(repository_id)
        .fetch_all(&self.0.pool)
        .await?;
        let mut tags = tags.into_iter().peekable();
        let mut candidates = Vec::with_capacity(rows.len());
        for (id, digest, pushed, pulled, referenced) in rows {
            let mut candidate = Candidate {
                id,
                digest,
                tags: Vec::new(),
                pushed,
                pulled,
                referenced: referenced != 0,
            };
            while let Some((artifact_id, ..)) = tags.peek() {
                if *artifact_id > id {
                    break;
                }
                let Some((artifact_id, name, pushed, pulled)) = tags.next() else {
                    break;
                };
                if artifact_id == id {
                    candidate.tags.push(name);
                    candidate.pushed = candidate.pushed.max(pushed);
                    candidate.pulled = candidate.pulled.max(pulled);
                }
            }
            if candidate.tags.is_empty() && candidate.referenced {
                continue;
            }
            candidates.push(candidate);
        }
        Ok(candidates)
    }

    /// Deletes the artifacts `doomed` (ids) of repository `repository` as
    /// `by`, in one transaction, as the one artifact delete does each
    /// (accessories, tags, quota, an `artifact.deleted` event), except those
    /// that changed after `looked_at` (pushed again or tagged since), those an
    /// index refers to and those an immutable rule protects, which stay.
    /// Set-based: a handful of statements for the whole batch, so the
    /// repository's row (which pushes to it take) is held briefly. What
    /// became of each, in order.
    pub async fn retire(
        &self,
        repository: &str,
        doomed: &[i64],
        looked_at: &str,
        by: &str,
    ) -> StoreResult<Vec<Retired>> {
        let mut tx = self.0.begin_write().await?;
        if self.0.backend() == crate::Backend::Postgres {
            // The batch's commit returns before its log reaches the disk, and
            // with it the locks a push waits for (the repository row): this
            // machine's commits took 100-200 ms, pushes waited for each. A
            // crash can lose the last batches deleted, never a part of one
            // (what is lost is retained, and found again by the next run);
            // the task's end is committed durably, and with it every batch
            // before it.
            sqlx::query("SET LOCAL synchronous_commit = off")
                .execute(&mut *tx)
                .await?;
        }
        // The repository row first, as a push and the one delete take it.
        let found: Option<(i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT id, project_id FROM repositories WHERE name = $1{}",
            self.0.locking(Locking::Update)
        )))
        .bind(repository)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((repository_id, project_id)) = found else {
            return Ok(vec![Retired::Changed; doomed.len()]);
        };
        // Found by id alone, whether each is as it was judged in the select
        // list: with the repository and push time in the WHERE clause, SQLite
        // walked the repository's push-time index (every artifact of it, 4 ms
        // at 20,000 and growing) instead of looking the batch's ids up.
        let mut look = Sql::new(
            "SELECT a.id, a.digest, \
             CASE WHEN EXISTS (SELECT 1 FROM artifact_references r WHERE r.child_id = a.id) THEN 1 ELSE 0 END, \
             CASE WHEN a.repository_id = ",
        );
        look.int(repository_id)
            .push(" AND a.push_time <= ")
            .text(looked_at)
            .push(" AND NOT EXISTS (SELECT 1 FROM tags t WHERE t.artifact_id = a.id AND t.push_time > ")
            .text(looked_at)
            .push(") THEN 1 ELSE 0 END FROM artifacts a WHERE a.id IN ")
            .int_list(doomed)
            .push(" ORDER BY a.id")
            .push(self.0.locking(Locking::Update));
        let looked: Vec<(i64, String, i64, i64)> = look.fetch_all(&mut *tx).await?;
        let unchanged: Vec<(i64, String, i64)> = looked
            .into_iter()
            .filter(|(.., same)| *same == 1)
            .map(|(id, digest, referenced, _)| (id, digest, referenced))
            .collect();
        let mut tags = Sql::new("SELECT artifact_id, name FROM tags WHERE artifact_id IN ");
        tags.int_list(&unchanged.iter().map(|(id, ..)| *id).collect::<Vec<_>>());
        let tags: Vec<(i64, String)> = tags.fetch_all(&mut *tx).await?;
        let protection = protection_of(&mut tx, project_id).await?;
        let within = berth_domain::oci::within_project(repository);
        let mut outcome: HashMap<i64, Retired> = HashMap::new();
        let mut going: Vec<(i64, String)> = Vec::new();
        for (id, digest, referenced) in unchanged {
            let protected = tags
                .iter()
                .any(|(artifact, tag)| *artifact == id && protection.protects(within, tag));
            let verdict = match () {
                _ if referenced != 0 => Retired::Referenced,
                _ if protected => Retired::Immutable,
                _ => {
                    going.push((id, digest));
                    Retired::Deleted
                }
            };
            outcome.insert(id, verdict);
        }
        if !going.is_empty() {
            delete_artifacts(self.0, &mut tx, repository_id, project_id, &going).await?;
            let events: Vec<events::NewEvent> = going
                .iter()
                .map(|(id, digest)| {
                    let first_tag = tags
                        .iter()
                        .find(|(artifact, _)| artifact == id)
                        .map(|(_, tag)| tag.as_str());
                    events::artifact_deleted(project_id, repository, digest, first_tag, by)
                })
                .collect();
            events::record_all(&mut tx, &events).await?;
        }
        tx.commit().await?;
        Ok(doomed
            .iter()
            .map(|id| outcome.get(id).copied().unwrap_or(Retired::Changed))
            .collect())
    }
}

/// Records the [`events::RETENTION_FINISHED`] event of run `execution_id`,
/// in the transaction that ends it, when it was a real run that deleted
/// something (Harbor announces nothing else): the project is its policy's,
/// the actor the run's operator.
pub(crate) async fn record_finished(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    execution_id: i64,
) -> StoreResult<()> {
    let found: Option<(String, Option<i64>)> = sqlx::query_as(
        "SELECT e.extra_attrs, p.project_id FROM job_executions e \
         LEFT JOIN retention_policies p ON p.id = e.vendor_id WHERE e.id = $1",
    )
    .bind(execution_id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some((attrs, Some(project_id))) = found else {
        return Ok(());
    };
    let attrs: serde_json::Value = serde_json::from_str(&attrs).unwrap_or_default();
    if attrs["dry_run"].as_bool().unwrap_or(false) {
        return Ok(());
    }
    let found: Vec<(String,)> =
        sqlx::query_as("SELECT extra_attrs FROM job_tasks WHERE execution_id = $1")
            .bind(execution_id)
            .fetch_all(&mut **tx)
            .await?;
    let deleted: i64 = found
        .iter()
        .filter_map(|(text,)| serde_json::from_str::<serde_json::Value>(text).ok())
        .filter_map(|found| found["deleted"].as_i64())
        .sum();
    if deleted == 0 {
        return Ok(());
    }
    events::record(
        &mut *tx,
        &events::NewEvent {
            kind: events::RETENTION_FINISHED,
            project_id: Some(project_id),
            resource: execution_id.to_string(),
            actor: attrs["operator"].as_str().unwrap_or_default().to_string(),
            digest: None,
            detail: None,
        },
    )
    .await
}
