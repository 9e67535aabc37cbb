//! Registry content for the management API: repositories, artifacts, tags and
//! labels, with Harbor's list filters built from whitelisted columns and bound values.

use berth_domain::DomainError;
use berth_domain::model::{Artifact, ArtifactReference, Label, Repository, Tag};
use berth_domain::time;
use sqlx::any::AnyArguments;
use sqlx::query::QueryAs;
use sqlx::{Any, AnyPool};

use crate::Store;
use crate::error::{StoreResult, conflict_on_unique};
use crate::repo::registry::delete_artifact_tree;

/// A bound value of a dynamic query.
#[derive(Debug, Clone)]
enum Arg {
    Int(i64),
    Text(String),
}

/// SQL text with `$N` placeholders and the values they stand for.
#[derive(Debug, Default)]
struct Sql {
    text: String,
    args: Vec<Arg>,
}

impl Sql {
    fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    fn int(&mut self, value: i64) -> &mut Self {
        self.args.push(Arg::Int(value));
        self.text.push_str(&format!("${}", self.args.len()));
        self
    }

    fn text(&mut self, value: &str) -> &mut Self {
        self.args.push(Arg::Text(value.to_string()));
        self.text.push_str(&format!("${}", self.args.len()));
        self
    }

    fn ints(&mut self, values: &[i64]) -> &mut Self {
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.int(*v);
        }
        self
    }

    async fn fetch_all<T>(&self, pool: &AnyPool) -> StoreResult<Vec<T>>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
    {
        let mut query: QueryAs<'_, Any, T, AnyArguments> =
            sqlx::query_as(sqlx::AssertSqlSafe(self.text.clone()));
        for arg in &self.args {
            query = match arg {
                Arg::Int(v) => query.bind(*v),
                Arg::Text(s) => query.bind(s.clone()),
            };
        }
        Ok(query.fetch_all(pool).await?)
    }

    async fn count(&self, pool: &AnyPool) -> StoreResult<i64> {
        let rows: Vec<(i64,)> = self.fetch_all(pool).await?;
        Ok(rows.first().map_or(0, |(n,)| *n))
    }
}

/// `%text%` for a case-insensitive `LIKE .. ESCAPE '\'`, with `%`, `_` and `\` escaped.
fn like_pattern(text: &str) -> String {
    let mut pattern = String::from("%");
    for ch in text.to_lowercase().chars() {
        if matches!(ch, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(ch);
    }
    pattern.push('%');
    pattern
}

/// How a text column is matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextMatch {
    /// Equal.
    Exact(String),
    /// Contains, ignoring case.
    Fuzzy(String),
    /// Equal to one of.
    AnyOf(Vec<String>),
}

fn push_text_match(sql: &mut Sql, column: &str, matcher: &TextMatch) {
    match matcher {
        TextMatch::Exact(v) => {
            sql.push(" AND ").push(column).push(" = ").text(v);
        }
        TextMatch::Fuzzy(v) => {
            sql.push(" AND LOWER(")
                .push(column)
                .push(") LIKE ")
                .text(&like_pattern(v))
                .push(" ESCAPE '\\'");
        }
        TextMatch::AnyOf(values) if values.is_empty() => {
            sql.push(" AND 1 = 0");
        }
        TextMatch::AnyOf(values) => {
            sql.push(" AND ").push(column).push(" IN (");
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    sql.push(", ");
                }
                sql.text(v);
            }
            sql.push(")");
        }
    }
}

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

/// A page: `(offset, limit)`; `None` for all rows.
pub type Page = Option<(i64, i64)>;

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

const ARTIFACT_COLUMNS: &str = "a.id, a.project_id, a.repository_id, r.name AS repository_name, a.digest, \
     a.manifest_media_type, a.media_type, a.artifact_type, a.type AS kind, a.size, a.icon, a.subject_digest, \
     a.accessory_type, a.push_time, a.pull_time, a.extra_attrs, a.annotations";

