//! Robot accounts and their permissions.

use std::collections::HashMap;

use berth_domain::DomainError;
use berth_domain::model::robot::{Robot, RobotAccess, RobotPermission, RobotScope};
use berth_domain::query::{Paging, Query, SortKey};
use berth_domain::time;

use crate::Store;
use crate::error::{StoreResult, conflict_on_unique};
use crate::repo::events;
use crate::repo::flag;
use crate::repo::sql::{Column, Kind, Sql, order_clause};

/// A robot about to be created (its permissions' projects already resolved).
#[derive(Debug, Clone)]
pub struct NewRobot {
    /// Stored name (`<project>+<name>` or `<name>`).
    pub name: String,
    /// Free text.
    pub description: String,
    /// The project of a project-level robot.
    pub project_id: Option<i64>,
    /// PHC string of the secret.
    pub secret_hash: String,
    /// Days; -1 never expires.
    pub duration: i64,
    /// Unix seconds; -1 never.
    pub expires_at: i64,
    /// Made disabled.
    pub disabled: bool,
    /// `local` or `robot`.
    pub creator_type: String,
    /// The creator's id.
    pub creator_ref: i64,
    /// What it may do.
    pub permissions: Vec<RobotPermission>,
}

/// Which robots a listing shows: Harbor lists one level at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RobotLevel {
    /// System robots.
    System,
    /// The robots of one project.
    Project(i64),
}

#[derive(sqlx::FromRow)]
struct RobotRow {
    id: i64,
    name: String,
    description: String,
    project_id: Option<i64>,
    secret_hash: String,
    duration: i64,
    expires_at: i64,
    disabled: i64,
    creator_type: String,
    creator_ref: i64,
    created_at: String,
    updated_at: String,
}

impl RobotRow {
    fn into_robot(self, permissions: Vec<RobotPermission>) -> Robot {
        Robot {
            id: self.id,
            name: self.name,
            description: self.description,
            project_id: self.project_id,
            secret_hash: self.secret_hash,
            duration: self.duration,
            expires_at: self.expires_at,
            disabled: flag(self.disabled),
            creator_type: self.creator_type,
            creator_ref: self.creator_ref,
            created_at: self.created_at,
            updated_at: self.updated_at,
            permissions,
        }
    }
}

const ROBOT_COLUMNS: &str = "id, name, description, project_id, secret_hash, duration, \
     expires_at, disabled, creator_type, creator_ref, created_at, updated_at";

const ROBOT_FILTERS: &[Column] = &[
    Column {
        names: &["name", "Name"],
        sql: "name",
        kind: Kind::Text,
    },
    Column {
        names: &["description", "Description"],
        sql: "description",
        kind: Kind::Text,
    },
];

const ROBOT_SORT: &[(&[&str], &str)] = &[
    (&["name", "Name"], "name"),
    (&["creation_time", "CreationTime"], "created_at"),
    (&["expires_at", "ExpiresAt"], "expires_at"),
    (&["id", "ID"], "id"),
];

#[derive(sqlx::FromRow)]
struct PermissionRow {
    robot_id: i64,
    kind: String,
    project_id: Option<i64>,
    project_name: Option<String>,
    resource: String,
    action: String,
    effect: String,
}

/// The permissions of `ids`, grouped by robot and, within one, by scope in
/// the order they were granted.
async fn permissions_of(
    conn: &mut sqlx::AnyConnection,
    ids: &[i64],
) -> StoreResult<HashMap<i64, Vec<RobotPermission>>> {
    let mut sql = Sql::new(
        "SELECT rp.robot_id, rp.kind, rp.project_id, p.name AS project_name, rp.resource, \
         rp.action, rp.effect FROM robot_permissions rp \
         LEFT JOIN projects p ON p.id = rp.project_id WHERE rp.robot_id IN ",
    );
    sql.int_list(ids).push(" ORDER BY rp.robot_id, rp.id");
    let rows: Vec<PermissionRow> = sql.fetch_all(&mut *conn).await?;
    let mut out: HashMap<i64, Vec<RobotPermission>> = HashMap::new();
    for row in rows {
        let scope = match (row.kind.as_str(), row.project_id, row.project_name) {
            ("system", _, _) => RobotScope::System,
            (_, Some(id), Some(name)) => RobotScope::Project { id, name },
            _ => RobotScope::AllProjects,
        };
        let access = RobotAccess {
            resource: row.resource,
            action: row.action,
            effect: row.effect,
        };
        let permissions = out.entry(row.robot_id).or_default();
        match permissions.iter_mut().find(|p| p.scope == scope) {
            Some(permission) => permission.access.push(access),
            None => permissions.push(RobotPermission {
                scope,
                access: vec![access],
            }),
        }
    }
    Ok(out)
}

