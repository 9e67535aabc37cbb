//! The store's connection pool: sqlx's pool, with every acquisition counted
//! and timed for `/metrics` (issue #17, "database pool waits").
//!
//! [`Pool`] is what the repositories pass as their executor (`&self.pool`),
//! so each query, transaction and connection the store takes goes through
//! [`Pool::acquire`]. Its [`sqlx::Executor`] implementation is sqlx's own for
//! `&Pool` (sqlx-core's `pool/executor.rs`) with that timed acquisition in
//! place of sqlx's. `Pool` deliberately does not dereference to sqlx's pool:
//! a method it lacks fails to compile instead of acquiring uncounted.
//!
//! Recording is an `Instant` at the start and end of an acquisition and a few
//! relaxed atomic adds; nothing is locked.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use sqlx::any::{AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyPool, Either, Execute, Executor, SqlSafeStr, SqlStr, Transaction};

/// A transaction on `conn`, a connection from [`Pool::acquire`] (that may
/// have run statements of its own first), begun with `statement`.
pub(crate) async fn begin_on(
    conn: PoolConnection<Any>,
    statement: impl SqlSafeStr,
) -> Result<Transaction<'static, Any>, sqlx::Error> {
    // sqlx's `Pool::begin_with` is this, on its own untimed acquisition
    // (`Transaction::begin` is public but hidden from sqlx's documents;
    // the pinned sqlx-core version keeps it from changing under us).
    Transaction::begin(conn, Some(statement.into_sql_str())).await
}

/// The connections of the pool at one moment, and its acquisitions so far.
///
/// An acquisition *waited* when, as it asked, every connection the pool may
/// open was open and in use (none idle, the pool at its maximum): it could
/// only get a connection another caller gave back. That is the figure that
/// says the pool is too small or connections are held too long (Go's
/// `database/sql` counts the same as `WaitCount`). An acquisition that found
/// no idle connection but room for another opens one, at start-up or after
/// idle connections were closed; that is not a wait, and its time is in
/// [`PoolStatus::acquire_time`] only. A threshold on the time taken instead
/// would count PostgreSQL's check of an idle connection before handing it out
/// (a round trip) as a wait on a busy server. sqlx's pool answers "any idle?"
/// and "take one" in two steps, so a connection given back or taken between
/// them can put one acquisition on the wrong side; the counts stay close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStatus {
    /// Connections open (idle or in use).
    pub open: u32,
    /// Open connections waiting for work.
    pub idle: u32,
    /// The most the pool opens; all of them in use means callers wait.
    pub max: u32,
    /// Connections asked for (a query on the pool, a transaction, a
    /// connection for several statements), whether or not one came.
    pub acquires: u64,
    /// Acquisitions that waited for a connection to be given back.
    pub waits: u64,
    /// Acquisitions that gave up after the acquire timeout without a connection.
    pub timeouts: u64,
    /// The time of every acquisition, to the connection, the error or the
    /// caller giving up (waits, opening connections, checking idle ones).
    pub acquire_time: Duration,
    /// The part of [`PoolStatus::acquire_time`] spent in acquisitions that waited.
    pub wait_time: Duration,
}

/// sqlx's pool and the acquisition counts of every clone of it.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    inner: AnyPool,
    figures: Arc<Figures>,
}

/// The counters behind [`PoolStatus`]; times in nanoseconds.
#[derive(Debug, Default)]
struct Figures {
    acquires: AtomicU64,
    waits: AtomicU64,
    timeouts: AtomicU64,
    acquire_nanos: AtomicU64,
    wait_nanos: AtomicU64,
}

impl Pool {
    /// Counts the acquisitions made through the result; the ones made on
    /// `inner` directly are not.
    pub(crate) fn new(inner: AnyPool) -> Self {
        Self {
            inner,
            figures: Arc::default(),
        }
    }

