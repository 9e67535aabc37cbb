//! Harbor's users, changed the same way from every surface: creating a local
//! user, their profile, password and administrator flag, and deleting one.
//! Each change forgets what this instance kept about the user.

use berth_domain::model::user::{validate_password, validate_profile, validate_username};
use berth_domain::model::{ADMIN_USER_ID, NewUser, User};
use berth_domain::rbac::{Action, SystemResource};

use crate::error::ApiError;
use crate::extract::Principal;
use crate::identity;
use crate::state::AppState;

/// A local user to create.
#[derive(Debug, Default, Clone)]
pub struct LocalUser {
    /// Their sign-in name.
    pub username: String,
    /// Their e-mail address.
    pub email: String,
    /// Their full name.
    pub realname: String,
    /// A comment (empty: none).
    pub comment: String,
    /// Their password, in clear (hashed here).
    pub password: String,
}

/// The 404 of a user that does not exist.
pub fn user_not_found(id: i64) -> ApiError {
    ApiError::not_found(format!("user {id} not found"))
}

/// Passes user `id` themself (`true`) and callers who may do `action` on
/// users (`false`: system administrators, robots with that system
/// permission); 401/403 otherwise, as Harbor's user operations answer.
pub fn require_self_or(principal: &Principal, id: i64, action: Action) -> Result<bool, ApiError> {
    if principal.user().is_some_and(|caller| caller.id == id) {
        return Ok(true);
    }
    principal.require_system(SystemResource::User, action)?;
    Ok(false)
}

/// What the generator-rest `q` searches: the e-mail and the name, normalized as there.
fn keywords(email: &str, realname: &str) -> String {
    berth_domain::rest_query::keywords_of([Some(email), Some(realname)])
}

/// createUser's rules: local users only, administrators unless
/// self-registration is on, Harbor's validation.
pub async fn create(
    state: &AppState,
    principal: &Principal,
    new: &LocalUser,
) -> Result<User, ApiError> {
    let config = crate::directory::local_users_allowed(state).await?;
    if !config.flag("self_registration") {
        principal.require_system(SystemResource::User, Action::Create)?;
    }
    validate_username(&new.username)?;
    validate_profile(&new.email, &new.realname, &new.comment)?;
    validate_password(&new.password)?;
    let hash = identity::hash_password(&new.password).await?;
    let user = state
        .store
        .users()
        .create(&NewUser {
            keywords: keywords(&new.email, &new.realname),
            username: new.username.clone(),
            email: Some(new.email.clone()),
            realname: Some(new.realname.clone()),
            comment: Some(new.comment.clone()).filter(|c| !c.is_empty()),
            password_hash: Some(hash),
            ..NewUser::default()
        })
        .await?;
    Ok(user)
}

/// Replaces `user`'s e-mail, real name and comment (the user themself or an
/// administrator; local users only).
pub async fn update_profile(
    state: &AppState,
    principal: &Principal,
    user: &User,
    email: &str,
    realname: &str,
    comment: &str,
) -> Result<(), ApiError> {
    require_self_or(principal, user.id, Action::Update)?;
    crate::directory::locally_modifiable(state, user.id).await?;
    validate_profile(email, realname, comment)?;
    if !state
        .store
        .users()
        .update_harbor_profile(
            user.id,
            email,
            realname,
            comment,
            &keywords(email, realname),
        )
        .await?
    {
        return Err(user_not_found(user.id));
    }
    identity::forget_user(state, user.id);
    Ok(())
}

/// updateUserPassword's rules for user `id`: users give their `old`
/// password; administrators need none for others.
pub async fn set_password(
    state: &AppState,
    principal: &Principal,
    id: i64,
    old: &str,
    new: &str,
) -> Result<(), ApiError> {
    let own = require_self_or(principal, id, Action::Update)?;
    crate::directory::locally_modifiable(state, id).await?;
    let user = state
        .store
        .users()
        .find_by_id(id)
        .await?
        .ok_or_else(|| user_not_found(id))?;
    let stored = user.password_hash.clone().unwrap_or_default();
    if own {
        let matches = !stored.is_empty() && identity::check_password(old, &stored).await?;
        if !matches {
            return Err(ApiError::forbidden("the old password is incorrect"));
        }
    }
    validate_password(new)?;
    if new == old && own {
        return Err(ApiError::bad_request(
            "the new password can not be same with the old one",
        ));
    }
    if !store_password(state, id, new).await? {
        return Err(user_not_found(id));
    }
    Ok(())
}

/// Hashes and stores `password` as user `id`'s (the caller checked the
/// rules of its surface); `false` when the user is gone.
pub async fn store_password(state: &AppState, id: i64, password: &str) -> Result<bool, ApiError> {
    let hash = identity::hash_password(password).await?;
    let stored = state.store.users().set_password(id, &hash).await?;
    identity::forget_user(state, id);
    Ok(stored)
}

/// Sets the password of the user whose reset token hashes to `token_hash`
/// and ends all their resets; the user's id, `None` for an unknown token.
/// An unknown token costs no password hashing.
pub async fn redeem_reset(
    state: &AppState,
    token_hash: &str,
    password: &str,
) -> Result<Option<i64>, ApiError> {
    let resets = state.store.password_resets();
    if resets.find_user_id(token_hash).await?.is_none() {
        return Ok(None);
    }
    let password_hash = identity::hash_password(password).await?;
    let user_id = resets.redeem(token_hash, &password_hash).await?;
    if let Some(id) = user_id {
        identity::forget_user(state, id);
    }
    Ok(user_id)
}

/// Replaces the generator-rest `name` and `picture` of user `id`; the user
/// as stored, `None` when gone.
pub async fn update_rest_profile(
    state: &AppState,
    id: i64,
    name: Option<&str>,
    picture: Option<&str>,
    keywords: &str,
) -> Result<Option<User>, ApiError> {
    let user = state
        .store
        .users()
        .update_profile(id, name, picture, keywords)
        .await?;
    identity::forget_user(state, id);
    Ok(user)
}

/// Marks user `id` deleted (the caller checked who may); `false` when the
/// user is gone.
pub async fn tombstone(state: &AppState, id: i64) -> Result<bool, ApiError> {
    let done = state.store.users().tombstone(id).await?;
    identity::forget_user(state, id);
    Ok(done)
}

/// setUserSysAdmin's rules: administrators grant or revoke it; the built-in
/// admin keeps it.
pub async fn set_sysadmin(
    state: &AppState,
    principal: &Principal,
    id: i64,
    flag: bool,
) -> Result<(), ApiError> {
    principal.require_system(SystemResource::User, Action::Update)?;
    if id == ADMIN_USER_ID && !flag {
        return Err(ApiError::forbidden(
            "the built-in admin cannot lose its administrator role",
        ));
    }
    if !state.store.users().set_sysadmin(id, flag).await? {
        return Err(user_not_found(id));
    }
    identity::forget_user(state, id);
    Ok(())
}

/// deleteUser's rules: administrators mark a user deleted, not themselves
/// nor the built-in admin.
pub async fn delete(state: &AppState, principal: &Principal, id: i64) -> Result<(), ApiError> {
    principal.require_system(SystemResource::User, Action::Delete)?;
    if principal.user().is_some_and(|caller| caller.id == id) || id == ADMIN_USER_ID {
        return Err(ApiError::forbidden(format!(
            "the user {id} cannot be deleted"
        )));
    }
    if !tombstone(state, id).await? {
        return Err(user_not_found(id));
    }
    Ok(())
}
