//! The `users` table: every principal of all three surfaces.

use berth_domain::DomainError;
use berth_domain::model::{DirectoryProfile, NewUser, User, UserOrigin};
use berth_domain::time;

use crate::Store;
use crate::changes::Topic;
use crate::error::{StoreResult, conflict_on_unique};
use crate::repo::flag;

const USER_COLUMNS: &str = "id, username, email, realname, picture, comment, password_hash, \
    auth_version, tokens_valid_after, sysadmin, admin_role_in_auth, origin, ldap_dn, created_at, \
    updated_at";

#[derive(sqlx::FromRow)]
struct UserRow {
    id: i64,
    username: String,
    email: Option<String>,
    realname: Option<String>,
    picture: Option<String>,
    comment: Option<String>,
    password_hash: Option<String>,
    auth_version: i64,
    tokens_valid_after: i64,
    sysadmin: i64,
    admin_role_in_auth: i64,
    origin: String,
    ldap_dn: Option<String>,
    created_at: String,
    updated_at: String,
}

impl From<UserRow> for User {
    fn from(row: UserRow) -> Self {
        User {
            id: row.id,
            username: row.username,
            email: row.email,
            realname: row.realname,
            picture: row.picture,
            comment: row.comment,
            password_hash: row.password_hash,
            auth_version: row.auth_version,
            tokens_valid_after: row.tokens_valid_after,
            sysadmin: flag(row.sysadmin),
            admin_role_in_auth: flag(row.admin_role_in_auth),
            origin: UserOrigin::parse(&row.origin),
            ldap_dn: row.ldap_dn,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// Access to the `users` table.
pub struct Users<'a>(&'a Store);

impl Store {
    /// The users repository.
    pub fn users(&self) -> Users<'_> {
        Users(self)
    }
}

impl Users<'_> {
    /// The non-deleted user with this id.
    pub async fn find_by_id(&self, id: i64) -> StoreResult<Option<User>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1 AND deleted = 0");
        let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.0.pool)
            .await?;
        Ok(row.map(User::from))
    }

    /// The non-deleted user whose username is `login`, else whose e-mail is `login`
    /// (case-insensitively): how Basic credentials name a user on every surface.
    pub async fn find_by_login(&self, login: &str) -> StoreResult<Option<User>> {
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users \
             WHERE deleted = 0 AND (username = $1 OR LOWER(email) = LOWER($1)) \
             ORDER BY CASE WHEN username = $1 THEN 0 ELSE 1 END LIMIT 1"
        );
        let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(login)
            .fetch_optional(&self.0.pool)
            .await?;
        Ok(row.map(User::from))
    }

    /// The non-deleted user with this e-mail address (case-insensitive).
    pub async fn find_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE deleted = 0 AND LOWER(email) = LOWER($1)"
        );
        let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(email)
            .fetch_optional(&self.0.pool)
            .await?;
        Ok(row.map(User::from))
    }

    /// Creates a local user. A taken username or e-mail is a `Conflict`.
    pub async fn create(&self, new: &NewUser) -> StoreResult<User> {
        let now = time::now();
        let sql = format!(
            "INSERT INTO users (username, email, realname, picture, comment, password_hash, \
             sysadmin, keywords, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING {USER_COLUMNS}"
        );
        let row: UserRow = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(&new.username)
            .bind(&new.email)
            .bind(&new.realname)
            .bind(&new.picture)
            .bind(&new.comment)
            .bind(&new.password_hash)
            .bind(i64::from(new.sysadmin))
            .bind(&new.keywords)
            .bind(&now)
            .fetch_one(&self.0.pool)
            .await
            .map_err(|err| {
                conflict_on_unique(err, || {
                    format!(
                        "user {} or email {} already exists",
                        new.username,
                        new.email.as_deref().unwrap_or("")
                    )
                })
            })?;
        Ok(row.into())
    }

    /// Replaces the password hash and bumps `auth_version`, which invalidates
    /// every cached credential of the user on every instance.
    pub async fn set_password(&self, id: i64, password_hash: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE users SET password_hash = $1, auth_version = auth_version + 1, updated_at = $2, \
             tokens_valid_after = CASE WHEN tokens_valid_after >= $4 THEN tokens_valid_after + 1 ELSE $4 END WHERE id = $3 AND deleted = 0",
        )
        .bind(password_hash)
        .bind(time::now())
        .bind(id)
        .bind(time::unix_now())
        .execute(&self.0.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Sets the password only when the user has none yet (the built-in admin at first start).
    /// Returns whether it was set.
    pub async fn set_password_if_unset(&self, id: i64, password_hash: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE users SET password_hash = $1, auth_version = auth_version + 1, updated_at = $2, \
             tokens_valid_after = CASE WHEN tokens_valid_after >= $4 THEN tokens_valid_after + 1 ELSE $4 END WHERE id = $3 AND deleted = 0 AND password_hash IS NULL",
        )
        .bind(password_hash)
        .bind(time::now())
        .bind(id)
        .bind(time::unix_now())
        .execute(&self.0.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// Wire sort keys of generator-rest users and their columns.
fn rest_sort_column(field: &str) -> Option<&'static str> {
    match field {
        "id" => Some("id"),
        "createdAt" => Some("created_at"),
        "updatedAt" => Some("updated_at"),
        "name" => Some("COALESCE(realname, '')"),
        "email" => Some("COALESCE(email, '')"),
        "picture" => Some("COALESCE(picture, '')"),
        _ => None,
    }
}

impl Users<'_> {
    /// One page of non-deleted users for generator-rest's `GET /users`:
    /// `q` over the normalized e-mail and name, whitelisted sort keys.
    pub async fn list_rest(
        &self,
        query: &berth_domain::rest_query::ListQuery,
    ) -> StoreResult<Vec<User>> {
        let (sql, pattern) = crate::repo::rest_list::list_sql(
            USER_COLUMNS,
            "users",
            "deleted = 0",
            query,
            rest_sort_column,
        );
        let mut select = sqlx::query_as::<_, UserRow>(sqlx::AssertSqlSafe(sql));
        if let Some(pattern) = pattern {
            select = select.bind(pattern);
        }
        let rows = select.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().map(User::from).collect())
    }

    /// The users with these ids, deleted ones (tombstones) included, in one query.
    pub async fn find_many_including_deleted(&self, ids: &[i64]) -> StoreResult<Vec<User>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders: Vec<String> = (1..=ids.len()).map(|n| format!("${n}")).collect();
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE id IN ({})",
            placeholders.join(", ")
        );
        let mut select = sqlx::query_as::<_, UserRow>(sqlx::AssertSqlSafe(sql));
        for id in ids {
            select = select.bind(*id);
        }
        let rows = select.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().map(User::from).collect())
    }

    /// Replaces a user's name and picture (`None` stores NULL) and search keywords.
    pub async fn update_profile(
        &self,
        id: i64,
        realname: Option<&str>,
        picture: Option<&str>,
        keywords: &str,
    ) -> StoreResult<Option<User>> {
        let sql = format!(
            "UPDATE users SET realname = $1, picture = $2, keywords = $3, updated_at = $4 \
             WHERE id = $5 AND deleted = 0 RETURNING {USER_COLUMNS}"
        );
        let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(realname)
            .bind(picture)
            .bind(keywords)
            .bind(time::now())
            .bind(id)
            .fetch_optional(&self.0.pool)
            .await?;
        self.0.changes().bump(Topic::Articles);
        Ok(row.map(User::from))
    }

    /// Deletes a user as a tombstone, in one transaction: `deleted = 1`, e-mail,
    /// password and picture scrubbed, the admin flag cleared, `auth_version`
    /// bumped; memberships, social identities, resets, group links and the OIDC link
    /// removed.
    /// The row stays so that owned projects and authored articles keep their
    /// author. Returns whether a live user was deleted.
    pub async fn tombstone(&self, id: i64) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let done = sqlx::query(
            "UPDATE users SET deleted = 1, email = NULL, password_hash = NULL, picture = NULL, \
             sysadmin = 0, admin_role_in_auth = 0, keywords = '', auth_version = auth_version + 1, updated_at = $1, \
             tokens_valid_after = CASE WHEN tokens_valid_after >= $3 THEN tokens_valid_after + 1 \
             ELSE $3 END WHERE id = $2 AND deleted = 0",
        )
        .bind(time::now())
        .bind(id)
        .bind(time::unix_now())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        for table in [
            "project_members",
            "user_identities",
            "password_resets",
            "user_group_members",
            "oidc_users",
        ] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE user_id = $1"
            )))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        self.0.changes().bump(Topic::Articles);
        Ok(true)
    }
}

