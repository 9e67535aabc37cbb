//! Signed-only pulls: with `enable_content_trust_cosign`, a manifest without a
//! cosign signature is not served to callers who cannot push (and sign).

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::{descriptor, digest_of, error_code, push_blob, push_image, put_manifest};
use crate::registry_test;
use crate::util::TestApp;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// Pushes a cosign-style signature of `subject` (`size` bytes) into `name`.
async fn sign(app: &TestApp, name: &str, subject: &str, size: usize) -> String {
    let payload = (
        "application/vnd.dev.cosign.simplesigning.v1+json",
        "cosign payload",
    );
    push_signature(
        app,
        name,
        subject,
        size,
        "application/vnd.dev.cosign.artifact.sig.v1+json",
        payload,
    )
    .await
}

/// Pushes a Notation signature of `subject` (`size` bytes) into `name`.
async fn sign_with_notation(app: &TestApp, name: &str, subject: &str, size: usize) -> String {
    let envelope = ("application/jose+json", "notation envelope");
    push_signature(
        app,
        name,
        subject,
        size,
        "application/vnd.cncf.notary.signature",
        envelope,
    )
    .await
}

/// Pushes a signature of `subject` of `artifact_type`, whose one layer is
/// `layer` (media type and a text) into `name`; its digest.
async fn push_signature(
    app: &TestApp,
    name: &str,
    subject: &str,
    size: usize,
    artifact_type: &str,
    layer: (&str, &str),
) -> String {
    let empty = b"{}".to_vec();
    push_blob(app, name, &empty).await;
    let payload = format!("{} for {subject}", layer.1).into_bytes();
    push_blob(app, name, &payload).await;
    let signature = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": descriptor("application/vnd.oci.empty.v1+json", &empty),
        "layers": [descriptor(layer.0, &payload)],
        "subject": {"mediaType": OCI_MANIFEST, "digest": subject, "size": size},
    })
    .to_string()
    .into_bytes();
    let digest = digest_of(&signature);
    let res = put_manifest(app, name, &digest, OCI_MANIFEST, &signature).await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    digest
}

registry_test!(
    async fn only_signed_artifacts_are_pulled_where_the_project_asks_for_it(app) {
        let body = json!({"project_name": "trusted", "metadata": {"public": "true", "enable_content_trust_cosign": "true"}});
        let res = app.post("/api/v2.0/projects").admin().json(&body).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let name = "trusted/app";
        let (v1, v1_digest) = push_image(&app, name, "v1", &[b"layer one"]).await;
        push_image(&app, name, "v2", &[b"layer two"]).await;
        app.create_user("reader", "Reader-Passw0rd").await;
        let get = |reference: &str, user: Option<(&str, &str)>| {
            let mut request = app
                .request(Method::GET, &format!("/v2/{name}/manifests/{reference}"))
                .header("accept", &format!("{OCI_MANIFEST}, {OCI_INDEX}"));
            if let Some((login, password)) = user {
                request = request.basic(login, password);
            }
            request.send()
        };

        let res = get("v1", None).await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert_eq!(error_code(&res), "DENIED");
        assert!(res.text().contains("The image is not signed by cosign."), "{}", res.text());
        assert_eq!(get("v1", Some(("reader", "Reader-Passw0rd"))).await.status, StatusCode::PRECONDITION_FAILED);
        let res = app.request(Method::HEAD, &format!("/v2/{name}/manifests/v1")).send().await;
        assert_eq!(res.status, StatusCode::OK, "HEAD is not a pull");
        let res = get("v1", Some(("admin", crate::util::ADMIN_PASSWORD))).await;
        assert_eq!(res.status, StatusCode::OK, "who may push (and sign) pulls");

        let signature = sign(&app, name, &v1_digest, v1.len()).await;
        let res = get("v1", None).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.body, v1);
        assert_eq!(get(&signature, None).await.status, StatusCode::OK, "a signature is served");
        assert_eq!(get("v2", None).await.status, StatusCode::PRECONDITION_FAILED);

        // A signed index: its children are pulled too.
        let (amd, amd_digest) = push_image(&app, name, "amd", &[b"amd layer"]).await;
        let (arm, arm_digest) = push_image(&app, name, "arm", &[b"arm layer"]).await;
        let index = json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {"mediaType": OCI_MANIFEST, "digest": amd_digest, "size": amd.len()},
                {"mediaType": OCI_MANIFEST, "digest": arm_digest, "size": arm.len()},
            ],
        })
        .to_string()
        .into_bytes();
        let res = put_manifest(&app, name, "multi", OCI_INDEX, &index).await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(get(&amd_digest, None).await.status, StatusCode::PRECONDITION_FAILED);
        sign(&app, name, &digest_of(&index), index.len()).await;
        assert_eq!(get("multi", None).await.status, StatusCode::OK);
        assert_eq!(get(&amd_digest, None).await.status, StatusCode::OK);
        assert_eq!(get(&arm_digest, None).await.status, StatusCode::OK);

        // The policy off: everything is served again.
        let res = app
            .put("/api/v2.0/projects/trusted/metadatas/enable_content_trust_cosign")
            .admin()
            .json(&json!({"enable_content_trust_cosign": "false"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(get("v2", None).await.status, StatusCode::OK);
    }
);

registry_test!(
    /// `enable_content_trust` asks for a Notation signature as
    /// `enable_content_trust_cosign` asks for a cosign one: a cosign
    /// signature does not stand in for it, and both may be required at once.
    async fn notation_signatures_are_required_where_the_project_asks_for_them(app) {
        let body = json!({"project_name": "notarized", "metadata": {"public": "true", "enable_content_trust": "true"}});
        let res = app.post("/api/v2.0/projects").admin().json(&body).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let name = "notarized/app";
        let (v1, digest) = push_image(&app, name, "v1", &[b"notarized layer"]).await;
        let get = || {
            app.request(Method::GET, &format!("/v2/{name}/manifests/v1"))
                .header("accept", OCI_MANIFEST)
                .send()
        };
        let res = get().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert!(res.text().contains("The image is not signed by notation."), "{}", res.text());
        sign(&app, name, &digest, v1.len()).await;
        assert_eq!(get().await.status, StatusCode::PRECONDITION_FAILED, "a cosign signature is not a Notation one");
        sign_with_notation(&app, name, &digest, v1.len()).await;
        let res = get().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.body, v1);

        // Both required: both needed.
        let res = app
            .post("/api/v2.0/projects/notarized/metadatas")
            .admin()
            .json(&json!({"enable_content_trust_cosign": "true"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(get().await.status, StatusCode::OK, "signed both ways");
        let (v2, v2_digest) = push_image(&app, name, "v2", &[b"second"]).await;
        sign_with_notation(&app, name, &v2_digest, v2.len()).await;
        let res = app.request(Method::GET, &format!("/v2/{name}/manifests/v2")).header("accept", OCI_MANIFEST).send().await;
        assert!(res.text().contains("not signed by cosign"), "{}", res.text());
    }
);
