//! SQLite's short path for the commonest manifest PUT: an image manifest
//! (no index children) whose blobs are all there, within quota, not moving an
//! existing tag. One query checks what the general path
//! ([`Registry::put_manifest`](crate::repo::registry::Registry)) would refuse,
//! and one batch of statements writes what it would write.
//!
//! Why: SQLite runs each statement on its connection's worker thread, so the
//! general path's dozen statements are a dozen thread hand-offs while the
//! write lock is held, and pushes wait on that lock. SQLite binds `$N` to the
//! same value in every statement of a batch, so the whole write is one
//! hand-off; ids are found by their natural keys (repository name, digest)
//! instead of being carried from one statement's answer to the next.
//!
//! Concurrent PUTs are written in groups ([`ImagePuts`]): one task takes every
//! PUT waiting and writes them in one transaction, and answers each once the
//! group is committed. A commit's cost
//! (its hand-offs, and the pages it writes to the log, most of them the same
//! index pages for every PUT) is then shared by the group; the write lock is
//! taken once per group instead of once per PUT.

use sqlx::Row;
use tokio::sync::{mpsc, oneshot};

use crate::error::{StoreError, StoreResult};
use crate::pool::Pool;
use crate::repo::manifests::NewManifest;
use crate::repo::registry::placeholders;

/// The most PUTs one transaction writes. The writer holds the write lock for
/// at most 1/throughput per PUT: 0.5-0.6 ms at the 1,759-1,966 PUT/s of
/// `scripts/bench artifacts` (`docs/benchmarks.md`), so other writers wait
/// at most about 20 ms behind a full group.
const MOST_PER_GROUP: usize = 32;

/// The writer of SQLite's image manifest PUTs, a group per transaction.
#[derive(Debug, Clone)]
pub(crate) struct ImagePuts {
    queue: mpsc::UnboundedSender<Job>,
}

/// One PUT waiting for its group.
struct Job {
    manifest: NewManifest,
    now: String,
    done: oneshot::Sender<StoreResult<Option<i64>>>,
}

impl ImagePuts {
    /// Starts the writer on the current runtime; it ends when this handle and
    /// every clone of it are dropped.
    pub(crate) fn start(pool: Pool) -> Self {
        let (queue, jobs) = mpsc::unbounded_channel();
        tokio::spawn(write_groups(pool, jobs));
        Self { queue }
    }

    /// Stores `m` (pushed at `now`) with the PUTs waiting beside it:
    /// `Some(artifact id)` once its group is committed, or `None` with nothing
    /// written, for the general path to take over.
    ///
    /// A caller that stops waiting does not withdraw the PUT: it is committed
    /// or not as a whole, like a request whose client went away.
    pub(crate) async fn put(&self, m: &NewManifest, now: &str) -> StoreResult<Option<i64>> {
        if !m.children.is_empty() {
            return Ok(None);
        }
        let (done, outcome) = oneshot::channel();
        let job = Job {
            manifest: m.clone(),
            now: now.to_string(),
            done,
        };
        if self.queue.send(job).is_err() {
            // The writer's runtime is stopping: the general path writes alone.
            return Ok(None);
        }
        outcome.await.unwrap_or_else(|_| {
            Err(group_failed(
                "the manifest writer stopped before answering".into(),
            ))
        })
    }
}

/// Writes groups until every [`ImagePuts`] handle is gone.
async fn write_groups(pool: Pool, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let mut group = Vec::with_capacity(MOST_PER_GROUP);
    while jobs.recv_many(&mut group, MOST_PER_GROUP).await > 0 {
        let outcomes = match put_group(&pool, &group).await {
            Ok(outcomes) => outcomes,
            Err(err) => {
                // Nothing of the group is committed; each PUT gets the cause.
                let cause = err.to_string();
                group
                    .iter()
                    .map(|_| Err(group_failed(cause.clone())))
                    .collect()
            }
        };
        for (job, outcome) in group.drain(..).zip(outcomes) {
            // A caller that went away needs no answer.
            let _ = job.done.send(outcome);
        }
    }
}

