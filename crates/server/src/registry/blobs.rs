//! Blobs and blob uploads: `GET/HEAD/DELETE /v2/<name>/blobs/<digest>` and
//! `POST /v2/<name>/blobs/uploads/`, `PATCH/PUT/GET/DELETE .../uploads/<id>`.

use axum::body::Body;
use axum::http::header::{
    ACCEPT_RANGES, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, LOCATION,
    RANGE,
};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use berth_domain::oci::{
    Algorithm, ByteRange, Digest, DigestError, parse_content_range, parse_range,
};
use berth_store::content::UploadStep;
use berth_store::repo::gc::RENEW_THROTTLE_SECS;
use berth_store::repo::registry::Upload;

use super::{Caller, Ctx, RegistryError, RegistryResult, RepoAction, oci};
use crate::error::{ApiError, ErrorKind, OciCode, OciError};

/// `Docker-Content-Digest`.
pub const DOCKER_CONTENT_DIGEST: HeaderName = HeaderName::from_static("docker-content-digest");
/// `Docker-Upload-UUID`.
const DOCKER_UPLOAD_UUID: HeaderName = HeaderName::from_static("docker-upload-uuid");

/// Parses a digest from a path or query; `DIGEST_INVALID` otherwise.
pub fn parse_digest(text: &str) -> RegistryResult<Digest> {
    Digest::parse(text).map_err(|err| {
        let message = match err {
            DigestError::Invalid => format!("invalid digest {text}"),
            DigestError::Unsupported => format!("unsupported digest algorithm in {text}"),
        };
        oci(ErrorKind::BadRequest, OciCode::DigestInvalid, &message).into()
    })
}

fn blob_unknown(digest: &Digest) -> RegistryError {
    oci(
        ErrorKind::NotFound,
        OciCode::BlobUnknown,
        &format!("blob unknown to registry: {digest}"),
    )
    .into()
}

fn upload_unknown() -> RegistryError {
    oci(
        ErrorKind::NotFound,
        OciCode::BlobUploadUnknown,
        "blob upload unknown to registry",
    )
    .into()
}

