//! Harbor's `q` filter language and `sort` lists (harbor-api.md §4).
//!
//! `q=k1=v1,k2=~v2,k3=[min~max],k4={a b c},k5=(a b)`: the already-decoded text is
//! percent-decoded once more, split on `,`, each item at its first `=`.

use crate::DomainError;

/// A typed element of a range or a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar {
    /// A time (`2006-01-02T15:04:05`), normalized to the store's fixed-width form.
    Time(String),
    /// An integer.
    Int(i64),
    /// Anything else, with surrounding quotes trimmed.
    Str(String),
}

impl Scalar {
    fn parse(text: &str) -> Self {
        if let Some(time) = parse_time(text) {
            return Self::Time(time);
        }
        if let Ok(i) = text.parse::<i64>() {
            return Self::Int(i);
        }
        Self::Str(text.trim_matches(|c| c == '"' || c == '\'').to_string())
    }

    /// The value as text (times in store form, integers in decimal).
    pub fn text(&self) -> String {
        match self {
            Self::Time(t) => t.clone(),
            Self::Int(i) => i.to_string(),
            Self::Str(s) => s.clone(),
        }
    }
}

/// `2006-01-02T15:04:05` (Go's layout) to `2006-01-02T15:04:05.000Z`.
fn parse_time(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let shape = b.len() == 19
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T' || *c == b' ',
            13 | 16 => *c == b':',
            _ => c.is_ascii_digit(),
        });
    shape.then(|| format!("{}T{}.000Z", &text[..10], &text[11..]))
}

/// The value of one `q` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryValue {
    /// `v`: exact match (a leading `\` escape removed). Stays a string.
    Exact(String),
    /// `~v`: case-insensitive substring.
    Fuzzy(String),
    /// `[min~max]`: either side may be open.
    Range {
        /// Lower bound, inclusive.
        min: Option<Scalar>,
        /// Upper bound, inclusive.
        max: Option<Scalar>,
    },
    /// `{a b c}`: any of.
    OrList(Vec<Scalar>),
    /// `(a b c)`: all of (only some keys use it).
    AndList(Vec<Scalar>),
}

/// An ORM operator suffix on a key (`name__icontains`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryOp {
    /// `__icontains`.
    IContains,
    /// `__in` (no effect on exact values beyond equality).
    In,
    /// `__gte`.
    Gte,
    /// `__lte`.
    Lte,
    /// `__gt`.
    Gt,
    /// `__lt`.
    Lt,
    /// `__exact`.
    Exact,
}

/// One `key=value` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryTerm {
    /// The key without an operator suffix.
    pub key: String,
    /// The operator suffix, if one was given.
    pub op: Option<QueryOp>,
    /// The value.
    pub value: QueryValue,
}

/// A parsed `q`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// The items in the order given.
    pub terms: Vec<QueryTerm>,
}

impl Query {
    /// The terms whose key is one of `names` (Harbor accepts column and Go field names).
    pub fn terms_for<'a>(&'a self, names: &'a [&str]) -> impl Iterator<Item = &'a QueryTerm> {
        self.terms
            .iter()
            .filter(move |t| names.contains(&t.key.as_str()))
    }
}

const KV_MESSAGE: &str = "the query string must contain \"=\" and the key/value cannot be empty";

