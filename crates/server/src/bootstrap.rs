//! Opening a data directory: secrets, database, migrations and the built-in admin.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use berth_auth::cache::CacheTimes;
use berth_auth::secret::{SecretKey, random_alphanumeric};
use berth_auth::{CredentialCache, SecretBox, TimedCache, TokenKeys};
use berth_domain::model::ADMIN_USER_ID;
use berth_store::s3::S3Client;
use berth_store::{BlobStore, ObjectBlobs, Store};

use crate::config::{BlobLocation, Settings};
use crate::outbound::{RestConfig, RestServices};
use crate::secrets;
use crate::signin::{SignInGuard, SignInSettings};
use crate::state::{AppState, Inner};

/// How long a verified Basic credential is trusted before it is hashed again,
/// and how long a cached one is used before the stored user is checked again
/// (the bound on how late another instance's password change takes effect).
const CREDENTIAL_TIMES: CacheTimes = CacheTimes {
    lifetime: Duration::from_secs(60),
    revalidate: Duration::from_secs(2),
};
/// How many verified credentials are kept at most.
const CREDENTIAL_CAPACITY: usize = 10_000;
/// How long a user read by id (for a token) is used without reading it again:
/// the bound on how late another instance's change to the user shows here.
const USER_TIMES: CacheTimes = CacheTimes {
    lifetime: Duration::from_secs(2),
    revalidate: Duration::from_secs(2),
};
/// How many users read by id are kept at most.
const USER_CAPACITY: usize = 10_000;

/// Connects to the database named by the settings and migrates it (with
/// `--no-migrate`: checks that it needs no migration, and changes nothing).
pub async fn open_store(settings: &Settings) -> anyhow::Result<Store> {
    secrets::create_private_dir(&settings.data_dir).context("creating the data directory")?;
    let url = settings.database_url()?;
    let store = Store::connect(&url)
        .await
        .context("connecting to the database (check --database-url / DATABASE_URL)")?;
    if settings.no_migrate {
        if let Err(differs) = store.check_schema().await? {
            anyhow::bail!("--no-migrate: {differs}");
        }
    } else {
        store.migrate().await.context("migrating the database")?;
    }
    Ok(store)
}

/// Opens the data directory and the database, creating what a first start needs.
pub async fn open(settings: &Settings) -> anyhow::Result<AppState> {
    let blobs = open_blobs(settings).await?;
    let store = open_store(settings).await?;
    let secrets = secrets::load_or_create(&settings.data_dir)?;
    let store = seal_secrets(store, &secrets.config_secret_key).await?;
    ensure_admin_password(&store).await?;
    crate::identity::prepare_dummy_hash()
        .await
        .map_err(|e| anyhow::anyhow!(e.message))?;
    // A collector that died (killed, or stopped with a server) leaves its run
    // and its claimed blobs: finish them now rather than at the next run.
    store
        .recover_gc(&blobs)
        .await
        .context("recovering an interrupted garbage collection")?;
    if secrets.master_key_generated {
        println!(
            "Generated master key (kept in {}): {}",
            settings.data_dir.join("secrets.json").display(),
            secrets.master_key
        );
    }
    let rest = RestServices::new(RestConfig::from_settings(settings))?;
    Ok(build_state(
        store,
        SecretKey::new(secrets.master_key),
        secrets.jwt_secret.as_bytes(),
        settings.jwt_expires_in,
        blobs,
        settings.blob_redirect,
        crate::upstream::cache::ProxySettings {
            ttl: Duration::from_secs(settings.proxy_cache_ttl.unsigned_abs()),
            spool_dir: settings.data_dir.join("spool"),
            deadlines: settings.peer_deadlines(),
        },
        settings.external_url(),
        rest,
        settings.signin(),
    ))
}

/// Gives the store the key that seals the secrets it keeps, seals those that
/// earlier versions stored in plain text (a SQL migration cannot encrypt, so
/// this runs at every start) and checks that every sealed one opens with the key.
pub async fn seal_secrets(store: Store, key: &str) -> anyhow::Result<Store> {
    let sealer = SecretBox::new(key).context("CONFIG_SECRET_KEY")?;
    let store = store.with_sealer(Arc::new(sealer));
    let sealed = store
        .configurations()
        .seal_plain_secrets()
        .await
        .context("sealing the secrets stored in the configuration")?;
    if sealed > 0 {
        tracing::info!(
            sealed,
            "encrypted configuration secrets stored in plain text"
        );
    }
    Ok(store)
}

