//! Keeping SQLite's write-ahead log short.
//!
//! SQLite checkpoints the log by itself after a commit that leaves it over
//! 1,000 pages, but that checkpoint is PASSIVE: it copies back only the frames
//! no open read transaction still needs, and the log starts over from its
//! beginning only when no reader uses it at all. Under steady concurrent load
//! some connection always holds a snapshot, so the log was never reset: 20 s of
//! 64 connections writing articles left a 2.4 GB `-wal` file, and every read
//! after that searched its index (1.6 s for the first page of articles).
//!
//! So each SQLite store runs a task that looks at the size of the log and,
//! once it is over [`WAL_LIMIT`], checkpoints it on a connection of its own.
//!
//! The log is measured through SQLite only, never by opening the database's
//! own files: on POSIX, closing any descriptor of a file drops every lock the
//! process holds on it, SQLite's included. A `berth gc` beside the server then
//! found nobody holding the wal-index, rebuilt it, and the server's mapping of
//! it was cut under it (SIGBUS in a commit; SQLite's "How To Corrupt An SQLite
//! Database File", 2.2). The size of the `-wal` file (a `stat` of its path,
//! which opens nothing) bounds the log from above: while it is under the limit
//! so is the log. Past it (the file keeps its blocks when the log starts over)
//! a PASSIVE checkpoint measures the log: it answers with the log's frames,
//! and copying back what it can is what the task would do anyway. PASSIVE
//! passes copy the log back while writers go on, until a pass finds little
//! written during the one before. Then it is left to the writers to start the
//! log over: SQLite does so at a write transaction that begins on a wholly
//! copied log with no reader on it. Under continuous writes none does (each
//! finds the frames the one before it wrote), so the next writer
//! ([`crate::Store::begin_write`]) first copies those few frames back itself,
//! holding the writer connection (1.4 ms in the median during a retention
//! run), and its transaction starts the log over. Nothing holds writers off longer: under tag retention's deletes
//! during pushes, SQLite's own checkpoints (past twice the limit, see below)
//! had held one push in a hundred for 20-26 ms.
//!
//! When the writers have not started it over a second later (a reader of an
//! older snapshot was still on it), or it is past [`HARD_LIMIT`], `PRAGMA
//! wal_checkpoint(TRUNCATE)` does: it holds off new writers, waits for the
//! readers of older snapshots to finish (new readers read the database file),
//! copies what is left and truncates the file to nothing: 21 ms in the median,
//! 67 ms at most, under 64 connections writing articles (mostly syncing the 16
//! MiB of log, then freeing it). While the log is being written it is a
//! RESTART instead, which leaves the file's blocks to the writers. Its waits
//! are bounded by a short busy timeout; a checkpoint that gives up is retried
//! later, less often each time it gives up again. Neither is tried while a
//! reader keeps the PASSIVE passes from copying the log (a long listing, as
//! tag retention's first): they would hold writers off for the busy timeout
//! waiting for it.
//!
//! The file keeps its blocks when the log starts over, up to [`HARD_LIMIT`]
//! (the connections' `journal_size_limit`): cutting it back to [`WAL_LIMIT`]
//! at each start held that commit, and the writers waiting for it, 5 ms
//! longer.
//!
//! SQLite's own checkpoints would get in the way: a checkpoint that finds
//! another one running gives up at once, without waiting, and once the log is
//! past `wal_autocheckpoint` pages every commit runs one (and syncs the
//! database file). So connections checkpoint by themselves only past
//! [`AUTOCHECKPOINT_PAGES`], twice the limit: a fallback for when this task
//! cannot keep up.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, Connection, Executor};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::StoreResult;

