//! The OCI distribution API (`/v2/`) and the token service.

pub(crate) mod clients;
mod conformance_codes;
mod gc;
mod hostile_peers;
mod instances;
mod integrity;
mod jobs;
mod object_store;
mod outbound;
mod protocol;
mod proxy_cache;
mod replication;
mod signed_pulls;
mod spec;
mod tls;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::util::TestApp;

/// spec.md "Error Codes": "The `code` field MUST be one of the following".
pub const SPEC_CODES: [&str; 14] = [
    "BLOB_UNKNOWN",
    "BLOB_UPLOAD_INVALID",
    "BLOB_UPLOAD_UNKNOWN",
    "DIGEST_INVALID",
    "MANIFEST_BLOB_UNKNOWN",
    "MANIFEST_INVALID",
    "MANIFEST_UNKNOWN",
    "NAME_INVALID",
    "NAME_UNKNOWN",
    "SIZE_INVALID",
    "UNAUTHORIZED",
    "DENIED",
    "UNSUPPORTED",
    "TOOMANYREQUESTS",
];

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Pushes `bytes` monolithically as admin and returns the digest.
pub async fn push_blob(app: &TestApp, name: &str, bytes: &[u8]) -> String {
    let digest = digest_of(bytes);
    let res = app
        .post(&format!("/v2/{name}/blobs/uploads/?digest={digest}"))
        .admin()
        .raw("application/octet-stream", bytes.to_vec())
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
    digest
}

/// A descriptor JSON value.
pub fn descriptor(media_type: &str, bytes: &[u8]) -> Value {
    json!({"mediaType": media_type, "digest": digest_of(bytes), "size": bytes.len()})
}

/// An OCI image manifest over `config` and `layers` (already pushed).
pub fn image_manifest(config: &[u8], layers: &[&[u8]]) -> Vec<u8> {
    json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": descriptor("application/vnd.oci.image.config.v1+json", config),
        "layers": layers
            .iter()
            .map(|l| descriptor("application/vnd.oci.image.layer.v1.tar+gzip", l))
            .collect::<Vec<_>>(),
    })
    .to_string()
    .into_bytes()
}

/// Pushes a small image (config + `layers`) as `name:reference`; returns the manifest and its digest.
pub async fn push_image(
    app: &TestApp,
    name: &str,
    reference: &str,
    layers: &[&[u8]],
) -> (Vec<u8>, String) {
    let config = format!(
        r#"{{"architecture":"amd64","os":"linux","layers":{}}}"#,
        layers.len()
    )
    .into_bytes();
    push_blob(app, name, &config).await;
    for layer in layers {
        push_blob(app, name, layer).await;
    }
    let manifest = image_manifest(&config, layers);
    let res = put_manifest(
        app,
        name,
        reference,
        "application/vnd.oci.image.manifest.v1+json",
        &manifest,
    )
    .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    let digest = digest_of(&manifest);
    (manifest, digest)
}

/// PUTs a manifest body as admin.
pub async fn put_manifest(
    app: &TestApp,
    name: &str,
    reference: &str,
    media_type: &str,
    body: &[u8],
) -> crate::util::TestResponse {
    app.request(Method::PUT, &format!("/v2/{name}/manifests/{reference}"))
        .admin()
        .raw(media_type, body.to_vec())
        .send()
        .await
}

/// The single OCI error code of a response.
pub fn error_code(res: &crate::util::TestResponse) -> String {
    let body = res.json();
    assert_eq!(body["errors"].as_array().map(Vec::len), Some(1), "{body}");
    body["errors"][0]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
