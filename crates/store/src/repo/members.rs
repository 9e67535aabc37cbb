//! The `project_members` table: users and groups with a role in a project.

use berth_domain::model::{Member, MemberEntity};
use berth_domain::query::Paging;
use berth_domain::time;

use crate::Store;
use crate::error::{StoreResult, conflict_on_unique};
use crate::repo::events;
use crate::repo::sql::Sql;

/// Access to project members.
pub struct Members<'a>(&'a Store);

impl Store {
    /// The project members repository.
    pub fn members(&self) -> Members<'_> {
        Members(self)
    }
}

#[derive(sqlx::FromRow)]
struct MemberRow {
    id: i64,
    project_id: i64,
    user_id: Option<i64>,
    group_id: Option<i64>,
    role: i64,
    entity_name: String,
}

impl From<MemberRow> for Member {
    fn from(row: MemberRow) -> Self {
        let entity = match (row.user_id, row.group_id) {
            (Some(u), _) => MemberEntity::User(u),
            (None, g) => MemberEntity::Group(g.unwrap_or_default()),
        };
        Member {
            id: row.id,
            project_id: row.project_id,
            entity,
            entity_name: row.entity_name,
            role_id: row.role,
        }
    }
}

const MEMBER_SELECT: &str = "SELECT m.id, m.project_id, m.user_id, m.group_id, m.role, \
    COALESCE(u.username, g.group_name, '') AS entity_name \
    FROM project_members m LEFT JOIN users u ON u.id = m.user_id \
    LEFT JOIN user_groups g ON g.id = m.group_id WHERE m.project_id = ";

impl Members<'_> {
    /// All members of a project (Harbor's `X-Total-Count`, which ignores `entityname`).
    pub async fn count(&self, project_id: i64) -> StoreResult<i64> {
        let (count,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM project_members WHERE project_id = $1")
                .bind(project_id)
                .fetch_one(&self.0.pool)
                .await?;
        Ok(count)
    }

    /// A page of members ordered by entity name; `entity_name` filters exactly.
    pub async fn list(
        &self,
        project_id: i64,
        entity_name: Option<&str>,
        paging: Paging,
    ) -> StoreResult<Vec<Member>> {
        let mut sql = Sql::new(MEMBER_SELECT);
        sql.int(project_id);
        if let Some(name) = entity_name {
            sql.push(" AND COALESCE(u.username, g.group_name, '') = ")
                .text(name);
        }
        sql.push(" ORDER BY entity_name, m.id").paging(paging);
        let rows: Vec<MemberRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().map(Member::from).collect())
    }

    /// One member of a project.
    pub async fn find(&self, project_id: i64, member_id: i64) -> StoreResult<Option<Member>> {
        let mut sql = Sql::new(MEMBER_SELECT);
        sql.int(project_id).push(" AND m.id = ").int(member_id);
        let rows: Vec<MemberRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().next().map(Member::from))
    }

    /// Whether `entity` is already a member of the project.
    pub async fn is_member(&self, project_id: i64, entity: MemberEntity) -> StoreResult<bool> {
        let column = match entity {
            MemberEntity::User(_) => "user_id",
            MemberEntity::Group(_) => "group_id",
        };
        let mut sql = Sql::new("SELECT COUNT(*) FROM project_members WHERE project_id = ");
        sql.int(project_id)
            .push(" AND ")
            .push(column)
            .push(" = ")
            .int(entity.id());
        Ok(sql.fetch_count(&self.0.pool).await? > 0)
    }

    /// Adds a member as `by` (in project `project_id`, named `project_name`),
    /// with its [`events::MEMBER_ADDED`] event; an existing membership is a
    /// `Conflict`. Returns the member id.
    pub async fn create(
        &self,
        project_id: i64,
        entity: MemberEntity,
        role: i64,
        change: &MemberChange<'_>,
    ) -> StoreResult<i64> {
        let (user_id, group_id) = match entity {
            MemberEntity::User(u) => (Some(u), None),
            MemberEntity::Group(g) => (None, Some(g)),
        };
        let mut tx = self.0.begin_write().await?;
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO project_members (project_id, user_id, group_id, role, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $5) RETURNING id",
        )
        .bind(project_id)
        .bind(user_id)
        .bind(group_id)
        .bind(role)
        .bind(time::now())
        .fetch_one(&mut *tx)
        .await
        .map_err(|err| {
            conflict_on_unique(err, || format!("the entity is already a member of project {project_id}"))
        })?;
        events::record(&mut tx, &change.event(events::MEMBER_ADDED, project_id, id)).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Changes a member's role as `change` says, with its
    /// [`events::MEMBER_CHANGED`] event; `false` if there is no such member.
    pub async fn update_role(
        &self,
        project_id: i64,
        member_id: i64,
        role: i64,
        change: &MemberChange<'_>,
    ) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let done = sqlx::query(
            "UPDATE project_members SET role = $1, updated_at = $2 WHERE project_id = $3 AND id = $4",
        )
        .bind(role)
        .bind(time::now())
        .bind(project_id)
        .bind(member_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        let event = change.event(events::MEMBER_CHANGED, project_id, member_id);
        events::record(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Removes a member as `change` says, with its [`events::MEMBER_REMOVED`]
    /// event; `false` if there was no such member (and no event).
    pub async fn delete(
        &self,
        project_id: i64,
        member_id: i64,
        change: &MemberChange<'_>,
    ) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let done = sqlx::query("DELETE FROM project_members WHERE project_id = $1 AND id = $2")
            .bind(project_id)
            .bind(member_id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        let event = change.event(events::MEMBER_REMOVED, project_id, member_id);
        events::record(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// Who changes a membership, and the name of its project (members are
/// named `<project>/members/<id>` in events).
#[derive(Debug, Clone, Copy)]
pub struct MemberChange<'a> {
    /// The project's name.
    pub project_name: &'a str,
    /// Who changes it.
    pub by: &'a str,
}

impl MemberChange<'_> {
    fn event(&self, kind: &'static str, project_id: i64, member_id: i64) -> events::NewEvent {
        events::NewEvent {
            kind,
            project_id: Some(project_id),
            resource: format!("{}/members/{member_id}", self.project_name),
            actor: self.by.to_string(),
            digest: None,
            detail: None,
        }
    }
}
