//! The `user_identities` table: social sign-in accounts linked to users.

use berth_domain::time;

use crate::Store;
use crate::error::StoreResult;

/// Access to the `user_identities` table.
pub struct Identities<'a>(&'a Store);

impl Store {
    /// The social-identity repository.
    pub fn identities(&self) -> Identities<'_> {
        Identities(self)
    }
}

impl Identities<'_> {
    /// The user linked to the account `subject` of `provider`.
    pub async fn find_user_id(&self, provider: &str, subject: &str) -> StoreResult<Option<i64>> {
        let id = sqlx::query_scalar(
            "SELECT i.user_id FROM user_identities i JOIN users u ON u.id = i.user_id \
             WHERE i.provider = $1 AND i.subject = $2 AND u.deleted = 0",
        )
        .bind(provider)
        .bind(subject)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(id)
    }

    /// Links the account to `user_id`; an existing link is kept as it is.
    pub async fn link(&self, provider: &str, subject: &str, user_id: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO user_identities (provider, subject, user_id, created_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (provider, subject) DO NOTHING",
        )
        .bind(provider)
        .bind(subject)
        .bind(user_id)
        .bind(time::now())
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }
}
