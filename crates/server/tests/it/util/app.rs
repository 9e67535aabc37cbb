//! `TestApp`: the real application on a private database and data directory.

use berth::app::App;
use berth::bootstrap;
use berth::outbound::{RestConfig, RestServices};
use berth::signin::SignInSettings;
use berth::state::AppState;
use berth::upstream::cache::ProxySettings;
use berth_auth::secret::SecretKey;
use berth_store::{BlobStore, Store};
use tempfile::TempDir;

/// The password the built-in `admin` gets in tests.
pub const ADMIN_PASSWORD: &str = "Harbor12345";
/// The master key in tests.
pub const MASTER_KEY: &str = "test-master-key-0123456789abcdef";
/// The JWT secret in tests.
pub const JWT_SECRET: &str = "test-jwt-secret";
/// The key that seals configuration secrets in tests.
pub const CONFIG_SECRET_KEY: &str = "test-config-secret-key-0123456789abcdef";

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file in the test's temporary directory.
    Sqlite,
    /// A fresh database on the PostgreSQL server named by `BERTH_TEST_POSTGRES_URL`.
    Postgres,
}

/// Where a test keeps blobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// The data directory's `blobs/`.
    Files,
    /// A fresh prefix in the bucket named by `BERTH_TEST_S3_URL`.
    S3,
}

/// A running application (in process) with its own database and data directory.
pub struct TestApp {
    /// The application service.
    pub app: App,
    /// Its state, for direct store access.
    pub state: AppState,
    /// Which backend it runs on.
    pub backend: Backend,
    /// Where it keeps blobs.
    pub storage: Storage,
    /// The `--blob-store` URL of its bucket prefix (S3 only), for `berth` subcommands.
    pub blob_store_url: Option<String>,
    /// The URL of its database, for a second connection (another instance).
    pub database_url: String,
    dir: TempDir,
}

impl TestApp {
    /// Creates a local user who is a member of nothing (e-mail `<username>@example.com`,
    /// real name `<username> real`); returns its id.
    pub async fn create_user(&self, username: &str, password: &str) -> i64 {
        self.store()
            .users()
            .create(&berth_domain::model::NewUser {
                username: username.into(),
                email: Some(format!("{username}@example.com")),
                realname: Some(format!("{username} real")),
                password_hash: Some(berth_auth::password::hash_password(password)),
                ..berth_domain::model::NewUser::default()
            })
            .await
            .unwrap()
            .id
    }

    /// A fresh application on `backend`, migrated, with `admin`'s password set to [`ADMIN_PASSWORD`].
    pub async fn new(backend: Backend) -> Self {
        Self::with_storage(backend, Storage::Files).await
    }

    /// [`TestApp::new`] keeping blobs in `storage`.
    pub async fn with_storage(backend: Backend, storage: Storage) -> Self {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let dir = tempfile::tempdir().expect("temp dir");
        let url = database_url(backend, dir.path()).await;
        let store = Store::connect(&url)
            .await
            .expect("connect to the test database");
        store.migrate().await.expect("migrate the test database");
        let store = bootstrap::seal_secrets(store, CONFIG_SECRET_KEY)
            .await
            .expect("the test key seals");
        let hash = berth_auth::password::hash_password(ADMIN_PASSWORD);
        assert!(store.users().set_password_if_unset(1, &hash).await.unwrap());
        let blob_store_url = match storage {
            Storage::S3 => Some(s3_blob_store_url().await),
            Storage::Files => None,
        };
        let blobs = match &blob_store_url {
            None => {
                let blob_dir = berth::config::blob_dir(dir.path());
                std::fs::create_dir_all(&blob_dir).unwrap();
                BlobStore::new(blob_dir)
            }
            Some(url) => s3_blob_store(url),
        };
        let rest =
            RestServices::new(RestConfig::default()).expect("the default REST configuration");
        let state = test_state(store, blobs, rest, SignInSettings::default());
        Self {
            app: berth::app::build(state.clone()),
            state,
            backend,
            storage,
            blob_store_url,
            database_url: url,
            dir,
        }
    }

    /// The store behind the application.
    pub fn store(&self) -> &Store {
        &self.state.store
    }

    /// The digests whose bytes the blob store holds.
    pub async fn stored_blobs(&self) -> Vec<String> {
        let mut found: Vec<String> = self
            .state
            .registry
            .blobs
            .committed_files()
            .await
            .expect("list the stored blobs")
            .iter()
            .map(|d| d.to_string())
            .collect();
        found.sort();
        found
    }

    /// The upload directories (prefixes) the blob store holds.
    pub async fn stored_uploads(&self) -> Vec<String> {
        let mut found: Vec<String> = self
            .state
            .registry
            .blobs
            .upload_dirs()
            .await
            .expect("list the upload directories")
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        found.sort();
        found
    }

    /// Runs `statement` on the test's database behind the server's back, to
    /// damage what a check must then find.
    /// The rows of a query of two text columns, read past the store (what is at rest).
    pub async fn fetch_text_pairs(&self, statement: &str) -> Vec<(String, String)> {
        let pool = sqlx::AnyPool::connect(&self.database_url)
            .await
            .expect("connect");
        let rows = sqlx::query_as(sqlx::AssertSqlSafe(statement))
            .fetch_all(&pool)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
        pool.close().await;
        rows
    }

