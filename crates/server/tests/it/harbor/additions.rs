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

/// A chart archive (`.tgz`) of `files` (paths under the chart's directory).
fn chart_archive(files: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    for (path, text) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, path, text.as_bytes())
            .unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

backend_test!(
    /// A Helm chart advertises `values.yaml`, `readme.md` and `dependencies`,
    /// and each answers from the chart's .tgz as Harbor's chart processor does.
    async fn helm_chart_additions_are_read_from_the_chart(app) {
        let chart = chart_archive(&[
            ("demo/Chart.yaml", "apiVersion: v2\nname: demo\nversion: 0.1.0\ndependencies:\n  - name: redis\n    version: \"17.3.7\"\n    repository: https://charts.bitnami.com/bitnami\n    condition: redis.enabled\n  - name: common\n    repository: oci://registry.example/charts\n    tags: [base]\n"),
            ("demo/values.yaml", "replicaCount: 2\nimage:\n  tag: v1\n"),
            ("demo/README.md", "# Demo chart\n"),
            ("demo/charts/redis/values.yaml", "a subchart's values\n"),
        ]);
        let digest = crate::harbor::project_artifacts::push_chart(&app, "library/demo", "0.1.0", &chart).await;
        let base = "/api/v2.0/projects/library/repositories/demo/artifacts";
        let artifact = app.get(&format!("{base}/0.1.0")).admin().send().await.json();
        assert_eq!(artifact["type"], "CHART");
        let links = artifact["addition_links"].as_object().unwrap();
        assert_eq!(links.keys().collect::<Vec<_>>(), ["dependencies", "readme.md", "values.yaml"]);
        let href = |kind: &str| links[kind]["href"].as_str().unwrap().to_string();
        assert_eq!(href("values.yaml"), format!("{base}/{digest}/additions/values.yaml"));

        let res = app.get(&href("values.yaml")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.header("content-type"), Some("text/plain; charset=utf-8"));
        assert_eq!(res.text(), "replicaCount: 2\nimage:\n  tag: v1\n");
        let res = app.get(&href("readme.md")).admin().send().await;
        assert_eq!(res.header("content-type"), Some("text/markdown; charset=utf-8"));
        assert_eq!(res.text(), "# Demo chart\n");
        let res = app.get(&href("dependencies")).admin().send().await;
        assert_eq!(res.header("content-type"), Some("application/json; charset=utf-8"));
        assert_eq!(
            res.json(),
            json!([
                {"name": "redis", "version": "17.3.7", "repository": "https://charts.bitnami.com/bitnami", "condition": "redis.enabled"},
                {"name": "common", "repository": "oci://registry.example/charts", "tags": ["base"]}
            ])
        );
        // Anonymous callers read a public project's additions, as the others.
        assert_eq!(app.get(&format!("{base}/0.1.0/additions/values.yaml")).send().await.status, StatusCode::OK);

        // A chart without a readme or dependencies: an empty readme, no dependencies.
        let bare = chart_archive(&[("bare/Chart.yaml", "apiVersion: v2\nname: bare\nversion: 1.0.0\n")]);
        push_chart_as(&app, "library/bare", &bare).await;
        let res = app.get("/api/v2.0/projects/library/repositories/bare/artifacts/1.0.0/additions/readme.md").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.text(), "");
        let res = app.get("/api/v2.0/projects/library/repositories/bare/artifacts/1.0.0/additions/dependencies").admin().send().await;
        assert_eq!(res.json(), json!([]));

        // An image has no chart additions, a chart no build history; a layer
        // that is no .tgz has none to give.
        let res = app.get(&format!("{base}/0.1.0/additions/build_history")).admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        crate::registry::push_image(&app, "library/plain", "v1", &[b"plain"]).await;
        let res = app.get("/api/v2.0/projects/library/repositories/plain/artifacts/v1/additions/values.yaml").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(code(&res), "BAD_REQUEST");
        push_chart_as(&app, "library/broken", b"not a tgz").await;
        let res = app.get("/api/v2.0/projects/library/repositories/broken/artifacts/1.0.0/additions/values.yaml").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(code(&res), "NOT_FOUND");
    }
);

async fn push_chart_as(app: &crate::util::TestApp, name: &str, chart: &[u8]) {
    crate::harbor::project_artifacts::push_chart(app, name, "1.0.0", chart).await;
}
