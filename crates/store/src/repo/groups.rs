//! The `user_groups` and `user_group_members` tables.

use berth_domain::model::UserGroup;
use berth_domain::model::group::GROUP_TYPE_LDAP;
use berth_domain::time;

use crate::error::{StoreResult, conflict_on_unique};
use crate::repo::sql::Sql;
use crate::{Store, Topic};

#[derive(sqlx::FromRow)]
struct GroupRow {
    id: i64,
    group_name: String,
    group_type: i64,
    ldap_group_dn: Option<String>,
}

impl From<GroupRow> for UserGroup {
    fn from(row: GroupRow) -> Self {
        UserGroup {
            id: row.id,
            group_name: row.group_name,
            group_type: row.group_type,
            ldap_group_dn: row.ldap_group_dn,
        }
    }
}

/// Access to user groups and memberships.
pub struct Groups<'a>(&'a Store);

impl Store {
    /// The user groups repository.
    pub fn groups(&self) -> Groups<'_> {
        Groups(self)
    }
}

impl Groups<'_> {
    /// The group with this id.
    pub async fn find_by_id(&self, id: i64) -> StoreResult<Option<UserGroup>> {
        let row: Option<GroupRow> = sqlx::query_as(
            "SELECT id, group_name, group_type, ldap_group_dn FROM user_groups WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(row.map(UserGroup::from))
    }

    /// The LDAP group with this (normalized) DN.
    pub async fn find_by_ldap_dn(&self, dn: &str) -> StoreResult<Option<UserGroup>> {
        let row: Option<GroupRow> = sqlx::query_as(
            "SELECT id, group_name, group_type, ldap_group_dn FROM user_groups WHERE ldap_group_dn = $1",
        )
        .bind(dn)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(row.map(UserGroup::from))
    }

    /// The LDAP group with this (normalized) DN, created with `name` if it is new.
    /// Concurrent onboarding of the same group is idempotent.
    pub async fn onboard_ldap(&self, dn: &str, name: &str) -> StoreResult<UserGroup> {
        let now = time::now();
        sqlx::query(
            "INSERT INTO user_groups (group_name, group_type, ldap_group_dn, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $4) ON CONFLICT DO NOTHING",
        )
        .bind(name)
        .bind(GROUP_TYPE_LDAP)
        .bind(dn)
        .bind(&now)
        .execute(&self.0.pool)
        .await?;
        match self.find_by_ldap_dn(dn).await? {
            Some(group) => Ok(group),
            None => Err(berth_domain::DomainError::Conflict(format!(
                "a group named {name} already exists with another DN"
            ))
            .into()),
        }
    }

    /// The ids of the known LDAP groups among `dns` (normalized).
    pub async fn ids_by_ldap_dns(&self, dns: &[String]) -> StoreResult<Vec<i64>> {
        if dns.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new("SELECT id FROM user_groups WHERE ldap_group_dn IN (");
        for (i, dn) in dns.iter().enumerate() {
            if i > 0 {
                sql.push(", ");
            }
            sql.text(dn.as_str());
        }
        sql.push(")");
        let ids: Vec<(i64,)> = sql.fetch_all(&self.0.pool).await?;
        Ok(ids.into_iter().map(|(id,)| id).collect())
    }

    /// Replaces the groups `user_id` is in, in one transaction.
    pub async fn replace_memberships(&self, user_id: i64, group_ids: &[i64]) -> StoreResult<()> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        sqlx::query("DELETE FROM user_group_members WHERE user_id = $1")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        for group_id in group_ids {
            sqlx::query(
                "INSERT INTO user_group_members (user_id, group_id, synced_at) VALUES ($1, $2, $3)",
            )
            .bind(user_id)
            .bind(group_id)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        // A sign-in (even through a GET) may change the roles a user holds.
        self.0.changes().bump(Topic::Registry);
        Ok(())
    }

    /// The ids of the groups `user_id` is in.
    pub async fn memberships(&self, user_id: i64) -> StoreResult<Vec<i64>> {
        let ids: Vec<(i64,)> = sqlx::query_as(
            "SELECT group_id FROM user_group_members WHERE user_id = $1 ORDER BY group_id",
        )
        .bind(user_id)
        .fetch_all(&self.0.pool)
        .await?;
        Ok(ids.into_iter().map(|(id,)| id).collect())
    }

    /// The user group named `name`, of `group_type` (any type when 0).
    pub async fn find_by_name(
        &self,
        group_type: i64,
        name: &str,
    ) -> StoreResult<Option<UserGroup>> {
        let row: Option<GroupRow> = sqlx::query_as(
            "SELECT id, group_name, group_type, ldap_group_dn FROM user_groups \
             WHERE group_name = $1 AND ($2 = 0 OR group_type = $2) ORDER BY id LIMIT 1",
        )
        .bind(name)
        .bind(group_type)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(row.map(UserGroup::from))
    }

    /// The ids of the groups of `group_type` named `names`, creating those
    /// that do not exist yet (an OIDC provider's groups, at sign-in). Two
    /// sign-ins naming a new group at once both end with the one group.
    pub async fn onboard_by_names(
        &self,
        group_type: i64,
        names: &[String],
    ) -> StoreResult<Vec<i64>> {
        let now = time::now();
        for name in names {
            sqlx::query(
                "INSERT INTO user_groups (group_name, group_type, created_at, updated_at) \
                 VALUES ($1, $2, $3, $3) ON CONFLICT DO NOTHING",
            )
            .bind(name)
            .bind(group_type)
            .bind(&now)
            .execute(&self.0.pool)
            .await?;
        }
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new("SELECT id FROM user_groups WHERE group_type = ");
        sql.int(group_type).push(" AND group_name IN (");
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                sql.push(", ");
            }
            sql.text(name.as_str());
        }
        sql.push(") ORDER BY id");
        let ids: Vec<(i64,)> = sql.fetch_all(&self.0.pool).await?;
        Ok(ids.into_iter().map(|(id,)| id).collect())
    }

    /// Creates a user group; a taken name or DN is a `Conflict`.
    pub async fn create(
        &self,
        group_name: &str,
        group_type: i64,
        ldap_group_dn: Option<&str>,
    ) -> StoreResult<UserGroup> {
        let row: GroupRow = sqlx::query_as(
            "INSERT INTO user_groups (group_name, group_type, ldap_group_dn, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $4) RETURNING id, group_name, group_type, ldap_group_dn",
        )
        .bind(group_name)
        .bind(group_type)
        .bind(ldap_group_dn)
        .bind(time::now())
        .fetch_one(&self.0.pool)
        .await
        .map_err(|err| conflict_on_unique(err, || format!("group {group_name} already exists")))?;
        Ok(row.into())
    }

    /// A page of the groups (by id) of `group_type` (any when `None`), whose
    /// name contains `name` (case-insensitively) and whose DN is `ldap_dn`,
    /// when given; and how many match.
    pub async fn list(
        &self,
        group_type: Option<i64>,
        name: Option<&str>,
        ldap_dn: Option<&str>,
        paging: berth_domain::query::Paging,
    ) -> StoreResult<(i64, Vec<UserGroup>)> {
        let mut from = Sql::new(" FROM user_groups WHERE 1 = 1");
        if let Some(group_type) = group_type {
            from.push(" AND group_type = ").int(group_type);
        }
        if let Some(name) = name {
            from.push(" AND LOWER(group_name)").like(name);
        }
        if let Some(dn) = ldap_dn {
            from.push(" AND ldap_group_dn = ").text(dn);
        }
        let (rows, total): (Vec<GroupRow>, i64) = from
            .fetch_page(
                &self.0.pool,
                "id, group_name, group_type, ldap_group_dn",
                " ORDER BY id",
                paging,
            )
            .await?;
        Ok((total, rows.into_iter().map(UserGroup::from).collect()))
    }

    /// Renames group `id`; `false` when it is gone, `Conflict` when its
    /// type has a group of that name.
    pub async fn rename(&self, id: i64, name: &str) -> StoreResult<bool> {
        let done =
            sqlx::query("UPDATE user_groups SET group_name = $2, updated_at = $3 WHERE id = $1")
                .bind(id)
                .bind(name)
                .bind(time::now())
                .execute(&self.0.pool)
                .await
                .map_err(|err| {
                    conflict_on_unique(err, || format!("group {name} already exists"))
                })?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes group `id` with its memberships and the project memberships
    /// it has; `false` when it was not there.
    pub async fn delete(&self, id: i64) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM user_groups WHERE id = $1")
            .bind(id)
            .execute(&self.0.pool)
            .await?;
        self.0.changes().bump(Topic::Registry);
        Ok(done.rows_affected() == 1)
    }

    /// Puts `user_id` into `group_id` (idempotent).
    pub async fn add_member(&self, user_id: i64, group_id: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO user_group_members (user_id, group_id, synced_at) VALUES ($1, $2, $3) \
             ON CONFLICT (user_id, group_id) DO NOTHING",
        )
        .bind(user_id)
        .bind(group_id)
        .bind(time::now())
        .execute(&self.0.pool)
        .await?;
        self.0.changes().bump(Topic::Registry);
        Ok(())
    }
}
