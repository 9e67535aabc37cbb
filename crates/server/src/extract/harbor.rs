//! Harbor request parts: a JSON body and query parameters whose every rejection
//! is a Harbor 400 body, and the boolean headers Harbor reads.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, OriginalUri, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::query::{Paging, Query, SortKey, parse_query, parse_sort};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorKind, HarborError};

/// The largest JSON body a Harbor operation accepts.
const BODY_LIMIT: usize = 1024 * 1024;

/// A JSON request body. Wrong content types, empty or malformed bodies and
/// wrong field types are 400s with Harbor's error body.
#[derive(Debug)]
pub struct HarborJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for HarborJson<T> {
    type Rejection = HarborError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let body = LaterJson::<T>::from_request(request, state).await?;
        Ok(Self(body.parse()?))
    }
}

/// A JSON request body read now (a body over the limit is a 413 at once) but
/// judged later with [`LaterJson::parse`], so an operation can answer 404 for
/// what its path names before it looks at the body, as Harbor does.
#[derive(Debug)]
pub struct LaterJson<T> {
    content_type: String,
    bytes: Bytes,
    target: std::marker::PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> LaterJson<T> {
    /// The body as `T`: wrong content types, empty or malformed bodies and
    /// wrong field types are 400s with Harbor's error body.
    pub fn parse(&self) -> Result<T, ApiError> {
        let essence = self
            .content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if self.bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::bad_request("the request body is required"));
        }
        if essence != "application/json" && !essence.ends_with("+json") {
            return Err(ApiError::bad_request(format!(
                "unsupported media type \"{}\", only [application/json] are allowed",
                self.content_type
            )));
        }
        serde_json::from_slice(&self.bytes).map_err(|e| {
            ApiError::bad_request(format!("parsing the request body failed, because {e}"))
        })
    }
}

impl<T, S: Send + Sync> FromRequest<S> for LaterJson<T> {
    type Rejection = HarborError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let bytes = read_body(request, state).await?;
        Ok(Self {
            content_type,
            bytes,
            target: std::marker::PhantomData,
        })
    }
}

/// A raw request body of at most [`BODY_LIMIT`] bytes, for operations whose
/// body is optional or not JSON; a longer one is a 413 in Harbor's error shape.
#[derive(Debug)]
pub struct HarborBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for HarborBytes {
    type Rejection = HarborError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        read_body(request, state).await.map(Self)
    }
}

/// Reads a Harbor request body of at most [`BODY_LIMIT`] bytes: a longer one
/// (announced or sent) is a 413 in Harbor's error shape.
async fn read_body<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, HarborError> {
    let too_large = || {
        HarborError(ApiError::new(
            ErrorKind::PayloadTooLarge,
            format!("the request body is larger than {BODY_LIMIT} bytes"),
        ))
    };
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > BODY_LIMIT as u64) {
        return Err(too_large());
    }
    let bytes = Bytes::from_request(request, state)
        .await
        .map_err(|e| match e.status() {
            StatusCode::PAYLOAD_TOO_LARGE => too_large(),
            _ => HarborError(ApiError::bad_request(format!(
                "failed to read the request body: {e}"
            ))),
        })?;
    if bytes.len() > BODY_LIMIT {
        return Err(too_large());
    }
    Ok(bytes)
}

/// The decoded query string of a request, in order, with the request path,
/// for typed lookups and for building `Link` headers.
#[derive(Debug, Clone)]
pub struct HarborQuery {
    /// The request path as routed (`/api/v2.0/...`).
    pub path: String,
    /// Every `key=value` pair, decoded once.
    pub pairs: Vec<(String, String)>,
}

/// An int64 path parameter `name`; Harbor's 400 for anything else.
pub fn path_int(name: &str, text: &str) -> Result<i64, ApiError> {
    text.parse()
        .map_err(|_| validation(format!("{name} in path must be of type int64: \"{text}\"")))
}

fn validation(message: String) -> ApiError {
    ApiError::bad_request(format!("validation failure list:\n{message}"))
}

impl HarborQuery {
    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A non-empty value of `name`, if given.
    pub fn string(&self, name: &str) -> Option<String> {
        self.get(name).filter(|v| !v.is_empty()).map(str::to_string)
    }

    /// A required, non-empty value.
    pub fn required(&self, name: &str) -> Result<String, ApiError> {
        self.string(name)
            .ok_or_else(|| validation(format!("{name} in query is required")))
    }

