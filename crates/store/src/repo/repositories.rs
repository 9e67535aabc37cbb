//! Repositories as the management API lists them, with artifact counts.

use berth_domain::model::Repository;
use berth_domain::query::{Paging, Query, SortKey};
use berth_domain::time;
use berth_domain::{DomainError, TagChange};

use crate::Store;
use crate::error::StoreResult;
use crate::repo::projects::{Viewer, push_visibility};
use crate::repo::sql::{Column, Kind, Sql, order_clause};

/// A repository listing (listRepositories, listAllRepositories).
#[derive(Debug, Clone)]
pub struct RepositoryFilter {
    /// Only this project's; `q` terms on `project_id` are then ignored, as Harbor overrides them.
    pub project_id: Option<i64>,
    /// Who is looking (Harbor's project visibility).
    pub viewer: Viewer,
    /// `q=`.
    pub query: Query,
    /// `sort=`; none valid means `-creation_time,-repository_id`.
    pub sort: Vec<SortKey>,
    /// `page=`, `page_size=`.
    pub paging: Paging,
}

const PROJECT_ID_NAMES: &[&str] = &["project_id", "ProjectID"];

const REPOSITORY_Q_COLUMNS: &[Column] = &[
    Column {
        names: &["repository_id", "RepositoryID", "id"],
        sql: "r.id",
        kind: Kind::Int,
    },
    Column {
        names: &["name", "Name"],
        sql: "r.name",
        kind: Kind::Text,
    },
    Column {
        names: PROJECT_ID_NAMES,
        sql: "r.project_id",
        kind: Kind::Int,
    },
    Column {
        names: &["description", "Description"],
        sql: "r.description",
        kind: Kind::Text,
    },
    Column {
        names: &["pull_count", "PullCount"],
        sql: "r.pull_count",
        kind: Kind::Int,
    },
    Column {
        names: &["creation_time", "CreationTime"],
        sql: "r.created_at",
        kind: Kind::Text,
    },
    Column {
        names: &["update_time", "UpdateTime"],
        sql: "r.updated_at",
        kind: Kind::Text,
    },
];

const REPOSITORY_SORT_COLUMNS: &[(&[&str], &str)] = &[
    (&["repository_id", "RepositoryID", "id"], "r.id"),
    (&["name", "Name"], "r.name"),
    (&["pull_count", "PullCount"], "r.pull_count"),
    (&["creation_time", "CreationTime"], "r.created_at"),
    (&["update_time", "UpdateTime"], "r.updated_at"),
];

const REPOSITORY_COLUMNS: &str = "r.id, r.project_id, r.name, r.description, r.artifact_count, \
     r.pull_count, r.created_at, r.updated_at";

#[derive(sqlx::FromRow)]
struct RepositoryRow {
    id: i64,
    project_id: i64,
    name: String,
    description: String,
    /// Kept by triggers (migration 0010).
    artifact_count: i64,
    pull_count: i64,
    created_at: String,
    updated_at: String,
}

impl From<RepositoryRow> for Repository {
    fn from(row: RepositoryRow) -> Self {
        Self {
            id: row.id,
            project_id: row.project_id,
            name: row.name,
            description: row.description,
            artifact_count: row.artifact_count,
            pull_count: row.pull_count,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// Access to the `repositories` table.
pub struct Repositories<'a>(pub(crate) &'a Store);

impl Store {
    /// The repositories repository.
    pub fn repositories(&self) -> Repositories<'_> {
        Repositories(self)
    }
}

impl Repositories<'_> {
    fn repository_where(filter: &RepositoryFilter) -> Result<Sql, DomainError> {
        let mut sql = Sql::new(" FROM repositories r WHERE 1 = 1");
        let mut query = filter.query.clone();
        if let Some(project_id) = filter.project_id {
            sql.push(" AND r.project_id = ").int(project_id);
            query
                .terms
                .retain(|t| !PROJECT_ID_NAMES.contains(&t.key.as_str()));
        }
        if filter.viewer != Viewer::Admin {
            sql.push(" AND r.project_id IN (SELECT p.id FROM projects p WHERE 1 = 1");
            push_visibility(&mut sql, filter.viewer, None);
            sql.push(")");
        }
        sql.query_terms(REPOSITORY_Q_COLUMNS, &query)?;
        Ok(sql)
    }