    /// A connection of the pool. The acquisition is counted (and classed as
    /// a wait or not) when the future is first polled, so a wait shows in
    /// the counts while it lasts; its time is added when it ends.
    pub(crate) fn acquire(
        &self,
    ) -> impl Future<Output = Result<PoolConnection<Any>, sqlx::Error>> + Send + 'static {
        let pool = self.clone();
        async move {
            let acquisition = Acquisition::start(&pool);
            let acquired = pool.inner.acquire().await;
            if matches!(acquired, Err(sqlx::Error::PoolTimedOut)) {
                pool.figures.timeouts.fetch_add(1, Ordering::Relaxed);
            }
            drop(acquisition);
            acquired
        }
    }

    /// A transaction on a connection from [`Pool::acquire`], begun with `BEGIN`.
    pub(crate) async fn begin(&self) -> Result<Transaction<'static, Any>, sqlx::Error> {
        Transaction::begin(self.acquire().await?, None).await
    }

    /// A transaction on a connection from [`Pool::acquire`], begun with
    /// `statement`. Its time waiting for the statement (SQLite's write lock
    /// for `BEGIN IMMEDIATE`) is not acquisition time.
    pub(crate) async fn begin_with(
        &self,
        statement: impl SqlSafeStr,
    ) -> Result<Transaction<'static, Any>, sqlx::Error> {
        begin_on(self.acquire().await?, statement).await
    }

    /// The connections now and the acquisitions so far.
    pub(crate) fn status(&self) -> PoolStatus {
        let figures = &self.figures;
        PoolStatus {
            open: self.inner.size(),
            idle: u32::try_from(self.inner.num_idle()).unwrap_or(u32::MAX),
            max: self.inner.options().get_max_connections(),
            acquires: figures.acquires.load(Ordering::Relaxed),
            waits: figures.waits.load(Ordering::Relaxed),
            timeouts: figures.timeouts.load(Ordering::Relaxed),
            acquire_time: Duration::from_nanos(figures.acquire_nanos.load(Ordering::Relaxed)),
            wait_time: Duration::from_nanos(figures.wait_nanos.load(Ordering::Relaxed)),
        }
    }

    /// Closes every connection; acquisitions after it fail.
    pub(crate) async fn close(&self) {
        self.inner.close().await;
    }
}

/// One acquisition under way. Its time is added when it is dropped: when it
/// got its connection, failed, or its caller gave up (a cancelled request
/// still counts the time it waited).
struct Acquisition<'a> {
    figures: &'a Figures,
    started: Instant,
    waits: bool,
}

impl<'a> Acquisition<'a> {
    fn start(pool: &'a Pool) -> Self {
        let figures = &*pool.figures;
        let waits = pool.inner.num_idle() == 0
            && pool.inner.size() >= pool.inner.options().get_max_connections();
        figures.acquires.fetch_add(1, Ordering::Relaxed);
        if waits {
            figures.waits.fetch_add(1, Ordering::Relaxed);
        }
        Self {
            figures,
            started: Instant::now(),
            waits,
        }
    }
}

impl Drop for Acquisition<'_> {
    fn drop(&mut self) {
        let nanos = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.figures
            .acquire_nanos
            .fetch_add(nanos, Ordering::Relaxed);
        if self.waits {
            self.figures.wait_nanos.fetch_add(nanos, Ordering::Relaxed);
        }
    }
}

