//! Harbor list filters as SQL: a small builder of `$N` placeholders and bound
//! values over whitelisted columns, shared by the registry-content listings.

use sqlx::any::AnyArguments;
use sqlx::query::QueryAs;
use sqlx::{Any, AnyPool};

use crate::error::StoreResult;

/// A bound value of a dynamic query.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Int(i64),
    Text(String),
}

/// SQL text with `$N` placeholders and the values they stand for.
#[derive(Debug, Default)]
pub(crate) struct Sql {
    pub(crate) text: String,
    pub(crate) args: Vec<Arg>,
}

impl Sql {
    pub(crate) fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    pub(crate) fn int(&mut self, value: i64) -> &mut Self {
        self.args.push(Arg::Int(value));
        self.text.push_str(&format!("${}", self.args.len()));
        self
    }

    pub(crate) fn text(&mut self, value: &str) -> &mut Self {
        self.args.push(Arg::Text(value.to_string()));
        self.text.push_str(&format!("${}", self.args.len()));
        self
    }

    pub(crate) fn ints(&mut self, values: &[i64]) -> &mut Self {
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.int(*v);
        }
        self
    }

    pub(crate) async fn fetch_all<T>(&self, pool: &AnyPool) -> StoreResult<Vec<T>>
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

    pub(crate) async fn count(&self, pool: &AnyPool) -> StoreResult<i64> {
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
    /// Between two bounds, inclusive; either may be open.
    Range(Option<String>, Option<String>),
}

pub(crate) fn push_text_match(sql: &mut Sql, column: &str, matcher: &TextMatch) {
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
        TextMatch::Range(min, max) => {
            if let Some(min) = min {
                sql.push(" AND ").push(column).push(" >= ").text(min);
            }
            if let Some(max) = max {
                sql.push(" AND ").push(column).push(" <= ").text(max);
            }
        }
    }
}

/// Like [`push_text_match`] for an integer column: exact values, lists and
/// ranges compared as numbers; a value that is not a number matches nothing.
pub(crate) fn push_int_match(sql: &mut Sql, column: &str, matcher: &TextMatch) {
    let int = |v: &str| v.trim().parse::<i64>().ok();
    match matcher {
        TextMatch::Exact(v) => match int(v) {
            Some(n) => {
                sql.push(" AND ").push(column).push(" = ").int(n);
            }
            None => {
                sql.push(" AND 1 = 0");
            }
        },
        TextMatch::AnyOf(values) => {
            let ints: Vec<i64> = values.iter().filter_map(|v| int(v)).collect();
            if ints.is_empty() {
                sql.push(" AND 1 = 0");
            } else {
                sql.push(" AND ")
                    .push(column)
                    .push(" IN (")
                    .ints(&ints)
                    .push(")");
            }
        }
        TextMatch::Range(min, max) => {
            for (bound, op) in [(min, " >= "), (max, " <= ")] {
                if let Some(bound) = bound {
                    match int(bound) {
                        Some(n) => {
                            sql.push(" AND ").push(column).push(op).int(n);
                        }
                        None => {
                            sql.push(" AND 1 = 0");
                        }
                    }
                }
            }
        }
        TextMatch::Fuzzy(_) => {
            sql.push(" AND 1 = 0");
        }
    }
}

/// A page: `(offset, limit)`; `None` for all rows.
pub type Page = Option<(i64, i64)>;

/// One page of a listing and its total: `SELECT COUNT(*)` and `SELECT columns`
/// over the same `filter` (`" FROM ... WHERE ..."`), the rows in `order`.
pub(crate) async fn fetch_page<T>(
    pool: &AnyPool,
    columns: &str,
    filter: Sql,
    order: &str,
    page: Page,
) -> StoreResult<(Vec<T>, i64)>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
{
    let count = Sql {
        text: format!("SELECT COUNT(*){}", filter.text),
        args: filter.args.clone(),
    };
    let total = count.count(pool).await?;
    let mut sql = Sql {
        text: format!("SELECT {columns}{} ORDER BY {order}", filter.text),
        args: filter.args,
    };
    push_page(&mut sql, page);
    Ok((sql.fetch_all(pool).await?, total))
}

/// `ORDER BY` text for whitelisted `(column, descending)` pairs, else `default`;
/// `tiebreak` keeps pages stable.
pub(crate) fn order_by(sort: &[(&str, bool)], default: &str, tiebreak: &str) -> String {
    if sort.is_empty() {
        return default.to_string();
    }
    let mut order: Vec<String> = sort
        .iter()
        .map(|(column, desc)| format!("{column} {}", if *desc { "DESC" } else { "ASC" }))
        .collect();
    order.push(tiebreak.to_string());
    order.join(", ")
}

pub(crate) fn push_page(sql: &mut Sql, page: Page) {
    if let Some((offset, limit)) = page {
        sql.push(" LIMIT ").int(limit).push(" OFFSET ").int(offset);
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
