//! What the distribution surface keeps beside the shared state: blob storage,
//! the registry token keys and batched pull bookkeeping.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_auth::RegistryTokenKeys;
use berth_store::repo::manifests::Pull;
use berth_store::{BlobStore, Store};

/// How long pulls are gathered before one batched write.
const PULL_FLUSH_DELAY: Duration = Duration::from_secs(2);

type PullBatch = Arc<Mutex<HashMap<Pull, i64>>>;

/// The distribution surface's part of the application state.
#[derive(Debug)]
pub struct RegistryState {
    /// Blobs and staged uploads.
    pub blobs: BlobStore,
    /// Whether blob downloads are redirected to the store's own URLs.
    pub redirect_downloads: bool,
    /// Signs and verifies `/service/token` tokens.
    pub tokens: RegistryTokenKeys,
    /// What proxy-cache projects keep in memory.
    pub proxy: super::proxy::ProxyCache,
    /// Pulls not yet written.
    pulls: PullBatch,
}

impl RegistryState {
    /// The registry state over `blobs`, with token keys derived from
    /// `secret`, with proxy-cache projects behaving as `proxy` says.
    pub fn new(
        blobs: BlobStore,
        redirect_downloads: bool,
        secret: &[u8],
        proxy: super::proxy::ProxySettings,
    ) -> Self {
        Self {
            blobs,
            redirect_downloads,
            tokens: RegistryTokenKeys::new(secret),
            proxy: super::proxy::ProxyCache::new(proxy),
            pulls: PullBatch::default(),
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
