//! Repositories as the management API lists them, with artifact counts.

use berth_domain::model::Repository;
use berth_domain::time;

use crate::Store;
use crate::error::StoreResult;
use crate::repo::filter::{Page, Sql, TextMatch, fetch_page, order_by, push_text_match};

/// Whose repositories a listing may show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Everything (system administrators).
    All,
    /// Public projects only (anonymous callers).
    Public,
    /// Public projects and the user's own (direct or through groups).
    User(i64),
}

/// Sortable repository columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepositorySort {
    /// `name`
    Name,
    /// `creation_time`
    CreationTime,
    /// `update_time`
    UpdateTime,
    /// `pull_count`
    PullCount,
    /// `repository_id`
    Id,
}

impl RepositorySort {
    fn column(self) -> &'static str {
        match self {
            Self::Name => "r.name",
            Self::CreationTime => "r.created_at",
            Self::UpdateTime => "r.updated_at",
            Self::PullCount => "r.pull_count",
            Self::Id => "r.id",
        }
    }
}

/// A repository listing.
#[derive(Debug, Clone)]
pub struct RepositoryQuery {
    /// Only this project's.
    pub project_id: Option<i64>,
    /// Whose projects.
    pub visibility: Visibility,
    /// `name` filter.
    pub name: Option<TextMatch>,
    /// `repository_id` filter.
    pub id: Option<i64>,
    /// Order (`true` = descending); empty for `-creation_time,-repository_id`.
    pub sort: Vec<(RepositorySort, bool)>,
    /// The page.
    pub page: Page,
}

#[derive(sqlx::FromRow)]
struct RepositoryRow {
    id: i64,
    project_id: i64,
    name: String,
    description: String,
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
            artifact_count: 0,
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
    fn repository_where(query: &RepositoryQuery) -> Sql {
        let mut sql = Sql::default();
        sql.push(" FROM repositories r WHERE 1 = 1");
        if let Some(project_id) = query.project_id {
            sql.push(" AND r.project_id = ").int(project_id);
        }
        if let Some(id) = query.id {
            sql.push(" AND r.id = ").int(id);
        }
        match query.visibility {
            Visibility::All => {}
            Visibility::Public => {
                sql.push(" AND r.project_id IN (SELECT id FROM projects WHERE public = 1)");
            }
            Visibility::User(user_id) => {
                sql.push(" AND r.project_id IN (SELECT id FROM projects WHERE public = 1 UNION SELECT project_id FROM project_members WHERE user_id = ")
                    .int(user_id)
                    .push(" UNION SELECT m.project_id FROM project_members m JOIN user_group_members g ON g.group_id = m.group_id WHERE g.user_id = ")
                    .int(user_id)
                    .push(")");
            }
        }
        if let Some(name) = &query.name {
            push_text_match(&mut sql, "r.name", name);
        }
        sql
    }

    /// One page of repositories (with artifact counts) and the total.
    pub async fn list(&self, query: &RepositoryQuery) -> StoreResult<(Vec<Repository>, i64)> {
        let sort: Vec<(&str, bool)> = query.sort.iter().map(|(c, d)| (c.column(), *d)).collect();
        let (rows, total): (Vec<RepositoryRow>, i64) = fetch_page(
            &self.0.pool,
            "r.id, r.project_id, r.name, r.description, r.pull_count, r.created_at, r.updated_at",
            Self::repository_where(query),
            &order_by(&sort, "r.created_at DESC, r.id DESC", "r.id DESC"),
            query.page,
        )
        .await?;
        let mut repositories: Vec<Repository> = rows.into_iter().map(Repository::from).collect();
        if !repositories.is_empty() {
            let ids: Vec<i64> = repositories.iter().map(|r| r.id).collect();
            let mut counts = Sql::default();
            counts
                .push("SELECT repository_id, COUNT(*) FROM artifacts WHERE repository_id IN (")
                .ints(&ids)
                .push(") GROUP BY repository_id");
            let counts: Vec<(i64, i64)> = counts.fetch_all(&self.0.pool).await?;
            for repository in &mut repositories {
                repository.artifact_count = counts
                    .iter()
                    .find(|(id, _)| *id == repository.id)
                    .map_or(0, |(_, n)| *n);
            }
        }
        Ok((repositories, total))
    }

    /// Repository `name` (full name) with its artifact count.
    pub async fn find(&self, name: &str) -> StoreResult<Option<Repository>> {
        let (mut found, _) = self
            .list(&RepositoryQuery {
                project_id: None,
                visibility: Visibility::All,
                name: Some(TextMatch::Exact(name.to_string())),
                id: None,
                sort: Vec::new(),
                page: Some((0, 1)),
            })
            .await?;
        Ok(found.pop())
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

    /// Deletes a repository with all its artifacts, tags and label links.
    /// Blob links are left for garbage collection.
    pub async fn delete(&self, id: i64) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
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
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// Repository counts of `project_ids`, as `(project_id, count)` (projects without any are absent).
    pub async fn counts_by_project(&self, project_ids: &[i64]) -> StoreResult<Vec<(i64, i64)>> {
        if project_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::default();
        sql.push("SELECT project_id, COUNT(*) FROM repositories WHERE project_id IN (")
            .ints(project_ids)
            .push(") GROUP BY project_id");
        sql.fetch_all(&self.0.pool).await
    }

    /// Bytes stored in blobs (deduplicated), for statistics.
    pub async fn storage_consumption(&self) -> StoreResult<i64> {
        let (total,): (i64,) = sqlx::query_as(
            "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM blobs WHERE deleting = 0",
        )
        .fetch_one(&self.0.pool)
        .await?;
        Ok(total)
    }
}
