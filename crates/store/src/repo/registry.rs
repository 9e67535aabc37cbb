//! Registry content for the distribution API: blobs, their project links (and
//! the quota they are charged to while used or pending), their repository links (who may address
//! them) and upload sessions.

use berth_domain::oci::{Algorithm, Digest};
use berth_domain::time;

use crate::Store;
use crate::blobs::{BlobStore, Staged, WrittenPart};
use crate::db::Locking;
use crate::error::{StoreError, StoreResult};

/// A stored blob.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct BlobInfo {
    /// Row id.
    pub id: i64,
    /// `<algorithm>:<hex>`.
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
    /// Bytes in the recorded parts.
    pub bytes_received: i64,
    /// The hash state after `bytes_received` bytes; `None` at 0.
    pub hash_state: Option<Vec<u8>>,
    /// The algorithm of `hash_state` (`sha256`, or the client's `digest-algorithm`).
    pub algorithm: String,
    /// How many parts are recorded; every change of the session moves it.
    pub parts: i64,
}

impl Upload {
    /// The algorithm of the session's hash state.
    pub fn algorithm(&self) -> Algorithm {
        Algorithm::from_name(&self.algorithm).unwrap_or(Algorithm::Sha256)
    }
}

/// The outcome of [`Registry::install_blob`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// Stored and linked.
    Done(BlobInfo),
    /// The upload session changed (a concurrent chunk or commit) or ended: nothing changed.
    UploadChanged,
    /// Garbage collection is deleting the digest: nothing changed; try again once it is gone.
    Collecting,
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

/// Links blob `blob_id` (of `size` bytes) to a project inside `tx` (see
/// [`assert_link`]) and charges it to the project's quota unless it was
/// charged already (refused with `Forbidden` beyond the hard limit, as
/// Harbor's 403).
pub(crate) async fn link_blob(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    project_id: i64,
    blob_id: i64,
    size: i64,
    pending_since: Option<&str>,
    now: &str,
) -> StoreResult<()> {
    let owed = assert_link(tx, project_id, blob_id, size, pending_since, now).await?;
    charge(tx, project_id, owed, now).await
}

/// Inserts the project link of blob `blob_id` (of `size` bytes) inside `tx`,
/// or gives the existing one a new version and `pending_since`, and marks it
/// charged: the bytes the project then owes, `size` for a new link or one a
/// delete had uncharged, else 0. The caller [`charge`]s them in `tx`.
pub(crate) async fn assert_link(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    project_id: i64,
    blob_id: i64,
    size: i64,
    pending_since: Option<&str>,
    now: &str,
) -> StoreResult<i64> {
    // A new link is inserted, else the existing one is updated (and so
    // locked until commit: a collector's version-guarded delete then fails).
    // Inserting first costs one statement for the usual case, a blob new to
    // the project. On PostgreSQL a link can be deleted, inserted, or
    // uncharged by a delete, between two statements of this transaction, so
    // each update holds only in the state it assumes, and each statement's
    // outcome decides the next.
    for _ in 0..3 {
        let inserted = sqlx::query(
            "INSERT INTO project_blobs (project_id, blob_id, version, pending_since, created_at, charged) \
             VALUES ($1, $2, 1, $3, $4, 1) ON CONFLICT (project_id, blob_id) DO NOTHING",
        )
        .bind(project_id)
        .bind(blob_id)
        .bind(pending_since)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(size);
        }
        for (charged, owed) in [(1, 0), (0, size)] {
            let renewed = sqlx::query(
                "UPDATE project_blobs SET version = version + 1, pending_since = $3, charged = 1 \
                 WHERE project_id = $1 AND blob_id = $2 AND charged = $4",
            )
            .bind(project_id)
            .bind(blob_id)
            .bind(pending_since)
            .bind(charged)
            .execute(&mut **tx)
            .await?;
            if renewed.rows_affected() == 1 {
                return Ok(owed);
            }
        }
    }
    Err(
        berth_domain::DomainError::Conflict("the blob's link kept changing; try again".into())
            .into(),
    )
}

