//! Registry content for the distribution API: blobs, their project links (and
//! the quota they are charged to) and upload sessions.

use berth_domain::time;

use crate::Store;
use crate::error::{StoreError, StoreResult};

/// A stored blob.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct BlobInfo {
    /// Row id.
    pub id: i64,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Size in bytes.
    pub size: i64,
}

/// An upload session.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Upload {
    /// The session id (UUID).
    pub id: String,
    /// The project pushed into.
    pub project_id: i64,
    /// The full repository name.
    pub repository: String,
    /// Bytes durable in the staging file.
    pub bytes_received: i64,
    /// SHA-256 state after `bytes_received` bytes; `None` at 0.
    pub hash_state: Option<Vec<u8>>,
}

/// Access to registry content.
pub struct Registry<'a>(pub(crate) &'a Store);

impl Store {
    /// The registry content repository.
    pub fn registry(&self) -> Registry<'_> {
        Registry(self)
    }
}

/// `$first, $first+1, ...` for `count` values.
pub(crate) fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) const UPSERT_BLOB: &str = "INSERT INTO blobs (digest, size, media_type, version, deleting, created_at, updated_at) \
     VALUES ($1, $2, $3, 1, 0, $4, $4) \
     ON CONFLICT (digest) DO UPDATE SET version = blobs.version + 1, updated_at = $4 \
     WHERE blobs.deleting = 0 RETURNING id";

/// Links blob `blob_id` (of `size` bytes) to a project inside `tx`: a new link
/// is charged to the project's quota (refused with `Precondition` beyond the
/// hard limit), an existing one gets a new version and `pending_since`.
pub(crate) async fn link_blob(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    project_id: i64,
    blob_id: i64,
    size: i64,
    pending_since: Option<&str>,
    now: &str,
) -> StoreResult<()> {
    let inserted = sqlx::query(
        "INSERT INTO project_blobs (project_id, blob_id, version, pending_since, created_at) \
         VALUES ($1, $2, 1, $3, $4) ON CONFLICT (project_id, blob_id) DO NOTHING",
    )
    .bind(project_id)
    .bind(blob_id)
    .bind(pending_since)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    if inserted.rows_affected() == 0 {
        sqlx::query(
            "UPDATE project_blobs SET version = version + 1, pending_since = $3 \
             WHERE project_id = $1 AND blob_id = $2",
        )
        .bind(project_id)
        .bind(blob_id)
        .bind(pending_since)
        .execute(&mut **tx)
        .await?;
        return Ok(());
    }
    let charged = sqlx::query(
        "UPDATE project_quotas SET used = used + $2, updated_at = $3 \
         WHERE project_id = $1 AND (hard < 0 OR used + $2 <= hard)",
    )
    .bind(project_id)
    .bind(size)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    if charged.rows_affected() == 0 {
        let quota: Option<(i64, i64)> =
            sqlx::query_as("SELECT hard, used FROM project_quotas WHERE project_id = $1")
                .bind(project_id)
                .fetch_optional(&mut **tx)
                .await?;
        if let Some((hard, used)) = quota {
            return Err(berth_domain::DomainError::Precondition(format!(
                "adding {size} bytes of storage to the current usage of {used} bytes would exceed the project's limit of {hard} bytes"
            ))
            .into());
        }
    }
    Ok(())
}

/// Releases a dropped link's `size` bytes from the project's quota.
pub(crate) async fn release_quota(
    executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
    project_id: i64,
    size: i64,
) -> StoreResult<()> {
    sqlx::query(
        "UPDATE project_quotas SET used = CASE WHEN used > $2 THEN used - $2 ELSE 0 END, updated_at = $3 \
         WHERE project_id = $1",
    )
    .bind(project_id)
    .bind(size)
    .bind(time::now())
    .execute(executor)
    .await?;
    Ok(())
}

pub(crate) fn deleting(digest: &str) -> StoreError {
    berth_domain::DomainError::Conflict(format!("blob {digest} is being garbage collected")).into()
}