    /// One page of repositories (with artifact counts) and the total.
    pub async fn list(&self, filter: &RepositoryFilter) -> StoreResult<(Vec<Repository>, i64)> {
        let order = order_clause(
            REPOSITORY_SORT_COLUMNS,
            &filter.sort,
            "r.created_at DESC",
            "r.id DESC",
        );
        let (rows, total): (Vec<RepositoryRow>, i64) = Self::repository_where(filter)?
            .fetch_page(&self.0.pool, REPOSITORY_COLUMNS, &order, filter.paging)
            .await?;
        Ok((rows.into_iter().map(Repository::from).collect(), total))
    }

    /// Repository `name` (full name) with its artifact count.
    pub async fn find(&self, name: &str) -> StoreResult<Option<Repository>> {
        let mut sql = Sql::new(&format!(
            "SELECT {REPOSITORY_COLUMNS} FROM repositories r WHERE r.name = "
        ));
        sql.text(name);
        let rows: Vec<RepositoryRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().map(Repository::from).next())
    }

    /// Sets a repository's description; `false` when it does not exist.
    pub async fn update_description(&self, id: i64, description: &str) -> StoreResult<bool> {
        let done =
            sqlx::query("UPDATE repositories SET description = $2, updated_at = $3 WHERE id = $1")
                .bind(id)
                .bind(description)
                .bind(time::now())
                .execute(&self.0.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes a repository with all its artifacts, tags and label links;
    /// `Precondition` (Harbor's message) when an immutable tag rule protects
    /// one of its tags, and then nothing is deleted. The blobs no artifact of
    /// the project uses any more are released from its quota; their links
    /// are left for garbage collection. The [`crate::repo::events::REPOSITORY_DELETED`]
    /// event of `by` is written with the delete.
    pub async fn delete(&self, id: i64, by: &str) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        lock_repository(self.0, &mut tx, id).await?;
        let found: Option<(i64, String)> =
            sqlx::query_as("SELECT project_id, name FROM repositories WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((project_id, name)) = found else {
            return Ok(false);
        };
        let tags: Vec<(String,)> = sqlx::query_as("SELECT name FROM tags WHERE repository_id = $1")
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
        let tags: Vec<String> = tags.into_iter().map(|(name,)| name).collect();
        crate::repo::immutable::check_mutable(&mut tx, id, &tags, TagChange::Delete).await?;
        // What its artifacts use, to release once they are gone.
        let used: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT DISTINCT a.project_id, ab.blob_id FROM artifact_blobs ab \
             JOIN artifacts a ON a.id = ab.artifact_id WHERE a.repository_id = $1 ORDER BY ab.blob_id",
        )
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM artifact_references WHERE parent_id IN (SELECT id FROM artifacts WHERE repository_id = $1)",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM artifacts WHERE repository_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM repositories WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if let Some(&(project_id, _)) = used.first() {
            let blob_ids: Vec<i64> = used.iter().map(|(_, blob_id)| *blob_id).collect();
            crate::repo::registry::release_unused(self.0, &mut tx, project_id, &blob_ids).await?;
        }
        let event = crate::repo::events::NewEvent {
            kind: crate::repo::events::REPOSITORY_DELETED,
            project_id: Some(project_id),
            resource: name,
            actor: by.to_string(),
            digest: None,
            detail: None,
        };
        crate::repo::events::record(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }
}

/// Locks repository `id`'s row (on PostgreSQL) for the rest of `tx`: what a
/// transaction that deletes artifacts does first, as a manifest push does, so
/// that the artifact count the triggers keep on that row is never waited for
/// in the opposite order to an artifact row.
pub(crate) async fn lock_repository(
    store: &Store,
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    id: i64,
) -> StoreResult<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT id FROM repositories WHERE id = $1{}",
        store.locking(crate::db::Locking::Update)
    )))
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(())
}
