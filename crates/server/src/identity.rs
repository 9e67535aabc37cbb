//! Who is calling: credentials in, a stored user out. Shared by all three surfaces.

use std::net::IpAddr;
use std::sync::{Arc, LazyLock, Mutex, mpsc};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use berth_auth::cache::Lookup;
use berth_auth::password;
use berth_domain::model::{ADMIN_USER_ID, Robot, User};
use tokio::sync::{Semaphore, oneshot};

use crate::directory;
use crate::error::ApiError;
use crate::oidc;
use crate::service;
use crate::state::AppState;

/// HTTP Basic credentials as sent.
#[derive(Clone)]
pub struct BasicCredentials {
    /// Username or e-mail address.
    pub login: String,
    /// The password, as sent.
    pub password: String,
}

impl std::fmt::Debug for BasicCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicCredentials")
            .field("login", &self.login)
            .finish_non_exhaustive()
    }
}

impl BasicCredentials {
    /// Parses the value of an `Authorization: Basic ...` header. The password is
    /// everything after the first `:` (Harbor and docker keep colons in passwords).
    pub fn parse(header_value: &str) -> Option<Self> {
        let (scheme, encoded) = header_value.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = STANDARD.decode(encoded.trim()).ok()?;
        let decoded = String::from_utf8(decoded).ok()?;
        let (login, password) = decoded.split_once(':')?;
        Some(Self {
            login: login.to_string(),
            password: password.to_string(),
        })
    }
}

/// The token of an `Authorization: Bearer ...` header value.
pub fn bearer_token(header_value: &str) -> Option<&str> {
    let (scheme, token) = header_value.trim().split_once(char::is_whitespace)?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// What a set of verified Basic credentials names.
#[derive(Debug, Clone)]
pub enum Account {
    /// A user (local, or of the directory).
    User(Arc<User>),
    /// A robot account.
    Robot(Arc<RobotLogin>),
}

impl Account {
    /// The account as the role model sees it.
    pub fn actor(&self) -> crate::access::Actor<'_> {
        match self {
            Self::User(user) => crate::access::Actor::User(user),
            Self::Robot(robot) => crate::access::Actor::Robot(&robot.robot),
        }
    }
}

/// A robot account as it signed in.
#[derive(Debug, Clone)]
pub struct RobotLogin {
    /// The name it signed in with: the configured prefix and its stored name.
    pub login: String,
    /// The account, with its permissions.
    pub robot: Robot,
}

/// Which kinds of account a surface lets sign in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepts {
    /// Users only (the generator-rest API and the portal).
    Users,
    /// Users and robot accounts (the Harbor API, `/v2/` and the token service).
    UsersAndRobots,
}

/// Verifies a user's login and password sent from `client`: [`verify_basic`]
/// for surfaces robot accounts cannot sign in to.
pub async fn verify_password(
    state: &AppState,
    client: IpAddr,
    login: &str,
    password: &str,
) -> Result<Option<Arc<User>>, ApiError> {
    Ok(
        match verify_basic(state, client, login, password, Accepts::Users).await? {
            Some(Account::User(user)) => Some(user),
            _ => None,
        },
    )
}

/// Verifies a login and password sent from `client` (every surface's
/// password sign-in comes here); `None` when they do not name an account of
/// a kind `accepts` with that password, 429 when failed sign-ins of this
/// client or account are throttled. A login that starts with the configured
/// robot prefix (`robot$`) names a robot account; robots that are disabled or
/// expired do not sign in.
///
/// The throttle is asked first, before the credential cache (so a throttled
/// client cannot learn that a password is right from a cached answer) and
/// before any hash. A recent successful verification is answered from the
/// credential cache, after checking that the account has not changed (a
/// user's `auth_version`, a robot's secret); anything else is verified
/// slowly, one attempt per (account, address) at a time, counted as a
/// failure unless it succeeds.
pub async fn verify_basic(
    state: &AppState,
    client: IpAddr,
    login: &str,
    password: &str,
    accepts: Accepts,
) -> Result<Option<Account>, ApiError> {
    let throttle = &state.signin.throttle;
    throttle
        .check(client, login)
        .map_err(ApiError::too_many_requests)?;
    if let Some(account) = cached(state, login, password).await? {
        return Ok(accepted(account, accepts));
    }
    let _turn = throttle.turn(client, login).await;
    // A concurrent sign-in with the same credentials may just have verified them.
    if let Some(account) = cached(state, login, password).await? {
        return Ok(accepted(account, accepts));
    }
    let attempt = throttle
        .begin(client, login)
        .map_err(ApiError::too_many_requests)?;
    let verified = match verify_uncached(state, login, password, accepts).await {
        Ok(verified) => verified,
        Err(err) => {
            throttle.settle(attempt, false);
            return Err(err);
        }
    };
    match &verified {
        Some(account) => {
            throttle.settle(attempt, true);
            state.credentials.put(login, password, account.clone());
        }
        None => tracing::info!(%client, "failed sign-in"),
    }
    Ok(verified)
}

