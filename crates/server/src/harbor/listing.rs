//! Harbor list parameters for the registry-content listings: `q`, `sort`,
//! `page`/`page_size`, `with_*` booleans, and the `X-Total-Count`/`Link`
//! headers (harbor-api.md §4, §5).
//!
//! A private, minimal grammar: the shared Harbor `q` parser is being written
//! elsewhere and should replace this module's [`parse_q`] when it lands.

use axum::http::header::LINK;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Uri};
use berth_store::repo::filter::{Page, TextMatch};
use percent_encoding::percent_decode_str;

use crate::error::ApiError;

/// `X-Total-Count`.
const X_TOTAL_COUNT: HeaderName = HeaderName::from_static("x-total-count");

/// One value of a `q` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QValue {
    /// `v`
    Exact(String),
    /// `~v`
    Fuzzy(String),
    /// `[min~max]`
    Range(Option<String>, Option<String>),
    /// `{a b}`
    Or(Vec<String>),
    /// `(a b)`
    And(Vec<String>),
}

impl QValue {
    /// The value as a column condition, where it is one (AND lists are not).
    pub fn text_match(&self) -> Option<TextMatch> {
        match self {
            Self::Exact(v) => Some(TextMatch::Exact(v.clone())),
            Self::Fuzzy(v) => Some(TextMatch::Fuzzy(v.clone())),
            Self::Or(values) => Some(TextMatch::AnyOf(values.clone())),
            Self::Range(min, max) => Some(TextMatch::Range(min.clone(), max.clone())),
            Self::And(_) => None,
        }
    }
}

fn invalid_value(value: &str) -> ApiError {
    ApiError::bad_request(format!("invalid query string value: {value}"))
}

fn list_items(inner: &str) -> Vec<String> {
    inner
        .split([' ', ','])
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_matches(|c| c == '"' || c == '\'').to_string())
        .collect()
}

/// Splits `q` at commas outside `(...)`, `{...}` and `[...]`, so that the
/// documented `labels=(1, 2)` form stays one item.
fn split_top_level(q: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, ch) in q.char_indices() {
        match ch {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            ',' if depth <= 0 => {
                items.push(&q[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&q[start..]);
    items
}

/// Parses Harbor's `q` (already URL-decoded once; decoded again as Harbor does).
pub fn parse_q(q: &str) -> Result<Vec<(String, QValue)>, ApiError> {
    let decoded = percent_decode_str(&q.replace('+', " "))
        .decode_utf8()
        .map_or_else(|_| q.to_string(), |s| s.into_owned());
    let mut items = Vec::new();
    for item in split_top_level(&decoded) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(ApiError::bad_request(
                "the query string must contain \"=\" and the key/value cannot be empty",
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() || value.is_empty() {
            return Err(ApiError::bad_request(
                "the query string must contain \"=\" and the key/value cannot be empty",
            ));
        }
        let parsed = if let Some(fuzzy) = value.strip_prefix('~') {
            if fuzzy.is_empty() {
                return Err(invalid_value(value));
            }
            QValue::Fuzzy(fuzzy.to_string())
        } else if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            let Some((min, max)) = inner.split_once('~') else {
                return Err(invalid_value(value));
            };
            if max.contains('~') || (min.is_empty() && max.is_empty()) {
                return Err(invalid_value(value));
            }
            let side = |s: &str| (!s.is_empty()).then(|| s.to_string());
            QValue::Range(side(min), side(max))
        } else if let Some(inner) = value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
            QValue::Or(list_items(inner))
        } else if let Some(inner) = value.strip_prefix('(').and_then(|v| v.strip_suffix(')')) {
            QValue::And(list_items(inner))
        } else if value.starts_with(['[', '{', '(']) {
            return Err(invalid_value(value));
        } else {
            QValue::Exact(value.strip_prefix('\\').unwrap_or(value).to_string())
        };
        items.push((key.to_string(), parsed));
    }
    Ok(items)
}

/// Parses `sort` (`k1,-k2`) into `(key, descending)`.
pub fn parse_sort(sort: &str) -> Vec<(String, bool)> {
    sort.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_prefix('-') {
            Some(key) => (key.to_string(), true),
            None => (s.to_string(), false),
        })
        .collect()
}

/// Harbor's boolean query values: `true`, `1`, `yes` ... are true, anything else false.
pub fn parse_bool(value: Option<&str>, default: bool) -> bool {
    match value {
        None => default,
        Some(v) => matches!(
            v.to_ascii_lowercase().as_str(),
            "true" | "1" | "yes" | "ok" | "y" | "on" | "selected" | "checked" | "t" | "enabled"
        ),
    }
}

/// `page` and `page_size` as given (defaults 1 and 10, at most 100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    /// 1-based page.
    pub page: i64,
    /// Rows per page; `<= 0` means all rows.
    pub page_size: i64,
}

