//! What proxy-cache projects keep in memory, below the surface that serves
//! them (`registry/proxy.rs`): upstream clients by registry, when tags were
//! last checked, the fetches under way (single flight), manifests fetched and
//! not stored yet, the sizes manifests declare, and each project's places
//! for requests upstream.

use std::collections::HashMap;
use std::hash::Hash;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_domain::model::Project;
use berth_domain::model::registry::RegistryType;
use berth_domain::oci::manifest::Descriptor;
use berth_domain::oci::{Digest, Manifest};
use bytes::Bytes;
use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore, watch};

use super::{ManifestHead, Remote, Unavailable};
use crate::error::{ApiError, ErrorKind, OciCode};
use crate::state::AppState;

/// How many tags' check times are kept before the expired ones are dropped.
pub(crate) const MAX_CHECKED: usize = 100_000;
/// How many index children waiting for their parent are remembered.
pub(crate) const MAX_PARENTS: usize = 10_000;
/// How many bytes are gathered before they are written to a blob's spool.
pub(crate) const SPOOL_BATCH: usize = 256 << 10;
/// How much of a spooled blob one read hands a client.
pub(crate) const READ_CHUNK: u64 = 1 << 20;
/// How many blobs of one manifest the background task fetches at once.
pub(crate) const PARALLEL_BLOBS: usize = 4;
/// The most bytes a proxied blob may have, spooled and stored: the bound of
/// a blob no manifest fetched here declared (one pulled by digest alone, or
/// through another instance), and of any size a manifest declares, since an
/// upstream that sends the blob also writes the manifest. Docker Hub and
/// GHCR take no layer over 10 GB.
pub(crate) const MAX_BLOB_BYTES: u64 = 16 << 30;
/// How many declared blob sizes are remembered.
pub(crate) const MAX_DECLARED: usize = 100_000;

/// `(project id, repository, tag or digest)`.
pub(crate) type Key = (i64, String, String);

/// A manifest fetched from upstream.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub(crate) digest: Digest,
    pub(crate) media_type: String,
    pub(crate) body: Bytes,
    pub(crate) manifest: Manifest,
}

/// Why a fetch found nothing to answer with.
#[derive(Debug, Clone)]
pub(crate) enum Miss {
    /// Upstream has no such content.
    NotFound,
    /// Upstream could not be asked, or refused.
    Unavailable(Unavailable),
    /// Upstream sent something that is not what was asked for.
    Invalid(String),
}

/// Where a spooled blob stands.
#[derive(Debug, Clone)]
pub(crate) enum Progress {
    /// Upstream has not answered yet.
    Asking,
    /// This many bytes are spooled, of `length` when upstream said.
    Streaming { written: u64, length: Option<u64> },
    /// All of it is spooled, checked and stored.
    Stored { length: u64 },
    /// It was in the store before anything was fetched (nothing is spooled).
    Cached { length: u64 },
    /// Upstream has no such blob.
    Missing,
    /// The fetch failed.
    Failed(Miss),
}

/// One blob being fetched: its spool and its progress.
pub(crate) struct BlobFlight {
    pub(crate) spool: Arc<std::fs::File>,
    pub(crate) progress: watch::Receiver<Progress>,
}

/// The repository of one upstream registry a proxy repository pulls from.
#[derive(Clone)]
pub(crate) struct Upstream {
    pub(crate) remote: Arc<Remote>,
    pub(crate) repository: String,
    /// Harbor's `proxy_speed_kb` of the project, in bytes per second: read
    /// once here for every blob fetched with this upstream.
    pub(crate) speed: Option<u64>,
    /// Harbor's `max_upstream_conn` of the project: the requests to upstream
    /// it may have under way at once (a blob's while it streams); `None`: no limit.
    pub(crate) connections: Option<Arc<Semaphore>>,
    /// Harbor's `proxy_cache_local_on_not_found`: a cached manifest is
    /// served when upstream says it no longer has it.
    pub(crate) local_on_not_found: bool,
}

impl Upstream {
    /// A place among the project's requests to upstream, waited for when
    /// `max_upstream_conn` are under way.
    pub(crate) async fn connection(&self) -> Option<OwnedSemaphorePermit> {
        match &self.connections {
            Some(limit) => limit.clone().acquire_owned().await.ok(),
            None => None,
        }
    }
}

/// Single flight: one computation per key at a time, its result shared by
/// everyone who asked meanwhile.
pub(crate) struct Flights<K, V> {
    pub(crate) running: Mutex<HashMap<K, Arc<OnceCell<V>>>>,
}

impl<K: Hash + Eq + Clone, V: Clone> Flights<K, V> {
    pub(crate) fn new() -> Self {
        Self {
            running: Mutex::new(HashMap::new()),
        }
    }

