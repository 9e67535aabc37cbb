//! Counts over the whole registry: getStatistic, and the repository half of search.

use crate::Store;
use crate::error::StoreResult;
use crate::repo::projects::{Viewer, push_member_projects, push_visibility};
use crate::repo::sql::Sql;

/// Harbor's Statistic, as counted for one viewer.
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct Statistic {
    /// Public projects.
    pub public_project_count: i64,
    /// Repositories of public projects.
    pub public_repo_count: i64,
    /// Private projects (all for admins, the viewer's member projects otherwise).
    pub private_project_count: i64,
    /// Repositories of those private projects.
    pub private_repo_count: i64,
    /// All projects (admins only, else 0).
    pub total_project_count: i64,
    /// All repositories (admins only, else 0).
    pub total_repo_count: i64,
    /// Bytes of stored blobs (admins only, else 0).
    pub total_storage_consumption: i64,
}

/// A repository found by search.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RepositoryHit {
    /// The project's id.
    pub project_id: i64,
    /// The project's name.
    pub project_name: String,
    /// Whether the project is public (0/1).
    pub project_public: i64,
    /// Full repository name.
    pub repository_name: String,
    /// Pulls so far.
    pub pull_count: i64,
    /// Artifacts in the repository.
    pub artifact_count: i64,
}

/// One project's figures for the Prometheus exporter (Harbor's `harbor_project_*`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ProjectFigures {
    /// The project's name.
    pub name: String,
    /// Whether it is public (0/1).
    pub public: i64,
    /// Its repositories.
    pub repo_count: i64,
    /// Its members (users and groups).
    pub member_count: i64,
    /// Its storage limit in bytes (-1: none).
    pub quota_hard: i64,
    /// Its storage used in bytes.
    pub quota_used: i64,
    /// Pulls of its repositories so far.
    pub pull_count: i64,
}

/// Registry-wide counts.
pub struct Statistics<'a>(&'a Store);

impl Store {
    /// The statistics repository.
    pub fn statistics(&self) -> Statistics<'_> {
        Statistics(self)
    }
}

impl Statistics<'_> {
    /// The counts `viewer` may see, in one statement.
    pub async fn statistic(&self, viewer: Viewer) -> StoreResult<Statistic> {
        let mut sql = Sql::new(
            "SELECT \
             (SELECT COUNT(*) FROM projects WHERE public = 1) AS public_project_count, \
             (SELECT COUNT(*) FROM repositories r JOIN projects p ON p.id = r.project_id WHERE p.public = 1) AS public_repo_count, ",
        );
        match viewer {
            Viewer::Admin => {
                sql.push(
                    "(SELECT COUNT(*) FROM projects WHERE public = 0) AS private_project_count, \
                     (SELECT COUNT(*) FROM repositories r JOIN projects p ON p.id = r.project_id WHERE p.public = 0) AS private_repo_count, \
                     (SELECT COUNT(*) FROM projects) AS total_project_count, \
                     (SELECT COUNT(*) FROM repositories) AS total_repo_count, \
                     (SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM blobs WHERE deleting = 0) AS total_storage_consumption",
                );
            }
            Viewer::User(user) => {
                sql.push("(SELECT COUNT(*) FROM projects p WHERE p.public = 0 AND p.id IN (");
                push_member_projects(&mut sql, user);
                sql.push(
                    ")) AS private_project_count, \
                     (SELECT COUNT(*) FROM repositories r JOIN projects p ON p.id = r.project_id \
                     WHERE p.public = 0 AND p.id IN (",
                );
                push_member_projects(&mut sql, user);
                sql.push(
                    ")) AS private_repo_count, 0 AS total_project_count, 0 AS total_repo_count, \
                     0 AS total_storage_consumption",
                );
            }
            // Robots count no private projects (Harbor).
            Viewer::Robot(_) | Viewer::Anonymous => {
                sql.push(
                    "0 AS private_project_count, 0 AS private_repo_count, 0 AS total_project_count, \
                     0 AS total_repo_count, 0 AS total_storage_consumption",
                );
            }
        }
        let rows: Vec<Statistic> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().next().unwrap_or_default())
    }

    /// Repositories of projects `viewer` may see whose full name contains `text`
    /// (case-insensitive), by name.
    pub async fn search_repositories(
        &self,
        viewer: Viewer,
        text: &str,
    ) -> StoreResult<Vec<RepositoryHit>> {
        let mut sql = Sql::new(
            "SELECT p.id AS project_id, p.name AS project_name, p.public AS project_public, \
             r.name AS repository_name, r.pull_count, \
             r.artifact_count \
             FROM repositories r JOIN projects p ON p.id = r.project_id WHERE LOWER(r.name)",
        );
        sql.like(text);
        push_visibility(&mut sql, viewer, None);
        sql.push(" ORDER BY r.name, r.id");
        Ok(sql.fetch_all(&self.0.pool).await?)
    }

    /// Every project's figures for the exporter, by name, in one statement
    /// (aggregates joined once, never a query per project).
    pub async fn project_figures(&self) -> StoreResult<Vec<ProjectFigures>> {
        let sql = Sql::new(
            "SELECT p.name, p.public, \
             COALESCE(r.repo_count, 0) AS repo_count, \
             COALESCE(m.member_count, 0) AS member_count, \
             COALESCE(q.hard, -1) AS quota_hard, COALESCE(q.used, 0) AS quota_used, \
             COALESCE(r.pull_count, 0) AS pull_count \
             FROM projects p \
             LEFT JOIN (SELECT project_id, COUNT(*) AS repo_count, \
             CAST(COALESCE(SUM(pull_count), 0) AS BIGINT) AS pull_count \
             FROM repositories GROUP BY project_id) r ON r.project_id = p.id \
             LEFT JOIN (SELECT project_id, COUNT(*) AS member_count \
             FROM project_members GROUP BY project_id) m ON m.project_id = p.id \
             LEFT JOIN project_quotas q ON q.project_id = p.id \
             ORDER BY p.name",
        );
        Ok(sql.fetch_all(&self.0.pool).await?)
    }

    /// Upload sessions started and neither finished nor cancelled yet.
    pub async fn open_uploads(&self) -> StoreResult<i64> {
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM uploads")
            .fetch_one(&self.0.pool)
            .await?;
        Ok(count)
    }
}