/// Go's `url.QueryUnescape`: `+` is a space, `%XX` decoded; `None` on a bad escape.
pub fn query_unescape(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn invalid_value(value: &str) -> DomainError {
    DomainError::bad_request(format!("invalid query string value: {value}"))
}

/// List items are separated by spaces (Harbor) or commas (`labels=(1, 2)`, the
/// form the user's spec writes).
fn parse_list(inner: &str) -> Vec<Scalar> {
    inner
        .split([' ', ','])
        .filter(|s| !s.is_empty())
        .map(Scalar::parse)
        .collect()
}

fn parse_value(value: &str) -> Result<QueryValue, DomainError> {
    if let Some(rest) = value.strip_prefix('~') {
        if rest.is_empty() {
            return Err(invalid_value(value));
        }
        return Ok(QueryValue::Fuzzy(rest.to_string()));
    }
    if let Some(rest) = value.strip_prefix('[') {
        let inner = rest.strip_suffix(']').ok_or_else(|| invalid_value(value))?;
        let parts: Vec<&str> = inner.split('~').collect();
        let [min, max] = parts.as_slice() else {
            return Err(invalid_value(value));
        };
        let (min, max) = (min.trim(), max.trim());
        if min.is_empty() && max.is_empty() {
            return Err(invalid_value(value));
        }
        let bound = |s: &str| (!s.is_empty()).then(|| Scalar::parse(s));
        return Ok(QueryValue::Range {
            min: bound(min),
            max: bound(max),
        });
    }
    if let Some(rest) = value.strip_prefix('{') {
        let inner = rest.strip_suffix('}').ok_or_else(|| invalid_value(value))?;
        return Ok(QueryValue::OrList(parse_list(inner)));
    }
    if let Some(rest) = value.strip_prefix('(') {
        let inner = rest.strip_suffix(')').ok_or_else(|| invalid_value(value))?;
        return Ok(QueryValue::AndList(parse_list(inner)));
    }
    Ok(QueryValue::Exact(
        value.strip_prefix('\\').unwrap_or(value).to_string(),
    ))
}

fn split_op(key: &str) -> (String, Option<QueryOp>) {
    const OPS: [(&str, QueryOp); 7] = [
        ("__icontains", QueryOp::IContains),
        ("__in", QueryOp::In),
        ("__gte", QueryOp::Gte),
        ("__lte", QueryOp::Lte),
        ("__gt", QueryOp::Gt),
        ("__lt", QueryOp::Lt),
        ("__exact", QueryOp::Exact),
    ];
    for (suffix, op) in OPS {
        if let Some(base) = key.strip_suffix(suffix) {
            return (base.to_string(), Some(op));
        }
    }
    match key.split_once("__") {
        Some((base, _)) => (base.to_string(), None),
        None => (key.to_string(), None),
    }
}

/// Splits `q` at the commas outside `(...)`, `{...}` and `[...]`, so that a
/// list written with commas stays one item.
fn split_items(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, ch) in text.char_indices() {
        match ch {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            ',' if depth <= 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

/// Parses `q` as received (already URL-decoded once by the query-string parser).
pub fn parse_query(q: &str) -> Result<Query, DomainError> {
    let text = query_unescape(q).unwrap_or_else(|| q.to_string());
    let mut terms = Vec::new();
    if text.is_empty() {
        return Ok(Query { terms });
    }
    for item in split_items(&text) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(DomainError::bad_request(KV_MESSAGE));
        };
        let key = key.trim();
        if key.is_empty() || value.is_empty() {
            return Err(DomainError::bad_request(KV_MESSAGE));
        }
        let (key, op) = split_op(key);
        terms.push(QueryTerm {
            key,
            op,
            value: parse_value(value)?,
        });
    }
    Ok(Query { terms })
}

/// One `sort` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    /// The key as given, without `-`.
    pub key: String,
    /// Whether `-` asked for descending order.
    pub descending: bool,
}

