//! Users of the OpenID provider (`auth_mode=oidc_auth`): what a sign-in
//! through the provider does (link or onboard the user, refresh the profile,
//! the groups and the administrator flag), and the CLI secret that stands in
//! for a password on `/v2/`, the token service and the API.

use std::sync::Arc;

use berth_auth::secret::{constant_time_eq, random_alphanumeric};
use berth_domain::model::group::GROUP_TYPE_OIDC;
use berth_domain::model::user::{validate_password, validate_username};
use berth_domain::model::{ADMIN_USER_ID, User};
use berth_domain::rbac::{Action, SystemResource};
use berth_domain::time::{unix_millis, unix_now};
use berth_store::repo::oidc::{NewOidcUser, OidcUser};
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorKind};
use crate::extract::Principal;
use crate::identity;
use crate::oidc::{IdToken, OIDC_AUTH, OidcSettings, Tokens};
use crate::state::AppState;

/// Who the provider says signed in, kept while they choose a username.
#[derive(Clone, Serialize, Deserialize)]
pub struct Identity {
    /// The provider's `sub` followed by its `iss`.
    pub subiss: String,
    /// The username the claims suggest.
    pub username: String,
    /// The e-mail address, if any.
    pub email: Option<String>,
    /// The display name.
    pub realname: String,
    /// The groups of the groups claim (unfiltered).
    pub groups: Vec<String>,
    /// The refresh token (empty without one).
    pub refresh_token: String,
    /// When the access token ends (unix seconds).
    pub token_expires_at: i64,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("subiss", &self.subiss)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// The identity a verified ID token and its tokens describe.
    pub fn of(settings: &OidcSettings, token: &IdToken, tokens: &Tokens) -> Self {
        let now = unix_now();
        let username = token
            .username(&settings.user_claim)
            .unwrap_or("")
            .to_string();
        Self {
            subiss: token.subiss(),
            realname: token.string("name").unwrap_or(&username).to_string(),
            email: token.string("email").map(str::to_lowercase),
            username,
            groups: token.groups(&settings.groups_claim),
            refresh_token: tokens.refresh_token.clone().unwrap_or_default(),
            token_expires_at: tokens
                .expires_in
                .map_or(token.expires_at, |secs| now.saturating_add(secs)),
        }
    }
}

/// How a sign-in through the provider ends.
#[derive(Debug)]
pub enum Outcome {
    /// The user, linked or just onboarded.
    SignedIn(Arc<User>),
    /// A new user, and `oidc_auto_onboard` is off: they choose a username.
    ChooseUsername(Identity),
}

/// The OIDC settings, when `oidc_auth` is the mode in effect and complete.
pub async fn active_settings(state: &AppState) -> Result<Option<OidcSettings>, ApiError> {
    let config = state.configuration().await?;
    if config.string("auth_mode") != OIDC_AUTH {
        return Ok(None);
    }
    let settings = OidcSettings::of(&config);
    Ok(settings.complete().then_some(settings))
}

/// A sign-in the provider vouched for: the linked user, refreshed (profile,
/// token, groups, administrator flag); else a new user, onboarded under the
/// claimed username when `oidc_auto_onboard` is on.
pub async fn sign_in(
    state: &AppState,
    settings: &OidcSettings,
    identity: Identity,
) -> Result<Outcome, ApiError> {
    let oidc = state.store.oidc();
    let Some(user_id) = oidc.user_id_by_subiss(&identity.subiss).await? else {
        if !settings.auto_onboard {
            return Ok(Outcome::ChooseUsername(identity));
        }
        let username = identity.username.clone();
        if username.is_empty() {
            return Err(ApiError::bad_request(format!(
                "the OIDC provider's ID token has no `{}` claim to name the user by",
                if settings.user_claim.is_empty() {
                    "preferred_username"
                } else {
                    &settings.user_claim
                }
            )));
        }
        return match onboard(state, settings, &identity, &username).await {
            Ok(user) => Ok(Outcome::SignedIn(user)),
            // The same person signing in twice at once (two tabs, two
            // instances): the other sign-in onboarded them; this one links.
            Err(err) if err.kind == ErrorKind::Conflict => {
                match oidc.user_id_by_subiss(&identity.subiss).await? {
                    Some(user_id) => signed_in_user(state, user_id).await.map(Outcome::SignedIn),
                    None => Err(err),
                }
            }
            Err(err) => Err(err),
        };
    };
    oidc.signed_in(
        user_id,
        identity.email.as_deref(),
        &identity.realname,
        &identity.refresh_token,
        identity.token_expires_at,
    )
    .await?;
    apply_groups(state, settings, user_id, &identity.groups).await?;
    signed_in_user(state, user_id).await.map(Outcome::SignedIn)
}

/// Creates the user of `identity` under `username` (Harbor's rules), with a
/// new CLI secret, then its groups.
pub async fn onboard(
    state: &AppState,
    settings: &OidcSettings,
    identity: &Identity,
    username: &str,
) -> Result<Arc<User>, ApiError> {
    let username = username.trim();
    validate_username(username)?;
    let user_id = state
        .store
        .oidc()
        .onboard(&NewOidcUser {
            username: username.to_string(),
            email: identity.email.clone(),
            realname: identity.realname.clone(),
            subiss: identity.subiss.clone(),
            secret: new_secret(),
            refresh_token: identity.refresh_token.clone(),
            token_expires_at: identity.token_expires_at,
        })
        .await?;
    tracing::info!(user_id, "onboarded a user of the OIDC provider");
    apply_groups(state, settings, user_id, &identity.groups).await?;
    signed_in_user(state, user_id).await
}

