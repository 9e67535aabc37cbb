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
//! So each SQLite store runs a task that looks at the size of the log (its
//! frames, from the header of the wal-index in the `-shm` file) and, once it
//! is over [`WAL_LIMIT`], checkpoints it on a connection of its own. PASSIVE
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
        let (stop, stopped) = watch::channel(false);
        let log = Arc::new(LogState::default());
        let task = tokio::spawn(keep_short(
            conn,
            PathBuf::from(format!("{file}-wal")),
            PathBuf::from(format!("{file}-shm")),
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

/// Checkpoints the log at `wal` whenever it is over the limit, until told to
/// stop (or the sender is gone); then closes `conn`.
async fn keep_short(
    mut conn: AnyConnection,
    wal: PathBuf,
    shm: PathBuf,
    mut stopped: watch::Receiver<bool>,
    log: Arc<LogState>,
) {
    let mut pause = CHECK_IDLE;
    let mut last_size = 0;
    // The size at the last look, whatever was done then: a log whose size
    // moved since is being written.
    let mut seen = 0;
    // The log's restart count when a checkpoint first left its restart to
    // the writers ([`checkpoint`]), and when.
    let mut left_to_writers: Option<(u32, std::time::Instant)> = None;
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            () = tokio::time::sleep(pause) => {}
        }
        // Two short system calls; not worth a trip to the blocking pool.
        let size = log_size(&wal, &shm);
        let writing = size != seen;
        seen = size;
        if size <= WAL_LIMIT {
            log.set(LogState::SHORT);
            pause = if size == last_size {
                CHECK_IDLE
            } else {
                CHECK_GROWING
            };
            last_size = size;
            continue;
        }
        let restarts = restarts(&wal);
        let writers_can = match (restarts, left_to_writers) {
            (None, _) => false,
            (Some(now), Some((then, since))) if now == then => {
                since.elapsed() < WRITERS_TIME && size <= HARD_LIMIT
            }
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
                if restarts != left_to_writers.map(|(then, _)| then) {
                    left_to_writers = restarts.map(|now| (now, std::time::Instant::now()));
                }
                pause = CHECK_GROWING;
            }
            Ok(Checkpoint::Truncated) => {
                tracing::debug!(size, ?took, "checkpointed and truncated the SQLite log");
                pause = CHECK_GROWING;
            }
            Ok(Checkpoint::Restarted) => {
                tracing::debug!(size, ?took, "checkpointed and restarted the SQLite log");
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

/// The size of the log at `wal`: of its frames, from the first copy of the
/// wal-index header at the start of its `-shm` file `shm`
/// (<https://www.sqlite.org/walformat.html>: `isInit` at byte 12, the page
/// size at 14, `mxFrame` at 16, in the machine's byte order); the size of the
/// file when that cannot be read. The file keeps its blocks when the log
/// starts over, so its size says how long the log was, not how long it is.
fn log_size(wal: &std::path::Path, shm: &std::path::Path) -> u64 {
    use std::io::Read;
    let mut header = [0; 20];
    let read = std::fs::File::open(shm).and_then(|mut file| file.read_exact(&mut header));
    if read.is_ok() && header[12] == 1 {
        let page = match u16::from_ne_bytes([header[14], header[15]]) {
            1 => 65536,
            page => u64::from(page),
        };
        let frames = u32::from_ne_bytes([header[16], header[17], header[18], header[19]]);
        return match frames {
            0 => 0,
            frames => 32 + u64::from(frames) * (page + 24),
        };
    }
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// How many times the log at `wal` started over: the checkpoint sequence
/// number of its header (big-endian, at byte 12), which SQLite increments
/// each time a writer or a checkpoint restarts the log.
fn restarts(wal: &std::path::Path) -> Option<u32> {
    use std::io::Read;
    let mut header = [0; 16];
    std::fs::File::open(wal)
        .and_then(|mut file| file.read_exact(&mut header))
        .ok()?;
    Some(u32::from_be_bytes([
        header[12], header[13], header[14], header[15],
    ]))
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

    /// The log's frames, as the checkpointer measures them ([`log_size`]).
    fn frames_size(dir: &Path) -> u64 {
        log_size(&dir.join("berth.db-wal"), &dir.join("berth.db-shm"))
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

    /// Waits (at most 30 s) until `done` holds for the size `measure` gives
    /// ([`wal_size`], [`frames_size`]); returns the last size seen.
    async fn wait_for_log(
        dir: &Path,
        measure: fn(&Path) -> u64,
        done: impl Fn(u64) -> bool,
    ) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut size = measure(dir);
        while !done(size) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
            size = measure(dir);
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
        let size = wait_for_log(dir.path(), wal_size, |size| size == 0).await;
        assert_eq!(size, 0, "the log was not truncated within 30 s");

        // Writes while the readers go on: the log is brought back under the
        // limit (its frames: the file keeps its blocks when it starts over).
        burst(&pool, 2 * WAL_LIMIT / (1 << 20)).await;
        let size = wait_for_log(dir.path(), frames_size, |size| size <= WAL_LIMIT).await;
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
        let wal = dir.path().join("berth.db-wal");
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
        let restarted = restarts(&wal).unwrap();
        let before = frames_size(dir.path());
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
        assert_eq!(
            restarts(&wal),
            Some(restarted + 1),
            "the log was not started over"
        );
        let after = frames_size(dir.path());
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
