//! Labels (global or per project) and their links to artifacts.

use berth_domain::model::Label;
use berth_domain::query::{Paging, Query};
use berth_domain::time;

use crate::Store;
use crate::error::{StoreResult, conflict_on_unique};
use crate::repo::sql::{Column, Kind, Sql, like_pattern};

#[derive(sqlx::FromRow)]
pub(crate) struct LabelRow {
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

const LABEL_Q_COLUMNS: &[Column] = &[
    Column {
        names: &["id", "ID"],
        sql: "l.id",
        kind: Kind::Int,
    },
    Column {
        names: &["name", "Name"],
        sql: "l.name",
        kind: Kind::Text,
    },
    Column {
        names: &["description", "Description"],
        sql: "l.description",
        kind: Kind::Text,
    },
    Column {
        names: &["color", "Color"],
        sql: "l.color",
        kind: Kind::Text,
    },
];

/// Access to the `labels` and `label_references` tables.
pub struct Labels<'a>(pub(crate) &'a Store);

impl Store {
    /// The labels repository.
    pub fn labels(&self) -> Labels<'_> {
        Labels(self)
    }
}

impl Labels<'_> {
    /// Creates a label; `Conflict` when the name is taken in its scope.
    pub async fn create(&self, new: &NewLabel) -> StoreResult<Label> {
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
    pub async fn find(&self, id: i64) -> StoreResult<Option<Label>> {
        let row: Option<LabelRow> = sqlx::query_as(
            "SELECT id, name, description, color, scope, project_id, created_at, updated_at FROM labels WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(row.map(Label::from))
    }

    /// One page of labels of a scope (global, or one project's) and the total:
    /// `name` is a case-insensitive substring, `query` Harbor's `q`.
    pub async fn list(
        &self,
        project_id: Option<i64>,
        name: Option<&str>,
        query: &Query,
        paging: Paging,
    ) -> StoreResult<(Vec<Label>, i64)> {
        let mut filter = Sql::new(" FROM labels l WHERE ");
        match project_id {
            Some(id) => {
                filter.push("l.scope = 'p' AND l.project_id = ").int(id);
            }
            None => {
                filter.push("l.scope = 'g'");
            }
        }
        if let Some(name) = name {
            filter
                .push(" AND LOWER(l.name) LIKE ")
                .text(like_pattern(name))
                .push(" ESCAPE '\\'");
        }
        filter.query_terms(LABEL_Q_COLUMNS, query)?;
        let (rows, total): (Vec<LabelRow>, i64) = filter
            .fetch_page(
                &self.0.pool,
                "l.id, l.name, l.description, l.color, l.scope, l.project_id, l.created_at, l.updated_at",
                " ORDER BY l.id",
                paging,
            )
            .await?;
        Ok((rows.into_iter().map(Label::from).collect::<Vec<_>>(), total))
    }

    /// Replaces a label's name, description and color; `Conflict` when the
    /// name is taken in its scope, `None` when there is no such label.
    pub async fn update(
        &self,
        id: i64,
        name: &str,
        description: &str,
        color: &str,
    ) -> StoreResult<Option<Label>> {
        let row: Option<LabelRow> = sqlx::query_as(
            "UPDATE labels SET name = $1, description = $2, color = $3, updated_at = $4 WHERE id = $5 \
             RETURNING id, name, description, color, scope, project_id, created_at, updated_at",
        )
        .bind(name)
        .bind(description)
        .bind(color)
        .bind(time::now())
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await
        .map_err(|e| conflict_on_unique(e, || format!("label {name} already exists")))?;
        Ok(row.map(Label::from))
    }

    /// Deletes a label (and its uses); `false` when there was none.
    pub async fn delete(&self, id: i64) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM labels WHERE id = $1")
            .bind(id)
            .execute(&self.0.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Puts a label on an artifact; `Conflict` when it is already there.
    pub async fn add_to_artifact(&self, artifact_id: i64, label_id: i64) -> StoreResult<()> {
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
    pub async fn remove_from_artifact(&self, artifact_id: i64, label_id: i64) -> StoreResult<bool> {
        let done =
            sqlx::query("DELETE FROM label_references WHERE label_id = $1 AND artifact_id = $2")
                .bind(label_id)
                .bind(artifact_id)
                .execute(&self.0.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }
}