    /// The result of `work` for `key`, or of the run already under way.
    pub(crate) async fn run(&self, key: K, work: impl Future<Output = V>) -> V {
        let cell = lock(&self.running).entry(key.clone()).or_default().clone();
        let value = cell.get_or_init(|| work).await.clone();
        let mut running = lock(&self.running);
        if running.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            running.remove(&key);
        }
        value
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// How proxy-cache projects behave.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// How long a tag is served before it is checked upstream again.
    pub ttl: Duration,
    /// Where blobs being fetched are spooled (unlinked files; on disk, not in
    /// a tmpfs, for layers of gigabytes).
    pub spool_dir: std::path::PathBuf,
    /// How long each step of a request to another registry may take (the
    /// proxy cache's, replication's and the registries' pings): a stalled
    /// upstream must not hold a fetch (and every client waiting on it), nor
    /// a replication run, for ever.
    pub deadlines: super::Deadlines,
}

/// What proxy-cache projects keep in memory: upstream clients, when tags
/// were last checked, and the fetches under way.
pub struct ProxyCache {
    pub(crate) settings: ProxySettings,
    /// Clients by registry id, with the registry's `updated_at` they were made for.
    pub(crate) remotes: Mutex<HashMap<i64, (String, Arc<Remote>)>>,
    /// When each tag was last found unchanged (or fetched) upstream, and its digest then.
    pub(crate) checked: Mutex<HashMap<Key, (Instant, String)>>,
    /// Manifest fetches under way, by the reference asked.
    pub(crate) manifest_flights: Flights<Key, Result<Arc<Fetched>, Miss>>,
    /// Manifest checks (`HEAD`s) upstream under way, by the reference asked.
    pub(crate) head_flights: Flights<Key, Result<Option<ManifestHead>, Unavailable>>,
    /// Manifests fetched and not stored yet, by digest.
    pub(crate) pending: Mutex<HashMap<Key, Arc<Fetched>>>,
    /// Blob fetches under way, by digest.
    pub(crate) blob_flights: Mutex<HashMap<Key, Arc<BlobFlight>>>,
    /// Index children not cached yet, with their index.
    pub(crate) parents: Mutex<HashMap<Key, Arc<Fetched>>>,
    /// The sizes manifests fetched upstream declare for blobs not cached
    /// yet, by digest: the most a fetch of each may read, even when a client
    /// asks for the blob before (or after) the manifest's own fetch of it.
    pub(crate) declared: Mutex<HashMap<Key, u64>>,
    /// Each project's `max_upstream_conn` and the places it gives, by project id.
    pub(crate) connections: Mutex<HashMap<i64, (usize, Arc<Semaphore>)>>,
}