fn header(value: impl AsRef<str>) -> HeaderValue {
    HeaderValue::from_str(value.as_ref()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// An empty answer with `status` and `headers` (and `Content-Length: 0`).
pub fn empty(status: StatusCode, headers: Vec<(HeaderName, HeaderValue)>) -> Response {
    let mut response = (status, Body::empty()).into_response();
    let map = response.headers_mut();
    map.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
    for (name, value) in headers {
        map.insert(name, value);
    }
    response
}

fn blob_created(name: &str, digest: &Digest) -> Response {
    empty(
        StatusCode::CREATED,
        vec![
            (LOCATION, header(format!("/v2/{name}/blobs/{digest}"))),
            (DOCKER_CONTENT_DIGEST, header(digest.as_str())),
        ],
    )
}

fn upload_headers(name: &str, id: &str, received: i64) -> Vec<(HeaderName, HeaderValue)> {
    vec![
        (LOCATION, header(format!("/v2/{name}/blobs/uploads/{id}"))),
        (RANGE, header(format!("0-{}", (received - 1).max(0)))),
        (DOCKER_UPLOAD_UUID, header(id)),
    ]
}

/// 416 for a chunk that does not continue the upload, with where it stands.
fn out_of_order(name: &str, id: &str, received: i64) -> Response {
    let mut response = OciError(oci(
        ErrorKind::RangeNotSatisfiable,
        OciCode::BlobUploadInvalid,
        &format!("the chunk must start at byte {received}"),
    ))
    .into_response();
    for (k, v) in upload_headers(name, id, received) {
        response.headers_mut().insert(k, v);
    }
    response
}

/// `GET`/`HEAD /v2/<name>/blobs/<digest>`, with single `Range` requests.
pub async fn get_blob(
    ctx: Ctx,
    name: &str,
    digest: &str,
    with_body: bool,
) -> RegistryResult<Response> {
    let project = ctx.authorize(name, RepoAction::Pull).await?;
    let digest = parse_digest(digest)?;
    let registry = ctx.state.store.registry();
    let blob = if !with_body && may_push(&ctx, name).await {
        // A pusher checking whether to upload: keep the blob through the grace period.
        registry
            .renew_and_find(project.id, name, digest.as_str(), RENEW_THROTTLE_SECS)
            .await?
    } else {
        registry.repository_blob(name, digest.as_str()).await?
    };
    let Some(blob) = blob else {
        return match project.registry_id {
            Some(registry_id) => {
                super::proxy::get_blob(&ctx, &project, registry_id, name, &digest, with_body).await
            }
            None => Err(blob_unknown(&digest)),
        };
    };
    let size = u64::try_from(blob.size).unwrap_or(0);
    let range = ctx
        .header("range")
        .map_or(ByteRange::Ignored, |r| parse_range(r, size));
    let (status, start, len) = match range {
        ByteRange::Satisfiable(start, end) => (StatusCode::PARTIAL_CONTENT, start, end - start + 1),
        ByteRange::Unsatisfiable => {
            let mut response = OciError(oci(
                ErrorKind::RangeNotSatisfiable,
                OciCode::BlobUnknown,
                "the requested range is outside the blob",
            ))
            .into_response();
            response
                .headers_mut()
                .insert(CONTENT_RANGE, header(format!("bytes */{size}")));
            return Ok(response);
        }
        ByteRange::Ignored => (StatusCode::OK, 0, size),
    };
    let mut headers = vec![
        (
            CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        ),
        (DOCKER_CONTENT_DIGEST, header(digest.as_str())),
        (ETAG, header(format!("\"{digest}\""))),
        (ACCEPT_RANGES, HeaderValue::from_static("bytes")),
        (CACHE_CONTROL, HeaderValue::from_static("max-age=31536000")),
        (CONTENT_LENGTH, header(len.to_string())),
    ];
    if status == StatusCode::PARTIAL_CONTENT {
        headers.push((
            CONTENT_RANGE,
            header(format!("bytes {start}-{}/{size}", start + len - 1)),
        ));
    }
    let blobs = &ctx.state.registry.blobs;
    if with_body
        && ctx.state.registry.redirect_downloads
        && let Some(url) = blobs.direct_url(&digest).await
        && registry.manifest_body(blob.id).await?.is_none()
    {
        // The client fetches the bytes (and any range) from the bucket itself.
        let mut response = StatusCode::TEMPORARY_REDIRECT.into_response();
        response.headers_mut().insert(LOCATION, header(url));
        response
            .headers_mut()
            .insert(DOCKER_CONTENT_DIGEST, header(digest.as_str()));
        return Ok(response);
    }
    let body = if !with_body {
        Body::empty()
    } else {
        match blobs.read(&digest, start, len).await {
            Ok(Some(stream)) => Body::from_stream(stream),
            Ok(None) => {
                // A manifest is a blob too, kept in the database rather than in a file.
                let body = registry
                    .manifest_body(blob.id)
                    .await?
                    .ok_or_else(|| blob_unknown(&digest))?;
                let piece = usize::try_from(start)
                    .ok()
                    .zip(usize::try_from(start + len).ok())
                    .and_then(|(from, to)| body.get(from..to).map(<[u8]>::to_vec))
                    .ok_or_else(|| blob_unknown(&digest))?;
                Body::from(piece)
            }
            Err(err) => return Err(ApiError::internal(err).into()),
        }
    };
    let mut response = (status, body).into_response();
    for (k, v) in headers {
        response.headers_mut().insert(k, v);
    }
    Ok(response)
}

/// Whether the caller may push to `name` (no extra query for token callers).
pub(super) async fn may_push(ctx: &Ctx, name: &str) -> bool {
    match &ctx.caller {
        Caller::Anonymous => false,
        Caller::Token(claims) => claims.allows("repository", name, "push"),
        Caller::User(_) | Caller::Robot(_) => ctx.authorize(name, RepoAction::Push).await.is_ok(),
    }
}

/// `DELETE /v2/<name>/blobs/<digest>`: drops the project's link to the blob
/// (the bytes go with the next garbage collection). A blob used by a manifest
/// of the project stays.
pub async fn delete_blob(ctx: Ctx, name: &str, digest: &str) -> RegistryResult<Response> {
    let project = ctx.authorize(name, RepoAction::Delete).await?;
    let digest = parse_digest(digest)?;
    match ctx
        .state
        .store
        .registry()
        .unlink_blob(project.id, name, digest.as_str())
        .await?
    {
        None => Err(blob_unknown(&digest)),
        Some(false) => Err(oci(
            ErrorKind::Precondition,
            OciCode::Denied,
            &format!("blob {digest} is used by a manifest of the repository"),
        )
        .into()),
        Some(true) => Ok(empty(StatusCode::ACCEPTED, Vec::new())),
    }
}

/// `POST /v2/<name>/blobs/uploads/`: a cross-repository mount (`mount`, `from`),
/// a monolithic upload (`digest`), or a new upload session (hashing with
/// `digest-algorithm`, default `sha256`).
///
/// A mount needs pull on `from` as well as push on `name`, as in distribution:
/// a 401 challenge for it names both scopes, and a token that never asked for
/// `from` is challenged for it rather than answered with an upload. Only a
/// caller who may not read `from`, or a blob `from` lacks, gets the upload
/// session (202) instead of the mount (201).
pub async fn post_blob_upload(ctx: Ctx, body: Body, name: &str) -> RegistryResult<Response> {
    let mount = ctx.query("mount").zip(
        ctx.query("from")
            .filter(|from| berth_domain::oci::is_valid_name(from) && from.contains('/')),
    );
    let project = match ctx.authorize(name, RepoAction::Push).await {
        Ok(project) => project,
        Err(err) => {
            return Err(match &mount {
                Some((_, from)) => err.and_scope(&RepoAction::Pull.scope(from)),
                None => err,
            });
        }
    };
    super::refuse_proxy_push(&project)?;
    let state = &ctx.state;
    let algorithm = match ctx.query("digest-algorithm") {
        None => Algorithm::Sha256,
        Some(text) => Algorithm::from_name(&text).ok_or_else(|| {
            RegistryError::from(oci(
                ErrorKind::BadRequest,
                OciCode::DigestInvalid,
                &format!("unsupported digest algorithm {text}"),
            ))
        })?,
    };
    if let Some((mount, from)) = mount {
        let digest = parse_digest(&mount)?;
        if may_mount_from(&ctx, name, &from).await?
            && state
                .store
                .registry()
                .mount_blob(&from, project.id, name, digest.as_str())
                .await?
                .is_some()
        {
            return Ok(blob_created(name, &digest));
        }
    }
    if let Some(digest) = ctx.query("digest") {
        let digest = parse_digest(&digest)?;
        state
            .store
            .content(&state.registry.blobs)
            .put(project.id, name, &digest, body.into_data_stream())
            .await?;
        return Ok(blob_created(name, &digest));
    }
    let id = uuid::Uuid::new_v4().to_string();
    state
        .store
        .registry()
        .create_upload(&id, project.id, name, algorithm)
        .await?;
    Ok(empty(StatusCode::ACCEPTED, upload_headers(name, &id, 0)))
}

/// Whether the caller of a mount into `name` may read `from`. A token that
/// does not carry pull on `from` and never asked for it is challenged for
/// both scopes (a client given that challenge asks for them); one that asked
/// and was refused, like any other caller who may not pull, gets `false`.
async fn may_mount_from(ctx: &Ctx, name: &str, from: &str) -> RegistryResult<bool> {
    if let Caller::Token(claims) = &ctx.caller
        && !claims.allows("repository", from, "pull")
    {
        let asked = claims
            .access
            .iter()
            .any(|a| a.kind == "repository" && a.name == from);
        if asked {
            return Ok(false);
        }
        return Err(RepoAction::Pull
            .refused(from)
            .with_scope(RepoAction::Push.scope(name))
            .and_scope(&RepoAction::Pull.scope(from)));
    }
    Ok(ctx.authorize(from, RepoAction::Pull).await.is_ok())
}

async fn load_upload(ctx: &Ctx, name: &str, id: &str) -> RegistryResult<Upload> {
    if uuid::Uuid::parse_str(id).is_err() {
        return Err(upload_unknown());
    }
    match ctx.state.store.registry().upload(id).await? {
        Some(upload) if upload.repository == name => Ok(upload),
        _ => Err(upload_unknown()),
    }
}

/// Checks the request's `Content-Range`, if any, against where `upload`
/// stands and against its `Content-Length`; the length the chunk must have,
/// or the answer refusing it (416 elsewhere, 400 a contradiction).
fn declared_length(ctx: &Ctx, name: &str, upload: &Upload) -> Result<Option<u64>, Box<Response>> {
    let Some(range) = ctx.header("content-range") else {
        return Ok(None);
    };
    let range = parse_content_range(range)
        .filter(|(start, _)| i64::try_from(*start) == Ok(upload.bytes_received));
    let Some((start, end)) = range else {
        return Err(Box::new(out_of_order(
            name,
            &upload.id,
            upload.bytes_received,
        )));
    };
    let declared = end - start + 1;
    match ctx.header("content-length").map(str::parse::<u64>) {
        Some(Ok(length)) if length != declared => Err(Box::new(
            OciError(oci(
                ErrorKind::BadRequest,
                OciCode::BlobUploadInvalid,
                &format!("the Content-Range names {declared} bytes, the Content-Length {length}"),
            ))
            .into_response(),
        )),
        _ => Ok(Some(declared)),
    }
}

/// `PATCH /v2/<name>/blobs/uploads/<id>`: appends a chunk. A `Content-Range`
/// that does not start where the upload stands, or a chunk racing another
/// for the same session, is refused with 416 and changes nothing.
pub async fn patch_blob_upload(
    ctx: Ctx,
    body: Body,
    name: &str,
    id: &str,
) -> RegistryResult<Response> {
    ctx.authorize(name, RepoAction::Push).await?;
    let upload = load_upload(&ctx, name, id).await?;
    let declared = match declared_length(&ctx, name, &upload) {
        Ok(declared) => declared,
        Err(refused) => return Ok(*refused),
    };
    let state = &ctx.state;
    match state
        .store
        .content(&state.registry.blobs)
        .append(&upload, body.into_data_stream(), declared)
        .await?
    {
        UploadStep::Done(received) => Ok(empty(
            StatusCode::ACCEPTED,
            upload_headers(name, id, received),
        )),
        UploadStep::Conflict(received) => Ok(out_of_order(name, id, received)),
        UploadStep::Gone => Err(upload_unknown()),
    }
}

/// `PUT /v2/<name>/blobs/uploads/<id>?digest=`: appends a last chunk if one is
/// sent, checks the digest against the bytes and commits the blob. A
/// mismatch ends the session and stores nothing.
pub async fn put_blob_upload(
    ctx: Ctx,
    body: Body,
    name: &str,
    id: &str,
) -> RegistryResult<Response> {
    ctx.authorize(name, RepoAction::Push).await?;
    let digest = ctx.query("digest").ok_or_else(|| {
        RegistryError::from(oci(
            ErrorKind::BadRequest,
            OciCode::DigestInvalid,
            "the digest query parameter is required",
        ))
    })?;
    let digest = parse_digest(&digest)?;
    let upload = load_upload(&ctx, name, id).await?;
    let declared = match declared_length(&ctx, name, &upload) {
        Ok(declared) => declared,
        Err(refused) => return Ok(*refused),
    };
    let last =
        (ctx.header("content-length") != Some("0")).then(|| (body.into_data_stream(), declared));
    let state = &ctx.state;
    match state
        .store
        .content(&state.registry.blobs)
        .commit(&upload, last, &digest)
        .await?
    {
        UploadStep::Done(_) => Ok(blob_created(name, &digest)),
        UploadStep::Conflict(received) => Ok(out_of_order(name, id, received)),
        UploadStep::Gone => Err(upload_unknown()),
    }
}

/// `GET /v2/<name>/blobs/uploads/<id>`: where the upload stands (204 + `Range`).
pub async fn get_blob_upload(ctx: Ctx, name: &str, id: &str) -> RegistryResult<Response> {
    ctx.authorize(name, RepoAction::Push).await?;
    let upload = load_upload(&ctx, name, id).await?;
    Ok(empty(
        StatusCode::NO_CONTENT,
        upload_headers(name, id, upload.bytes_received),
    ))
}

/// `DELETE /v2/<name>/blobs/uploads/<id>`: cancels the upload.
pub async fn delete_blob_upload(ctx: Ctx, name: &str, id: &str) -> RegistryResult<Response> {
    ctx.authorize(name, RepoAction::Push).await?;
    load_upload(&ctx, name, id).await?;
    let state = &ctx.state;
    if !state
        .store
        .content(&state.registry.blobs)
        .cancel(id)
        .await?
    {
        return Err(upload_unknown());
    }
    Ok(empty(StatusCode::NO_CONTENT, Vec::new()))
}