async fn insert_permissions(
    conn: &mut sqlx::AnyConnection,
    robot_id: i64,
    permissions: &[RobotPermission],
) -> StoreResult<()> {
    for permission in permissions {
        let project_id = match &permission.scope {
            RobotScope::Project { id, .. } => Some(*id),
            RobotScope::System | RobotScope::AllProjects => None,
        };
        for access in &permission.access {
            sqlx::query(
                "INSERT INTO robot_permissions (robot_id, kind, project_id, resource, action, effect) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(robot_id)
            .bind(permission.scope.kind())
            .bind(project_id)
            .bind(&access.resource)
            .bind(&access.action)
            .bind(&access.effect)
            .execute(&mut *conn)
            .await?;
        }
    }
    Ok(())
}

/// Access to robot accounts.
pub struct Robots<'a>(&'a Store);

impl Store {
    /// The robot account repository.
    pub fn robots(&self) -> Robots<'_> {
        Robots(self)
    }
}

impl Robots<'_> {
    /// Creates a robot with its permissions and its [`events::ROBOT_CREATED`]
    /// event, atomically; `Conflict` when the name is taken.
    pub async fn create(&self, new: &NewRobot, change: &RobotChange<'_>) -> StoreResult<Robot> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO robots (name, description, project_id, secret_hash, duration, expires_at, \
             disabled, creator_type, creator_ref, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING id",
        )
        .bind(&new.name)
        .bind(&new.description)
        .bind(new.project_id)
        .bind(&new.secret_hash)
        .bind(new.duration)
        .bind(new.expires_at)
        .bind(i64::from(new.disabled))
        .bind(&new.creator_type)
        .bind(new.creator_ref)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| {
            conflict_on_unique(e, || format!("robot account {} already exists", new.name))
        })?;
        insert_permissions(&mut tx, id, &new.permissions).await?;
        let robot = self.get_in(&mut tx, "id = $1", id.into()).await?;
        let event = change.event(events::ROBOT_CREATED, new.project_id, &new.name);
        events::record(&mut tx, &event).await?;
        tx.commit().await?;
        robot.ok_or_else(|| DomainError::NotFound(format!("robot {id} not found")).into())
    }

    async fn get_in(
        &self,
        conn: &mut sqlx::AnyConnection,
        predicate: &str,
        key: Key,
    ) -> StoreResult<Option<Robot>> {
        let sql = format!("SELECT {ROBOT_COLUMNS} FROM robots WHERE {predicate}");
        let query = sqlx::query_as::<_, RobotRow>(sqlx::AssertSqlSafe(sql));
        let row = match key {
            Key::Id(id) => query.bind(id),
            Key::Name(name) => query.bind(name),
        }
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mut permissions = permissions_of(conn, &[row.id]).await?;
        let own = permissions.remove(&row.id).unwrap_or_default();
        Ok(Some(row.into_robot(own)))
    }

    /// Robot `id` with its permissions.
    pub async fn get(&self, id: i64) -> StoreResult<Option<Robot>> {
        let mut conn = self.0.pool.acquire().await?;
        self.get_in(&mut conn, "id = $1", id.into()).await
    }

    /// The robot stored as `name` (without the sign-in prefix).
    pub async fn find_by_name(&self, name: &str) -> StoreResult<Option<Robot>> {
        let mut conn = self.0.pool.acquire().await?;
        self.get_in(&mut conn, "name = $1", Key::Name(name.to_string()))
            .await
    }

    /// A page of the robots of `level` matching `q`, by id unless `sort` says
    /// otherwise, with their permissions, and how many match.
    pub async fn list(
        &self,
        level: RobotLevel,
        query: &Query,
        sort: &[SortKey],
        paging: Paging,
    ) -> StoreResult<(i64, Vec<Robot>)> {
        let mut from = Sql::new(" FROM robots WHERE ");
        match level {
            RobotLevel::System => from.push("project_id IS NULL"),
            RobotLevel::Project(id) => from.push("project_id = ").int(id),
        };
        from.query_terms(ROBOT_FILTERS, query)?;
        let order = order_clause(ROBOT_SORT, sort, "id", "id");
        let (rows, total): (Vec<RobotRow>, i64) = from
            .fetch_page(&self.0.pool, ROBOT_COLUMNS, &order, paging)
            .await?;
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let mut conn = self.0.pool.acquire().await?;
        let mut permissions = permissions_of(&mut conn, &ids).await?;
        let robots = rows
            .into_iter()
            .map(|row| {
                let own = permissions.remove(&row.id).unwrap_or_default();
                row.into_robot(own)
            })
            .collect();
        Ok((total, robots))
    }

    /// Stores `robot`'s description, disabled flag, duration, expiry and
    /// permissions (replacing the old ones) with its [`events::ROBOT_UPDATED`]
    /// event, atomically; false when it is gone.
    pub async fn update(&self, robot: &Robot, change: &RobotChange<'_>) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let done = sqlx::query(
            "UPDATE robots SET description = $1, disabled = $2, duration = $3, expires_at = $4, \
             updated_at = $5 WHERE id = $6",
        )
        .bind(&robot.description)
        .bind(i64::from(robot.disabled))
        .bind(robot.duration)
        .bind(robot.expires_at)
        .bind(time::now())
        .bind(robot.id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query("DELETE FROM robot_permissions WHERE robot_id = $1")
            .bind(robot.id)
            .execute(&mut *tx)
            .await?;
        insert_permissions(&mut tx, robot.id, &robot.permissions).await?;
        let event = change.event(events::ROBOT_UPDATED, robot.project_id, &robot.name);
        events::record(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Replaces robot `id`'s secret hash; false when it is gone.
    pub async fn set_secret(&self, id: i64, secret_hash: &str) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE robots SET secret_hash = $1, updated_at = $2 WHERE id = $3")
            .bind(secret_hash)
            .bind(time::now())
            .bind(id)
            .execute(&self.0.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes `robot` and its permissions, with its [`events::ROBOT_DELETED`]
    /// event; false when it was not there.
    pub async fn delete(&self, robot: &Robot, change: &RobotChange<'_>) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let done = sqlx::query("DELETE FROM robots WHERE id = $1")
            .bind(robot.id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        let event = change.event(events::ROBOT_DELETED, robot.project_id, &robot.name);
        events::record(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// Who changes a robot account, and the prefix its name is shown with
/// (`robot_name_prefix`, `robot$` by default) in events.
#[derive(Debug, Clone, Copy)]
pub struct RobotChange<'a> {
    /// The configured name prefix.
    pub prefix: &'a str,
    /// Who changes it.
    pub by: &'a str,
}

impl RobotChange<'_> {
    fn event(&self, kind: &'static str, project_id: Option<i64>, name: &str) -> events::NewEvent {
        events::NewEvent {
            kind,
            project_id,
            resource: format!("{}{name}", self.prefix),
            actor: self.by.to_string(),
            digest: None,
            detail: None,
        }
    }
}

/// How [`Robots::get_in`] finds its row.
enum Key {
    Id(i64),
    Name(String),
}

impl From<i64> for Key {
    fn from(id: i64) -> Self {
        Self::Id(id)
    }
}