impl Users<'_> {
    /// Creates or refreshes the local account of a directory user: found by
    /// username, marked `origin = 'ldap'` with its DN and display name. A new
    /// account takes the directory's e-mail unless another user has it.
    ///
    /// A directory user never takes over an account that is not the
    /// directory's: the built-in `admin`, or a local account of the same name,
    /// is `Forbidden`, and nothing changes.
    pub async fn onboard_ldap(&self, profile: &DirectoryProfile) -> StoreResult<User> {
        let now = time::now();
        if let Some(existing) = self.find_by_username(&profile.username).await? {
            if existing.id == berth_domain::model::ADMIN_USER_ID
                || existing.origin != berth_domain::model::UserOrigin::Ldap
            {
                return Err(DomainError::Forbidden(format!(
                    "the directory user {} has the name of a local account, which it cannot sign in as",
                    profile.username
                ))
                .into());
            }
            sqlx::query(
                "UPDATE users SET realname = $1, ldap_dn = $2, origin = 'ldap', updated_at = $3 WHERE id = $4",
            )
            .bind(&profile.realname)
            .bind(&profile.dn)
            .bind(&now)
            .bind(existing.id)
            .execute(&self.0.pool)
            .await?;
            self.0.changes().bump(Topic::Articles);
            return Ok(self.find_by_id(existing.id).await?.unwrap_or(existing));
        }
        for email in [profile.email.as_deref(), None] {
            let inserted = sqlx::query(
                "INSERT INTO users (username, email, realname, origin, ldap_dn, keywords, created_at, updated_at) \
                 VALUES ($1, $2, $3, 'ldap', $4, '', $5, $5) ON CONFLICT DO NOTHING",
            )
            .bind(&profile.username)
            .bind(email)
            .bind(&profile.realname)
            .bind(&profile.dn)
            .bind(&now)
            .execute(&self.0.pool)
            .await?;
            if inserted.rows_affected() == 1 || email.is_none() {
                break;
            }
            if self.find_by_username(&profile.username).await?.is_some() {
                break;
            }
        }
        self.find_by_username(&profile.username)
            .await?
            .ok_or_else(|| {
                DomainError::Conflict(format!("user {} cannot be onboarded", profile.username))
                    .into()
            })
    }
}

