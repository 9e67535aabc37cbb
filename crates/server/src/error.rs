//! The one error type of the HTTP edge and its renderers.
//!
//! Every failure becomes an [`ApiError`]: a kind (which fixes the status, in one
//! `match`), a message and optional detail. Each surface renders it in its own
//! wire format: [`HarborError`] for `/api/v2.0`; the registry and generator-rest
//! surfaces add theirs beside it. 5xx bodies never carry internal text: the
//! cause is logged, inside the request's span, with its request id.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::{DomainError, TagChange};
use berth_store::{BlobError, StoreError};
use serde_json::json;

/// What went wrong, independent of the wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Malformed input (Harbor answers 422 for some of these; the spec says 400).
    BadRequest,
    /// A login is required and missing, or the credentials are wrong.
    Unauthorized,
    /// The caller lacks the permission.
    Forbidden,
    /// No such resource (or not visible to the caller).
    NotFound,
    /// The path exists, the method does not.
    MethodNotAllowed,
    /// A unique key is taken.
    Conflict,
    /// The resource's state forbids the operation.
    Precondition,
    /// The body is not in a media type the operation accepts.
    UnsupportedMediaType,
    /// The body is larger than the operation accepts.
    PayloadTooLarge,
    /// An upload chunk or download range does not fit (416).
    RangeNotSatisfiable,
    /// A dependency (the database) is unavailable or failed.
    Internal,
    /// An upstream service (the LDAP directory, an identity provider, the mail server) failed.
    BadGateway,
    /// A feature needs configuration this instance does not have.
    Unavailable,
    /// Too many failed sign-ins from this client or for this account (429,
    /// with `Retry-After`).
    TooManyRequests,
}

impl ErrorKind {
    /// The HTTP status of this kind, on every surface.
    pub fn status(self) -> StatusCode {
        match self {
            Self::BadRequest => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict => StatusCode::CONFLICT,
            Self::Precondition => StatusCode::PRECONDITION_FAILED,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::RangeNotSatisfiable => StatusCode::RANGE_NOT_SATISFIABLE,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Self::BadGateway => StatusCode::BAD_GATEWAY,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// Harbor's error code for this kind (`src/lib/http/error.go`).
    fn harbor_code(self) -> &'static str {
        match self {
            Self::BadRequest => "BAD_REQUEST",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::Forbidden => "FORBIDDEN",
            Self::NotFound => "NOT_FOUND",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::Conflict => "CONFLICT",
            Self::Precondition => "PRECONDITION",
            Self::UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            Self::PayloadTooLarge => "REQUEST_ENTITY_TOO_LARGE",
            Self::RangeNotSatisfiable => "REQUESTED_RANGE_NOT_SATISFIABLE",
            Self::TooManyRequests => "TOO_MANY_REQUEST",
            Self::Internal | Self::BadGateway | Self::Unavailable => "UNKNOWN",
        }
    }
}

/// A failed request, before it is rendered for a surface.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The message clients see (never shown for `Internal`).
    pub message: String,
    /// The input field at fault, if any.
    pub field: Option<String>,
    /// A surface's own code that overrides the kind's default there (OCI
    /// `MANIFEST_UNKNOWN`, Harbor `DENIED`, ...); the other surfaces render
    /// the kind's.
    pub code: Option<WireCode>,
    /// A surface-specific JSON body, already serialized (so its key order is
    /// kept), that replaces the rendered message (generator-rest's rich-param errors).
    pub detail: Option<String>,
    /// Seconds the client should wait before trying again (`Retry-After`, on
    /// every surface). 16 bits keep every error small; a longer wait is sent as
    /// 65535 s and the next refusal names the rest.
    pub retry_after: Option<u16>,
}

