//! The `password_resets` table: one-hour, single-use tokens, stored only as hashes.

use berth_domain::time;

use crate::Store;
use crate::error::StoreResult;

/// Access to the `password_resets` table.
pub struct PasswordResets<'a>(&'a Store);

impl Store {
    /// The password-reset repository.
    pub fn password_resets(&self) -> PasswordResets<'_> {
        PasswordResets(self)
    }
}

impl PasswordResets<'_> {
    /// Stores a reset for `user_id`, valid `ttl_secs` from now.
    pub async fn create(&self, token_hash: &str, user_id: i64, ttl_secs: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO password_resets (token_hash, user_id, created_at, expires_at) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(token_hash)
        .bind(user_id)
        .bind(time::now())
        .bind(time::now_plus_seconds(ttl_secs))
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }

    /// The user a live (unexpired) reset belongs to.
    pub async fn find_user_id(&self, token_hash: &str) -> StoreResult<Option<i64>> {
        let id = sqlx::query_scalar(
            "SELECT r.user_id FROM password_resets r JOIN users u ON u.id = r.user_id \
             WHERE r.token_hash = $1 AND r.expires_at > $2 AND u.deleted = 0",
        )
        .bind(token_hash)
        .bind(time::now())
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(id)
    }

    /// Forgets one reset (its e-mail could not be sent).
    pub async fn delete(&self, token_hash: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM password_resets WHERE token_hash = $1")
            .bind(token_hash)
            .execute(&self.0.pool)
            .await?;
        Ok(())
    }

    /// Uses a live reset, in one transaction: claims the token, sets the user's
    /// password (bumping `auth_version`) and deletes every reset of the user.
    /// `None` when the token is unknown, expired or already used.
    pub async fn redeem(&self, token_hash: &str, password_hash: &str) -> StoreResult<Option<i64>> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        let user_id: Option<i64> = sqlx::query_scalar(
            "DELETE FROM password_resets WHERE token_hash = $1 AND expires_at > $2 RETURNING user_id",
        )
        .bind(token_hash)
        .bind(&now)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(user_id) = user_id else {
            return Ok(None);
        };
        let updated = sqlx::query(
            "UPDATE users SET password_hash = $1, auth_version = auth_version + 1, updated_at = $2, \
             tokens_valid_after = CASE WHEN tokens_valid_after >= $4 THEN tokens_valid_after + 1 ELSE $4 END WHERE id = $3 AND deleted = 0",
        )
        .bind(password_hash)
        .bind(&now)
        .bind(user_id)
        .bind(time::unix_now())
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            return Ok(None);
        }
        sqlx::query("DELETE FROM password_resets WHERE user_id = $1")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(user_id))
    }

    /// How many resets a user has (live or not).
    pub async fn count_for_user(&self, user_id: i64) -> StoreResult<i64> {
        let n = sqlx::query_scalar("SELECT COUNT(*) FROM password_resets WHERE user_id = $1")
            .bind(user_id)
            .fetch_one(&self.0.pool)
            .await?;
        Ok(n)
    }
}
