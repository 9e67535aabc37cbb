//! The connection pool and schema migrations.

use std::sync::Arc;
use std::time::Duration;

use berth_domain::sealing::Sealer;
use sqlx::Executor;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};

use crate::changes::Changes;
use crate::error::StoreResult;
use crate::gc_lock::LockSite;
use crate::pool::{Pool, PoolStatus};
use crate::repo::image_put::ImagePuts;
use crate::repo::page_starts::PageStarts;
use crate::repo::versioned::Versioned;
use crate::wal::{AUTOCHECKPOINT_PAGES, Checkpointer, HARD_LIMIT};

/// Makes the SQLite database file at `path` readable by its owner only: a new
/// one is created empty with mode 0600 (SQLite opens an empty file as an
/// empty database, and gives the files of its log the database's mode), an
/// existing one that others may read is restricted. It holds
/// password hashes and sealed secrets; SQLite alone would create it 0644.
fn keep_private(path: &std::path::Path) -> StoreResult<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                // By path only (`stat`, `chmod`): a descriptor of a database
                // file closed beside SQLite drops its locks (see `wal.rs`).
                // Its log and index are made anew with its mode once the last
                // connection closes.
                if std::fs::metadata(path)?.permissions().mode() & 0o077 != 0 {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
                    tracing::info!(path = %path.display(), "restricted the database file to its owner (mode 0600)");
                }
            }
            // A directory that does not exist: SQLite says so as it opens.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err.into()),
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Which database the pool talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Embedded SQLite (the zero-setup default).
    Sqlite,
    /// PostgreSQL, for several instances sharing one database.
    Postgres,
}

impl Backend {
    /// The backend a database URL names, if it names a supported one.
    pub fn from_url(url: &str) -> Option<Self> {
        if url.starts_with("sqlite:") {
            Some(Self::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Self::Postgres)
        } else {
            None
        }
    }
}

/// The handle every repository function takes: a pool plus the backend it serves.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) pool: Pool,
    backend: Backend,
    changes: Arc<Changes>,
    pub(crate) lock_site: LockSite,
    /// Seals secrets kept in rows (configuration passwords); `None` until the
    /// server gives it its key, and then secrets can be neither written nor read.
    pub(crate) sealer: Option<Arc<dyn Sealer>>,
    /// Keeps the SQLite log short; `None` on PostgreSQL.
    pub(crate) checkpointer: Option<Arc<Checkpointer>>,
    /// Where deep pages of artifact listings start (checked against the
    /// database's listing versions, so shared by every clone).
    pub(crate) page_starts: Arc<PageStarts>,
    /// The totals of short tag-text listings (`q=tags=~7`), by repository
    /// and text, checked the same way.
    pub(crate) text_totals: Arc<Versioned<(i64, String), i64>>,
    /// Writes image manifest PUTs in groups; `None` on PostgreSQL.
    pub(crate) image_puts: Option<ImagePuts>,
    /// The one connection SQLite transactions write on, handed over in the
    /// order asked ([`Store::begin_write`]); `None` on PostgreSQL.
    writer: Option<Pool>,
}

/// The options of a pool of at most `max` connections to `backend`, each set
/// up as Berth needs.
fn pool_options(backend: Backend, max: u32) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(5))
        // A pooled SQLite connection is a thread of this process: pinging it
        // before each use only costs a round trip through its channel (as
        // much as a short query). A PostgreSQL connection can die with the
        // server, so it is still checked.
        .test_before_acquire(backend == Backend::Postgres)
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                match backend {
                    // Each connection has its own page cache, filled as pages are
                    // read. With SQLite's default of 2 MiB, a member's listProjects
                    // over 10,000 projects x 100 members read about 890 pages per
                    // request from the OS, one pread each; with 8 MiB, next to none.
                    // The log's size limits go with the checkpoint task (`wal.rs`).
                    // Statement journals (kept by every statement that fires a
                    // trigger or changes several rows inside a transaction) stay
                    // in memory: with the default they spill to a temporary file
                    // past 64 KiB: grouped manifest PUTs made 70 pwrite calls per
                    // PUT with the default, 25 with memory (strace -c). Berth's
                    // queries are paged, so no sort or DISTINCT of theirs holds
                    // more than a page's worth of rows.
                    Backend::Sqlite => {
                        conn.execute(sqlx::AssertSqlSafe(format!(
                            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                             PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000; \
                             PRAGMA cache_size = -8192; PRAGMA temp_store = MEMORY; PRAGMA journal_size_limit = {HARD_LIMIT}; \
                             PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES};"
                        )))
                        .await?;
                    }
                    // Every query here is short; PostgreSQL's JIT only adds its
                    // compile time (17 ms measured on a member's listProjects).
                    Backend::Postgres => {
                        conn.execute("SET jit = off").await?;
                    }
                }
                Ok(())
            })
        })
}

