//! What every handler shares.

use std::ops::Deref;
use std::sync::Arc;

use berth_auth::secret::SecretKey;
use berth_auth::{CredentialCache, TimedCache, TokenKeys};
use berth_domain::model::User;
use berth_store::Store;

/// The application state: cheap to clone, one `Arc` inside.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Inner>);

/// The shared parts.
#[derive(Debug)]
pub struct Inner {
    /// The database.
    pub store: Store,
    /// Signs and verifies user tokens.
    pub tokens: TokenKeys,
    /// Recently verified Basic credentials.
    pub credentials: CredentialCache<crate::identity::Account>,
    /// Users recently read by id, for token-authenticated requests.
    pub users: TimedCache<i64, Arc<User>>,
    /// The throttle of failed sign-ins and the trusted proxies.
    pub signin: crate::signin::SignInGuard,
    /// The generator-rest master key.
    pub master_key: SecretKey,
    /// The URL clients reach this server at, without a trailing slash.
    pub external_url: String,
    /// What the generator-rest API talks to: mail server, identity providers, CORS.
    pub rest: crate::rest::RestServices,
    /// The distribution surface: blob storage, registry tokens, pull bookkeeping.
    pub registry: crate::registry::RegistryState,
    /// Audit log entries not yet written.
    pub audit_queue: crate::audit::AuditQueue,
    /// What `/metrics` reports.
    pub metrics: crate::metrics::Metrics,
}

impl AppState {
    /// Wraps the shared parts.
    pub fn new(inner: Inner) -> Self {
        Self(Arc::new(inner))
    }

    /// Notes an operation in the audit log (written a moment later, in a batch).
    pub fn audit(&self, event: crate::audit::Event<'_>) {
        self.audit_queue.record(&self.store, event);
    }
}

impl Deref for AppState {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}