/// The size of the log past which it is checkpointed and started over.
pub(crate) const WAL_LIMIT: u64 = 16 << 20;
/// The connections' `wal_autocheckpoint`: twice [`WAL_LIMIT`] in pages of
/// 4 KiB (SQLite's default page size).
pub(crate) const AUTOCHECKPOINT_PAGES: u64 = 2 * WAL_LIMIT / 4096;
/// How often the size of the log is looked at while it grows: 64 connections
/// writing articles add about 130 MB a second.
const CHECK_GROWING: Duration = Duration::from_millis(25);
/// How often it is looked at while it stays the same size.
const CHECK_IDLE: Duration = Duration::from_millis(100);
/// The longest pause between attempts after checkpoints that gave up.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How long a checkpoint waits for the writer lock, and then for readers of
/// older snapshots, before it gives up (milliseconds). Writers wait while it
/// holds the lock.
const BUSY_TIMEOUT_MS: u32 = 250;
/// How long writers are given to start a copied log over before a TRUNCATE
/// checkpoint does it ([`checkpoint`]).
const WRITERS_TIME: Duration = Duration::from_secs(1);
/// The size past which a log the writers have not started over is truncated
/// at once. Also the connections' `journal_size_limit`: the size the file is
/// cut back to when the log starts over.
pub(crate) const HARD_LIMIT: u64 = 4 * WAL_LIMIT;
/// At most so many PASSIVE passes in one checkpoint ([`checkpoint`]).
const PASSIVE_ROUNDS: usize = 5;
/// Frames (pages) left uncopied that a TRUNCATE checkpoint copies quickly.
const FEW_FRAMES: i64 = 256;
/// Frames written during one PASSIVE pass (the writers' pace) few enough to
/// stop passing: the writer that starts the log over copies back what was
/// written since while it holds the writer connection
/// ([`crate::Store::begin_write`]), syncing the database file. On the
/// benchmarks' machine an fsync after random 4 KiB writes took 3 ms for 50
/// pages and 8-14 ms for 350, what pushes wrote during one pass over 16 MiB
/// (that copy took 16 ms; `docs/benchmarks.md`, retention, fifth pass).
const SETTLED_FRAMES: i64 = 64;

/// The task that keeps one SQLite database's log short; it ends when this is
/// stopped or dropped.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
    log: Arc<LogState>,
}

/// Where the log stands, as the checkpointer last left it: written by its
/// task, read by writers ([`Checkpointer::wait_for_copy`],
/// [`Checkpointer::take_restart`]).
#[derive(Debug, Default)]
struct LogState(AtomicU8);

impl LogState {
    /// Under its limit, or a checkpoint gave up on it.
    const SHORT: u8 = 0;
    /// A checkpoint is copying it back.
    const COPYING: u8 = 1;
    /// Copied back; its start over is left to the next writer.
    const COPIED: u8 = 2;

    fn set(&self, state: u8) {
        self.0.store(state, Ordering::Release);
    }

    fn is(&self, state: u8) -> bool {
        self.0.load(Ordering::Acquire) == state
    }
}

/// How long a bulk writer waits at most for the log to be copied back
/// ([`Checkpointer::wait_for_copy`]).
const MOST_YIELDED: Duration = Duration::from_millis(250);
/// How often a waiting bulk writer looks again.
const YIELD_STEP: Duration = Duration::from_millis(2);

impl Checkpointer {
    /// Starts watching the log of the SQLite database that `options` open;
    /// `None` for a database without a file (in memory).
    pub(crate) async fn start(options: &AnyConnectOptions) -> StoreResult<Option<Self>> {
        let mut conn = AnyConnection::connect_with(options).await?;
        let file: String =
            sqlx::query_scalar("SELECT file FROM pragma_database_list WHERE name = 'main'")
                .fetch_one(&mut conn)
                .await?;
        if file.is_empty() {
            conn.close().await?;
            return Ok(None);
        }
        conn.execute(sqlx::AssertSqlSafe(format!(
            "PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}"
        )))
        .await?;
        let page: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(&mut conn)
            .await?;
        let (stop, stopped) = watch::channel(false);
        let log = Arc::new(LogState::default());
        let task = tokio::spawn(keep_short(
            conn,
            PathBuf::from(format!("{file}-wal")),
            u64::try_from(page).unwrap_or(4096),
            stopped,
            log.clone(),
        ));
        Ok(Some(Self {
            stop,
            task: Mutex::new(Some(task)),
            log,
        }))
    }