#[derive(sqlx::FromRow)]
struct ArtifactRow {
    id: i64,
    project_id: i64,
    repository_id: i64,
    repository_name: String,
    digest: String,
    manifest_media_type: String,
    media_type: String,
    artifact_type: String,
    kind: String,
    size: i64,
    icon: String,
    subject_digest: Option<String>,
    accessory_type: Option<String>,
    push_time: String,
    pull_time: String,
    extra_attrs: String,
    annotations: Option<String>,
}

impl From<ArtifactRow> for Artifact {
    fn from(r: ArtifactRow) -> Self {
        Self {
            id: r.id,
            project_id: r.project_id,
            repository_id: r.repository_id,
            repository_name: r.repository_name,
            digest: r.digest,
            manifest_media_type: r.manifest_media_type,
            media_type: r.media_type,
            artifact_type: r.artifact_type,
            kind: r.kind,
            size: r.size,
            icon: r.icon,
            subject_digest: r.subject_digest,
            accessory_type: r.accessory_type,
            push_time: r.push_time,
            pull_time: r.pull_time,
            extra_attrs: r.extra_attrs,
            annotations: r.annotations,
        }
    }
}

#[derive(sqlx::FromRow)]
struct TagRow {
    id: i64,
    repository_id: i64,
    artifact_id: i64,
    name: String,
    push_time: String,
    pull_time: String,
}

impl From<TagRow> for Tag {
    fn from(r: TagRow) -> Self {
        Self {
            id: r.id,
            repository_id: r.repository_id,
            artifact_id: r.artifact_id,
            name: r.name,
            push_time: r.push_time,
            pull_time: r.pull_time,
        }
    }
}

#[derive(sqlx::FromRow)]
struct ReferenceRow {
    parent_id: i64,
    child_id: i64,
    child_digest: String,
    platform: Option<String>,
    urls: Option<String>,
    annotations: Option<String>,
}

impl From<ReferenceRow> for ArtifactReference {
    fn from(r: ReferenceRow) -> Self {
        Self {
            parent_id: r.parent_id,
            child_id: r.child_id,
            child_digest: r.child_digest,
            platform: r.platform,
            urls: r.urls,
            annotations: r.annotations,
        }
    }
}

#[derive(sqlx::FromRow)]
struct LabelRow {
    id: i64,
    name: String,
    description: String,
    color: String,
    scope: String,
    project_id: Option<i64>,
    created_at: String,
    updated_at: String,
}

impl From<LabelRow> for Label {
    fn from(r: LabelRow) -> Self {
        Self {
            id: r.id,
            name: r.name,
            description: r.description,
            color: r.color,
            scope: r.scope,
            project_id: r.project_id,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// The `tags` condition of an artifact listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagMatch {
    /// `tags=*`: tagged.
    Any,
    /// `tags=nil`: untagged.
    Nil,
    /// `tags=~x`: a tag containing `x` (case-sensitive).
    Fuzzy(String),
    /// `tags=x`: a tag named `x`.
    Exact(String),
}

/// Filterable and sortable artifact columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactColumn {
    /// `id`
    Id,
    /// `type`
    Type,
    /// `media_type`
    MediaType,
    /// `manifest_media_type`
    ManifestMediaType,
    /// `artifact_type`
    ArtifactType,
    /// `digest`
    Digest,
    /// `size`
    Size,
    /// `push_time`
    PushTime,
    /// `pull_time`
    PullTime,
}

impl ArtifactColumn {
    /// The column for a Harbor `q`/`sort` key, if it is one.
    pub fn from_key(key: &str) -> Option<Self> {
        Some(match key {
            "id" => Self::Id,
            "type" => Self::Type,
            "media_type" => Self::MediaType,
            "manifest_media_type" => Self::ManifestMediaType,
            "artifact_type" => Self::ArtifactType,
            "digest" => Self::Digest,
            "size" => Self::Size,
            "push_time" => Self::PushTime,
            "pull_time" => Self::PullTime,
            _ => return None,
        })
    }

    fn column(self) -> &'static str {
        match self {
            Self::Id => "a.id",
            Self::Type => "a.type",
            Self::MediaType => "a.media_type",
            Self::ManifestMediaType => "a.manifest_media_type",
            Self::ArtifactType => "a.artifact_type",
            Self::Digest => "a.digest",
            Self::Size => "a.size",
            Self::PushTime => "a.push_time",
            Self::PullTime => "a.pull_time",
        }
    }
}

