//! Audit logs: who did what when. Entries are written in batches (see the
//! server's audit queue), listed with Harbor's `q` filters.

use berth_domain::query::{Paging, Query, SortKey};

use crate::Store;
use crate::error::StoreResult;
use crate::repo::registry::placeholders;
use crate::repo::sql::{Column, Kind, Sql};

/// One entry to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAuditLog {
    /// The project it happened in; `None` for system-level operations.
    pub project_id: Option<i64>,
    /// `create`, `delete`, `pull`, `update` ...
    pub operation: String,
    /// `artifact`, `tag`, `project`, `project_member`, `configuration` ...
    pub resource_type: String,
    /// What: `library/app:v1`, `library/app@sha256:...`, a project name ...
    pub resource: String,
    /// Who (`anonymous` for callers without credentials).
    pub username: String,
    /// When, store format.
    pub op_time: String,
}

/// One stored entry.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditLog {
    /// Row id.
    pub id: i64,
    /// Who.
    pub username: String,
    /// What.
    pub resource: String,
    /// Its kind.
    pub resource_type: String,
    /// The operation.
    pub operation: String,
    /// When, store format.
    pub op_time: String,
}

/// Whose entries a listing may show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditScope {
    /// Every entry (system administrators).
    All,
    /// The entries of these projects.
    Projects(Vec<i64>),
}

const AUDIT_COLUMNS: &[Column] = &[
    Column {
        names: &["operation"],
        sql: "operation",
        kind: Kind::Text,
    },
    Column {
        names: &["resource"],
        sql: "resource",
        kind: Kind::Text,
    },
    Column {
        names: &["resource_type"],
        sql: "resource_type",
        kind: Kind::Text,
    },
    Column {
        names: &["username"],
        sql: "username",
        kind: Kind::Text,
    },
    Column {
        names: &["op_time"],
        sql: "op_time",
        kind: Kind::Text,
    },
];

const AUDIT_SORT_COLUMNS: &[(&[&str], &str)] = &[
    (&["op_time"], "op_time"),
    (&["operation"], "operation"),
    (&["resource"], "resource"),
    (&["resource_type"], "resource_type"),
    (&["username"], "username"),
];

/// Access to audit logs.
pub struct AuditLogs<'a>(&'a Store);

impl Store {
    /// The audit log repository.
    pub fn audit_logs(&self) -> AuditLogs<'_> {
        AuditLogs(self)
    }
}

impl AuditLogs<'_> {
    /// Writes `entries`: on SQLite in one statement that reads them from one
    /// JSON parameter (SQLite's driver looks each parameter of a statement up
    /// by name, so a multi-row `VALUES` list costs time quadratic in its
    /// length: a second of busy pulls spent a sixth of the CPU on it); on
    /// PostgreSQL in one multi-row statement per 200.
    pub async fn record(&self, entries: &[NewAuditLog]) -> StoreResult<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut conn = self.0.pool.acquire().await?;
        insert(&mut conn, self.0.backend(), entries).await
    }

    /// A page of the entries `scope` allows, filtered by `q`, newest first
    /// unless `sort` says otherwise, and how many match.
    pub async fn list(
        &self,
        scope: &AuditScope,
        query: &Query,
        sort: &[SortKey],
        paging: Paging,
    ) -> StoreResult<(i64, Vec<AuditLog>)> {
        let filtered = |sql: &mut Sql| -> StoreResult<()> {
            sql.push(" WHERE 1 = 1");
            if let AuditScope::Projects(ids) = scope {
                if ids.is_empty() {
                    sql.push(" AND 1 = 0");
                } else {
                    sql.push(" AND project_id IN ").int_list(ids);
                }
            }
            sql.query_terms(AUDIT_COLUMNS, query)?;
            Ok(())
        };
        let mut count = Sql::new("SELECT COUNT(*) FROM audit_logs");
        filtered(&mut count)?;
        let total = count.fetch_count(&self.0.pool).await?;
        let mut page = Sql::new(
            "SELECT id, username, resource, resource_type, operation, op_time FROM audit_logs",
        );
        filtered(&mut page)?;
        page.order_by(AUDIT_SORT_COLUMNS, sort, "op_time DESC", "id DESC")
            .paging(paging);
        Ok((total, page.fetch_all(&self.0.pool).await?))
    }
}

/// Which entries a purge takes: those older than a time whose
/// `(operation, resource_type)` is one of `kinds`, or, with `others`, whose
/// pair is none of `except`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeFilter {
    /// Before this time (store format).
    pub before: String,
    /// The pairs taken.
    pub kinds: Vec<(String, String)>,
    /// Also every pair not in `except`.
    pub others: bool,
    /// The pairs `others` leaves.
    pub except: Vec<(String, String)>,
}

