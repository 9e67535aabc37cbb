//! The `projects` table and the caller's roles in a project.

use std::collections::HashMap;

use berth_domain::DomainError;
use berth_domain::model::{CveAllowlist, NewProject, Project, ProjectCounts, ProjectRef};
use berth_domain::query::{Paging, Query, QueryValue, SortKey};
use berth_domain::rbac::Role;
use berth_domain::time;

use crate::Store;
use crate::error::{StoreError, StoreResult, conflict_on_unique};
use crate::repo::events;
use crate::repo::flag;
use crate::repo::sql::{Column, Kind, Sql};

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

    /// The projects where `user_id` is a project administrator, directly or
    /// through one of their groups.
    pub async fn administered_by(&self, user_id: i64) -> StoreResult<Vec<i64>> {
        let ids: Vec<(i64,)> = sqlx::query_as(
            "SELECT project_id FROM project_members WHERE user_id = $1 AND role = $2 \
             UNION \
             SELECT m.project_id FROM project_members m \
             JOIN user_group_members g ON g.group_id = m.group_id \
             WHERE g.user_id = $1 AND m.role = $2",
        )
        .bind(user_id)
        .bind(Role::ProjectAdmin.id())
        .fetch_all(&self.0.pool)
        .await?;
        Ok(ids.into_iter().map(|(id,)| id).collect())
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

/// Who is looking at project lists, for Harbor's visibility rule (harbor-api.md §6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    /// A system administrator: sees everything.
    Admin,
    /// A signed-in user: member projects and public ones.
    User(i64),
    /// A robot account: the projects its permissions name and public ones.
    Robot(i64),
    /// No credentials: public projects only.
    Anonymous,
}

/// How a statement tests a user's membership of each candidate project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Membership {
    /// A probe of the membership indexes per candidate ([`push_is_member`]):
    /// cheap when a page needs a few rows.
    Probe,
    /// `p.id IN` the projects of the user's memberships, `OR p.id IN` those
    /// of their groups' (two sets rather than one `UNION`, which PostgreSQL
    /// deduplicates first), each read once from the member's side of the
    /// indexes: cheap when every candidate is visited, as a count does.
    /// Probing 10,000 projects of a member touches every leaf page of the
    /// `(project_id, user_id)` index (3,000 pages at 1,000,000 memberships,
    /// more than a connection's page cache); the sets read the user's 10,000
    /// entries from a few dozen pages. Counting a member's 10,000 projects
    /// took 9-17 ms by probes, 4 ms by the sets (`sqlite3` and `psql`).
    Set,
}

/// Appends ` AND <visibility>` for `viewer` over projects aliased `p`.
pub(crate) fn push_visibility(sql: &mut Sql, viewer: Viewer, public: Option<bool>) {
    push_visibility_by(sql, viewer, public, Membership::Probe);
}

/// [`push_visibility`], testing membership as `membership` says.
fn push_visibility_by(sql: &mut Sql, viewer: Viewer, public: Option<bool>, membership: Membership) {
    let is_member = |sql: &mut Sql, user: i64| match membership {
        Membership::Probe => push_is_member(sql, user),
        Membership::Set => {
            sql.push("(p.id IN (SELECT project_id FROM project_members WHERE user_id = ")
                .int(user)
                .push(
                    ") OR p.id IN (SELECT m.project_id FROM project_members m \
                     JOIN user_group_members g ON g.group_id = m.group_id WHERE g.user_id = ",
                )
                .int(user)
                .push("))");
        }
    };
    match (viewer, public) {
        (Viewer::Admin, None) => {}
        (Viewer::Admin, Some(flag)) => {
            sql.push(" AND p.public = ").int(i64::from(flag));
        }
        (Viewer::Anonymous, Some(false)) => {
            sql.push(" AND 1 = 0");
        }
        (Viewer::Anonymous, _) | (Viewer::User(_), Some(true)) => {
            sql.push(" AND p.public = 1");
        }
        (Viewer::User(user), None) => {
            sql.push(" AND (p.public = 1 OR ");
            is_member(sql, user);
            sql.push(")");
        }
        (Viewer::User(user), Some(false)) => {
            sql.push(" AND p.public = 0 AND ");
            is_member(sql, user);
        }
        (Viewer::Robot(_), Some(true)) => {
            sql.push(" AND p.public = 1");
        }
        (Viewer::Robot(robot), None) => {
            sql.push(" AND (p.public = 1 OR ");
            push_robot_projects(sql, robot);
            sql.push(")");
        }
        (Viewer::Robot(robot), Some(false)) => {
            sql.push(" AND p.public = 0 AND ");
            push_robot_projects(sql, robot);
        }
    }
}