/// The filters of Harbor's listUsers.
#[derive(Debug, Clone, Default)]
pub struct UserFilter {
    /// `q=`.
    pub query: berth_domain::query::Query,
    /// `sort=`.
    pub sort: Vec<berth_domain::query::SortKey>,
    /// `page=`, `page_size=`.
    pub paging: berth_domain::query::Paging,
    /// `username=`: case-insensitive substring.
    pub username: Option<String>,
    /// `email=`: case-insensitive substring.
    pub email: Option<String>,
}

const HARBOR_USER_Q_COLUMNS: &[crate::repo::sql::Column] = {
    use crate::repo::sql::{Column, Kind};
    &[
        Column {
            names: &["user_id", "UserID"],
            sql: "id",
            kind: Kind::Int,
        },
        Column {
            names: &["username", "Username"],
            sql: "username",
            kind: Kind::Text,
        },
        Column {
            names: &["email", "Email"],
            sql: "email",
            kind: Kind::Text,
        },
        Column {
            names: &["realname", "Realname"],
            sql: "realname",
            kind: Kind::Text,
        },
        Column {
            names: &["comment", "Comment"],
            sql: "comment",
            kind: Kind::Text,
        },
        Column {
            names: &["sysadmin_flag", "SysAdminFlag"],
            sql: "sysadmin",
            kind: Kind::Int,
        },
        Column {
            names: &["creation_time", "CreationTime"],
            sql: "created_at",
            kind: Kind::Text,
        },
        Column {
            names: &["update_time", "UpdateTime"],
            sql: "updated_at",
            kind: Kind::Text,
        },
    ]
};

const HARBOR_USER_SORT_COLUMNS: &[(&[&str], &str)] = &[
    (&["user_id", "UserID"], "id"),
    (&["username", "Username"], "username"),
    (&["email", "Email"], "email"),
    (&["realname", "Realname"], "realname"),
    (&["creation_time", "CreationTime"], "created_at"),
    (&["update_time", "UpdateTime"], "updated_at"),
];

fn push_harbor_user_filter(
    sql: &mut crate::repo::sql::Sql,
    filter: &UserFilter,
    hide_admin: bool,
) -> Result<(), berth_domain::DomainError> {
    use crate::repo::sql::like_pattern;
    if hide_admin {
        sql.push(" AND id <> ")
            .int(berth_domain::model::ADMIN_USER_ID);
    }
    if let Some(name) = &filter.username {
        sql.push(" AND LOWER(username) LIKE ")
            .text(like_pattern(name))
            .push(" ESCAPE '\\'");
    }
    if let Some(email) = &filter.email {
        sql.push(" AND LOWER(email) LIKE ")
            .text(like_pattern(email))
            .push(" ESCAPE '\\'");
    }
    sql.query_terms(HARBOR_USER_Q_COLUMNS, &filter.query)
}

