//! What a generator-rest request carries, and the reference's three ways of
//! checking who sends it (generator-rest.md §2, §3): the master key, a user
//! token, HTTP Basic credentials.
//!
//! Bodies are parsed on every method (DELETE included), as JSON or as form
//! fields, exactly once per request.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use berth_domain::model::User;
use berth_domain::rest_query::{self, ListQuery, RuleArg, RuleFailure, RuleValue};
use serde_json::{Map, Value, json};

use crate::directory;
use crate::error::{ApiError, ErrorKind, RestCode, RestError};
use crate::identity::{self, BasicCredentials};
use crate::signin;
use crate::state::AppState;

/// The JSON body parser's limit (body-parser's default, 100 kB).
const BODY_LIMIT: usize = 100 * 1024;

/// A request's query pairs, parsed body fields and `Authorization` header.
#[derive(Default)]
pub struct RestInput {
    /// Query-string pairs in order (repeated keys repeat).
    pub query: Vec<(String, String)>,
    /// Body fields from JSON or a form; empty for other media types.
    pub body: Map<String, Value>,
    authorization: Option<String>,
    /// The socket peer and the `X-Forwarded-For` headers: who the client is.
    peer: Option<SocketAddr>,
    forwarded: HeaderMap,
}

impl std::fmt::Debug for RestInput {
    /// Names only: values may be passwords and tokens.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestInput")
            .field(
                "query",
                &self.query.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("body", &self.body.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync> FromRequest<S> for RestInput {
    type Rejection = RestError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, RestError> {
        let (parts, body) = request.into_parts();
        let query = parts
            .uri
            .query()
            .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
            .unwrap_or_default();
        let authorization = parts
            .headers
            .get(AUTHORIZATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let peer = signin::peer(&parts.extensions);
        let mut forwarded = HeaderMap::new();
        for value in parts.headers.get_all(signin::X_FORWARDED_FOR) {
            forwarded.append(signin::X_FORWARDED_FOR, value.clone());
        }
        let media = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase())
            .unwrap_or_default();
        let is_json = media == "application/json" || media.ends_with("+json");
        let is_form = media == "application/x-www-form-urlencoded";
        let mut fields = Map::new();
        if is_json || is_form {
            let bytes = axum::body::to_bytes(body, BODY_LIMIT).await.map_err(|_| {
                ApiError::new(
                    ErrorKind::PayloadTooLarge,
                    "request entity too large (limit 100kb)",
                )
            })?;
            if is_json && !bytes.is_empty() {
                match serde_json::from_slice::<Value>(&bytes) {
                    Ok(Value::Object(map)) => fields = map,
                    Ok(Value::Array(_)) => {}
                    _ => {
                        return Err(ApiError::bad_request(
                            "the body is not a JSON object or array",
                        )
                        .into());
                    }
                }
            } else if is_form {
                let pairs: Vec<(String, String)> =
                    serde_urlencoded::from_bytes(&bytes).unwrap_or_default();
                for (key, value) in pairs {
                    match fields.get_mut(&key) {
                        Some(Value::Array(items)) => items.push(Value::String(value)),
                        Some(first) => {
                            let first = first.take();
                            fields.insert(key, Value::Array(vec![first, Value::String(value)]));
                        }
                        None => {
                            fields.insert(key, Value::String(value));
                        }
                    }
                }
            }
        }
        Ok(Self {
            query,
            body: fields,
            authorization,
            peer,
            forwarded,
        })
    }
}

/// The rich-param body: `{name, param, value?, <rule>: <arg>, valid, message}`.
#[derive(serde::Serialize)]
struct RichParam<'a> {
    name: &'static str,
    param: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<Value>,
    #[serde(flatten)]
    rule: Map<String, Value>,
    valid: Value,
    message: &'a str,
}

/// A failed rule as the reference renders it: 400 with the rich-param body.
pub fn rule_error(failure: RuleFailure) -> ApiError {
    let value = failure.value.as_ref().map(|value| match value {
        RuleValue::Text(text) => json!(text),
        RuleValue::Number(n) if n.is_finite() && n.fract() == 0.0 && n.abs() < 1e15 => {
            json!(*n as i64)
        }
        // JSON has no NaN or Infinity; JSON.stringify writes null.
        RuleValue::Number(n) => serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number),
    });
    let (arg, valid) = match &failure.rule {
        RuleArg::Required => (json!(true), json!(false)),
        RuleArg::Match => (json!({}), json!(false)),
        RuleArg::MinLength(n) | RuleArg::MaxLength(n) => (json!(n), json!(false)),
        RuleArg::Min(n) | RuleArg::Max(n) => (json!(*n as i64), json!(false)),
        RuleArg::Enum(values) => (json!(values), json!(0)),
    };
    let mut rule = Map::new();
    rule.insert(failure.rule.name().into(), arg);
    let body = RichParam {
        name: failure.rule.name(),
        param: &failure.param,
        value,
        rule,
        valid,
        message: &failure.message,
    };
    let detail = serde_json::to_string(&body).expect("JSON values serialize");
    ApiError {
        detail: Some(detail),
        ..ApiError::bad_request(failure.message)
    }
}

/// passport's answer to a wrong bearer token: 401 `Unauthorized` with an
/// `error="invalid_token"` challenge.
pub fn bearer_refused() -> ApiError {
    ApiError {
        code: Some(RestCode::BearerInvalid.into()),
        ..ApiError::unauthorized()
    }
}

/// 404 with an empty body.
pub fn not_found() -> ApiError {
    ApiError::not_found("not found")
}

/// JavaScript truthiness of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// An `access_token` as a candidate: a string, or something that can never match.
enum Candidate {
    Text(String),
    Unusable,
}

impl RestInput {
    /// The list parameters (`q`, `fields`, `page`, `limit`, `sort`), or the 400 of the first bad one.
    pub fn list_query(&self) -> Result<ListQuery, ApiError> {
        ListQuery::parse(&self.query).map_err(rule_error)
    }

