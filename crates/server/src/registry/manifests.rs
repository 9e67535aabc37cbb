//! Manifests, tags, the catalog and the referrers API.

use axum::body::Body;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, ETAG, LINK, LOCATION};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use berth_domain::model::Project;
use berth_domain::oci::reference::project_of;
use berth_domain::oci::{Digest, Manifest, Reference, media_type};
use berth_store::repo::manifests::{DeleteManifest, Pull, PutManifest, Signatures, StoredManifest};
use bytes::Bytes;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256, Sha512};

use super::blobs::{DOCKER_CONTENT_DIGEST, empty, may_push, parse_digest};
use super::{Ctx, RegistryError, RegistryResult, RepoAction, oci};
use crate::error::{ErrorKind, OciCode};
use crate::service::content::{self, manifest_record};

/// The largest manifest accepted (distribution's limit).
pub(crate) const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// `OCI-Subject`.
const OCI_SUBJECT: HeaderName = HeaderName::from_static("oci-subject");
/// `OCI-Filters-Applied`.
const OCI_FILTERS_APPLIED: HeaderName = HeaderName::from_static("oci-filters-applied");

fn header(value: impl AsRef<str>) -> HeaderValue {
    HeaderValue::from_str(value.as_ref()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The reference of a manifest `PUT` or `DELETE`: a malformed one is 400,
/// `DIGEST_INVALID` for a digest, `MANIFEST_INVALID` for a tag.
fn parse_reference(reference: &str) -> RegistryResult<Reference> {
    Reference::parse(reference).map_err(|_| {
        if reference.contains(':') {
            oci(
                ErrorKind::BadRequest,
                OciCode::DigestInvalid,
                &format!("invalid digest {reference}"),
            )
        } else {
            oci(
                ErrorKind::BadRequest,
                OciCode::ManifestInvalid,
                &format!(
                    "invalid tag {reference}: it must match [a-zA-Z0-9_][a-zA-Z0-9._-]{{0,127}}"
                ),
            )
        }
        .into()
    })
}

pub(super) fn manifest_unknown(name: &str, reference: &str) -> RegistryError {
    oci(
        ErrorKind::NotFound,
        OciCode::ManifestUnknown,
        &format!("manifest unknown: {name}:{reference}"),
    )
    .into()
}

fn name_unknown(name: &str) -> RegistryError {
    oci(
        ErrorKind::NotFound,
        OciCode::NameUnknown,
        &format!("repository name not known to registry: {name}"),
    )
    .into()
}

/// Not found: `NAME_UNKNOWN` when the repository does not exist, else `MANIFEST_UNKNOWN`.
async fn missing_manifest(ctx: &Ctx, name: &str, reference: &str) -> RegistryError {
    match ctx.state.store.registry().repository_id(name).await {
        Ok(None) => name_unknown(name),
        Ok(Some(_)) => manifest_unknown(name, reference),
        Err(err) => err.into(),
    }
}

/// `GET`/`HEAD /v2/<name>/manifests/<reference>`: the exact bytes pushed.
/// The project, the repository and the manifest come from one query.
pub async fn get_manifest(
    ctx: Ctx,
    name: &str,
    reference: &str,
    with_body: bool,
) -> RegistryResult<Response> {
    let Ok(parsed) = Reference::parse(reference) else {
        // No manifest has a malformed reference: 404, as for any reference not
        // found. Callers who may not pull learn nothing, not even that.
        ctx.authorize(name, RepoAction::Pull).await?;
        return Err(missing_manifest(&ctx, name, reference).await);
    };
    let lookup = ctx
        .state
        .registry
        .lookups
        .lookup(
            &ctx.state.store,
            project_of(name).unwrap_or(name),
            name,
            &parsed,
        )
        .await?;
    let (project, repository_id, manifest, required) = match lookup {
        Some(found) => (
            Some(found.project),
            found.repository_id,
            found.manifest,
            found.required,
        ),
        None => (None, None, None, Signatures::default()),
    };
    let project = ctx.authorize_found(name, RepoAction::Pull, project).await?;
    if let Some(registry_id) = project.registry_id {
        let stored = manifest.map(|m| (m, required));
        let pull = super::proxy::ManifestPull {
            project: &project,
            registry_id,
            name,
            reference: &parsed,
            with_body,
        };
        return super::proxy::get_manifest(&ctx, pull, stored).await;
    }
    let Some(manifest) = manifest else {
        return Err(match repository_id {
            None => name_unknown(name),
            Some(_) => manifest_unknown(name, reference),
        });
    };
    serve_stored(
        &ctx, &project, name, reference, manifest, required, with_body,
    )
    .await
}

/// Answers a manifest GET or HEAD of `name` by `reference` with `manifest`, as
/// stored: Harbor's signed-only pulls checked (the signatures `required`),
/// the pull noted and audited.
pub(super) async fn serve_stored(
    ctx: &Ctx,
    project: &Project,
    name: &str,
    reference: &str,
    manifest: StoredManifest,
    required: Signatures,
    with_body: bool,
) -> RegistryResult<Response> {
    let StoredManifest {
        artifact_id,
        repository_id,
        tag_id,
        digest,
        media_type,
        body,
        signed,
    } = manifest;
    if with_body
        && let Some(kind) = signed.missing(required)
        && !may_push(ctx, name).await
    {
        // Harbor's signed-only pulls; who may push (and so sign) still pulls.
        return Err(oci(
            ErrorKind::Precondition,
            OciCode::Denied,
            &format!("The image is not signed by {kind}."),
        )
        .into());
    }
    if with_body {
        note_pull(ctx, project, name, reference, &digest);
        ctx.state.registry.record_pull(
            &ctx.state.store,
            Pull {
                artifact_id,
                tag_id,
                repository_id,
            },
        );
    }
    Ok(manifest_response(body, &media_type, &digest, with_body))
}

/// Notes a pull of the artifact `name` by `reference` (manifest `digest`):
/// audited, and announced to the webhooks that ask for pulls.
pub(super) fn note_pull(ctx: &Ctx, project: &Project, name: &str, reference: &str, digest: &str) {
    content::pulled(
        &ctx.state,
        project.id,
        &artifact_name(name, reference),
        ctx.caller.audit_name(),
    );
    crate::service::webhooks::pulled(
        &ctx.state,
        project.id,
        name,
        reference,
        digest,
        ctx.caller.audit_name(),
    );
}

/// A manifest answer: `body` (sent for a GET only) with its headers.
pub(super) fn manifest_response(
    body: impl Into<Bytes>,
    media_type: &str,
    digest: &str,
    with_body: bool,
) -> Response {
    let body = body.into();
    let len = body.len();
    let mut response = if with_body {
        Body::from(body).into_response()
    } else {
        Body::empty().into_response()
    };
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, header(media_type));
    headers.insert(CONTENT_LENGTH, header(len.to_string()));
    headers.insert(DOCKER_CONTENT_DIGEST, header(digest));
    headers.insert(ETAG, header(format!("\"{digest}\"")));
    response
}

/// `PUT /v2/<name>/manifests/<reference>`: stores an image manifest or index
/// (OCI or Docker), creating the repository on its first push.
pub async fn put_manifest(
    ctx: Ctx,
    body: Body,
    name: &str,
    reference: &str,
) -> RegistryResult<Response> {
    let project = ctx.authorize(name, RepoAction::Push).await?;
    let content_type = ctx.header("content-type").map(str::to_string);
    let state = ctx.state.clone();
    // The body is read before the reference is judged, so a client still sending
    // it gets the error, not a closed connection.
    let body = axum::body::to_bytes(body, MAX_MANIFEST_BYTES)
        .await
        .map_err(|_| {
            RegistryError::from(oci(
                ErrorKind::PayloadTooLarge,
                OciCode::SizeInvalid,
                &format!("a manifest may be at most {MAX_MANIFEST_BYTES} bytes"),
            ))
        })?;
    super::refuse_proxy_push(&project)?;
    let parsed = parse_reference(reference)?;
    let digest = manifest_digest(&body, &parsed);
    if let Reference::Digest(given) = &parsed
        && *given != digest
    {
        return Err(oci(
            ErrorKind::BadRequest,
            OciCode::DigestInvalid,
            &format!("the manifest's digest is {digest}, not {given}"),
        )
        .into());
    }
    let manifest = Manifest::parse(&body, content_type.as_deref()).map_err(|err| {
        RegistryError::from(oci(ErrorKind::BadRequest, OciCode::ManifestInvalid, &err.0))
    })?;
    let tag = match &parsed {
        Reference::Tag(tag) => Some(tag.clone()),
        Reference::Digest(_) => None,
    };
    let mut new = manifest_record(&state, &manifest, project.id, name, &digest, &body, tag).await;
    // The store writes the push's event with it; the audit log is its
    // first subscriber (`crate::events`).
    new.pushed_by = Some(ctx.caller.audit_name().to_string());
    match content::put_manifest(&state, &new).await? {
        PutManifest::Stored(_) => {}
        PutManifest::MissingBlob(missing) => {
            return Err(oci(
                ErrorKind::BadRequest,
                OciCode::ManifestBlobUnknown,
                &format!("blob unknown to registry: {missing}"),
            )
            .into());
        }
        PutManifest::MissingChild(missing) => {
            return Err(oci(
                ErrorKind::BadRequest,
                OciCode::ManifestBlobUnknown,
                &format!("manifest unknown to the repository: {missing}"),
            )
            .into());
        }
    }
    let mut headers = vec![
        (LOCATION, header(format!("/v2/{name}/manifests/{digest}"))),
        (DOCKER_CONTENT_DIGEST, header(digest.as_str())),
    ];
    if let Some(subject) = &manifest.subject {
        headers.push((OCI_SUBJECT, header(subject.digest.as_str())));
    }
    Ok(empty(StatusCode::CREATED, headers))
}

/// The digest of a manifest body: with SHA-512 when it is pushed by a `sha512:`
/// digest (once [`Digest`] accepts those), else with SHA-256, the canonical algorithm.
pub(crate) fn manifest_digest(body: &[u8], reference: &Reference) -> Digest {
    let sha256 = || Digest::from_sha256_bytes(&Sha256::digest(body));
    match reference {
        Reference::Digest(given) if given.as_str().starts_with("sha512:") => {
            Digest::parse(&format!("sha512:{}", hex::encode(Sha512::digest(body))))
                .unwrap_or_else(|_| sha256())
        }
        _ => sha256(),
    }
}

/// `DELETE /v2/<name>/manifests/<reference>`: a tag reference removes the tag,
/// a digest removes the artifact (412 while an index refers to it).
pub async fn delete_manifest(ctx: Ctx, name: &str, reference: &str) -> RegistryResult<Response> {
    ctx.authorize(name, RepoAction::Delete).await?;
    let by = ctx.caller.audit_name();
    match parse_reference(reference)? {
        Reference::Tag(tag) => {
            if !content::delete_tag(&ctx.state, name, &tag, None, by).await? {
                return Err(missing_manifest(&ctx, name, reference).await);
            }
        }
        Reference::Digest(digest) => {
            match content::delete_manifest(&ctx.state, name, digest.as_str(), by).await? {
                DeleteManifest::Deleted => {}
                DeleteManifest::NotFound => {
                    return Err(missing_manifest(&ctx, name, reference).await);
                }
                DeleteManifest::Referenced => {
                    return Err(oci(
                        ErrorKind::Precondition,
                        OciCode::Denied,
                        "the manifest is referenced by an index of the repository",
                    )
                    .into());
                }
            }
        }
    }
    Ok(empty(StatusCode::ACCEPTED, Vec::new()))
}

/// `name:tag` or `name@digest`, as audit logs name an artifact.
pub(crate) fn artifact_name(name: &str, reference: &str) -> String {
    if reference.contains(':') {
        format!("{name}@{reference}")
    } else {
        format!("{name}:{reference}")
    }
}

/// `n` and `last` of a paginated list; `n` absent means everything.
/// The most names one `tags/list` or `_catalog` response holds: without `n`,
/// or with a larger one, a client gets this many and a `Link` to the rest
/// (every client in use follows it), never a whole table at once.
const MAX_PAGE_NAMES: i64 = 1000;

/// `n` (at most [`MAX_PAGE_NAMES`]) and `last` of a listing.
fn pagination(ctx: &Ctx) -> RegistryResult<(i64, String)> {
    let n = match ctx.query("n") {
        None => MAX_PAGE_NAMES,
        Some(n) => n.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            RegistryError::from(oci(
                ErrorKind::BadRequest,
                OciCode::Unsupported,
                "n must be a non-negative integer",
            ))
        })?,
    };
    Ok((n.min(MAX_PAGE_NAMES), ctx.query("last").unwrap_or_default()))
}