fn accepted(account: Account, accepts: Accepts) -> Option<Account> {
    match (&account, accepts) {
        (Account::Robot(_), Accepts::Users) => None,
        _ => Some(account),
    }
}

/// The account these credentials verified as recently, if the credential
/// cache has them and the account has not changed since: a user's
/// `auth_version` is the same, a robot still has that secret and may sign in.
async fn cached(
    state: &AppState,
    login: &str,
    password: &str,
) -> Result<Option<Account>, ApiError> {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    match state.credentials.get(login, password) {
        Lookup::Fresh(Account::Robot(robot)) if !robot.robot.usable_at(now) => {
            state.credentials.remove(login, password);
            Ok(None)
        }
        Lookup::Fresh(account) => Ok(Some(account)),
        Lookup::Stale(Account::User(cached)) => {
            if let Some(user) = state.store.users().find_by_id(cached.id).await?
                && user.auth_version == cached.auth_version
                && still_vouched_for(state, &user, password).await?
            {
                let account = Account::User(Arc::new(user));
                state.credentials.refresh(login, password, account.clone());
                return Ok(Some(account));
            }
            state.credentials.remove(login, password);
            Ok(None)
        }
        Lookup::Stale(Account::Robot(cached)) => {
            if let Some(robot) = state.store.robots().get(cached.robot.id).await?
                && robot.secret_hash == cached.robot.secret_hash
                && robot.usable_at(now)
            {
                let account = Account::Robot(Arc::new(RobotLogin {
                    login: cached.login.clone(),
                    robot,
                }));
                state.credentials.refresh(login, password, account.clone());
                return Ok(Some(account));
            }
            state.credentials.remove(login, password);
            Ok(None)
        }
        Lookup::Miss => Ok(None),
    }
}

/// Under `oidc_auth`, whether a cached sign-in of a provider's user still
/// holds: the password is still the user's CLI secret and the provider still
/// vouches for the user (see [`service::oidc::verify_cli_secret`]). Any other
/// user (and any user under another mode) holds.
async fn still_vouched_for(
    state: &AppState,
    user: &User,
    password: &str,
) -> Result<bool, ApiError> {
    if user.id == ADMIN_USER_ID {
        return Ok(true);
    }
    match service::oidc::active_settings(state).await? {
        Some(settings) => service::oidc::verify_cli_secret(state, &settings, user, password).await,
        None => Ok(true),
    }
}

/// The user an OpenID provider's ID token names, under `oidc_auth`: the
/// token verified (signature, issuer, audience, expiry) and its subject
/// linked to a user who signed in before.
pub async fn verify_id_token(state: &AppState, token: &str) -> Result<Option<Arc<User>>, ApiError> {
    let Some(settings) = service::oidc::active_settings(state).await? else {
        return Ok(None);
    };
    let id_token = match state.oidc.verify_id_token(&settings, token, None).await {
        Ok(id_token) => id_token,
        Err(oidc::TokenError::Invalid(why)) => {
            tracing::debug!(%why, "bearer token refused");
            return Ok(None);
        }
        Err(oidc::TokenError::Provider(why)) => return Err(oidc::provider_failed(why)),
    };
    let Some(user_id) = state
        .store
        .oidc()
        .user_id_by_subiss(&id_token.subiss())
        .await?
    else {
        return Ok(None);
    };
    user_by_id(state, user_id).await
}