impl PurgeFilter {
    /// The condition on `sql`, after its `WHERE`. With `by_id`, the columns
    /// are compared as expressions no index covers, so that the planner
    /// walks the primary key in order (a batch stops at its limit) instead
    /// of an index on the time or the operation whose every match it would
    /// sort, batch after batch.
    fn push(&self, sql: &mut Sql, by_id: bool) {
        let column = |name: &str| {
            if by_id {
                format!("({name} || '')")
            } else {
                name.to_string()
            }
        };
        let (operation, resource_type, op_time) = (
            column("operation"),
            column("resource_type"),
            column("op_time"),
        );
        let pairs = |sql: &mut Sql, pairs: &[(String, String)]| {
            sql.push("(1 = 0");
            for (op, kind) in pairs {
                sql.push(&format!(" OR ({operation} = "))
                    .text(op)
                    .push(&format!(" AND {resource_type} = "))
                    .text(kind)
                    .push(")");
            }
            sql.push(")");
        };
        sql.push(&format!("{op_time} < "))
            .text(&self.before)
            .push(" AND (");
        pairs(sql, &self.kinds);
        if self.others {
            sql.push(" OR NOT ");
            pairs(sql, &self.except);
        }
        sql.push(")");
    }
}

impl AuditLogs<'_> {
    /// How many entries `filter` takes (a dry run's count).
    pub async fn count_purgeable(&self, filter: &PurgeFilter) -> StoreResult<i64> {
        let mut sql = Sql::new("SELECT COUNT(*) FROM audit_logs WHERE ");
        filter.push(&mut sql, false);
        Ok(sql.fetch_count(&self.0.pool).await?)
    }

    /// Deletes up to `batch` of the entries `filter` takes whose id is past
    /// `after`, in id order: they are looked up without a lock, then deleted
    /// by id in one short transaction, so pushes, whose events write entries,
    /// wait for one batch's delete at most (a look that sorted or skipped
    /// through a million rows held SQLite's write lock for seconds). How
    /// many it deleted and the id the next batch starts after; `None` when
    /// no entry is left to look at.
    pub async fn purge_batch(
        &self,
        filter: &PurgeFilter,
        after: i64,
        batch: i64,
    ) -> StoreResult<(u64, Option<i64>)> {
        let mut look = Sql::new("SELECT id FROM audit_logs WHERE id > ");
        look.int(after).push(" AND ");
        filter.push(&mut look, true);
        look.push(" ORDER BY id LIMIT ").int(batch);
        let ids: Vec<(i64,)> = look.fetch_all(&self.0.pool).await?;
        let Some(&(last,)) = ids.last() else {
            return Ok((0, None));
        };
        let list = serde_json::to_string(&ids.iter().map(|(id,)| id).collect::<Vec<_>>())
            .unwrap_or_default();
        let delete = match self.0.backend() {
            crate::Backend::Sqlite => {
                "DELETE FROM audit_logs WHERE id IN (SELECT value FROM json_each($1))"
            }
            crate::Backend::Postgres => {
                "DELETE FROM audit_logs WHERE id IN \
                 (SELECT jsonb_array_elements_text($1::jsonb)::bigint)"
            }
        };
        let mut tx = self.0.begin_write().await?;
        let done = sqlx::query(delete).bind(list).execute(&mut *tx).await?;
        tx.commit().await?;
        let next = (i64::try_from(ids.len()).unwrap_or(i64::MAX) >= batch).then_some(last);
        Ok((done.rows_affected(), next))
    }
}

/// Writes `entries` on `conn` (a transaction's, or the pool's): on SQLite one
/// statement reading one JSON parameter (a multi-row `VALUES` list made the
/// driver look parameters up in quadratic time), on PostgreSQL rows of 200.
/// An entry of a project deleted since keeps no project (as the entries of a
/// project are kept when it is deleted), rather than failing its batch.
pub(crate) async fn insert(
    conn: &mut sqlx::AnyConnection,
    backend: crate::Backend,
    entries: &[NewAuditLog],
) -> StoreResult<()> {
    if entries.is_empty() {
        return Ok(());
    }
    if backend == crate::Backend::Sqlite {
        let rows: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| {
                serde_json::json!([
                    e.project_id,
                    e.operation,
                    e.resource_type,
                    e.resource,
                    e.username,
                    e.op_time
                ])
            })
            .collect();
        sqlx::query(
            "INSERT INTO audit_logs (project_id, operation, resource_type, resource, username, op_time) \
             SELECT (SELECT p.id FROM projects p WHERE p.id = value ->> 0), \
             value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5 \
             FROM json_each($1)",
        )
        .bind(serde_json::Value::Array(rows).to_string())
        .execute(&mut *conn)
        .await?;
        return Ok(());
    }
    for chunk in entries.chunks(200) {
        let values = (0..chunk.len())
            .map(|i| format!("({})", placeholders(i * 6 + 1, 6)))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO audit_logs (project_id, operation, resource_type, resource, username, op_time) \
             SELECT (SELECT p.id FROM projects p WHERE p.id = v.project_id), v.operation, v.resource_type, \
             v.resource, v.username, v.op_time \
             FROM (VALUES {values}) AS v (project_id, operation, resource_type, resource, username, op_time)"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for e in chunk {
            query = query
                .bind(e.project_id)
                .bind(&e.operation)
                .bind(&e.resource_type)
                .bind(&e.resource)
                .bind(&e.username)
                .bind(&e.op_time);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}
