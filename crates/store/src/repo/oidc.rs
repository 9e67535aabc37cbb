//! The `oidc_users` and `oidc_logins` tables: users of the OpenID provider
//! (Harbor's `oidc_user` with its CLI secret and token) and sign-ins under way.

use berth_domain::DomainError;
use berth_domain::time;

use crate::Store;
use crate::error::StoreResult;

/// A user's link to the provider, secrets opened.
#[derive(Clone, PartialEq, Eq)]
pub struct OidcUser {
    /// The row's id (Harbor's `oidc_user_meta.id`).
    pub id: i64,
    /// The user.
    pub user_id: i64,
    /// The provider's `sub` followed by its `iss`.
    pub subiss: String,
    /// The CLI secret.
    pub secret: String,
    /// The provider's refresh token (empty without one).
    pub refresh_token: String,
    /// When the last access token ends (unix seconds).
    pub token_expires_at: i64,
    /// When the provider was last asked about the token (unix milliseconds).
    pub checked_ms: i64,
    /// Creation time, store format.
    pub creation_time: String,
    /// Last update time, store format.
    pub update_time: String,
}

impl std::fmt::Debug for OidcUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcUser")
            .field("user_id", &self.user_id)
            .field("subiss", &self.subiss)
            .finish_non_exhaustive()
    }
}

/// A user of the provider to create.
#[derive(Clone)]
pub struct NewOidcUser {
    /// The chosen username.
    pub username: String,
    /// The e-mail address the provider gave, if any (dropped if another user has it).
    pub email: Option<String>,
    /// The display name.
    pub realname: String,
    /// The provider's `sub` followed by its `iss`.
    pub subiss: String,
    /// The first CLI secret.
    pub secret: String,
    /// The refresh token (empty without one).
    pub refresh_token: String,
    /// When the access token ends (unix seconds).
    pub token_expires_at: i64,
}

/// A sign-in between the redirect to the provider and its return.
#[derive(Clone, PartialEq, Eq)]
pub struct OidcLogin {
    /// The `state` sent.
    pub state: String,
    /// The `nonce` sent.
    pub nonce: String,
    /// The PKCE verifier.
    pub verifier: String,
    /// Where to go once signed in (a local path).
    pub redirect: String,
    /// The verified identity waiting for a username (opened JSON; empty before).
    pub pending: String,
}

impl std::fmt::Debug for OidcLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcLogin")
            .field("redirect", &self.redirect)
            .finish_non_exhaustive()
    }
}

/// How long a sign-in may take at the provider, and to choose a username.
pub const LOGIN_TTL_SECS: i64 = 15 * 60;

/// How many sign-ins may be under way at once; past it the oldest are
/// dropped (their browsers start again), so anonymous sign-ins that are
/// never finished cannot fill the database.
pub const MAX_LOGINS: i64 = 4096;

/// Access to the OIDC tables.
pub struct Oidc<'a>(&'a Store);

impl Store {
    /// The OIDC repository.
    pub fn oidc(&self) -> Oidc<'_> {
        Oidc(self)
    }
}

fn secret_context(user_id: i64) -> String {
    format!("oidc_users/{user_id}/secret")
}

fn token_context(user_id: i64) -> String {
    format!("oidc_users/{user_id}/refresh_token")
}

const LOGIN_CONTEXT: &str = "oidc_logins/pending";

type OidcRow = (i64, i64, String, String, String, i64, i64, String, String);

const OIDC_COLUMNS: &str = "o.id, o.user_id, o.subiss, o.secret, o.refresh_token, \
     o.token_expires_at, o.checked_ms, o.creation_time, o.update_time";

