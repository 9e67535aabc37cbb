//! The OCI Distribution Specification 1.1 (`spec.md` of
//! opencontainers/distribution-spec, v1.1.0), one test per requirement, each
//! citing the section it checks: pull, push, content discovery, content
//! management, error codes, digests, and the kinds of content the conformance
//! data sets push. Written from the specification's text; they take the place of
//! the withdrawn conformance binary.

use axum::http::{Method, StatusCode};
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha512};

use super::SPEC_CODES;
use super::{descriptor, digest_of, image_manifest, push_blob, push_image, put_manifest};
use crate::registry_test;
use crate::util::{RequestBuilder, TestApp, TestResponse};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const OCI_EMPTY: &str = "application/vnd.oci.empty.v1+json";
const NONDISTRIBUTABLE_LAYER: &str = "application/vnd.oci.image.layer.nondistributable.v1.tar";
/// The digest of zero bytes.
const EMPTY_BLOB_SHA256: &str =
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// The empty JSON blob of the empty descriptor (`application/vnd.oci.empty.v1+json`).
const EMPTY_JSON: &[u8] = b"{}";

/// `sha512:<hex>` of `bytes`.
fn sha512_of(bytes: &[u8]) -> String {
    let hex: String = Sha512::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha512:{hex}")
}

/// The path (and query) of a location, which the spec lets be absolute or relative.
fn path_of(location: &str) -> String {
    match location.split_once("://") {
        Some((_, rest)) => rest
            .find('/')
            .map_or_else(|| "/".to_string(), |i| rest[i..].to_string()),
        None => location.to_string(),
    }
}

/// `location` with `query` added: the spec lets a location carry query parameters of its own.
fn with_query(location: &str, query: &str) -> String {
    let path = path_of(location);
    let separator = if path.contains('?') { '&' } else { '?' };
    format!("{path}{separator}{query}")
}

/// The `Location` of `res`, as a path; fails the test when there is none.
fn location(res: &TestResponse) -> String {
    let value = res
        .header("location")
        .unwrap_or_else(|| panic!("no Location ({}): {}", res.status, res.text()));
    path_of(value)
}

/// Sends `bytes` as the spec's upload requests do: `Content-Type:
/// application/octet-stream` and their `Content-Length`.
async fn send_octets(request: RequestBuilder<'_>, bytes: &[u8]) -> TestResponse {
    request
        .header("content-length", &bytes.len().to_string())
        .raw("application/octet-stream", bytes.to_vec())
        .send()
        .await
}

/// Opens an upload session as admin (`POST /v2/<name>/blobs/uploads/`,
/// `Content-Length: 0`) and returns its location.
async fn open_upload(app: &TestApp, name: &str) -> String {
    let res = app
        .post(&format!("/v2/{name}/blobs/uploads/"))
        .admin()
        .header("content-length", "0")
        .send()
        .await;
    assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
    location(&res)
}

/// PATCHes `chunk` to the session at `location` as the bytes from `start`
/// (`Content-Range: <start>-<end>`, `Content-Length`).
async fn patch_chunk(app: &TestApp, location: &str, start: usize, chunk: &[u8]) -> TestResponse {
    let range = format!("{start}-{}", start + chunk.len() - 1);
    let request = app
        .request(Method::PATCH, &path_of(location))
        .admin()
        .header("content-range", &range);
    send_octets(request, chunk).await
}

/// Closes the session at `location` with `?digest=` and no body.
async fn close_upload(app: &TestApp, location: &str, digest: &str) -> TestResponse {
    app.put(&with_query(location, &format!("digest={digest}")))
        .admin()
        .header("content-length", "0")
        .send()
        .await
}

/// A HEAD request as admin.
async fn head(app: &TestApp, path: &str) -> TestResponse {
    app.request(Method::HEAD, path).admin().send().await
}

/// Asserts that `res` has `status` and a JSON body in the spec's error format:
/// an `errors` list, each entry's `code` one of the spec's codes (upper case
/// letters and underscores), the first being `code`.
fn assert_spec_error(res: &TestResponse, status: StatusCode, code: &str) {
    assert_eq!(res.status, status, "{}", res.text());
    let body = res.json();
    let errors = body["errors"].as_array().expect("an `errors` list");
    assert!(!errors.is_empty(), "{body}");
    for error in errors {
        let found = error["code"].as_str().expect("a `code` string");
        assert!(
            SPEC_CODES.contains(&found),
            "{found} is not in the spec's table"
        );
        assert!(
            found.chars().all(|c| c.is_ascii_uppercase() || c == '_'),
            "{found}"
        );
        if let Some(message) = error.get("message") {
            assert!(message.is_string(), "{body}");
        }
    }
    assert_eq!(errors[0]["code"], code, "{body}");
}

/// spec.md "Push": a manifest naming content the registry lacks is either
/// accepted (`201`) or rejected with "one or more `MANIFEST_BLOB_UNKNOWN`
/// errors" (a 4xx; Berth: 400), every error of the answer being that code.
fn assert_rejected_for_unknown_content(res: &TestResponse) {
    if res.status == StatusCode::CREATED {
        return;
    }
    assert!(
        res.status.is_client_error(),
        "{}: {}",
        res.status,
        res.text()
    );
    assert_spec_error(res, res.status, "MANIFEST_BLOB_UNKNOWN");
    let body = res.json();
    for error in body["errors"].as_array().into_iter().flatten() {
        assert_eq!(error["code"], "MANIFEST_BLOB_UNKNOWN", "{body}");
    }
}

/// The bytes of a JSON value.
fn bytes_of(value: &Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// Pushes each of `blobs` monolithically into `name`.
async fn push_blobs(app: &TestApp, name: &str, blobs: &[&[u8]]) {
    for blob in blobs {
        push_blob(app, name, blob).await;
    }
}

/// An artifact manifest: `artifactType` (if any), the empty config, `layers`
/// (`application/octet-stream`), then `subject` and `annotations` when given.
fn artifact_manifest(
    artifact_type: Option<&str>,
    layers: &[&[u8]],
    subject: Option<Value>,
    annotations: Option<Value>,
) -> Vec<u8> {
    let mut manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": descriptor(OCI_EMPTY, EMPTY_JSON),
        "layers": layers
            .iter()
            .map(|l| descriptor("application/octet-stream", l))
            .collect::<Vec<_>>(),
    });
    if let Some(artifact_type) = artifact_type {
        manifest["artifactType"] = json!(artifact_type);
    }
    if let Some(subject) = subject {
        manifest["subject"] = subject;
    }
    if let Some(annotations) = annotations {
        manifest["annotations"] = annotations;
    }
    bytes_of(&manifest)
}

/// Pushes an artifact manifest (its empty config and `layers` first) by its
/// digest; returns the manifest and its digest.
async fn push_artifact(
    app: &TestApp,
    name: &str,
    artifact_type: Option<&str>,
    layers: &[&[u8]],
    subject: Option<Value>,
    annotations: Option<Value>,
) -> (Vec<u8>, String) {
    push_blob(app, name, EMPTY_JSON).await;
    push_blobs(app, name, layers).await;
    let manifest = artifact_manifest(artifact_type, layers, subject, annotations);
    let digest = digest_of(&manifest);
    let res = put_manifest(app, name, &digest, OCI_MANIFEST, &manifest).await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    (manifest, digest)
}

/// The `manifests` of a referrers answer, sorted by digest (the spec sets no order).
fn referrer_list(res: &TestResponse) -> Vec<Value> {
    let mut manifests = res.json()["manifests"]
        .as_array()
        .expect("a `manifests` list")
        .clone();
    manifests.sort_by(|a, b| a["digest"].as_str().cmp(&b["digest"].as_str()));
    manifests
}