/// The slow path of [`verify_basic`]: a password hash, or the directory in
/// `ldap_auth` mode (for everyone but the built-in admin and robots).
async fn verify_uncached(
    state: &AppState,
    login: &str,
    password: &str,
    accepts: Accepts,
) -> Result<Option<Account>, ApiError> {
    let config = state.store.configurations().load().await?;
    if accepts == Accepts::UsersAndRobots
        && let Some(name) = login.strip_prefix(config.string("robot_name_prefix"))
    {
        return verify_robot(state, login, name, password).await;
    }
    let found = state.store.users().find_by_login(login).await?;
    let mode = config.string("auth_mode");
    if found.as_ref().is_none_or(|u| u.id != ADMIN_USER_ID) && mode == directory::LDAP_AUTH {
        let user = directory::sign_in(state, &config, login, password).await?;
        return Ok(user.map(Account::User));
    }
    if mode == oidc::OIDC_AUTH
        && let Some(user) = found.as_ref().filter(|u| u.id != ADMIN_USER_ID)
    {
        // Users of the provider have no password here: their CLI secret is one.
        let settings = oidc::OidcSettings::of(&config);
        let usable = service::oidc::verify_cli_secret(state, &settings, user, password).await?;
        return Ok(usable.then(|| Account::User(Arc::new(user.clone()))));
    }
    // An unknown user, or one without a local password, costs a hash too, so
    // that the answer's timing does not tell which logins exist.
    let Some(user) = found else {
        check_dummy_password(password).await?;
        return Ok(None);
    };
    let Some(stored) = user.password_hash.clone() else {
        check_dummy_password(password).await?;
        return Ok(None);
    };
    let matches = check_password(password, &stored).await?;
    Ok(matches.then(|| Account::User(Arc::new(user))))
}

/// A robot's secret, checked with the same slow hash as a password (and a
/// dummy one for an unknown name); a disabled or expired robot is refused
/// after the hash, so the timing does not tell which robots exist.
async fn verify_robot(
    state: &AppState,
    login: &str,
    name: &str,
    secret: &str,
) -> Result<Option<Account>, ApiError> {
    let Some(robot) = state.store.robots().find_by_name(name).await? else {
        check_dummy_password(secret).await?;
        return Ok(None);
    };
    let matches = check_password(secret, &robot.secret_hash).await?;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    Ok((matches && robot.usable_at(now)).then(|| {
        Account::Robot(Arc::new(RobotLogin {
            login: login.to_string(),
            robot,
        }))
    }))
}

/// Password hashes computed at once: one per core. An argon2id hash walks
/// 19 MiB of memory; running more at once than there are cores only evicts
/// each other's memory from the caches, so every sign-in waits longer.
static HASH_SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(hash_threads()));

/// The slots every password hash of this process waits for. Holding them all
/// stops every hash, which is how tests show that a refusal computes none.
pub fn hash_slots() -> &'static Semaphore {
    &HASH_SLOTS
}

fn hash_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// A hash to run, and where its result goes.
type HashJob = Box<dyn FnOnce() + Send>;

