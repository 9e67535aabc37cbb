//! Read-only mode (`read_only: true`): every change to the registry is refused
//! with Harbor's 403 `DENIED`, through `/v2/`, the Harbor API and the portal;
//! pulls, listings and sign-ins go on; garbage collection does not start.

use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::backend_test;
use crate::portal::{csrf_for, sign_in_admin};
use crate::registry::{digest_of, error_code, push_image};

const MESSAGE: &str = "The system is in read only mode. Any modification is prohibited.";

fn assert_refused(res: &crate::util::TestResponse) {
    assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
    assert_eq!(error_code(res), "DENIED");
    assert_eq!(res.json()["errors"][0]["message"], MESSAGE);
}

backend_test!(
    async fn read_only_mode_refuses_every_change_and_serves_every_read(app) {
        let (_, digest) = push_image(&app, "library/app", "v1", &[b"layer"]).await;
        let set = |on: bool| {
            let app = &app;
            async move {
                let res = app.put("/api/v2.0/configurations").admin().json(&json!({"read_only": on})).send().await;
                assert_eq!(res.status, StatusCode::OK, "{}", res.text());
            }
        };
        set(true).await;
        assert_eq!(app.get("/api/v2.0/systeminfo").admin().send().await.json()["read_only"], true);

        // /v2/: uploads, manifests, deletes.
        let blob = b"new layer";
        let res = app
            .post(&format!("/v2/library/app/blobs/uploads/?digest={}", digest_of(blob)))
            .admin()
            .raw("application/octet-stream", blob.to_vec())
            .send()
            .await;
        assert_refused(&res);
        assert_refused(&app.post("/v2/library/app/blobs/uploads/").admin().send().await);
        assert_refused(&app.delete(&format!("/v2/library/app/manifests/{digest}")).admin().send().await);
        assert_refused(&app.request(Method::PUT, "/v2/library/app/manifests/v2").admin().raw("application/vnd.oci.image.manifest.v1+json", b"{}".to_vec()).send().await);
        // Pulls go on.
        let res = app.get("/v2/library/app/manifests/v1").admin().header("accept", "application/vnd.oci.image.manifest.v1+json").send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(app.get(&format!("/v2/library/app/blobs/{}", digest_of(b"layer"))).admin().send().await.status, StatusCode::OK);

        // The Harbor API: content and everything else that changes.
        let repo = "/api/v2.0/projects/library/repositories/app";
        assert_refused(&app.delete(repo).admin().send().await);
        assert_refused(&app.delete(&format!("{repo}/artifacts/{digest}")).admin().send().await);
        assert_refused(&app.post(&format!("{repo}/artifacts/{digest}/tags")).admin().json(&json!({"name": "x"})).send().await);
        assert_refused(&app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "new"})).send().await);
        assert_refused(&app.post("/api/v2.0/system/gc/schedule").admin().json(&json!({"schedule": {"type": "Manual"}})).send().await);
        // Reads and sign-ins go on.
        let res = app.get(&format!("{repo}/artifacts")).admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));
        assert_eq!(app.get("/api/v2.0/users/current").admin().send().await.status, StatusCode::OK);
        assert_eq!(app.get("/service/token?service=harbor-registry&scope=repository:library/app:pull").admin().send().await.status, StatusCode::OK);

        // The portal: sign-in works, changes are refused with the message.
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let res = app
            .post("/harbor/tags/delete")
            .header("cookie", &cookie)
            .form(&[("csrf_token", csrf.as_str()), ("project", "library"), ("repository", "app"), ("digest", digest.as_str()), ("tag", "v1")])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert!(res.text().contains(MESSAGE), "{}", res.text());
        let res = app.get(&format!("{repo}/artifacts/v1/tags")).admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"), "the tag is still there");

        // Turned off, changes are accepted at once.
        set(false).await;
        push_image(&app, "library/app", "v2", &[b"new layer"]).await;
        let res = app.delete(&format!("{repo}/artifacts/v2/tags/v2")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    }
);

backend_test!(
    async fn read_only_mode_tells_pings_from_content_named_ping(app) {
        push_image(&app, "library/ping", "v1", &[b"ping layer"]).await;
        push_image(&app, "library/app", "ping", &[b"app layer"]).await;
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"read_only": true})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());

        // A repository and a tag named `ping` are content: refused.
        assert_refused(&app.delete("/api/v2.0/projects/library/repositories/ping").admin().send().await);
        let tag = "/api/v2.0/projects/library/repositories/app/artifacts/ping/tags/ping";
        assert_refused(&app.delete(tag).admin().send().await);
        assert_eq!(app.get("/api/v2.0/projects/library/repositories/ping").admin().send().await.status, StatusCode::OK);
        let res = app.get("/api/v2.0/projects/library/repositories/app/artifacts/ping/tags").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"), "the tag is still there");

        // The real pings only test a connection: they go on.
        let not_refused = |res: &crate::util::TestResponse| {
            assert_ne!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        };
        not_refused(&app.post("/api/v2.0/registries/ping").admin().json(&json!({"type": "docker-registry", "url": "http://127.0.0.1:1"})).send().await);
        not_refused(&app.post("/api/v2.0/ldap/ping").admin().json(&json!({"ldap_url": "ldap://127.0.0.1:1"})).send().await);
        not_refused(&app.post("/api/v2.0/system/oidc/ping").admin().json(&json!({"url": "http://127.0.0.1:1"})).send().await);
        // And the configuration, to turn the mode off.
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"read_only": false})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(app.delete(tag).admin().send().await.status, StatusCode::OK);
    }
);
