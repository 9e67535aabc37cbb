//! Web portal sessions, shared by the portal and the Harbor API: the `sid`
//! cookie, its server-side record (by hash, in the database, so every instance
//! accepts it) and the CSRF token that state-changing requests must echo.

use std::sync::Arc;

use axum::http::header::{COOKIE, SET_COOKIE};
use axum::http::{Extensions, HeaderMap, HeaderValue, Method};
use berth_auth::secret::{constant_time_eq, random_alphanumeric};
use berth_domain::model::User;
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::signin::peer;
use crate::state::AppState;

/// The session cookie's name.
pub const COOKIE_NAME: &str = "sid";
/// The header (Harbor's) that carries the CSRF token on API requests.
pub const CSRF_HEADER: &str = "x-harbor-csrf-token";
/// How long a session lives unused: Harbor's `session_timeout` (minutes).
async fn idle_secs(state: &AppState) -> Result<i64, ApiError> {
    let minutes = state.configuration().await?.int("session_timeout");
    Ok(minutes.clamp(1, 60 * 24 * 365) * 60)
}
/// The message of a refused CSRF token (Harbor's).
pub const CSRF_INVALID: &str = "CSRF token invalid";

/// A signed-in browser: the user and the session's CSRF token.
#[derive(Debug, Clone)]
pub struct SessionUser {
    /// The signed-in user.
    pub user: Arc<User>,
    /// The token forms and state-changing API requests must carry.
    pub csrf_token: String,
    /// The configured `banner_message` to show now, if any.
    pub banner: Option<Banner>,
}

/// Harbor's `banner_message`: a JSON object (`message`, `type` info, warning,
/// success or danger, optional `fromDate` / `toDate` as `MM/DD/YYYY`) or, as
/// older Harbors stored it, plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Banner {
    /// What to show.
    pub message: String,
    /// `info`, `warning`, `success` or `danger`.
    pub kind: &'static str,
}

impl Banner {
    /// The banner `text` configures for `today` (year, month, day), if one is
    /// shown then.
    pub fn configured(text: &str, today: (i32, u8, u8)) -> Option<Self> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(text) else {
            return Some(Self {
                message: text.to_string(),
                kind: "info",
            });
        };
        let field = |name: &str| fields.get(name).and_then(|v| v.as_str()).unwrap_or("");
        let message = field("message").trim();
        let date = |name: &str| {
            let mut parts = field(name).split('/').map(|p| p.trim().parse::<i32>().ok());
            let (month, day, year) = (parts.next()??, parts.next()??, parts.next()??);
            Some((year, month, day))
        };
        let today = (today.0, i32::from(today.1), i32::from(today.2));
        let started = date("fromDate").is_none_or(|from| from <= today);
        let ended = date("toDate").is_some_and(|to| to < today);
        if message.is_empty() || !started || ended {
            return None;
        }
        let kind = match field("type") {
            "warning" => "warning",
            "success" => "success",
            "danger" => "danger",
            _ => "info",
        };
        Some(Self {
            message: message.to_string(),
            kind,
        })
    }
}

impl SessionUser {
    /// Whether `candidate` is this session's CSRF token (constant time).
    pub fn csrf_matches(&self, candidate: &str) -> bool {
        constant_time_eq(self.csrf_token.as_bytes(), candidate.as_bytes())
    }
}

