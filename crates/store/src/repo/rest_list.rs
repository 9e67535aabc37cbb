//! The SQL pieces of generator-rest's list routes: keyword filter, whitelisted
//! sort keys, paging. Values are always bound; column names come only from the
//! caller's whitelist.

use berth_domain::rest_query::{ListQuery, SortKey};

/// `ORDER BY ...` for `sort`, mapping wire names to columns through `column`;
/// unknown keys are ignored. `id` breaks ties in the first key's direction.
pub(crate) fn order_by(sort: &[SortKey], column: fn(&str) -> Option<&'static str>) -> String {
    let mut terms: Vec<String> = Vec::new();
    let mut tie = "DESC";
    for key in sort {
        let Some(col) = column(&key.field) else {
            continue;
        };
        let dir = if key.descending { "DESC" } else { "ASC" };
        if terms.is_empty() {
            tie = dir;
        }
        terms.push(format!("{col} {dir}"));
        if col == "id" {
            return format!(" ORDER BY {}", terms.join(", "));
        }
    }
    terms.push(format!("id {tie}"));
    format!(" ORDER BY {}", terms.join(", "))
}

/// The `LIKE` pattern of a normalized `q`, if it filters at all. A normalized
/// query holds only letters, digits and single spaces, so it needs no escaping.
pub(crate) fn keyword_pattern(query: &ListQuery) -> Option<String> {
    query
        .q
        .as_deref()
        .filter(|q| !q.is_empty())
        .map(|q| format!("%{q}%"))
}

/// `SELECT <columns> FROM <table> WHERE <base> [AND keywords LIKE CAST($1 AS TEXT)] ORDER BY .. LIMIT .. OFFSET ..`,
/// and the pattern to bind first when there is one. `LIMIT`/`OFFSET` are
/// validated integers (1–100, 0–2900), written inline.
pub(crate) fn list_sql(
    columns: &str,
    table: &str,
    base: &str,
    query: &ListQuery,
    column: fn(&str) -> Option<&'static str>,
) -> (String, Option<String>) {
    let pattern = keyword_pattern(query);
    let mut sql = format!("SELECT {columns} FROM {table} WHERE {base}");
    if pattern.is_some() {
        // In a CAST, as `Sql::like` explains: SQLite recompiles a statement
        // whose LIKE has a bare parameter on its right at every execution.
        sql.push_str(" AND keywords LIKE CAST($1 AS TEXT)");
    }
    sql.push_str(&order_by(&query.sort, column));
    sql.push_str(&format!(" LIMIT {} OFFSET {}", query.limit, query.offset()));
    (sql, pattern)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(field: &str, descending: bool) -> SortKey {
        SortKey {
            field: field.into(),
            descending,
        }
    }

    fn columns(field: &str) -> Option<&'static str> {
        match field {
            "createdAt" => Some("created_at"),
            "name" => Some("COALESCE(realname, '')"),
            "id" => Some("id"),
            _ => None,
        }
    }

    #[test]
    fn sort_keys_are_whitelisted() {
        assert_eq!(
            order_by(&[key("createdAt", true)], columns),
            " ORDER BY created_at DESC, id DESC"
        );
        assert_eq!(
            order_by(
                &[
                    key("name", false),
                    key("x; DROP", true),
                    key("createdAt", true)
                ],
                columns
            ),
            " ORDER BY COALESCE(realname, '') ASC, created_at DESC, id ASC"
        );
        assert_eq!(order_by(&[key("id", false)], columns), " ORDER BY id ASC");
        assert_eq!(
            order_by(&[key("nope", false)], columns),
            " ORDER BY id DESC"
        );
    }
}
