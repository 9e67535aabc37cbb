//! What the registry keeps beside the database, below the surfaces that
//! serve it: blob storage, the registry token keys, batched pull
//! bookkeeping, the manifest lookups of recent pulls and the proxy cache's
//! memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_auth::RegistryTokenKeys;
use berth_domain::oci::Reference;
use berth_store::repo::manifests::{ManifestLookup, Pull};
use berth_store::{BlobStore, Store, StoreError, Topic};

use crate::kept::Kept;

/// How long pulls are gathered before one batched write.
const PULL_FLUSH_DELAY: Duration = Duration::from_secs(2);

type PullBatch = Arc<Mutex<HashMap<Pull, i64>>>;

/// The registry's part of the application state.
#[derive(Debug)]
pub struct RegistryState {
    /// Blobs and staged uploads.
    pub blobs: BlobStore,
    /// Whether blob downloads are redirected to the store's own URLs.
    pub redirect_downloads: bool,
    /// Signs and verifies `/service/token` tokens.
    pub tokens: RegistryTokenKeys,
    /// What proxy-cache projects keep in memory.
    pub proxy: crate::upstream::cache::ProxyCache,
    /// Pulls not yet written.
    pulls: PullBatch,
    /// Manifest lookups of recent pulls.
    pub lookups: Lookups,
}

/// At most this many manifest lookups are kept; past it, all are forgotten.
const LOOKUPS: usize = 4096;

/// `(project, repository, reference)`.
type LookupKey = (String, String, String);

/// The manifest lookups of recent pulls (project, repository, manifest and
/// signature policy, one query each), kept under the generation of
/// [`Topic::Registry`] they were read at, so a pull of a manifest read
/// before costs no query. The generation moves after every request that
/// changes something on this instance (the `changes` middleware), after the
/// proxy cache stores what it fetched, and, on PostgreSQL, whenever another
/// instance changes those tables (migration 0018): an entry is never served
/// after a change it may not show. Nothing is kept while other instances'
/// changes could go unheard.
#[derive(Debug)]
pub struct Lookups {
    kept: Kept<LookupKey, ManifestLookup>,
}

impl Default for Lookups {
    fn default() -> Self {
        Self {
            kept: Kept::new(LOOKUPS),
        }
    }
}

impl Lookups {
    /// The manifest lookup of `reference` in repository `repository` of
    /// project `project`: the kept one, or one read from `store` (and kept
    /// when it found a manifest).
    pub async fn lookup(
        &self,
        store: &Store,
        project: &str,
        repository: &str,
        reference: &Reference,
    ) -> Result<Option<ManifestLookup>, StoreError> {
        // Read before the query: a change that races it moves the generation
        // past the one the entry is kept under.
        let generation = store.changes().generation(Topic::Registry);
        let key = (
            project.to_string(),
            repository.to_string(),
            reference.to_string(),
        );
        if let Some(lookup) = self.kept.get(generation, &key) {
            return Ok(Some(lookup));
        }
        let found = store
            .registry()
            .manifest_lookup(project, repository, reference)
            .await?;
        if let Some(lookup) = &found
            && lookup.manifest.is_some()
        {
            self.kept.keep(generation, key, lookup.clone());
        }
        Ok(found)
    }
}

impl RegistryState {
    /// The registry state over `blobs`, with token keys derived from
    /// `secret`, with proxy-cache projects behaving as `proxy` says.
    pub fn new(
        blobs: BlobStore,
        redirect_downloads: bool,
        secret: &[u8],
        proxy: crate::upstream::cache::ProxySettings,
    ) -> Self {
        Self {
            blobs,
            redirect_downloads,
            tokens: RegistryTokenKeys::new(secret),
            proxy: crate::upstream::cache::ProxyCache::new(proxy),
            pulls: PullBatch::default(),
            lookups: Lookups::default(),
        }
    }

    /// Notes a manifest pull; the first pull of a batch schedules its write, so
    /// GETs stay read-only and pull times land within a few seconds.
    pub fn record_pull(&self, store: &Store, pull: Pull) {
        let first = {
            let mut pulls = self.pulls.lock().unwrap_or_else(|e| e.into_inner());
            let first = pulls.is_empty();
            *pulls.entry(pull).or_insert(0) += 1;
            first
        };
        if first && let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let store = store.clone();
            let batch = Arc::clone(&self.pulls);
            runtime.spawn(async move {
                tokio::time::sleep(PULL_FLUSH_DELAY).await;
                write_pulls(&store, drain(&batch)).await;
            });
        }
    }

    /// Writes the pulls gathered so far now (tests and shutdown).
    pub async fn flush_pulls(&self, store: &Store) {
        write_pulls(store, drain(&self.pulls)).await;
    }
}

fn drain(batch: &PullBatch) -> Vec<(Pull, i64)> {
    let mut pulls = batch.lock().unwrap_or_else(|e| e.into_inner());
    pulls.drain().collect()
}

async fn write_pulls(store: &Store, pulls: Vec<(Pull, i64)>) {
    if pulls.is_empty() {
        return;
    }
    if let Err(err) = store
        .registry()
        .record_pulls(&pulls, &berth_domain::time::now())
        .await
    {
        tracing::warn!(error = %err, "recording pulls failed");
    }
}
