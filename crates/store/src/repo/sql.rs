//! A small builder for dynamic SQL with numbered `$N` placeholders, which both
//! backends accept through `Any` (sqlx's `QueryBuilder<Any>` writes `?`, which
//! PostgreSQL rejects), and the Harbor `q`/`sort`/paging translation on top of it.
//! Identifiers only ever come from the whitelists passed in; values are always bound.

use berth_domain::DomainError;
use berth_domain::query::{Paging, Query, QueryOp, QueryValue, Scalar, SortKey};
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Any, FromRow, Row};

use crate::pool::Pool;

/// A bound value.
#[derive(Debug, Clone)]
pub(crate) enum Bind {
    Int(i64),
    Text(String),
}

/// SQL text and its bound values, in placeholder order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sql {
    text: String,
    binds: Vec<Bind>,
}

impl Sql {
    pub(crate) fn new(text: &str) -> Self {
        Self {
            text: text.to_string(),
            binds: Vec::new(),
        }
    }

    /// Appends trusted SQL text (never user input).
    pub(crate) fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends `other`, its placeholders renumbered after this one's.
    pub(crate) fn push_sql(&mut self, other: &Sql) -> &mut Self {
        let mut rest = other.text.as_str();
        while let Some(at) = rest.find('$') {
            self.text.push_str(&rest[..at]);
            rest = &rest[at + 1..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            match rest[..digits].parse::<usize>() {
                Ok(n) => {
                    self.binds.push(other.binds[n - 1].clone());
                    self.placeholder();
                }
                Err(_) => self.text.push('$'),
            }
            rest = &rest[digits..];
        }
        self.text.push_str(rest);
        self
    }

    /// Appends a placeholder bound to an integer.
    pub(crate) fn int(&mut self, value: i64) -> &mut Self {
        self.binds.push(Bind::Int(value));
        self.placeholder()
    }

    /// Appends a placeholder bound to a text value.
    pub(crate) fn text(&mut self, value: impl Into<String>) -> &mut Self {
        self.binds.push(Bind::Text(value.into()));
        self.placeholder()
    }

    fn placeholder(&mut self) -> &mut Self {
        let n = self.binds.len();
        self.text.push('$');
        self.text.push_str(&n.to_string());
        self
    }

    /// `(v1, v2, ...)` of bound integers; `(NULL)` for an empty list, which matches nothing.
    pub(crate) fn int_list(&mut self, values: &[i64]) -> &mut Self {
        self.push("(");
        if values.is_empty() {
            self.push("NULL");
        }
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.int(*v);
        }
        self.push(")")
    }

    /// `LIMIT/OFFSET` of a page, nothing for "all rows". The limit is bound
    /// inside a CAST: SQLite recompiles a statement whose LIMIT is a bare
    /// parameter whenever it is bound again, that is at every execution. (A
    /// literal LIMIT made PostgreSQL switch listProjects to a generic plan that
    /// sorts every match.)
    pub(crate) fn paging(&mut self, paging: Paging) -> &mut Self {
        if let Some((limit, offset)) = paging.limit_offset() {
            self.limit(limit, offset);
        }
        self
    }

    /// `LIMIT/OFFSET`, the limit bound as [`Sql::paging`] explains.
    fn limit(&mut self, limit: i64, offset: i64) -> &mut Self {
        self.push(" LIMIT CAST(")
            .int(limit)
            .push(" AS BIGINT) OFFSET ")
            .int(offset)
    }