/// Pushes one tagged image and tags the same manifest with each of `tags`.
async fn push_tags(app: &TestApp, name: &str, tags: &[&str]) {
    let (manifest, _) = push_image(app, name, tags[0], &[b"tagged layer"]).await;
    for tag in &tags[1..] {
        let res = put_manifest(app, name, tag, OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{tag}: {}", res.text());
    }
}

/// The `tags` of a tags list answer.
fn tags_of(res: &TestResponse) -> Vec<String> {
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    serde_json::from_value(res.json()["tags"].clone()).expect("a `tags` list of strings")
}

/// The target of a `Link: <url>; rel="next"` header (RFC 5988), as a path.
fn next_link(res: &TestResponse) -> Option<String> {
    let link = res.header("link")?;
    let (target, params) = link.trim().strip_prefix('<')?.split_once('>')?;
    let rel_next = params
        .split(';')
        .map(str::trim)
        .any(|p| p == "rel=\"next\"" || p == "rel=next");
    assert!(rel_next, "a Link without rel=\"next\": {link}");
    Some(path_of(target))
}

// ---------------------------------------------------------------------------
// Determining support
// ---------------------------------------------------------------------------

registry_test!(
    /// spec.md "Determining Support": `GET /v2/` answers `200 OK` when the
    /// registry implements the specification (end-1: failure 404/401).
    async fn base_endpoint_answers_200(app) {
        let res = app.get("/v2/").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get("/v2/").send().await;
        assert!(
            [StatusCode::OK, StatusCode::UNAUTHORIZED].contains(&res.status),
            "{}",
            res.status
        );
    }
);

// ---------------------------------------------------------------------------
// Pull
// ---------------------------------------------------------------------------

registry_test!(
    /// spec.md "Pulling manifests": a GET of an existing manifest by tag MUST
    /// provide the expected manifest with `200 OK`; `Docker-Content-Digest`,
    /// when present, is the canonical digest of the manifest.
    async fn pull_manifest_by_tag(app) {
        let name = "library/spec-pull-tag";
        let (manifest, digest) = push_image(&app, name, "v1", &[b"pull by tag"]).await;
        let res = app.get(&format!("/v2/{name}/manifests/v1")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.body, manifest);
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        assert_eq!(digest_of(&res.body), digest);
    }
);

registry_test!(
    /// spec.md "Pulling manifests": `<reference>` MUST be the digest of the
    /// manifest or a tag; a GET by digest MUST provide the manifest with `200 OK`.
    async fn pull_manifest_by_digest(app) {
        let name = "library/spec-pull-digest";
        let (manifest, digest) = push_image(&app, name, "v1", &[b"pull by digest"]).await;
        let res = app.get(&format!("/v2/{name}/manifests/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.body, manifest);
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        // Anonymous pull from the public project too.
        let res = app.get(&format!("/v2/{name}/manifests/{digest}")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.body, manifest);
    }
);

registry_test!(
    /// spec.md "Pulling manifests": "The `Content-Type` header SHOULD match what
    /// the client pushed as the manifest's `Content-Type`" and "The registry
    /// SHOULD NOT include parameters on the `Content-Type` header".
    async fn pulled_manifest_content_type_is_the_pushed_type(app) {
        let name = "library/spec-pull-type";
        let (image, image_digest) = push_image(&app, name, "image", &[b"typed layer"]).await;
        let index = bytes_of(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [descriptor(OCI_MANIFEST, &image)],
        }));
        let res = put_manifest(&app, name, "index", OCI_INDEX, &index).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        for (reference, media_type) in [("image", OCI_MANIFEST), (image_digest.as_str(), OCI_MANIFEST), ("index", OCI_INDEX)] {
            let res = app.get(&format!("/v2/{name}/manifests/{reference}")).admin().send().await;
            assert_eq!(res.header("content-type"), Some(media_type), "{reference}");
            let res = head(&app, &format!("/v2/{name}/manifests/{reference}")).await;
            assert_eq!(res.header("content-type"), Some(media_type), "HEAD {reference}");
        }
    }
);

registry_test!(
    /// spec.md "Pulling manifests": "If the manifest is not found in the
    /// registry, the response code MUST be `404 Not Found`" (`MANIFEST_UNKNOWN`,
    /// code-7), by tag and by digest.
    async fn pull_unknown_manifest_is_404(app) {
        let name = "library/spec-pull-unknown";
        push_image(&app, name, "v1", &[b"present"]).await;
        let missing = digest_of(b"no such manifest");
        for reference in ["nosuchtag", missing.as_str()] {
            let res = app.get(&format!("/v2/{name}/manifests/{reference}")).admin().send().await;
            assert_spec_error(&res, StatusCode::NOT_FOUND, "MANIFEST_UNKNOWN");
        }
    }
);

registry_test!(
    /// spec.md "Pushing Manifests": "An attempt to pull a nonexistent repository
    /// MUST return response code `404 Not Found`" (`NAME_UNKNOWN`, code-9).
    async fn pull_from_a_nonexistent_repository_is_404(app) {
        let res = app.get("/v2/library/spec-never-pushed/manifests/latest").admin().send().await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "NAME_UNKNOWN");
        let res = app
            .get(&format!("/v2/library/spec-never-pushed/blobs/{}", digest_of(b"x")))
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

registry_test!(
    /// spec.md "Pulling blobs": a GET of an existing blob MUST provide the blob
    /// with `200 OK`; a `Docker-Content-Digest` header, if present, MUST be a
    /// digest matching that of the response body.
    async fn pull_blob_by_digest(app) {
        let name = "library/spec-pull-blob";
        let blob = b"a blob to pull".to_vec();
        let digest = push_blob(&app, name, &blob).await;
        let res = app.get(&format!("/v2/{name}/blobs/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.body, blob);
        if let Some(header) = res.header("docker-content-digest") {
            assert_eq!(header, digest_of(&res.body));
        }
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
    }
);

registry_test!(
    /// spec.md "Pulling blobs": "If the blob is not found in the registry, the
    /// response code MUST be `404 Not Found`" (`BLOB_UNKNOWN`, code-1).
    async fn pull_unknown_blob_is_404(app) {
        let name = "library/spec-pull-no-blob";
        push_blob(&app, name, b"another blob").await;
        let res = app
            .get(&format!("/v2/{name}/blobs/{}", digest_of(b"never pushed")))
            .admin()
            .send()
            .await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "BLOB_UNKNOWN");
    }
);

registry_test!(
    /// spec.md "Checking if content exists in the registry": a HEAD of an
    /// existing manifest (by tag or digest) MUST return `200 OK`, SHOULD carry
    /// `Docker-Content-Digest` and `Content-Length`, and has no body.
    async fn head_manifest_by_tag_and_digest(app) {
        let name = "library/spec-head-manifest";
        let (manifest, digest) = push_image(&app, name, "v1", &[b"head manifest"]).await;
        for reference in ["v1", digest.as_str()] {
            let res = head(&app, &format!("/v2/{name}/manifests/{reference}")).await;
            assert_eq!(res.status, StatusCode::OK, "{reference}");
            assert!(res.body.is_empty(), "{reference}");
            assert_eq!(res.header("content-length"), Some(manifest.len().to_string().as_str()));
            assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        }
    }
);

registry_test!(
    /// spec.md "Checking if content exists in the registry": a HEAD of an
    /// existing blob MUST return `200 OK`, SHOULD carry `Docker-Content-Digest`
    /// and the size in `Content-Length`, and has no body.
    async fn head_blob(app) {
        let name = "library/spec-head-blob";
        let blob = vec![42u8; 1234];
        let digest = push_blob(&app, name, &blob).await;
        let res = head(&app, &format!("/v2/{name}/blobs/{digest}")).await;
        assert_eq!(res.status, StatusCode::OK);
        assert!(res.body.is_empty());
        assert_eq!(res.header("content-length"), Some("1234"));
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
    }
);

registry_test!(
    /// spec.md "Checking if content exists in the registry": "If the blob or
    /// manifest is not found in the registry, the response code MUST be `404 Not Found`".
    async fn head_of_missing_content_is_404(app) {
        let name = "library/spec-head-missing";
        push_image(&app, name, "v1", &[b"head missing"]).await;
        let missing = digest_of(b"not here");
        for path in [
            format!("/v2/{name}/manifests/v2"),
            format!("/v2/{name}/manifests/{missing}"),
            format!("/v2/{name}/blobs/{missing}"),
        ] {
            let res = head(&app, &path).await;
            assert_eq!(res.status, StatusCode::NOT_FOUND, "{path}");
            assert!(res.body.is_empty(), "{path}");
        }
    }
);

registry_test!(
    /// spec.md "Use Cases: Resumable Pull" (the client "uses http `Range`
    /// requests"; v1.1.1 "Pulling blobs": "A registry SHOULD support the `Range`
    /// request header in accordance with RFC 9110"): a satisfiable range is
    /// `206 Partial Content` with those bytes and `Content-Range`.
    async fn blob_range_request_is_206(app) {
        let name = "library/spec-range";
        let blob = b"0123456789abcdefghij".to_vec();
        let digest = push_blob(&app, name, &blob).await;
        let path = format!("/v2/{name}/blobs/{digest}");
        for (range, want, content_range) in [
            ("bytes=5-9", &blob[5..10], "bytes 5-9/20"),
            ("bytes=15-", &blob[15..], "bytes 15-19/20"),
            ("bytes=-3", &blob[17..], "bytes 17-19/20"),
        ] {
            let res = app.get(&path).admin().header("range", range).send().await;
            assert_eq!(res.status, StatusCode::PARTIAL_CONTENT, "{range}");
            assert_eq!(res.body, want, "{range}");
            assert_eq!(res.header("content-range"), Some(content_range), "{range}");
        }
    }
);

registry_test!(
    /// spec.md "Use Cases: Resumable Pull" with RFC 9110 (referred to by v1.1.1
    /// "Pulling blobs"): a range wholly past the end of the blob is `416 Range
    /// Not Satisfiable`, with `Content-Range: bytes */<size>`.
    async fn blob_range_past_the_end_is_416(app) {
        let name = "library/spec-range-416";
        let digest = push_blob(&app, name, b"twelve bytes").await;
        let res = app
            .get(&format!("/v2/{name}/blobs/{digest}"))
            .admin()
            .header("range", "bytes=100-200")
            .send()
            .await;
        assert_eq!(res.status, StatusCode::RANGE_NOT_SATISFIABLE);
        assert_eq!(res.header("content-range"), Some("bytes */12"));
    }
);

// ---------------------------------------------------------------------------
// Push: blobs
// ---------------------------------------------------------------------------

registry_test!(
    /// spec.md "POST then PUT": the POST MUST answer `202 Accepted` with a
    /// `Location`; the PUT of the whole blob to `<location>?digest=<digest>`
    /// MUST answer `201 Created` with a `Location` that is a pullable blob URL.
    async fn post_then_put_pushes_a_blob(app) {
        let name = "library/spec-post-put";
        let blob = b"monolithic after a POST".to_vec();
        let digest = digest_of(&blob);
        let upload = open_upload(&app, name).await;
        let request = app.put(&with_query(&upload, &format!("digest={digest}"))).admin();
        let res = send_octets(request, &blob).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let pulled = app.get(&location(&res)).admin().send().await;
        assert_eq!(pulled.status, StatusCode::OK);
        assert_eq!(pulled.body, blob);
    }
);

registry_test!(
    /// spec.md "POST then PUT": "The `<location>` MUST contain a UUID
    /// representing a unique session ID for the upload to follow".
    async fn upload_locations_are_unique_sessions(app) {
        let name = "library/spec-sessions";
        let first = open_upload(&app, name).await;
        let second = open_upload(&app, name).await;
        assert_ne!(first, second);
        let uuid = |location: &str| {
            location
                .split(['/', '?', '&', '='])
                .any(|part| uuid::Uuid::parse_str(part).is_ok())
        };
        assert!(uuid(&first), "{first}");
        assert!(uuid(&second), "{second}");
        // Each is a session of its own: finishing one leaves the other open.
        let digest = digest_of(b"one");
        let res = send_octets(app.put(&with_query(&first, &format!("digest={digest}"))).admin(), b"one").await;
        assert_eq!(res.status, StatusCode::CREATED);
        let res = app.get(&second).admin().send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
    }
);

registry_test!(
    /// spec.md "Single POST": Berth supports pushing a blob with one `POST
    /// /v2/<name>/blobs/uploads/?digest=<digest>`; its successful completion
    /// MUST return `201 Created` with a `Location` that is a pullable blob URL.
    async fn single_post_pushes_a_blob(app) {
        let name = "library/spec-single-post";
        let blob = b"one request".to_vec();
        let digest = digest_of(&blob);
        let request = app.post(&format!("/v2/{name}/blobs/uploads/?digest={digest}")).admin();
        let res = send_octets(request, &blob).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let pulled = app.get(&location(&res)).admin().send().await;
        assert_eq!(pulled.status, StatusCode::OK);
        assert_eq!(pulled.body, blob);
    }
);

registry_test!(
    /// spec.md "Single POST": "the `<digest>` MUST match the blob's digest"; a
    /// mismatch fails (end-4b: failure 400) with `DIGEST_INVALID` ("provided
    /// digest did not match uploaded content", code-4) and stores nothing.
    async fn single_post_with_a_wrong_digest_is_400(app) {
        let name = "library/spec-single-post-bad";
        let wrong = digest_of(b"other bytes");
        let request = app.post(&format!("/v2/{name}/blobs/uploads/?digest={wrong}")).admin();
        let res = send_octets(request, b"these bytes").await;
        assert_spec_error(&res, StatusCode::BAD_REQUEST, "DIGEST_INVALID");
        for digest in [wrong, digest_of(b"these bytes")] {
            let res = head(&app, &format!("/v2/{name}/blobs/{digest}")).await;
            assert_eq!(res.status, StatusCode::NOT_FOUND);
        }
    }
);

registry_test!(
    /// spec.md "Pushing a blob in chunks": each PATCH with `Content-Range` and
    /// `Content-Length` MUST answer `202 Accepted` with `Location` and `Range:
    /// 0-<end-of-range>`; the closing `PUT <location>?digest=` MUST answer
    /// `201 Created` with a pullable `Location`.
    async fn chunked_upload(app) {
        let name = "library/spec-chunked";
        let chunks: [&[u8]; 3] = [b"first chunk, ", b"second chunk, ", b"third chunk"];
        let whole = chunks.concat();
        let digest = digest_of(&whole);
        let mut upload = open_upload(&app, name).await;
        let mut offset = 0;
        for chunk in chunks {
            let res = patch_chunk(&app, &upload, offset, chunk).await;
            offset += chunk.len();
            assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
            let range = format!("0-{}", offset - 1);
            assert_eq!(res.header("range"), Some(range.as_str()));
            // Each next chunk SHOULD use the location of the previous answer.
            upload = location(&res);
        }
        let res = close_upload(&app, &upload, &digest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let pulled = app.get(&location(&res)).admin().send().await;
        assert_eq!(pulled.status, StatusCode::OK);
        assert_eq!(pulled.body, whole);
    }
);

registry_test!(
    /// spec.md "Pushing a blob in chunks": "The final chunk MAY be uploaded using
    /// a `PATCH` request or it MAY be uploaded in the closing `PUT` request"
    /// (with its `Content-Range` and `Content-Length`); `201 Created`.
    async fn final_chunk_in_the_closing_put(app) {
        let name = "library/spec-chunked-put";
        let (head_chunk, tail_chunk): (&[u8], &[u8]) = (b"all but ", b"the last chunk");
        let digest = digest_of(&[head_chunk, tail_chunk].concat());
        let upload = open_upload(&app, name).await;
        let res = patch_chunk(&app, &upload, 0, head_chunk).await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let range = format!("{}-{}", head_chunk.len(), head_chunk.len() + tail_chunk.len() - 1);
        let request = app
            .put(&with_query(&location(&res), &format!("digest={digest}")))
            .admin()
            .header("content-range", &range);
        let res = send_octets(request, tail_chunk).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let pulled = app.get(&location(&res)).admin().send().await;
        assert_eq!(pulled.body, [head_chunk, tail_chunk].concat());
    }
);

registry_test!(
    /// spec.md "Pushing a blob in chunks": "Chunks MUST be uploaded in order ...
    /// If a chunk is uploaded out of order, the registry MUST respond with a
    /// `416 Requested Range Not Satisfiable` code"; the chunk changes nothing
    /// (Berth also says where the upload stands in `Range`).
    async fn out_of_order_chunk_is_416(app) {
        let name = "library/spec-out-of-order";
        let upload = open_upload(&app, name).await;
        let res = patch_chunk(&app, &upload, 0, b"01234").await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        // Skips bytes 5-9.
        let res = patch_chunk(&app, &upload, 10, b"abcde").await;
        assert_eq!(res.status, StatusCode::RANGE_NOT_SATISFIABLE, "{}", res.text());
        assert_eq!(res.header("range"), Some("0-4"));
        let res = app.get(&upload).admin().send().await;
        assert_eq!(res.header("range"), Some("0-4"));
        // The upload continues where it stood.
        let res = patch_chunk(&app, &upload, 5, b"56789").await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let res = close_upload(&app, &location(&res), &digest_of(b"0123456789")).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    }
);

registry_test!(
    /// spec.md "Pushing a blob in chunks": "the first byte of a chunk being the
    /// last chunk's `<end-of-range>` plus one"; a chunk sent again (a retry of
    /// one already accepted) is out of order: `416`, and nothing is appended.
    async fn repeated_chunk_is_416(app) {
        let name = "library/spec-repeated-chunk";
        let upload = open_upload(&app, name).await;
        let res = patch_chunk(&app, &upload, 0, b"chunk").await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let res = patch_chunk(&app, &upload, 0, b"chunk").await;
        assert_eq!(res.status, StatusCode::RANGE_NOT_SATISFIABLE, "{}", res.text());
        assert_eq!(res.header("range"), Some("0-4"));
        let res = close_upload(&app, &upload, &digest_of(b"chunk")).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&location(&res)).admin().send().await;
        assert_eq!(res.body, b"chunk");
    }
);

registry_test!(
    /// spec.md "Pushing a blob in chunks": a GET of an active upload's
    /// `<location>` (end-13) "MUST be a `204 No Content` response code, and MUST
    /// have" `Location` and `Range: 0-<end-of-range>`; the next chunk SHOULD use
    /// that location.
    async fn upload_status_is_204_with_range_and_location(app) {
        let name = "library/spec-upload-status";
        let upload = open_upload(&app, name).await;
        let res = patch_chunk(&app, &upload, 0, b"status!").await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let res = app.get(&upload).admin().send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        assert!(res.body.is_empty());
        assert_eq!(res.header("range"), Some("0-6"));
        let next = location(&res);
        let res = patch_chunk(&app, &next, 7, b" more").await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let res = app.get(&next).admin().send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        assert_eq!(res.header("range"), Some("0-11"));
        assert!(res.header("location").is_some());
    }
);

registry_test!(
    /// spec.md "Appendix" apdx-1 (detail.md "Canceling an Upload": `DELETE
    /// /v2/<name>/blobs/uploads/<session_id>` cancels it) and "Error Codes"
    /// `BLOB_UPLOAD_UNKNOWN` ("blob upload unknown to registry"): after a
    /// cancel the session is unknown (end-13: failure 404).
    async fn cancelled_upload_is_unknown(app) {
        let name = "library/spec-cancel";
        let upload = open_upload(&app, name).await;
        let res = patch_chunk(&app, &upload, 0, b"abandoned").await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let res = app.delete(&upload).admin().send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT, "{}", res.text());
        let res = app.get(&upload).admin().send().await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "BLOB_UPLOAD_UNKNOWN");
        let res = patch_chunk(&app, &upload, 9, b"more").await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "BLOB_UPLOAD_UNKNOWN");
        let res = close_upload(&app, &upload, &digest_of(b"abandoned")).await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "BLOB_UPLOAD_UNKNOWN");
    }
);