impl Paging {
    /// Reads `page`/`page_size`; malformed or `page_size > 100` is a 400.
    pub fn parse(page: Option<&str>, page_size: Option<&str>) -> Result<Self, ApiError> {
        let int = |name: &str, v: Option<&str>, default: i64| -> Result<i64, ApiError> {
            match v {
                None => Ok(default),
                Some(v) => v.trim().parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!("{name} in query must be of type int64: \"{v}\""))
                }),
            }
        };
        let page = int("page", page, 1)?;
        let page_size = int("page_size", page_size, 10)?;
        if page_size > 100 {
            return Err(ApiError::bad_request(
                "page_size in query should be less than or equal to 100",
            ));
        }
        Ok(Self { page, page_size })
    }

    /// The store page: `(offset, limit)`, or all rows.
    pub fn store_page(self) -> Page {
        (self.page_size > 0).then(|| {
            (
                (self.page.max(1) - 1).saturating_mul(self.page_size),
                self.page_size,
            )
        })
    }

    /// `X-Total-Count` and, when a neighbour page exists, `Link` (Harbor's format).
    pub fn headers(self, uri: &Uri, total: i64) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(X_TOTAL_COUNT, HeaderValue::from(total));
        if self.page_size <= 0 {
            return headers;
        }
        let mut links = Vec::new();
        if self.page > 1 && (self.page - 1).saturating_mul(self.page_size) < total {
            links.push(format!("<{}>; rel=\"prev\"", self.link(uri, self.page - 1)));
        }
        if self.page.saturating_mul(self.page_size) < total {
            links.push(format!("<{}>; rel=\"next\"", self.link(uri, self.page + 1)));
        }
        if !links.is_empty()
            && let Ok(value) = HeaderValue::from_str(&links.join(" , "))
        {
            headers.insert(LINK, value);
        }
        headers
    }

    fn link(self, uri: &Uri, page: i64) -> String {
        let mut pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(uri.query().unwrap_or("")).unwrap_or_default();
        pairs.retain(|(k, _)| k != "page" && k != "page_size");
        pairs.push(("page".into(), page.to_string()));
        pairs.push(("page_size".into(), self.page_size.to_string()));
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{}?{}", uri.path(), query.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_forms() {
        assert_eq!(
            parse_q("tags=*,labels=(1 2),name=~ng,digest=sha256:a=b").unwrap(),
            vec![
                ("tags".into(), QValue::Exact("*".into())),
                ("labels".into(), QValue::And(vec!["1".into(), "2".into()])),
                ("name".into(), QValue::Fuzzy("ng".into())),
                ("digest".into(), QValue::Exact("sha256:a=b".into())),
            ]
        );
        assert_eq!(
            parse_q("size=[1~],type={IMAGE CHART}").unwrap(),
            vec![
                ("size".into(), QValue::Range(Some("1".into()), None)),
                (
                    "type".into(),
                    QValue::Or(vec!["IMAGE".into(), "CHART".into()])
                ),
            ]
        );
        assert_eq!(parse_q(r"x=\~y").unwrap()[0].1, QValue::Exact("~y".into()));
        assert_eq!(
            parse_q("labels=(1, 2),tags=*").unwrap(),
            vec![
                ("labels".into(), QValue::And(vec!["1".into(), "2".into()])),
                ("tags".into(), QValue::Exact("*".into())),
            ]
        );
        assert!(parse_q("novalue").is_err());
        assert!(parse_q("k=").is_err());
        assert!(parse_q("k=~").is_err());
        assert!(parse_q("k=[~]").is_err());
        assert!(parse_q("k=[1").is_err());
    }

    #[test]
    fn paging_and_links() {
        assert!(Paging::parse(None, Some("101")).is_err());
        assert!(Paging::parse(Some("x"), None).is_err());
        let paging = Paging::parse(Some("2"), Some("10")).unwrap();
        assert_eq!(paging.store_page(), Some((10, 10)));
        let uri: Uri = "/api/v2.0/repositories?q=name%3D~te&page=2&page_size=10"
            .parse()
            .unwrap();
        let headers = paging.headers(&uri, 25);
        assert_eq!(headers["x-total-count"], "25");
        assert_eq!(
            headers["link"],
            "</api/v2.0/repositories?page=1&page_size=10&q=name=~te>; rel=\"prev\" , </api/v2.0/repositories?page=3&page_size=10&q=name=~te>; rel=\"next\""
        );
        assert_eq!(Paging::parse(None, Some("0")).unwrap().store_page(), None);
        let huge = Paging::parse(Some("9223372036854775807"), Some("100")).unwrap();
        assert_eq!(huge.store_page(), Some((i64::MAX, 100)));
        assert!(
            huge.headers(&uri, 25).get("link").is_none(),
            "past the end: no link, and no overflow"
        );
        assert!(parse_bool(Some("yes"), false));
        assert!(!parse_bool(Some("xyz"), true));
        assert!(parse_bool(None, true));
    }
}