    fn bound(&self) -> sqlx::query::Query<'_, Any, AnyArguments> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(self.text.clone()));
        for bind in &self.binds {
            query = match bind {
                Bind::Int(i) => query.bind(*i),
                Bind::Text(t) => query.bind(t.clone()),
            };
        }
        query
    }

    /// Runs the statement (a write); how many rows it changed.
    pub(crate) async fn execute<'e, E>(&self, executor: E) -> Result<u64, sqlx::Error>
    where
        E: sqlx::Executor<'e, Database = Any>,
    {
        Ok(self.bound().execute(executor).await?.rows_affected())
    }

    /// Runs the statement, returning every row decoded as `T`.
    pub(crate) async fn fetch_all<'e, T, E>(&self, executor: E) -> Result<Vec<T>, sqlx::Error>
    where
        T: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
        E: sqlx::Executor<'e, Database = Any>,
    {
        let rows = self.bound().fetch_all(executor).await?;
        rows.iter().map(T::from_row).collect()
    }

    /// One page of a listing and its total: `self` is the shared
    /// ` FROM ... WHERE ...` part; `SELECT COUNT(*)` runs over it, then
    /// `SELECT columns` with `order` (an `ORDER BY` text) and the page's
    /// `LIMIT/OFFSET`. No row query when nothing matches.
    pub(crate) async fn fetch_page<T>(
        &self,
        pool: &Pool,
        columns: &str,
        order: &str,
        paging: Paging,
    ) -> Result<(Vec<T>, i64), sqlx::Error>
    where
        T: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let total = self.count().fetch_count(pool).await?;
        if total == 0 {
            return Ok((Vec::new(), 0));
        }
        let mut rows = Sql {
            text: format!("SELECT {columns}{}{order}", self.text),
            binds: self.binds.clone(),
        };
        rows.paging(paging);
        Ok((rows.fetch_all(pool).await?, total))
    }

    /// One page of a listing found by its keys first: `SELECT key` over
    /// `self` (the shared ` FROM ... WHERE ...` part) with `order` and the
    /// page's `LIMIT/OFFSET`, which an index holding the filter, the order and
    /// the key answers without reading a row, however deep the page; then
    /// `SELECT columns FROM from` reads just the page's rows.
    ///
    /// The total comes as [`Total`] says.
    pub(crate) async fn fetch_keyed_page<T>(
        &self,
        pool: &Pool,
        rows: Keyed<'_>,
        order: &str,
        paging: Paging,
        total: Total,
    ) -> Result<(Vec<T>, i64), sqlx::Error>
    where
        T: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let Keyed { columns, from, key } = rows;
        let total = match total {
            Total::Kept(total) => total,
            Total::Count => self.count().fetch_count(pool).await?,
            Total::CountAlong => {
                let mut rows = Sql {
                    text: format!(
                        "SELECT {columns}, k.listing_total FROM {from} JOIN \
                     (SELECT {key} AS listing_key, COUNT(*) OVER () AS listing_total{}{order}",
                        self.text
                    ),
                    binds: self.binds.clone(),
                };
                rows.paging(paging)
                    .push(&format!(") k ON k.listing_key = {key}"))
                    .push(order);
                let found = rows.bound().fetch_all(pool).await?;
                let total = match found.first() {
                    Some(row) => row.try_get::<i64, _>("listing_total")?,
                    // Past the last page, or nothing matches.
                    None if paging.limit_offset().is_some_and(|(_, offset)| offset > 0) => {
                        self.count().fetch_count(pool).await?
                    }
                    None => 0,
                };
                let rows = found.iter().map(T::from_row).collect::<Result<_, _>>()?;
                return Ok((rows, total));
            }
        };
        if total == 0 {
            return Ok((Vec::new(), 0));
        }
        // A page nearer the end than the start is found from the end, in the
        // reverse order: the walk past the offset is at most half the rows.
        let (inner_order, limit) = match paging.limit_offset() {
            Some((limit, offset)) => {
                let after = total - offset - limit;
                if after < offset {
                    let (limit, offset) = if after < 0 {
                        (limit + after, 0)
                    } else {
                        (limit, after)
                    };
                    if limit <= 0 {
                        return Ok((Vec::new(), total));
                    }
                    (reversed(order), Some((limit, offset)))
                } else {
                    (order.to_string(), Some((limit, offset)))
                }
            }
            None => (order.to_string(), None),
        };
        let rows = self
            .fetch_keyed_rows(pool, rows, &inner_order, order, limit)
            .await?;
        Ok((rows, total))
    }

    /// The rows of a page found by its keys: `SELECT key` over `self` in
    /// `inner_order` with `limit` (`(LIMIT, OFFSET)`, or every row), then
    /// `SELECT columns FROM from` for them in `order`.
    pub(crate) async fn fetch_keyed_rows<T>(
        &self,
        pool: &Pool,
        rows: Keyed<'_>,
        inner_order: &str,
        order: &str,
        limit: Option<(i64, i64)>,
    ) -> Result<Vec<T>, sqlx::Error>
    where
        T: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let Keyed { columns, from, key } = rows;
        let mut rows = Sql {
            text: format!(
                "SELECT {columns} FROM {from} WHERE {key} IN (SELECT {key}{}{inner_order}",
                self.text
            ),
            binds: self.binds.clone(),
        };
        if let Some((limit, offset)) = limit {
            rows.limit(limit, offset);
        }
        rows.push(")").push(order);
        rows.fetch_all(pool).await
    }

    /// `SELECT COUNT(*)` over `self`, the ` FROM ... WHERE ...` part of a listing.
    pub(crate) fn count(&self) -> Sql {
        Sql {
            text: format!("SELECT COUNT(*){}", self.text),
            binds: self.binds.clone(),
        }
    }

    /// Runs a `SELECT COUNT(*) ...`.
    pub(crate) async fn fetch_count<'e, E>(&self, executor: E) -> Result<i64, sqlx::Error>
    where
        E: sqlx::Executor<'e, Database = Any>,
    {
        let row = self.bound().fetch_one(executor).await?;
        let (count,): (i64,) = FromRow::from_row(&row)?;
        Ok(count)
    }
}

