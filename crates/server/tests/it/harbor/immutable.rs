//! Immutable tag rules: the API, and every path that would move or delete a
//! protected tag refusing to.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::backend_test;
use crate::registry::{error_code, image_manifest, push_blob, push_image, put_manifest};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const RULES: &str = "/api/v2.0/projects/library/immutabletagrules";

fn rule(tags: &str, repositories: &str) -> Value {
    json!({
        "action": "immutable",
        "template": "immutable_template",
        "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": tags}],
        "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": repositories}]},
    })
}

backend_test!(
    async fn protected_tags_are_neither_moved_nor_deleted(app) {
        let res = app.post(RULES).admin().json(&rule("v*", "**")).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let location = res.header("location").unwrap().to_string();
        assert!(location.starts_with(&format!("{RULES}/")), "{location}");
        let id = location.rsplit('/').next().unwrap().to_string();
        let res = app.get(RULES).admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));
        assert_eq!(res.json()[0]["tag_selectors"][0]["pattern"], "v*");
        assert_eq!(res.json()[0]["disabled"], false);

        let (_, v1) = push_image(&app, "library/app", "v1", &[b"first"]).await;
        // The same manifest again is no move; another one is refused.
        let (_, again) = push_image(&app, "library/app", "v1", &[b"first"]).await;
        assert_eq!(again, v1);
        let config = br#"{"architecture":"amd64","os":"linux","layers":1}"#;
        push_blob(&app, "library/app", b"second").await;
        let other = image_manifest(config, &[b"second"]);
        let res = put_manifest(&app, "library/app", "v1", OCI_MANIFEST, &other).await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert_eq!(error_code(&res), "DENIED");
        assert!(res.text().contains("'library/app:v1' configured as immutable"), "{}", res.text());
        let res = put_manifest(&app, "library/app", "latest", OCI_MANIFEST, &other).await;
        assert_eq!(res.status, StatusCode::CREATED, "an unprotected tag moves");

        // Deletes, by every path.
        let res = app.delete("/v2/library/app/manifests/v1").admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        let res = app.delete(&format!("/v2/library/app/manifests/{v1}")).admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        let res = app.delete("/api/v2.0/projects/library/repositories/app/artifacts/v1/tags/v1").admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert!(res.text().contains("configured as immutable"), "{}", res.text());
        let res = app.delete(&format!("/api/v2.0/projects/library/repositories/app/artifacts/{v1}")).admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        // A copy onto it.
        push_image(&app, "library/elsewhere", "v1", &[b"elsewhere"]).await;
        let res = app
            .post("/api/v2.0/projects/library/repositories/app/artifacts?from=library/elsewhere:v1")
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        let res = app.get("/v2/library/app/manifests/v1").admin().header("accept", OCI_MANIFEST).send().await;
        assert_eq!(res.header("docker-content-digest"), Some(v1.as_str()), "v1 never moved");

        // Disabled, then deleted: the tag may go.
        let mut disabled = rule("v*", "**");
        disabled["disabled"] = json!(true);
        let res = app.put(&format!("{RULES}/{id}")).admin().json(&disabled).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.delete("/v2/library/app/manifests/v1").admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        let res = app.delete(&format!("{RULES}/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.delete(&format!("{RULES}/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn rules_are_checked_and_kept_by_maintainers(app) {
        for bad in [
            json!({"tag_selectors": [], "scope_selectors": {"repository": [{"decoration": "repoMatches", "pattern": "**"}]}}),
            rule("", "**"),
            json!({"action": "retain", "tag_selectors": [{"decoration": "matches", "pattern": "v*"}], "scope_selectors": {"repository": [{"decoration": "repoMatches", "pattern": "**"}]}}),
        ] {
            let res = app.post(RULES).admin().json(&bad).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{bad}: {}", res.text());
        }
        let res = app.post(RULES).admin().json(&rule("release-*", "team/**")).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        let res = app.post(RULES).admin().json(&rule("release-*", "team/**")).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT, "a duplicate");
        for i in 1..15 {
            let res = app.post(RULES).admin().json(&rule(&format!("r{i}-*"), "**")).send().await;
            assert_eq!(res.status, StatusCode::CREATED, "rule {i}");
        }
        let res = app.post(RULES).admin().json(&rule("one-too-many", "**")).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        let res = app.get(&format!("{RULES}?page_size=10&page=2")).admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("15"));
        assert_eq!(res.json().as_array().map(Vec::len), Some(5));

        let dev = app.create_user("dev", "Dev-Passw0rd1").await;
        let maintainer = app.create_user("keeper", "Keeper-Passw0rd1").await;
        for (user, role) in [(dev, 2), (maintainer, 4)] {
            let res = app
                .post("/api/v2.0/projects/library/members")
                .admin()
                .json(&json!({"role_id": role, "member_user": {"user_id": user}}))
                .send()
                .await;
            assert_eq!(res.status, StatusCode::CREATED);
        }
        let res = app.get(RULES).basic("dev", "Dev-Passw0rd1").send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.post(RULES).basic("dev", "Dev-Passw0rd1").json(&rule("x", "**")).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.get(RULES).basic("keeper", "Keeper-Passw0rd1").send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.request(Method::GET, RULES).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let res = app.put(&format!("{RULES}/999")).admin().json(&rule("x", "**")).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get("/api/v2.0/projects/nothere/immutabletagrules").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);