registry_test!(
    /// spec.md "Mounting a blob from another repository": `POST
    /// /v2/<name>/blobs/uploads/?mount=<digest>&from=<other_name>`; "The
    /// response to a successful mount MUST be `201 Created`, and MUST contain"
    /// a `Location` to the blob, which is then pullable from `<name>`.
    async fn mount_with_from_is_201(app) {
        let (source, target) = ("library/spec-mount-source", "library/spec-mount-target");
        let blob = b"a blob worth mounting".to_vec();
        let digest = push_blob(&app, source, &blob).await;
        let res = app
            .post(&format!("/v2/{target}/blobs/uploads/?mount={digest}&from={source}"))
            .admin()
            .header("content-length", "0")
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let pulled = app.get(&location(&res)).admin().send().await;
        assert_eq!(pulled.body, blob);
        let res = app.get(&format!("/v2/{target}/blobs/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.body, blob);
    }
);

registry_test!(
    /// spec.md "Mounting a blob from another repository": "The registry MAY
    /// treat the `from` parameter as optional, and it MAY cross-mount the blob
    /// if it can be found. Alternatively ... it SHOULD return a `202`" (an
    /// upload session). Either is conformant: a 201 must have mounted the blob,
    /// a 202 must be a usable session. Berth answers 202: without `from` it does
    /// not look for the blob.
    async fn mount_without_from_is_201_or_an_upload_session(app) {
        let (source, target) = ("library/spec-mount-nofrom-src", "library/spec-mount-nofrom");
        let blob = b"mount me without from".to_vec();
        let digest = push_blob(&app, source, &blob).await;
        let res = app
            .post(&format!("/v2/{target}/blobs/uploads/?mount={digest}"))
            .admin()
            .header("content-length", "0")
            .send()
            .await;
        match res.status {
            StatusCode::CREATED => {
                let pulled = app.get(&location(&res)).admin().send().await;
                assert_eq!(pulled.body, blob);
            }
            StatusCode::ACCEPTED => {
                let request = app.put(&with_query(&location(&res), &format!("digest={digest}"))).admin();
                let res = send_octets(request, &blob).await;
                assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
            }
            other => panic!("a mount without from answered {other}: {}", res.text()),
        }
        let res = app.get(&format!("/v2/{target}/blobs/{digest}")).admin().send().await;
        assert_eq!(res.body, blob);
    }
);

registry_test!(
    /// spec.md "Mounting a blob from another repository": "if a registry ... is
    /// unable to mount the requested blob, it SHOULD return a `202`. This
    /// indicates that the upload session has begun and that the client MAY
    /// proceed with the upload".
    async fn mount_of_a_blob_the_source_lacks_starts_an_upload(app) {
        let (source, target) = ("library/spec-mount-lacks-src", "library/spec-mount-lacks");
        push_blob(&app, source, b"something else").await;
        let blob = b"never pushed anywhere".to_vec();
        let digest = digest_of(&blob);
        let res = app
            .post(&format!("/v2/{target}/blobs/uploads/?mount={digest}&from={source}"))
            .admin()
            .header("content-length", "0")
            .send()
            .await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        let request = app.put(&with_query(&location(&res), &format!("digest={digest}"))).admin();
        let res = send_octets(request, &blob).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{target}/blobs/{digest}")).admin().send().await;
        assert_eq!(res.body, blob);
    }
);

// ---------------------------------------------------------------------------
// Push: manifests
// ---------------------------------------------------------------------------

registry_test!(
    /// spec.md "Pushing Manifests": a PUT by tag MUST answer `201 Created` with a
    /// `Location` that is a pullable manifest URL; `Docker-Content-Digest` is
    /// the canonical digest of the manifest.
    async fn manifest_put_by_tag_is_201(app) {
        let name = "library/spec-put-tag";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        push_blobs(&app, name, &[config, b"put by tag"]).await;
        let manifest = image_manifest(config, &[b"put by tag"]);
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("docker-content-digest"), Some(digest_of(&manifest).as_str()));
        let pulled = app.get(&location(&res)).admin().send().await;
        assert_eq!(pulled.status, StatusCode::OK);
        assert_eq!(pulled.body, manifest);
        let pulled = app.get(&format!("/v2/{name}/manifests/v1")).admin().send().await;
        assert_eq!(pulled.body, manifest);
    }
);

registry_test!(
    /// spec.md "Pushing Manifests": a PUT by digest MUST answer `201 Created`
    /// with a pullable `Location`; `Docker-Content-Digest` "MUST be equal to the
    /// client provided digest".
    async fn manifest_put_by_digest_is_201(app) {
        let name = "library/spec-put-digest";
        let config = br#"{"architecture":"arm64","os":"linux"}"#;
        push_blobs(&app, name, &[config, b"put by digest"]).await;
        let manifest = image_manifest(config, &[b"put by digest"]);
        let digest = digest_of(&manifest);
        let res = put_manifest(&app, name, &digest, OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        let pulled = app.get(&location(&res)).admin().send().await;
        assert_eq!(pulled.body, manifest);
    }
);

registry_test!(
    /// spec.md "Pushing Manifests": "The registry SHOULD ignore parameters on
    /// the `Content-Type` header".
    async fn manifest_put_ignores_content_type_parameters(app) {
        let name = "library/spec-put-params";
        let config = br#"{"architecture":"amd64","os":"linux","params":1}"#;
        push_blobs(&app, name, &[config, b"with parameters"]).await;
        let manifest = image_manifest(config, &[b"with parameters"]);
        let content_type = format!("{OCI_MANIFEST}; charset=utf-8");
        let res = put_manifest(&app, name, "v1", &content_type, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let pulled = app.get(&format!("/v2/{name}/manifests/v1")).admin().send().await;
        assert_eq!(pulled.body, manifest);
        assert_eq!(pulled.header("content-type"), Some(OCI_MANIFEST));
    }
);

registry_test!(
    /// spec.md "Pushing Manifests with Subject": "a registry implementation that
    /// supports the referrers API MUST respond with the response header
    /// `OCI-Subject: <subject digest>`".
    async fn manifest_with_subject_answers_oci_subject(app) {
        let name = "library/spec-oci-subject";
        let (subject, subject_digest) = push_image(&app, name, "v1", &[b"the subject"]).await;
        push_blobs(&app, name, &[EMPTY_JSON, b"signature"]).await;
        let referrer = artifact_manifest(
            Some("application/vnd.example.signature.v1"),
            &[b"signature"],
            Some(descriptor(OCI_MANIFEST, &subject)),
            None,
        );
        let res = put_manifest(&app, name, &digest_of(&referrer), OCI_MANIFEST, &referrer).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("oci-subject"), Some(subject_digest.as_str()));
        // And by tag.
        let res = put_manifest(&app, name, "sig", OCI_MANIFEST, &referrer).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("oci-subject"), Some(subject_digest.as_str()));
    }
);

registry_test!(
    /// spec.md "Push": "A registry MUST initially accept an otherwise valid
    /// manifest with a `subject` field that references a manifest that does not
    /// exist in the repository, allowing clients to push a manifest and
    /// referrers to that manifest in either order"; and "Enabling the Referrers
    /// API": newly pushed manifests with a valid `subject` MUST be in the
    /// referrers response, before and after the subject is pushed.
    async fn manifest_whose_subject_is_missing_is_accepted(app) {
        let name = "library/spec-subject-later";
        let config = br#"{"architecture":"amd64","os":"linux","later":true}"#;
        let subject = image_manifest(config, &[b"pushed after its referrer"]);
        let subject_digest = digest_of(&subject);
        let (referrer, referrer_digest) = push_artifact(
            &app,
            name,
            Some("application/vnd.example.sbom.v1"),
            &[b"sbom"],
            Some(descriptor(OCI_MANIFEST, &subject)),
            None,
        )
        .await;
        let listed = |res: &TestResponse| {
            assert_eq!(res.status, StatusCode::OK);
            assert_eq!(
                referrer_list(res),
                vec![json!({
                    "mediaType": OCI_MANIFEST,
                    "digest": referrer_digest,
                    "size": referrer.len(),
                    "artifactType": "application/vnd.example.sbom.v1",
                })]
            );
        };
        let res = app.get(&format!("/v2/{name}/referrers/{subject_digest}")).send().await;
        listed(&res);
        // The subject itself, pushed afterwards.
        push_blobs(&app, name, &[config, b"pushed after its referrer"]).await;
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &subject).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/referrers/{subject_digest}")).send().await;
        listed(&res);
    }
);