impl Users<'_> {
    /// Harbor's listUsers: a page of non-deleted users and the total. The built-in
    /// admin is never counted and only listed when `q` filters on `user_id`.
    pub async fn list_harbor(&self, filter: &UserFilter) -> StoreResult<(i64, Vec<User>)> {
        use crate::repo::sql::Sql;
        let mut count = Sql::new("SELECT COUNT(*) FROM users WHERE deleted = 0");
        push_harbor_user_filter(&mut count, filter, true)?;
        let total = count.fetch_count(&self.0.pool).await?;
        let by_id = filter
            .query
            .terms
            .iter()
            .any(|t| t.key == "user_id" || t.key == "UserID");
        let mut page = Sql::new(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE deleted = 0"
        ));
        push_harbor_user_filter(&mut page, filter, !by_id)?;
        page.order_by(HARBOR_USER_SORT_COLUMNS, &filter.sort, "username", "id")
            .paging(filter.paging);
        let rows: Vec<UserRow> = page.fetch_all(&self.0.pool).await?;
        Ok((total, rows.into_iter().map(User::from).collect()))
    }

    /// Harbor's searchUsers: `(user_id, username)` of users whose username contains
    /// `text` (case-insensitive), a page of them and the total.
    pub async fn search_names(
        &self,
        text: &str,
        paging: berth_domain::query::Paging,
    ) -> StoreResult<(i64, Vec<(i64, String)>)> {
        use crate::repo::sql::{Sql, like_pattern};
        let pattern = like_pattern(text);
        let mut count =
            Sql::new("SELECT COUNT(*) FROM users WHERE deleted = 0 AND LOWER(username) LIKE ");
        count.text(pattern.clone()).push(" ESCAPE '\\'");
        let total = count.fetch_count(&self.0.pool).await?;
        let mut page =
            Sql::new("SELECT id, username FROM users WHERE deleted = 0 AND LOWER(username) LIKE ");
        page.text(pattern)
            .push(" ESCAPE '\\' ORDER BY username, id")
            .paging(paging);
        Ok((total, page.fetch_all(&self.0.pool).await?))
    }

    /// The non-deleted user with exactly this username.
    pub async fn find_by_username(&self, username: &str) -> StoreResult<Option<User>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE deleted = 0 AND username = $1");
        let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(username)
            .fetch_optional(&self.0.pool)
            .await?;
        Ok(row.map(User::from))
    }

    /// Replaces a user's e-mail, real name, comment and search keywords (Harbor's
    /// updateUserProfile). A taken e-mail is a `Conflict`; `false` if the user does not exist.
    pub async fn update_harbor_profile(
        &self,
        id: i64,
        email: &str,
        realname: &str,
        comment: &str,
        keywords: &str,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE users SET email = $1, realname = $2, comment = $3, keywords = $6, updated_at = $4 \
             WHERE id = $5 AND deleted = 0",
        )
        .bind(email)
        .bind(realname)
        .bind(comment)
        .bind(time::now())
        .bind(id)
        .bind(keywords)
        .execute(&self.0.pool)
        .await
        .map_err(|err| conflict_on_unique(err, || format!("email {email} already exists")))?;
        self.0.changes().bump(Topic::Articles);
        Ok(done.rows_affected() == 1)
    }

    /// Grants or revokes system administration; bumps `auth_version`. `false` if no such user.
    pub async fn set_sysadmin(&self, id: i64, sysadmin: bool) -> StoreResult<bool> {
        self.set_role_flag(id, RoleFlag::Sysadmin, sysadmin).await
    }

    /// Records whether a directory user holds the directory's administrator
    /// role (Harbor's `admin_role_in_auth`); bumps `auth_version` as a change
    /// of the flag does. `false` if no such user.
    pub async fn set_admin_role_in_auth(&self, id: i64, admin: bool) -> StoreResult<bool> {
        self.set_role_flag(id, RoleFlag::AdminRoleInAuth, admin)
            .await
    }

    /// Sets the role flag `flag` of user `id` to `value`, bumping
    /// `auth_version` and ending the tokens issued before; `false` if no such user.
    async fn set_role_flag(&self, id: i64, flag: RoleFlag, value: bool) -> StoreResult<bool> {
        let column = match flag {
            RoleFlag::Sysadmin => "sysadmin",
            RoleFlag::AdminRoleInAuth => "admin_role_in_auth",
        };
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE users SET {column} = $1, auth_version = auth_version + 1, updated_at = $2, \
             tokens_valid_after = CASE WHEN tokens_valid_after >= $4 THEN tokens_valid_after + 1 ELSE $4 END \
             WHERE id = $3 AND deleted = 0"
        )))
        .bind(i64::from(value))
        .bind(time::now())
        .bind(id)
        .bind(time::unix_now())
        .execute(&self.0.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// How many non-deleted users exist besides the built-in admin.
    pub async fn count_besides_admin(&self) -> StoreResult<i64> {
        let (count,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM users WHERE deleted = 0 AND id <> $1")
                .bind(berth_domain::model::ADMIN_USER_ID)
                .fetch_one(&self.0.pool)
                .await?;
        Ok(count)
    }
}

/// The role flags of a user row that [`Users::set_role_flag`] sets.
#[derive(Debug, Clone, Copy)]
enum RoleFlag {
    /// `sysadmin`: Harbor's system administrator flag.
    Sysadmin,
    /// `admin_role_in_auth`: the directory's administrator role.
    AdminRoleInAuth,
}
