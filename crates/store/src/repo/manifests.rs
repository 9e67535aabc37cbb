//! Manifests as the distribution API stores and serves them: artifacts with
//! their blobs, index references and tags, referrers, and pull bookkeeping.

use berth_domain::TagChange;
use berth_domain::model::Project;
use berth_domain::oci::Reference;
use berth_domain::time;

use crate::db::Locking;
use crate::error::StoreResult;
use crate::repo::events;
use crate::repo::immutable::{check_artifact_mutable, check_mutable};
use crate::repo::projects::{PROJECT_COLUMNS, ProjectRow};
use crate::repo::registry::{
    Registry, UPSERT_BLOB, assert_link, charge, deleting, link_repository, placeholders,
    release_unused,
};
use crate::repo::repositories::lock_repository;
use crate::repo::sql::Sql;

/// A child of an index, as stored in `artifact_references`.
#[derive(Debug, Clone)]
pub struct NewReference {
    /// The child manifest's digest.
    pub digest: String,
    /// Platform JSON, if the index gives one.
    pub platform: Option<String>,
    /// URLs JSON, if any.
    pub urls: Option<String>,
    /// Annotations JSON, if any.
    pub annotations: Option<String>,
}

/// Everything a manifest PUT stores.
#[derive(Debug, Clone)]
pub struct NewManifest {
    /// The project the repository belongs to.
    pub project_id: i64,
    /// The full repository name (created if missing).
    pub repository: String,
    /// The manifest digest.
    pub digest: String,
    /// The exact bytes received.
    pub body: Vec<u8>,
    /// The manifest's media type.
    pub manifest_media_type: String,
    /// Harbor `media_type` (config media type).
    pub media_type: String,
    /// OCI artifact type (or config media type).
    pub artifact_type: String,
    /// Harbor `type`.
    pub harbor_type: String,
    /// Harbor `size`.
    pub size: i64,
    /// OCI subject digest.
    pub subject_digest: Option<String>,
    /// Accessory type, for manifests with a subject.
    pub accessory_type: Option<String>,
    /// Extra attributes JSON.
    pub extra_attrs: String,
    /// Annotations JSON.
    pub annotations: Option<String>,
    /// Blob dependencies (config and layers), by digest.
    pub blobs: Vec<String>,
    /// Child manifests of an index.
    pub children: Vec<NewReference>,
    /// Whether children missing from the repository are left out rather than
    /// refused: a proxy cache keeps an index with only the platforms pulled.
    pub partial_children: bool,
    /// The tag to point at it, if pushed by tag.
    pub tag: Option<String>,
    /// Who pushed it, for the [`events::ARTIFACT_PUSHED`] event the store
    /// writes with it; `None` for what is not a push (a proxy cache storing
    /// what it fetched).
    pub pushed_by: Option<String>,
}

impl NewManifest {
    /// The push's event, if it is a push: the artifact named by its tag, or
    /// by its digest when pushed by digest.
    pub fn pushed_event(&self) -> Option<events::NewEvent> {
        let actor = self.pushed_by.clone()?;
        Some(events::NewEvent {
            kind: events::ARTIFACT_PUSHED,
            project_id: Some(self.project_id),
            resource: match &self.tag {
                Some(tag) => format!("{}:{tag}", self.repository),
                None => format!("{}@{}", self.repository, self.digest),
            },
            actor,
            digest: Some(self.digest.clone()),
            detail: None,
        })
    }
}

/// The outcome of a manifest PUT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutManifest {
    /// Stored; the artifact id.
    Stored(i64),
    /// A config or layer is not a blob of the project.
    MissingBlob(String),
    /// An index child is not a manifest of the repository.
    MissingChild(String),
}