/// Whether a project permission of robot `robot` covers project `p` (names
/// it, or every project: `namespace: *`).
fn push_robot_projects(sql: &mut Sql, robot: i64) {
    sql.push("EXISTS (SELECT 1 FROM robot_permissions rp WHERE rp.robot_id = ")
        .int(robot)
        .push(" AND rp.kind = 'project' AND (rp.project_id = p.id OR rp.project_id IS NULL))");
}

/// Whether `user` is a member of project `p`, directly or through a group: a
/// probe of the unique `(project_id, user_id)` index, then one of
/// `(project_id, group_id)` per group of the user, per candidate project, which
/// stays cheap however many projects the user belongs to (an `IN (member
/// projects)` set costs as much as the set). The direct probe is a scalar
/// subquery rather than an EXISTS, which PostgreSQL may plan as a hash of all
/// the user's memberships, built in full even when a page needs a few rows.
fn push_is_member(sql: &mut Sql, user: i64) {
    sql.push("((SELECT 1 FROM project_members m WHERE m.project_id = p.id AND m.user_id = ")
        .int(user)
        .push(
            ") IS NOT NULL OR EXISTS (SELECT 1 FROM project_members m WHERE m.project_id = p.id \
             AND m.group_id IN (SELECT g.group_id FROM user_group_members g WHERE g.user_id = ",
        )
        .int(user)
        .push(")))");
}

/// The ids of the projects `user` is a member of, directly or through a group.
pub(crate) fn push_member_projects(sql: &mut Sql, user: i64) {
    sql.push("SELECT project_id FROM project_members WHERE user_id = ")
        .int(user)
        .push(
            " UNION SELECT m.project_id FROM project_members m \
             JOIN user_group_members g ON g.group_id = m.group_id WHERE g.user_id = ",
        )
        .int(user);
}

/// The filters of listProjects.
#[derive(Debug, Clone, Default)]
pub struct ProjectFilter {
    /// `public=`: only public (true) or only private (false) projects.
    pub public: Option<bool>,
    /// `name=`: case-insensitive substring.
    pub name: Option<String>,
    /// `owner=`: the owner's exact username.
    pub owner: Option<String>,
    /// `q=`.
    pub query: Query,
    /// `sort=`.
    pub sort: Vec<SortKey>,
    /// `page=`, `page_size=`.
    pub paging: Paging,
}

const PROJECT_Q_COLUMNS: &[Column] = &[
    Column {
        names: &["project_id", "ProjectID"],
        sql: "p.id",
        kind: Kind::Int,
    },
    Column {
        names: &["owner_id", "OwnerID"],
        sql: "p.owner_id",
        kind: Kind::Int,
    },
    Column {
        names: &["name", "Name"],
        sql: "p.name",
        kind: Kind::LowerText,
    },
    Column {
        names: &["creation_time", "CreationTime"],
        sql: "p.created_at",
        kind: Kind::Text,
    },
    Column {
        names: &["update_time", "UpdateTime"],
        sql: "p.updated_at",
        kind: Kind::Text,
    },
    Column {
        names: &["registry_id", "RegistryID"],
        sql: "p.registry_id",
        kind: Kind::Int,
    },
];