/// Writes `group` in one transaction: each PUT's outcome, or the error that
/// undid the whole group.
///
/// A PUT whose statements fail (after its check passed, so the database
/// itself failed) undoes the group: it gets its error, and every other PUT of
/// the group `None`, to be written alone by the general path. Savepoints would
/// undo one PUT only, but SQLite copies every page a savepoint touches to a
/// sub-journal (spilled to a file past 64 KiB), which cost more than the
/// grouping saves.
async fn put_group(pool: &Pool, group: &[Job]) -> StoreResult<Vec<StoreResult<Option<i64>>>> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let mut outcomes = Vec::with_capacity(group.len());
    for (i, job) in group.iter().enumerate() {
        match put_image(&mut tx, &job.manifest, &job.now).await {
            Ok(outcome) => outcomes.push(Ok(outcome)),
            Err(err) => {
                tx.rollback().await?;
                let mut outcomes: Vec<_> = group.iter().map(|_| Ok(None)).collect();
                outcomes[i] = Err(err);
                return Ok(outcomes);
            }
        }
    }
    tx.commit().await?;
    Ok(outcomes)
}

fn group_failed(cause: String) -> StoreError {
    StoreError::Database(sqlx::Error::Protocol(format!(
        "the group of manifest PUTs was not written: {cause}"
    )))
}

/// The parameters every statement shares; the dependencies' digests follow.
const FIRST_DEPENDENCY: usize = 22;