/// A manifest as `/v2` serves it.
#[derive(Debug, Clone)]
pub struct StoredManifest {
    /// Artifact id.
    pub artifact_id: i64,
    /// Repository id.
    pub repository_id: i64,
    /// The tag it was found by, if any.
    pub tag_id: Option<i64>,
    /// Manifest digest.
    pub digest: String,
    /// Manifest media type.
    pub media_type: String,
    /// The exact bytes.
    pub body: Vec<u8>,
    /// The signatures it carries, of each kind its project requires (a kind
    /// not required is `false`): it is one, a signature of that kind names it
    /// as its subject, or it is a child of an index that one names.
    pub signed: Signatures,
}

/// Signature kinds: which a project requires before an artifact is pulled
/// (metadata `enable_content_trust_cosign`, `enable_content_trust`), or
/// which an artifact carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Signatures {
    /// cosign (`signature.cosign` accessories).
    pub cosign: bool,
    /// Notation (`signature.notation` accessories).
    pub notation: bool,
}

impl Signatures {
    /// The kind `required` asks for and `self` lacks, if any.
    pub fn missing(self, required: Self) -> Option<&'static str> {
        if required.cosign && !self.cosign {
            Some("cosign")
        } else if required.notation && !self.notation {
            Some("notation")
        } else {
            None
        }
    }
}

/// What a manifest GET reads in one query (see [`Registry::manifest_lookup`]).
#[derive(Debug, Clone)]
pub struct ManifestLookup {
    /// The project the repository name starts with.
    pub project: Project,
    /// The repository, if it exists.
    pub repository_id: Option<i64>,
    /// The manifest, if the reference resolves in the repository.
    pub manifest: Option<StoredManifest>,
    /// The signatures the project requires before an artifact is pulled.
    pub required: Signatures,
}

/// The row behind a [`ManifestLookup`]: the project and outer-joined the rest.
#[derive(sqlx::FromRow)]
struct LookupRow {
    #[sqlx(flatten)]
    project: ProjectRow,
    repository_id: Option<i64>,
    artifact_id: Option<i64>,
    tag_id: Option<i64>,
    digest: Option<String>,
    media_type: Option<String>,
    body: Option<Vec<u8>>,
    cosign_required: i64,
    cosign_signed: i64,
    notation_required: i64,
    notation_signed: i64,
}

/// SQL: whether project `p` has metadata `key` set to true.
fn policy_sql(key: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM project_metadata pm WHERE pm.project_id = p.id \
         AND pm.name = '{key}' AND pm.value = 'true')"
    )
}

/// SQL: whether artifact `a` carries a signature of accessory type
/// `accessory`: it is one, one names it, or one names an index containing it.
fn signed_sql(accessory: &str) -> String {
    format!(
        "a.accessory_type = '{accessory}' \
         OR EXISTS (SELECT 1 FROM artifacts s WHERE s.repository_id = a.repository_id \
           AND s.subject_digest = a.digest AND s.accessory_type = '{accessory}') \
         OR EXISTS (SELECT 1 FROM artifact_references ar JOIN artifacts pa ON pa.id = ar.parent_id \
           JOIN artifacts s ON s.repository_id = pa.repository_id AND s.subject_digest = pa.digest \
           AND s.accessory_type = '{accessory}' WHERE ar.child_id = a.id)"
    )
}

/// SQL columns `<kind>_required` and `<kind>_signed` of a lookup: the
/// project's policy `key`, and (only under it) signatures of type `accessory`.
fn signature_columns(kind: &str, key: &str, accessory: &str) -> String {
    let policy = policy_sql(key);
    let signed = signed_sql(accessory);
    format!(
        "CAST(CASE WHEN {policy} THEN 1 ELSE 0 END AS BIGINT) AS {kind}_required, \
         CAST(CASE WHEN a.id IS NULL OR NOT {policy} THEN 0 \
           WHEN {signed} THEN 1 ELSE 0 END AS BIGINT) AS {kind}_signed"
    )
}

/// The signature columns of a manifest lookup, written once.
static SIGNATURE_COLUMNS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{}, {}",
        signature_columns("cosign", "enable_content_trust_cosign", "signature.cosign"),
        signature_columns("notation", "enable_content_trust", "signature.notation"),
    )
});

