//! Online garbage collection (data-model §8): expired upload sessions, stale
//! project links, then unreferenced blobs, each removal a compare-and-set on
//! the row's `version` so a concurrent push always wins.
//!
//! A blob's bytes are removed only after its row is claimed (`deleting = 1`,
//! committed), and the row is deleted only after the bytes are gone; writers
//! never link a claimed row (see `Registry::install_blob`). A file without a
//! row is claimed the same way, by inserting a claimed row for it. One
//! collector runs at a time, holding [`GcLock`]; a collector that dies
//! releases it with its process, and whoever takes it next finishes the
//! claims it left.

use berth_domain::oci::Digest;
use berth_domain::time;
use futures_util::StreamExt;
use serde_json::json;

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use crate::Store;
use crate::blobs::BlobStore;
use crate::error::StoreResult;
use crate::gc_lock::GcLock;

/// How a run is tuned.
#[derive(Debug, Clone)]
pub struct GcOptions {
    /// How long a pushed but unused blob link stays (it waits for its manifest).
    pub grace: Duration,
    /// How long an idle upload session stays.
    pub upload_expiry: Duration,
    /// Deletes untagged artifacts first (Harbor's `delete_untagged`): those
    /// no index refers to and that are no accessory, as tag retention weighs
    /// them, each with its accessories.
    pub delete_untagged: bool,
    /// How many blobs are removed at once (Harbor's `workers`, 1-5).
    pub workers: usize,
    /// Who deletes the untagged artifacts, in their events.
    pub operator: String,
}

/// The default grace of pushed, unused blob links.
pub const DEFAULT_GRACE_SECS: u64 = 24 * 3600;
/// The shortest grace and upload expiry that are safe while clients push: a
/// client may take this long between uploading a blob (or finding it with
/// HEAD) and naming it in a manifest, or between two chunks of an upload.
/// Shorter values work (tests, emptying a registry nobody pushes to), but a
/// push in flight may then fail and have to be repeated; nothing
/// acknowledged after the run started is ever lost.
pub const SAFE_MIN_SECS: u64 = 3600;
/// How often a pusher's HEAD renews a pending link at most; far below any safe grace.
pub const RENEW_THROTTLE_SECS: i64 = 60;
/// Upload directories without a session are left alone for at least this long
/// (a monolithic upload has no session while it streams).
const ORPHAN_UPLOAD_DIR_SECS: u64 = SAFE_MIN_SECS;

impl GcOptions {
    /// What makes these options unsafe while clients push, if anything.
    pub fn unsafe_reason(&self) -> Option<String> {
        let grace = self.grace.as_secs();
        let expiry = self.upload_expiry.as_secs();
        match (grace < SAFE_MIN_SECS, expiry < SAFE_MIN_SECS) {
            (false, false) => None,
            (true, _) => Some(format!(
                "a grace of {grace} s is below {SAFE_MIN_SECS} s: blobs pushed but not yet named by a manifest may be collected, and such pushes fail"
            )),
            (false, true) => Some(format!(
                "an upload expiry of {expiry} s is below {SAFE_MIN_SECS} s: an upload idle between two chunks may be ended, and such pushes fail"
            )),
        }
    }
}

impl Default for GcOptions {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(DEFAULT_GRACE_SECS),
            upload_expiry: Duration::from_secs(24 * 3600),
            delete_untagged: false,
            workers: 1,
            operator: String::new(),
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
    /// Untagged artifacts deleted (or, in a dry run, that would be).
    pub untagged: u64,
    /// Blobs deleted.
    pub blobs: u64,
    /// Of them, manifests (and indexes).
    pub manifests: u64,
    /// Bytes freed.
    pub bytes: i64,
    /// Stray files removed from the blob directory.
    pub stray_files: u64,
    /// Stopped on request before the end.
    pub stopped: bool,
}

/// A recorded run.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct GcRun {
    /// Id.
    pub id: i64,
    /// `running`, `done` (its stats say whether it was stopped) or `failed`.
    pub status: String,
    /// Start, store format.
    pub started_at: String,
    /// Last sign of life, store format.
    pub heartbeat_at: String,
    /// End, store format.
    pub finished_at: Option<String>,
    /// Stats JSON.
    pub stats: String,
    /// `MANUAL` or `SCHEDULE`.
    #[sqlx(rename = "job_trigger")]
    pub trigger: String,
}

