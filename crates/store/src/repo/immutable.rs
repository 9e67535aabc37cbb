//! Immutable tag rules per project, and the check every path that moves or
//! deletes a tag runs inside its own transaction.

use berth_domain::model::immutable::{ImmutableRule, MAX_RULES_PER_PROJECT, Protection};
use berth_domain::query::Paging;
use berth_domain::time;
use berth_domain::{DomainError, TagChange};

use crate::Store;
use crate::error::StoreResult;

#[derive(sqlx::FromRow)]
struct RuleRow {
    id: i64,
    priority: i64,
    disabled: i64,
    tag_selectors: String,
    scope_selectors: String,
    params: String,
}

impl RuleRow {
    fn into_rule(self) -> StoreResult<ImmutableRule> {
        let id = self.id;
        let bad = |e: serde_json::Error| {
            crate::StoreError::Io(std::io::Error::other(format!(
                "stored immutable rule {id} does not parse: {e}"
            )))
        };
        Ok(ImmutableRule {
            id: self.id,
            priority: self.priority,
            disabled: self.disabled != 0,
            action: "immutable".into(),
            template: "immutable_template".into(),
            params: serde_json::from_str(&self.params).map_err(bad)?,
            tag_selectors: serde_json::from_str(&self.tag_selectors).map_err(bad)?,
            scope_selectors: serde_json::from_str(&self.scope_selectors).map_err(bad)?,
        })
    }
}

const RULE_COLUMNS: &str = "id, priority, disabled, tag_selectors, scope_selectors, params";

/// The rules of project `project_id`, by id.
async fn rules_of(
    conn: &mut sqlx::AnyConnection,
    project_id: i64,
) -> StoreResult<Vec<ImmutableRule>> {
    let rows: Vec<RuleRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {RULE_COLUMNS} FROM immutable_tag_rules WHERE project_id = $1 ORDER BY id"
    )))
    .bind(project_id)
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter().map(RuleRow::into_rule).collect()
}

/// The enabled rules of project `project_id`, compiled.
pub(crate) async fn protection_of(
    conn: &mut sqlx::AnyConnection,
    project_id: i64,
) -> StoreResult<Protection> {
    Ok(Protection::new(&rules_of(conn, project_id).await?))
}

/// Refuses (`Immutable`, naming `change`) when a rule of the project of
/// repository `repository_id` protects one of `tags`.
pub(crate) async fn check_mutable(
    conn: &mut sqlx::AnyConnection,
    repository_id: i64,
    tags: &[String],
    change: TagChange,
) -> StoreResult<()> {
    if tags.is_empty() {
        return Ok(());
    }
    let found: Option<(i64, String)> =
        sqlx::query_as("SELECT project_id, name FROM repositories WHERE id = $1")
            .bind(repository_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some((project_id, name)) = found else {
        return Ok(());
    };
    let protection = protection_of(conn, project_id).await?;
    let within = berth_domain::oci::within_project(&name);
    match tags.iter().find(|tag| protection.protects(within, tag)) {
        Some(tag) => Err(DomainError::Immutable {
            repository: name,
            tag: tag.clone(),
            change,
        }
        .into()),
        None => Ok(()),
    }
}

/// [`check_mutable`] for every tag of artifact `artifact_id`, which is to be
/// deleted.
pub(crate) async fn check_artifact_mutable(
    conn: &mut sqlx::AnyConnection,
    artifact_id: i64,
    repository_id: i64,
) -> StoreResult<()> {
    let tags: Vec<(String,)> = sqlx::query_as("SELECT name FROM tags WHERE artifact_id = $1")
        .bind(artifact_id)
        .fetch_all(&mut *conn)
        .await?;
    let tags: Vec<String> = tags.into_iter().map(|(name,)| name).collect();
    check_mutable(conn, repository_id, &tags, TagChange::Delete).await
}

/// Access to immutable tag rules.
pub struct ImmutableRules<'a>(&'a Store);

impl Store {
    /// The immutable tag rules repository.
    pub fn immutable_rules(&self) -> ImmutableRules<'_> {
        ImmutableRules(self)
    }
}