/// A referrer of a subject (referrers API).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Referrer {
    /// Manifest digest.
    pub digest: String,
    /// Manifest media type.
    pub media_type: String,
    /// Manifest size.
    pub size: i64,
    /// Artifact type.
    pub artifact_type: String,
    /// Annotations JSON.
    pub annotations: Option<String>,
}

/// The outcome of deleting a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteManifest {
    /// Deleted (with its accessories).
    Deleted,
    /// No such manifest in the repository.
    NotFound,
    /// An index of the repository refers to it.
    Referenced,
}

/// One pull to record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pull {
    /// The artifact pulled.
    pub artifact_id: i64,
    /// The tag it was pulled by, if any.
    pub tag_id: Option<i64>,
    /// Its repository.
    pub repository_id: i64,
}

impl Registry<'_> {
    /// Stores a manifest and everything it implies, in one transaction.
    pub async fn put_manifest(&self, m: &NewManifest) -> StoreResult<PutManifest> {
        let now = time::now();
        if let Some(puts) = &self.0.image_puts
            && let Some(artifact_id) = puts.put(m, &now).await?
        {
            return Ok(PutManifest::Stored(artifact_id));
        }
        let mut tx = self.0.begin_write().await?;
        let (repository_id,): (i64,) = sqlx::query_as(
            "INSERT INTO repositories (project_id, name, description, pull_count, created_at, updated_at) \
             VALUES ($1, $2, '', 0, $3, $3) \
             ON CONFLICT (name) DO UPDATE SET updated_at = $3 RETURNING id",
        )
        .bind(m.project_id)
        .bind(&m.repository)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;

        // The manifest's own blob row first, so that its link (if the project
        // has it) is locked in blob order with the dependencies' below.
        let body_len = i64::try_from(m.body.len()).unwrap_or(i64::MAX);
        let blob: Option<(i64,)> = sqlx::query_as(UPSERT_BLOB)
            .bind(&m.digest)
            .bind(body_len)
            .bind(&m.manifest_media_type)
            .bind(&now)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((manifest_blob_id,)) = blob else {
            return Err(deleting(&m.digest));
        };

        // Dependencies: each must be linked to the project; the links stop
        // being pending and are charged again if a delete uncharged them.
        let mut deps: Vec<&str> = m.blobs.iter().map(String::as_str).collect();
        deps.sort_unstable();
        deps.dedup();
        // The links are locked in blob order first (on PostgreSQL): two pushes
        // sharing layers, or a push and a delete releasing them, would
        // otherwise take the same links in different orders and deadlock.
        // SQLite's write transactions exclude each other.
        let locking = self.0.locking(Locking::Update);
        if !locking.is_empty() {
            let named = if deps.is_empty() {
                String::new()
            } else {
                format!(
                    " OR blob_id IN (SELECT id FROM blobs WHERE deleting = 0 AND digest IN ({}))",
                    placeholders(3, deps.len())
                )
            };
            let sql = format!(
                "SELECT blob_id FROM project_blobs WHERE project_id = $1 AND (blob_id = $2{named}) \
                 ORDER BY blob_id{locking}"
            );
            let mut lock = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(m.project_id)
                .bind(manifest_blob_id);
            for d in &deps {
                lock = lock.bind(*d);
            }
            lock.fetch_all(&mut *tx).await?;
        }
        let mut dep_ids = Vec::with_capacity(deps.len());
        let mut owed = 0;
        if !deps.is_empty() {
            let sql = format!(
                "UPDATE project_blobs SET version = version + 1, pending_since = NULL \
                 WHERE project_id = $1 AND blob_id IN (SELECT id FROM blobs WHERE deleting = 0 AND digest IN ({})) \
                 RETURNING blob_id",
                placeholders(2, deps.len())
            );
            let mut query =
                sqlx::query_as::<_, (i64,)>(sqlx::AssertSqlSafe(sql)).bind(m.project_id);
            for d in &deps {
                query = query.bind(*d);
            }
            dep_ids = query
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|(id,)| id)
                .collect();
            if dep_ids.len() != deps.len() {
                let sql = format!(
                    "SELECT b.digest FROM blobs b JOIN project_blobs pb ON pb.blob_id = b.id \
                     WHERE pb.project_id = $1 AND b.deleting = 0 AND b.digest IN ({})",
                    placeholders(2, deps.len())
                );
                let mut query =
                    sqlx::query_as::<_, (String,)>(sqlx::AssertSqlSafe(sql)).bind(m.project_id);
                for d in &deps {
                    query = query.bind(*d);
                }
                let present: Vec<String> = query
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .map(|(d,)| d)
                    .collect();
                let missing = deps
                    .iter()
                    .find(|d| !present.iter().any(|p| p == *d))
                    .map_or_else(String::new, |d| (*d).to_string());
                tx.rollback().await?;
                return Ok(PutManifest::MissingBlob(missing));
            }
            // The links this push charges again (locked above, or by the
            // update, so no delete changes them meanwhile).
            let sql = format!(
                "UPDATE project_blobs SET charged = 1 WHERE project_id = $1 AND charged = 0 \
                 AND blob_id IN ({}) RETURNING (SELECT b.size FROM blobs b WHERE b.id = project_blobs.blob_id)",
                placeholders(2, dep_ids.len())
            );
            let mut query =
                sqlx::query_as::<_, (i64,)>(sqlx::AssertSqlSafe(sql)).bind(m.project_id);
            for id in &dep_ids {
                query = query.bind(*id);
            }
            owed += query
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(|(size,)| size)
                .sum::<i64>();
        }

        // Children of an index: manifests of the same repository.
        let mut children: Vec<(i64, String, i64)> = Vec::new();
        if !m.children.is_empty() {
            // Locked (on PostgreSQL) until the references exist, so a concurrent
            // delete of a child waits and then sees it referenced.
            let sql = format!(
                "SELECT id, digest, manifest_blob_id FROM artifacts WHERE repository_id = $1 AND digest IN ({}){}",
                placeholders(2, m.children.len()),
                self.0.locking(Locking::Share)
            );
            let mut query = sqlx::query_as::<_, (i64, String, i64)>(sqlx::AssertSqlSafe(sql))
                .bind(repository_id);
            for c in &m.children {
                query = query.bind(&c.digest);
            }
            children = query.fetch_all(&mut *tx).await?;
            if !m.partial_children
                && let Some(missing) = m
                    .children
                    .iter()
                    .find(|c| !children.iter().any(|(_, d, _)| *d == c.digest))
            {
                tx.rollback().await?;
                return Ok(PutManifest::MissingChild(missing.digest.clone()));
            }
        }

        // The manifest's body and (non-pending) link; then the quota is
        // charged for every link this push charged, at once.
        sqlx::query("INSERT INTO manifest_bodies (blob_id, body) VALUES ($1, $2) ON CONFLICT (blob_id) DO NOTHING")
            .bind(manifest_blob_id)
            .bind(m.body.clone())
            .execute(&mut *tx)
            .await?;
        owed += assert_link(
            &mut tx,
            m.project_id,
            manifest_blob_id,
            body_len,
            None,
            &now,
        )
        .await?;
        charge(&mut tx, m.project_id, owed, &now).await?;

        let (artifact_id,): (i64,) = sqlx::query_as(
            "INSERT INTO artifacts (project_id, repository_id, digest, manifest_blob_id, manifest_media_type, \
             media_type, artifact_type, type, size, icon, subject_digest, accessory_type, push_time, pull_time, \
             extra_attrs, annotations) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '', $10, $11, $12, $13, $14, $15) \
             ON CONFLICT (repository_id, digest) DO UPDATE SET push_time = $12 RETURNING id",
        )
        .bind(m.project_id)
        .bind(repository_id)
        .bind(&m.digest)
        .bind(manifest_blob_id)
        .bind(&m.manifest_media_type)
        .bind(&m.media_type)
        .bind(&m.artifact_type)
        .bind(&m.harbor_type)
        .bind(m.size)
        .bind(m.subject_digest.as_deref())
        .bind(m.accessory_type.as_deref())
        .bind(&now)
        .bind(time::ZERO_TIME)
        .bind(&m.extra_attrs)
        .bind(m.annotations.as_deref())
        .fetch_one(&mut *tx)
        .await?;

        let mut linked = dep_ids.clone();
        linked.push(manifest_blob_id);
        link_repository(&mut tx, m.project_id, &m.repository, &linked, &now).await?;

        let mut blob_ids = dep_ids;
        blob_ids.push(manifest_blob_id);
        blob_ids.extend(children.iter().map(|(_, _, b)| *b));
        blob_ids.sort_unstable();
        blob_ids.dedup();
        let values = (0..blob_ids.len())
            .map(|i| format!("($1, ${})", i + 2))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO artifact_blobs (artifact_id, blob_id) VALUES {values} ON CONFLICT (artifact_id, blob_id) DO NOTHING"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(artifact_id);
        for id in &blob_ids {
            query = query.bind(*id);
        }
        query.execute(&mut *tx).await?;

        for child in &m.children {
            // Only a partial index has a child that is not here.
            let Some(child_id) = children
                .iter()
                .find(|(_, d, _)| *d == child.digest)
                .map(|(id, _, _)| *id)
            else {
                continue;
            };
            sqlx::query(
                "INSERT INTO artifact_references (parent_id, child_id, child_digest, platform, urls, annotations) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (parent_id, child_id) DO NOTHING",
            )
            .bind(artifact_id)
            .bind(child_id)
            .bind(&child.digest)
            .bind(child.platform.as_deref())
            .bind(child.urls.as_deref())
            .bind(child.annotations.as_deref())
            .execute(&mut *tx)
            .await?;
        }

        if let Some(tag) = &m.tag {
            let current: Option<(String,)> = sqlx::query_as(
                "SELECT a.digest FROM tags t JOIN artifacts a ON a.id = t.artifact_id \
                 WHERE t.repository_id = $1 AND t.name = $2",
            )
            .bind(repository_id)
            .bind(tag)
            .fetch_optional(&mut *tx)
            .await?;
            if current.is_some_and(|(digest,)| digest != m.digest) {
                let tags = std::slice::from_ref(tag);
                check_mutable(&mut tx, repository_id, tags, TagChange::Push).await?;
            }
            sqlx::query(
                "INSERT INTO tags (repository_id, artifact_id, name, push_time, pull_time) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (repository_id, name) DO UPDATE SET artifact_id = excluded.artifact_id, \
                 push_time = excluded.push_time",
            )
            .bind(repository_id)
            .bind(artifact_id)
            .bind(tag)
            .bind(&now)
            .bind(time::ZERO_TIME)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(event) = m.pushed_event() {
            events::record(&mut tx, &event).await?;
        }
        tx.commit().await?;
        Ok(PutManifest::Stored(artifact_id))
    }

    /// Everything a manifest GET needs, in one query: project `project` (to
    /// authorize the caller), whether `repository` exists in it, and the
    /// manifest `reference` names there. `None` when there is no such project.
    pub async fn manifest_lookup(
        &self,
        project: &str,
        repository: &str,
        reference: &Reference,
    ) -> StoreResult<Option<ManifestLookup>> {
        let (manifest_join, tag_id, key) = match reference {
            Reference::Tag(tag) => (
                "LEFT JOIN tags t ON t.repository_id = r.id AND t.name = $3 \
                 LEFT JOIN artifacts a ON a.id = t.artifact_id",
                "t.id",
                tag.as_str(),
            ),
            Reference::Digest(digest) => (
                "LEFT JOIN artifacts a ON a.repository_id = r.id AND a.digest = $3",
                "CAST(NULL AS BIGINT)",
                digest.as_str(),
            ),
        };
        let signatures = SIGNATURE_COLUMNS.as_str();
        let row: Option<LookupRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {PROJECT_COLUMNS}, r.id AS repository_id, a.id AS artifact_id, \
             {tag_id} AS tag_id, a.digest, a.manifest_media_type AS media_type, mb.body, \
             {signatures} \
             FROM projects p \
             LEFT JOIN repositories r ON r.name = $2 AND r.project_id = p.id \
             {manifest_join} \
             LEFT JOIN manifest_bodies mb ON mb.blob_id = a.manifest_blob_id \
             WHERE p.name = $1"
        )))
        .bind(project)
        .bind(repository)
        .bind(key)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(row.map(|row| {
            let manifest = match (
                row.repository_id,
                row.artifact_id,
                row.digest,
                row.media_type,
                row.body,
            ) {
                (
                    Some(repository_id),
                    Some(artifact_id),
                    Some(digest),
                    Some(media_type),
                    Some(body),
                ) => Some(StoredManifest {
                    artifact_id,
                    repository_id,
                    tag_id: row.tag_id,
                    digest,
                    media_type,
                    body,
                    signed: Signatures {
                        cosign: row.cosign_signed == 1,
                        notation: row.notation_signed == 1,
                    },
                }),
                _ => None,
            };
            ManifestLookup {
                project: row.project.into(),
                repository_id: row.repository_id,
                manifest,
                required: Signatures {
                    cosign: row.cosign_required == 1,
                    notation: row.notation_required == 1,
                },
            }
        }))
    }

    /// The id of repository `name`, if it exists.
    pub async fn repository_id(&self, name: &str) -> StoreResult<Option<i64>> {
        let row: Option<(i64,)> = sqlx::query_as("SELECT id FROM repositories WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.0.pool)
            .await?;
        Ok(row.map(|(id,)| id))
    }

    /// The one tag delete, whoever asks (`/v2/`, the Harbor API, the
    /// portal): removes tag `tag` of `repository` as `by` (only while it is
    /// on artifact `on`, when given); `false` when there was none. Locks the
    /// repository first (as pushes that move a tag take it, so the triggers
    /// then update the artifacts and the repository row in the same order;
    /// PostgreSQL deadlocked on a tag deleted during pushes), refuses a tag an
    /// immutable rule protects (`Precondition`), and records
    /// [`events::TAG_DELETED`] with the delete.
    pub async fn delete_tag(
        &self,
        repository: &str,
        tag: &str,
        on: Option<i64>,
        by: &str,
    ) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let found: Option<(i64, i64)> =
            sqlx::query_as("SELECT r.id, r.project_id FROM repositories r WHERE r.name = $1")
                .bind(repository)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((repository_id, project_id)) = found else {
            return Ok(false);
        };
        lock_repository(self.0, &mut tx, repository_id).await?;
        check_mutable(
            &mut tx,
            repository_id,
            &[tag.to_string()],
            TagChange::Delete,
        )
        .await?;
        let done = match on {
            None => sqlx::query("DELETE FROM tags WHERE repository_id = $1 AND name = $2")
                .bind(repository_id)
                .bind(tag),
            Some(artifact_id) => sqlx::query(
                "DELETE FROM tags WHERE repository_id = $1 AND name = $2 AND artifact_id = $3",
            )
            .bind(repository_id)
            .bind(tag)
            .bind(artifact_id),
        }
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        let event = events::NewEvent {
            kind: events::TAG_DELETED,
            project_id: Some(project_id),
            resource: format!("{repository}:{tag}"),
            actor: by.to_string(),
            digest: None,
            detail: None,
        };
        events::record(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The one artifact delete, whoever asks: deletes artifact `digest` of
    /// `repository` with its tags, labels and accessories, and releases from
    /// the project's quota the blobs no artifact of the project uses any
    /// more (blob links are left for garbage collection); refused while an
    /// index refers to it ([`DeleteManifest::Referenced`]) or an immutable
    /// rule protects one of its tags (`Precondition`). Records
    /// [`events::ARTIFACT_DELETED`] with the delete.
    pub async fn delete_manifest(
        &self,
        repository: &str,
        digest: &str,
        by: &str,
    ) -> StoreResult<DeleteManifest> {
        let mut tx = self.0.begin_write().await?;
        // The repository row first (on PostgreSQL), as a manifest push takes
        // it: deleting the artifact updates the repository's artifact count.
        let Some((repository_id,)): Option<(i64,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT id FROM repositories WHERE name = $1{}",
            self.0.locking(Locking::Update)
        )))
        .bind(repository)
        .fetch_optional(&mut *tx)
        .await?
        else {
            return Ok(DeleteManifest::NotFound);
        };
        // Then the artifact, before the reference check, so an index being
        // pushed with it as a child either sees it gone or makes it referenced
        // first.
        let found: Option<(i64, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT id, repository_id, project_id FROM artifacts WHERE repository_id = $1 AND digest = $2{}",
            self.0.locking(Locking::Update)
        )))
        .bind(repository_id)
        .bind(digest)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((artifact_id, repository_id, project_id)) = found else {
            return Ok(DeleteManifest::NotFound);
        };
        let referenced: Option<(i64,)> =
            sqlx::query_as("SELECT parent_id FROM artifact_references WHERE child_id = $1 LIMIT 1")
                .bind(artifact_id)
                .fetch_optional(&mut *tx)
                .await?;
        if referenced.is_some() {
            return Ok(DeleteManifest::Referenced);
        }
        check_artifact_mutable(&mut tx, artifact_id, repository_id).await?;
        let first_tag: Option<(String,)> =
            sqlx::query_as("SELECT name FROM tags WHERE artifact_id = $1 ORDER BY id LIMIT 1")
                .bind(artifact_id)
                .fetch_optional(&mut *tx)
                .await?;
        delete_artifacts(
            self.0,
            &mut tx,
            repository_id,
            project_id,
            &[(artifact_id, digest.to_string())],
        )
        .await?;
        events::record(
            &mut tx,
            &events::artifact_deleted(
                project_id,
                repository,
                digest,
                first_tag.as_ref().map(|(tag,)| tag.as_str()),
                by,
            ),
        )
        .await?;
        tx.commit().await?;
        Ok(DeleteManifest::Deleted)
    }

    /// Tag names of `repository` after `last`, in order, at most `limit`;
    /// `None` when the repository does not exist.
    pub async fn tags(
        &self,
        repository: &str,
        last: &str,
        limit: i64,
    ) -> StoreResult<Option<Vec<String>>> {
        let Some(id) = self.repository_id(repository).await? else {
            return Ok(None);
        };
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT name FROM tags WHERE repository_id = $1 AND name > $2 ORDER BY name LIMIT $3",
        )
        .bind(id)
        .bind(last)
        .bind(limit)
        .fetch_all(&self.0.pool)
        .await?;
        Ok(Some(rows.into_iter().map(|(n,)| n).collect()))
    }

    /// Repository names after `last`, in order, at most `limit`.
    pub async fn catalog(&self, last: &str, limit: i64) -> StoreResult<Vec<String>> {
        let rows: Vec<(String,)> =
            sqlx::query_as("SELECT name FROM repositories WHERE name > $1 ORDER BY name LIMIT $2")
                .bind(last)
                .bind(limit)
                .fetch_all(&self.0.pool)
                .await?;
        Ok(rows.into_iter().map(|(n,)| n).collect())
    }

    /// The manifests of `repository` whose subject is `subject`, optionally of one artifact type.
    pub async fn referrers(
        &self,
        repository: &str,
        subject: &str,
        artifact_type: Option<&str>,
    ) -> StoreResult<Vec<Referrer>> {
        let filter = if artifact_type.is_some() {
            " AND a.artifact_type = $3"
        } else {
            ""
        };
        let sql = format!(
            "SELECT a.digest, a.manifest_media_type AS media_type, b.size, a.artifact_type, a.annotations \
             FROM artifacts a JOIN repositories r ON r.id = a.repository_id \
             JOIN blobs b ON b.id = a.manifest_blob_id \
             WHERE r.name = $1 AND a.subject_digest = $2{filter} ORDER BY a.id"
        );
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(repository)
            .bind(subject);
        if let Some(t) = artifact_type {
            query = query.bind(t);
        }
        Ok(query.fetch_all(&self.0.pool).await?)
    }

    /// Applies a batch of pulls: latest `pull_time` on artifacts and tags, and
    /// `pull_count` on repositories.
    pub async fn record_pulls(&self, pulls: &[(Pull, i64)], at: &str) -> StoreResult<()> {
        // The rows are taken in the order deletes and pushes take them (on
        // PostgreSQL): every repository first, then artifacts, then tags,
        // each in id order. A batch that took an artifact before its
        // repository deadlocked with a deleteArtifact of it.
        let mut repositories: std::collections::BTreeMap<i64, i64> = Default::default();
        let mut artifacts = std::collections::BTreeSet::new();
        let mut tags = std::collections::BTreeSet::new();
        for (pull, count) in pulls {
            *repositories.entry(pull.repository_id).or_default() += *count;
            artifacts.insert(pull.artifact_id);
            tags.extend(pull.tag_id);
        }
        let mut tx = self.0.begin_write().await?;
        for (repository_id, count) in repositories {
            sqlx::query("UPDATE repositories SET pull_count = pull_count + $2 WHERE id = $1")
                .bind(repository_id)
                .bind(count)
                .execute(&mut *tx)
                .await?;
        }
        for artifact_id in artifacts {
            sqlx::query("UPDATE artifacts SET pull_time = $2 WHERE id = $1 AND pull_time < $2")
                .bind(artifact_id)
                .bind(at)
                .execute(&mut *tx)
                .await?;
        }
        for tag_id in tags {
            sqlx::query("UPDATE tags SET pull_time = $2 WHERE id = $1 AND pull_time < $2")
                .bind(tag_id)
                .bind(at)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// Deletes artifacts of repository `repository_id` (of `project_id`),
/// `going` being their ids and digests, with the accessories whose subject
/// they are, then releases from the project's quota the blobs none of its
/// artifacts uses any more (see [`release_unused`]): a handful of statements
/// whatever their number. The caller has locked the repository row, then
/// the artifacts' (on PostgreSQL).
pub(crate) async fn delete_artifacts(
    store: &crate::Store,
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    repository_id: i64,
    project_id: i64,
    going: &[(i64, String)],
) -> StoreResult<()> {
    let ids: Vec<i64> = going.iter().map(|(id, _)| *id).collect();
    let digests = |sql: &mut Sql| {
        sql.push("(NULL");
        for (_, digest) in going {
            sql.push(", ").text(digest);
        }
        sql.push(")");
    };
    // What the artifacts and their accessories use (two selects, each on
    // its own index, rather than an OR across them).
    let mut used = Sql::new("SELECT blob_id FROM artifact_blobs WHERE artifact_id IN ");
    used.int_list(&ids).push(
        " UNION SELECT ab.blob_id FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
         WHERE a.repository_id = ",
    );
    used.int(repository_id).push(" AND a.subject_digest IN ");
    digests(&mut used);
    used.push(" AND a.accessory_type IS NOT NULL ORDER BY 1");
    let used: Vec<(i64,)> = used.fetch_all(&mut **tx).await?;
    let mut accessories = Sql::new("DELETE FROM artifacts WHERE repository_id = ");
    accessories
        .int(repository_id)
        .push(" AND accessory_type IS NOT NULL AND subject_digest IN ");
    digests(&mut accessories);
    accessories.push(
        " AND NOT EXISTS (SELECT 1 FROM artifact_references r WHERE r.child_id = artifacts.id)",
    );
    accessories.execute(&mut **tx).await?;
    let mut artifacts = Sql::new("DELETE FROM artifacts WHERE id IN ");
    artifacts.int_list(&ids);
    artifacts.execute(&mut **tx).await?;
    let blob_ids: Vec<i64> = used.into_iter().map(|(id,)| id).collect();
    if !blob_ids.is_empty() {
        release_unused(store, tx, project_id, &blob_ids).await?;
    }
    Ok(())
}
