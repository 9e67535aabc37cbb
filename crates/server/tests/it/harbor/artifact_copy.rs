//! CopyArtifact and listAccessories.

use axum::http::StatusCode;
use serde_json::json;

use crate::backend_test;
use crate::registry::{descriptor, digest_of, push_blob, push_image, put_manifest};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

async fn create_project(app: &crate::util::TestApp, name: &str, public: bool) {
    let body = json!({"project_name": name, "metadata": {"public": public.to_string()}});
    let res = app
        .post("/api/v2.0/projects")
        .admin()
        .json(&body)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
}

backend_test!(
    async fn a_copy_has_the_same_manifest_tags_and_blobs_and_is_charged_to_its_project(app) {
        create_project(&app, "dest", false).await;
        let layer = b"a layer promoted by copy".to_vec();
        let (manifest, digest) = push_image(&app, "library/src", "v1", &[&layer]).await;
        let res = app
            .post(&format!("/api/v2.0/projects/library/repositories/src/artifacts/{digest}/tags"))
            .admin()
            .json(&json!({"name": "stable"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());

        let res = app
            .post("/api/v2.0/projects/dest/repositories/app/artifacts?from=library/src:v1")
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(
            res.header("location"),
            Some(format!("/api/v2.0/projects/dest/repositories/app/artifacts/{digest}").as_str())
        );
        for tag in ["v1", "stable"] {
            let res = app
                .get(&format!("/v2/dest/app/manifests/{tag}"))
                .admin()
                .header("accept", OCI_MANIFEST)
                .send()
                .await;
            assert_eq!(res.status, StatusCode::OK, "{tag}");
            assert_eq!(res.body, manifest, "{tag}");
        }
        let res = app.get(&format!("/v2/dest/app/blobs/{}", digest_of(&layer))).admin().send().await;
        assert_eq!(res.body, layer);
        let (_, used) = app.store().projects().quota(2).await.unwrap().unwrap();
        assert!(used >= layer.len() as i64, "the copy is charged to dest: {used}");
        let body = app.get("/api/v2.0/projects/dest/repositories/app/artifacts").admin().send().await.json();
        assert_eq!(body.as_array().map(Vec::len), Some(1), "{body}");
        assert_eq!(body[0]["digest"], digest.as_str());

        // An index by digest: its children come along.
        let (amd, amd_digest) = push_image(&app, "library/multi", "amd", &[b"amd"]).await;
        let (arm, arm_digest) = push_image(&app, "library/multi", "arm", &[b"arm"]).await;
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
        let res = put_manifest(&app, "library/multi", "multi", OCI_INDEX, &index).await;
        assert_eq!(res.status, StatusCode::CREATED);
        let index_digest = digest_of(&index);
        let res = app
            .post(&format!("/api/v2.0/projects/dest/repositories/multi/artifacts?from=library/multi@{index_digest}"))
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        for (child, body) in [(&amd_digest, &amd), (&arm_digest, &arm)] {
            let res = app.get(&format!("/v2/dest/multi/manifests/{child}")).admin().header("accept", OCI_MANIFEST).send().await;
            assert_eq!(&res.body, body);
        }
        // Copied by digest, it still carries the source's tags.
        let res = app.get("/v2/dest/multi/manifests/multi").admin().header("accept", OCI_INDEX).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.body, index);
    }
);

backend_test!(
    async fn a_copy_needs_pull_on_the_source_and_push_on_the_target(app) {
        create_project(&app, "secret", false).await;
        create_project(&app, "mine", false).await;
        push_image(&app, "secret/app", "v1", &[b"private layer"]).await;
        push_image(&app, "library/app", "v1", &[b"public layer"]).await;
        let user = app.create_user("copier", "Copier-Passw0rd").await;
        let res = app
            .post("/api/v2.0/projects/mine/members")
            .admin()
            .json(&json!({"role_id": 2, "member_user": {"user_id": user}}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());

        let copy = |from: &str, to: &str| {
            let path = format!("/api/v2.0/projects/{to}/repositories/app/artifacts?from={from}");
            app.post(&path).basic("copier", "Copier-Passw0rd").send()
        };
        let res = copy("secret/app:v1", "mine").await;
        assert!(matches!(res.status, StatusCode::FORBIDDEN | StatusCode::NOT_FOUND), "{}", res.status);
        let res = copy("library/app:v1", "secret").await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "no push on the target");
        let res = copy("library/app:v1", "mine").await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.post("/api/v2.0/projects/mine/repositories/app/artifacts?from=library/app:v1").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);

        for (from, status) in [
            ("", StatusCode::BAD_REQUEST),
            ("app:v1", StatusCode::BAD_REQUEST),
            ("library/app", StatusCode::BAD_REQUEST),
            ("library/app:nope", StatusCode::NOT_FOUND),
            ("library/none:v1", StatusCode::NOT_FOUND),
        ] {
            let res = app
                .post(&format!("/api/v2.0/projects/mine/repositories/other/artifacts?from={from}"))
                .admin()
                .send()
                .await;
            assert_eq!(res.status, status, "{from}: {}", res.text());
        }
        let res = app.post("/api/v2.0/projects/nothere/repositories/app/artifacts?from=library/app:v1").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let body = app.get("/api/v2.0/projects/mine/repositories/other/artifacts").admin().send().await;
        assert_eq!(body.status, StatusCode::OK);
        assert_eq!(body.json(), json!([]), "nothing half-copied");
    }
);