/// Adds `owed` bytes to the usage of project `project_id` inside `tx`;
/// refused with `Forbidden` (Harbor's 403 and words) when that would pass
/// the hard limit. Owing nothing is never refused.
pub(crate) async fn charge(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    project_id: i64,
    owed: i64,
    now: &str,
) -> StoreResult<()> {
    if owed == 0 {
        return Ok(());
    }
    let charged = sqlx::query(
        "UPDATE project_quotas SET used = used + $2, updated_at = $3 \
         WHERE project_id = $1 AND (hard < 0 OR used + $2 <= hard)",
    )
    .bind(project_id)
    .bind(owed)
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
            return Err(berth_domain::DomainError::QuotaExceeded {
                adding: owed,
                used,
                hard,
            }
            .into());
        }
    }
    Ok(())
}

/// Releases `size` bytes of uncharged links from the project's quota.
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

/// Links at most this many blobs per statement of [`release_unused`].
const RELEASED_PER_STATEMENT: usize = 500;

/// Inside `tx`, after it deleted artifacts of project `project_id` that used
/// blobs `blob_ids` (ascending, distinct): uncharges each of those links that
/// no artifact of the project uses any more and no push awaits (a pending
/// link stays charged, as an upload is), and releases their sizes from the
/// quota. The links themselves stay, their blobs addressable until a
/// collection drops them (which then releases nothing more).
///
/// On PostgreSQL the links are locked first, in blob order as pushes lock
/// them, and only then checked, by a statement that sees every artifact
/// committed meanwhile: a push naming a blob either committed its artifact
/// before the lock was granted (the link stays charged), or waits for this
/// transaction and then finds the link uncharged, and charges it again.
pub(crate) async fn release_unused(
    store: &Store,
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    project_id: i64,
    blob_ids: &[i64],
) -> StoreResult<()> {
    let locking = store.locking(Locking::Update);
    let mut released = 0;
    for chunk in blob_ids.chunks(RELEASED_PER_STATEMENT) {
        let listed = placeholders(2, chunk.len());
        if !locking.is_empty() {
            let sql = format!(
                "SELECT blob_id FROM project_blobs WHERE project_id = $1 AND blob_id IN ({listed}) \
                 ORDER BY blob_id{locking}"
            );
            let mut lock = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(project_id);
            for id in chunk {
                lock = lock.bind(*id);
            }
            lock.fetch_all(&mut **tx).await?;
        }
        let sql = format!(
            "UPDATE project_blobs SET charged = 0 WHERE project_id = $1 AND blob_id IN ({listed}) \
             AND charged = 1 AND pending_since IS NULL AND NOT EXISTS (\
             SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
             WHERE a.project_id = $1 AND ab.blob_id = project_blobs.blob_id) \
             RETURNING (SELECT b.size FROM blobs b WHERE b.id = project_blobs.blob_id)"
        );
        let mut uncharge = sqlx::query_as::<_, (i64,)>(sqlx::AssertSqlSafe(sql)).bind(project_id);
        for id in chunk {
            uncharge = uncharge.bind(*id);
        }
        let sizes = uncharge.fetch_all(&mut **tx).await?;
        released += sizes.iter().map(|(size,)| size).sum::<i64>();
    }
    if released > 0 {
        release_quota(&mut **tx, project_id, released).await?;
    }
    Ok(())
}

pub(crate) fn deleting(digest: &str) -> StoreError {
    berth_domain::DomainError::Conflict(format!("blob {digest} is being garbage collected")).into()
}

/// Makes blob `blob_id` addressable in `repository` (of `project_id`, whose
/// link must exist) inside `tx`.
pub(crate) async fn link_repository(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    project_id: i64,
    repository: &str,
    blob_ids: &[i64],
    now: &str,
) -> StoreResult<()> {
    if blob_ids.is_empty() {
        return Ok(());
    }
    let values = (0..blob_ids.len())
        .map(|i| format!("($1, ${}, $2, $3)", i + 4))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "INSERT INTO repository_blobs (project_id, blob_id, repository, created_at) VALUES {values} \
         ON CONFLICT (repository, blob_id) DO NOTHING"
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(project_id)
        .bind(repository)
        .bind(now);
    for id in blob_ids {
        query = query.bind(*id);
    }
    query.execute(&mut **tx).await?;
    Ok(())
}