impl ApiError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            field: None,
            code: None,
            detail: None,
            retry_after: None,
        }
    }

    /// 429: too many failed sign-ins; try again after `retry_after` seconds.
    pub fn too_many_requests(retry_after: u32) -> Self {
        let retry_after = u16::try_from(retry_after).unwrap_or(u16::MAX);
        Self {
            retry_after: Some(retry_after),
            ..Self::new(
                ErrorKind::TooManyRequests,
                "too many failed sign-in attempts; try again later",
            )
        }
    }

    /// 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadRequest, message)
    }

    /// 401 `unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(ErrorKind::Unauthorized, "unauthorized")
    }

    /// 403 with `message`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, message)
    }

    /// 404 with `message`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// 500; `cause` is logged here and never sent.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(ErrorKind::Internal, "internal server error")
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }
}

impl From<DomainError> for ApiError {
    fn from(err: DomainError) -> Self {
        match err {
            DomainError::NotFound(m) => Self::new(ErrorKind::NotFound, m),
            DomainError::Conflict(m) => Self::new(ErrorKind::Conflict, m),
            DomainError::Invalid { field, message } => Self {
                field,
                ..Self::new(ErrorKind::BadRequest, message)
            },
            DomainError::Unauthorized(m) => Self::new(ErrorKind::Unauthorized, m),
            DomainError::Forbidden(m) => Self::new(ErrorKind::Forbidden, m),
            DomainError::Precondition(m) => Self::new(ErrorKind::Precondition, m),
            // Harbor's words: its push middleware's for a push, its tag
            // controller's for a copy or a delete.
            DomainError::Immutable {
                repository,
                tag,
                change,
            } => Self::new(
                ErrorKind::Precondition,
                match change {
                    TagChange::Push => format!(
                        "Failed to process request due to '{repository}:{tag}' configured as immutable."
                    ),
                    TagChange::Update => {
                        format!("the tag {tag} configured as immutable, cannot be updated")
                    }
                    TagChange::Delete => {
                        format!("the tag {tag} configured as immutable, cannot be deleted")
                    }
                },
            ),
            // Harbor's words and status (403, DENIED on `/v2/`), which every
            // surface shows.
            DomainError::QuotaExceeded { adding, used, hard } => Self::new(
                ErrorKind::Forbidden,
                format!(
                    "Quota exceeded when processing the request of adding {adding} bytes of \
                     storage resource, which when updated to current usage of {used} bytes will \
                     exceed the configured upper limit of {hard} bytes of the project's storage \
                     quota"
                ),
            ),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Domain(domain) => domain.into(),
            StoreError::Blob(BlobError::DigestMismatch { expected }) => Self::new(
                ErrorKind::BadRequest,
                format!("the uploaded content does not match digest {expected}"),
            )
            .with_code(OciCode::DigestInvalid),
            StoreError::Blob(err @ BlobError::RangeMismatch { .. }) => {
                Self::new(ErrorKind::BadRequest, err.to_string())
                    .with_code(OciCode::BlobUploadInvalid)
            }
            StoreError::Blob(BlobError::Body(message)) => Self::new(
                ErrorKind::BadRequest,
                format!("the upload body could not be read: {message}"),
            )
            .with_code(OciCode::BlobUploadInvalid),
            other => Self::internal(other),
        }
    }
}

/// An [`ApiError`] rendered as Harbor does: `{"errors":[{"code","message"}]}`.
#[derive(Debug)]
pub struct HarborError(pub ApiError);

impl<E: Into<ApiError>> From<E> for HarborError {
    fn from(err: E) -> Self {
        Self(err.into())
    }
}

impl IntoResponse for HarborError {
    fn into_response(self) -> Response {
        let err = self.0;
        let code = match err.code {
            Some(WireCode::Harbor(code)) => code.as_str(),
            _ => err.kind.harbor_code(),
        };
        let body = json!({"errors": [{"code": code, "message": err.message}]});
        let mut response = (err.status(), format!("{body}\n")).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        with_retry_after(response, err.retry_after)
    }
}