    /// An int64 value, or `default` when absent.
    pub fn int(&self, name: &str, default: i64) -> Result<i64, ApiError> {
        match self.get(name) {
            None | Some("") => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| validation(format!("{name} in query must be of type int64: \"{v}\""))),
        }
    }

    /// A boolean, or `default` when absent or empty. The extractor has already
    /// refused a value of a [`BOOLEAN_PARAMS`] parameter that is not a boolean.
    pub fn bool(&self, name: &str, default: bool) -> bool {
        match self.get(name) {
            None | Some("") => default,
            Some(v) => convert_bool(v),
        }
    }

    /// An optional boolean.
    pub fn opt_bool(&self, name: &str) -> Option<bool> {
        self.get(name).filter(|v| !v.is_empty()).map(convert_bool)
    }

    /// `page` and `page_size`. A `page_size` of 0 or less, which Harbor
    /// reads as "every row", is a page of the most rows a page holds (100),
    /// with the `Link` to the next: no request reads a whole table.
    pub fn paging(&self) -> Result<Paging, ApiError> {
        use berth_domain::query::paging::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
        let page = self.int("page", 1)?;
        let size = match self.int("page_size", DEFAULT_PAGE_SIZE)? {
            size if size <= 0 => MAX_PAGE_SIZE,
            size => size,
        };
        Ok(Paging::new(page, size)?)
    }

    /// `q`, parsed.
    pub fn query(&self) -> Result<Query, ApiError> {
        Ok(parse_query(self.get("q").unwrap_or(""))?)
    }

    /// `sort`, parsed.
    pub fn sort(&self) -> Result<Vec<SortKey>, ApiError> {
        Ok(parse_sort(self.get("sort").unwrap_or(""))?)
    }

    /// The `Link` header of a page.
    pub fn link(&self, paging: Paging, total: i64) -> Option<String> {
        paging.link(&self.path, &self.pairs, total)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for HarborQuery {
    type Rejection = HarborError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let uri = parts
            .extensions
            .get::<OriginalUri>()
            .map_or_else(|| parts.uri.clone(), |o| o.0.clone());
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(uri.query().unwrap_or(""))
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
        for (key, value) in &pairs {
            if BOOLEAN_PARAMS.contains(&key.as_str())
                && !value.is_empty()
                && parse_bool(value).is_none()
            {
                return Err(validation(format!(
                    "{key} in query must be of type boolean: \"{value}\""
                ))
                .into());
            }
        }
        Ok(Self {
            path: uri.path().to_string(),
            pairs,
        })
    }
}

/// The query parameters Harbor's swagger types `boolean`, on any operation.
/// A value that is not a boolean is a 400 for every one of them, whichever
/// operation is called, so no operation reads `null` or `maybe` as false.
pub const BOOLEAN_PARAMS: &[&str] = &[
    "public",
    "with_detail",
    "with_tag",
    "with_label",
    "with_scan_overview",
    "with_sbom_overview",
    "with_signature",
    "with_immutable_status",
    "with_accessory",
    "with_inherited_accessory",
    "latest_in_repository",
    "relative",
    "with_dangerous_cve",
    "with_dangerous_artifact",
    "tune_count",
];

/// A boolean query value: go-openapi's true spellings (`true`, `1`, `yes`, ...)
/// and their false counterparts; `None` for anything else.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "ok" | "y" | "on" | "selected" | "checked" | "t" | "enabled" => {
            Some(true)
        }
        "false" | "0" | "no" | "n" | "off" | "f" | "disabled" | "unselected" | "unchecked" => {
            Some(false)
        }
        _ => None,
    }
}

/// go-openapi's `ConvertBool`: the true spellings are true, all else false.
pub fn convert_bool(value: &str) -> bool {
    parse_bool(value).unwrap_or(false)
}

/// A boolean request header (`X-Is-Resource-Name` ...), false when absent.
pub fn header_bool(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .is_some_and(convert_bool)
}

/// A JSON 200 with Harbor's paging headers.
pub fn paged<T: Serialize>(items: &T, total: i64, link: Option<String>) -> Response {
    let mut response = axum::Json(items).into_response();
    let headers = response.headers_mut();
    headers.insert("x-total-count", total.into());
    if let Some(link) = link.and_then(|l| l.parse().ok()) {
        headers.insert(header::LINK, link);
    }
    response
}