/// What [`Sql::fetch_keyed_page`] reads for a page's keys: `SELECT columns
/// FROM from` for the rows whose `key` is among them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keyed<'a> {
    pub(crate) columns: &'a str,
    pub(crate) from: &'a str,
    pub(crate) key: &'a str,
}

/// Where [`Sql::fetch_keyed_page`] takes a listing's total from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Total {
    /// Kept by the caller (a count triggers keep).
    Kept(i64),
    /// `SELECT COUNT(*)` first; then a page near the end is found from the end.
    Count,
    /// Counted by the key query as it finds the matches (`COUNT(*) OVER ()`):
    /// one pass over them instead of two.
    CountAlong,
}

/// How a filterable column compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// BIGINT.
    Int,
    /// TEXT, including the fixed-width timestamps.
    Text,
    /// TEXT whose values are lower case by rule (project and repository names):
    /// fuzzy matches compare it directly, without `LOWER()` on every row.
    LowerText,
}

/// A column `q` may filter on: the names Harbor accepts for it, its SQL and kind.
pub(crate) struct Column {
    pub(crate) names: &'static [&'static str],
    pub(crate) sql: &'static str,
    pub(crate) kind: Kind,
}

fn invalid(value: &str) -> DomainError {
    DomainError::bad_request(format!("invalid query string value: {value}"))
}

/// Harbor's fuzzy match: `LOWER(col) LIKE '%v%'` with `%`, `_` and `\` escaped.
pub(crate) fn like_pattern(value: &str) -> String {
    let mut out = String::from("%");
    for c in value.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

impl Sql {
    /// ` AND <column> LIKE '%v%'`, case-insensitive (Harbor's `~v`).
    fn fuzzy(&mut self, column: &Column, value: &str) {
        if column.kind == Kind::LowerText {
            self.push(" AND ").push(column.sql);
        } else {
            self.push(" AND LOWER(CAST(")
                .push(column.sql)
                .push(" AS TEXT))");
        }
        self.like(value);
    }

    /// ` LIKE <pattern>` with `value` as Harbor's fuzzy pattern (see
    /// [`like_pattern`]), and ` ESCAPE '\'` when the pattern escapes something.
    /// Without escapes the clause changes nothing, and leaving it out keeps
    /// PostgreSQL's generic plans from re-escaping the pattern for every row.
    /// The bound pattern is wrapped in a CAST: SQLite recompiles a statement
    /// whenever a bare parameter on the right of a LIKE over a column is bound
    /// again (its value could enable the LIKE index optimization), that is at
    /// every execution.
    pub(crate) fn like(&mut self, value: &str) -> &mut Self {
        let pattern = like_pattern(value);
        let escapes = pattern.contains('\\');
        self.push(" LIKE CAST(").text(pattern).push(" AS TEXT)");
        if escapes {
            self.push(" ESCAPE '\\'");
        }
        self
    }

    fn scalar(&mut self, column: &Column, value: &Scalar) -> Result<(), DomainError> {
        match (column.kind, value) {
            (Kind::Int, Scalar::Int(i)) => {
                self.int(*i);
            }
            (Kind::Int, other) => return Err(invalid(&other.text())),
            (Kind::Text | Kind::LowerText, v) => {
                self.text(v.text());
            }
        }
        Ok(())
    }

    fn exact(&mut self, column: &Column, value: &str) -> Result<(), DomainError> {
        match column.kind {
            Kind::Int => {
                let v = value.parse::<i64>().map_err(|_| invalid(value))?;
                self.int(v);
            }
            Kind::Text | Kind::LowerText => {
                self.text(value);
            }
        }
        Ok(())
    }

    /// Appends ` AND <predicate>` for every `q` term on a whitelisted column;
    /// terms on other keys are ignored, as Harbor ignores them.
    pub(crate) fn query_terms(
        &mut self,
        columns: &[Column],
        query: &Query,
    ) -> Result<(), DomainError> {
        for term in &query.terms {
            let Some(column) = columns
                .iter()
                .find(|c| c.names.contains(&term.key.as_str()))
            else {
                continue;
            };
            let sql = column.sql;
            match &term.value {
                QueryValue::Fuzzy(v) => self.fuzzy(column, v),
                QueryValue::Exact(v) => {
                    let op = match term.op {
                        Some(QueryOp::IContains) => {
                            self.fuzzy(column, v);
                            continue;
                        }
                        Some(QueryOp::Gte) => " >= ",
                        Some(QueryOp::Lte) => " <= ",
                        Some(QueryOp::Gt) => " > ",
                        Some(QueryOp::Lt) => " < ",
                        Some(QueryOp::In | QueryOp::Exact) | None => " = ",
                    };
                    self.push(" AND ").push(sql).push(op);
                    self.exact(column, v)?;
                }
                QueryValue::Range { min, max } => {
                    if let Some(min) = min {
                        self.push(" AND ").push(sql).push(" >= ");
                        self.scalar(column, min)?;
                    }
                    if let Some(max) = max {
                        self.push(" AND ").push(sql).push(" <= ");
                        self.scalar(column, max)?;
                    }
                }
                QueryValue::OrList(items) => {
                    if items.is_empty() {
                        self.push(" AND 1 = 0");
                        continue;
                    }
                    self.push(" AND ").push(sql).push(" IN (");
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            self.push(", ");
                        }
                        self.scalar(column, item)?;
                    }
                    self.push(")");
                }
                QueryValue::AndList(_) => {}
            }
        }
        Ok(())
    }

    /// Appends ` ORDER BY ...` from the whitelisted sort keys, else `default`;
    /// `tie` (a unique column) always ends the list so pages are stable.
    pub(crate) fn order_by(
        &mut self,
        columns: &[(&[&str], &str)],
        sort: &[SortKey],
        default: &str,
        tie: &str,
    ) -> &mut Self {
        self.push(&order_clause(columns, sort, default, tie))
    }
}