registry_test!(
    /// spec.md "Push": "A registry MAY reject a manifest ... with descriptors in
    /// other fields that reference a manifest or blob that does not exist in the
    /// registry. When a manifest is rejected for this reason, it MUST result in
    /// one or more `MANIFEST_BLOB_UNKNOWN` errors". Berth rejects (400); an
    /// accepting registry would answer 201.
    async fn manifest_naming_a_missing_blob_is_manifest_blob_unknown(app) {
        let name = "library/spec-missing-blob";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        push_blob(&app, name, config).await;
        let manifest = image_manifest(config, &[b"layer never pushed"]);
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await;
        assert_rejected_for_unknown_content(&res);
        // A missing config likewise.
        let manifest = image_manifest(br#"{"config":"never pushed"}"#, &[]);
        let res = put_manifest(&app, name, "v2", OCI_MANIFEST, &manifest).await;
        assert_rejected_for_unknown_content(&res);
    }
);

registry_test!(
    /// spec.md "Push": an index whose `manifests` name a manifest that does not
    /// exist MAY be rejected, and then MUST result in `MANIFEST_BLOB_UNKNOWN`
    /// ("manifest references a manifest or blob unknown to registry", code-5).
    async fn index_naming_a_missing_manifest_is_manifest_blob_unknown(app) {
        let name = "library/spec-missing-child";
        let (present, _) = push_image(&app, name, "present", &[b"present child"]).await;
        let absent = image_manifest(b"{\"absent\":1}", &[b"absent child"]);
        let index = bytes_of(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [descriptor(OCI_MANIFEST, &present), descriptor(OCI_MANIFEST, &absent)],
        }));
        let res = put_manifest(&app, name, "index", OCI_INDEX, &index).await;
        assert_rejected_for_unknown_content(&res);
    }
);