    pub async fn execute_sql(&self, statement: &str) {
        let pool = sqlx::AnyPool::connect(&self.database_url)
            .await
            .expect("connect");
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&pool)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
        pool.close().await;
    }

    /// Makes every schedule due now (schedules fire at most once a minute;
    /// a test does not wait for the next one).
    pub async fn make_schedules_due(&self) {
        make_schedules_due(&self.database_url).await;
    }

    /// The test's private data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// A fresh database on `backend`: a SQLite file in `dir`, or an empty
/// PostgreSQL database ([`postgres_database_url`]).
pub async fn database_url(backend: Backend, dir: &std::path::Path) -> String {
    match backend {
        Backend::Sqlite => format!("sqlite://{}?mode=rwc", dir.join("berth.db").display()),
        Backend::Postgres => postgres_database_url().await,
    }
}

/// The `--blob-store` URL of a fresh bucket on the test S3 server
/// (`BERTH_TEST_S3_URL` names the server and the region; credentials in the
/// AWS environment variables). A bucket of its own per test keeps listings
/// (s3s-fs walks the whole bucket for any prefix) to the test's own objects.
pub async fn s3_blob_store_url() -> String {
    let url = std::env::var("BERTH_TEST_S3_URL").expect(
        "BERTH_TEST_S3_URL is not set: run the suite with `bash scripts/test`, which starts \
         an S3 server (scripts/s3-fixture), or point it at a bucket \
         (s3://bucket?endpoint=http://host:port with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)",
    );
    let query = url.split_once('?').map_or("", |(_, query)| query);
    // Short: s3s-fs names a file after the whole key (base64), and a sha512
    // key passes the 255-byte file name limit under a long prefix.
    let bucket = format!("t{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let url = format!("s3://{bucket}?{query}");
    s3_client(&url)
        .create_bucket()
        .await
        .expect("create a bucket on the test S3 server");
    url
}

/// The S3 client of the `--blob-store` URL `url`, credentials from the environment.
pub fn s3_client(url: &str) -> berth_store::s3::S3Client {
    let config = berth_store::s3::S3Config::parse(url, |name| std::env::var(name).ok())
        .expect("the test bucket URL parses");
    berth_store::s3::S3Client::new(config).expect("an S3 client for the test bucket")
}

/// The blob store of the `--blob-store` URL `url`.
pub fn s3_blob_store(url: &str) -> BlobStore {
    BlobStore::Objects(berth_store::ObjectBlobs::new(s3_client(url)))
}

/// Creates an empty database on the test PostgreSQL server and returns its URL.
pub async fn postgres_database_url() -> String {
    let server = std::env::var("BERTH_TEST_POSTGRES_URL").expect(
        "BERTH_TEST_POSTGRES_URL is not set: run the suite with `bash scripts/test`, \
         which starts PostgreSQL, or point it at a server (postgres://user@host:port/db)",
    );
    let name = format!("berth_test_{}", uuid::Uuid::new_v4().simple());
    let admin = Store::connect(&server)
        .await
        .expect("connect to the PostgreSQL test server");
    admin
        .create_database(&name)
        .await
        .expect("create test database");
    admin.close().await;
    let (base, _) = server.rsplit_once('/').expect("URL with a database name");
    format!("{base}/{name}")
}

impl TestApp {
    /// The same application and database with another generator-rest
    /// configuration (mail server, identity providers, CORS).
    pub fn with_rest(self, config: RestConfig) -> Self {
        let rest = RestServices::new(config).expect("valid REST configuration");
        let state = test_state(
            self.state.store.clone(),
            self.state.registry.blobs.clone(),
            rest,
            SignInSettings::default(),
        );
        Self {
            app: berth::app::build(state.clone()),
            state,
            ..self
        }
    }

    /// The same application and database with other sign-in protection
    /// settings (throttle numbers, trusted proxies) and fresh counters.
    pub fn with_signin(self, settings: SignInSettings) -> Self {
        let rest =
            RestServices::new(RestConfig::default()).expect("the default REST configuration");
        let state = test_state(
            self.state.store.clone(),
            self.state.registry.blobs.clone(),
            rest,
            settings,
        );
        Self {
            app: berth::app::build(state.clone()),
            state,
            ..self
        }
    }
}

impl TestApp {
    /// The same state served with `/metrics` placed and guarded by `settings`.
    pub fn with_metrics(self, settings: &berth::metrics::MetricsSettings) -> Self {
        Self {
            app: berth::app::build_with(self.state.clone(), settings),
            ..self
        }
    }

    /// The same application, database and blobs, answering blob downloads with
    /// redirects to the store's presigned URLs (`--blob-redirect`).
    pub fn with_blob_redirect(self) -> Self {
        let blobs = self.state.registry.blobs.clone();
        let proxy = self.state.registry.proxy.settings().clone();
        self.rebuilt(blobs, true, proxy)
    }

    /// The same application and database with blobs in `blobs`.
    pub fn with_blobs(self, blobs: BlobStore) -> Self {
        let proxy = self.state.registry.proxy.settings().clone();
        self.rebuilt(blobs, false, proxy)
    }

    /// The same application and database, checking proxied tags upstream at
    /// most once per `ttl` (the tests' default: on every pull).
    pub fn with_proxy_ttl(self, ttl: std::time::Duration) -> Self {
        let blobs = self.state.registry.blobs.clone();
        let redirect = self.state.registry.redirect_downloads;
        let proxy = ProxySettings {
            ttl,
            ..self.state.registry.proxy.settings().clone()
        };
        self.rebuilt(blobs, redirect, proxy)
    }

    /// The same application and database, failing a proxied blob fetch once
    /// upstream has sent nothing for `idle` (a server waits 30 seconds).
    pub fn with_proxy_idle_timeout(self, idle: std::time::Duration) -> Self {
        let deadlines = berth::upstream::Deadlines {
            idle,
            ..self.state.registry.proxy.settings().deadlines
        };
        self.with_peer_deadlines(deadlines)
    }

    /// The same application and database, giving up on another registry
    /// (a proxy cache's upstream, a replication peer) after `deadlines`
    /// (a server's: `BERTH_PEER_*_TIMEOUT`, 10 s, 30 s, 30 s).
    pub fn with_peer_deadlines(self, deadlines: berth::upstream::Deadlines) -> Self {
        let blobs = self.state.registry.blobs.clone();
        let redirect = self.state.registry.redirect_downloads;
        let proxy = ProxySettings {
            deadlines,
            ..self.state.registry.proxy.settings().clone()
        };
        self.rebuilt(blobs, redirect, proxy)
    }

    fn rebuilt(self, blobs: BlobStore, redirect: bool, proxy: ProxySettings) -> Self {
        let rest =
            RestServices::new(RestConfig::default()).expect("the default REST configuration");
        let state = bootstrap::build_state(
            self.state.store.clone(),
            SecretKey::new(MASTER_KEY),
            JWT_SECRET.as_bytes(),
            7 * 86_400,
            blobs,
            redirect,
            proxy,
            "http://127.0.0.1:9000".into(),
            rest,
            SignInSettings::default(),
        );
        Self {
            app: berth::app::build(state.clone()),
            state,
            ..self
        }
    }
}

/// The application state every test runs with: the test secrets, tokens valid for a week.
fn test_state(
    store: Store,
    blobs: BlobStore,
    rest: RestServices,
    signin: SignInSettings,
) -> AppState {
    bootstrap::build_state(
        store,
        SecretKey::new(MASTER_KEY),
        JWT_SECRET.as_bytes(),
        7 * 86_400,
        blobs,
        false,
        ProxySettings {
            ttl: std::time::Duration::ZERO,
            spool_dir: std::env::temp_dir(),
            deadlines: berth::upstream::Deadlines::DEFAULT,
        },
        "http://127.0.0.1:9000".into(),
        rest,
        signin,
    )
}

impl TestApp {
    /// A new application over this one's database and data directory, as after
    /// a server restart (fresh in-memory state); `self` must outlive it.
    pub fn restart(&self) -> RestartedApp<'_> {
        self.sibling(self.state.store.clone())
    }

    /// Another instance over this one's database, on a connection pool of its
    /// own (as a second server sharing PostgreSQL); `self` must outlive it.
    pub async fn second_instance(&self) -> RestartedApp<'_> {
        let store = Store::connect(&self.database_url)
            .await
            .expect("connect to the test database");
        self.sibling(store)
    }

    /// A fresh application state over `store` and this one's blobs.
    fn sibling(&self, store: Store) -> RestartedApp<'_> {
        let rest =
            RestServices::new(RestConfig::default()).expect("the default REST configuration");
        let state = test_state(
            store,
            self.state.registry.blobs.clone(),
            rest,
            SignInSettings::default(),
        );
        RestartedApp {
            inner: TestApp {
                app: berth::app::build(state.clone()),
                state,
                backend: self.backend,
                storage: self.storage,
                blob_store_url: self.blob_store_url.clone(),
                database_url: self.database_url.clone(),
                dir: tempfile::tempdir().expect("temp dir"),
            },
            _original: self,
        }
    }
}

/// A [`TestApp`] sharing another's database and data directory.
pub struct RestartedApp<'a> {
    inner: TestApp,
    _original: &'a TestApp,
}

impl std::ops::Deref for RestartedApp<'_> {
    type Target = TestApp;

    fn deref(&self) -> &TestApp {
        &self.inner
    }
}

/// Makes every schedule in the database at `database_url` due now: the next
/// tick of a scheduler fires them (schedules fire at most once a minute; a
/// test does not wait for the next one).
pub async fn make_schedules_due(database_url: &str) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(database_url).await.expect("connect");
    sqlx::query("UPDATE job_schedules SET next_fire_at = '2000-01-01T00:00:00.000Z'")
        .execute(&pool)
        .await
        .expect("making schedules due");
    pool.close().await;
}