const PROJECT_SORT_COLUMNS: &[(&[&str], &str)] = &[
    (&["project_id", "ProjectID"], "p.id"),
    (&["owner_id", "OwnerID"], "p.owner_id"),
    (&["name", "Name"], "p.name"),
    (&["creation_time", "CreationTime"], "p.created_at"),
    (&["update_time", "UpdateTime"], "p.updated_at"),
    (&["registry_id", "RegistryID"], "p.registry_id"),
];

/// `true`/`1` (and Go's other spellings) as Harbor reads the bool-ish `public` key of `q`.
fn truthy(text: &str) -> bool {
    berth_domain::model::metadata::parse_go_bool(text).unwrap_or(false)
}

fn push_project_filter(
    sql: &mut Sql,
    viewer: Viewer,
    filter: &ProjectFilter,
    membership: Membership,
) -> Result<(), DomainError> {
    let mut public = filter.public;
    let mut owner = filter.owner.clone();
    for term in &filter.query.terms {
        match (term.key.as_str(), &term.value) {
            ("public" | "Public", QueryValue::Exact(v)) => public = Some(truthy(v)),
            ("owner" | "Owner", QueryValue::Exact(v)) => owner = Some(v.clone()),
            ("deleted" | "Deleted", QueryValue::Exact(v)) if truthy(v) => {
                sql.push(" AND 1 = 0");
            }
            _ => {}
        }
    }
    push_visibility_by(sql, viewer, public, membership);
    if let Some(name) = &filter.name {
        // Project names are lower case by rule: no LOWER() per row.
        sql.push(" AND p.name").like(name);
    }
    if let Some(owner) = owner {
        sql.push(" AND p.owner_id IN (SELECT id FROM users WHERE deleted = 0 AND username = ")
            .text(owner)
            .push(")");
    }
    sql.query_terms(PROJECT_Q_COLUMNS, &filter.query)
}

/// What a detailed project listing adds to each project of a page.
#[derive(Debug, Clone, Default)]
pub struct ProjectDetails {
    /// Owner usernames by project id.
    pub owner_names: HashMap<i64, String>,
    /// Repository counts by project id (absent = 0).
    pub repo_counts: HashMap<i64, i64>,
    /// The viewer's role ids by project id, ascending.
    pub role_ids: HashMap<i64, Vec<i64>>,
    /// Metadata by project id, in key order.
    pub metadata: HashMap<i64, Vec<(String, String)>>,
    /// CVE allowlists by project id.
    pub allowlists: HashMap<i64, CveAllowlist>,
}

/// One page of listProjects.
#[derive(Debug, Clone, Default)]
pub struct ProjectPage {
    /// How many projects match, over all pages.
    pub total: i64,
    /// The page's projects, in order.
    pub projects: Vec<Project>,
    /// What the detailed form adds to them.
    pub details: ProjectDetails,
}