impl Registry<'_> {
    /// The blob `digest` if project `project_id` may address it.
    pub async fn project_blob(
        &self,
        project_id: i64,
        digest: &str,
    ) -> StoreResult<Option<BlobInfo>> {
        Ok(sqlx::query_as(
            "SELECT b.id, b.digest, b.size FROM blobs b \
             JOIN project_blobs pb ON pb.blob_id = b.id AND pb.project_id = $1 \
             WHERE b.digest = $2 AND b.deleting = 0",
        )
        .bind(project_id)
        .bind(digest)
        .fetch_optional(&self.0.pool)
        .await?)
    }

    /// Records a committed upload: the blob row (new or existing) and a pending
    /// link from `project_id`. Fails with `Conflict` while GC deletes the digest.
    pub async fn commit_blob(
        &self,
        project_id: i64,
        digest: &str,
        size: i64,
    ) -> StoreResult<BlobInfo> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        let id: Option<(i64,)> = sqlx::query_as(UPSERT_BLOB)
            .bind(digest)
            .bind(size)
            .bind("")
            .bind(&now)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((id,)) = id else {
            return Err(deleting(digest));
        };
        link_blob(&mut tx, project_id, id, size, Some(&now), &now).await?;
        tx.commit().await?;
        Ok(BlobInfo {
            id,
            digest: digest.to_string(),
            size,
        })
    }

    /// Renews project `project_id`'s link to blob `blob_id` for a pusher that
    /// found the blob with HEAD (so a collection cannot take it before the
    /// manifest arrives). Writes at most once per `throttle_secs`.
    pub async fn renew_link(
        &self,
        project_id: i64,
        blob_id: i64,
        throttle_secs: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE project_blobs SET pending_since = $3, version = version + 1 \
             WHERE project_id = $1 AND blob_id = $2 AND (pending_since IS NULL OR pending_since < $4)",
        )
        .bind(project_id)
        .bind(blob_id)
        .bind(time::now())
        .bind(time::now_plus_seconds(-throttle_secs))
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }

    /// Links an existing blob of `from_project` into `to_project` (a mount);
    /// `None` when the source project cannot address it.
    pub async fn mount_blob(
        &self,
        from_project: i64,
        to_project: i64,
        digest: &str,
    ) -> StoreResult<Option<BlobInfo>> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        let found: Option<BlobInfo> = sqlx::query_as(
            "SELECT b.id, b.digest, b.size FROM blobs b \
             JOIN project_blobs pb ON pb.blob_id = b.id AND pb.project_id = $1 \
             WHERE b.digest = $2 AND b.deleting = 0",
        )
        .bind(from_project)
        .bind(digest)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(blob) = found else {
            return Ok(None);
        };
        let bumped = sqlx::query(
            "UPDATE blobs SET version = version + 1, updated_at = $2 WHERE id = $1 AND deleting = 0",
        )
        .bind(blob.id)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        if bumped.rows_affected() == 0 {
            return Ok(None);
        }
        link_blob(&mut tx, to_project, blob.id, blob.size, Some(&now), &now).await?;
        tx.commit().await?;
        Ok(Some(blob))
    }

    /// Drops project `project_id`'s link to `digest` unless one of its
    /// artifacts uses the blob. `Ok(None)`: no link; `Ok(Some(false))`: in use.
    pub async fn unlink_blob(&self, project_id: i64, digest: &str) -> StoreResult<Option<bool>> {
        let mut tx = self.0.begin_write().await?;
        let link: Option<(i64, i64)> = sqlx::query_as(
            "SELECT pb.blob_id, b.size FROM project_blobs pb JOIN blobs b ON b.id = pb.blob_id \
             WHERE pb.project_id = $1 AND b.digest = $2 AND b.deleting = 0",
        )
        .bind(project_id)
        .bind(digest)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((blob_id, size)) = link else {
            return Ok(None);
        };
        let done = sqlx::query(
            "DELETE FROM project_blobs WHERE project_id = $1 AND blob_id = $2 AND NOT EXISTS (\
             SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
             WHERE a.project_id = $1 AND ab.blob_id = $2)",
        )
        .bind(project_id)
        .bind(blob_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 1 {
            release_quota(&mut *tx, project_id, size).await?;
        }
        tx.commit().await?;
        Ok(Some(done.rows_affected() == 1))
    }

    /// Starts an upload session.
    pub async fn create_upload(
        &self,
        id: &str,
        project_id: i64,
        repository: &str,
    ) -> StoreResult<()> {
        let now = time::now();
        sqlx::query(
            "INSERT INTO uploads (id, project_id, repository, bytes_received, hash_state, created_at, updated_at) \
             VALUES ($1, $2, $3, 0, NULL, $4, $4)",
        )
        .bind(id)
        .bind(project_id)
        .bind(repository)
        .bind(&now)
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }

    /// An upload session by id.
    pub async fn upload(&self, id: &str) -> StoreResult<Option<Upload>> {
        Ok(sqlx::query_as(
            "SELECT id, project_id, repository, bytes_received, hash_state FROM uploads WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?)
    }

    /// Moves an upload from `old` to `new` bytes; `false` when another chunk got there first.
    pub async fn advance_upload(
        &self,
        id: &str,
        old: i64,
        new: i64,
        hash_state: &[u8],
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE uploads SET bytes_received = $3, hash_state = $4, updated_at = $5 \
             WHERE id = $1 AND bytes_received = $2",
        )
        .bind(id)
        .bind(old)
        .bind(new)
        .bind(hash_state.to_vec())
        .bind(time::now())
        .execute(&self.0.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Ends an upload session; `false` when there was none.
    pub async fn delete_upload(&self, id: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM uploads WHERE id = $1")
            .bind(id)
            .execute(&self.0.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Upload sessions idle since before `cutoff` (store timestamp).
    pub async fn stale_uploads(&self, cutoff: &str) -> StoreResult<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as("SELECT id FROM uploads WHERE updated_at < $1")
            .bind(cutoff)
            .fetch_all(&self.0.pool)
            .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }
}
