//! The `projects` table and the caller's roles in a project.

use berth_domain::model::{Project, ProjectRef};
use berth_domain::rbac::Role;

use crate::Store;
use crate::error::StoreResult;
use crate::repo::flag;

/// Columns selected for a [`Project`], in `ProjectRow` order.
pub(crate) const PROJECT_COLUMNS: &str =
    "p.id, p.name, p.owner_id, p.public, p.registry_id, p.created_at, p.updated_at";

#[derive(sqlx::FromRow)]
pub(crate) struct ProjectRow {
    id: i64,
    name: String,
    owner_id: i64,
    public: i64,
    registry_id: Option<i64>,
    created_at: String,
    updated_at: String,
}

impl From<ProjectRow> for Project {
    fn from(row: ProjectRow) -> Self {
        Project {
            id: row.id,
            name: row.name,
            owner_id: row.owner_id,
            public: flag(row.public),
            registry_id: row.registry_id,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// Access to the `projects` table.
pub struct Projects<'a>(pub(crate) &'a Store);

impl Store {
    /// The projects repository.
    pub fn projects(&self) -> Projects<'_> {
        Projects(self)
    }
}

impl Projects<'_> {
    /// The project a path names, by id or by exact name.
    pub async fn find(&self, project: &ProjectRef) -> StoreResult<Option<Project>> {
        let row: Option<ProjectRow> = match project {
            ProjectRef::Id(id) => {
                sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT {PROJECT_COLUMNS} FROM projects p WHERE p.id = $1"
                )))
                .bind(*id)
                .fetch_optional(&self.0.pool)
                .await?
            }
            ProjectRef::Name(name) => {
                sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT {PROJECT_COLUMNS} FROM projects p WHERE p.name = $1"
                )))
                .bind(name)
                .fetch_optional(&self.0.pool)
                .await?
            }
        };
        Ok(row.map(Project::from))
    }

    /// The roles `user_id` holds in `project_id`: direct membership plus the
    /// memberships of the user's groups.
    pub async fn roles_of(&self, project_id: i64, user_id: i64) -> StoreResult<Vec<Role>> {
        let ids: Vec<(i64,)> = sqlx::query_as(
            "SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2 \
             UNION \
             SELECT m.role FROM project_members m \
             JOIN user_group_members g ON g.group_id = m.group_id \
             WHERE m.project_id = $1 AND g.user_id = $2",
        )
        .bind(project_id)
        .bind(user_id)
        .fetch_all(&self.0.pool)
        .await?;
        Ok(ids
            .into_iter()
            .filter_map(|(id,)| Role::from_id(id))
            .collect())
    }
}