async fn signed_in_user(state: &AppState, user_id: i64) -> Result<Arc<User>, ApiError> {
    identity::forget_user(state, user_id);
    state
        .store
        .users()
        .find_by_id(user_id)
        .await?
        .map(Arc::new)
        .ok_or_else(ApiError::unauthorized)
}

/// The groups of the claim that `oidc_group_filter` keeps become the user's
/// OIDC groups (created as needed); membership of `oidc_admin_group` (among
/// all the claim's groups) makes a system administrator, its absence takes
/// that away.
async fn apply_groups(
    state: &AppState,
    settings: &OidcSettings,
    user_id: i64,
    groups: &[String],
) -> Result<(), ApiError> {
    let kept: Vec<String> = match group_filter(settings)? {
        Some(filter) => groups
            .iter()
            .filter(|g| filter.is_match(g))
            .cloned()
            .collect(),
        None => groups.to_vec(),
    };
    let groups_store = state.store.groups();
    let ids = groups_store
        .onboard_by_names(GROUP_TYPE_OIDC, &kept)
        .await?;
    groups_store.replace_memberships(user_id, &ids).await?;
    let admin = !settings.admin_group.is_empty() && groups.contains(&settings.admin_group);
    // Only a change: it ends the user's sessions and tokens elsewhere.
    let users = state.store.users();
    if user_id != ADMIN_USER_ID
        && let Some(user) = users.find_by_id(user_id).await?
        && user.sysadmin != admin
    {
        users.set_sysadmin(user_id, admin).await?;
    }
    Ok(())
}

/// `oidc_group_filter` as a regular expression (`None` when empty).
fn group_filter(settings: &OidcSettings) -> Result<Option<regex::Regex>, ApiError> {
    if settings.group_filter.is_empty() {
        return Ok(None);
    }
    regex::Regex::new(&settings.group_filter)
        .map(Some)
        .map_err(|e| ApiError::bad_request(format!("invalid oidc_group_filter: {e}")))
}

/// A new random CLI secret that passes Harbor's password rule.
pub fn new_secret() -> String {
    loop {
        let secret = random_alphanumeric(32);
        if validate_password(&secret).is_ok() {
            return secret;
        }
    }
}

/// The link of a user to the provider, for `users/current`.
pub async fn user_meta(state: &AppState, user_id: i64) -> Result<Option<OidcUser>, ApiError> {
    Ok(state.store.oidc().find(user_id).await?)
}

/// setCliSecret's rules: only under `oidc_auth` (412), the user themself or
/// an administrator, Harbor's password rule; an empty secret makes a new one.
pub async fn set_cli_secret(
    state: &AppState,
    principal: &Principal,
    user_id: i64,
    secret: &str,
) -> Result<(), ApiError> {
    let config = state.configuration().await?;
    let mode = config.string("auth_mode");
    if mode != OIDC_AUTH {
        return Err(ApiError::new(
            ErrorKind::Precondition,
            format!("unable to update CLI secret under authmode: {mode}"),
        ));
    }
    if principal.user().is_none_or(|caller| caller.id != user_id) {
        principal.require_system(SystemResource::User, Action::Update)?;
    }
    let secret = if secret.is_empty() {
        new_secret()
    } else {
        validate_password(secret)?;
        secret.to_string()
    };
    if !state.store.oidc().set_secret(user_id, &secret).await? {
        return Err(ApiError::not_found(format!(
            "the user {user_id} has not signed in through the OIDC provider"
        )));
    }
    identity::forget_user(state, user_id);
    Ok(())
}

/// Whether `secret` is the CLI secret of `user` and the provider still
/// vouches for them: their refresh token was checked within the check
/// interval, or is checked now by this instance (one instance claims each
/// check; the others, and a check the provider cannot answer, go on with the
/// last answer); without a refresh token, until the last access token ends.
pub async fn verify_cli_secret(
    state: &AppState,
    settings: &OidcSettings,
    user: &User,
    secret: &str,
) -> Result<bool, ApiError> {
    let Some(link) = state.store.oidc().find(user.id).await? else {
        return Ok(false);
    };
    if !constant_time_eq(link.secret.as_bytes(), secret.as_bytes()) {
        return Ok(false);
    }
    token_still_valid(state, settings, link).await
}

async fn token_still_valid(
    state: &AppState,
    settings: &OidcSettings,
    link: OidcUser,
) -> Result<bool, ApiError> {
    let interval = i64::try_from(state.signin.oidc_token_check.as_millis()).unwrap_or(i64::MAX);
    let now = unix_now();
    if link.refresh_token.is_empty() {
        return Ok(now < link.token_expires_at);
    }
    if unix_millis() < link.checked_ms.saturating_add(interval) {
        return Ok(true);
    }
    let store = state.store.oidc();
    // One instance asks the provider; the others go on with what was last known.
    if !store.claim_check(link.user_id, link.checked_ms).await? {
        return Ok(true);
    }
    let answer = match state.oidc.refresh(settings, &link.refresh_token).await {
        Ok(answer) => answer,
        Err(err) => {
            // The provider does not answer: what it last said holds until the next check.
            tracing::warn!(user_id = link.user_id, error = %err.message, "the OIDC provider could not check a refresh token");
            return Ok(true);
        }
    };
    let Some(tokens) = answer else {
        store.record_check(link.user_id, None).await?;
        tracing::info!(
            user_id = link.user_id,
            "the OIDC provider no longer accepts the user's refresh token: CLI secret refused"
        );
        return Ok(false);
    };
    let expires = tokens
        .expires_in
        .map_or(now, |secs| now.saturating_add(secs));
    let token = tokens.refresh_token.as_deref().unwrap_or("");
    store
        .record_check(link.user_id, Some((token, expires)))
        .await?;
    Ok(true)
}