impl Oidc<'_> {
    fn opened(&self, row: OidcRow) -> StoreResult<OidcUser> {
        let (id, user_id, subiss, secret, token, token_expires_at, checked_ms, created, updated) =
            row;
        let refresh_token = if token.is_empty() {
            token
        } else {
            self.0.open_secret(&token_context(user_id), &token)?
        };
        Ok(OidcUser {
            id,
            user_id,
            subiss,
            secret: self.0.open_secret(&secret_context(user_id), &secret)?,
            refresh_token,
            token_expires_at,
            checked_ms,
            creation_time: created,
            update_time: updated,
        })
    }

    fn sealed_token(&self, user_id: i64, token: &str) -> StoreResult<String> {
        if token.is_empty() {
            return Ok(String::new());
        }
        self.0.seal_secret(&token_context(user_id), token)
    }

    /// The link of `user_id`, if the user came from the provider.
    pub async fn find(&self, user_id: i64) -> StoreResult<Option<OidcUser>> {
        let sql = format!(
            "SELECT {OIDC_COLUMNS} FROM oidc_users o JOIN users u ON u.id = o.user_id \
             WHERE o.user_id = $1 AND u.deleted = 0"
        );
        let row: Option<OidcRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .fetch_optional(&self.0.pool)
            .await?;
        row.map(|row| self.opened(row)).transpose()
    }

    /// The live user linked to the provider's account `subiss`.
    pub async fn user_id_by_subiss(&self, subiss: &str) -> StoreResult<Option<i64>> {
        let id = sqlx::query_scalar(
            "SELECT o.user_id FROM oidc_users o JOIN users u ON u.id = o.user_id \
             WHERE o.subiss = $1 AND u.deleted = 0",
        )
        .bind(subiss)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(id)
    }

    /// Creates the user and its link in one transaction. A username (or
    /// account) already taken is a `Conflict` with Harbor's message, and
    /// nothing is created; an e-mail address another user has is dropped.
    pub async fn onboard(&self, new: &NewOidcUser) -> StoreResult<i64> {
        let now = time::now();
        let taken = || {
            DomainError::Conflict(
                "Conflict, the user with same username or email has been onboarded".into(),
            )
        };
        let mut tx = self.0.begin_write().await?;
        let linked: Option<i64> = sqlx::query_scalar(
            "SELECT o.user_id FROM oidc_users o JOIN users u ON u.id = o.user_id \
             WHERE o.subiss = $1 AND u.deleted = 0",
        )
        .bind(&new.subiss)
        .fetch_optional(&mut *tx)
        .await?;
        if linked.is_some() {
            return Err(taken().into());
        }
        let name_taken: Option<i64> =
            sqlx::query_scalar("SELECT id FROM users WHERE username = $1 AND deleted = 0")
                .bind(&new.username)
                .fetch_optional(&mut *tx)
                .await?;
        if name_taken.is_some() {
            return Err(taken().into());
        }
        let email = match &new.email {
            Some(email) => {
                let other: Option<i64> = sqlx::query_scalar(
                    "SELECT id FROM users WHERE LOWER(email) = LOWER($1) AND deleted = 0",
                )
                .bind(email)
                .fetch_optional(&mut *tx)
                .await?;
                other.is_none().then_some(email.as_str())
            }
            None => None,
        };
        let user_id: i64 = sqlx::query_scalar(
            "INSERT INTO users (username, email, realname, keywords, created_at, updated_at) \
             VALUES ($1, $2, $3, '', $4, $4) RETURNING id",
        )
        .bind(&new.username)
        .bind(email)
        .bind(&new.realname)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await
        .map_err(|err| crate::error::conflict_on_unique(err, || taken().to_string()))?;
        sqlx::query(
            "INSERT INTO oidc_users (user_id, subiss, secret, refresh_token, token_expires_at, \
             checked_ms, creation_time, update_time) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
        )
        .bind(user_id)
        .bind(&new.subiss)
        .bind(self.0.seal_secret(&secret_context(user_id), &new.secret)?)
        .bind(self.sealed_token(user_id, &new.refresh_token)?)
        .bind(new.token_expires_at)
        .bind(time::unix_millis())
        .bind(&now)
        .execute(&mut *tx)
        .await
        .map_err(|err| crate::error::conflict_on_unique(err, || taken().to_string()))?;
        tx.commit().await?;
        Ok(user_id)
    }

    /// A sign-in's refresh of what the provider said: the profile (e-mail
    /// only if no other user has it) and the token, confirmed now.
    pub async fn signed_in(
        &self,
        user_id: i64,
        email: Option<&str>,
        realname: &str,
        refresh_token: &str,
        token_expires_at: i64,
    ) -> StoreResult<()> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        sqlx::query(
            "UPDATE users SET realname = $1, updated_at = $2 WHERE id = $3 AND realname <> $1",
        )
        .bind(realname)
        .bind(&now)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        if let Some(email) = email {
            sqlx::query(
                "UPDATE users SET email = $1, updated_at = $2 WHERE id = $3 \
                 AND (email IS NULL OR LOWER(email) <> LOWER($1)) \
                 AND NOT EXISTS (SELECT 1 FROM users o WHERE LOWER(o.email) = LOWER($1) \
                 AND o.deleted = 0 AND o.id <> $3)",
            )
            .bind(email)
            .bind(&now)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        }
        // A provider that issues no new refresh token keeps the one it gave.
        let token = self.sealed_token(user_id, refresh_token)?;
        sqlx::query(
            "UPDATE oidc_users SET refresh_token = CASE WHEN $1 = '' THEN refresh_token ELSE $1 END, \
             token_expires_at = $2, \
             checked_ms = CASE WHEN $3 > checked_ms THEN $3 ELSE checked_ms + 1 END, \
             update_time = $4 WHERE user_id = $5",
        )
        .bind(&token)
        .bind(token_expires_at)
        .bind(time::unix_millis())
        .bind(&now)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Claims the next check of the user's token with the provider, for an
    /// instance that read the link with `checked_ms`: `true` for the one
    /// caller (across instances) whose claim moved `checked_ms` on (by a
    /// millisecond at least); the others go on with what the link says, so that
    /// one refresh token is never used twice at once (providers that rotate
    /// refresh tokens refuse the second use).
    pub async fn claim_check(&self, user_id: i64, checked_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE oidc_users SET checked_ms = CASE WHEN $1 > checked_ms THEN $1 ELSE checked_ms + 1 END \
             WHERE user_id = $2 AND checked_ms = $3",
        )
        .bind(time::unix_millis())
        .bind(user_id)
        .bind(checked_ms)
        .execute(&self.0.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records the provider's answer to a claimed check: a new refresh token
    /// (empty: the provider kept the old one) and when the access token ends,
    /// or `None` when it refused the token, which is then dropped.
    pub async fn record_check(&self, user_id: i64, answer: Option<(&str, i64)>) -> StoreResult<()> {
        let (token, expires_at, keep) = match answer {
            Some((token, expires_at)) => (self.sealed_token(user_id, token)?, expires_at, 1_i64),
            None => (String::new(), 0, 0),
        };
        sqlx::query(
            "UPDATE oidc_users SET refresh_token = CASE WHEN $1 = '' AND $2 = 1 THEN refresh_token ELSE $1 END, \
             token_expires_at = $3 WHERE user_id = $4",
        )
        .bind(&token)
        .bind(keep)
        .bind(expires_at)
        .bind(user_id)
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }

    /// Replaces the CLI secret; `false` when the user has no link.
    pub async fn set_secret(&self, user_id: i64, secret: &str) -> StoreResult<bool> {
        let done =
            sqlx::query("UPDATE oidc_users SET secret = $1, update_time = $2 WHERE user_id = $3")
                .bind(self.0.seal_secret(&secret_context(user_id), secret)?)
                .bind(time::now())
                .bind(user_id)
                .execute(&self.0.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores a sign-in that begins now, keyed by its cookie's hash; sign-ins
    /// older than [`LOGIN_TTL_SECS`] are removed on the way, and the oldest
    /// past the newest [`MAX_LOGINS`].
    pub async fn begin_login(&self, id_hash: &str, login: &OidcLogin) -> StoreResult<()> {
        let now = time::unix_now();
        sqlx::query("DELETE FROM oidc_logins WHERE created_at < $1")
            .bind(now - LOGIN_TTL_SECS)
            .execute(&self.0.pool)
            .await?;
        sqlx::query(
            "INSERT INTO oidc_logins (id_hash, state, nonce, verifier, redirect, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id_hash)
        .bind(&login.state)
        .bind(&login.nonce)
        .bind(&login.verifier)
        .bind(&login.redirect)
        .bind(now)
        .execute(&self.0.pool)
        .await?;
        self.keep_newest_logins(MAX_LOGINS).await
    }

    /// Removes the sign-ins past the newest `keep` (oldest first; at most
    /// 1000 at a time, more than the few that concurrent sign-ins add).
    pub async fn keep_newest_logins(&self, keep: i64) -> StoreResult<()> {
        sqlx::query(
            "DELETE FROM oidc_logins WHERE id_hash IN (SELECT id_hash FROM oidc_logins \
             ORDER BY created_at DESC, id_hash DESC LIMIT 1000 OFFSET $1)",
        )
        .bind(keep)
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }

    /// The unexpired sign-in with this cookie hash.
    pub async fn login(&self, id_hash: &str) -> StoreResult<Option<OidcLogin>> {
        let row: Option<(String, String, String, String, String)> = sqlx::query_as(
            "SELECT state, nonce, verifier, redirect, pending FROM oidc_logins \
             WHERE id_hash = $1 AND created_at >= $2",
        )
        .bind(id_hash)
        .bind(time::unix_now() - LOGIN_TTL_SECS)
        .fetch_optional(&self.0.pool)
        .await?;
        row.map(|(state, nonce, verifier, redirect, pending)| {
            let pending = if pending.is_empty() {
                pending
            } else {
                self.0.open_secret(LOGIN_CONTEXT, &pending)?
            };
            Ok(OidcLogin {
                state,
                nonce,
                verifier,
                redirect,
                pending,
            })
        })
        .transpose()
    }

    /// Keeps the verified identity of a sign-in until its user chooses a
    /// username; the state can no longer be used for a callback.
    pub async fn set_pending(&self, id_hash: &str, pending: &str) -> StoreResult<()> {
        sqlx::query("UPDATE oidc_logins SET pending = $1, state = '' WHERE id_hash = $2")
            .bind(self.0.seal_secret(LOGIN_CONTEXT, pending)?)
            .bind(id_hash)
            .execute(&self.0.pool)
            .await?;
        Ok(())
    }

    /// Ends a sign-in: `true` for the one caller that took it.
    pub async fn end_login(&self, id_hash: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM oidc_logins WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&self.0.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
