//! Harbor paging: `page` (default 1), `page_size` (default 10, at most 100,
//! `0` or less = everything) and the `Link` header (harbor-api.md §5).

use crate::DomainError;

/// The largest `page_size` Harbor accepts.
pub const MAX_PAGE_SIZE: i64 = 100;
/// `page_size` when none is given.
pub const DEFAULT_PAGE_SIZE: i64 = 10;

/// A requested page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    /// 1-based page; `<= 0` behaves like 1.
    pub page: i64,
    /// Rows per page; `<= 0` means all rows.
    pub page_size: i64,
}

impl Default for Paging {
    fn default() -> Self {
        Self {
            page: 1,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

impl Paging {
    /// Checks the bounds: `page_size` above 100 is a 400 with go-openapi's wording.
    pub fn new(page: i64, page_size: i64) -> Result<Self, DomainError> {
        if page_size > MAX_PAGE_SIZE {
            return Err(DomainError::invalid(
                "page_size",
                format!(
                    "validation failure list:\npage_size in query should be less than or equal to {MAX_PAGE_SIZE}"
                ),
            ));
        }
        Ok(Self { page, page_size })
    }

    /// The page of `items` (all of them with no page size), with their count.
    pub fn page_of<T>(&self, items: Vec<T>) -> (i64, Vec<T>) {
        let total = i64::try_from(items.len()).unwrap_or(i64::MAX);
        let page = match self.limit_offset() {
            Some((limit, offset)) => items
                .into_iter()
                .skip(usize::try_from(offset).unwrap_or(usize::MAX))
                .take(usize::try_from(limit).unwrap_or(usize::MAX))
                .collect(),
            None => items,
        };
        (total, page)
    }

    /// `(LIMIT, OFFSET)`, or `None` for all rows.
    pub fn limit_offset(&self) -> Option<(i64, i64)> {
        (self.page_size > 0).then(|| {
            let page = self.page.max(1);
            (self.page_size, (page - 1).saturating_mul(self.page_size))
        })
    }

    /// The `Link` header for a result of `total` rows, built from the request
    /// path and its decoded query pairs; `None` when no link applies.
    pub fn link(&self, path: &str, pairs: &[(String, String)], total: i64) -> Option<String> {
        if self.page_size <= 0 {
            return None;
        }
        let page = self.page;
        let size = self.page_size;
        let mut links = Vec::new();
        if page > 1 && (page - 1).saturating_mul(size) < total {
            links.push(format!(
                "<{}>; rel=\"prev\"",
                page_url(path, pairs, page - 1, size)
            ));
        }
        if page.saturating_mul(size) < total {
            links.push(format!(
                "<{}>; rel=\"next\"",
                page_url(path, pairs, page + 1, size)
            ));
        }
        (!links.is_empty()).then(|| links.join(" , "))
    }
}

/// Go's `url.Values.Encode` (keys sorted, values in order). Harbor then
/// unescapes the whole query, which breaks the link for a value holding `&`,
/// `+`, `#` or `%`; here keys and values stay percent-encoded where they must
/// be, and the characters Harbor's `q` and `sort` syntax use (`=`, `~`, `,`,
/// brackets, `:`, `/`, `-`) stay readable.
fn page_url(path: &str, pairs: &[(String, String)], page: i64, size: i64) -> String {
    let mut values: Vec<(&str, String)> = pairs
        .iter()
        .filter(|(k, _)| k != "page" && k != "page_size")
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    values.push(("page", page.to_string()));
    values.push(("page_size", size.to_string()));
    values.sort_by(|a, b| a.0.cmp(b.0));
    let query: Vec<String> = values
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// Percent-encodes what cannot appear raw in a query value inside a `Link`
/// header: separators (`&`, `+`, `#`, `%`, `;`), space, quotes, angle brackets,
/// control and non-ASCII bytes.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        let raw = byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b'-' | b'_'
                    | b'.'
                    | b'~'
                    | b'='
                    | b','
                    | b':'
                    | b'/'
                    | b'('
                    | b')'
                    | b'['
                    | b']'
                    | b'{'
                    | b'}'
                    | b'*'
                    | b'!'
                    | b'@'
                    | b'$'
                    | b'\''
                    | b'|'
            );
        if raw {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn bounds_and_offsets() {
        assert!(Paging::new(1, 101).is_err());
        assert_eq!(Paging::new(3, 10).unwrap().limit_offset(), Some((10, 20)));
        assert_eq!(Paging::new(0, 10).unwrap().limit_offset(), Some((10, 0)));
        assert_eq!(Paging::new(-4, 10).unwrap().limit_offset(), Some((10, 0)));
        assert_eq!(Paging::new(2, 0).unwrap().limit_offset(), None);
        assert_eq!(Paging::new(2, -1).unwrap().limit_offset(), None);
    }

    #[test]
    fn link_matches_harbor_example() {
        let paging = Paging::new(2, 10).unwrap();
        let link = paging.link(
            "/api/v2.0/projects",
            &pairs(&[("page", "2"), ("page_size", "10"), ("q", "name=~te")]),
            25,
        );
        assert_eq!(
            link.as_deref(),
            Some(
                "</api/v2.0/projects?page=1&page_size=10&q=name=~te>; rel=\"prev\" , \
                 </api/v2.0/projects?page=3&page_size=10&q=name=~te>; rel=\"next\""
            )
        );
    }

    #[test]
    fn link_values_are_percent_encoded() {
        let paging = Paging::new(1, 1).unwrap();
        let link = paging.link(
            "/p",
            &pairs(&[
                ("q", "name=~a&b+c#d %e"),
                ("sort", "-name"),
                ("x<y", "\"é\""),
            ]),
            5,
        );
        assert_eq!(
            link.as_deref(),
            Some(
                "</p?page=2&page_size=1&q=name=~a%26b%2Bc%23d%20%25e&sort=-name&x%3Cy=%22%C3%A9%22>; rel=\"next\""
            )
        );
        let braces = paging.link("/p", &pairs(&[("q", "tags={a b},size=[1~9]")]), 5);
        assert_eq!(
            braces.as_deref(),
            Some("</p?page=2&page_size=1&q=tags={a%20b},size=[1~9]>; rel=\"next\"")
        );
    }

    #[test]
    fn link_edges() {
        let first = Paging::default();
        assert_eq!(
            first
                .link("/p", &pairs(&[("with_detail", "false")]), 11)
                .as_deref(),
            Some("</p?page=2&page_size=10&with_detail=false>; rel=\"next\"")
        );
        assert_eq!(first.link("/p", &[], 10), None);
        assert_eq!(Paging::new(1, 0).unwrap().link("/p", &[], 1000), None);
        let last = Paging::new(3, 10).unwrap();
        assert_eq!(
            last.link("/p", &[], 25).as_deref(),
            Some("</p?page=2&page_size=10>; rel=\"prev\"")
        );
        assert_eq!(Paging::new(9, 10).unwrap().link("/p", &[], 25), None);
    }
}
