//! The `portal_sessions` table: web portal sign-ins, stored by the SHA-256 of
//! their id so that every instance sharing the database accepts them.

use berth_domain::time;

use crate::Store;
use crate::error::StoreResult;

/// A live session as the portal and the API see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The signed-in user.
    pub user_id: i64,
    /// The token state-changing requests must carry.
    pub csrf_token: String,
}

/// Access to the `portal_sessions` table.
pub struct Sessions<'a>(&'a Store);

impl Store {
    /// The portal session repository.
    pub fn sessions(&self) -> Sessions<'_> {
        Sessions(self)
    }
}

impl Sessions<'_> {
    /// Stores a session of `user_id` (at its current `auth_version`), valid
    /// `ttl_secs` from now; expired sessions are removed on the way.
    pub async fn create(
        &self,
        id_hash: &str,
        user_id: i64,
        csrf_token: &str,
        ttl_secs: i64,
    ) -> StoreResult<()> {
        let now = time::now();
        sqlx::query("DELETE FROM portal_sessions WHERE expires_at <= $1")
            .bind(&now)
            .execute(&self.0.pool)
            .await?;
        sqlx::query(
            "INSERT INTO portal_sessions (id_hash, user_id, auth_version, csrf_token, created_at, expires_at) \
             SELECT $1, id, auth_version, $2, $3, $4 FROM users WHERE id = $5 AND deleted = 0",
        )
        .bind(id_hash)
        .bind(csrf_token)
        .bind(&now)
        .bind(time::now_plus_seconds(ttl_secs))
        .bind(user_id)
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }

    /// The live session with this id hash: unexpired, its user not deleted and
    /// not changed (password, administrator flag) since it began. Its life is
    /// extended to `idle_secs` from now once less than half of that is left,
    /// so an active session lives on and an idle one ends `idle_secs` after
    /// its last use (at most one write per half window).
    pub async fn find(&self, id_hash: &str, idle_secs: i64) -> StoreResult<Option<Session>> {
        let row: Option<(i64, String, String)> = sqlx::query_as(
            "SELECT s.user_id, s.csrf_token, s.expires_at FROM portal_sessions s JOIN users u ON u.id = s.user_id \
             WHERE s.id_hash = $1 AND s.expires_at > $2 AND u.deleted = 0 \
             AND u.auth_version = s.auth_version",
        )
        .bind(id_hash)
        .bind(time::now())
        .fetch_optional(&self.0.pool)
        .await?;
        let Some((user_id, csrf_token, expires_at)) = row else {
            return Ok(None);
        };
        if expires_at < time::now_plus_seconds(idle_secs / 2) {
            sqlx::query("UPDATE portal_sessions SET expires_at = $2 WHERE id_hash = $1")
                .bind(id_hash)
                .bind(time::now_plus_seconds(idle_secs))
                .execute(&self.0.pool)
                .await?;
        }
        Ok(Some(Session {
            user_id,
            csrf_token,
        }))
    }

    /// Ends a session; `false` when there was none.
    pub async fn delete(&self, id_hash: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM portal_sessions WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&self.0.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
