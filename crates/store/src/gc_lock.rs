//! The garbage-collection lock: held by a live collector, released by the
//! operating system or the database when its process dies, so a crashed
//! collection never blocks anyone (no timestamps, no takeover delays).
//!
//! PostgreSQL: a session advisory lock on a connection of its own. SQLite: an
//! exclusive `flock` on `<database file>.gc-lock` (every process sharing the
//! database shares the file). An in-memory SQLite database has no other
//! process: a mutex of this store does.

use std::path::PathBuf;
use std::sync::Arc;

use sqlx::{AnyConnection, Connection};

use crate::db::{Backend, Store};
use crate::error::StoreResult;

/// The advisory lock key on PostgreSQL ("berth-gc").
const ADVISORY_KEY: i64 = 0x6265_7274_682d_6763;

/// Where a store's collectors meet.
#[derive(Debug, Clone)]
pub(crate) enum LockSite {
    /// The advisory lock of the store's PostgreSQL database.
    Postgres,
    /// A lock file beside the SQLite database.
    File(PathBuf),
    /// A mutex of this process.
    Memory(Arc<tokio::sync::Mutex<()>>),
}

impl LockSite {
    /// The site for a database at `url` on `backend`.
    pub(crate) fn for_url(backend: Backend, url: &str) -> Self {
        match backend {
            Backend::Postgres => Self::Postgres,
            Backend::Sqlite => {
                let path = url
                    .strip_prefix("sqlite://")
                    .or_else(|| url.strip_prefix("sqlite:"))
                    .unwrap_or_default();
                let path = path.split('?').next().unwrap_or_default();
                if path.is_empty() || path == ":memory:" {
                    Self::Memory(Arc::default())
                } else {
                    Self::File(PathBuf::from(format!("{path}.gc-lock")))
                }
            }
        }
    }
}

/// A held collection lock; dropping it releases it.
#[derive(Debug)]
pub struct GcLock {
    _held: Held,
}

#[derive(Debug)]
#[expect(
    dead_code,
    reason = "a file or guard is held for what dropping it releases"
)]
enum Held {
    Postgres(AnyConnection),
    File(std::fs::File),
    Memory(tokio::sync::OwnedMutexGuard<()>),
}

impl GcLock {
    /// Releases the lock now (on PostgreSQL, closes its connection cleanly).
    pub async fn release(self) {
        if let Held::Postgres(mut conn) = self._held {
            // Unlocked before the connection closes: the server ends a closed
            // session a little later.
            let _ = sqlx::query("SELECT pg_advisory_unlock($1)")
                .bind(ADVISORY_KEY)
                .execute(&mut conn)
                .await;
            let _ = conn.close().await;
        }
    }
}

impl Store {
    /// Takes the collection lock if no live collector holds it.
    pub async fn try_gc_lock(&self) -> StoreResult<Option<GcLock>> {
        let held = match &self.lock_site {
            LockSite::Postgres => {
                // A pooled connection goes back to the pool when the lock is
                // taken (pushes waiting for a collector ask often); only the
                // holder's leaves it, for as long as the lock is held.
                let mut conn = self.pool.acquire().await?;
                let (got,): (i64,) = sqlx::query_as(
                    "SELECT CAST(CASE WHEN pg_try_advisory_lock($1) THEN 1 ELSE 0 END AS BIGINT)",
                )
                .bind(ADVISORY_KEY)
                .fetch_one(&mut *conn)
                .await?;
                if got == 0 {
                    return Ok(None);
                }
                Held::Postgres(conn.detach())
            }
            LockSite::File(path) => {
                let path = path.clone();
                let file = tokio::task::spawn_blocking(move || {
                    let file = std::fs::OpenOptions::new()
                        .create(true)
                        .truncate(false)
                        .write(true)
                        .open(path)?;
                    match file.try_lock() {
                        Ok(()) => Ok(Some(file)),
                        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
                        Err(std::fs::TryLockError::Error(err)) => Err(err),
                    }
                })
                .await
                .map_err(std::io::Error::other)??;
                match file {
                    Some(file) => Held::File(file),
                    None => return Ok(None),
                }
            }
            LockSite::Memory(mutex) => match Arc::clone(mutex).try_lock_owned() {
                Ok(guard) => Held::Memory(guard),
                Err(_) => return Ok(None),
            },
        };
        Ok(Some(GcLock { _held: held }))
    }
}
