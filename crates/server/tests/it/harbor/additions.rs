//! getAddition: every `addition_links` entry an artifact advertises answers.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::code;
use crate::backend_test;
use crate::registry::{descriptor, digest_of, image_manifest, push_blob, put_manifest};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

backend_test!(
    async fn build_history_is_served_where_advertised(app) {
        let name = "library/team/hist";
        let config = json!({
            "architecture": "amd64",
            "os": "linux",
            "history": [
                {"created": "2024-05-01T10:00:00.123456789Z", "created_by": "/bin/sh -c #(nop) ADD file:abc in / ", "unknown": 1},
                {"created": "2024-05-01T10:00:01Z", "created_by": "/bin/sh -c #(nop)  CMD [\"sh\"]", "empty_layer": true, "comment": "buildkit.dockerfile.v0"}
            ]
        })
        .to_string()
        .into_bytes();
        push_blob(&app, name, &config).await;
        push_blob(&app, name, b"layer-1").await;
        let manifest = image_manifest(&config, &[b"layer-1"]);
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());

        let artifact = app.get("/api/v2.0/projects/library/repositories/team%252Fhist/artifacts/v1").admin().send().await.json();
        let href = artifact["addition_links"]["build_history"]["href"].as_str().unwrap().to_string();
        assert_eq!(artifact["addition_links"]["build_history"]["absolute"], false);
        assert_eq!(
            href,
            format!("/api/v2.0/projects/library/repositories/team%252Fhist/artifacts/{}/additions/build_history", digest_of(&manifest))
        );
        let res = app.get(&href).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.header("content-type"), Some("application/json; charset=utf-8"));
        assert_eq!(
            res.json(),
            json!([
                {"created": "2024-05-01T10:00:00.123456789Z", "created_by": "/bin/sh -c #(nop) ADD file:abc in / "},
                {"created": "2024-05-01T10:00:01Z", "created_by": "/bin/sh -c #(nop)  CMD [\"sh\"]", "empty_layer": true, "comment": "buildkit.dockerfile.v0"}
            ])
        );
        // By tag as well; a config without history gives an empty list.
        let res = app.get("/api/v2.0/projects/library/repositories/team%252Fhist/artifacts/v1/additions/build_history").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let bare = br#"{"architecture":"arm64","os":"linux"}"#;
        push_blob(&app, name, bare).await;
        let plain = image_manifest(bare, &[b"layer-1"]);
        assert_eq!(put_manifest(&app, name, "bare", OCI_MANIFEST, &plain).await.status, StatusCode::CREATED);
        let res = app.get("/api/v2.0/projects/library/repositories/team%252Fhist/artifacts/bare/additions/build_history").admin().send().await;
        assert_eq!(res.json(), json!([]));

        // An index advertises no addition and has none; unknown additions are 400.
        let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [descriptor(OCI_MANIFEST, &manifest)]}).to_string();
        assert_eq!(put_manifest(&app, name, "multi", OCI_INDEX, index.as_bytes()).await.status, StatusCode::CREATED);
        let multi = app.get("/api/v2.0/projects/library/repositories/team%252Fhist/artifacts/multi").admin().send().await.json();
        assert_eq!(multi["addition_links"], json!({}));
        let res = app.get("/api/v2.0/projects/library/repositories/team%252Fhist/artifacts/multi/additions/build_history").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.get("/api/v2.0/projects/library/repositories/team%252Fhist/artifacts/v1/additions/readme.md").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(code(&res), "BAD_REQUEST");
        let res = app.get("/api/v2.0/projects/library/repositories/team%252Fhist/artifacts/nope/additions/build_history").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);

        // Every listed artifact's links answer 200.
        let list = app.get("/api/v2.0/projects/library/repositories/team%252Fhist/artifacts?page_size=0").admin().send().await.json();
        let mut followed = 0;
        for artifact in list.as_array().unwrap() {
            for (kind, link) in artifact["addition_links"].as_object().unwrap() {
                let res = app.get(link["href"].as_str().unwrap()).admin().send().await;
                assert_eq!(res.status, StatusCode::OK, "{kind}: {}", res.text());
                followed += 1;
            }
        }
        assert!(followed >= 2, "{followed}");
    }
);

backend_test!(
    async fn build_history_follows_project_permissions(app) {
        let name = "private/img";
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "private"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        let config = br#"{"architecture":"amd64","os":"linux","history":[{"created_by":"x"}]}"#;
        push_blob(&app, name, config).await;
        push_blob(&app, name, b"l").await;
        let manifest = image_manifest(config, &[b"l"]);
        assert_eq!(put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await.status, StatusCode::CREATED);
        let uri = "/api/v2.0/projects/private/repositories/img/artifacts/v1/additions/build_history";
        assert_eq!(app.get(uri).send().await.status, StatusCode::UNAUTHORIZED);
        let res = app.get(uri).admin().send().await;
        assert_eq!(res.json(), json!([{"created_by": "x"}]));
    }
);

backend_test!(
    async fn vulnerabilities_addition_is_an_empty_report(app) {
        let name = "library/scanned";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        push_blob(&app, name, config).await;
        push_blob(&app, name, b"layer-v").await;
        let manifest = image_manifest(config, &[b"layer-v"]);
        assert_eq!(put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await.status, StatusCode::CREATED);

        // No scanner, so no report: Harbor's answer for an artifact without one.
        let base = "/api/v2.0/projects/library/repositories/scanned/artifacts";
        for reference in ["v1".to_string(), digest_of(&manifest)] {
            let res = app
                .get(&format!("{base}/{reference}/additions/vulnerabilities"))
                .admin()
                .header("x-accept-vulnerabilities", "application/vnd.security.vulnerability.report; version=1.1")
                .send()
                .await;
            assert_eq!(res.status, StatusCode::OK, "{reference}: {}", res.text());
            assert_eq!(res.header("content-type"), Some("application/json"));
            assert_eq!(res.json(), json!({}));
        }
        // Anonymous callers may read a public project's artifacts, as the other additions.
        let res = app.get(&format!("{base}/v1/additions/vulnerabilities")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get(&format!("{base}/nope/additions/vulnerabilities")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get("/api/v2.0/projects/nothere/repositories/x/artifacts/v1/additions/vulnerabilities").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(code(&res), "NOT_FOUND");
    }
);