/// An artifact listing (Harbor's listArtifacts semantics).
#[derive(Debug, Clone)]
pub struct ArtifactQuery {
    /// The repository.
    pub repository_id: i64,
    /// `base=*`: include index children too.
    pub all: bool,
    /// The `tags` condition.
    pub tags: Option<TagMatch>,
    /// Label ids the artifacts must all carry.
    pub labels: Vec<i64>,
    /// Column conditions.
    pub columns: Vec<(ArtifactColumn, TextMatch)>,
    /// Order (`true` = descending); empty for `-push_time,-id`.
    pub sort: Vec<(ArtifactColumn, bool)>,
    /// The page.
    pub page: Page,
}

/// A new label.
#[derive(Debug, Clone)]
pub struct NewLabel {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Color.
    pub color: String,
    /// The project of a project label; `None` for a global one.
    pub project_id: Option<i64>,
}

/// Access to the management view of registry content.
pub struct Artifacts<'a>(pub(crate) &'a Store);

impl Store {
    /// The repositories/artifacts/tags/labels repository.
    pub fn artifacts(&self) -> Artifacts<'_> {
        Artifacts(self)
    }
}

fn push_page(sql: &mut Sql, page: Page) {
    if let Some((offset, limit)) = page {
        sql.push(" LIMIT ").int(limit).push(" OFFSET ").int(offset);
    }
}