    /// A body field as bodymen reads a `String` field: `null` or missing is
    /// absent; other values are turned into strings as JavaScript's `String()`.
    pub fn field(&self, name: &str) -> Option<String> {
        fn js_string(value: &Value) -> Option<String> {
            match value {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                Value::Bool(b) => Some(b.to_string()),
                Value::Number(n) => Some(n.to_string()),
                Value::Array(items) => Some(
                    items
                        .iter()
                        .map(|v| js_string(v).unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                Value::Object(_) => Some("[object Object]".into()),
            }
        }
        self.body.get(name).and_then(js_string)
    }

    /// A body field, trimmed (fields declared with `trim: true`).
    pub fn trimmed_field(&self, name: &str) -> Option<String> {
        self.field(name).map(|v| v.trim().to_string())
    }

    fn query_token(&self) -> Option<Candidate> {
        let mut values = self.query.iter().filter(|(k, _)| k == "access_token");
        match (values.next(), values.next()) {
            (None, _) => None,
            (Some((_, one)), None) => (!one.is_empty()).then(|| Candidate::Text(one.clone())),
            (Some(_), Some(_)) => Some(Candidate::Unusable),
        }
    }

    fn body_token(&self) -> Option<Candidate> {
        let value = self.body.get("access_token").filter(|v| truthy(v))?;
        Some(match value {
            Value::String(s) => Candidate::Text(s.clone()),
            _ => Candidate::Unusable,
        })
    }

    /// passport-http-bearer's token: header (`Bearer <t>`, exactly two parts),
    /// body, query. Two sources, or a header that is not two parts, give 400
    /// `Bad Request`; none gives the 401 challenge.
    fn bearer_strategy_token(&self) -> Result<Candidate, ApiError> {
        let bad_request = || ApiError {
            code: Some(RestCode::Plain.into()),
            ..ApiError::bad_request("Bad Request")
        };
        let mut found: Option<Candidate> = None;
        if let Some(header) = &self.authorization {
            let parts: Vec<&str> = header.split(' ').collect();
            let [scheme, token] = parts.as_slice() else {
                return Err(bad_request());
            };
            if scheme.eq_ignore_ascii_case("bearer") {
                found = Some(Candidate::Text((*token).to_string()));
            }
        }
        for source in [self.body_token(), self.query_token()]
            .into_iter()
            .flatten()
        {
            if found.is_some() {
                return Err(bad_request());
            }
            found = Some(source);
        }
        found.ok_or_else(|| ApiError {
            code: Some(RestCode::BearerMissing.into()),
            ..ApiError::unauthorized()
        })
    }

    /// `master()`: the master key, compared in constant time.
    pub fn require_master(&self, state: &AppState) -> Result<(), ApiError> {
        match self.bearer_strategy_token()? {
            Candidate::Text(token) if state.master_key.matches(&token) => Ok(()),
            _ => Err(bearer_refused()),
        }
    }

    /// The OAuth access token of a social sign-in (same rules as the master key).
    pub fn provider_token(&self) -> Result<String, ApiError> {
        match self.bearer_strategy_token()? {
            Candidate::Text(token) => Ok(token),
            Candidate::Unusable => Err(bearer_refused()),
        }
    }

    /// `token({required: true})`: the user named by the first non-empty of
    /// query `access_token`, body `access_token`, `Authorization: Bearer`.
    /// Every failure is 401 with an empty body.
    pub async fn require_user(&self, state: &AppState) -> Result<Arc<User>, ApiError> {
        let candidate = self
            .query_token()
            .or_else(|| self.body_token())
            .or_else(|| {
                self.authorization
                    .as_deref()
                    .and_then(identity::bearer_token)
                    .map(|t| Candidate::Text(t.to_string()))
            });
        let Some(Candidate::Text(token)) = candidate else {
            return Err(ApiError::unauthorized());
        };
        identity::verify_user_token(state, &token)
            .await?
            .ok_or_else(ApiError::unauthorized)
    }

    /// `token({required: true, roles: ['admin']})`: a non-admin gets 401 too.
    pub async fn require_admin(&self, state: &AppState) -> Result<Arc<User>, ApiError> {
        let user = self.require_user(state).await?;
        if user.is_sysadmin() {
            Ok(user)
        } else {
            Err(ApiError::unauthorized())
        }
    }

    /// The sign-in of `POST /auth`: [`RestInput::require_basic_user`], except
    /// in `ldap_auth` mode, where the directory decides: the login is the
    /// directory uid or the directory user's e-mail, the password whatever the
    /// directory accepts, and the user is onboarded as on every other surface.
    pub async fn require_sign_in(&self, state: &AppState) -> Result<Arc<User>, ApiError> {
        let config = state.store.configurations().load().await?;
        if config.string("auth_mode") != directory::LDAP_AUTH {
            return self.require_basic_user(state).await;
        }
        let creds = self
            .authorization
            .as_deref()
            .and_then(BasicCredentials::parse)
            .filter(|c| !c.login.trim().is_empty() && !c.password.is_empty())
            .ok_or_else(ApiError::unauthorized)?;
        let client =
            signin::client_address(&state.signin.trusted_proxies, self.peer, &self.forwarded);
        identity::verify_password(state, client, creds.login.trim(), &creds.password)
            .await?
            .ok_or_else(ApiError::unauthorized)
    }

    /// `password()`: HTTP Basic e-mail and password. Header problems and wrong
    /// credentials are 401 (empty); an e-mail or password the user model would
    /// refuse is 400 with the rich-param body.
    pub async fn require_basic_user(&self, state: &AppState) -> Result<Arc<User>, ApiError> {
        let creds = self
            .authorization
            .as_deref()
            .and_then(BasicCredentials::parse)
            .filter(|c| !c.login.is_empty() && !c.password.is_empty())
            .ok_or_else(ApiError::unauthorized)?;
        let email = rest_query::validate_email("email", Some(&creds.login)).map_err(rule_error)?;
        rest_query::validate_password("password", Some(&creds.password)).map_err(rule_error)?;
        let client =
            signin::client_address(&state.signin.trusted_proxies, self.peer, &self.forwarded);
        identity::verify_password(state, client, &email, &creds.password)
            .await?
            .ok_or_else(ApiError::unauthorized)
    }
}

/// The route's one path parameter, percent-decoded; `None` on routes without
/// one. A parameter that does not decode (`%FF`) is `Some("")`, which names
/// nothing, so the handler answers 404 rather than a framework 400.
#[derive(Debug)]
pub struct PathParam(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(
            match Path::<Vec<String>>::from_request_parts(parts, state).await {
                Ok(Path(mut params)) => Self(params.pop()),
                Err(PathRejection::MissingPathParams(_)) => Self(None),
                Err(_) => Self(Some(String::new())),
            },
        )
    }
}

impl PathParam {
    /// The parameter, `""` when absent.
    pub fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or("")
    }
}

/// A path id: our decimal ids; anything else names nothing (404).
pub fn parse_id(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}