impl std::fmt::Debug for ProxyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyCache")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ProxyCache {
    /// A cache behaving as `settings` say.
    pub fn new(settings: ProxySettings) -> Self {
        Self {
            settings,
            remotes: Mutex::default(),
            checked: Mutex::default(),
            manifest_flights: Flights::new(),
            head_flights: Flights::new(),
            pending: Mutex::default(),
            blob_flights: Mutex::default(),
            parents: Mutex::default(),
            declared: Mutex::default(),
            connections: Mutex::default(),
        }
    }

    /// How it behaves.
    pub fn settings(&self) -> &ProxySettings {
        &self.settings
    }

    /// An unlinked file in the spool directory (made when missing).
    pub(crate) fn spool(&self) -> io::Result<std::fs::File> {
        let dir = &self.settings.spool_dir;
        tempfile::tempfile_in(dir).or_else(|_| {
            std::fs::create_dir_all(dir)?;
            tempfile::tempfile_in(dir)
        })
    }

    /// The digest a tag had upstream when it was checked within the TTL.
    pub(crate) fn fresh(&self, key: &Key) -> Option<String> {
        lock(&self.checked)
            .get(key)
            .filter(|(at, _)| at.elapsed() < self.settings.ttl)
            .map(|(_, digest)| digest.clone())
    }

    pub(crate) fn mark_checked(&self, key: Key, digest: &str) {
        let mut checked = lock(&self.checked);
        if checked.len() >= MAX_CHECKED {
            let ttl = self.settings.ttl;
            checked.retain(|_, (at, _)| at.elapsed() < ttl);
            if checked.len() >= MAX_CHECKED {
                checked.clear();
            }
        }
        checked.insert(key, (Instant::now(), digest.to_string()));
    }

    /// What upstream's `HEAD` says of manifest `key.2` of repository `key.1`,
    /// asked once however many wait for it.
    pub(crate) async fn head(
        &self,
        upstream: &Upstream,
        key: Key,
    ) -> Result<Option<ManifestHead>, Unavailable> {
        let reference = key.2.clone();
        let check = async {
            let _connection = upstream.connection().await;
            upstream
                .remote
                .head_manifest(&upstream.repository, &reference)
                .await
        };
        self.head_flights.run(key, check).await
    }

    /// A manifest fetched into repository `key.1` and not stored yet, by digest.
    pub(crate) fn pending(&self, key: &Key) -> Option<Arc<Fetched>> {
        lock(&self.pending).get(key).cloned()
    }

    /// Remembers the sizes `manifest`, fetched into repository `name` of
    /// project `project_id`, declares for its blobs.
    pub(crate) fn declare(&self, project_id: i64, name: &str, manifest: &Manifest) {
        let mut declared = lock(&self.declared);
        if declared.len() >= MAX_DECLARED {
            declared.clear();
        }
        for blob in manifest.blob_dependencies() {
            let key = (project_id, name.to_string(), blob.digest.to_string());
            declared.insert(key, declared_limit(blob));
        }
    }

    /// The most bytes blob `key` may have: what a manifest declared, else
    /// [`MAX_BLOB_BYTES`].
    pub(crate) fn blob_limit(&self, key: &Key) -> u64 {
        lock(&self.declared)
            .get(key)
            .copied()
            .unwrap_or(MAX_BLOB_BYTES)
    }

    /// Forgets the declared size of blob `key`, now cached.
    pub(crate) fn forget_declared(&self, key: &Key) {
        lock(&self.declared).remove(key);
    }

    /// The upstream of repository `name` of proxy project `project`.
    pub(crate) async fn upstream(
        &self,
        state: &AppState,
        project: &Project,
        registry_id: i64,
        name: &str,
    ) -> Result<Upstream, ApiError> {
        let registries = state.store.registries();
        let registry = registries.get(registry_id).await?.ok_or_else(|| {
            ApiError::internal(format!(
                "the registry {registry_id} of a proxy project is gone"
            ))
        })?;
        let kind =
            RegistryType::parse(&registry.settings.kind).unwrap_or(RegistryType::DockerRegistry);
        let within = name
            .strip_prefix(project.name.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .unwrap_or(name);
        let repository = kind.upstream_repository(within);
        let kept = lock(&self.remotes)
            .get(&registry_id)
            .filter(|(stamp, _)| *stamp == registry.updated_at)
            .map(|(_, remote)| Arc::clone(remote));
        let remote = match kept {
            Some(remote) => remote,
            None => {
                let secret = registries
                    .access_secret(registry_id)
                    .await?
                    .unwrap_or_default();
                let settings = &registry.settings;
                let target = super::Target {
                    base: kind.api_base(&settings.url),
                    insecure: settings.insecure,
                    ca_certificate: &settings.ca_certificate,
                    credential: (!settings.access_key.is_empty())
                        .then_some((settings.access_key.as_str(), secret.as_str())),
                    deadlines: self.settings.deadlines,
                };
                let remote = Arc::new(Remote::new(&target).map_err(|why| {
                    unavailable(&Unavailable {
                        status: None,
                        reason: why.0,
                    })
                })?);
                lock(&self.remotes).insert(
                    registry_id,
                    (registry.updated_at.clone(), Arc::clone(&remote)),
                );
                remote
            }
        };
        let metadata: HashMap<String, String> = state
            .store
            .metadata()
            .list(project.id)
            .await?
            .into_iter()
            .collect();
        let setting = |key: &str| metadata.get(key).map(String::as_str);
        // Harbor's `proxy_speed_kb`: KiB per second from upstream; -1 or 0 is no limit.
        let speed = setting("proxy_speed_kb")
            .and_then(|kb| kb.parse::<u64>().ok())
            .filter(|&kb| kb > 0)
            .map(|kb| kb * 1024);
        // Harbor's `max_upstream_conn`: -1 (or unset) is no limit.
        let connections = setting("max_upstream_conn")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .map(|n| self.connection_limit(project.id, n));
        Ok(Upstream {
            remote,
            repository,
            speed,
            connections,
            local_on_not_found: setting("proxy_cache_local_on_not_found") == Some("true"),
        })
    }

    /// The places of project `project_id`'s `max_upstream_conn` of `limit`
    /// (new ones when the limit changed; fetches holding the old ones finish).
    pub(crate) fn connection_limit(&self, project_id: i64, limit: usize) -> Arc<Semaphore> {
        let mut connections = lock(&self.connections);
        match connections.get(&project_id) {
            Some((kept, places)) if *kept == limit => places.clone(),
            _ => {
                let places = Arc::new(Semaphore::new(limit));
                connections.insert(project_id, (limit, places.clone()));
                places
            }
        }
    }
}

/// The most bytes a fetch of `blob` may read: its declared size, within
/// [`MAX_BLOB_BYTES`].
pub(crate) fn declared_limit(blob: &Descriptor) -> u64 {
    u64::try_from(blob.size)
        .unwrap_or_default()
        .min(MAX_BLOB_BYTES)
}

/// 429 `TOOMANYREQUESTS` when upstream is rate-limiting, else 503 `UNAVAILABLE`.
pub(crate) fn unavailable(why: &Unavailable) -> ApiError {
    if why.rate_limited() {
        ApiError::new(
            ErrorKind::TooManyRequests,
            format!("the upstream registry is rate-limiting pulls and nothing is cached: {why}"),
        )
        .with_code(OciCode::TooManyRequests)
    } else {
        ApiError::new(
            ErrorKind::Unavailable,
            format!("the upstream registry is unavailable and nothing is cached: {why}"),
        )
        .with_code(OciCode::Unavailable)
    }
}
