//! The LDAP directory integration: settings from the configuration, sign-in
//! through the directory, and onboarding of directory users and groups.

use std::sync::Arc;
use std::time::Duration;

use berth_auth::ldap::{self, DirectoryError, DirectoryUser, LdapSettings};
use berth_domain::model::{Configuration, DirectoryProfile, User, UserGroup};

use crate::error::{ApiError, ErrorKind};
use crate::state::AppState;

/// The `auth_mode` value that makes the directory verify passwords.
pub const LDAP_AUTH: &str = "ldap_auth";

/// The configuration, when its auth mode lets local users be created
/// (`db_auth`); otherwise the 403 Harbor's createUser answers: users then come
/// from the directory (or another provider).
pub async fn local_users_allowed(state: &AppState) -> Result<Configuration, ApiError> {
    let config = state.store.configurations().load().await?;
    let mode = config.string("auth_mode");
    if mode != "db_auth" {
        return Err(ApiError::forbidden(format!(
            "creating local user is not allowed under auth mode: {mode}"
        )));
    }
    Ok(config)
}

/// Harbor's rule for profile and password changes: under another auth mode
/// than the database's, users are the directory's to change; only the
/// built-in `admin` stays local.
pub async fn locally_modifiable(state: &AppState, id: i64) -> Result<(), ApiError> {
    let config = state.store.configurations().load().await?;
    if config.string("auth_mode") != "db_auth" && id != berth_domain::model::ADMIN_USER_ID {
        return Err(ApiError::forbidden(format!(
            "User with ID {id} can't be updated"
        )));
    }
    Ok(())
}

/// The directory settings held in the configuration.
pub fn settings(config: &Configuration) -> LdapSettings {
    LdapSettings {
        url: config.string("ldap_url").to_string(),
        search_dn: config.string("ldap_search_dn").to_string(),
        search_password: config.string("ldap_search_password").to_string(),
        base_dn: config.string("ldap_base_dn").to_string(),
        filter: config.string("ldap_filter").to_string(),
        uid_attribute: config.string("ldap_uid").to_string(),
        scope: config.int("ldap_scope"),
        timeout: Duration::from_secs(config.int("ldap_timeout").clamp(1, 300) as u64),
        verify_cert: config.flag("ldap_verify_cert"),
        starttls: config.flag("ldap_starttls"),
        group_base_dn: config.string("ldap_group_base_dn").to_string(),
        group_filter: config.string("ldap_group_search_filter").to_string(),
        group_name_attribute: config.string("ldap_group_attribute_name").to_string(),
        group_scope: config.int("ldap_group_search_scope"),
        group_admin_dn: config.string("ldap_group_admin_dn").to_string(),
        membership_attribute: config.string("ldap_group_membership_attribute").to_string(),
    }
}

/// Maps a directory failure: malformed settings or input are the client's (400),
/// a directory that fails or does not answer is an upstream failure (502).
pub fn error(err: DirectoryError) -> ApiError {
    match err {
        DirectoryError::Invalid(message) => ApiError::bad_request(message),
        DirectoryError::InvalidCredentials => ApiError::new(
            ErrorKind::BadGateway,
            "the LDAP directory refused the search credentials",
        ),
        DirectoryError::Unreachable(message) | DirectoryError::Failed(message) => {
            tracing::warn!(error = %message, "LDAP directory failure");
            ApiError::new(ErrorKind::BadGateway, format!("LDAP directory: {message}"))
        }
    }
}

fn profile(user: &DirectoryUser) -> DirectoryProfile {
    DirectoryProfile {
        username: user.username.clone(),
        email: Some(user.email.trim().to_lowercase()).filter(|e| !e.is_empty()),
        realname: if user.realname.is_empty() {
            user.username.clone()
        } else {
            user.realname.clone()
        },
        dn: user.dn.clone(),
    }
}

/// Creates or refreshes the local account of a directory user; refused for
/// a name Berth acts under itself (the user would pass for it).
pub async fn onboard_user(state: &AppState, user: &DirectoryUser) -> Result<User, ApiError> {
    if berth_domain::model::user::is_reserved_username(&user.username) {
        return Err(berth_domain::DomainError::Forbidden(format!(
            "the directory user {} has a name Berth acts under itself, which it cannot sign in as",
            user.username
        ))
        .into());
    }
    let user = state.store.users().onboard_ldap(&profile(user)).await?;
    crate::identity::forget_user(state, user.id);
    Ok(user)
}

/// Looks `username` up in the directory and onboards it; `None` if the directory does not know it.
pub async fn onboard_username(state: &AppState, username: &str) -> Result<Option<User>, ApiError> {
    let config = state.store.configurations().load().await?;
    match ldap::find_user(&settings(&config), username)
        .await
        .map_err(error)?
    {
        Some(found) => Ok(Some(onboard_user(state, &found).await?)),
        None => Ok(None),
    }
}

/// Looks a group DN up in the directory and onboards it; `None` if the directory does not know it.
pub async fn onboard_group(
    state: &AppState,
    dn: &str,
    name: Option<&str>,
) -> Result<Option<UserGroup>, ApiError> {
    let normalized = ldap::normalize_dn(dn);
    if let Some(group) = state.store.groups().find_by_ldap_dn(&normalized).await? {
        return Ok(Some(group));
    }
    let config = state.store.configurations().load().await?;
    let found = ldap::search_groups(&settings(&config), None, Some(dn))
        .await
        .map_err(error)?;
    let Some(group) = found.into_iter().next() else {
        return Ok(None);
    };
    let name = name.filter(|n| !n.is_empty()).unwrap_or(&group.name);
    Ok(Some(
        state.store.groups().onboard_ldap(&normalized, name).await?,
    ))
}

/// Verifies a password through the directory (search, then bind as the user),
/// onboards the user, applies `ldap_group_admin_dn` and refreshes group memberships.
pub async fn sign_in(
    state: &AppState,
    config: &Configuration,
    username: &str,
    password: &str,
) -> Result<Option<Arc<User>>, ApiError> {
    let settings = settings(config);
    let Some(found) = ldap::authenticate(&settings, username, password)
        .await
        .map_err(error)?
    else {
        return Ok(None);
    };
    let user = onboard_user(state, &found).await?;
    let groups: Vec<String> = found
        .groups
        .iter()
        .map(|dn| ldap::normalize_dn(dn))
        .collect();
    let admin_dn = ldap::normalize_dn(&settings.group_admin_dn);
    let is_admin = !settings.group_admin_dn.trim().is_empty() && groups.contains(&admin_dn);
    // As in Harbor, the directory gives the administrator role
    // (`admin_role_in_auth`); the flag stays what an administrator set.
    if user.admin_role_in_auth != is_admin {
        state
            .store
            .users()
            .set_admin_role_in_auth(user.id, is_admin)
            .await?;
        crate::identity::forget_user(state, user.id);
    }
    let group_ids = state.store.groups().ids_by_ldap_dns(&groups).await?;
    state
        .store
        .groups()
        .replace_memberships(user.id, &group_ids)
        .await?;
    Ok(state.store.users().find_by_id(user.id).await?.map(Arc::new))
}