backend_test!(
    async fn accessories_list_the_signatures_of_an_artifact(app) {
        let (image, digest) = push_image(&app, "library/signed", "v1", &[b"signed layer"]).await;
        let empty = b"{}".to_vec();
        push_blob(&app, "library/signed", &empty).await;
        let signature_layer = b"a cosign signature payload".to_vec();
        push_blob(&app, "library/signed", &signature_layer).await;
        let signature = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json",
            "config": descriptor("application/vnd.oci.empty.v1+json", &empty),
            "layers": [descriptor("application/vnd.dev.cosign.simplesigning.v1+json", &signature_layer)],
            "subject": {"mediaType": OCI_MANIFEST, "digest": digest, "size": image.len()},
        })
        .to_string()
        .into_bytes();
        let signature_digest = digest_of(&signature);
        let res = put_manifest(&app, "library/signed", &signature_digest, OCI_MANIFEST, &signature).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());

        let res = app
            .get(&format!("/api/v2.0/projects/library/repositories/signed/artifacts/{digest}/accessories"))
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.header("x-total-count"), Some("1"));
        let body = res.json();
        assert_eq!(body[0]["type"], "signature.cosign");
        assert_eq!(body[0]["digest"], signature_digest.as_str());
        assert_eq!(body[0]["subject_artifact_digest"], digest.as_str());
        assert_eq!(body[0]["subject_artifact_repo"], "library/signed");
        assert_eq!(body[0]["size"].as_i64(), Some((signature.len() + empty.len() + signature_layer.len()) as i64));

        // A copy brings the signature along.
        let res = app
            .post("/api/v2.0/projects/library/repositories/signed-copy/artifacts?from=library/signed:v1")
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app
            .get(&format!("/api/v2.0/projects/library/repositories/signed-copy/artifacts/{digest}/accessories"))
            .admin()
            .send()
            .await;
        assert_eq!(res.json()[0]["digest"], signature_digest.as_str(), "{}", res.text());
        let res = app
            .get("/api/v2.0/projects/library/repositories/signed/artifacts/v1/accessories")
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "anyone may read a public project's");
        assert_eq!(res.json().as_array().map(Vec::len), Some(1));
        let res = app
            .get(&format!("/api/v2.0/projects/library/repositories/signed/artifacts/{signature_digest}/accessories"))
            .admin()
            .send()
            .await;
        assert_eq!(res.json(), json!([]), "a signature has none of its own");
        let res = app
            .get("/api/v2.0/projects/library/repositories/signed/artifacts/v9/accessories")
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    /// A copy's target repository follows the rule a push's name does: no
    /// `..`, spaces or upper case, however the path encodes them.
    async fn a_copy_never_makes_an_impossible_repository_name(app) {
        create_project(&app, "cp", false).await;
        push_image(&app, "cp/src", "1", &[b"layer"]).await;
        for target in ["..%252F..%252FX%2520y", "..%252Fescape", "Upper", "a%2520b", "a%252F%252Fb", "-a"] {
            let res = app
                .post(&format!("/api/v2.0/projects/cp/repositories/{target}/artifacts?from=cp/src:1"))
                .admin()
                .send()
                .await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{target}: {}", res.text());
        }
        let res = app.get("/api/v2.0/projects/cp/repositories").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"), "{}", res.text());
        assert_eq!(res.json()[0]["name"], "cp/src");
        // A nested name, encoded as Harbor's clients do, is fine.
        let res = app
            .post("/api/v2.0/projects/cp/repositories/team%252Fcopy/artifacts?from=cp/src:1")
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get("/api/v2.0/projects/cp/repositories/team%252Fcopy").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
    }
);
