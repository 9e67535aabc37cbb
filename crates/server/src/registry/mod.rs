//! The OCI distribution API at `/v2/` and the token service at `/service/token`.
//!
//! Repository names contain `/`, so one catch-all route per prefix takes every
//! `/v2/...` request and the path is parsed from the right
//! ([`berth_domain::oci::parse_v2_path`]). Errors use the OCI body and codes;
//! every 401 carries the `WWW-Authenticate` challenge docker clients follow.

mod auth;
mod blobs;
mod manifests;
mod proxy;

pub(crate) use manifests::{MAX_MANIFEST_BYTES, manifest_digest};
pub(crate) use proxy::throttled;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::WWW_AUTHENTICATE;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use berth_domain::oci::{V2Path, is_valid_name, parse_v2_path};
use percent_encoding::percent_decode_str;
use tower_http::catch_panic::CatchPanicLayer;

pub use auth::{Caller, RepoAction};

use crate::error::{ApiError, ErrorKind, OciCode, OciError};
use crate::state::AppState;

const API_VERSION: HeaderName = HeaderName::from_static("docker-distribution-api-version");

/// The `/v2` and `/service/token` routes.
pub fn router(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/v2", get(get_base).fallback(unsupported_method))
        .route(crate::operations::V2_CATCH_ALL, any(dispatch))
        .route(
            "/service/token",
            get(auth::get_token).layer(middleware::map_response(crate::headers::no_store)),
        )
        .layer(CatchPanicLayer::custom(|_| {
            OciError(ApiError::internal("registry handler panicked")).into_response()
        }))
        .layer(middleware::from_fn_with_state(state, registry_headers))
}

/// An error of the distribution surface: an [`ApiError`] with an OCI code, and
/// for 401s the scope the client should request.
#[derive(Debug)]
pub struct RegistryError {
    error: ApiError,
    scope: Option<String>,
}

impl RegistryError {
    /// Names the scope a token must grant (for the 401 challenge).
    pub fn with_scope(mut self, scope: String) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Adds `scope` to the scope a 401 already asks for (distribution's
    /// challenge names every scope of a request in one space-separated list);
    /// an error asking for none stays so.
    fn and_scope(mut self, scope: &str) -> Self {
        if let Some(asked) = &mut self.scope {
            asked.push(' ');
            asked.push_str(scope);
        }
        self
    }
}

impl<E: Into<ApiError>> From<E> for RegistryError {
    fn from(err: E) -> Self {
        Self {
            error: err.into(),
            scope: None,
        }
    }
}

/// The scope a 401 asks for, passed from the error to the challenge layer.
#[derive(Debug, Clone)]
struct ChallengeScope(String);

impl IntoResponse for RegistryError {
    fn into_response(self) -> Response {
        let mut response = OciError(self.error).into_response();
        if let Some(scope) = self.scope {
            response.extensions_mut().insert(ChallengeScope(scope));
        }
        response
    }
}

/// An [`ApiError`] of `kind` with OCI `code`.
pub fn oci(kind: ErrorKind, code: OciCode, message: &str) -> ApiError {
    ApiError::new(kind, message).with_code(code)
}

/// The result of a registry handler.
pub type RegistryResult<T> = Result<T, RegistryError>;

/// Refuses a push into a proxy-cache project (its content comes from its
/// upstream registry only), with Harbor's 403 `DENIED`.
pub(crate) fn refuse_proxy_push(project: &berth_domain::model::Project) -> Result<(), ApiError> {
    match project.registry_id {
        Some(_) => Err(oci(
            ErrorKind::Forbidden,
            OciCode::Denied,
            &format!("can not push artifact to a proxy project: {}", project.name),
        )),
        None => Ok(()),
    }
}

/// Adds `Docker-Distribution-API-Version` to every answer and the Bearer
/// challenge (`realm` = this server's token service) to every 401.
async fn registry_headers(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(API_VERSION, HeaderValue::from_static("registry/2.0"));
    if response.status() == StatusCode::UNAUTHORIZED {
        let mut challenge = format!(
            "Bearer realm=\"{}/service/token\",service=\"{}\"",
            state.external_url,
            berth_auth::registry_token::SERVICE
        );
        if let Some(ChallengeScope(scope)) = response.extensions().get::<ChallengeScope>() {
            challenge.push_str(&format!(",scope=\"{scope}\""));
        }
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
    }
    response
}

/// `GET /v2/`: 200 for authenticated callers, else the challenge.
async fn get_base(State(state): State<AppState>, request: Request) -> RegistryResult<Response> {
    let client = state.signin.client(request.extensions(), request.headers());
    let caller = Caller::from_headers(&state, client, request.headers()).await?;
    if !caller.is_authenticated() {
        return Err(auth::unauthorized("authentication required"));
    }
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        "{}",
    )
        .into_response())
}

