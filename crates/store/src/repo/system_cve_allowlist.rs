//! The system CVE allowlist: one row at most (`id` 1), none meaning empty.

use berth_domain::model::CveAllowlist;
use berth_domain::time;

use crate::Store;
use crate::error::StoreResult;

/// The stored system allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemCveAllowlist {
    /// The row id (always 1).
    pub id: i64,
    /// Its expiry and CVE ids.
    pub allowlist: CveAllowlist,
    /// First written, store format.
    pub created_at: String,
    /// Last written, store format.
    pub updated_at: String,
}

#[derive(sqlx::FromRow)]
struct AllowlistRow {
    id: i64,
    expires_at: Option<i64>,
    items: String,
    created_at: String,
    updated_at: String,
}

/// Access to the `system_cve_allowlist` table.
pub struct SystemCveAllowlists<'a>(&'a Store);

impl Store {
    /// The system CVE allowlist repository.
    pub fn system_cve_allowlist(&self) -> SystemCveAllowlists<'_> {
        SystemCveAllowlists(self)
    }
}

impl SystemCveAllowlists<'_> {
    /// The allowlist, once one was written.
    pub async fn get(&self) -> StoreResult<Option<SystemCveAllowlist>> {
        let row: Option<AllowlistRow> = sqlx::query_as(
            "SELECT id, expires_at, items, created_at, updated_at FROM system_cve_allowlist WHERE id = 1",
        )
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(row.map(|r| SystemCveAllowlist {
            id: r.id,
            allowlist: CveAllowlist {
                expires_at: r.expires_at,
                items: serde_json::from_str(&r.items).unwrap_or_default(),
            },
            created_at: r.created_at,
            updated_at: r.updated_at,
        }))
    }

    /// Replaces the allowlist (its creation time stays).
    pub async fn set(&self, list: &CveAllowlist) -> StoreResult<()> {
        let items =
            serde_json::to_string(&list.items).map_err(|e| sqlx::Error::Encode(e.into()))?;
        sqlx::query(
            "INSERT INTO system_cve_allowlist (id, expires_at, items, created_at, updated_at) \
             VALUES (1, $1, $2, $3, $3) ON CONFLICT (id) DO UPDATE SET \
             expires_at = excluded.expires_at, items = excluded.items, updated_at = excluded.updated_at",
        )
        .bind(list.expires_at)
        .bind(items)
        .bind(time::now())
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }
}