/// Adds `Retry-After` (seconds) when the error names a wait.
fn with_retry_after(mut response: Response, retry_after: Option<u16>) -> Response {
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// The result of a Harbor handler.
pub type HarborResult<T> = Result<T, HarborError>;

/// How a generator-rest error is rendered beyond what its kind says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestCode {
    /// A bearer failure with no token: 401 `Unauthorized` text and a
    /// `Bearer realm="Users"` challenge.
    BearerMissing,
    /// A bearer failure with a wrong token: as [`RestCode::BearerMissing`],
    /// with `error="invalid_token"` in the challenge.
    BearerInvalid,
    /// The status' reason phrase in plain text (the master key sent in two
    /// places: `Bad Request`).
    Plain,
}

/// Harbor's codes beyond the one each kind has (`src/lib/errors/const.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HarborCode {
    /// `DENIED`: refused by policy (read-only mode).
    Denied,
    /// `VIOLATE_FOREIGN_KEY_CONSTRAINT`: another resource still refers to it.
    ViolateForeignKeyConstraint,
}

impl HarborCode {
    /// The code as Harbor writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Denied => "DENIED",
            Self::ViolateForeignKeyConstraint => "VIOLATE_FOREIGN_KEY_CONSTRAINT",
        }
    }
}

/// The code of the OCI distribution spec's error table an error carries on
/// `/v2/`, or one of distribution's two for an upstream failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OciCode {
    /// `BLOB_UNKNOWN`.
    BlobUnknown,
    /// `BLOB_UPLOAD_INVALID`.
    BlobUploadInvalid,
    /// `BLOB_UPLOAD_UNKNOWN`.
    BlobUploadUnknown,
    /// `DIGEST_INVALID`.
    DigestInvalid,
    /// `MANIFEST_BLOB_UNKNOWN`.
    ManifestBlobUnknown,
    /// `MANIFEST_INVALID`.
    ManifestInvalid,
    /// `MANIFEST_UNKNOWN`.
    ManifestUnknown,
    /// `NAME_INVALID`.
    NameInvalid,
    /// `NAME_UNKNOWN`.
    NameUnknown,
    /// `SIZE_INVALID`.
    SizeInvalid,
    /// `UNAUTHORIZED`.
    Unauthorized,
    /// `DENIED`.
    Denied,
    /// `UNSUPPORTED`.
    Unsupported,
    /// `TOOMANYREQUESTS`.
    TooManyRequests,
    /// distribution's `UNAVAILABLE` (503): a proxy's upstream did not answer.
    Unavailable,
    /// distribution's `UNKNOWN`: a proxy's upstream answered wrongly.
    Unknown,
}

impl OciCode {
    /// The codes of the spec's table ("The `code` field MUST be one of the
    /// following").
    pub const SPEC: [Self; 14] = [
        Self::BlobUnknown,
        Self::BlobUploadInvalid,
        Self::BlobUploadUnknown,
        Self::DigestInvalid,
        Self::ManifestBlobUnknown,
        Self::ManifestInvalid,
        Self::ManifestUnknown,
        Self::NameInvalid,
        Self::NameUnknown,
        Self::SizeInvalid,
        Self::Unauthorized,
        Self::Denied,
        Self::Unsupported,
        Self::TooManyRequests,
    ];

    /// The code as the spec writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BlobUnknown => "BLOB_UNKNOWN",
            Self::BlobUploadInvalid => "BLOB_UPLOAD_INVALID",
            Self::BlobUploadUnknown => "BLOB_UPLOAD_UNKNOWN",
            Self::DigestInvalid => "DIGEST_INVALID",
            Self::ManifestBlobUnknown => "MANIFEST_BLOB_UNKNOWN",
            Self::ManifestInvalid => "MANIFEST_INVALID",
            Self::ManifestUnknown => "MANIFEST_UNKNOWN",
            Self::NameInvalid => "NAME_INVALID",
            Self::NameUnknown => "NAME_UNKNOWN",
            Self::SizeInvalid => "SIZE_INVALID",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::Denied => "DENIED",
            Self::Unsupported => "UNSUPPORTED",
            Self::TooManyRequests => "TOOMANYREQUESTS",
            Self::Unavailable => "UNAVAILABLE",
            Self::Unknown => "UNKNOWN",
        }
    }

    /// Whether this is one of distribution's codes for an upstream failure
    /// rather than one of the spec's table.
    pub fn is_upstream(self) -> bool {
        matches!(self, Self::Unavailable | Self::Unknown)
    }
}

