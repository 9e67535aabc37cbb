//! What every handler shares.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use berth_auth::cache::{CacheTimes, Lookup};
use berth_auth::secret::SecretKey;
use berth_auth::{CredentialCache, TimedCache, TokenKeys};
use berth_domain::model::{Configuration, User};
use berth_domain::rbac::Role;
use berth_store::{Store, StoreError, Topic};

use crate::kept::Kept;

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
    pub rest: crate::outbound::RestServices,
    /// The distribution surface: blob storage, registry tokens, pull bookkeeping.
    pub registry: crate::service::registry_state::RegistryState,
    /// Audit log entries not yet written.
    pub audit_queue: crate::audit::AuditQueue,
    /// Delivers the store's domain events to their subscribers.
    pub events: crate::events::Dispatcher,
    /// Sends webhook payloads to their receivers.
    pub webhooks: crate::outbound::WebhookSender,
    /// Pulls to announce to webhooks.
    pub pull_notices: crate::service::webhooks::PullNotices,
    /// What `/metrics` reports.
    pub metrics: crate::metrics::Metrics,
    /// The configuration in effect, as last read (see [`AppState::configuration`]).
    pub configuration: TimedCache<(), Arc<Configuration>>,
    /// Users' roles in projects, as last read (see [`AppState::roles_in`]).
    pub roles: Kept<(i64, i64), Vec<Role>>,
    /// The OpenID provider's documents and keys (`oidc_auth`).
    pub oidc: crate::oidc::OidcClient,
}

/// At most this many (project, user) roles are kept; past it, all are forgotten.
pub const KEPT_ROLES: usize = 4096;

/// How long the configuration read from the store is used before it is read
/// again: a change made on another instance acts within this time (one made
/// on this instance acts at once).
pub const CONFIGURATION_TIMES: CacheTimes = CacheTimes {
    lifetime: Duration::from_secs(1),
    revalidate: Duration::from_secs(1),
};

impl AppState {
    /// Wraps the shared parts.
    pub fn new(inner: Inner) -> Self {
        Self(Arc::new(inner))
    }

    /// The configuration in effect, read from the store at most once per
    /// [`CONFIGURATION_TIMES`] window: what per-request checks (read-only mode,
    /// token lifetimes) read instead of the database.
    pub async fn configuration(&self) -> Result<Arc<Configuration>, StoreError> {
        if let Lookup::Fresh(config) = self.configuration.get(&()) {
            return Ok(config);
        }
        let config = Arc::new(self.store.configurations().load().await?);
        self.configuration.put((), config.clone());
        Ok(config)
    }

    /// The roles user `user_id` holds in project `project_id` (directly or
    /// through groups), kept under the generation of [`Topic::Registry`]
    /// they were read at: a pull with Basic credentials costs no query for
    /// them, and any change of memberships (on PostgreSQL, made anywhere)
    /// moves the generation on.
    pub async fn roles_in(&self, project_id: i64, user_id: i64) -> Result<Vec<Role>, StoreError> {
        let generation = self.store.changes().generation(Topic::Registry);
        if let Some(roles) = self.roles.get(generation, &(project_id, user_id)) {
            return Ok(roles);
        }
        let roles = self.store.projects().roles_of(project_id, user_id).await?;
        self.roles
            .keep(generation, (project_id, user_id), roles.clone());
        Ok(roles)
    }

    /// Drops the kept configuration, after a change on this instance.
    pub fn forget_configuration(&self) {
        self.configuration.remove(&());
    }

    /// Notes an operation in the audit log (written a moment later, in a batch).
    pub fn audit(&self, event: crate::audit::Event<'_>) {
        self.audit_queue.record(self, event);
    }
}

impl Deref for AppState {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}