fn decode_items(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

/// The metadata of project `p` as one text, instead of one row per entry:
/// names and values in turn, separated by `;`, with `\` and `;` escaped by a
/// `\` (NULL without metadata); see [`decode_metadata`].
const METADATA_COLUMN: &str = "(SELECT string_agg(\
     REPLACE(REPLACE(md.name, '\\', '\\\\'), ';', '\\;') || ';' || \
     REPLACE(REPLACE(md.value, '\\', '\\\\'), ';', '\\;'), ';') \
     FROM project_metadata md WHERE md.project_id = p.id)";

/// Decodes [`METADATA_COLUMN`] into `(name, value)` pairs, sorted by name.
fn decode_metadata(text: Option<&str>) -> Vec<(String, String)> {
    let Some(text) = text else {
        return Vec::new();
    };
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => field.extend(chars.next()),
            ';' => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    let mut fields = fields.into_iter();
    let mut pairs = Vec::new();
    while let (Some(name), Some(value)) = (fields.next(), fields.next()) {
        pairs.push((name, value));
    }
    pairs.sort_unstable();
    pairs
}

/// The bit of each role id in the `group_roles` column (see [`push_detailed_select`]).
const ROLE_BITS: &str =
    "CASE m.role WHEN 1 THEN 1 WHEN 2 THEN 2 WHEN 3 THEN 4 WHEN 4 THEN 8 WHEN 5 THEN 16 END";

/// Appends `PROJECT_COLUMNS` and the detail columns of a [`DetailRow`], then
/// `FROM projects p ... WHERE 1 = 1`: the details are joins and correlated
/// lookups that run for the returned rows only, so projects and their details
/// come in one statement, one row per project. The roles of `user` in `p` are
/// its direct membership's role (`role`) and the roles of its groups'
/// memberships as a bit set (`group_roles`, bit `n - 1` for role `n`); both are
/// NULL without a user.
fn push_detailed_select(sql: &mut Sql, user: Option<i64>) {
    sql.push(PROJECT_COLUMNS).push(
        ", (SELECT COUNT(*) FROM repositories r WHERE r.project_id = p.id) AS repo_count, \
         u.username AS owner_name, a.expires_at AS allowlist_expires_at, a.items AS allowlist_items, ",
    )
    .push(METADATA_COLUMN)
    .push(" AS metadata");
    match user {
        Some(user) => {
            sql.push(
                ", (SELECT m.role FROM project_members m WHERE m.project_id = p.id AND m.user_id = ",
            )
            .int(user)
            .push(") AS role, (SELECT SUM(DISTINCT ")
            .push(ROLE_BITS)
            .push(
                ") FROM project_members m WHERE m.project_id = p.id AND m.group_id IN \
                 (SELECT g.group_id FROM user_group_members g WHERE g.user_id = ",
            )
            .int(user)
            .push(")) AS group_roles");
        }
        None => {
            sql.push(", CAST(NULL AS BIGINT) AS role, CAST(NULL AS BIGINT) AS group_roles");
        }
    }
    sql.push(
        " FROM projects p LEFT JOIN users u ON u.id = p.owner_id \
         LEFT JOIN cve_allowlists a ON a.project_id = p.id WHERE 1 = 1",
    );
}

/// A project and its details, as [`push_detailed_select`] selects them.
#[derive(sqlx::FromRow)]
struct DetailRow {
    #[sqlx(flatten)]
    project: ProjectRow,
    repo_count: i64,
    owner_name: Option<String>,
    allowlist_expires_at: Option<i64>,
    allowlist_items: Option<String>,
    metadata: Option<String>,
    role: Option<i64>,
    group_roles: Option<i64>,
}

/// Splits detail rows into their projects and the details, in row order.
fn split_rows(rows: Vec<DetailRow>) -> (Vec<Project>, ProjectDetails) {
    let mut details = ProjectDetails::default();
    let mut projects = Vec::with_capacity(rows.len());
    for row in rows {
        let id = row.project.id;
        if row.repo_count > 0 {
            details.repo_counts.insert(id, row.repo_count);
        }
        if let Some(name) = row.owner_name {
            details.owner_names.insert(id, name);
        }
        let metadata = decode_metadata(row.metadata.as_deref());
        if !metadata.is_empty() {
            details.metadata.insert(id, metadata);
        }
        if let Some(items) = row.allowlist_items {
            details.allowlists.insert(
                id,
                CveAllowlist {
                    expires_at: row.allowlist_expires_at,
                    items: decode_items(&items),
                },
            );
        }
        let group_roles = row.group_roles.unwrap_or(0);
        let mut roles: Vec<i64> = (1..=5)
            .filter(|role| group_roles & (1 << (role - 1)) != 0)
            .collect();
        if let Some(role) = row.role {
            roles.push(role);
            roles.sort_unstable();
            roles.dedup();
        }
        if !roles.is_empty() {
            details.role_ids.insert(id, roles);
        }
        projects.push(Project::from(row.project));
    }
    (projects, details)
}

impl Projects<'_> {
    /// One page of the projects `viewer` may see with their details for `user`
    /// (the viewer's id: roles are only looked up for users), and the total
    /// matching count: two statements, run at the same time on two connections.
    pub async fn list(
        &self,
        viewer: Viewer,
        filter: &ProjectFilter,
        user: Option<i64>,
    ) -> StoreResult<ProjectPage> {
        let mut count = Sql::new("SELECT COUNT(*) FROM projects p WHERE 1 = 1");
        push_project_filter(&mut count, viewer, filter, Membership::Set)?;
        let mut page = Sql::new("SELECT ");
        push_detailed_select(&mut page, user);
        push_project_filter(&mut page, viewer, filter, Membership::Probe)?;
        page.order_by(PROJECT_SORT_COLUMNS, &filter.sort, "p.name", "p.id")
            .paging(filter.paging);
        let (total, rows) = futures_util::try_join!(
            count.fetch_count(&self.0.pool),
            page.fetch_all::<DetailRow, _>(&self.0.pool),
        )?;
        let (projects, details) = split_rows(rows);
        Ok(ProjectPage {
            total,
            projects,
            details,
        })
    }

    /// The projects `viewer` may see whose name contains `text` (case-sensitive),
    /// by name, with their details for `user` (see [`Projects::list`]).
    pub async fn search(
        &self,
        viewer: Viewer,
        text: &str,
        user: Option<i64>,
    ) -> StoreResult<(Vec<Project>, ProjectDetails)> {
        // Names are lower case by rule: a text with an upper-case letter matches
        // none, and for any other text LIKE's case folding changes nothing.
        if text.is_empty() || text.chars().any(char::is_uppercase) {
            return Ok((Vec::new(), ProjectDetails::default()));
        }
        let mut sql = Sql::new("SELECT ");
        push_detailed_select(&mut sql, user);
        sql.push(" AND p.name").like(text);
        push_visibility(&mut sql, viewer, None);
        let mut rows: Vec<DetailRow> = sql.fetch_all(&self.0.pool).await?;
        // Sorted here rather than by ORDER BY, which PostgreSQL would serve by
        // walking the whole name index. Names are ASCII, so byte order is the
        // order of both backends.
        rows.sort_unstable_by(|a, b| {
            (&a.project.name, a.project.id).cmp(&(&b.project.name, b.project.id))
        });
        Ok(split_rows(rows))
    }

    /// Owner names, repository counts, the roles of `user` (the viewer's id:
    /// roles are only looked up for users), metadata and allowlists of `ids`.
    pub async fn details(&self, ids: &[i64], user: Option<i64>) -> StoreResult<ProjectDetails> {
        if ids.is_empty() {
            return Ok(ProjectDetails::default());
        }
        let mut sql = Sql::new("SELECT ");
        push_detailed_select(&mut sql, user);
        sql.push(" AND p.id IN ").int_list(ids);
        let rows: Vec<DetailRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(split_rows(rows).1)
    }

    /// Whether a project with exactly this name exists.
    pub async fn exists_named(&self, name: &str) -> StoreResult<bool> {
        let found: Option<(i64,)> = sqlx::query_as("SELECT id FROM projects WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.0.pool)
            .await?;
        Ok(found.is_some())
    }

    /// Creates a project with its owner membership (projectAdmin), metadata,
    /// quota and empty CVE allowlist, and the [`events::PROJECT_CREATED`]
    /// event of `by`, in one transaction. A taken name is a `Conflict`.
    pub async fn create(&self, new: &NewProject, by: &str) -> StoreResult<Project> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        let row: ProjectRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO projects (name, owner_id, public, registry_id, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $5) RETURNING {PROJECT_RETURNING}"
        )))
        .bind(&new.name)
        .bind(new.owner_id)
        .bind(i64::from(new.public()))
        .bind(new.registry_id)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await
        .map_err(|err| match &err {
            // The registry was deleted since the caller found it.
            sqlx::Error::Database(db)
                if db.kind() == sqlx::error::ErrorKind::ForeignKeyViolation =>
            {
                StoreError::Domain(DomainError::bad_request(format!(
                    "bad request: registry {} not found",
                    new.registry_id.unwrap_or_default()
                )))
            }
            _ => conflict_on_unique(err, || {
                format!("The project named {} already exists", new.name)
            }),
        })?;
        sqlx::query(
            "INSERT INTO project_members (project_id, user_id, role, created_at, updated_at) \
             VALUES ($1, $2, 1, $3, $3)",
        )
        .bind(row.id)
        .bind(new.owner_id)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        for (name, value) in &new.metadata {
            sqlx::query(
                "INSERT INTO project_metadata (project_id, name, value, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $4)",
            )
            .bind(row.id)
            .bind(name)
            .bind(value)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("INSERT INTO project_quotas (project_id, hard, used, updated_at) VALUES ($1, $2, 0, $3)")
            .bind(row.id)
            .bind(new.storage_limit)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO cve_allowlists (project_id, items, created_at, updated_at) VALUES ($1, '[]', $2, $2)",
        )
        .bind(row.id)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        let event = events::NewEvent {
            kind: events::PROJECT_CREATED,
            project_id: Some(row.id),
            resource: new.name.clone(),
            actor: by.to_string(),
            digest: None,
            detail: None,
        };
        events::record(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(row.into())
    }

    /// Merges `metadata` (already validated) into the project, keeping
    /// `projects.public` in step, and replaces the allowlist when one is given; one transaction.
    pub async fn update(
        &self,
        id: i64,
        metadata: &[(String, String)],
        allowlist: Option<&CveAllowlist>,
    ) -> StoreResult<()> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        for (name, value) in metadata {
            upsert_metadata(&mut tx, id, name, value, &now).await?;
        }
        if let Some(list) = allowlist {
            let items =
                serde_json::to_string(&list.items).map_err(|e| sqlx::Error::Encode(e.into()))?;
            sqlx::query(
                "INSERT INTO cve_allowlists (project_id, expires_at, items, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $4) ON CONFLICT (project_id) DO UPDATE SET \
                 expires_at = excluded.expires_at, items = excluded.items, updated_at = excluded.updated_at",
            )
            .bind(id)
            .bind(list.expires_at)
            .bind(items)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE projects SET updated_at = $1 WHERE id = $2")
            .bind(&now)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The number of repositories in a project.
    pub async fn repository_count(&self, id: i64) -> StoreResult<i64> {
        let (count,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM repositories WHERE project_id = $1")
                .bind(id)
                .fetch_one(&self.0.pool)
                .await?;
        Ok(count)
    }

    /// Deletes a project and everything that cascades from it, with the
    /// [`events::PROJECT_DELETED`] event of `by`. A project that still has
    /// repositories is a `Precondition` failure; `false` if it was already gone.
    pub async fn delete(&self, id: i64, by: &str) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let name: Option<(String,)> = sqlx::query_as("SELECT name FROM projects WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        // The schedule of its retention policy (the policy goes with the
        // project); undone with the rest when the project stays.
        sqlx::query(
            "DELETE FROM job_schedules WHERE vendor_type = $2 AND vendor_id IN \
             (SELECT id FROM retention_policies WHERE project_id = $1)",
        )
        .bind(id)
        .bind(crate::repo::retention::VENDOR_TYPE)
        .execute(&mut *tx)
        .await?;
        let done = sqlx::query(
            "DELETE FROM projects WHERE id = $1 \
             AND NOT EXISTS (SELECT 1 FROM repositories WHERE project_id = $1)",
        )
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(|err| match &err {
            sqlx::Error::Database(db)
                if db.kind() == sqlx::error::ErrorKind::ForeignKeyViolation =>
            {
                StoreError::Domain(DomainError::Precondition(REPOSITORIES_LEFT.into()))
            }
            _ => StoreError::Database(err),
        })?;
        if done.rows_affected() == 0 {
            let (left,): (i64,) =
                sqlx::query_as("SELECT COUNT(*) FROM repositories WHERE project_id = $1")
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await?;
            if left > 0 {
                return Err(DomainError::Precondition(REPOSITORIES_LEFT.into()).into());
            }
            return Ok(false);
        }
        let event = events::NewEvent {
            kind: events::PROJECT_DELETED,
            // The project is gone: its entry belongs to no project.
            project_id: None,
            resource: name.map(|(name,)| name).unwrap_or_default(),
            actor: by.to_string(),
            digest: None,
            detail: None,
        };
        events::record(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Repository count, members per role and quota of one project (getProjectSummary).
    pub async fn counts(&self, id: i64) -> StoreResult<ProjectCounts> {
        let repo_count = self.repository_count(id).await?;
        let members_by_role: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT role, COUNT(*) FROM project_members WHERE project_id = $1 GROUP BY role ORDER BY role",
        )
        .bind(id)
        .fetch_all(&self.0.pool)
        .await?;
        Ok(ProjectCounts {
            repo_count,
            members_by_role,
            quota: self.quota(id).await?,
        })
    }

    /// A project's storage quota as `(hard, used)` in bytes (`hard < 0`: unlimited).
    pub async fn quota(&self, id: i64) -> StoreResult<Option<(i64, i64)>> {
        Ok(
            sqlx::query_as("SELECT hard, used FROM project_quotas WHERE project_id = $1")
                .bind(id)
                .fetch_optional(&self.0.pool)
                .await?,
        )
    }

    /// Sets a project's storage limit in bytes (`-1`: unlimited); `false` when
    /// the project has no quota row.
    pub async fn set_storage_limit(&self, id: i64, hard: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE project_quotas SET hard = $2, updated_at = $3 WHERE project_id = $1",
        )
        .bind(id)
        .bind(hard)
        .bind(time::now())
        .execute(&self.0.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// The columns of a [`ProjectRow`] in `RETURNING` clauses (no table alias).
const PROJECT_RETURNING: &str = "id, name, owner_id, public, registry_id, created_at, updated_at";

/// The message of a delete refused because repositories remain.
pub const REPOSITORIES_LEFT: &str = "the project contains repositories, can not be deleted";

/// Inserts or replaces one metadata value; `public` is mirrored into `projects.public`.
pub(crate) async fn upsert_metadata(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    project_id: i64,
    name: &str,
    value: &str,
    now: &str,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO project_metadata (project_id, name, value, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $4) ON CONFLICT (project_id, name) DO UPDATE SET \
         value = excluded.value, updated_at = excluded.updated_at",
    )
    .bind(project_id)
    .bind(name)
    .bind(value)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    sync_public(tx, project_id, name, value == "true", now).await
}

/// Mirrors the `public` metadata value into `projects.public` (no-op for other keys).
pub(crate) async fn sync_public(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    project_id: i64,
    name: &str,
    public: bool,
    now: &str,
) -> StoreResult<()> {
    if name == "public" {
        sqlx::query("UPDATE projects SET public = $1, updated_at = $2 WHERE id = $3")
            .bind(i64::from(public))
            .bind(now)
            .bind(project_id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_text_decodes() {
        assert!(decode_metadata(None).is_empty());
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            decode_metadata(Some("public;false")),
            pairs(&[("public", "false")])
        );
        assert_eq!(
            decode_metadata(Some(r"severity;low;auto_scan;true;pattern;a\;b\\;empty;")),
            pairs(&[
                ("auto_scan", "true"),
                ("empty", ""),
                ("pattern", r"a;b\"),
                ("severity", "low"),
            ])
        );
    }

    #[test]
    fn role_bits_follow_role_ids() {
        let rows = |role: Option<i64>, group_roles: Option<i64>| {
            let row = DetailRow {
                project: ProjectRow {
                    id: 7,
                    name: "p".into(),
                    owner_id: 1,
                    public: 0,
                    registry_id: None,
                    created_at: String::new(),
                    updated_at: String::new(),
                },
                repo_count: 0,
                owner_name: None,
                allowlist_expires_at: None,
                allowlist_items: None,
                metadata: None,
                role,
                group_roles,
            };
            split_rows(vec![row]).1.role_ids.get(&7).cloned()
        };
        assert_eq!(rows(None, None), None);
        assert_eq!(rows(Some(2), None), Some(vec![2]));
        assert_eq!(rows(Some(2), Some(0b10010)), Some(vec![2, 5]));
        assert_eq!(rows(None, Some(0b1101)), Some(vec![1, 3, 4]));
    }
}