/// A code of one surface, carried by an [`ApiError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireCode {
    /// `/v2/`'s.
    Oci(OciCode),
    /// `/api/v2.0`'s.
    Harbor(HarborCode),
    /// The generator-rest API's rendering.
    Rest(RestCode),
}

impl From<OciCode> for WireCode {
    fn from(code: OciCode) -> Self {
        Self::Oci(code)
    }
}

impl From<HarborCode> for WireCode {
    fn from(code: HarborCode) -> Self {
        Self::Harbor(code)
    }
}

impl From<RestCode> for WireCode {
    fn from(code: RestCode) -> Self {
        Self::Rest(code)
    }
}

/// An [`ApiError`] rendered as a generator-rest project does (generator-rest.md §2):
/// `detail` as the JSON body when set (rich-param validation errors, 409 ...);
/// passport's text answers for the codes above; an empty body for 401 and 404;
/// `{"valid":false,"message"}` for the rest. Never an HTML page.
#[derive(Debug)]
pub struct RestError(pub ApiError);

impl<E: Into<ApiError>> From<E> for RestError {
    fn from(err: E) -> Self {
        Self(err.into())
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let retry_after = self.0.retry_after;
        with_retry_after(self.render(), retry_after)
    }
}

impl RestError {
    fn render(self) -> Response {
        let err = self.0;
        let status = err.status();
        let text = |body: &'static str| {
            let mut response = Response::new(axum::body::Body::from(body));
            *response.status_mut() = status;
            response
        };
        let json_body = |body: String| {
            let mut response = (status, body).into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json; charset=utf-8"),
            );
            response
        };
        if let Some(detail) = err.detail {
            return json_body(detail);
        }
        let rest = match err.code {
            Some(WireCode::Rest(code)) => Some(code),
            _ => None,
        };
        let challenge = match rest {
            Some(RestCode::BearerMissing) => Some("Bearer realm=\"Users\""),
            Some(RestCode::BearerInvalid) => {
                Some("Bearer realm=\"Users\", error=\"invalid_token\"")
            }
            _ => None,
        };
        if let Some(challenge) = challenge {
            let mut response = text("Unauthorized");
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
            return response;
        }
        match (err.kind, rest) {
            (_, Some(RestCode::Plain)) => text(status.canonical_reason().unwrap_or("Error")),
            (ErrorKind::Unauthorized | ErrorKind::NotFound, _) => text(""),
            (ErrorKind::Internal, _) => {
                json_body(RestMessage::new("internal server error").to_json())
            }
            _ => json_body(RestMessage::new(&err.message).to_json()),
        }
    }
}

/// generator-rest's `{"valid":false,"param"?,"message"}` body, keys in that order.
#[derive(Debug, serde::Serialize)]
pub struct RestMessage<'a> {
    valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    param: Option<&'a str>,
    message: &'a str,
}

impl<'a> RestMessage<'a> {
    /// `{"valid":false,"message"}`.
    pub fn new(message: &'a str) -> Self {
        Self {
            valid: false,
            param: None,
            message,
        }
    }

    /// `{"valid":false,"param","message"}`.
    pub fn about(param: &'a str, message: &'a str) -> Self {
        Self {
            param: Some(param),
            ..Self::new(message)
        }
    }

    /// The body as JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plain strings serialize")
    }
}

/// The result of a generator-rest handler.
pub type RestResult<T> = Result<T, RestError>;