registry_test!(
    /// spec.md "Pushing Manifests": "Client and registry implementations SHOULD
    /// expect to be able to support manifest pushes of at least 4 megabytes".
    async fn manifest_of_4_megabytes_is_accepted(app) {
        let name = "library/spec-big-manifest";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        push_blobs(&app, name, &[config, b"big manifest layer"]).await;
        let mut manifest: Value = serde_json::from_slice(&image_manifest(config, &[b"big manifest layer"])).unwrap();
        manifest["annotations"] = json!({"org.example.padding": ""});
        let len = bytes_of(&manifest).len();
        manifest["annotations"]["org.example.padding"] = json!("x".repeat(4_000_000 - len));
        let manifest = bytes_of(&manifest);
        assert_eq!(manifest.len(), 4_000_000);
        let res = put_manifest(&app, name, "big", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let pulled = app.get(&format!("/v2/{name}/manifests/big")).admin().send().await;
        assert_eq!(pulled.body, manifest);
    }
);

registry_test!(
    /// spec.md "Pushing Manifests": "A registry SHOULD enforce some limit on the
    /// maximum manifest size ... SHOULD respond to a request to push a manifest
    /// over this limit with a response code `413 Payload Too Large`".
    async fn manifest_over_the_size_limit_is_413(app) {
        let name = "library/spec-huge-manifest";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        push_blobs(&app, name, &[config, b"huge manifest layer"]).await;
        let mut manifest: Value = serde_json::from_slice(&image_manifest(config, &[b"huge manifest layer"])).unwrap();
        manifest["annotations"] = json!({"org.example.padding": "x".repeat(8 << 20)});
        let res = put_manifest(&app, name, "huge", OCI_MANIFEST, &bytes_of(&manifest)).await;
        assert_eq!(res.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/manifests/huge")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

// ---------------------------------------------------------------------------
// Content discovery: tags
// ---------------------------------------------------------------------------

registry_test!(
    /// spec.md "Listing Tags": `GET /v2/<name>/tags/list` MUST return `200 OK`
    /// with `{"name": "<name>", "tags": [...]}`, the tags in lexical order.
    async fn tags_list_names_the_repository_and_its_tags(app) {
        let name = "library/spec-tags";
        push_tags(&app, name, &["v2", "latest", "v1", "1.0"]).await;
        let res = app.get(&format!("/v2/{name}/tags/list")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json(), json!({"name": name, "tags": ["1.0", "latest", "v1", "v2"]}));
    }
);

registry_test!(
    /// spec.md "Listing Tags": "The list of tags MAY be empty if there are no
    /// tags on the repository" (the repository still exists: `200 OK`).
    async fn tags_list_of_an_untagged_repository(app) {
        let name = "library/spec-tags-none";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        push_blobs(&app, name, &[config, b"untagged"]).await;
        let manifest = image_manifest(config, &[b"untagged"]);
        let res = put_manifest(&app, name, &digest_of(&manifest), OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/tags/list")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json()["name"], name);
        assert!(res.json()["tags"].as_array().is_none_or(Vec::is_empty), "{}", res.text());
    }
);

registry_test!(
    /// spec.md "Listing Tags": end-8a fails with `404` for a repository that is
    /// not found (`NAME_UNKNOWN`, code-9).
    async fn tags_list_of_a_nonexistent_repository_is_404(app) {
        let res = app.get("/v2/library/spec-tags-nowhere/tags/list").admin().send().await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "NAME_UNKNOWN");
    }
);

registry_test!(
    /// spec.md "Listing Tags": with `n`, "the list returned will start at the
    /// beginning of the list and include `<int>` results"; fewer only "when the
    /// total number of tags attached to the repository is less than `<int>`".
    async fn tags_list_with_n(app) {
        let name = "library/spec-tags-n";
        push_tags(&app, name, &["t0", "t1", "t2", "t3", "t4"]).await;
        let res = app.get(&format!("/v2/{name}/tags/list?n=3")).send().await;
        assert_eq!(tags_of(&res), ["t0", "t1", "t2"]);
        assert_eq!(res.json()["name"], name);
        let res = app.get(&format!("/v2/{name}/tags/list?n=5")).send().await;
        assert_eq!(tags_of(&res), ["t0", "t1", "t2", "t3", "t4"]);
        let res = app.get(&format!("/v2/{name}/tags/list?n=50")).send().await;
        assert_eq!(tags_of(&res), ["t0", "t1", "t2", "t3", "t4"]);
    }
);

registry_test!(
    /// spec.md "Listing Tags": with `n` and `last`, "up to `<int>` tags *after*
    /// `<tagname>`", `<tagname>` itself not included, in lexical order.
    async fn tags_list_with_n_and_last(app) {
        let name = "library/spec-tags-last";
        push_tags(&app, name, &["t0", "t1", "t2", "t3", "t4"]).await;
        let res = app.get(&format!("/v2/{name}/tags/list?n=2&last=t1")).send().await;
        assert_eq!(tags_of(&res), ["t2", "t3"]);
        let res = app.get(&format!("/v2/{name}/tags/list?n=2&last=t3")).send().await;
        assert_eq!(tags_of(&res), ["t4"]);
        let res = app.get(&format!("/v2/{name}/tags/list?n=2&last=t4")).send().await;
        assert_eq!(tags_of(&res), Vec::<String>::new());
    }
);

registry_test!(
    /// spec.md "Listing Tags": "When using the `last` query parameter, the `n`
    /// parameter is OPTIONAL": every tag after `last`.
    async fn tags_list_with_last_alone(app) {
        let name = "library/spec-tags-last-only";
        push_tags(&app, name, &["t0", "t1", "t2", "t3", "t4"]).await;
        let res = app.get(&format!("/v2/{name}/tags/list?last=t2")).send().await;
        assert_eq!(tags_of(&res), ["t3", "t4"]);
    }
);

registry_test!(
    /// spec.md "Listing Tags": "When `n` is zero, this endpoint MUST return an
    /// empty list, and MUST NOT include a `Link` header".
    async fn tags_list_with_n_zero_is_empty_without_link(app) {
        let name = "library/spec-tags-zero";
        push_tags(&app, name, &["t0", "t1"]).await;
        let res = app.get(&format!("/v2/{name}/tags/list?n=0")).send().await;
        assert_eq!(tags_of(&res), Vec::<String>::new());
        assert_eq!(res.header("link"), None);
    }
);

registry_test!(
    /// spec.md "Listing Tags" (v1.1.1 makes explicit what detail.md, apdx-1,
    /// described): "A `Link` header MAY be included in the response when
    /// additional tags are available. If included, the `Link` header MUST be set
    /// according to RFC5988 with the Relation Type `rel="next"`". Berth includes
    /// it whenever a page is full; following it walks every tag once.
    async fn tags_list_link_header_names_the_next_page(app) {
        let name = "library/spec-tags-link";
        push_tags(&app, name, &["t0", "t1", "t2", "t3", "t4"]).await;
        let mut seen = Vec::new();
        let mut next = Some(format!("/v2/{name}/tags/list?n=2"));
        let mut pages = 0;
        while let Some(page) = next {
            let res = app.get(&page).send().await;
            let tags = tags_of(&res);
            next = next_link(&res);
            if seen.len() + tags.len() < 5 {
                assert!(next.is_some(), "more tags remain after {page}, but no Link");
            }
            seen.extend(tags);
            pages += 1;
            assert!(pages <= 4, "the Link header does not end");
        }
        assert_eq!(seen, ["t0", "t1", "t2", "t3", "t4"]);
    }
);

// ---------------------------------------------------------------------------
// Content discovery: referrers
// ---------------------------------------------------------------------------

registry_test!(
    /// spec.md "Listing Referrers": `GET /v2/<name>/referrers/<digest>` MUST
    /// return `200 OK` and an image index (`Content-Type:
    /// application/vnd.oci.image.index.v1+json`) of descriptors of the manifests
    /// whose `subject` is `<digest>`, with their `artifactType` and annotations.
    async fn referrers_list_the_manifests_with_that_subject(app) {
        let name = "library/spec-referrers";
        let (subject, subject_digest) = push_image(&app, name, "v1", &[b"referred to"]).await;
        let (sbom, sbom_digest) = push_artifact(
            &app,
            name,
            Some("application/vnd.example.sbom.v1"),
            &[b"sbom body"],
            Some(descriptor(OCI_MANIFEST, &subject)),
            Some(json!({"org.example.sbom.format": "json", "org.opencontainers.image.created": "2024-01-01T00:00:00Z"})),
        )
        .await;
        let (sig, sig_digest) = push_artifact(
            &app,
            name,
            Some("application/vnd.example.signature.v1"),
            &[b"signature body"],
            Some(descriptor(OCI_MANIFEST, &subject)),
            None,
        )
        .await;
        // Not a referrer: no subject.
        push_artifact(&app, name, Some("application/vnd.example.sbom.v1"), &[b"loose"], None, None).await;

        let res = app.get(&format!("/v2/{name}/referrers/{subject_digest}")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("content-type"), Some(OCI_INDEX));
        let body = res.json();
        assert_eq!(body["schemaVersion"], 2);
        assert_eq!(body["mediaType"], OCI_INDEX);
        let mut want = vec![
            json!({
                "mediaType": OCI_MANIFEST, "digest": sbom_digest, "size": sbom.len(),
                "artifactType": "application/vnd.example.sbom.v1",
                "annotations": {"org.example.sbom.format": "json", "org.opencontainers.image.created": "2024-01-01T00:00:00Z"},
            }),
            json!({
                "mediaType": OCI_MANIFEST, "digest": sig_digest, "size": sig.len(),
                "artifactType": "application/vnd.example.signature.v1",
            }),
        ];
        want.sort_by(|a, b| a["digest"].as_str().cmp(&b["digest"].as_str()));
        assert_eq!(referrer_list(&res), want);
    }
);

registry_test!(
    /// spec.md "Listing Referrers": "If the `artifactType` is empty or missing in
    /// the image manifest, the value of `artifactType` MUST be set to the config
    /// descriptor `mediaType` value".
    async fn referrers_artifact_type_defaults_to_the_config_media_type(app) {
        let name = "library/spec-referrers-config";
        let (subject, subject_digest) = push_image(&app, name, "v1", &[b"subject of a typed config"]).await;
        let config = br#"{"kind":"example"}"#;
        push_blobs(&app, name, &[config, b"payload"]).await;
        let referrer = bytes_of(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": descriptor("application/vnd.example.config.v1+json", config),
            "layers": [descriptor("application/octet-stream", b"payload")],
            "subject": descriptor(OCI_MANIFEST, &subject),
        }));
        let res = put_manifest(&app, name, &digest_of(&referrer), OCI_MANIFEST, &referrer).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/referrers/{subject_digest}")).send().await;
        let list = referrer_list(&res);
        assert_eq!(list.len(), 1, "{list:?}");
        assert_eq!(list[0]["artifactType"], "application/vnd.example.config.v1+json");
        assert_eq!(list[0]["digest"], digest_of(&referrer));
    }
);

registry_test!(
    /// spec.md "Listing Referrers": "If the `artifactType` is empty or missing in
    /// an index, the `artifactType` MUST be omitted"; the index's annotations
    /// are included.
    async fn referrers_of_an_index_without_artifact_type_omit_it(app) {
        let name = "library/spec-referrers-index";
        let (subject, subject_digest) = push_image(&app, name, "v1", &[b"subject of an index"]).await;
        let (child, _) = push_image(&app, name, "child", &[b"child of the referring index"]).await;
        let index = bytes_of(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [descriptor(OCI_MANIFEST, &child)],
            "subject": descriptor(OCI_MANIFEST, &subject),
            "annotations": {"org.example.kind": "index referrer"},
        }));
        let res = put_manifest(&app, name, &digest_of(&index), OCI_INDEX, &index).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/referrers/{subject_digest}")).send().await;
        assert_eq!(
            referrer_list(&res),
            vec![json!({
                "mediaType": OCI_INDEX,
                "digest": digest_of(&index),
                "size": index.len(),
                "annotations": {"org.example.kind": "index referrer"},
            })]
        );
    }
);