fn with_next_link(mut response: Response, path: &str, n: i64, items: &[String]) -> Response {
    if n > 0
        && i64::try_from(items.len()) == Ok(n)
        && let Some(last) = items.last()
    {
        let query = serde_urlencoded::to_string([("n", n.to_string()), ("last", last.clone())])
            .unwrap_or_default();
        response
            .headers_mut()
            .insert(LINK, header(format!("<{path}?{query}>; rel=\"next\"")));
    }
    response
}

/// `GET /v2/<name>/tags/list?n=&last=`: tag names in lexical order.
pub async fn get_tags_list(ctx: Ctx, name: &str) -> RegistryResult<Response> {
    ctx.authorize(name, RepoAction::Pull).await?;
    let (n, last) = pagination(&ctx)?;
    let tags = if n == 0 {
        ctx.state
            .store
            .registry()
            .repository_id(name)
            .await?
            .map(|_| Vec::new())
    } else {
        ctx.state.store.registry().tags(name, &last, n).await?
    };
    let tags = tags.ok_or_else(|| name_unknown(name))?;
    let response = axum::Json(json!({"name": name, "tags": tags})).into_response();
    Ok(with_next_link(
        response,
        &format!("/v2/{name}/tags/list"),
        n,
        &tags,
    ))
}