impl ErrorKind {
    /// The OCI code of this kind when the error carries none, from the spec's
    /// table; `None` for the 5xx kinds, which the table has no code for.
    fn oci_code(self) -> Option<OciCode> {
        match self {
            Self::BadRequest
            | Self::PayloadTooLarge
            | Self::UnsupportedMediaType
            | Self::MethodNotAllowed => Some(OciCode::Unsupported),
            Self::Unauthorized => Some(OciCode::Unauthorized),
            Self::Forbidden | Self::Precondition | Self::Conflict => Some(OciCode::Denied),
            Self::NotFound => Some(OciCode::NameUnknown),
            Self::RangeNotSatisfiable => Some(OciCode::BlobUploadInvalid),
            Self::TooManyRequests => Some(OciCode::TooManyRequests),
            Self::Internal | Self::BadGateway | Self::Unavailable => None,
        }
    }
}

impl ApiError {
    /// The same error with a surface's own code.
    pub fn with_code(mut self, code: impl Into<WireCode>) -> Self {
        self.code = Some(code.into());
        self
    }
}

/// An [`ApiError`] rendered as the OCI distribution spec does:
/// `{"errors":[{"code","message"}]}` with a code of [`OciCode::SPEC`]. A 5xx
/// answer carries an empty `errors` list: the spec's table has no code for a
/// server failure, and its cause is logged, never sent; only a proxy's
/// upstream failure, which is the client's to know, is told
/// ([`OciCode::is_upstream`]).
#[derive(Debug)]
pub struct OciError(pub ApiError);

impl<E: Into<ApiError>> From<E> for OciError {
    fn from(err: E) -> Self {
        Self(err.into())
    }
}

impl IntoResponse for OciError {
    fn into_response(self) -> Response {
        let err = self.0;
        let own = match err.code {
            Some(WireCode::Oci(code)) => Some(code),
            _ => None,
        };
        let errors = match err.kind.oci_code() {
            // A proxy's upstream failure is told, with distribution's codes for it.
            None => match own.filter(|code| code.is_upstream()) {
                Some(code) => json!([{"code": code.as_str(), "message": err.message}]),
                None => json!([]),
            },
            Some(default) => {
                let code = own.filter(|code| !code.is_upstream()).unwrap_or(default);
                json!([{"code": code.as_str(), "message": err.message}])
            }
        };
        let body = json!({ "errors": errors });
        let mut response = (err.status(), body.to_string()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        with_retry_after(response, err.retry_after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [ErrorKind; 14] = [
        ErrorKind::BadRequest,
        ErrorKind::Unauthorized,
        ErrorKind::Forbidden,
        ErrorKind::NotFound,
        ErrorKind::MethodNotAllowed,
        ErrorKind::Conflict,
        ErrorKind::Precondition,
        ErrorKind::UnsupportedMediaType,
        ErrorKind::PayloadTooLarge,
        ErrorKind::RangeNotSatisfiable,
        ErrorKind::Internal,
        ErrorKind::BadGateway,
        ErrorKind::Unavailable,
        ErrorKind::TooManyRequests,
    ];

    async fn oci_body(err: ApiError) -> serde_json::Value {
        let response = OciError(err).into_response();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("body");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[test]
    fn every_kind_has_a_spec_code_or_is_a_server_error() {
        for kind in KINDS {
            match kind.oci_code() {
                Some(code) => assert!(OciCode::SPEC.contains(&code), "{kind:?}: {code:?}"),
                None => assert!(kind.status().is_server_error(), "{kind:?}"),
            }
        }
    }

    #[tokio::test]
    async fn oci_server_errors_carry_no_code_and_no_text() {
        for kind in [
            ErrorKind::Internal,
            ErrorKind::BadGateway,
            ErrorKind::Unavailable,
        ] {
            let body = oci_body(ApiError::new(
                kind,
                "LDAP directory: ldap://10.0.0.1 refused",
            ))
            .await;
            assert_eq!(body, json!({"errors": []}), "{kind:?}");
        }
        let body =
            oci_body(ApiError::not_found("no such thing").with_code(OciCode::ManifestUnknown))
                .await;
        assert_eq!(
            body,
            json!({"errors": [{"code": "MANIFEST_UNKNOWN", "message": "no such thing"}]})
        );
    }
}
