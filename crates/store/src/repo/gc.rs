//! Online garbage collection (data-model §8): expired upload sessions, stale
//! project links, then unreferenced blobs, each removal a compare-and-set on
//! the row's `version` so a concurrent push always wins.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use berth_domain::oci::Digest;
use berth_domain::time;
use serde_json::json;

use crate::Store;
use crate::blobs::BlobStore;
use crate::error::StoreResult;

/// How a run is tuned.
#[derive(Debug, Clone, Copy)]
pub struct GcOptions {
    /// How long a pushed but unused blob link stays (it waits for its manifest).
    pub grace: Duration,
    /// How long an idle upload session stays.
    pub upload_expiry: Duration,
}

/// The default grace of pushed, unused blob links.
pub const DEFAULT_GRACE_SECS: u64 = 24 * 3600;

impl Default for GcOptions {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(DEFAULT_GRACE_SECS),
            upload_expiry: Duration::from_secs(24 * 3600),
        }
    }
}

/// What a run removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcStats {
    /// Upload sessions expired.
    pub uploads: u64,
    /// Project links dropped.
    pub links: u64,
    /// Blobs deleted.
    pub blobs: u64,
    /// Bytes freed.
    pub bytes: i64,
    /// Stray files removed from the blob directory.
    pub stray_files: u64,
}

/// A recorded run.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct GcRun {
    /// Id.
    pub id: i64,
    /// `running`, `done` or `failed`.
    pub status: String,
    /// Start, store format.
    pub started_at: String,
    /// Last sign of life, store format.
    pub heartbeat_at: String,
    /// End, store format.
    pub finished_at: Option<String>,
    /// Stats JSON.
    pub stats: String,
}

fn seconds(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2)
}

/// A running run older than this without a heartbeat is taken over.
const STALE_RUN_SECS: i64 = 600;

