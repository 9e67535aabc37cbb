//! listArtifactsOfProject (`GET /projects/{project}/artifacts`) and getIcon
//! (`GET /icons/{digest}`) for the icons the listings name.

use axum::http::StatusCode;
use base64::Engine;
use serde_json::{Value, json};

use super::fixtures::code;
use crate::backend_test;
use crate::registry::{descriptor, digest_of, push_blob, push_image, put_manifest};
use crate::util::TestApp;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const HELM_CONFIG: &str = "application/vnd.cncf.helm.config.v1+json";
const HELM_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

/// Pushes a Helm chart artifact (its config and `chart`, the .tgz) as `name:tag`.
pub(super) async fn push_chart(app: &TestApp, name: &str, tag: &str, chart: &[u8]) -> String {
    let config = br#"{"name":"demo","version":"0.1.0","apiVersion":"v2"}"#;
    push_blob(app, name, config).await;
    push_blob(app, name, chart).await;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": descriptor(HELM_CONFIG, config),
        "layers": [descriptor(HELM_LAYER, chart)],
    })
    .to_string()
    .into_bytes();
    let res = put_manifest(app, name, tag, OCI_MANIFEST, &manifest).await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    digest_of(&manifest)
}

fn repositories(body: &Value) -> Vec<String> {
    body.as_array()
        .unwrap()
        .iter()
        .map(|a| a["repository_name"].as_str().unwrap().to_string())
        .collect()
}

backend_test!(
    /// The artifacts of every repository of a project, newest first, each
    /// naming its repository; `q`, paging, the tags embedded per artifact,
    /// `latest_in_repository` and who may list them, as Harbor answers.
    async fn project_artifacts_span_its_repositories(app) {
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "proj"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let project_id = app.get("/api/v2.0/projects/proj").admin().send().await.json()["project_id"].as_i64().unwrap();
        push_image(&app, "proj/a", "v1", &[b"a one"]).await;
        push_image(&app, "proj/team/b", "v1", &[b"b one"]).await;
        let chart = push_chart(&app, "proj/charts", "0.1.0", b"not really a tgz").await;
        let (_, a2) = push_image(&app, "proj/a", "v2", &[b"a two"]).await;
        push_image(&app, "library/elsewhere", "v1", &[b"elsewhere"]).await;

        let res = app.get("/api/v2.0/projects/proj/artifacts").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.header("x-total-count"), Some("4"));
        let body = res.json();
        assert_eq!(repositories(&body), ["proj/a", "proj/charts", "proj/team/b", "proj/a"], "newest push first");
        assert_eq!(body[0]["digest"], a2.as_str());
        assert_eq!(body[0]["project_id"], project_id);
        assert_eq!(body[0]["tags"][0]["name"], "v2");
        assert_eq!(body[1]["type"], "CHART");
        assert_eq!(body[2]["tags"][0]["name"], "v1");
        assert_eq!(
            body[0]["addition_links"]["build_history"]["href"],
            format!("/api/v2.0/projects/proj/repositories/a/artifacts/{a2}/additions/build_history")
        );

        // By id, or by name with X-Is-Resource-Name.
        let res = app.get(&format!("/api/v2.0/projects/{project_id}/artifacts")).admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("4"));
        let res = app.get("/api/v2.0/projects/proj/artifacts").header("x-is-resource-name", "true").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("4"));

        // q (tags, type, repository), sort and paging.
        let res = app.get("/api/v2.0/projects/proj/artifacts?q=tags%3Dv1").admin().send().await;
        assert_eq!(repositories(&res.json()), ["proj/team/b", "proj/a"]);
        let res = app.get("/api/v2.0/projects/proj/artifacts?q=tags%3D~v").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("3"));
        let res = app.get("/api/v2.0/projects/proj/artifacts?q=type%3DCHART").admin().send().await;
        assert_eq!(res.json()[0]["digest"], chart.as_str());
        assert_eq!(res.header("x-total-count"), Some("1"));
        let res = app.get("/api/v2.0/projects/proj/artifacts?sort=push_time&page_size=3&page=1&with_tag=false").admin().send().await;
        assert_eq!(repositories(&res.json()), ["proj/a", "proj/team/b", "proj/charts"]);
        assert_eq!(res.json()[0]["tags"], Value::Null);
        assert!(res.header("link").unwrap().contains("page=2"), "{:?}", res.header("link"));

        // The newest artifact of each repository, among those of one media type
        // (Harbor decodes `q` twice: its `+` travels as `%252B`).
        let res = app.get("/api/v2.0/projects/proj/artifacts?latest_in_repository=true").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(code(&res), "BAD_REQUEST");
        let latest = "/api/v2.0/projects/proj/artifacts?latest_in_repository=true&q=media_type%3Dapplication%2Fvnd.oci.image.config.v1%252Bjson";
        let res = app.get(latest).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.header("x-total-count"), Some("2"));
        let body = res.json();
        assert_eq!(repositories(&body), ["proj/a", "proj/team/b"]);
        assert_eq!(body[0]["digest"], a2.as_str());
        let res = app.get(&format!("{latest}&page_size=1&page=2")).admin().send().await;
        assert_eq!(repositories(&res.json()), ["proj/team/b"]);
        assert_eq!(res.header("x-total-count"), Some("2"));

        // Signed-in callers who may list the project's artifacts.
        let res = app.get("/api/v2.0/projects/library/artifacts").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED, "Harbor asks for a sign-in even for a public project");
        app.create_user("stranger", "Stranger-Passw0rd").await;
        let res = app.get("/api/v2.0/projects/library/artifacts").basic("stranger", "Stranger-Passw0rd").send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(repositories(&res.json()), ["library/elsewhere"]);
        let res = app.get("/api/v2.0/projects/proj/artifacts").basic("stranger", "Stranger-Passw0rd").send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.get("/api/v2.0/projects/nothere/artifacts").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    /// Every icon a listing names is served, as base64 PNG whose sha256 is the
    /// digest; each artifact type has its own; an unknown digest is a 404.
    async fn listed_icons_are_served(app) {
        push_image(&app, "library/pic", "v1", &[b"pic"]).await;
        push_chart(&app, "library/chart", "0.1.0", b"chart bytes").await;
        let body = app.get("/api/v2.0/projects/library/artifacts").admin().send().await.json();
        let icons: Vec<String> = body.as_array().unwrap().iter().map(|a| a["icon"].as_str().unwrap().to_string()).collect();
        assert_eq!(icons.len(), 2);
        assert_ne!(icons[0], icons[1], "a chart and an image have icons of their own");
        for icon in &icons {
            // Anyone may read icons.
            let res = app.get(&format!("/api/v2.0/icons/{icon}")).send().await;
            assert_eq!(res.status, StatusCode::OK, "{}", res.text());
            let body = res.json();
            assert_eq!(body["content-type"], "image/png");
            let png = base64::engine::general_purpose::STANDARD.decode(body["content"].as_str().unwrap()).unwrap();
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
            assert_eq!(&digest_of(&png), icon);
        }
        let unknown = digest_of(b"no icon");
        let res = app.get(&format!("/api/v2.0/icons/{unknown}")).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(code(&res), "NOT_FOUND");
    }
);
