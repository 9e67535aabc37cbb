//! HTML building: escaping of every interpolated value and the page frame.
//!
//! Pages are `format!` templates; anything that is not a literal of this crate
//! goes through [`esc`] (text and attribute values alike).

use std::fmt;

use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::session::SessionUser;

/// A value written with `&`, `<`, `>`, `"` and `'` escaped.
pub struct Esc<'a>(pub &'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// Escapes `text` for HTML text and attribute values.
pub fn esc(text: &str) -> Esc<'_> {
    Esc(text)
}

/// Percent-encodes one path segment or query value of a portal link.
pub fn url_part(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A rendered page, served with a strict content security policy (scripts and
/// styles from this server only, no framing).
pub struct Page {
    /// The status.
    pub status: StatusCode,
    /// The whole document.
    pub body: String,
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        let mut response = (self.status, self.body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        headers.insert(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
            ),
        );
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

/// The navigation links only system administrators see.
const ADMIN_LINKS: &str = r#"<a href="/harbor/users" id="nav_users">Users</a><a href="/harbor/configuration" id="nav_configuration">Configuration</a><a href="/harbor/system" id="nav_system">System</a>"#;

/// The frame of every page: head, top bar (with sign-out for a session) and `main`.
pub fn page(title: &str, session: Option<&SessionUser>, main: &str) -> Page {
    page_with_status(StatusCode::OK, title, session, main)
}

/// [`page`] with another status.
pub fn page_with_status(
    status: StatusCode,
    title: &str,
    session: Option<&SessionUser>,
    main: &str,
) -> Page {
    let bar = match session {
        Some(s) => format!(
            r#"<nav><a href="/harbor/projects">Projects</a>{admin}</nav>
<form class="signout" method="post" action="/harbor/sign-out">{csrf}<a class="who" href="/harbor/profile" id="current_user">{name}</a> <button type="submit" id="log_out">Sign out</button></form>"#,
            admin = if s.user.is_sysadmin() {
                ADMIN_LINKS
            } else {
                ""
            },
            csrf = csrf_field(s),
            name = esc(&s.user.username),
        ),
        None => String::new(),
    };
    let banner = match session.and_then(|s| s.banner.as_ref()) {
        Some(b) => format!(
            r#"<div class="banner banner-{kind}" id="banner_message" role="status">{message}</div>"#,
            kind = b.kind,
            message = esc(&b.message),
        ),
        None => String::new(),
    };
    let body = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · Berth</title><link rel="stylesheet" href="/harbor/static/portal.css"><script src="/harbor/static/portal.js" defer></script></head>
<body><header><a class="brand" href="/harbor/projects">Berth</a>{bar}</header>{banner}
<main>{main}</main></body></html>
"#,
        title = esc(title),
    );
    Page { status, body }
}

/// The hidden form field that carries the session's CSRF token.
pub fn csrf_field(session: &SessionUser) -> String {
    format!(
        r#"<input type="hidden" name="csrf_token" value="{}">"#,
        esc(&session.csrf_token)
    )
}

/// A paragraph announcing an error or a result, for the top of a page.
pub fn notice(class: &str, text: &str) -> String {
    format!(
        r#"<p class="notice {}" role="alert">{}</p>"#,
        esc(class),
        esc(text)
    )
}

/// A size in bytes as people read it (`1.5 MiB`).
pub fn human_size(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes.max(0) as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A store timestamp as shown (`2026-11-24 13:05`); the zero date is "never".
pub fn when(timestamp: &str) -> String {
    if timestamp.is_empty() || timestamp.starts_with("0001-") {
        return "never".into();
    }
    let trimmed: String = timestamp.chars().take(16).collect();
    format!("{} UTC", trimmed.replace('T', " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#).to_string(),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(esc("plain").to_string(), "plain");
    }

    #[test]
    fn sizes_and_times() {
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(when("0001-01-01T00:00:00.000Z"), "never");
        assert_eq!(when("2026-11-24T13:05:01.000Z"), "2026-11-24 13:05 UTC");
    }
}