/// `GET /v2/_catalog?n=&last=`: repository names (system administrators only).
pub async fn get_catalog(ctx: Ctx) -> RegistryResult<Response> {
    if !ctx.caller.may_list_catalog() {
        return Err(
            if matches!(ctx.caller, super::Caller::User(_) | super::Caller::Robot(_)) {
                oci(
                    ErrorKind::Forbidden,
                    OciCode::Denied,
                    "only system administrators may list the catalog",
                )
                .into()
            } else {
                super::auth::unauthorized("authentication required")
                    .with_scope("registry:catalog:*".into())
            },
        );
    }
    let (n, last) = pagination(&ctx)?;
    let names = if n == 0 {
        Vec::new()
    } else {
        ctx.state.store.registry().catalog(&last, n).await?
    };
    let response = axum::Json(json!({ "repositories": names })).into_response();
    Ok(with_next_link(response, "/v2/_catalog", n, &names))
}

/// `GET /v2/<name>/referrers/<digest>?artifactType=`: an image index of the
/// manifests whose subject is `digest` (empty, never 404, when there are none).
pub async fn get_referrers(ctx: Ctx, name: &str, digest: &str) -> RegistryResult<Response> {
    ctx.authorize(name, RepoAction::Pull).await?;
    let digest = parse_digest(digest)?;
    let artifact_type = ctx.query("artifactType").filter(|t| !t.is_empty());
    let referrers = ctx
        .state
        .store
        .registry()
        .referrers(name, digest.as_str(), artifact_type.as_deref())
        .await?;
    let manifests: Vec<Value> = referrers
        .into_iter()
        .map(|r| {
            let mut entry = json!({
                "mediaType": r.media_type,
                "digest": r.digest,
                "size": r.size,
            });
            // An index without an `artifactType` is stored with its own media
            // type as its type (what Harbor's API shows); the spec has the
            // referrers list omit it then.
            if r.artifact_type != r.media_type {
                entry["artifactType"] = json!(r.artifact_type);
            }
            if let Some(annotations) = r
                .annotations
                .and_then(|a| serde_json::from_str::<Value>(&a).ok())
            {
                entry["annotations"] = annotations;
            }
            entry
        })
        .collect();
    let body = json!({
        "schemaVersion": 2,
        "mediaType": media_type::OCI_INDEX,
        "manifests": manifests,
    })
    .to_string();
    let mut response = body.into_response();
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(media_type::OCI_INDEX),
    );
    if artifact_type.is_some() {
        response.headers_mut().insert(
            OCI_FILTERS_APPLIED,
            HeaderValue::from_static("artifactType"),
        );
    }
    Ok(response)
}