registry_test!(
    /// spec.md "Listing Referrers": the descriptors MUST include the
    /// `artifactType` of an index that has one.
    async fn referrers_of_an_index_with_artifact_type(app) {
        let name = "library/spec-referrers-typed-index";
        let (subject, subject_digest) = push_image(&app, name, "v1", &[b"subject of a typed index"]).await;
        let (child, _) = push_image(&app, name, "child", &[b"child of a typed index"]).await;
        let index = bytes_of(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "artifactType": "application/vnd.example.bundle.v1",
            "manifests": [descriptor(OCI_MANIFEST, &child)],
            "subject": descriptor(OCI_MANIFEST, &subject),
        }));
        let res = put_manifest(&app, name, &digest_of(&index), OCI_INDEX, &index).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("oci-subject"), Some(subject_digest.as_str()));
        let res = app.get(&format!("/v2/{name}/referrers/{subject_digest}")).send().await;
        assert_eq!(
            referrer_list(&res),
            vec![json!({
                "mediaType": OCI_INDEX,
                "digest": digest_of(&index),
                "size": index.len(),
                "artifactType": "application/vnd.example.bundle.v1",
            })]
        );
    }
);

registry_test!(
    /// spec.md "Listing Referrers": with `?artifactType=<artifactType>` (end-12b)
    /// only referrers of that type are listed, and "If filtering is requested
    /// and applied, the response MUST include a header `OCI-Filters-Applied:
    /// artifactType`".
    async fn referrers_filtered_by_artifact_type(app) {
        let name = "library/spec-referrers-filter";
        let (subject, subject_digest) = push_image(&app, name, "v1", &[b"filtered subject"]).await;
        let (_, sbom_digest) = push_artifact(
            &app, name, Some("application/vnd.example.sbom.v1"), &[b"filter sbom"],
            Some(descriptor(OCI_MANIFEST, &subject)), None,
        )
        .await;
        push_artifact(
            &app, name, Some("application/vnd.example.signature.v1"), &[b"filter sig"],
            Some(descriptor(OCI_MANIFEST, &subject)), None,
        )
        .await;
        let path = format!("/v2/{name}/referrers/{subject_digest}?artifactType=application/vnd.example.sbom.v1");
        let res = app.get(&path).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("oci-filters-applied"), Some("artifactType"));
        let list = referrer_list(&res);
        assert_eq!(list.len(), 1, "{list:?}");
        assert_eq!(list[0]["digest"], sbom_digest);
        // A filter nothing matches: an empty list, still filtered.
        let path = format!("/v2/{name}/referrers/{subject_digest}?artifactType=application/vnd.example.none");
        let res = app.get(&path).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("oci-filters-applied"), Some("artifactType"));
        assert_eq!(referrer_list(&res), Vec::<Value>::new());
        // Without a filter, no filter is claimed.
        let res = app.get(&format!("/v2/{name}/referrers/{subject_digest}")).send().await;
        assert_eq!(res.header("oci-filters-applied"), None);
        assert_eq!(referrer_list(&res).len(), 2);
    }
);

registry_test!(
    /// spec.md "Listing Referrers": "If a query results in no matching
    /// referrers, an empty manifest list MUST be returned" (`200 OK`, an image
    /// index, `Content-Type: application/vnd.oci.image.index.v1+json`); "the
    /// registry MUST NOT return a `404 Not Found`".
    async fn referrers_of_an_unknown_subject_are_an_empty_index(app) {
        let name = "library/spec-referrers-none";
        push_image(&app, name, "v1", &[b"no referrers here"]).await;
        let unknown = digest_of(b"a manifest nobody pushed");
        let res = app.get(&format!("/v2/{name}/referrers/{unknown}")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("content-type"), Some(OCI_INDEX));
        assert_eq!(res.json(), json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}));
    }
);

registry_test!(
    /// spec.md "Listing Referrers": "If the request is invalid, such as a
    /// `<digest>` with an invalid syntax, a `400 Bad Request` MUST be returned".
    async fn referrers_of_an_invalid_digest_is_400(app) {
        let name = "library/spec-referrers-invalid";
        push_image(&app, name, "v1", &[b"invalid referrers query"]).await;
        for digest in ["sha256:abc", "sha256:ZZZ", "notadigest:1234"] {
            let res = app.get(&format!("/v2/{name}/referrers/{digest}")).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{digest}: {}", res.text());
        }
    }
);

registry_test!(
    /// spec.md "Listing Referrers": "Each descriptor is of an image manifest or
    /// index in the same `<name>` namespace with a `subject` field that
    /// specifies the value of `<digest>`".
    async fn referrers_are_from_the_same_repository(app) {
        let (first, second) = ("library/spec-referrers-a", "library/spec-referrers-b");
        let (subject, subject_digest) = push_image(&app, first, "v1", &[b"shared subject"]).await;
        let (again, _) = push_image(&app, second, "v1", &[b"shared subject"]).await;
        assert_eq!(again, subject);
        let (_, referrer_digest) = push_artifact(
            &app, second, Some("application/vnd.example.sbom.v1"), &[b"only in b"],
            Some(descriptor(OCI_MANIFEST, &subject)), None,
        )
        .await;
        let res = app.get(&format!("/v2/{first}/referrers/{subject_digest}")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(referrer_list(&res), Vec::<Value>::new());
        let res = app.get(&format!("/v2/{second}/referrers/{subject_digest}")).send().await;
        let list = referrer_list(&res);
        assert_eq!(list.len(), 1, "{list:?}");
        assert_eq!(list[0]["digest"], referrer_digest);
    }
);

// ---------------------------------------------------------------------------
// Content management
// ---------------------------------------------------------------------------

registry_test!(
    /// spec.md "Deleting tags": `DELETE /v2/<name>/manifests/<tag>`; "Upon
    /// success, the registry MUST respond with a `202 Accepted` code" (v1.1.1:
    /// "Once deleted, a `GET` to `/v2/<name>/manifests/<tag>` will return a
    /// 404"). Only that tag goes.
    async fn delete_tag_is_202_then_404(app) {
        let name = "library/spec-delete-tag";
        push_tags(&app, name, &["keep", "drop"]).await;
        let res = app.delete(&format!("/v2/{name}/manifests/drop")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/manifests/drop")).admin().send().await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "MANIFEST_UNKNOWN");
        let res = app.get(&format!("/v2/{name}/manifests/keep")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get(&format!("/v2/{name}/tags/list")).send().await;
        assert_eq!(tags_of(&res), ["keep"]);
    }
);

registry_test!(
    /// spec.md "Deleting Manifests": `DELETE /v2/<name>/manifests/<digest>`;
    /// "Upon success, the registry MUST respond with a `202 Accepted` code"
    /// (v1.1.1: "Once deleted, a `GET` to `/v2/<name>/manifests/<digest>` and
    /// any tag pointing to that digest will return a 404").
    async fn delete_manifest_is_202_then_404(app) {
        let name = "library/spec-delete-manifest";
        let (_, digest) = push_image(&app, name, "v1", &[b"deleted manifest"]).await;
        let res = app.delete(&format!("/v2/{name}/manifests/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        for reference in [digest.as_str(), "v1"] {
            let res = app.get(&format!("/v2/{name}/manifests/{reference}")).admin().send().await;
            assert_spec_error(&res, StatusCode::NOT_FOUND, "MANIFEST_UNKNOWN");
            let res = head(&app, &format!("/v2/{name}/manifests/{reference}")).await;
            assert_eq!(res.status, StatusCode::NOT_FOUND);
        }
        // Deleting it again: it is not found.
        let res = app.delete(&format!("/v2/{name}/manifests/{digest}")).admin().send().await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "MANIFEST_UNKNOWN");
    }
);

registry_test!(
    /// spec.md "Deleting Manifests": "If the repository does not exist, the
    /// response MUST return `404 Not Found`".
    async fn delete_manifest_in_a_nonexistent_repository_is_404(app) {
        let digest = digest_of(b"nothing");
        let res = app.delete(&format!("/v2/library/spec-delete-nowhere/manifests/{digest}")).admin().send().await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "NAME_UNKNOWN");
    }
);

registry_test!(
    /// spec.md "Deleting Blobs": `DELETE /v2/<name>/blobs/<digest>`; "Upon
    /// success, the registry MUST respond with code `202 Accepted`" and the
    /// blob is no longer served; "If the blob is not found, a `404 Not Found`
    /// code MUST be returned".
    async fn delete_blob_is_202_then_404(app) {
        let name = "library/spec-delete-blob";
        let digest = push_blob(&app, name, b"a blob to delete").await;
        let res = app.delete(&format!("/v2/{name}/blobs/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/blobs/{digest}")).admin().send().await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "BLOB_UNKNOWN");
        let res = head(&app, &format!("/v2/{name}/blobs/{digest}")).await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.delete(&format!("/v2/{name}/blobs/{digest}")).admin().send().await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "BLOB_UNKNOWN");
    }
);