/// The value of cookie `name` when it is a random id of ours (43 alphanumerics).
pub fn random_cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(found, _)| *found == name)
        .map(|(_, value)| value.trim())
        .filter(|v| v.len() == ID_LEN && v.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// The length of the random ids cookies carry.
pub const ID_LEN: usize = 43;

/// The `sid` value of the request's cookies, if well formed.
pub fn cookie_id(headers: &HeaderMap) -> Option<&str> {
    random_cookie(headers, COOKIE_NAME)
}

/// The SHA-256 (hex) of a cookie's random id: what the database keeps.
pub fn id_hash(id: &str) -> String {
    hex::encode(Sha256::digest(id.as_bytes()))
}

/// The live session the request's cookie names, if any.
pub async fn from_headers(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<Option<SessionUser>, ApiError> {
    let Some(id) = cookie_id(headers) else {
        return Ok(None);
    };
    let idle = idle_secs(state).await?;
    let Some(session) = state.store.sessions().find(&id_hash(id), idle).await? else {
        return Ok(None);
    };
    let Some(user) = state.store.users().find_by_id(session.user_id).await? else {
        return Ok(None);
    };
    let today = time::OffsetDateTime::now_utc().date();
    let banner = Banner::configured(
        state.configuration().await?.string("banner_message"),
        (today.year(), u8::from(today.month()), today.day()),
    );
    Ok(Some(SessionUser {
        user: Arc::new(user),
        csrf_token: session.csrf_token,
        banner,
    }))
}

/// Starts a session for `user`: its id (for the cookie) and CSRF token.
pub async fn start(state: &AppState, user: &User) -> Result<(String, String), ApiError> {
    let id = random_alphanumeric(ID_LEN);
    let csrf = random_alphanumeric(32);
    state
        .store
        .sessions()
        .create(&id_hash(&id), user.id, &csrf, idle_secs(state).await?)
        .await?;
    Ok((id, csrf))
}

/// Ends the session the request's cookie names, if any.
pub async fn end(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if let Some(id) = cookie_id(headers) {
        state.store.sessions().delete(&id_hash(id)).await?;
    }
    Ok(())
}

/// Whether the request reached us over https: `X-Forwarded-Proto` from a
/// trusted proxy, else the scheme of the external URL.
pub fn is_https(state: &AppState, extensions: &Extensions, headers: &HeaderMap) -> bool {
    let from_proxy =
        peer(extensions).is_some_and(|p| state.signin.trusted_proxies.contains(p.ip()));
    if from_proxy
        && let Some(proto) = headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
    {
        let last = proto.rsplit(',').next().unwrap_or("").trim();
        return last.eq_ignore_ascii_case("https");
    }
    state.external_url.starts_with("https://")
}

/// The `Set-Cookie` value that carries session `id` (`None`: clears it): a
/// browser-session cookie; the server ends the session after
/// `session_timeout` minutes unused.
pub fn set_cookie(id: Option<&str>, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let value = match id {
        Some(id) => format!("{COOKIE_NAME}={id}; Path=/; HttpOnly; SameSite=Lax{secure}"),
        None => format!("{COOKIE_NAME}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{secure}"),
    };
    // Only alphanumerics and fixed text: always a valid header value.
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Adds a `Set-Cookie` header to `headers`.
pub fn add_cookie(headers: &mut HeaderMap, value: HeaderValue) {
    headers.append(SET_COOKIE, value);
}

/// Whether a request with `method` changes state (everything but GET, HEAD, OPTIONS).
pub fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Checks the CSRF header of an API request the session authenticates.
pub fn check_csrf_header(
    session: &SessionUser,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    if !changes_state(method) {
        return Ok(());
    }
    let sent = headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if session.csrf_matches(sent) {
        Ok(())
    } else {
        Err(ApiError::forbidden(CSRF_INVALID))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_sid_cookie() {
        let id = "a".repeat(43);
        let mut headers = HeaderMap::new();
        headers.insert(
            COOKIE,
            HeaderValue::from_str(&format!("x=1; sid={id}; y=2")).unwrap(),
        );
        assert_eq!(cookie_id(&headers), Some(id.as_str()));
        headers.insert(COOKIE, HeaderValue::from_static("sid=short"));
        assert_eq!(cookie_id(&headers), None);
    }

    #[test]
    fn banners_show_within_their_dates() {
        let today = (2026, 11, 26);
        assert_eq!(Banner::configured("", today), None);
        assert_eq!(
            Banner::configured("Maintenance at 6", today),
            Some(Banner {
                message: "Maintenance at 6".into(),
                kind: "info"
            })
        );
        let json = |from: &str, to: &str| {
            format!(
                r#"{{"closable":true,"message":"Read only tonight","type":"warning","fromDate":"{from}","toDate":"{to}"}}"#
            )
        };
        let shown = Banner::configured(&json("11/20/2026", "11/26/2026"), today).unwrap();
        assert_eq!(
            (shown.message.as_str(), shown.kind),
            ("Read only tonight", "warning")
        );
        assert_eq!(
            Banner::configured(&json("11/27/2026", "12/01/2026"), today),
            None,
            "not yet"
        );
        assert_eq!(
            Banner::configured(&json("11/01/2026", "11/25/2026"), today),
            None,
            "over"
        );
        assert!(
            Banner::configured(&json("", ""), today).is_some(),
            "no dates: always"
        );
        assert_eq!(Banner::configured(r#"{"message":""}"#, today), None);
    }

    #[test]
    fn cookie_flags() {
        let v = set_cookie(Some("abc"), true);
        let v = v.to_str().unwrap();
        assert!(v.contains("HttpOnly") && v.contains("SameSite=Lax") && v.contains("Secure"));
        assert!(
            !set_cookie(Some("abc"), false)
                .to_str()
                .unwrap()
                .contains("Secure")
        );
    }
}