/// The threads that compute password hashes, one per hash slot: always the
/// same ones, because each keeps an argon2id hash's 19 MiB of working memory
/// for its next hash (`berth_auth::password`). On tokio's blocking pool every
/// thread that ever hashed would keep its own.
static HASHERS: LazyLock<mpsc::Sender<HashJob>> = LazyLock::new(|| {
    let (jobs, queue) = mpsc::channel::<HashJob>();
    let queue = Arc::new(Mutex::new(queue));
    for i in 0..hash_threads() {
        let queue = queue.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("berth-hash-{i}"))
            .spawn(move || {
                loop {
                    let job = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok(job) = job else { return };
                    // A panicking hash drops its result sender (the caller
                    // answers 500); the thread lives on for the next one.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            });
        if let Err(err) = spawned {
            tracing::error!(%err, "cannot start a password hashing thread");
        }
    }
    jobs
});

/// Runs a password hash on the hashing threads, once a hash slot is free.
async fn hashing<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let _slot = HASH_SLOTS.acquire().await.map_err(ApiError::internal)?;
    let (done, result) = oneshot::channel();
    HASHERS
        .send(Box::new(move || {
            let _ = done.send(work());
        }))
        .map_err(ApiError::internal)?;
    result.await.map_err(ApiError::internal)
}

/// Hashes a password off the async workers.
pub async fn hash_password(password: &str) -> Result<String, ApiError> {
    let password = password.to_string();
    hashing(move || password::hash_password(&password)).await
}

/// Whether `password` matches the stored hash, checked off the async workers.
pub async fn check_password(password: &str, stored: &str) -> Result<bool, ApiError> {
    let (password, stored) = (password.to_string(), stored.to_string());
    hashing(move || password::verify_password(&password, &stored)).await
}

/// [`check_password`] against [`password::dummy_hash`], which is made (the
/// first time) on a hashing thread too, in the memory it keeps.
async fn check_dummy_password(password: &str) -> Result<bool, ApiError> {
    let password = password.to_string();
    hashing(move || password::verify_password(&password, password::dummy_hash())).await
}

/// Makes the dummy hash ahead of the first sign-in of an unknown user, so
/// that one costs one hash like every later one.
pub async fn prepare_dummy_hash() -> Result<(), ApiError> {
    hashing(|| {
        password::dummy_hash();
    })
    .await
}

/// The user a user token names, if the token is valid, the user still exists
/// and the token was issued after the user's last password, role or deletion
/// change (its `iat` is later than the user's `tokens_valid_after`).
pub async fn verify_user_token(
    state: &AppState,
    token: &str,
) -> Result<Option<Arc<User>>, ApiError> {
    let Ok(claims) = state.tokens.verify_user(token) else {
        return Ok(None);
    };
    let user = user_by_id(state, claims.id).await?;
    Ok(user.filter(|user| claims.iat > user.tokens_valid_after))
}

/// Signs a user token for `user`. Its `iat` is now, or the second after the
/// user's `tokens_valid_after` when that is not yet past (a token issued in
/// the second of a password change must outlive it, while one issued before
/// the change in that same second must not).
pub fn issue_user_token(state: &AppState, user: &User) -> String {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let iat = now.max(user.tokens_valid_after.saturating_add(1));
    state.tokens.sign_user(user.id, iat)
}

/// The user with this id, from the user cache when it was read within the
/// revalidation window (see `bootstrap::USER_TIMES`). A change that races the
/// read below can leave the value it replaced cached; the window bounds that
/// too, as it bounds changes made by other instances.
async fn user_by_id(state: &AppState, id: i64) -> Result<Option<Arc<User>>, ApiError> {
    if let Lookup::Fresh(user) = state.users.get(&id) {
        return Ok(Some(user));
    }
    let found = state.store.users().find_by_id(id).await?.map(Arc::new);
    match &found {
        Some(user) => state.users.put(id, user.clone()),
        None => state.users.remove(&id),
    }
    Ok(found)
}

/// Drops everything cached about a user who just changed on this instance
/// (profile, password, administrator flag or existence), so the change takes
/// effect here at once.
pub fn forget_user(state: &AppState, user_id: i64) {
    state
        .credentials
        .forget(|account| matches!(account, Account::User(user) if user.id == user_id));
    state.users.remove(&user_id);
}

/// Drops the cached sign-ins of a robot that just changed on this instance
/// (secret, permissions, disabled flag, existence).
pub fn forget_robot(state: &AppState, robot_id: i64) {
    state
        .credentials
        .forget(|account| matches!(account, Account::Robot(robot) if robot.robot.id == robot_id));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_keeps_colons_in_the_password() {
        let value = format!("Basic {}", STANDARD.encode("alice:pa:ss"));
        let creds = BasicCredentials::parse(&value).unwrap();
        assert_eq!(creds.login, "alice");
        assert_eq!(creds.password, "pa:ss");
        assert!(BasicCredentials::parse("Bearer x").is_none());
        assert!(BasicCredentials::parse("Basic !!!").is_none());
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer   abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
    }
}