registry_test!(
    /// spec.md "Deleting Blobs": once the manifest using them is deleted, a
    /// client deletes the config and layers: `202 Accepted`, then `404`.
    async fn blobs_of_a_deleted_manifest_can_be_deleted(app) {
        let name = "library/spec-delete-image";
        let layer = b"layer of a deleted image";
        let (manifest, digest) = push_image(&app, name, "v1", &[layer]).await;
        let manifest: Value = serde_json::from_slice(&manifest).unwrap();
        let res = app.delete(&format!("/v2/{name}/manifests/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        let config = manifest["config"]["digest"].as_str().unwrap().to_string();
        for blob in [config, digest_of(layer)] {
            let res = app.delete(&format!("/v2/{name}/blobs/{blob}")).admin().send().await;
            assert_eq!(res.status, StatusCode::ACCEPTED, "{blob}: {}", res.text());
            let res = app.get(&format!("/v2/{name}/blobs/{blob}")).admin().send().await;
            assert_eq!(res.status, StatusCode::NOT_FOUND, "{blob}");
        }
    }
);

// ---------------------------------------------------------------------------
// Error codes
// ---------------------------------------------------------------------------

registry_test!(
    /// spec.md "Error Codes": a JSON error body MUST be `{"errors": [{"code",
    /// "message", "detail"}]}`, "The `code` field MUST be a unique identifier,
    /// containing only uppercase alphabetic characters and underscores" and
    /// "MUST be one of the following" (the table); `message` is a string.
    async fn error_bodies_use_only_the_spec_codes(app) {
        let name = "library/spec-error-bodies";
        push_image(&app, name, "v1", &[b"error bodies"]).await;
        let upload = open_upload(&app, name).await;
        let unknown = digest_of(b"unknown");
        let mut answers = vec![
            app.get(&format!("/v2/{name}/blobs/{unknown}")).admin().send().await,
            app.get(&format!("/v2/{name}/blobs/sha256:nothex")).admin().send().await,
            app.get(&format!("/v2/{name}/manifests/nosuch")).admin().send().await,
            app.get("/v2/library/spec-error-nowhere/manifests/v1").admin().send().await,
            app.get("/v2/library/Spec-Upper/tags/list").admin().send().await,
            put_manifest(&app, name, "bad", OCI_MANIFEST, b"{\"schemaVersion\": 2, ").await,
            put_manifest(&app, name, "missing", OCI_MANIFEST, &image_manifest(b"{\"x\":1}", &[])).await,
            app.get(&format!("/v2/{name}/blobs/uploads/00000000-0000-0000-0000-000000000000")).admin().send().await,
            patch_chunk(&app, &upload, 3, b"gap").await,
            app.post(&format!("/v2/{name}/blobs/uploads/")).send().await,
        ];
        app.create_user("spectator", "Spectator123").await;
        answers.push(app.post(&format!("/v2/{name}/blobs/uploads/")).basic("spectator", "Spectator123").send().await);
        for res in &answers {
            assert!(res.status.is_client_error(), "{}: {}", res.status, res.text());
            let body = res.json();
            let errors = body["errors"].as_array().unwrap_or_else(|| panic!("no errors list: {body}"));
            assert!(!errors.is_empty(), "{body}");
            for error in errors {
                let code = error["code"].as_str().unwrap_or_else(|| panic!("no code: {body}"));
                assert!(SPEC_CODES.contains(&code), "{code} is not in the spec's table");
                assert!(code.chars().all(|c| c.is_ascii_uppercase() || c == '_'), "{code}");
                if let Some(message) = error.get("message") {
                    assert!(message.is_string(), "{body}");
                }
            }
        }
    }
);

registry_test!(
    /// spec.md "Error Codes": `DIGEST_INVALID` ("provided digest did not match
    /// uploaded content", code-4) for a malformed digest and for a closing PUT
    /// whose digest does not match the bytes (end-6: failure 400).
    async fn invalid_digest_is_digest_invalid(app) {
        let name = "library/spec-digest-invalid";
        push_blob(&app, name, b"present").await;
        let res = app.get(&format!("/v2/{name}/blobs/sha256:1234")).admin().send().await;
        assert_spec_error(&res, StatusCode::BAD_REQUEST, "DIGEST_INVALID");
        let upload = open_upload(&app, name).await;
        let request = app.put(&with_query(&upload, &format!("digest={}", digest_of(b"not these bytes")))).admin();
        let res = send_octets(request, b"these bytes").await;
        assert_spec_error(&res, StatusCode::BAD_REQUEST, "DIGEST_INVALID");
    }
);

registry_test!(
    /// spec.md "Pushing Manifests": `Docker-Content-Digest` "MUST be equal to the
    /// client provided digest"; a manifest PUT by a digest that is not the
    /// body's is refused with `DIGEST_INVALID` ("provided digest did not match
    /// uploaded content") and stores nothing.
    async fn manifest_put_by_a_digest_of_other_bytes_is_digest_invalid(app) {
        let name = "library/spec-manifest-digest";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        push_blobs(&app, name, &[config, b"digest mismatch"]).await;
        let manifest = image_manifest(config, &[b"digest mismatch"]);
        let other = digest_of(b"some other manifest");
        let res = put_manifest(&app, name, &other, OCI_MANIFEST, &manifest).await;
        assert_spec_error(&res, StatusCode::BAD_REQUEST, "DIGEST_INVALID");
        for reference in [other, digest_of(&manifest)] {
            let res = head(&app, &format!("/v2/{name}/manifests/{reference}")).await;
            assert_eq!(res.status, StatusCode::NOT_FOUND);
        }
    }
);

registry_test!(
    /// spec.md "Error Codes": `MANIFEST_INVALID` ("manifest invalid", code-6)
    /// for a manifest body that is not a manifest.
    async fn invalid_manifest_is_manifest_invalid(app) {
        let name = "library/spec-manifest-invalid";
        push_image(&app, name, "v1", &[b"valid one"]).await;
        for body in [&b"{not json"[..], b"[]", br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}"#] {
            let res = put_manifest(&app, name, "v2", OCI_MANIFEST, body).await;
            assert_spec_error(&res, StatusCode::BAD_REQUEST, "MANIFEST_INVALID");
        }
    }
);

registry_test!(
    /// spec.md "Error Codes": `NAME_INVALID` ("invalid repository name",
    /// code-8) for a `<name>` that does not match the spec's expression.
    async fn invalid_repository_name_is_name_invalid(app) {
        for path in ["/v2/library/Spec-Upper/manifests/v1", "/v2/library/spec--/tags/list", "/v2/library/-spec/blobs/uploads/"] {
            let res = app.request(if path.ends_with("uploads/") { Method::POST } else { Method::GET }, path).admin().send().await;
            assert_spec_error(&res, StatusCode::BAD_REQUEST, "NAME_INVALID");
        }
    }
);

registry_test!(
    /// spec.md "Error Codes": `BLOB_UPLOAD_UNKNOWN` ("blob upload unknown to
    /// registry", code-3) for an upload that was never started (end-13,
    /// end-5, end-6: failure 404).
    async fn unknown_upload_is_blob_upload_unknown(app) {
        let name = "library/spec-upload-unknown";
        push_blob(&app, name, b"so the repository exists").await;
        let upload = format!("/v2/{name}/blobs/uploads/6f1b2a3c-0d4e-4f5a-8b9c-0123456789ab");
        let res = app.get(&upload).admin().send().await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "BLOB_UPLOAD_UNKNOWN");
        let res = patch_chunk(&app, &upload, 0, b"chunk").await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "BLOB_UPLOAD_UNKNOWN");
        let res = close_upload(&app, &upload, &digest_of(b"chunk")).await;
        assert_spec_error(&res, StatusCode::NOT_FOUND, "BLOB_UPLOAD_UNKNOWN");
    }
);

