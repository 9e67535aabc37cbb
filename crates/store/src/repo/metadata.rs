//! The `project_metadata` table. Every write of `public` also sets
//! `projects.public`, in the same transaction.

use berth_domain::time;

use crate::Store;
use crate::error::{StoreResult, conflict_on_unique};
use crate::repo::projects::{sync_public, upsert_metadata};

/// Access to project metadata.
pub struct Metadata<'a>(&'a Store);

impl Store {
    /// The project metadata repository.
    pub fn metadata(&self) -> Metadata<'_> {
        Metadata(self)
    }
}

impl Metadata<'_> {
    /// Every stored pair of a project, by key.
    pub async fn list(&self, project_id: i64) -> StoreResult<Vec<(String, String)>> {
        Ok(sqlx::query_as(
            "SELECT name, value FROM project_metadata WHERE project_id = $1 ORDER BY name",
        )
        .bind(project_id)
        .fetch_all(&self.0.pool)
        .await?)
    }

    /// One value, if stored.
    pub async fn get(&self, project_id: i64, name: &str) -> StoreResult<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as(
            "SELECT value FROM project_metadata WHERE project_id = $1 AND name = $2",
        )
        .bind(project_id)
        .bind(name)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(row.map(|(v,)| v))
    }

    /// Adds a pair; an existing key is a `Conflict`.
    pub async fn add(&self, project_id: i64, name: &str, value: &str) -> StoreResult<()> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        sqlx::query(
            "INSERT INTO project_metadata (project_id, name, value, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $4)",
        )
        .bind(project_id)
        .bind(name)
        .bind(value)
        .bind(&now)
        .execute(&mut *tx)
        .await
        .map_err(|err| {
            conflict_on_unique(err, || {
                format!("metadata {name} already exists for project {project_id}")
            })
        })?;
        sync_public(&mut tx, project_id, name, value == "true", &now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replaces a stored value; `false` (and nothing written) when the key is not stored.
    pub async fn update(&self, project_id: i64, name: &str, value: &str) -> StoreResult<bool> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        let exists: Option<(i64,)> = sqlx::query_as(
            "SELECT project_id FROM project_metadata WHERE project_id = $1 AND name = $2",
        )
        .bind(project_id)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
        if exists.is_none() {
            return Ok(false);
        }
        upsert_metadata(&mut tx, project_id, name, value, &now).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Removes a key (removing `public` makes the project private); `false` if absent.
    pub async fn delete(&self, project_id: i64, name: &str) -> StoreResult<bool> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        let done = sqlx::query("DELETE FROM project_metadata WHERE project_id = $1 AND name = $2")
            .bind(project_id)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        sync_public(&mut tx, project_id, name, false, &now).await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }
}