fn seconds(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2)
}

/// A run in progress: its record and the lock that makes it the only one.
#[derive(Debug)]
pub struct RunningGc {
    /// The `gc_runs` id.
    pub id: i64,
    lock: GcLock,
}

impl Store {
    /// Takes the collection lock and records the start of a run; `Conflict`
    /// while another collector holds the lock. A run still recorded as
    /// running is one whose collector died: it is recorded as failed.
    pub async fn start_gc_run(&self) -> StoreResult<RunningGc> {
        self.start_gc_run_as("MANUAL").await
    }

    /// [`Store::start_gc_run`] for a run started by `trigger` (`MANUAL` or
    /// `SCHEDULE`), which its record keeps.
    pub async fn start_gc_run_as(&self, trigger: &str) -> StoreResult<RunningGc> {
        // The lock may also be held for a moment by a run that has just
        // recorded its end, or by a push checking for a dead collector: only a
        // run recorded as running makes this a conflict at once.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let lock = loop {
            if let Some(lock) = self.try_gc_lock().await? {
                break lock;
            }
            let running: Option<(i64,)> =
                sqlx::query_as("SELECT id FROM gc_runs WHERE status = 'running' LIMIT 1")
                    .fetch_optional(&self.pool)
                    .await?;
            if running.is_some() || std::time::Instant::now() > deadline {
                return Err(berth_domain::DomainError::Conflict(
                    "a garbage collection is already running".into(),
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let now = time::now();
        self.fail_dead_runs(&now).await?;
        let row: (i64,) = sqlx::query_as(
            "INSERT INTO gc_runs (status, started_at, heartbeat_at, stats, job_trigger) \
             VALUES ('running', $1, $1, '{}', $2) RETURNING id",
        )
        .bind(&now)
        .bind(trigger)
        .fetch_one(&self.pool)
        .await?;
        Ok(RunningGc { id: row.0, lock })
    }

    /// Records runs left `running` by a dead collector as failed; the caller holds the lock.
    async fn fail_dead_runs(&self, now: &str) -> StoreResult<()> {
        sqlx::query(
            "UPDATE gc_runs SET status = 'failed', finished_at = $1, \
             stats = '{\"error\":\"the collector stopped before it finished\"}' WHERE status = 'running'",
        )
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Finishes what a dead collector left, if no collector is alive: its run
    /// is recorded as failed and the blobs it claimed are removed. `false`
    /// when a live collector holds the lock. Called at start and by writers
    /// that find a claimed blob.
    pub async fn recover_gc(&self, blobs: &BlobStore) -> StoreResult<bool> {
        let Some(lock) = self.try_gc_lock().await? else {
            return Ok(false);
        };
        let result = async {
            self.fail_dead_runs(&time::now()).await?;
            remove_claimed(self, blobs).await
        }
        .await;
        lock.release().await;
        result.map(|_| true)
    }

    /// Records the end of run `id`: `status` is `done` or `failed`.
    pub async fn finish_gc_run(&self, id: i64, status: &str, stats: &str) -> StoreResult<()> {
        sqlx::query("UPDATE gc_runs SET status = $2, finished_at = $3, heartbeat_at = $3, stats = $4 WHERE id = $1")
            .bind(id)
            .bind(status)
            .bind(time::now())
            .bind(stats)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Recorded runs, newest first.
    pub async fn gc_runs(&self, limit: i64) -> StoreResult<Vec<GcRun>> {
        Ok(sqlx::query_as(
            "SELECT id, status, started_at, heartbeat_at, finished_at, stats, job_trigger FROM gc_runs \
             ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Run `id`, if recorded.
    pub async fn gc_run(&self, id: i64) -> StoreResult<Option<GcRun>> {
        Ok(sqlx::query_as(
            "SELECT id, status, started_at, heartbeat_at, finished_at, stats, job_trigger FROM gc_runs WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Asks run `id` to stop at its next step; `None` when there is no such
    /// run, `Some(false)` when it is not running (nothing changes).
    pub async fn stop_gc_run(&self, id: i64) -> StoreResult<Option<bool>> {
        let done = sqlx::query(
            "UPDATE gc_runs SET stop_requested = 1 WHERE id = $1 AND status = 'running'",
        )
        .bind(id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() > 0 {
            return Ok(Some(true));
        }
        Ok(self.gc_run(id).await?.map(|_| false))
    }

    /// Records that run `id` is making progress (shown as its update time);
    /// `false` when it was asked to stop.
    async fn gc_heartbeat(&self, id: i64) -> StoreResult<bool> {
        let row: Option<(i64,)> = sqlx::query_as(
            "UPDATE gc_runs SET heartbeat_at = $2 WHERE id = $1 RETURNING stop_requested",
        )
        .bind(id)
        .bind(time::now())
        .fetch_optional(&self.pool)
        .await?;
        Ok(!matches!(row, Some((1,))))
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

/// Runs the collection of `run` (from [`Store::start_gc_run`]), records its
/// end and releases the lock.
pub async fn run_garbage_collection(
    store: &Store,
    blobs: &BlobStore,
    options: GcOptions,
    run: RunningGc,
) -> StoreResult<GcStats> {
    let result = sweep(store, blobs, &options, run.id).await;
    let (status, stats) = match &result {
        Ok(s) => (
            "done",
            json!({
                "uploads": s.uploads, "links": s.links, "blobs": s.blobs,
                "bytes": s.bytes, "stray_files": s.stray_files, "stopped": s.stopped,
                "untagged": s.untagged, "manifests": s.manifests,
                "delete_untagged": options.delete_untagged, "workers": options.workers,
            })
            .to_string(),
        ),
        Err(err) => (
            "failed",
            json!({
                "error": err.to_string(),
                "delete_untagged": options.delete_untagged, "workers": options.workers,
            })
            .to_string(),
        ),
    };
    let finished = store.finish_gc_run(run.id, status, &stats).await;
    run.lock.release().await;
    finished?;
    result
}

/// A dry run of `run` (from [`Store::start_gc_run`]): counts what a
/// collection with `options` would remove now, changes nothing else,
/// records the counts (with `"dry_run": true`) and releases the lock.
pub async fn estimate_garbage(
    store: &Store,
    blobs: &BlobStore,
    options: GcOptions,
    run: RunningGc,
) -> StoreResult<GcStats> {
    let result = estimate(store, blobs, &options).await;
    let (status, stats) = match &result {
        Ok(s) => (
            "done",
            json!({
                "uploads": s.uploads, "links": s.links, "blobs": s.blobs,
                "bytes": s.bytes, "stray_files": s.stray_files, "dry_run": true,
                "untagged": s.untagged, "manifests": s.manifests,
                "delete_untagged": options.delete_untagged, "workers": options.workers,
            })
            .to_string(),
        ),
        Err(err) => (
            "failed",
            json!({
                "error": err.to_string(), "dry_run": true,
                "delete_untagged": options.delete_untagged, "workers": options.workers,
            })
            .to_string(),
        ),
    };
    let finished = store.finish_gc_run(run.id, status, &stats).await;
    run.lock.release().await;
    finished?;
    result
}

/// What [`sweep`] would remove now, counted with reads only.
async fn estimate(store: &Store, blobs: &BlobStore, options: &GcOptions) -> StoreResult<GcStats> {
    let pool = &store.pool;
    let link_cutoff = time::now_plus_seconds(-seconds(options.grace));
    let upload_cutoff = time::now_plus_seconds(-seconds(options.upload_expiry));
    let uploads = store.registry().stale_uploads(&upload_cutoff).await?.len();
    let (links,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM project_blobs pb \
         WHERE (pb.pending_since IS NULL OR pb.pending_since < $1) AND NOT EXISTS (\
         SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
         WHERE a.project_id = pb.project_id AND ab.blob_id = pb.blob_id)",
    )
    .bind(&link_cutoff)
    .fetch_one(pool)
    .await?;
    // Blobs no artifact uses and no link keeps once the stale links are gone
    // (a link pending within the grace keeps its blob), and those claimed.
    let (blob_count, bytes, manifests): (i64, i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), CAST(COALESCE(SUM(b.size), 0) AS BIGINT), \
         CAST(COALESCE(SUM(CASE WHEN b.media_type LIKE '%manifest%' OR b.media_type LIKE '%image.index%' \
         THEN 1 ELSE 0 END), 0) AS BIGINT) FROM blobs b WHERE b.deleting = 1 OR (\
         NOT EXISTS (SELECT 1 FROM artifact_blobs ab WHERE ab.blob_id = b.id) AND NOT EXISTS (\
         SELECT 1 FROM project_blobs pb WHERE pb.blob_id = b.id \
         AND pb.pending_since IS NOT NULL AND pb.pending_since >= $1))",
    )
    .bind(&link_cutoff)
    .fetch_one(pool)
    .await?;
    let (_, stray) = stray_files(store, blobs).await?;
    // The untagged artifacts a run would delete; their blobs are not counted
    // above (they are in use until the artifacts go).
    let untagged = if options.delete_untagged {
        untagged_artifacts(store)
            .await?
            .iter()
            .map(|(_, ids)| ids.len() as u64)
            .sum()
    } else {
        0
    };
    let whole = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(GcStats {
        uploads: u64::try_from(uploads).unwrap_or(0),
        links: whole(links),
        untagged,
        blobs: whole(blob_count),
        manifests: whole(manifests),
        bytes,
        stray_files: u64::try_from(stray.len()).unwrap_or(0),
        stopped: false,
    })
}

/// Claims the blob `orphan` (id, digest, size, version, media type) that
/// nothing linked or used when it was listed, if that still holds, and
/// removes it: its size and whether it is a manifest, `None` when it was
/// not removed.
async fn remove_orphan(
    store: &Store,
    blobs: &BlobStore,
    orphan: &(i64, String, i64, i64, String),
) -> StoreResult<Option<(i64, bool)>> {
    let (id, digest, size, version, media_type) = orphan;
    let claimed = sqlx::query(
        "UPDATE blobs SET deleting = 1 WHERE id = $1 AND version = $2 AND deleting = 0 \
         AND NOT EXISTS (SELECT 1 FROM project_blobs pb WHERE pb.blob_id = $1) \
         AND NOT EXISTS (SELECT 1 FROM artifact_blobs ab WHERE ab.blob_id = $1)",
    )
    .bind(id)
    .bind(version)
    .execute(&store.pool)
    .await?;
    Ok(
        (claimed.rows_affected() == 1 && remove_claimed_blob(store, blobs, *id, digest).await?)
            .then_some((*size, is_manifest(media_type))),
    )
}

/// Whether a blob of `media_type` is a manifest or an index (what Harbor's
/// collection counts as manifests).
fn is_manifest(media_type: &str) -> bool {
    media_type.contains("manifest") || media_type.contains("image.index")
}

/// Removes the bytes, then the rows, of every claimed blob; returns (count, bytes).
async fn remove_claimed(store: &Store, blobs: &BlobStore) -> StoreResult<(u64, i64)> {
    let claimed: Vec<(i64, String, i64)> =
        sqlx::query_as("SELECT id, digest, size FROM blobs WHERE deleting = 1")
            .fetch_all(&store.pool)
            .await?;
    let mut removed = (0, 0);
    for (id, digest, size) in claimed {
        if remove_claimed_blob(store, blobs, id, &digest).await? {
            removed.0 += 1;
            removed.1 += size;
        }
    }
    Ok(removed)
}

/// Removes claimed blob `id`: its bytes first, then its row.
async fn remove_claimed_blob(
    store: &Store,
    blobs: &BlobStore,
    id: i64,
    digest: &str,
) -> StoreResult<bool> {
    if let Ok(digest) = Digest::parse(digest) {
        blobs.remove(&digest).await?;
    }
    let done = sqlx::query("DELETE FROM blobs WHERE id = $1 AND deleting = 1")
        .bind(id)
        .execute(&store.pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The untagged artifacts `delete_untagged` deletes, by repository: as tag
/// retention weighs artifacts (no accessory, no child an index refers to),
/// those without a tag. One query whatever the number of repositories.
async fn untagged_artifacts(store: &Store) -> StoreResult<Vec<(String, Vec<i64>)>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT r.name, a.id FROM artifacts a JOIN repositories r ON r.id = a.repository_id \
         WHERE a.accessory_type IS NULL \
         AND NOT EXISTS (SELECT 1 FROM tags t WHERE t.artifact_id = a.id) \
         AND NOT EXISTS (SELECT 1 FROM artifact_references ar WHERE ar.child_id = a.id) \
         ORDER BY r.name, a.id",
    )
    .fetch_all(&store.pool)
    .await?;
    let mut found: Vec<(String, Vec<i64>)> = Vec::new();
    for (repository, id) in rows {
        match found.last_mut() {
            Some((last, ids)) if *last == repository => ids.push(id),
            _ => found.push((repository, vec![id])),
        }
    }
    Ok(found)
}

/// How many untagged artifacts one transaction deletes.
const UNTAGGED_BATCH: usize = 100;

async fn sweep(
    store: &Store,
    blobs: &BlobStore,
    options: &GcOptions,
    run: i64,
) -> StoreResult<GcStats> {
    let mut stats = GcStats::default();
    let pool = &store.pool;
    // Every cutoff is relative to the start: what is pushed after it is never collected.
    let started = SystemTime::now();
    let link_cutoff = time::now_plus_seconds(-seconds(options.grace));
    let upload_cutoff = time::now_plus_seconds(-seconds(options.upload_expiry));

    // Untagged artifacts first, as tag retention deletes them (each with its
    // accessories; one an index refers to, or tagged since, stays), so that
    // their blobs are collected below.
    if options.delete_untagged {
        let looked_at = time::now();
        for (repository, ids) in untagged_artifacts(store).await? {
            for batch in ids.chunks(UNTAGGED_BATCH) {
                let retired = store
                    .retentions()
                    .retire(&repository, batch, &looked_at, &options.operator)
                    .await?;
                stats.untagged += retired
                    .iter()
                    .filter(|r| **r == crate::repo::retention::Retired::Deleted)
                    .count() as u64;
            }
            if !store.gc_heartbeat(run).await? {
                stats.stopped = true;
                return Ok(stats);
            }
        }
    }

    // Claims a dead collector left.
    let (count, bytes) = remove_claimed(store, blobs).await?;
    stats.blobs += count;
    stats.bytes += bytes;

    // A. Upload sessions idle past the expiry, and directories without a session.
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
    let orphan_age = options
        .upload_expiry
        .max(Duration::from_secs(ORPHAN_UPLOAD_DIR_SECS));
    let old = started
        .checked_sub(orphan_age)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let idle: Vec<String> = blobs
        .upload_dirs()
        .await?
        .into_iter()
        .filter(|(_, modified)| *modified < old)
        .map(|(name, _)| name)
        .collect();
    let live: HashSet<String> = store
        .registry()
        .existing_uploads(&idle)
        .await?
        .into_iter()
        .collect();
    for name in idle.iter().filter(|n| !live.contains(*n)) {
        blobs.discard_upload_entry(name).await;
        stats.stray_files += 1;
    }
    if !store.gc_heartbeat(run).await? {
        stats.stopped = true;
        return Ok(stats);
    }

    // B. Links no artifact of the project uses and no push renewed within the grace.
    let stale: Vec<(i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT pb.project_id, pb.blob_id, pb.version, b.size FROM project_blobs pb JOIN blobs b ON b.id = pb.blob_id \
         WHERE (pb.pending_since IS NULL OR pb.pending_since < $1) AND NOT EXISTS (\
         SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
         WHERE a.project_id = pb.project_id AND ab.blob_id = pb.blob_id)",
    )
    .bind(&link_cutoff)
    .fetch_all(pool)
    .await?;
    // A link still charged (a pending one past its grace) is released; one a
    // delete already uncharged is not released again. The charge is read as
    // the delete removes the row, after any concurrent uncharge committed.
    for (project_id, blob_id, version, size) in stale {
        let mut tx = store.begin_write().await?;
        let done: Option<(i64,)> = sqlx::query_as(
            "DELETE FROM project_blobs WHERE project_id = $1 AND blob_id = $2 AND version = $3 \
             AND (pending_since IS NULL OR pending_since < $4) AND NOT EXISTS (\
             SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
             WHERE a.project_id = $1 AND ab.blob_id = $2) RETURNING charged",
        )
        .bind(project_id)
        .bind(blob_id)
        .bind(version)
        .bind(&link_cutoff)
        .fetch_optional(&mut *tx)
        .await?;
        if done == Some((1,)) {
            crate::repo::registry::release_quota(&mut *tx, project_id, size).await?;
        }
        tx.commit().await?;
        stats.links += u64::from(done.is_some());
    }
    if !store.gc_heartbeat(run).await? {
        stats.stopped = true;
        return Ok(stats);
    }

    // C. Blobs nothing links or uses: claim each (CAS on its version), remove
    // the bytes, drop the row; `workers` at a time, so a writer waiting for a
    // claimed digest waits for a few file removals at most.
    let orphans: Vec<(i64, String, i64, i64, String)> = sqlx::query_as(
        "SELECT b.id, b.digest, b.size, b.version, b.media_type FROM blobs b WHERE b.deleting = 0 \
         AND NOT EXISTS (SELECT 1 FROM project_blobs pb WHERE pb.blob_id = b.id) \
         AND NOT EXISTS (SELECT 1 FROM artifact_blobs ab WHERE ab.blob_id = b.id)",
    )
    .fetch_all(pool)
    .await?;
    for chunk in orphans.chunks(100) {
        if !store.gc_heartbeat(run).await? {
            stats.stopped = true;
            return Ok(stats);
        }
        let removals: Vec<_> = chunk
            .iter()
            .map(|orphan| remove_orphan(store, blobs, orphan))
            .collect();
        let removed: Vec<StoreResult<Option<(i64, bool)>>> = futures_util::stream::iter(removals)
            .buffer_unordered(options.workers.clamp(1, 5))
            .collect()
            .await;
        for outcome in removed {
            if let Some((size, manifest)) = outcome? {
                stats.blobs += 1;
                stats.bytes += size;
                stats.manifests += u64::from(manifest);
            }
        }
    }
    if !store.gc_heartbeat(run).await? {
        stats.stopped = true;
        return Ok(stats);
    }

    // D. Blob files without a row (a commit that failed after placing its
    // file): each is claimed by inserting a claimed row for it, so a push of
    // the same digest waits, and then removed like any claimed blob.
    let (_, stray) = stray_files(store, blobs).await?;
    for digest in &stray {
        if remove_stray_file(store, blobs, digest).await? {
            stats.stray_files += 1;
        }
    }
    Ok(stats)
}

/// How many blob files there are, and those of them without a blob row (the
/// rows are read after the files are listed, so a file that a push placed and
/// then recorded is not among them).
pub(crate) async fn stray_files(
    store: &Store,
    blobs: &BlobStore,
) -> StoreResult<(usize, Vec<Digest>)> {
    let files = blobs.committed_files().await?;
    let known: HashSet<String> = store
        .registry()
        .known_digests(&files)
        .await?
        .into_iter()
        .collect();
    let count = files.len();
    let stray = files
        .into_iter()
        .filter(|d| !known.contains(d.as_str()))
        .collect();
    Ok((count, stray))
}

/// Removes the file of `digest`, which has no blob row, by claiming it with a
/// claimed row first (a push of the digest then waits); `false` when a row
/// appeared meanwhile (a push took it).
pub(crate) async fn remove_stray_file(
    store: &Store,
    blobs: &BlobStore,
    digest: &Digest,
) -> StoreResult<bool> {
    let now = time::now();
    let claimed: Option<(i64,)> = sqlx::query_as(
        "INSERT INTO blobs (digest, size, media_type, version, deleting, created_at, updated_at) \
         VALUES ($1, 0, '', 0, 1, $2, $2) ON CONFLICT (digest) DO NOTHING RETURNING id",
    )
    .bind(digest.as_str())
    .bind(&now)
    .fetch_optional(&store.pool)
    .await?;
    match claimed {
        Some((id,)) => remove_claimed_blob(store, blobs, id, digest.as_str()).await,
        None => Ok(false),
    }
}