impl<'p> Executor<'p> for &'_ Pool {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
    {
        let acquire = self.acquire();
        // The stream owns the connection its rows borrow from; sqlx-core's
        // small generator (what sqlx's own pool uses here) makes that safe.
        Box::pin(sqlx_core::try_stream! {
            let mut conn = acquire.await?;
            let mut steps = conn.fetch_many(query);
            while let Some(step) = steps.try_next().await? {
                r#yield!(step);
            }
            Ok(())
        })
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
    {
        let acquire = self.acquire();
        Box::pin(async move { acquire.await?.fetch_optional(query).await })
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement, sqlx::Error>>
    where
        'p: 'e,
    {
        let acquire = self.acquire();
        Box::pin(async move { acquire.await?.prepare_with(sql, parameters).await })
    }

    fn describe<'e>(self, sql: SqlStr) -> BoxFuture<'e, Result<sqlx::Describe<Any>, sqlx::Error>>
    where
        'p: 'e,
    {
        let acquire = self.acquire();
        Box::pin(async move { acquire.await?.describe(sql).await })
    }
}

/// For `Migrator::run`, which takes its connection through this trait.
impl<'a> sqlx::Acquire<'a> for &'_ Pool {
    type Database = Any;
    type Connection = PoolConnection<Any>;

    fn acquire(self) -> BoxFuture<'a, Result<PoolConnection<Any>, sqlx::Error>> {
        Box::pin(Pool::acquire(self))
    }

    fn begin(self) -> BoxFuture<'a, Result<Transaction<'a, Any>, sqlx::Error>> {
        let acquire = Pool::acquire(self);
        Box::pin(async move { Transaction::begin(acquire.await?, None).await })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sqlx::any::AnyPoolOptions;

    use super::*;
    use crate::{Backend, Store};

    /// A database of `backend` for pool tests (they run `SELECT 1` only, so
    /// PostgreSQL's is the test server's own).
    fn url(backend: Backend, dir: &Path) -> String {
        match backend {
            Backend::Sqlite => format!("sqlite://{}?mode=rwc", dir.join("pool.db").display()),
            Backend::Postgres => std::env::var("BERTH_TEST_POSTGRES_URL")
                .expect("BERTH_TEST_POSTGRES_URL is not set: run `bash scripts/test`"),
        }
    }

    /// Waits (at most 10 s) until `pool` has counted `waits` waits.
    async fn until_waits(pool: &Pool, waits: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while pool.status().waits < waits && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(pool.status().waits, waits, "no acquisition started waiting");
    }

    /// With every connection held, a store query waits until one is given
    /// back, and that wait is counted and timed; opening the connections was
    /// no wait.
    async fn a_query_waits_while_every_connection_is_held(backend: Backend) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&url(backend, dir.path())).await.unwrap();
        let max = store.pool_status().max;
        let mut held = Vec::new();
        for _ in 0..max {
            held.push(store.pool.acquire().await.unwrap());
        }
        let before = store.pool_status();
        assert_eq!((before.open, before.idle), (max, 0));
        assert_eq!(before.acquires, u64::from(max));
        assert_eq!(before.waits, 0, "opening a connection is not a wait");
        assert_eq!(before.wait_time, Duration::ZERO);

        let ping = tokio::spawn({
            let store = store.clone();
            async move { store.ping().await }
        });
        until_waits(&store.pool, 1).await;
        assert!(
            !ping.is_finished(),
            "the query did not wait for a connection"
        );
        held.pop();
        ping.await.unwrap().unwrap();

        let after = store.pool_status();
        assert_eq!(after.acquires, u64::from(max) + 1);
        assert_eq!(after.waits, 1);
        assert_eq!(after.timeouts, 0);
        assert!(after.wait_time > Duration::ZERO);
        assert!(after.acquire_time >= after.wait_time);
        drop(held);
        store.close().await;
    }

    /// A pool of one connection, giving up on an acquisition after `timeout`.
    async fn one_connection(backend: Backend, dir: &Path, timeout: Duration) -> Pool {
        sqlx::any::install_default_drivers();
        let inner = AnyPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(timeout)
            .connect(&url(backend, dir))
            .await
            .unwrap();
        Pool::new(inner)
    }

    /// An acquisition that runs out of time counts as a wait and a timeout,
    /// and one whose caller gives up still adds the time it waited.
    async fn timeouts_and_abandoned_waits_are_counted(backend: Backend) {
        let dir = tempfile::tempdir().unwrap();
        let pool = one_connection(backend, dir.path(), Duration::from_millis(50)).await;
        let held = pool.acquire().await.unwrap();
        let failed = sqlx::query("SELECT 1").execute(&pool).await;
        assert!(
            matches!(failed, Err(sqlx::Error::PoolTimedOut)),
            "{failed:?}"
        );
        let timed_out = pool.status();
        assert_eq!(
            (timed_out.acquires, timed_out.waits, timed_out.timeouts),
            (2, 1, 1)
        );
        assert!(timed_out.wait_time > Duration::ZERO);
        drop(held);
        pool.close().await;

        // A timeout far away: the caller gives up first.
        let pool = one_connection(backend, dir.path(), Duration::from_secs(60)).await;
        let held = pool.acquire().await.unwrap();
        let abandoned = tokio::spawn({
            let pool = pool.clone();
            async move { pool.acquire().await }
        });
        until_waits(&pool, 1).await;
        abandoned.abort();
        assert!(abandoned.await.unwrap_err().is_cancelled());
        let given_up = pool.status();
        assert_eq!((given_up.acquires, given_up.timeouts), (2, 0));
        assert!(given_up.wait_time > Duration::ZERO);
        drop(held);
        pool.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_query_waits_while_every_connection_is_held_sqlite() {
        a_query_waits_while_every_connection_is_held(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_query_waits_while_every_connection_is_held_postgres() {
        a_query_waits_while_every_connection_is_held(Backend::Postgres).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn timeouts_and_abandoned_waits_are_counted_sqlite() {
        timeouts_and_abandoned_waits_are_counted(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn timeouts_and_abandoned_waits_are_counted_postgres() {
        timeouts_and_abandoned_waits_are_counted(Backend::Postgres).await;
    }
}