impl Store {
    /// Records the start of a run; `Conflict` while another one is running.
    pub async fn start_gc_run(&self) -> StoreResult<i64> {
        let now = time::now();
        sqlx::query("UPDATE gc_runs SET status = 'failed', finished_at = $1 WHERE status = 'running' AND heartbeat_at < $2")
            .bind(&now)
            .bind(time::now_plus_seconds(-STALE_RUN_SECS))
            .execute(&self.pool)
            .await?;
        let row: (i64,) = sqlx::query_as(
            "INSERT INTO gc_runs (status, started_at, heartbeat_at, stats) VALUES ('running', $1, $1, '{}') RETURNING id",
        )
        .bind(&now)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| {
            crate::error::conflict_on_unique(e, || "a garbage collection is already running".into())
        })?;
        Ok(row.0)
    }

    /// Records the end of run `id`.
    pub async fn finish_gc_run(&self, id: i64, ok: bool, stats: &str) -> StoreResult<()> {
        sqlx::query("UPDATE gc_runs SET status = $2, finished_at = $3, heartbeat_at = $3, stats = $4 WHERE id = $1")
            .bind(id)
            .bind(if ok { "done" } else { "failed" })
            .bind(time::now())
            .bind(stats)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Recorded runs, newest first.
    pub async fn gc_runs(&self, limit: i64) -> StoreResult<Vec<GcRun>> {
        Ok(sqlx::query_as(
            "SELECT id, status, started_at, heartbeat_at, finished_at, stats FROM gc_runs ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Run `id`, if recorded.
    pub async fn gc_run(&self, id: i64) -> StoreResult<Option<GcRun>> {
        Ok(sqlx::query_as(
            "SELECT id, status, started_at, heartbeat_at, finished_at, stats FROM gc_runs WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn gc_heartbeat(&self, id: i64) -> StoreResult<()> {
        sqlx::query("UPDATE gc_runs SET heartbeat_at = $2 WHERE id = $1")
            .bind(id)
            .bind(time::now())
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// Runs one collection, recorded in `gc_runs`; `Conflict` if one is running.
pub async fn collect_garbage(
    store: &Store,
    blobs: &BlobStore,
    options: GcOptions,
) -> StoreResult<GcStats> {
    let run = store.start_gc_run().await?;
    run_garbage_collection(store, blobs, options, run).await
}

/// Runs the collection of run `run` (from [`Store::start_gc_run`]) and records its end.
pub async fn run_garbage_collection(
    store: &Store,
    blobs: &BlobStore,
    options: GcOptions,
    run: i64,
) -> StoreResult<GcStats> {
    let result = sweep(store, blobs, options, run).await;
    let stats = match &result {
        Ok(s) => json!({
            "uploads": s.uploads, "links": s.links, "blobs": s.blobs,
            "bytes": s.bytes, "stray_files": s.stray_files,
        })
        .to_string(),
        Err(err) => json!({ "error": err.to_string() }).to_string(),
    };
    store.finish_gc_run(run, result.is_ok(), &stats).await?;
    result
}

async fn sweep(
    store: &Store,
    blobs: &BlobStore,
    options: GcOptions,
    run: i64,
) -> StoreResult<GcStats> {
    let mut stats = GcStats::default();
    let pool = &store.pool;

    // A. Upload sessions idle past the expiry, and staging files without a session.
    let upload_cutoff = time::now_plus_seconds(-seconds(options.upload_expiry));
    for id in store.registry().stale_uploads(&upload_cutoff).await? {
        let done = sqlx::query("DELETE FROM uploads WHERE id = $1 AND updated_at < $2")
            .bind(&id)
            .bind(&upload_cutoff)
            .execute(pool)
            .await?;
        if done.rows_affected() == 1 {
            blobs.discard_upload(&id).await;
            stats.uploads += 1;
        }
    }
    let old = SystemTime::now()
        .checked_sub(options.upload_expiry)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    for (id, modified) in blobs.staged_uploads().await? {
        if modified < old && store.registry().upload(&id).await?.is_none() {
            blobs.discard_upload(&id).await;
            stats.stray_files += 1;
        }
    }
    store.gc_heartbeat(run).await?;

    // B. Links no artifact of the project uses and no push renewed within the grace.
    let cutoff = time::now_plus_seconds(-seconds(options.grace));
    let stale: Vec<(i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT pb.project_id, pb.blob_id, pb.version, b.size FROM project_blobs pb JOIN blobs b ON b.id = pb.blob_id \
         WHERE (pb.pending_since IS NULL OR pb.pending_since < $1) AND NOT EXISTS (\
         SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
         WHERE a.project_id = pb.project_id AND ab.blob_id = pb.blob_id)",
    )
    .bind(&cutoff)
    .fetch_all(pool)
    .await?;
    for (project_id, blob_id, version, size) in stale {
        let mut tx = store.begin_write().await?;
        let done = sqlx::query(
            "DELETE FROM project_blobs WHERE project_id = $1 AND blob_id = $2 AND version = $3 \
             AND (pending_since IS NULL OR pending_since < $4) AND NOT EXISTS (\
             SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
             WHERE a.project_id = $1 AND ab.blob_id = $2)",
        )
        .bind(project_id)
        .bind(blob_id)
        .bind(version)
        .bind(&cutoff)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 1 {
            crate::repo::registry::release_quota(&mut *tx, project_id, size).await?;
        }
        tx.commit().await?;
        stats.links += done.rows_affected();
    }
    store.gc_heartbeat(run).await?;

    // C. Blobs nothing links or uses: claim (CAS on version), remove the bytes, drop the row.
    let orphans: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT b.id, b.version FROM blobs b WHERE b.deleting = 0 \
         AND NOT EXISTS (SELECT 1 FROM project_blobs pb WHERE pb.blob_id = b.id) \
         AND NOT EXISTS (SELECT 1 FROM artifact_blobs ab WHERE ab.blob_id = b.id)",
    )
    .fetch_all(pool)
    .await?;
    for (id, version) in orphans {
        sqlx::query(
            "UPDATE blobs SET deleting = 1 WHERE id = $1 AND version = $2 AND deleting = 0 \
             AND NOT EXISTS (SELECT 1 FROM project_blobs pb WHERE pb.blob_id = $1) \
             AND NOT EXISTS (SELECT 1 FROM artifact_blobs ab WHERE ab.blob_id = $1)",
        )
        .bind(id)
        .bind(version)
        .execute(pool)
        .await?;
    }
    // Every claimed row, including those a crashed run left behind.
    let claimed: Vec<(i64, String, i64)> =
        sqlx::query_as("SELECT id, digest, size FROM blobs WHERE deleting = 1")
            .fetch_all(pool)
            .await?;
    for (id, digest, size) in claimed {
        if let Ok(digest) = Digest::parse(&digest) {
            blobs.remove(&digest).await?;
        }
        let done = sqlx::query("DELETE FROM blobs WHERE id = $1 AND deleting = 1")
            .bind(id)
            .execute(pool)
            .await?;
        if done.rows_affected() == 1 {
            stats.blobs += 1;
            stats.bytes += size;
        }
    }
    store.gc_heartbeat(run).await?;

    // D. Blob files without a row (a commit that failed after its rename), once old.
    let files = blobs.committed_files().await?;
    for chunk in files.chunks(500) {
        let candidates: Vec<&(Digest, SystemTime)> =
            chunk.iter().filter(|(_, m)| *m < old).collect();
        if candidates.is_empty() {
            continue;
        }
        let placeholders = (1..=candidates.len())
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("SELECT digest FROM blobs WHERE digest IN ({placeholders})");
        let mut query = sqlx::query_as::<_, (String,)>(sqlx::AssertSqlSafe(sql));
        for (digest, _) in &candidates {
            query = query.bind(digest.as_str().to_string());
        }
        let known: HashSet<String> = query
            .fetch_all(pool)
            .await?
            .into_iter()
            .map(|(d,)| d)
            .collect();
        for (digest, _) in candidates {
            if !known.contains(digest.as_str()) {
                blobs.remove(digest).await?;
                stats.stray_files += 1;
            }
        }
    }
    Ok(stats)
}
