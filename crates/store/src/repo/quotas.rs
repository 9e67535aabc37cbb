//! Project storage quotas as Harbor's `/quotas` shows them: one per project,
//! whose id is the project's id.

use berth_domain::query::Paging;
use berth_domain::query::harbor::SortKey;

use crate::Store;
use crate::error::StoreResult;
use crate::repo::sql::Sql;

/// One project's quota with what it refers to.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct QuotaRow {
    /// The quota's id: the project's id.
    pub id: i64,
    /// The project's name.
    pub project_name: String,
    /// The name of the project's owner.
    pub owner_name: String,
    /// The storage limit in bytes; `-1`: unlimited.
    pub hard: i64,
    /// The storage used in bytes (blobs shared within the project counted once).
    pub used: i64,
    /// When the project (and its quota) was created.
    pub created_at: String,
    /// When the limit or the usage last changed.
    pub updated_at: String,
}

/// What `/quotas` lists.
#[derive(Debug, Clone, Default)]
pub struct QuotaFilter {
    /// `reference`: only `project` refers to anything.
    pub reference: Option<String>,
    /// `reference_id`: a project id.
    pub reference_id: Option<String>,
    /// `sort`: `hard.storage`, `used.storage` (or `-` for descending).
    pub sort: Vec<SortKey>,
    /// `page` and `page_size`.
    pub paging: Paging,
}

/// Harbor's sort keys of quotas.
const QUOTA_SORT_COLUMNS: &[(&[&str], &str)] = &[
    (&["hard.storage"], "q.hard"),
    (&["used.storage"], "q.used"),
    (&["creation_time"], "p.created_at"),
    (&["update_time"], "q.updated_at"),
];

const QUOTA_COLUMNS: &str = "q.project_id AS id, p.name AS project_name, u.username AS owner_name, \
     q.hard, q.used, p.created_at, q.updated_at \
     FROM project_quotas q JOIN projects p ON p.id = q.project_id JOIN users u ON u.id = p.owner_id";

/// Access to quotas.
pub struct Quotas<'a>(&'a Store);

impl Store {
    /// The quotas repository.
    pub fn quotas(&self) -> Quotas<'_> {
        Quotas(self)
    }
}

impl Quotas<'_> {
    /// A page of quotas and how many match.
    pub async fn list(&self, filter: &QuotaFilter) -> StoreResult<(i64, Vec<QuotaRow>)> {
        if filter.reference.as_deref().is_some_and(|r| r != "project") {
            return Ok((0, Vec::new()));
        }
        let project = match filter.reference_id.as_deref() {
            None => None,
            Some(id) => match id.parse::<i64>() {
                Ok(id) => Some(id),
                Err(_) => return Ok((0, Vec::new())),
            },
        };
        let filtered = |sql: &mut Sql| {
            if let Some(id) = project {
                sql.push(" WHERE q.project_id = ").int(id);
            }
        };
        let mut count = Sql::new(
            "SELECT COUNT(*) FROM project_quotas q JOIN projects p ON p.id = q.project_id",
        );
        filtered(&mut count);
        let total = count.fetch_count(&self.0.pool).await?;
        let mut page = Sql::new(&format!("SELECT {QUOTA_COLUMNS}"));
        filtered(&mut page);
        page.order_by(
            QUOTA_SORT_COLUMNS,
            &filter.sort,
            "q.project_id",
            "q.project_id",
        )
        .paging(filter.paging);
        Ok((total, page.fetch_all(&self.0.pool).await?))
    }

    /// The quota `id` (a project's id).
    pub async fn get(&self, id: i64) -> StoreResult<Option<QuotaRow>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {QUOTA_COLUMNS} WHERE q.project_id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?)
    }
}