/// Parses `sort` (`k1,-k2`); empty items are skipped, an item that is only `-` is a 400.
pub fn parse_sort(sort: &str) -> Result<Vec<SortKey>, DomainError> {
    let mut keys = Vec::new();
    for item in sort.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, descending) = match item.strip_prefix('-') {
            Some(rest) => (rest, true),
            None => (item, false),
        };
        let valid = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
        if !valid {
            return Err(DomainError::bad_request(format!(
                "invalid sort string: {sort}"
            )));
        }
        keys.push(SortKey {
            key: key.to_string(),
            descending,
        });
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(q: &str) -> QueryTerm {
        let mut query = parse_query(q).unwrap();
        assert_eq!(query.terms.len(), 1, "{q}");
        query.terms.remove(0)
    }

    #[test]
    fn value_forms() {
        assert_eq!(one("name=foo").value, QueryValue::Exact("foo".into()));
        assert_eq!(one("name=~fo").value, QueryValue::Fuzzy("fo".into()));
        assert_eq!(one("name=\\~x").value, QueryValue::Exact("~x".into()));
        assert_eq!(one("a=b=c").value, QueryValue::Exact("b=c".into()));
        assert_eq!(
            one("project_id=[1~]").value,
            QueryValue::Range {
                min: Some(Scalar::Int(1)),
                max: None
            }
        );
        assert_eq!(
            one("op_time=[2020-04-09 02:36:00~2021-01-01T00:00:00]").value,
            one("op_time=[2020-04-09T02:36:00~2021-01-01 00:00:00]").value,
            "Harbor's audit log form, with a space"
        );
        assert_eq!(
            one("creation_time=[2020-04-09T02:36:00~2021-01-01T00:00:00]").value,
            QueryValue::Range {
                min: Some(Scalar::Time("2020-04-09T02:36:00.000Z".into())),
                max: Some(Scalar::Time("2021-01-01T00:00:00.000Z".into()))
            }
        );
        assert_eq!(
            one("name={a  'b' 3}").value,
            QueryValue::OrList(vec![
                Scalar::Str("a".into()),
                Scalar::Str("b".into()),
                Scalar::Int(3)
            ])
        );
        assert_eq!(
            one("labels=(1 2)").value,
            QueryValue::AndList(vec![Scalar::Int(1), Scalar::Int(2)])
        );
        assert_eq!(
            one("labels=(1, 2)").value,
            QueryValue::AndList(vec![Scalar::Int(1), Scalar::Int(2)])
        );
        let query = parse_query("name={a,b},tags=*").unwrap();
        assert_eq!(
            query.terms[0].value,
            QueryValue::OrList(vec![Scalar::Str("a".into()), Scalar::Str("b".into())])
        );
        assert_eq!(query.terms[1].value, QueryValue::Exact("*".into()));
    }

    #[test]
    fn second_unescape_and_operators() {
        let term = one("name%3D~te+st");
        assert_eq!(term.key, "name");
        assert_eq!(term.value, QueryValue::Fuzzy("te st".into()));
        let term = one("name__icontains=x");
        assert_eq!(
            (term.key.as_str(), term.op),
            ("name", Some(QueryOp::IContains))
        );
        assert_eq!(
            one("bad%zz=1").key,
            "bad%zz",
            "a bad escape keeps the raw text"
        );
        assert_eq!(parse_query("").unwrap().terms.len(), 0);
    }

    #[test]
    fn errors_use_harbor_messages() {
        for q in ["name", "=x", "name=", "a=1,", "a=1,,b=2"] {
            assert_eq!(
                parse_query(q).unwrap_err(),
                DomainError::bad_request(KV_MESSAGE),
                "{q}"
            );
        }
        for q in [
            "name=~",
            "id=[1~2",
            "id=[~]",
            "id=[1~2~3]",
            "id={1 2",
            "id=(1",
        ] {
            let value = q.split_once('=').unwrap().1;
            assert_eq!(
                parse_query(q).unwrap_err(),
                DomainError::bad_request(format!("invalid query string value: {value}")),
                "{q}"
            );
        }
    }

    #[test]
    fn sort_lists() {
        assert_eq!(
            parse_sort("name,-creation_time").unwrap(),
            vec![
                SortKey {
                    key: "name".into(),
                    descending: false
                },
                SortKey {
                    key: "creation_time".into(),
                    descending: true
                }
            ]
        );
        assert!(parse_sort("").unwrap().is_empty());
        assert!(parse_sort("-").is_err());
        assert!(parse_sort("name;drop").is_err());
    }
}