/// Stores `m` inside `tx` (a SQLite write transaction) if every check of the
/// general path passes: `Some(artifact id)`, or `None` with nothing written,
/// for the general path to take over (and find what to report). `m` has no
/// index children ([`ImagePuts::put`] sends those to the general path).
async fn put_image(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    m: &NewManifest,
    now: &str,
) -> StoreResult<Option<i64>> {
    let mut dependencies: Vec<&str> = m.blobs.iter().map(String::as_str).collect();
    dependencies.sort_unstable();
    dependencies.dedup();
    let listed = placeholders(FIRST_DEPENDENCY, dependencies.len());
    let body_len = i64::try_from(m.body.len()).unwrap_or(i64::MAX);
    let event = m.pushed_event();
    let bind = |sql: String, owed: i64| {
        // $1 project, $2 repository, $3 digest, $4 now, $5 tag, $6 body length,
        // $7 body, $8-$14 the artifact's columns, $15 the zero time, $16 extra
        // attributes, $17 annotations, $18 the bytes the PUT charges (found
        // by the check), $19-$21 the push's event (kind, resource, actor);
        // the dependencies from $22.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(m.project_id)
            .bind(&m.repository)
            .bind(&m.digest)
            .bind(now)
            .bind(m.tag.as_deref())
            .bind(body_len)
            .bind(m.body.clone())
            .bind(&m.manifest_media_type)
            .bind(&m.media_type)
            .bind(&m.artifact_type)
            .bind(&m.harbor_type)
            .bind(m.size)
            .bind(m.subject_digest.as_deref())
            .bind(m.accessory_type.as_deref())
            .bind(berth_domain::time::ZERO_TIME)
            .bind(&m.extra_attrs)
            .bind(m.annotations.as_deref())
            .bind(owed)
            .bind(event.as_ref().map(|e| e.kind))
            .bind(event.as_ref().map(|e| e.resource.clone()))
            .bind(event.as_ref().map(|e| e.actor.clone()));
        for dependency in &dependencies {
            query = query.bind(*dependency);
        }
        query
    };

    // What the PUT charges: the dependencies' links a delete uncharged, and
    // the manifest's own unless it is linked and charged, as the general
    // path's `assert_link` and `charge` find.
    let check = format!(
        "SELECT \
         (SELECT COUNT(*) FROM project_blobs pb JOIN blobs b ON b.id = pb.blob_id \
          WHERE pb.project_id = $1 AND b.deleting = 0 AND b.digest IN ({listed})), \
         COALESCE((SELECT deleting FROM blobs WHERE digest = $3), 0), \
         (SELECT COALESCE(SUM(b.size), 0) FROM project_blobs pb JOIN blobs b ON b.id = pb.blob_id \
          WHERE pb.project_id = $1 AND pb.charged = 0 AND b.deleting = 0 AND b.digest IN ({listed})) \
         + CASE WHEN EXISTS (SELECT 1 FROM project_blobs pb JOIN blobs b ON b.id = pb.blob_id \
          WHERE pb.project_id = $1 AND b.digest = $3 AND pb.charged = 1) THEN 0 ELSE $6 END, \
         (SELECT hard FROM project_quotas WHERE project_id = $1), \
         (SELECT used FROM project_quotas WHERE project_id = $1), \
         (SELECT a.digest FROM tags t JOIN artifacts a ON a.id = t.artifact_id \
          WHERE t.repository_id = (SELECT id FROM repositories WHERE name = $2) AND t.name = $5)"
    );
    let row = bind(check, 0).fetch_one(&mut **tx).await?;
    let present: i64 = row.try_get(0)?;
    let manifest_deleting: i64 = row.try_get(1)?;
    let owed: i64 = row.try_get(2)?;
    let hard: Option<i64> = row.try_get(3)?;
    let used: Option<i64> = row.try_get(4)?;
    let tagged: Option<String> = row.try_get(5)?;
    let within_quota = match (hard, used) {
        (Some(hard), Some(used)) => owed == 0 || hard < 0 || used + owed <= hard,
        _ => true,
    };
    let keeps_tag = tagged.is_none_or(|digest| digest == m.digest);
    if usize::try_from(present) != Ok(dependencies.len())
        || manifest_deleting != 0
        || !within_quota
        || !keeps_tag
    {
        return Ok(None);
    }

    let repository = "(SELECT id FROM repositories WHERE name = $2)";
    let blob = "(SELECT id FROM blobs WHERE digest = $3)";
    let owned = if dependencies.is_empty() {
        "$3".to_string()
    } else {
        format!("{listed}, $3")
    };
    let mut batch = format!(
        "INSERT INTO repositories (project_id, name, description, pull_count, created_at, updated_at) \
         VALUES ($1, $2, '', 0, $4, $4) ON CONFLICT (name) DO UPDATE SET updated_at = $4;\n\
         UPDATE project_blobs SET version = version + 1, pending_since = NULL, charged = 1 \
         WHERE project_id = $1 AND blob_id IN (SELECT id FROM blobs WHERE deleting = 0 AND digest IN ({listed}));\n\
         INSERT INTO blobs (digest, size, media_type, version, deleting, created_at, updated_at) \
         VALUES ($3, $6, $8, 1, 0, $4, $4) \
         ON CONFLICT (digest) DO UPDATE SET version = blobs.version + 1, updated_at = $4;\n\
         INSERT INTO manifest_bodies (blob_id, body) SELECT id, $7 FROM blobs WHERE digest = $3 \
         ON CONFLICT (blob_id) DO NOTHING;\n\
         UPDATE project_quotas SET used = used + $18, updated_at = $4 WHERE project_id = $1 AND $18 <> 0;\n\
         INSERT INTO project_blobs (project_id, blob_id, version, pending_since, created_at, charged) \
         SELECT $1, id, 1, NULL, $4, 1 FROM blobs WHERE digest = $3 \
         ON CONFLICT (project_id, blob_id) DO UPDATE SET version = project_blobs.version + 1, pending_since = NULL, \
         charged = 1;\n\
         INSERT INTO artifacts (project_id, repository_id, digest, manifest_blob_id, manifest_media_type, \
         media_type, artifact_type, type, size, icon, subject_digest, accessory_type, push_time, pull_time, \
         extra_attrs, annotations) \
         SELECT $1, {repository}, $3, {blob}, $8, $9, $10, $11, $12, '', $13, $14, $4, $15, $16, $17 \
         WHERE true ON CONFLICT (repository_id, digest) DO UPDATE SET push_time = $4;\n\
         INSERT INTO repository_blobs (project_id, blob_id, repository, created_at) \
         SELECT $1, id, $2, $4 FROM blobs WHERE digest IN ({owned}) \
         ON CONFLICT (repository, blob_id) DO NOTHING;\n\
         INSERT INTO artifact_blobs (artifact_id, blob_id) \
         SELECT a.id, b.id FROM artifacts a, blobs b \
         WHERE a.repository_id = {repository} AND a.digest = $3 AND b.digest IN ({owned}) \
         ON CONFLICT (artifact_id, blob_id) DO NOTHING;\n",
    );
    if m.tag.is_some() {
        batch.push_str(&format!(
            "INSERT INTO tags (repository_id, artifact_id, name, push_time, pull_time) \
             SELECT a.repository_id, a.id, $5, $4, $15 FROM artifacts a \
             WHERE a.repository_id = {repository} AND a.digest = $3 \
             ON CONFLICT (repository_id, name) DO UPDATE SET artifact_id = excluded.artifact_id, \
             push_time = excluded.push_time;\n"
        ));
    }
    if event.is_some() {
        // The push's event, in the push's transaction (see `repo::events`).
        batch.push_str(
            "INSERT INTO events (kind, project_id, resource, actor, occurred_at, digest) \
             VALUES ($19, $1, $20, $21, $4, $3);\n",
        );
    }
    batch.push_str(&format!(
        "SELECT id FROM artifacts WHERE repository_id = {repository} AND digest = $3"
    ));
    let rows = bind(batch, owed).fetch_all(&mut **tx).await?;
    let artifact_id: i64 = rows.last().ok_or(sqlx::Error::RowNotFound)?.try_get(0)?;
    Ok(Some(artifact_id))
}