impl Store {
    /// Connects to `url` (`sqlite://...` or `postgres://...`) without migrating.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        sqlx::any::install_default_drivers();
        let backend = Backend::from_url(url).ok_or_else(|| {
            sqlx::Error::Configuration(format!("unsupported database URL scheme: {url}").into())
        })?;
        let options: AnyConnectOptions = url.parse()?;
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        if backend == Backend::Sqlite && !in_memory {
            let file = url.parse::<sqlx::sqlite::SqliteConnectOptions>()?;
            keep_private(file.get_filename())?;
        }
        let pool = Pool::new(
            pool_options(
                backend,
                match backend {
                    Backend::Sqlite => 8,
                    Backend::Postgres => 16,
                },
            )
            .connect_with(options.clone())
            .await?,
        );
        // SQLite lets one transaction write at a time; the others wait in its
        // busy handler, which polls with growing sleeps (up to 100 ms apart)
        // and so gives the lock to whoever asks at the right moment rather
        // than to who waited longest. A writer that starts again and again
        // (tag retention's batches) kept one PUT waiting through several of
        // its transactions: p99 3x idle, and 35x without pauses. So every
        // transaction of this process takes the one connection of a pool of
        // its own, and sqlx hands that over in the order asked (statements
        // outside transactions still take SQLite's lock by themselves). An
        // in-memory database is one per connection: it writes on the pool.
        let writer = match backend {
            Backend::Sqlite if !in_memory => Some(Pool::new(
                pool_options(backend, 1)
                    .connect_with(options.clone())
                    .await?,
            )),
            Backend::Sqlite | Backend::Postgres => None,
        };
        let checkpointer = match backend {
            Backend::Sqlite => Checkpointer::start(&options).await?.map(Arc::new),
            Backend::Postgres => None,
        };
        let changes = Arc::new(match backend {
            Backend::Sqlite => Changes::local(),
            Backend::Postgres => Changes::listening(url.to_string()),
        });
        Ok(Self {
            image_puts: (backend == Backend::Sqlite)
                .then(|| ImagePuts::start(writer.clone().unwrap_or_else(|| pool.clone()))),
            writer,
            pool,
            backend,
            changes,
            lock_site: LockSite::for_url(backend, url),
            sealer: None,
            checkpointer,
            page_starts: Arc::default(),
            text_totals: Arc::default(),
        })
    }

    /// This store, sealing and opening the secrets it keeps with `sealer`.
    pub fn with_sealer(mut self, sealer: Arc<dyn Sealer>) -> Self {
        self.sealer = Some(sealer);
        self
    }

    /// Brings the schema up to date.
    pub async fn migrate(&self) -> StoreResult<()> {
        self.migrator().run(&self.pool).await?;
        Ok(())
    }

    /// The migrations this build brings the schema to.
    fn migrator(&self) -> sqlx::migrate::Migrator {
        match self.backend {
            Backend::Sqlite => sqlx::migrate!("migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("migrations/postgres"),
        }
    }

    /// Whether the schema is the one this build migrates to, changing
    /// nothing (`--no-migrate`): `Err` says how it differs.
    pub async fn check_schema(&self) -> StoreResult<Result<(), String>> {
        let applied: Vec<(i64,)> =
            match sqlx::query_as("SELECT version FROM _sqlx_migrations WHERE success")
                .fetch_all(&self.pool)
                .await
            {
                Ok(rows) => rows,
                // No table: a database never migrated.
                Err(sqlx::Error::Database(_)) => Vec::new(),
                Err(err) => return Err(err.into()),
            };
        let applied: std::collections::BTreeSet<i64> = applied.into_iter().map(|(v,)| v).collect();
        let known: std::collections::BTreeSet<i64> =
            self.migrator().iter().map(|m| m.version).collect();
        if let Some(newer) = applied.difference(&known).last() {
            return Ok(Err(format!(
                "the database schema is newer than this berth (migration {newer}): upgrade berth"
            )));
        }
        if let Some(missing) = known.difference(&applied).next() {
            return Ok(Err(format!(
                "the database schema is older than this berth (migration {missing} not applied): \
                 run `berth migrate` with this version first"
            )));
        }
        Ok(Ok(()))
    }

    /// Writes a consistent copy of this SQLite database to the new file
    /// `path` (`VACUUM INTO`: one read transaction, so writers go on while it
    /// runs and nothing they commit after it began is in the copy).
    pub async fn backup_into(&self, path: &std::path::Path) -> StoreResult<()> {
        let Some(path) = path.to_str().filter(|_| self.backend == Backend::Sqlite) else {
            return Err(sqlx::Error::Configuration(
                "a copy of the database is made of a SQLite database to a UTF-8 path".into(),
            )
            .into());
        };
        keep_private(std::path::Path::new(path))?;
        let literal = path.replace('\'', "''");
        sqlx::query(sqlx::AssertSqlSafe(format!("VACUUM INTO '{literal}'")))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The backend behind this store.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The connections of the pool now, and its acquisitions and waits so far.
    pub fn pool_status(&self) -> PoolStatus {
        self.pool.status()
    }

    /// A trivial round trip, for health checks.
    pub async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Creates an empty database on this PostgreSQL server (test and operator tooling).
    /// The name must be lower-case ASCII letters, digits and underscores.
    pub async fn create_database(&self, name: &str) -> StoreResult<()> {
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid || self.backend != Backend::Postgres {
            return Err(sqlx::Error::Configuration(
                format!("cannot create database {name:?} here").into(),
            )
            .into());
        }
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Closes every connection and stops the store's background tasks; later
    /// calls fail.
    pub async fn close(&self) {
        self.changes.stop();
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.stop().await;
        }
        if let Some(writer) = &self.writer {
            writer.close().await;
        }
        self.pool.close().await;
    }

    /// The generation counters that tell caches when data changed.
    pub fn changes(&self) -> &Changes {
        &self.changes
    }
}

impl Store {
    /// Begins a transaction that will write. On SQLite it takes the write lock
    /// at once (`BEGIN IMMEDIATE`), so a transaction that reads before it
    /// writes waits for other writers instead of failing with a stale snapshot:
    /// SQLite's write transactions are serialized. PostgreSQL's are not (READ
    /// COMMITTED): a read-then-write there must lock what it read
    /// ([`Store::locking`]) or guard its write with a compare-and-set.
    /// Every transaction of the store writes, so every one begins here.
    pub(crate) async fn begin_write(
        &self,
    ) -> crate::error::StoreResult<sqlx::Transaction<'static, sqlx::Any>> {
        Ok(match self.backend {
            Backend::Sqlite => {
                let writer = self.writer.as_ref().unwrap_or(&self.pool);
                let mut conn = writer.acquire().await?;
                if self
                    .checkpointer
                    .as_ref()
                    .is_some_and(|checkpointer| checkpointer.take_restart())
                {
                    // The log was copied back and is left to the writers to
                    // start over, which they do at a transaction that begins
                    // on a wholly copied log. Under continuous writes none
                    // does: each finds frames written since. So this one
                    // copies those back first (a few pages, 1.4 ms), holding
                    // the writer connection: nothing is written in between,
                    // and its first write starts the log over (unless a
                    // reader of an older snapshot is still on it; see wal.rs).
                    // A failure here is the checkpoint's, not the write's.
                    if let Err(err) = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").await {
                        tracing::warn!(%err, "copying the SQLite log back before a write failed");
                    }
                }
                crate::pool::begin_on(conn, "BEGIN IMMEDIATE").await?
            }
            Backend::Postgres => self.pool.begin().await?,
        })
    }

    /// Between the transactions of a bulk writer (tag retention's deletes):
    /// on SQLite, waits a moment while the log is past its limit and being
    /// copied back, so that writing on does not outrun its checkpoints (see
    /// `wal.rs`); nothing on PostgreSQL.
    pub async fn yield_to_log(&self) {
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.wait_for_copy().await;
        }
    }

    /// A row-locking clause for a `SELECT` inside [`Store::begin_write`]:
    /// `FOR UPDATE` / `FOR SHARE` on PostgreSQL, nothing on SQLite (whose write
    /// transactions already exclude each other).
    pub(crate) fn locking(&self, clause: Locking) -> &'static str {
        match (self.backend, clause) {
            (Backend::Sqlite, _) => "",
            (Backend::Postgres, Locking::Update) => " FOR UPDATE",
            (Backend::Postgres, Locking::Share) => " FOR SHARE",
        }
    }
}

/// How [`Store::locking`] locks the rows a `SELECT` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Locking {
    /// Against every other lock (the rows will be changed or deleted).
    Update,
    /// Against changes and deletion only (the rows will be referred to).
    Share,
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// A new SQLite database is its owner's alone, and so is its log; one
    /// that others could read is restricted when it is opened.
    #[tokio::test]
    async fn the_database_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let (new, old) = (dir.path().join("new.db"), dir.path().join("old.db"));
        let store = Store::connect(&format!("sqlite://{}?mode=rwc", new.display()))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        assert_eq!(mode(&new), 0o600);
        assert_eq!(mode(&dir.path().join("new.db-wal")), 0o600, "the log");
        store.close().await;

        std::fs::write(&old, b"").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        let store = Store::connect(&format!("sqlite://{}?mode=rwc", old.display()))
            .await
            .unwrap();
        assert_eq!(mode(&old), 0o600);
        store.close().await;
    }
}