registry_test!(
    /// spec.md "Error Codes": `UNAUTHORIZED` ("authentication required",
    /// code-11) for a push without credentials.
    async fn push_without_credentials_is_unauthorized(app) {
        let name = "library/spec-unauthorized";
        let res = app.post(&format!("/v2/{name}/blobs/uploads/")).header("content-length", "0").send().await;
        assert_spec_error(&res, StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
        let manifest = image_manifest(b"{}", &[]);
        let res = app
            .put(&format!("/v2/{name}/manifests/v1"))
            .raw(OCI_MANIFEST, manifest)
            .send()
            .await;
        assert_spec_error(&res, StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    }
);

registry_test!(
    /// spec.md "Error Codes": a push by a user who may only pull is refused
    /// with a code of the table: `UNAUTHORIZED` ("authentication required",
    /// code-11), with Harbor's message naming the repository and the action
    /// (Harbor answers 401, not `DENIED`, and docker shows its message).
    async fn push_without_permission_is_refused(app) {
        let name = "library/spec-denied";
        push_image(&app, name, "v1", &[b"denied"]).await;
        app.create_user("reader", "Reader12345").await;
        let res = app
            .post(&format!("/v2/{name}/blobs/uploads/"))
            .basic("reader", "Reader12345")
            .header("content-length", "0")
            .send()
            .await;
        assert_spec_error(&res, StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
        assert_eq!(res.json()["errors"][0]["message"], format!("unauthorized to access repository: {name}, action: push: unauthorized to access repository: {name}, action: push"));
        let res = app.delete(&format!("/v2/{name}/manifests/v1")).basic("reader", "Reader12345").send().await;
        assert_spec_error(&res, StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
        // Pulling is still allowed.
        let res = app.get(&format!("/v2/{name}/manifests/v1")).basic("reader", "Reader12345").send().await;
        assert_eq!(res.status, StatusCode::OK);
    }
);

// ---------------------------------------------------------------------------
// Digests
// ---------------------------------------------------------------------------

registry_test!(
    /// spec.md "Definitions" (digests per the OCI image spec, apdx-3, which
    /// registers `sha256` and `sha512`) and "Single POST": a blob pushed by its
    /// `sha512:` digest is `201 Created` and pulled by that digest, with a
    /// `Docker-Content-Digest` matching the body.
    async fn sha512_blob_single_post(app) {
        let name = "library/spec-sha512";
        let blob = b"hashed with sha512".to_vec();
        let digest = sha512_of(&blob);
        let request = app.post(&format!("/v2/{name}/blobs/uploads/?digest={digest}")).admin();
        let res = send_octets(request, &blob).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(location(&res), format!("/v2/{name}/blobs/{digest}"));
        let res = app.get(&format!("/v2/{name}/blobs/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.body, blob);
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        let res = head(&app, &format!("/v2/{name}/blobs/{digest}")).await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("content-length"), Some(blob.len().to_string().as_str()));
    }
);

registry_test!(
    /// spec.md (main, after 1.1) "Pushing a blob in chunks": "When pushing a blob
    /// with a digest algorithm other than `sha256`, the post request SHOULD
    /// include the `digest-algorithm` parameter" (end-4c); the chunked upload
    /// then closes with the `sha512:` digest: `201 Created`.
    async fn sha512_blob_chunked_with_digest_algorithm(app) {
        let name = "library/spec-sha512-chunked";
        let res = app
            .post(&format!("/v2/{name}/blobs/uploads/?digest-algorithm=sha512"))
            .admin()
            .header("content-length", "0")
            .send()
            .await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        let upload = location(&res);
        let res = patch_chunk(&app, &upload, 0, b"sha512 in ").await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let res = patch_chunk(&app, &location(&res), 10, b"two chunks").await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let digest = sha512_of(b"sha512 in two chunks");
        let res = close_upload(&app, &location(&res), &digest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&location(&res)).admin().send().await;
        assert_eq!(res.body, b"sha512 in two chunks");
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
    }
);

registry_test!(
    /// spec.md "Pushing Manifests": a manifest whose blobs are `sha512:`
    /// descriptors, PUT by its own `sha512:` digest: `201 Created`, and
    /// `Docker-Content-Digest` "MUST be equal to the client provided digest";
    /// it is then pulled by that digest.
    async fn sha512_manifest_by_digest(app) {
        let name = "library/spec-sha512-manifest";
        let config = br#"{"architecture":"amd64","os":"linux","sha512":true}"#;
        let layer = b"sha512 layer";
        for blob in [&config[..], layer] {
            let request = app.post(&format!("/v2/{name}/blobs/uploads/?digest={}", sha512_of(blob))).admin();
            let res = send_octets(request, blob).await;
            assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        }
        let manifest = bytes_of(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": sha512_of(config), "size": config.len()},
            "layers": [{"mediaType": OCI_LAYER, "digest": sha512_of(layer), "size": layer.len()}],
        }));
        let digest = sha512_of(&manifest);
        let res = put_manifest(&app, name, &digest, OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        let res = app.get(&format!("/v2/{name}/manifests/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.body, manifest);
    }
);

// ---------------------------------------------------------------------------
// The kinds of content the conformance data sets push
// ---------------------------------------------------------------------------

registry_test!(
    /// spec.md "Definitions" (Image Index, apdx-6) and "Pushing Manifests": an
    /// image index whose child manifests were pushed first is accepted and
    /// pulled back byte for byte, its children by digest.
    async fn image_index_with_its_manifests_pushed_first(app) {
        let name = "library/spec-index";
        let config_amd = br#"{"architecture":"amd64","os":"linux"}"#;
        let config_arm = br#"{"architecture":"arm64","os":"linux"}"#;
        push_blobs(&app, name, &[config_amd, config_arm, b"amd64 layer", b"arm64 layer"]).await;
        let amd = image_manifest(config_amd, &[b"amd64 layer"]);
        let arm = image_manifest(config_arm, &[b"arm64 layer"]);
        for child in [&amd, &arm] {
            let res = put_manifest(&app, name, &digest_of(child), OCI_MANIFEST, child).await;
            assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        }
        let mut amd_entry = descriptor(OCI_MANIFEST, &amd);
        amd_entry["platform"] = json!({"architecture": "amd64", "os": "linux"});
        let mut arm_entry = descriptor(OCI_MANIFEST, &arm);
        arm_entry["platform"] = json!({"architecture": "arm64", "os": "linux", "variant": "v8"});
        let index = bytes_of(&json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [amd_entry, arm_entry]}));
        let res = put_manifest(&app, name, "multi", OCI_INDEX, &index).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("docker-content-digest"), Some(digest_of(&index).as_str()));
        let res = app.get(&format!("/v2/{name}/manifests/multi")).admin().send().await;
        assert_eq!(res.body, index);
        assert_eq!(res.header("content-type"), Some(OCI_INDEX));
        for child in [&amd, &arm] {
            let res = app.get(&format!("/v2/{name}/manifests/{}", digest_of(child))).admin().send().await;
            assert_eq!(&res.body, child);
        }
    }
);

registry_test!(
    /// spec.md "Definitions" (Object: content "stored as blobs with an
    /// accompanying manifest") and "Pushing Manifests": an artifact manifest
    /// (`artifactType`, the empty config `application/vnd.oci.empty.v1+json`
    /// with the blob `{}`) is pushed and pulled like any manifest.
    async fn artifact_manifest_with_the_empty_config(app) {
        let name = "library/spec-artifact";
        let (manifest, digest) = push_artifact(&app, name, Some("application/vnd.example.data.v1"), &[b"artifact payload"], None, None).await;
        let res = put_manifest(&app, name, "artifact", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/manifests/artifact")).admin().send().await;
        assert_eq!(res.body, manifest);
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        let res = app.get(&format!("/v2/{name}/blobs/{}", digest_of(EMPTY_JSON))).admin().send().await;
        assert_eq!(res.body, EMPTY_JSON);
    }
);

registry_test!(
    /// spec.md "Pushing Manifests": "The registry MUST store the manifest in the
    /// exact byte representation provided by the client" — here with the
    /// descriptor `data` field (embedded content, apdx-5).
    async fn descriptor_data_field_is_kept(app) {
        let name = "library/spec-data-field";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        let layer = b"embedded layer";
        push_blobs(&app, name, &[config, layer]).await;
        let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let mut config_entry = descriptor(OCI_CONFIG, config);
        config_entry["data"] = json!(encode(config));
        let mut layer_entry = descriptor(OCI_LAYER, layer);
        layer_entry["data"] = json!(encode(layer));
        let manifest = bytes_of(&json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config_entry, "layers": [layer_entry]}));
        let res = put_manifest(&app, name, "data", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/manifests/data")).admin().send().await;
        assert_eq!(res.body, manifest);
        assert_eq!(res.header("docker-content-digest"), Some(digest_of(&manifest).as_str()));
    }
);

registry_test!(
    /// spec.md "Pushing Manifests" ("The uploaded manifest MUST reference any
    /// blobs that make up the object") with non-distributable layers
    /// (`application/vnd.oci.image.layer.nondistributable.v1.tar`): pushed with
    /// their blob, the manifest and the layer are pulled back.
    async fn nondistributable_layer(app) {
        let name = "library/spec-nondistributable";
        let config = br#"{"architecture":"amd64","os":"windows"}"#;
        let layer = b"a layer with a restricted licence";
        push_blobs(&app, name, &[config, layer]).await;
        let manifest = bytes_of(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": descriptor(OCI_CONFIG, config),
            "layers": [
                descriptor(NONDISTRIBUTABLE_LAYER, layer),
                descriptor(&format!("{NONDISTRIBUTABLE_LAYER}+gzip"), layer),
            ],
        }));
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/manifests/v1")).admin().send().await;
        assert_eq!(res.body, manifest);
        let res = app.get(&format!("/v2/{name}/blobs/{}", digest_of(layer))).admin().send().await;
        assert_eq!(res.body, layer);
    }
);

registry_test!(
    /// spec.md "Pushing Manifests": "The registry MUST store the manifest in the
    /// exact byte representation provided by the client": unknown fields,
    /// annotations, key order and whitespace are kept, so GET returns the bytes
    /// PUT and their digest.
    async fn custom_fields_and_annotations_are_kept_byte_for_byte(app) {
        let name = "library/spec-custom-fields";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        let layer = b"custom fields layer";
        push_blobs(&app, name, &[config, layer]).await;
        let manifest = format!(
            "{{\n  \"schemaVersion\" : 2,\n\t\"mediaType\": \"{OCI_MANIFEST}\",\n  \"org.example.custom\": {{\"nested\": [1, 2.50, \"\\u00e9\"]}},\n  \"config\": {{\"size\": {}, \"digest\": \"{}\", \"mediaType\": \"{OCI_CONFIG}\", \"org.example.extra\": true}},\n  \"layers\": [ {{\"mediaType\": \"{OCI_LAYER}\", \"digest\": \"{}\", \"size\": {}, \"annotations\": {{\"org.example.layer\": \"first\"}}}} ],\n  \"annotations\": {{\"org.opencontainers.image.title\": \"Spec\", \"org.example.z\": \"last\", \"org.example.a\": \"\"}}\n}}\n",
            config.len(),
            digest_of(config),
            digest_of(layer),
            layer.len(),
        )
        .into_bytes();
        let digest = digest_of(&manifest);
        let res = put_manifest(&app, name, "custom", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        for reference in ["custom", digest.as_str()] {
            let res = app.get(&format!("/v2/{name}/manifests/{reference}")).admin().send().await;
            assert_eq!(res.body, manifest, "{reference}");
            assert_eq!(digest_of(&res.body), digest);
        }
    }
);

registry_test!(
    /// spec.md "Pushing Manifests": "The uploaded manifest MUST reference any
    /// blobs that make up the object. However, the list of blobs MAY be empty":
    /// a manifest with `layers: []` is accepted.
    async fn manifest_with_no_layers(app) {
        let name = "library/spec-no-layers";
        let config = br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
        push_blob(&app, name, config).await;
        let manifest = image_manifest(config, &[]);
        assert!(String::from_utf8_lossy(&manifest).contains("\"layers\":[]"));
        let res = put_manifest(&app, name, "empty", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/manifests/empty")).admin().send().await;
        assert_eq!(res.body, manifest);
    }
);

registry_test!(
    /// spec.md "POST then PUT" and "Pulling blobs" for the empty blob (zero
    /// bytes, `sha256:e3b0c442...`): the PUT of zero bytes with `Content-Length:
    /// 0` closes the session with `201 Created`; the blob is pulled back empty
    /// with `200 OK`, and `Content-Length: 0` on HEAD.
    async fn empty_blob_post_then_put(app) {
        let name = "library/spec-empty-blob";
        assert_eq!(digest_of(b""), EMPTY_BLOB_SHA256);
        let upload = open_upload(&app, name).await;
        let request = app.put(&with_query(&upload, &format!("digest={EMPTY_BLOB_SHA256}"))).admin();
        let res = send_octets(request, b"").await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&location(&res)).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert!(res.body.is_empty());
        assert_eq!(res.header("docker-content-digest"), Some(EMPTY_BLOB_SHA256));
        let res = head(&app, &format!("/v2/{name}/blobs/{EMPTY_BLOB_SHA256}")).await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("content-length"), Some("0"));
    }
);

registry_test!(
    /// spec.md "Single POST" and "Pulling blobs" for the empty blob (zero bytes,
    /// `sha256:e3b0c442...`): one POST with `Content-Length: 0` is `201
    /// Created`; the blob is pulled back empty with `200 OK` and its digest, and
    /// `Content-Length: 0` on HEAD.
    async fn empty_blob_single_post(app) {
        let name = "library/spec-empty-blob-post";
        assert_eq!(digest_of(b""), EMPTY_BLOB_SHA256);
        let request = app.post(&format!("/v2/{name}/blobs/uploads/?digest={EMPTY_BLOB_SHA256}")).admin();
        let res = send_octets(request, b"").await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&location(&res)).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert!(res.body.is_empty());
        assert_eq!(res.header("docker-content-digest"), Some(EMPTY_BLOB_SHA256));
        let res = head(&app, &format!("/v2/{name}/blobs/{EMPTY_BLOB_SHA256}")).await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("content-length"), Some("0"));
    }
);