impl ImmutableRules<'_> {
    /// A page of project `project_id`'s rules (by id) and how many it has.
    pub async fn list(
        &self,
        project_id: i64,
        paging: Paging,
    ) -> StoreResult<(i64, Vec<ImmutableRule>)> {
        let mut conn = self.0.pool.acquire().await?;
        Ok(paging.page_of(rules_of(&mut conn, project_id).await?))
    }

    /// The enabled rules of project `project_id`, compiled: what
    /// `with_immutable_status` reports, by the matcher that enforces them.
    pub async fn protection(&self, project_id: i64) -> StoreResult<Protection> {
        let mut conn = self.0.pool.acquire().await?;
        protection_of(&mut conn, project_id).await
    }

    /// Rule `id` of project `project_id`.
    pub async fn get(&self, project_id: i64, id: i64) -> StoreResult<Option<ImmutableRule>> {
        let row: Option<RuleRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {RULE_COLUMNS} FROM immutable_tag_rules WHERE project_id = $1 AND id = $2"
        )))
        .bind(project_id)
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?;
        row.map(RuleRow::into_rule).transpose()
    }

    /// Adds a (validated) rule; `Conflict` for a rule selecting what another
    /// does, `Invalid` beyond [`MAX_RULES_PER_PROJECT`]. Its id.
    pub async fn create(&self, project_id: i64, rule: &ImmutableRule) -> StoreResult<i64> {
        let mut tx = self.0.begin_write().await?;
        // Serializes rule changes of a project (on PostgreSQL).
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT id FROM projects WHERE id = $1{}",
            self.0.locking(crate::db::Locking::Update)
        )))
        .bind(project_id)
        .fetch_optional(&mut *tx)
        .await?;
        let existing = rules_of(&mut tx, project_id).await?;
        if existing.iter().any(|r| r.same_selection(rule)) {
            return Err(
                DomainError::Conflict("the immutable tag rule already exists".into()).into(),
            );
        }
        if existing.len() >= MAX_RULES_PER_PROJECT {
            return Err(DomainError::bad_request(format!(
                "a project has at most {MAX_RULES_PER_PROJECT} immutable tag rules"
            ))
            .into());
        }
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO immutable_tag_rules (project_id, priority, disabled, tag_selectors, scope_selectors, params, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .bind(project_id)
        .bind(rule.priority)
        .bind(i64::from(rule.disabled))
        .bind(serde_json::to_string(&rule.tag_selectors).unwrap_or_default())
        .bind(serde_json::to_string(&rule.scope_selectors).unwrap_or_default())
        .bind(params_text(rule))
        .bind(time::now())
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Replaces rule `id` of project `project_id` (validated); `false` when
    /// there is none, `Conflict` when another rule selects the same.
    pub async fn update(
        &self,
        project_id: i64,
        id: i64,
        rule: &ImmutableRule,
    ) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let existing = rules_of(&mut tx, project_id).await?;
        if existing
            .iter()
            .any(|r| r.id != id && r.same_selection(rule))
        {
            return Err(
                DomainError::Conflict("the immutable tag rule already exists".into()).into(),
            );
        }
        let done = sqlx::query(
            "UPDATE immutable_tag_rules SET priority = $3, disabled = $4, tag_selectors = $5, \
             scope_selectors = $6, params = $7 WHERE project_id = $1 AND id = $2",
        )
        .bind(project_id)
        .bind(id)
        .bind(rule.priority)
        .bind(i64::from(rule.disabled))
        .bind(serde_json::to_string(&rule.tag_selectors).unwrap_or_default())
        .bind(serde_json::to_string(&rule.scope_selectors).unwrap_or_default())
        .bind(params_text(rule))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes rule `id` of project `project_id`; `false` when there was none.
    pub async fn delete(&self, project_id: i64, id: i64) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM immutable_tag_rules WHERE project_id = $1 AND id = $2")
            .bind(project_id)
            .bind(id)
            .execute(&self.0.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// The rule's `params` as stored (`{}` when none was given).
fn params_text(rule: &ImmutableRule) -> String {
    if rule.params.is_null() {
        "{}".into()
    } else {
        rule.params.to_string()
    }
}