/// Gives the built-in `admin` a password on first start: `HARBOR_ADMIN_PASSWORD`,
/// or a random one that is printed once.
async fn ensure_admin_password(store: &Store) -> anyhow::Result<()> {
    let admin = store.users().find_by_id(ADMIN_USER_ID).await?;
    if admin.is_none_or(|a| a.password_hash.is_some()) {
        return Ok(());
    }
    let given = crate::config::secret("HARBOR_ADMIN_PASSWORD").map_err(anyhow::Error::msg)?;
    let chosen = given.clone().unwrap_or_else(|| random_alphanumeric(16));
    let hash = crate::identity::hash_password(&chosen)
        .await
        .map_err(|_| anyhow::anyhow!("hashing the admin password failed"))?;
    if store
        .users()
        .set_password_if_unset(ADMIN_USER_ID, &hash)
        .await?
        && given.is_none()
    {
        println!("Generated password of the system administrator `admin`: {chosen}");
    }
    Ok(())
}

/// Assembles the application state from its parts (also used by the tests).
#[expect(
    clippy::too_many_arguments,
    reason = "one argument per part of the state, each from its own source"
)]
pub fn build_state(
    store: Store,
    master_key: SecretKey,
    jwt_secret: &[u8],
    jwt_expires_in: i64,
    blobs: BlobStore,
    redirect_downloads: bool,
    proxy: crate::upstream::cache::ProxySettings,
    external_url: String,
    rest: RestServices,
    signin: SignInSettings,
) -> AppState {
    let webhooks = crate::outbound::WebhookSender::new()
        .expect("the webhook clients' TLS set-up (ring, platform roots)");
    AppState::new(Inner {
        store,
        tokens: TokenKeys::new(jwt_secret, jwt_expires_in),
        credentials: CredentialCache::new(
            berth_auth::secret::random_bytes(32),
            CREDENTIAL_TIMES,
            CREDENTIAL_CAPACITY,
        ),
        users: TimedCache::new(USER_TIMES, USER_CAPACITY),
        signin: SignInGuard::new(signin),
        master_key,
        registry: crate::service::registry_state::RegistryState::new(
            blobs,
            redirect_downloads,
            jwt_secret,
            proxy,
        ),
        audit_queue: crate::audit::AuditQueue::default(),
        events: crate::events::Dispatcher::default(),
        webhooks,
        pull_notices: Default::default(),
        metrics: crate::metrics::Metrics::new(),
        configuration: TimedCache::new(crate::state::CONFIGURATION_TIMES, 1),
        roles: crate::kept::Kept::new(crate::state::KEPT_ROLES),
        oidc: crate::oidc::OidcClient::new()
            .expect("the OIDC clients' TLS set-up (ring, platform roots)"),
        external_url,
        rest,
    })
}

/// The blob store could not be opened (a missing directory that cannot be
/// made, a bucket that does not answer): `berth` exits with 2.
#[derive(Debug, thiserror::Error)]
#[error("blob storage {where_}: {reason}")]
pub struct StorageUnavailable {
    /// Which store.
    pub where_: String,
    /// Why.
    pub reason: String,
}

/// Opens the blob store the settings name and checks that it answers.
pub async fn open_blobs(settings: &Settings) -> anyhow::Result<BlobStore> {
    let blobs = match settings.blob_location() {
        BlobLocation::Directory(dir) => {
            std::fs::create_dir_all(&dir).map_err(|e| StorageUnavailable {
                where_: format!("directory {}", dir.display()),
                reason: format!("cannot be created: {e}"),
            })?;
            BlobStore::new(dir)
        }
        BlobLocation::S3(config) => {
            let client = S3Client::new(config).map_err(|e| StorageUnavailable {
                where_: "S3".into(),
                reason: e.to_string(),
            })?;
            BlobStore::Objects(ObjectBlobs::new(client))
        }
    };
    blobs.check().await.map_err(|reason| StorageUnavailable {
        where_: blobs.describe(),
        reason,
    })?;
    Ok(blobs)
}