/// The columns of a [`BlobInfo`] visible in repository `$1` with digest `$2`.
const REPOSITORY_BLOB: &str = "SELECT b.id, b.digest, b.size FROM blobs b \
     JOIN repository_blobs rb ON rb.blob_id = b.id AND rb.repository = $1 \
     WHERE b.digest = $2 AND b.deleting = 0";

impl Registry<'_> {
    /// The blob `digest` if repository `repository` may address it.
    pub async fn repository_blob(
        &self,
        repository: &str,
        digest: &str,
    ) -> StoreResult<Option<BlobInfo>> {
        Ok(sqlx::query_as(REPOSITORY_BLOB)
            .bind(repository)
            .bind(digest)
            .fetch_optional(&self.0.pool)
            .await?)
    }

    /// The bytes of blob `blob_id` if it is a manifest (kept in the database, not in a file).
    pub async fn manifest_body(&self, blob_id: i64) -> StoreResult<Option<Vec<u8>>> {
        let row: Option<(Vec<u8>,)> =
            sqlx::query_as("SELECT body FROM manifest_bodies WHERE blob_id = $1")
                .bind(blob_id)
                .fetch_optional(&self.0.pool)
                .await?;
        Ok(row.map(|(body,)| body))
    }

    /// Commits `staged` as blob `staged.digest` of `repository` (in project
    /// `project_id`), with a pending project link; for a chunked upload,
    /// ends session `upload` = (id, parts) in the same transaction, on the
    /// condition that it has not changed.
    ///
    /// The file is placed before the transaction and checked again inside it,
    /// after the blob row is taken: a collector removes a file only once it
    /// has claimed the row (`deleting = 1`, committed), so a file seen present
    /// while this transaction holds the live row stays present.
    pub async fn install_blob(
        &self,
        blobs: &BlobStore,
        staged: &Staged,
        project_id: i64,
        repository: &str,
        upload: Option<(&str, i64)>,
    ) -> StoreResult<Installed> {
        let placed = blobs.place(staged).await?;
        let installed = self
            .install_row(blobs, staged, project_id, repository, upload)
            .await;
        if placed && !matches!(installed, Ok(Installed::Done(_))) {
            // The file this call created has no row unless someone else's push
            // made one meanwhile: remove it the way a collector would.
            crate::repo::gc::remove_stray_file(self.0, blobs, &staged.digest).await?;
        }
        installed
    }

    /// The transaction of [`Registry::install_blob`].
    async fn install_row(
        &self,
        blobs: &BlobStore,
        staged: &Staged,
        project_id: i64,
        repository: &str,
        upload: Option<(&str, i64)>,
    ) -> StoreResult<Installed> {
        let digest = staged.digest.as_str();
        let size = i64::try_from(staged.len).unwrap_or(i64::MAX);
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        if let Some((id, parts)) = upload {
            let ended = sqlx::query("DELETE FROM uploads WHERE id = $1 AND parts = $2")
                .bind(id)
                .bind(parts)
                .execute(&mut *tx)
                .await?;
            if ended.rows_affected() == 0 {
                tx.rollback().await?;
                return Ok(Installed::UploadChanged);
            }
        }
        let row: Option<(i64,)> = sqlx::query_as(UPSERT_BLOB)
            .bind(digest)
            .bind(size)
            .bind("")
            .bind(&now)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((id,)) = row else {
            tx.rollback().await?;
            return Ok(Installed::Collecting);
        };
        if !blobs.exists(&staged.digest).await {
            // Collected between the placement and the row: place it again.
            blobs.place(staged).await?;
        }
        link_blob(&mut tx, project_id, id, size, Some(&now), &now).await?;
        link_repository(&mut tx, project_id, repository, &[id], &now).await?;
        tx.commit().await?;
        Ok(Installed::Done(BlobInfo {
            id,
            digest: digest.to_string(),
            size,
        }))
    }

    /// The blob `digest` of `repository` for a caller that may push there,
    /// who will name it in a manifest: the project link is renewed first (so
    /// a collection cannot take it before the manifest arrives; at most one
    /// write per `throttle_secs`), then the blob is looked up. A link
    /// collected before the renewal is not found. The renewal charges
    /// nothing: a link a delete uncharged is charged again by the manifest
    /// that names it (within the limit), not by a HEAD.
    pub async fn renew_and_find(
        &self,
        project_id: i64,
        repository: &str,
        digest: &str,
        throttle_secs: i64,
    ) -> StoreResult<Option<BlobInfo>> {
        let now = time::now();
        sqlx::query(
            "UPDATE project_blobs SET pending_since = $3, version = version + 1 \
             WHERE project_id = $1 AND blob_id = (SELECT id FROM blobs WHERE digest = $2 AND deleting = 0) \
             AND (pending_since IS NULL OR pending_since < $4)",
        )
        .bind(project_id)
        .bind(digest)
        .bind(&now)
        .bind(time::now_plus_seconds(-throttle_secs))
        .execute(&self.0.pool)
        .await?;
        self.repository_blob(repository, digest).await
    }

    /// Links blob `digest` of repository `from` into `repository` of
    /// `to_project` (a cross-repository mount); `None` when `from` cannot
    /// address it.
    pub async fn mount_blob(
        &self,
        from: &str,
        to_project: i64,
        repository: &str,
        digest: &str,
    ) -> StoreResult<Option<BlobInfo>> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        let found: Option<BlobInfo> = sqlx::query_as(REPOSITORY_BLOB)
            .bind(from)
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
        link_repository(&mut tx, to_project, repository, &[blob.id], &now).await?;
        tx.commit().await?;
        Ok(Some(blob))
    }

    /// Drops `repository`'s link to `digest`, unless a manifest of the
    /// repository uses the blob, and then the project's link (and its quota
    /// charge) once no repository of the project links it and no artifact of
    /// the project uses it. `Ok(None)`: no link; `Ok(Some(false))`: in use.
    pub async fn unlink_blob(
        &self,
        project_id: i64,
        repository: &str,
        digest: &str,
    ) -> StoreResult<Option<bool>> {
        let mut tx = self.0.begin_write().await?;
        let Some(blob) = sqlx::query_as::<_, BlobInfo>(REPOSITORY_BLOB)
            .bind(repository)
            .bind(digest)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(None);
        };
        // Only the project link is locked (on PostgreSQL): locking the blob row
        // too would order locks against a concurrent upload's commit.
        let link: Option<(i64,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT version FROM project_blobs WHERE project_id = $1 AND blob_id = $2{}",
            self.0.locking(crate::db::Locking::Update)
        )))
        .bind(project_id)
        .bind(blob.id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((version,)) = link else {
            return Ok(None);
        };
        let (blob_id, size) = (blob.id, blob.size);
        let dropped = sqlx::query(
            "DELETE FROM repository_blobs WHERE repository = $1 AND blob_id = $2 AND NOT EXISTS (\
             SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
             JOIN repositories r ON r.id = a.repository_id WHERE r.name = $1 AND ab.blob_id = $2)",
        )
        .bind(repository)
        .bind(blob_id)
        .execute(&mut *tx)
        .await?;
        if dropped.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(Some(false));
        }
        // The version guard: a manifest or upload that reasserted the link since it
        // was read (and locked, on PostgreSQL) keeps it. Its size is released
        // if it was still charged (a delete of the last artifact using it
        // released it already).
        let done: Option<(i64,)> = sqlx::query_as(
            "DELETE FROM project_blobs WHERE project_id = $1 AND blob_id = $2 AND version = $3 \
             AND NOT EXISTS (SELECT 1 FROM repository_blobs rb WHERE rb.project_id = $1 AND rb.blob_id = $2) \
             AND NOT EXISTS (SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
             WHERE a.project_id = $1 AND ab.blob_id = $2) RETURNING charged",
        )
        .bind(project_id)
        .bind(blob_id)
        .bind(version)
        .fetch_optional(&mut *tx)
        .await?;
        if done == Some((1,)) {
            release_quota(&mut *tx, project_id, size).await?;
        }
        tx.commit().await?;
        Ok(Some(true))
    }

    /// Starts an upload session hashing with `algorithm`.
    pub async fn create_upload(
        &self,
        id: &str,
        project_id: i64,
        repository: &str,
        algorithm: Algorithm,
    ) -> StoreResult<()> {
        let now = time::now();
        sqlx::query(
            "INSERT INTO uploads (id, project_id, repository, bytes_received, hash_state, algorithm, parts, created_at, updated_at) \
             VALUES ($1, $2, $3, 0, NULL, $4, 0, $5, $5)",
        )
        .bind(id)
        .bind(project_id)
        .bind(repository)
        .bind(algorithm.name())
        .bind(&now)
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }

    /// An upload session by id.
    pub async fn upload(&self, id: &str) -> StoreResult<Option<Upload>> {
        Ok(sqlx::query_as(
            "SELECT id, project_id, repository, bytes_received, hash_state, algorithm, parts FROM uploads WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?)
    }

    /// Where upload `id` stands for a request holding its in-place file: its
    /// change count (`parts`), and whether it keeps any bytes in part files
    /// other than `in_place` (a session begun by an earlier version); `None`
    /// once it ended.
    pub async fn upload_in_place(
        &self,
        id: &str,
        in_place: &str,
    ) -> StoreResult<Option<(i64, bool)>> {
        let row: Option<(i64, i64)> = sqlx::query_as(
            "SELECT u.parts, CASE WHEN EXISTS (SELECT 1 FROM upload_parts p \
             WHERE p.upload_id = u.id AND p.name <> $2) THEN 1 ELSE 0 END \
             FROM uploads u WHERE u.id = $1",
        )
        .bind(id)
        .bind(in_place)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(row.map(|(parts, other)| (parts, other != 0)))
    }

    /// The part file names of upload `id`, in order.
    pub async fn upload_parts(&self, id: &str) -> StoreResult<Vec<String>> {
        let rows: Vec<(String,)> =
            sqlx::query_as("SELECT name FROM upload_parts WHERE upload_id = $1 ORDER BY number")
                .bind(id)
                .fetch_all(&self.0.pool)
                .await?;
        Ok(rows.into_iter().map(|(n,)| n).collect())
    }

    /// Records `part` as the next part of `upload`, on the condition that the
    /// session is as `upload` read it; `false` when another request changed or
    /// ended it first.
    pub async fn record_part(&self, upload: &Upload, part: &WrittenPart) -> StoreResult<bool> {
        let len = i64::try_from(part.len).unwrap_or(i64::MAX);
        let mut tx = self.0.begin_write().await?;
        let done = sqlx::query(
            "UPDATE uploads SET bytes_received = bytes_received + $3, hash_state = $4, parts = parts + 1, updated_at = $5 \
             WHERE id = $1 AND parts = $2",
        )
        .bind(&upload.id)
        .bind(upload.parts)
        .bind(len)
        .bind(part.hash_state.clone())
        .bind(time::now())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO upload_parts (upload_id, number, name, size) VALUES ($1, $2, $3, $4)",
        )
        .bind(&upload.id)
        .bind(upload.parts + 1)
        .bind(&part.name)
        .bind(len)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Marks upload `id` as active now (a chunk is streaming in), so an
    /// expiry does not end it mid-transfer.
    pub async fn touch_upload(&self, id: &str) -> StoreResult<()> {
        sqlx::query("UPDATE uploads SET updated_at = $2 WHERE id = $1")
            .bind(id)
            .bind(time::now())
            .execute(&self.0.pool)
            .await?;
        Ok(())
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

    /// Which of `ids` are upload sessions.
    pub async fn existing_uploads(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.which_exist("SELECT id FROM uploads WHERE id IN", &ids)
            .await
    }

    /// Which of `digests` have a blob row (in any state).
    pub async fn known_digests(&self, digests: &[Digest]) -> StoreResult<Vec<String>> {
        let digests: Vec<&str> = digests.iter().map(Digest::as_str).collect();
        self.which_exist("SELECT digest FROM blobs WHERE digest IN", &digests)
            .await
    }

    /// The values among `values` that `select` (`SELECT <column> FROM <table>
    /// WHERE <column> IN`) finds, asked 500 at a time.
    async fn which_exist(&self, select: &str, values: &[&str]) -> StoreResult<Vec<String>> {
        let mut found = Vec::new();
        for chunk in values.chunks(500) {
            let sql = format!("{select} ({})", placeholders(1, chunk.len()));
            let mut query = sqlx::query_as::<_, (String,)>(sqlx::AssertSqlSafe(sql));
            for value in chunk {
                query = query.bind(*value);
            }
            let rows = query.fetch_all(&self.0.pool).await?;
            found.extend(rows.into_iter().map(|(value,)| value));
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use crate::{Backend, Store};

    /// A store on a fresh database of `backend`, migrated up to version 3 only.
    async fn store_at_version_3(backend: Backend, dir: &std::path::Path) -> Store {
        store_at_version(backend, dir, 3).await
    }

    /// A store on a fresh database of `backend`, migrated up to `version` only.
    async fn store_at_version(backend: Backend, dir: &std::path::Path, version: i64) -> Store {
        let url = match backend {
            Backend::Sqlite => format!("sqlite://{}?mode=rwc", dir.join("old.db").display()),
            Backend::Postgres => {
                let server = std::env::var("BERTH_TEST_POSTGRES_URL")
                    .expect("BERTH_TEST_POSTGRES_URL is not set: run `bash scripts/test`");
                let admin = Store::connect(&server).await.unwrap();
                let name = format!("berth_test_{}", uuid::Uuid::new_v4().simple());
                admin.create_database(&name).await.unwrap();
                admin.close().await;
                format!("{}/{name}", server.rsplit_once('/').unwrap().0)
            }
        };
        let store = Store::connect(&url).await.unwrap();
        let mut migrator = match backend {
            Backend::Sqlite => sqlx::migrate!("migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("migrations/postgres"),
        };
        migrator.migrations = Cow::Owned(
            migrator
                .migrations
                .iter()
                .filter(|m| m.version <= version)
                .cloned()
                .collect(),
        );
        migrator.run(&store.pool).await.unwrap();
        store
    }

    /// Content pushed before per-repository visibility stays pullable where a
    /// manifest uses it, and only there; old upload sessions end.
    async fn content_pushed_before_0004_stays_visible(backend: Backend) {
        let dir = tempfile::tempdir().unwrap();
        let store = store_at_version_3(backend, dir.path()).await;
        let now = berth_domain::time::now();
        let layer = format!("sha256:{}", "a".repeat(64));
        let manifest = format!("sha256:{}", "b".repeat(64));
        for statement in [
            "INSERT INTO blobs (digest, size, media_type, version, deleting, created_at, updated_at) VALUES ($1, 5, '', 1, 0, $3, $3)",
            "INSERT INTO blobs (digest, size, media_type, version, deleting, created_at, updated_at) VALUES ($2, 9, '', 1, 0, $3, $3)",
            "INSERT INTO project_blobs (project_id, blob_id, version, pending_since, created_at) \
             SELECT 1, id, 1, NULL, $3 FROM blobs WHERE digest IN ($1, $2)",
            "INSERT INTO repositories (project_id, name, description, pull_count, created_at, updated_at) \
             VALUES (1, 'library/old', '', 0, $3, $3)",
            "INSERT INTO artifacts (project_id, repository_id, digest, manifest_blob_id, manifest_media_type, media_type, \
             artifact_type, type, size, push_time) SELECT 1, r.id, $2, b.id, 'm', 'c', 'c', 'IMAGE', 14, $3 \
             FROM repositories r, blobs b WHERE r.name = 'library/old' AND b.digest = $2",
            "INSERT INTO artifact_blobs (artifact_id, blob_id) SELECT a.id, b.id FROM artifacts a, blobs b \
             WHERE b.digest IN ($1, $2)",
            "INSERT INTO uploads (id, project_id, repository, bytes_received, hash_state, created_at, updated_at) \
             VALUES ('0e6f3c1e-0000-4000-8000-000000000000', 1, 'library/old', 3, NULL, $3, $3)",
        ] {
            sqlx::query(statement)
                .bind(&layer)
                .bind(&manifest)
                .bind(&now)
                .execute(&store.pool)
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
        }
        store.migrate().await.unwrap();
        let registry = store.registry();
        assert!(
            registry
                .repository_blob("library/old", &layer)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            registry
                .repository_blob("library/old", &manifest)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            registry
                .repository_blob("library/other", &layer)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            registry
                .upload("0e6f3c1e-0000-4000-8000-000000000000")
                .await
                .unwrap()
                .is_none()
        );
        store.close().await;
    }

    /// Links that deletes before migration 0017 left charged are uncharged,
    /// and usage is recounted; used and pending links stay charged.
    async fn links_nothing_uses_are_uncharged_by_0017(backend: Backend) {
        let dir = tempfile::tempdir().unwrap();
        let store = store_at_version(backend, dir.path(), 16).await;
        let now = berth_domain::time::now();
        let digest = |c: &str| format!("sha256:{}", c.repeat(64));
        let (used, left, pending, manifest) = (digest("a"), digest("b"), digest("c"), digest("d"));
        for statement in [
            "INSERT INTO blobs (digest, size, media_type, version, deleting, created_at, updated_at) \
             VALUES ($1, 5, '', 1, 0, $5, $5), ($2, 7, '', 1, 0, $5, $5), ($3, 11, '', 1, 0, $5, $5), \
             ($4, 13, '', 1, 0, $5, $5)",
            "INSERT INTO project_blobs (project_id, blob_id, version, pending_since, created_at) \
             SELECT 1, id, 1, CASE WHEN digest = $3 THEN $5 ELSE NULL END, $5 FROM blobs",
            "INSERT INTO repositories (project_id, name, description, pull_count, created_at, updated_at) \
             VALUES (1, 'library/old', '', 0, $5, $5)",
            "INSERT INTO artifacts (project_id, repository_id, digest, manifest_blob_id, manifest_media_type, media_type, \
             artifact_type, type, size, push_time, pull_time, extra_attrs) \
             SELECT 1, r.id, $4, b.id, 'm', 'c', 'c', 'IMAGE', 18, $5, $5, '{}' \
             FROM repositories r, blobs b WHERE r.name = 'library/old' AND b.digest = $4",
            "INSERT INTO artifact_blobs (artifact_id, blob_id) SELECT a.id, b.id FROM artifacts a, blobs b \
             WHERE b.digest IN ($1, $4)",
            "UPDATE project_quotas SET used = 36 WHERE project_id = 1",
        ] {
            sqlx::query(statement)
                .bind(&used)
                .bind(&left)
                .bind(&pending)
                .bind(&manifest)
                .bind(&now)
                .execute(&store.pool)
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
        }
        store.migrate().await.unwrap();
        let charged: Vec<(String, i64)> = sqlx::query_as(
            "SELECT b.digest, pb.charged FROM project_blobs pb JOIN blobs b ON b.id = pb.blob_id ORDER BY b.digest",
        )
        .fetch_all(&store.pool)
        .await
        .unwrap();
        assert_eq!(
            charged,
            vec![(used, 1), (left, 0), (pending, 1), (manifest, 1)]
        );
        assert_eq!(
            store.projects().quota(1).await.unwrap(),
            Some((-1, 5 + 11 + 13))
        );
        store.close().await;
    }

    #[tokio::test]
    async fn upgrade_to_charged_links_sqlite() {
        links_nothing_uses_are_uncharged_by_0017(Backend::Sqlite).await;
    }

    #[tokio::test]
    async fn upgrade_to_charged_links_postgres() {
        links_nothing_uses_are_uncharged_by_0017(Backend::Postgres).await;
    }

    #[tokio::test]
    async fn upgrade_to_per_repository_blobs_sqlite() {
        content_pushed_before_0004_stays_visible(Backend::Sqlite).await;
    }

    #[tokio::test]
    async fn upgrade_to_per_repository_blobs_postgres() {
        content_pushed_before_0004_stays_visible(Backend::Postgres).await;
    }
}