    /// Waits (at most [`MOST_YIELDED`]) while the log is past its limit and
    /// not yet copied back. A bulk writer (tag retention's deletes) calls this
    /// between its transactions: while it pauses, the PASSIVE passes catch up
    /// with the log (other writers add little). Writing on, it outran them:
    /// the log grew past twice the limit, where commits checkpoint it
    /// themselves, syncing the database file (25-40 ms that pushes waited
    /// for, once every 16 MiB).
    pub(crate) async fn wait_for_copy(&self) {
        let started = std::time::Instant::now();
        while self.log.is(LogState::COPYING) && started.elapsed() < MOST_YIELDED {
            tokio::time::sleep(YIELD_STEP).await;
        }
    }

    /// Whether the log is past its limit, was copied back, and waits for a
    /// writer to start it over: one whose transaction begins while every
    /// frame of the log is copied ([`crate::Store::begin_write`]). Once per
    /// copy: the caller makes the one attempt.
    pub(crate) fn take_restart(&self) -> bool {
        self.log
            .0
            .compare_exchange(
                LogState::COPIED,
                LogState::SHORT,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Stops the task and waits until its connection is closed.
    pub(crate) async fn stop(&self) {
        self.stop.send_replace(true);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

/// Checkpoints the log at `wal` (of pages of `page` bytes) whenever it is
/// over the limit, until told to stop (or the sender is gone); then closes
/// `conn`.
async fn keep_short(
    mut conn: AnyConnection,
    wal: PathBuf,
    page: u64,
    mut stopped: watch::Receiver<bool>,
    log: Arc<LogState>,
) {
    let mut pause = CHECK_IDLE;
    let mut last_size = 0;
    // The size at the last look, whatever was done then: a log whose size
    // moved since is being written.
    let mut seen = 0;
    // The log's frames when a checkpoint first left its restart to the
    // writers ([`checkpoint`]), and when: a log with fewer frames since was
    // started over.
    let mut left_to_writers: Option<(i64, std::time::Instant)> = None;
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            () = tokio::time::sleep(pause) => {}
        }
        // A `stat` of the path: nothing of the database is opened.
        let file = std::fs::metadata(&wal).map_or(0, |m| m.len());
        let frames = if file <= WAL_LIMIT {
            None
        } else {
            match measure(&mut conn).await {
                Ok(Some(frames)) => Some(frames),
                // Another checkpoint holds the log (a writer's, or a command's
                // beside this server): look again soon.
                Ok(None) => {
                    pause = CHECK_GROWING;
                    continue;
                }
                Err(err) => {
                    tracing::warn!(%err, "measuring the SQLite log failed");
                    pause = (pause * 2).min(MAX_BACKOFF);
                    continue;
                }
            }
        };
        let size = frames.map_or(file, |frames| log_bytes(frames, page));
        let writing = size != seen;
        seen = size;
        let Some(frames) = frames.filter(|_| size > WAL_LIMIT) else {
            log.set(LogState::SHORT);
            pause = if size == last_size {
                CHECK_IDLE
            } else {
                CHECK_GROWING
            };
            last_size = size;
            continue;
        };
        let restarted = left_to_writers.is_none_or(|(then, _)| frames < then);
        let writers_can = match left_to_writers {
            Some((_, since)) if !restarted => since.elapsed() < WRITERS_TIME && size <= HARD_LIMIT,
            _ => true,
        };
        log.set(LogState::COPYING);
        let started = std::time::Instant::now();
        let outcome = checkpoint(&mut conn, writers_can, writing).await;
        let took = started.elapsed();
        // Copied or not (a busy lock, an error), bulk writers go on: one that
        // waits for a copy that cannot happen would only be slower.
        log.set(match outcome {
            Ok(Checkpoint::Copied) => LogState::COPIED,
            _ => LogState::SHORT,
        });
        match outcome {
            Ok(Checkpoint::Copied) => {
                tracing::debug!(
                    size,
                    ?took,
                    "copied the SQLite log back; writers restart it"
                );
                if restarted {
                    left_to_writers = Some((frames, std::time::Instant::now()));
                }
                pause = CHECK_GROWING;
            }
            Ok(Checkpoint::Truncated) => {
                tracing::debug!(size, ?took, "checkpointed and truncated the SQLite log");
                left_to_writers = None;
                pause = CHECK_GROWING;
            }
            Ok(Checkpoint::Restarted) => {
                tracing::debug!(size, ?took, "checkpointed and restarted the SQLite log");
                left_to_writers = None;
                pause = CHECK_GROWING;
            }
            Ok(outcome @ (Checkpoint::Busy | Checkpoint::Pinned)) => {
                tracing::debug!(
                    size,
                    ?took,
                    ?outcome,
                    "the SQLite log checkpoint gave up (a busy lock, or a reader that needs the log)"
                );
                pause = (pause * 2).min(MAX_BACKOFF);
            }
            Err(err) => {
                tracing::warn!(%err, size, "checkpointing the SQLite log failed");
                pause = (pause * 2).min(MAX_BACKOFF);
            }
        }
        last_size = 0;
    }
    let _ = conn.close().await;
}

/// The frames in the log, as a PASSIVE checkpoint on `conn` answers (it
/// copies back what no reader needs, without waiting for anyone); `None` when
/// another checkpoint is running.
async fn measure(conn: &mut AnyConnection) -> StoreResult<Option<i64>> {
    let (busy, frames, _copied): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(conn)
        .await?;
    Ok((busy == 0 && frames >= 0).then_some(frames))
}

/// The bytes of a log of `frames` frames of `page`-byte pages
/// (<https://www.sqlite.org/walformat.html>: a 32-byte header, then a 24-byte
/// header per frame).
fn log_bytes(frames: i64, page: u64) -> u64 {
    match u64::try_from(frames) {
        Ok(0) | Err(_) => 0,
        Ok(frames) => frames.saturating_mul(page + 24).saturating_add(32),
    }
}

/// What one checkpoint did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checkpoint {
    /// Copied the whole log back without holding writers off; the next
    /// writer that finds no reader on it starts it over, and cuts the file
    /// to the size limit.
    Copied,
    /// Copied the whole log back and emptied the file.
    Truncated,
    /// Copied the whole log back and started it over, writers going on.
    Restarted,
    /// Gave up on a busy lock.
    Busy,
    /// Could not copy the log back: a reader of an older snapshot needs it.
    Pinned,
}

/// One checkpoint of the log.
///
/// PASSIVE checkpoints first copy back what they can while writers go on,
/// until one finds few frames written during the one before
/// ([`SETTLED_FRAMES`]). When they copy it all and `writers_can` (the log
/// started over since a checkpoint last left that to them, or they were
/// given that less than [`WRITERS_TIME`] ago and it is under
/// [`HARD_LIMIT`]), that is all: a writer starts the log over
/// ([`Checkpointer::take_restart`]). When a reader keeps them from copying
/// most of it, nothing more either ([`Checkpoint::Pinned`]). Otherwise a
/// TRUNCATE (a RESTART while the log is being written), which holds writers
/// off while it waits for readers of older snapshots and starts the log over
/// (TRUNCATE also empties the file), copies what is left. Under tag
/// retention's deletes (a log of 16 MiB every 0.4 s) a TRUNCATE of the whole
/// log held pushes 100-250 ms; after PASSIVE passes, with nothing left to
/// copy, still 55-150 ms (waiting for readers, syncing, truncating).
async fn checkpoint(
    conn: &mut AnyConnection,
    writers_can: bool,
    writing: bool,
) -> StoreResult<Checkpoint> {
    let mut left = 0;
    let mut before = None;
    for _ in 0..PASSIVE_ROUNDS {
        let (_busy, frames, copied): (i64, i64, i64) =
            sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
                .fetch_one(&mut *conn)
                .await?;
        left = frames - copied;
        let written = before.map_or(frames, |before| frames - before);
        before = Some(frames);
        if left <= FEW_FRAMES && written <= SETTLED_FRAMES {
            break;
        }
    }
    if left == 0 && writers_can {
        return Ok(Checkpoint::Copied);
    }
    if left > FEW_FRAMES {
        // A reader of an older snapshot (a long listing) keeps the frames
        // after it from being copied: a RESTART would hold writers off while
        // it waits for that reader, and give up after its busy timeout (250
        // ms that pushes waited, twice, as tag retention began).
        return Ok(Checkpoint::Pinned);
    }
    // While writers go on, RESTART: the file keeps its blocks for them to
    // write over (up to `journal_size_limit`, HARD_LIMIT). Emptying it under them (TRUNCATE) made every writer grow it again,
    // and under tag retention's deletes the log needed this step five times a
    // second instead of a few times a run.
    let mode = if writing { "RESTART" } else { "TRUNCATE" };
    let (busy, _frames, _copied): (i64, i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "PRAGMA wal_checkpoint({mode})"
    )))
    .fetch_one(conn)
    .await?;
    Ok(match (busy, writing) {
        (0, false) => Checkpoint::Truncated,
        (0, true) => Checkpoint::Restarted,
        _ => Checkpoint::Busy,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    use sqlx::Any;
    use sqlx::pool::PoolConnection;

    use super::*;
    use crate::Store;
    use crate::pool::Pool;

    async fn store(dir: &Path) -> Store {
        let url = format!("sqlite://{}?mode=rwc", dir.join("berth.db").display());
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        store
    }

    fn wal_size(dir: &Path) -> u64 {
        std::fs::metadata(dir.join("berth.db-wal")).map_or(0, |m| m.len())
    }

    /// The log's frames in bytes, as the checkpointer measures them
    /// ([`measure`]; through SQLite, never opening its files).
    async fn frames_size(pool: &Pool) -> u64 {
        let mut conn = pool.acquire().await.unwrap();
        let frames = measure(&mut conn).await.unwrap().unwrap_or(i64::MAX);
        log_bytes(frames, 4096)
    }

    /// A pooled connection inside a read transaction: it holds a snapshot
    /// until it commits.
    async fn snapshot(pool: &Pool) -> PoolConnection<Any> {
        let mut conn = pool.acquire().await.unwrap();
        conn.execute("BEGIN").await.unwrap();
        let _: i64 = sqlx::query_scalar("SELECT count(*) FROM articles")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        conn
    }

    /// Appends about `mib` MiB of articles, 1 MiB per transaction.
    async fn burst(pool: &Pool, mib: u64) {
        for _ in 0..mib {
            sqlx::query(
                "INSERT INTO articles (user_id, title, content, keywords, created_at, updated_at) \
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 128) \
                 SELECT 1, 'burst', hex(randomblob(4096)), '', '2026-01-01T00:00:00.000Z', \
                 '2026-01-01T00:00:00.000Z' FROM n",
            )
            .execute(pool)
            .await
            .unwrap();
        }
    }

    /// Waits (at most 30 s) until the size `measure` gives (of the file,
    /// [`wal_size`], or of its frames, [`frames_size`]) is at most `most`;
    /// returns the last size seen.
    async fn wait_for_log<F: Future<Output = u64>>(most: u64, measure: impl Fn() -> F) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut size = measure().await;
        while size > most && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
            size = measure().await;
        }
        size
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_log_is_truncated_while_readers_keep_overlapping_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path()).await;
        let pool = store.pool.clone();

        // A reader's snapshot during a burst of writes: nothing can reset the log.
        let held = snapshot(&pool).await;
        burst(&pool, WAL_LIMIT / (1 << 20) + 8).await;
        assert!(
            wal_size(dir.path()) > WAL_LIMIT,
            "the burst under a held snapshot grew the log past the limit"
        );

        // Then readers keep overlapping: a new snapshot begins before the last
        // one ends, so one is always open. Without writes SQLite never restarts
        // the log by itself, and never makes the file shorter.
        let running = Arc::new(AtomicBool::new(true));
        let readers = tokio::spawn({
            let (pool, running) = (pool.clone(), running.clone());
            async move {
                let mut held = held;
                while running.load(Ordering::Acquire) {
                    let next = snapshot(&pool).await;
                    held.execute("COMMIT").await.unwrap();
                    held = next;
                }
                held.execute("COMMIT").await.unwrap();
            }
        });
        let size = wait_for_log(0, || async { wal_size(dir.path()) }).await;
        assert_eq!(size, 0, "the log was not truncated within 30 s");

        // Writes while the readers go on: the log is brought back under the
        // limit (its frames: the file keeps its blocks when it starts over).
        burst(&pool, 2 * WAL_LIMIT / (1 << 20)).await;
        let size = wait_for_log(WAL_LIMIT, || frames_size(&pool)).await;
        running.store(false, Ordering::Release);
        readers.await.unwrap();
        assert!(
            size <= WAL_LIMIT,
            "the log was still {size} bytes 30 s after more writes"
        );
        store.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_writer_after_a_copy_starts_the_log_over_whatever_was_written_since() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path()).await;
        // Nothing but this test copies the log back.
        let checkpointer = store.checkpointer.as_ref().unwrap();
        checkpointer.stop().await;
        burst(&store.pool, WAL_LIMIT / (1 << 20) + 2).await;
        // A reader on the log (it ends before the writer below begins).
        let mut reader = snapshot(&store.pool).await;

        // As the checkpointer does: the whole log copied back, its start
        // over left to the writers.
        let (busy, frames, copied): (i64, i64, i64) =
            sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
                .fetch_one(&store.pool)
                .await
                .unwrap();
        assert_eq!((busy, copied), (0, frames), "the log was not copied back");
        checkpointer.log.set(LogState::COPIED);
        // Then a write, as the pushes that go on meanwhile (the reader keeps
        // it from starting the log over): the log is not wholly copied any
        // more, and SQLite does not start it over at a transaction that
        // begins on it.
        burst(&store.pool, 1).await;
        reader.execute("COMMIT").await.unwrap();
        drop(reader);
        // The file's size bounds the log from above; a measure through a
        // PASSIVE checkpoint would copy back what was just written.
        let before = wal_size(dir.path());
        assert!(before > WAL_LIMIT);

        // The next transaction through the writer starts it over.
        let mut tx = store.begin_write().await.unwrap();
        sqlx::query(
            "INSERT INTO articles (user_id, title, content, keywords, created_at, updated_at) \
             VALUES (1, 'after', 'x', '', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
        )
        .execute(&mut *tx)
        .await
        .unwrap();
        tx.commit().await.unwrap();
        let after = frames_size(&store.pool).await;
        assert!(
            after < 1 << 20,
            "the log is {after} bytes after its start over (was {before})"
        );
        // Once per copy: the flag is spent.
        assert!(checkpointer.log.is(LogState::SHORT));
        store.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reader_that_keeps_the_log_from_being_copied_is_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path()).await;
        store.checkpointer.as_ref().unwrap().stop().await;
        // A long listing's snapshot, taken before the log grew past its limit.
        let mut reader = snapshot(&store.pool).await;
        burst(&store.pool, WAL_LIMIT / (1 << 20) + 2).await;

        // Copying stops at the reader's snapshot: a RESTART would hold the
        // writers off while it waits for the reader (its busy timeout).
        let url = format!("sqlite://{}", dir.path().join("berth.db").display());
        let mut conn = AnyConnection::connect(&url).await.unwrap();
        let outcome = checkpoint(&mut conn, false, true).await.unwrap();
        assert_eq!(outcome, Checkpoint::Pinned);

        // Once the reader is done, the log is copied and started over.
        reader.execute("COMMIT").await.unwrap();
        drop(reader);
        let outcome = checkpoint(&mut conn, false, true).await.unwrap();
        assert_eq!(outcome, Checkpoint::Restarted);
        conn.close().await.unwrap();
        store.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn close_ends_the_checkpointer_and_its_connection() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path()).await;
        burst(&store.pool, 1).await;
        assert!(store.checkpointer.is_some());
        assert!(wal_size(dir.path()) > 0);
        store.close().await;
        // SQLite removes the log when the last connection to the database
        // closes: the checkpointer's own connection is closed too.
        assert!(
            !dir.path().join("berth.db-wal").exists(),
            "a connection is still open after close"
        );
    }
}
