//! The one error type of the HTTP edge and its renderers.
//!
//! Every failure becomes an [`ApiError`]: a kind (which fixes the status, in one
//! `match`), a message and optional detail. Each surface renders it in its own
//! wire format: [`HarborError`] for `/api/v2.0`; the registry and generator-rest
//! surfaces add theirs beside it. 5xx bodies never carry internal text: the
//! cause is logged, inside the request's span, with its request id.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::DomainError;
use berth_store::StoreError;
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
            Self::Internal => "UNKNOWN",
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
    /// A surface-specific code that overrides the kind's default (Harbor `DENIED` ...).
    pub code: Option<&'static str>,
}

impl ApiError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            field: None,
            code: None,
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
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Domain(domain) => domain.into(),
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
        let code = err.code.unwrap_or(err.kind.harbor_code());
        let body = json!({"errors": [{"code": code, "message": err.message}]});
        let mut response = (err.status(), format!("{body}\n")).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        response
    }
}

/// The result of a Harbor handler.
pub type HarborResult<T> = Result<T, HarborError>;

impl ErrorKind {
    /// The OCI distribution code of this kind, when the error carries none
    /// (`registry/api/errcode` and the distribution spec's code table).
    fn oci_code(self) -> &'static str {
        match self {
            Self::BadRequest | Self::PayloadTooLarge | Self::UnsupportedMediaType => "UNSUPPORTED",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::Forbidden | Self::Precondition | Self::Conflict => "DENIED",
            Self::NotFound => "NAME_UNKNOWN",
            Self::MethodNotAllowed => "UNSUPPORTED",
            Self::RangeNotSatisfiable => "BLOB_UPLOAD_INVALID",
            Self::Internal => "UNKNOWN",
        }
    }
}

impl ApiError {
    /// The same error with a surface-specific wire code.
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }
}

/// An [`ApiError`] rendered as the OCI distribution spec does:
/// `{"errors":[{"code","message"}]}` with an OCI code (`BLOB_UNKNOWN` ...).
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
        let code = err.code.unwrap_or(err.kind.oci_code());
        let body = json!({"errors": [{"code": code, "message": err.message}]});
        let mut response = (err.status(), body.to_string()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        response
    }
}