/// ` ORDER BY ...` from the whitelisted sort keys (`(names, sql)`), else
/// `default`; `tie` (a unique column) always ends the list so pages are stable.
pub(crate) fn order_clause(
    columns: &[(&[&str], &str)],
    sort: &[SortKey],
    default: &str,
    tie: &str,
) -> String {
    let mut parts = Vec::new();
    for key in sort {
        if let Some((_, sql)) = columns
            .iter()
            .find(|(names, _)| names.contains(&key.key.as_str()))
        {
            parts.push(format!(
                "{sql} {}",
                if key.descending { "DESC" } else { "ASC" }
            ));
        }
    }
    if parts.is_empty() {
        parts.push(default.to_string());
    }
    parts.push(tie.to_string());
    format!(" ORDER BY {}", parts.join(", "))
}

/// An [`order_clause`] with every direction turned around (a term without
/// one is ascending).
fn reversed(order: &str) -> String {
    let terms = order.trim_start().trim_start_matches("ORDER BY ");
    let flipped: Vec<String> = terms
        .split(", ")
        .map(|term| match term.strip_suffix(" DESC") {
            Some(column) => format!("{column} ASC"),
            None => format!("{} DESC", term.trim_end_matches(" ASC")),
        })
        .collect();
    format!(" ORDER BY {}", flipped.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_turn_around() {
        assert_eq!(
            reversed(" ORDER BY a.push_time DESC, a.size ASC, a.id"),
            " ORDER BY a.push_time ASC, a.size DESC, a.id DESC"
        );
        let order = order_clause(
            &[(&["size"], "a.size")],
            &[],
            "a.push_time DESC",
            "a.id DESC",
        );
        assert_eq!(reversed(&reversed(&order)), order);
    }

    #[test]
    fn placeholders_are_numbered() {
        let mut sql = Sql::new("SELECT 1 WHERE a = ");
        sql.int(1)
            .push(" AND b IN ")
            .int_list(&[2, 3])
            .push(" AND c = ")
            .text("x");
        assert_eq!(
            sql.text,
            "SELECT 1 WHERE a = $1 AND b IN ($2, $3) AND c = $4"
        );
        assert_eq!(like_pattern("A_b%"), "%a\\_b\\%%");
    }

    #[test]
    fn pushed_statements_are_renumbered() {
        let mut inner = Sql::new("SELECT COUNT(*) FROM t WHERE a = ");
        inner.int(7).push(" AND b = ").text("x");
        let mut sql = Sql::new("SELECT ");
        sql.int(1).push(", (").push_sql(&inner).push("), ").int(2);
        assert_eq!(
            sql.text,
            "SELECT $1, (SELECT COUNT(*) FROM t WHERE a = $2 AND b = $3), $4"
        );
        assert!(matches!(
            sql.binds.as_slice(),
            [Bind::Int(1), Bind::Int(7), Bind::Text(x), Bind::Int(2)] if x == "x"
        ));
    }

    #[test]
    fn like_patterns_and_limits_are_cast() {
        let mut sql = Sql::new("SELECT 1 WHERE a");
        sql.like("x").push(" AND b").like("x_y").paging(Paging {
            page: 3,
            page_size: 10,
        });
        assert_eq!(
            sql.text,
            "SELECT 1 WHERE a LIKE CAST($1 AS TEXT) AND b LIKE CAST($2 AS TEXT) ESCAPE '\\' \
             LIMIT CAST($3 AS BIGINT) OFFSET $4"
        );
    }
}