/// Routes `/v2/<name>/...` by the path's right end.
async fn dispatch(State(state): State<AppState>, request: Request) -> Response {
    match route(state, request).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

async fn route(state: AppState, request: Request) -> RegistryResult<Response> {
    let raw = request
        .uri()
        .path()
        .strip_prefix("/v2/")
        .unwrap_or_default()
        .to_string();
    let path = percent_decode_str(&raw).decode_utf8_lossy().into_owned();
    let Some(parsed) = parse_v2_path(&path) else {
        return Err(oci(
            ErrorKind::NotFound,
            OciCode::Unsupported,
            "no such endpoint",
        )
        .into());
    };
    let name = match &parsed {
        V2Path::Catalog => None,
        V2Path::TagsList { name }
        | V2Path::Manifest { name, .. }
        | V2Path::Blob { name, .. }
        | V2Path::Uploads { name }
        | V2Path::Upload { name, .. }
        | V2Path::Referrers { name, .. } => Some(*name),
    };
    if let Some(name) = name
        && (!is_valid_name(name) || !name.contains('/'))
    {
        return Err(oci(
            ErrorKind::BadRequest,
            OciCode::NameInvalid,
            &format!(
                "invalid repository name {name}: it must be <project>/<repository> in lower case"
            ),
        )
        .into());
    }
    let client = state.signin.client(request.extensions(), request.headers());
    let caller = Caller::from_headers(&state, client, request.headers()).await?;
    let method = request.method().clone();
    let (parts, body) = request.into_parts();
    let ctx = Ctx {
        state,
        caller,
        parts,
    };
    match (parsed, method) {
        (V2Path::Catalog, Method::GET) => manifests::get_catalog(ctx).await,
        (V2Path::TagsList { name }, Method::GET) => manifests::get_tags_list(ctx, name).await,
        (V2Path::Manifest { name, reference }, Method::GET) => {
            manifests::get_manifest(ctx, name, reference, true).await
        }
        (V2Path::Manifest { name, reference }, Method::HEAD) => {
            manifests::get_manifest(ctx, name, reference, false).await
        }
        (V2Path::Manifest { name, reference }, Method::PUT) => {
            manifests::put_manifest(ctx, body, name, reference).await
        }
        (V2Path::Manifest { name, reference }, Method::DELETE) => {
            manifests::delete_manifest(ctx, name, reference).await
        }
        (V2Path::Referrers { name, digest }, Method::GET) => {
            manifests::get_referrers(ctx, name, digest).await
        }
        (V2Path::Blob { name, digest }, Method::GET) => {
            blobs::get_blob(ctx, name, digest, true).await
        }
        (V2Path::Blob { name, digest }, Method::HEAD) => {
            blobs::get_blob(ctx, name, digest, false).await
        }
        (V2Path::Blob { name, digest }, Method::DELETE) => {
            blobs::delete_blob(ctx, name, digest).await
        }
        (V2Path::Uploads { name }, Method::POST) => blobs::post_blob_upload(ctx, body, name).await,
        (V2Path::Upload { name, id }, Method::PATCH) => {
            blobs::patch_blob_upload(ctx, body, name, id).await
        }
        (V2Path::Upload { name, id }, Method::PUT) => {
            blobs::put_blob_upload(ctx, body, name, id).await
        }
        (V2Path::Upload { name, id }, Method::GET) => blobs::get_blob_upload(ctx, name, id).await,
        (V2Path::Upload { name, id }, Method::DELETE) => {
            blobs::delete_blob_upload(ctx, name, id).await
        }
        (_, method) => Err(method_not_allowed(&method)),
    }
}

/// 405 `UNSUPPORTED` for a method a `/v2/` path does not have.
fn method_not_allowed(method: &Method) -> RegistryError {
    oci(
        ErrorKind::MethodNotAllowed,
        OciCode::Unsupported,
        &format!("method {method} is not supported here"),
    )
    .into()
}

/// Any method but `GET`/`HEAD` on `/v2/`.
async fn unsupported_method(method: Method) -> RegistryError {
    method_not_allowed(&method)
}

/// What every `/v2/` operation gets (the body, where one is read, comes apart).
struct Ctx {
    state: AppState,
    caller: Caller,
    parts: axum::http::request::Parts,
}

impl Ctx {
    /// Authorizes `action` on `name` and returns the project.
    async fn authorize(
        &self,
        name: &str,
        action: RepoAction,
    ) -> RegistryResult<berth_domain::model::Project> {
        auth::authorize(&self.state, &self.caller, name, action).await
    }

    /// [`Ctx::authorize`] with the project already looked up (`None`: no such project).
    async fn authorize_found(
        &self,
        name: &str,
        action: RepoAction,
        project: Option<berth_domain::model::Project>,
    ) -> RegistryResult<berth_domain::model::Project> {
        auth::authorize_found(&self.state, &self.caller, name, action, project).await
    }

    /// A query parameter, decoded.
    fn query(&self, key: &str) -> Option<String> {
        let query = self.parts.uri.query()?;
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).ok()?;
        pairs.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A request header as text.
    fn header(&self, name: &str) -> Option<&str> {
        self.parts.headers.get(name).and_then(|v| v.to_str().ok())
    }
}