impl Artifacts<'_> {
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
    pub async fn list_repositories(
        &self,
        query: &RepositoryQuery,
    ) -> StoreResult<(Vec<Repository>, i64)> {
        let filter = Self::repository_where(query);
        let mut count = Sql::default();
        count.push("SELECT COUNT(*)").push(&filter.text);
        count.args.clone_from(&filter.args);
        let total = count.count(&self.0.pool).await?;
        let mut sql = Sql::default();
        sql.push("SELECT r.id, r.project_id, r.name, r.description, r.pull_count, r.created_at, r.updated_at")
            .push(&filter.text);
        sql.args = filter.args;
        sql.push(" ORDER BY ");
        if query.sort.is_empty() {
            sql.push("r.created_at DESC, r.id DESC");
        } else {
            let order: Vec<String> = query
                .sort
                .iter()
                .map(|(c, desc)| format!("{} {}", c.column(), if *desc { "DESC" } else { "ASC" }))
                .collect();
            sql.push(&order.join(", ")).push(", r.id DESC");
        }
        push_page(&mut sql, query.page);
        let rows: Vec<RepositoryRow> = sql.fetch_all(&self.0.pool).await?;
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
    pub async fn repository(&self, name: &str) -> StoreResult<Option<Repository>> {
        let (mut found, _) = self
            .list_repositories(&RepositoryQuery {
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
    pub async fn update_repository_description(
        &self,
        id: i64,
        description: &str,
    ) -> StoreResult<bool> {
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
    pub async fn delete_repository(&self, id: i64) -> StoreResult<bool> {
        let mut tx = self.0.pool.begin().await?;
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
    pub async fn repository_counts(&self, project_ids: &[i64]) -> StoreResult<Vec<(i64, i64)>> {
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

    /// One page of artifacts and the total.
    pub async fn list_artifacts(&self, query: &ArtifactQuery) -> StoreResult<(Vec<Artifact>, i64)> {
        let mut filter = Sql::default();
        filter
            .push(" FROM artifacts a JOIN repositories r ON r.id = a.repository_id WHERE a.repository_id = ")
            .int(query.repository_id)
            .push(" AND a.accessory_type IS NULL");
        if !query.all {
            filter.push(
                " AND (EXISTS (SELECT 1 FROM tags t WHERE t.artifact_id = a.id) \
                 OR NOT EXISTS (SELECT 1 FROM artifact_references ar WHERE ar.child_id = a.id))",
            );
        }
        match &query.tags {
            None => {}
            Some(TagMatch::Any) => {
                filter.push(" AND EXISTS (SELECT 1 FROM tags t WHERE t.artifact_id = a.id)");
            }
            Some(TagMatch::Nil) => {
                filter.push(" AND NOT EXISTS (SELECT 1 FROM tags t WHERE t.artifact_id = a.id)");
            }
            Some(TagMatch::Fuzzy(text)) => {
                filter
                    .push(" AND EXISTS (SELECT 1 FROM tags t WHERE t.artifact_id = a.id AND REPLACE(t.name, ")
                    .text(text)
                    .push(", '') <> t.name)");
            }
            Some(TagMatch::Exact(name)) => {
                filter
                    .push(" AND EXISTS (SELECT 1 FROM tags t WHERE t.artifact_id = a.id AND t.name = ")
                    .text(name)
                    .push(")");
            }
        }
        for label in &query.labels {
            filter
                .push(" AND EXISTS (SELECT 1 FROM label_references lr WHERE lr.artifact_id = a.id AND lr.label_id = ")
                .int(*label)
                .push(")");
        }
        for (column, matcher) in &query.columns {
            if matches!(column, ArtifactColumn::Id | ArtifactColumn::Size) {
                // Integer columns: exact matches only, compared as numbers.
                if let TextMatch::Exact(v) = matcher {
                    match v.parse::<i64>() {
                        Ok(n) => {
                            filter
                                .push(" AND ")
                                .push(column.column())
                                .push(" = ")
                                .int(n);
                        }
                        Err(_) => {
                            filter.push(" AND 1 = 0");
                        }
                    }
                }
                continue;
            }
            push_text_match(&mut filter, column.column(), matcher);
        }
        let mut count = Sql::default();
        count.push("SELECT COUNT(*)").push(&filter.text);
        count.args.clone_from(&filter.args);
        let total = count.count(&self.0.pool).await?;
        let mut sql = Sql::default();
        sql.push("SELECT ")
            .push(ARTIFACT_COLUMNS)
            .push(&filter.text);
        sql.args = filter.args;
        sql.push(" ORDER BY ");
        if query.sort.is_empty() {
            sql.push("a.push_time DESC, a.id DESC");
        } else {
            let order: Vec<String> = query
                .sort
                .iter()
                .map(|(c, desc)| format!("{} {}", c.column(), if *desc { "DESC" } else { "ASC" }))
                .collect();
            sql.push(&order.join(", ")).push(", a.id DESC");
        }
        push_page(&mut sql, query.page);
        let rows: Vec<ArtifactRow> = sql.fetch_all(&self.0.pool).await?;
        Ok((rows.into_iter().map(Artifact::from).collect(), total))
    }

    /// The artifact `digest` of repository `repository_id`.
    pub async fn artifact_by_digest(
        &self,
        repository_id: i64,
        digest: &str,
    ) -> StoreResult<Option<Artifact>> {
        let mut sql = Sql::default();
        sql.push("SELECT ")
            .push(ARTIFACT_COLUMNS)
            .push(" FROM artifacts a JOIN repositories r ON r.id = a.repository_id WHERE a.repository_id = ")
            .int(repository_id)
            .push(" AND a.digest = ")
            .text(digest);
        let mut rows: Vec<ArtifactRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.pop().map(Artifact::from))
    }

    /// The artifact tag `tag` of repository `repository_id` points at.
    pub async fn artifact_by_tag(
        &self,
        repository_id: i64,
        tag: &str,
    ) -> StoreResult<Option<Artifact>> {
        let mut sql = Sql::default();
        sql.push("SELECT ")
            .push(ARTIFACT_COLUMNS)
            .push(" FROM tags t JOIN artifacts a ON a.id = t.artifact_id JOIN repositories r ON r.id = a.repository_id WHERE t.repository_id = ")
            .int(repository_id)
            .push(" AND t.name = ")
            .text(tag);
        let mut rows: Vec<ArtifactRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.pop().map(Artifact::from))
    }

    /// The tags of `artifact_ids`, newest push first.
    pub async fn tags_of(&self, artifact_ids: &[i64]) -> StoreResult<Vec<Tag>> {
        if artifact_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::default();
        sql.push("SELECT id, repository_id, artifact_id, name, push_time, pull_time FROM tags WHERE artifact_id IN (")
            .ints(artifact_ids)
            .push(") ORDER BY push_time DESC, id DESC");
        let rows: Vec<TagRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().map(Tag::from).collect())
    }

    /// One page of an artifact's tags (optionally by name) and the total.
    pub async fn list_tags(
        &self,
        artifact_id: i64,
        name: Option<&TextMatch>,
        page: Page,
    ) -> StoreResult<(Vec<Tag>, i64)> {
        let mut filter = Sql::default();
        filter
            .push(" FROM tags t WHERE t.artifact_id = ")
            .int(artifact_id);
        if let Some(name) = name {
            push_text_match(&mut filter, "t.name", name);
        }
        let mut count = Sql::default();
        count.push("SELECT COUNT(*)").push(&filter.text);
        count.args.clone_from(&filter.args);
        let total = count.count(&self.0.pool).await?;
        let mut sql = Sql::default();
        sql.push("SELECT t.id, t.repository_id, t.artifact_id, t.name, t.push_time, t.pull_time")
            .push(&filter.text);
        sql.args = filter.args;
        sql.push(" ORDER BY t.push_time DESC, t.id DESC");
        push_page(&mut sql, page);
        let rows: Vec<TagRow> = sql.fetch_all(&self.0.pool).await?;
        Ok((rows.into_iter().map(Tag::from).collect(), total))
    }

    /// The index children of `parent_ids`.
    pub async fn references_of(&self, parent_ids: &[i64]) -> StoreResult<Vec<ArtifactReference>> {
        if parent_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::default();
        sql.push("SELECT parent_id, child_id, child_digest, platform, urls, annotations FROM artifact_references WHERE parent_id IN (")
            .ints(parent_ids)
            .push(") ORDER BY parent_id, child_id");
        let rows: Vec<ReferenceRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().map(ArtifactReference::from).collect())
    }

    /// The labels of `artifact_ids`, as `(artifact_id, label)`.
    pub async fn labels_of(&self, artifact_ids: &[i64]) -> StoreResult<Vec<(i64, Label)>> {
        if artifact_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::default();
        sql.push("SELECT lr.artifact_id, l.id, l.name, l.description, l.color, l.scope, l.project_id, l.created_at, l.updated_at \
                  FROM label_references lr JOIN labels l ON l.id = lr.label_id WHERE lr.artifact_id IN (")
            .ints(artifact_ids)
            .push(") ORDER BY l.id");
        #[derive(sqlx::FromRow)]
        struct Row {
            artifact_id: i64,
            #[sqlx(flatten)]
            label: LabelRow,
        }
        let rows: Vec<Row> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows
            .into_iter()
            .map(|r| (r.artifact_id, Label::from(r.label)))
            .collect())
    }

    /// Adds tag `name` to an artifact; `Conflict` when the repository has it.
    pub async fn create_tag(
        &self,
        repository_id: i64,
        artifact_id: i64,
        name: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO tags (repository_id, artifact_id, name, push_time, pull_time) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(repository_id)
        .bind(artifact_id)
        .bind(name)
        .bind(time::now())
        .bind(time::ZERO_TIME)
        .execute(&self.0.pool)
        .await
        .map_err(|e| {
            conflict_on_unique(e, || format!("tag {name} already exists under the repository {repository_id}"))
        })?;
        Ok(())
    }

    /// Removes tag `name` from an artifact; `false` when it has no such tag.
    pub async fn delete_tag(&self, artifact_id: i64, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM tags WHERE artifact_id = $1 AND name = $2")
            .bind(artifact_id)
            .bind(name)
            .execute(&self.0.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes an artifact with its tags, labels and accessories;
    /// `Precondition` while an index refers to it.
    pub async fn delete_artifact(&self, artifact: &Artifact) -> StoreResult<()> {
        let mut tx = self.0.pool.begin().await?;
        let referenced: Option<(i64,)> =
            sqlx::query_as("SELECT parent_id FROM artifact_references WHERE child_id = $1 LIMIT 1")
                .bind(artifact.id)
                .fetch_optional(&mut *tx)
                .await?;
        if referenced.is_some() {
            return Err(DomainError::Precondition(
                "the deleting artifact is referenced by others".into(),
            )
            .into());
        }
        delete_artifact_tree(
            &mut tx,
            artifact.id,
            artifact.repository_id,
            &artifact.digest,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Creates a label; `Conflict` when the name is taken in its scope.
    pub async fn create_label(&self, new: &NewLabel) -> StoreResult<Label> {
        let now = time::now();
        let scope = if new.project_id.is_some() { "p" } else { "g" };
        let row: LabelRow = sqlx::query_as(
            "INSERT INTO labels (name, description, color, scope, project_id, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $6) \
             RETURNING id, name, description, color, scope, project_id, created_at, updated_at",
        )
        .bind(&new.name)
        .bind(&new.description)
        .bind(&new.color)
        .bind(scope)
        .bind(new.project_id)
        .bind(&now)
        .fetch_one(&self.0.pool)
        .await
        .map_err(|e| conflict_on_unique(e, || format!("label {} already exists", new.name)))?;
        Ok(row.into())
    }

    /// A label by id.
    pub async fn label(&self, id: i64) -> StoreResult<Option<Label>> {
        let row: Option<LabelRow> = sqlx::query_as(
            "SELECT id, name, description, color, scope, project_id, created_at, updated_at FROM labels WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(row.map(Label::from))
    }

    /// One page of labels of a scope (global, or one project's) and the total.
    pub async fn list_labels(
        &self,
        project_id: Option<i64>,
        name: Option<&TextMatch>,
        page: Page,
    ) -> StoreResult<(Vec<Label>, i64)> {
        let mut filter = Sql::default();
        match project_id {
            Some(id) => {
                filter
                    .push(" FROM labels l WHERE l.scope = 'p' AND l.project_id = ")
                    .int(id);
            }
            None => {
                filter.push(" FROM labels l WHERE l.scope = 'g'");
            }
        }
        if let Some(name) = name {
            push_text_match(&mut filter, "l.name", name);
        }
        let mut count = Sql::default();
        count.push("SELECT COUNT(*)").push(&filter.text);
        count.args.clone_from(&filter.args);
        let total = count.count(&self.0.pool).await?;
        let mut sql = Sql::default();
        sql.push("SELECT l.id, l.name, l.description, l.color, l.scope, l.project_id, l.created_at, l.updated_at")
            .push(&filter.text);
        sql.args = filter.args;
        sql.push(" ORDER BY l.id");
        push_page(&mut sql, page);
        let rows: Vec<LabelRow> = sql.fetch_all(&self.0.pool).await?;
        Ok((rows.into_iter().map(Label::from).collect(), total))
    }

    /// Deletes a label (and its uses); `false` when there was none.
    pub async fn delete_label(&self, id: i64) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM labels WHERE id = $1")
            .bind(id)
            .execute(&self.0.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Puts a label on an artifact; `Conflict` when it is already there.
    pub async fn add_label(&self, artifact_id: i64, label_id: i64) -> StoreResult<()> {
        let now = time::now();
        sqlx::query(
            "INSERT INTO label_references (label_id, artifact_id, created_at, updated_at) VALUES ($1, $2, $3, $3)",
        )
        .bind(label_id)
        .bind(artifact_id)
        .bind(&now)
        .execute(&self.0.pool)
        .await
        .map_err(|e| conflict_on_unique(e, || format!("label {label_id} is already added to the artifact {artifact_id}")))?;
        Ok(())
    }

    /// Takes a label off an artifact; `false` when it was not there.
    pub async fn remove_label(&self, artifact_id: i64, label_id: i64) -> StoreResult<bool> {
        let done =
            sqlx::query("DELETE FROM label_references WHERE label_id = $1 AND artifact_id = $2")
                .bind(label_id)
                .bind(artifact_id)
                .execute(&self.0.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_pattern("Ab"), "%ab%");
        assert_eq!(like_pattern("a_%\\"), "%a\\_\\%\\\\%");
    }
}
