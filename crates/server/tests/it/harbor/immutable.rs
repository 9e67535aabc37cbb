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
        assert!(res.text().contains("the tag v1 configured as immutable, cannot be deleted"), "{}", res.text());
        let res = app.delete(&format!("/v2/library/app/manifests/{v1}")).admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert!(res.text().contains("the tag v1 configured as immutable, cannot be deleted"), "{}", res.text());
        let deleted = json!({"errors": [{"code": "PRECONDITION", "message": "the tag v1 configured as immutable, cannot be deleted"}]});
        let res = app.delete("/api/v2.0/projects/library/repositories/app/artifacts/v1/tags/v1").admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert_eq!(res.json(), deleted);
        // Harbor's deleteArtifact answers as its tag delete does, not as a
        // reference from an index would.
        let res = app.delete(&format!("/api/v2.0/projects/library/repositories/app/artifacts/{v1}")).admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert_eq!(res.json(), deleted);
        // A copy onto it.
        push_image(&app, "library/elsewhere", "v1", &[b"elsewhere"]).await;
        let res = app
            .post("/api/v2.0/projects/library/repositories/app/artifacts?from=library/elsewhere:v1")
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert_eq!(
            res.json(),
            json!({"errors": [{"code": "PRECONDITION", "message": "the tag v1 configured as immutable, cannot be updated"}]})
        );
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

backend_test!(
    /// A pattern that made the old backtracking matcher run for ever (inside
    /// the write transaction, so the whole server stalled) is matched at once.
    async fn adversarial_patterns_neither_hang_nor_block_other_writes(app) {
        let pattern = format!("{}b", "*a".repeat(25));
        let res = app.post(RULES).admin().json(&rule(&pattern, "**")).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let tag = "a".repeat(128);
        push_image(&app, "library/slow", &tag, &[b"slow"]).await;
        let delete = app
            .delete(&format!("/api/v2.0/projects/library/repositories/slow/artifacts/{tag}/tags/{tag}"))
            .admin()
            .send();
        let res = tokio::time::timeout(std::time::Duration::from_secs(10), delete)
            .await
            .expect("the delete answers");
        assert_eq!(res.status, StatusCode::OK, "the tag does not match: {}", res.text());
        let res = app
            .post("/api/v2.0/projects")
            .admin()
            .json(&json!({"project_name": "unrelated"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());

        // A tag the same pattern does protect (128 characters, the longest tag).
        let protected = format!("{}b", "a".repeat(127));
        push_image(&app, "library/slow", &protected, &[b"slow"]).await;
        let res = app
            .delete(&format!("/v2/library/slow/manifests/{protected}"))
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());

        // Patterns too long or malformed are refused when the rule is made.
        for bad in ["*a".repeat(200), "v[0-".into(), "{a,b".into()] {
            let res = app.post(RULES).admin().json(&rule(&bad, "**")).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{bad}: {}", res.text());
        }
    }
);

backend_test!(
    /// Harbor's deleteRepository refuses while an immutable rule protects one
    /// of the repository's tags, and deletes nothing.
    async fn a_repository_with_a_protected_tag_is_not_deleted(app) {
        let res = app.post(RULES).admin().json(&rule("v*", "app")).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        push_image(&app, "library/app", "v1.0", &[b"one"]).await;
        push_image(&app, "library/app", "dev", &[b"two"]).await;
        let res = app.delete("/api/v2.0/projects/library/repositories/app").admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert_eq!(
            res.json(),
            json!({"errors": [{"code": "PRECONDITION", "message": "the tag v1.0 configured as immutable, cannot be deleted"}]})
        );
        let res = app.get("/api/v2.0/projects/library/repositories/app/artifacts").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("2"), "nothing was deleted");
        // Another repository of the project is not protected.
        push_image(&app, "library/other", "v1.0", &[b"three"]).await;
        let res = app.delete("/api/v2.0/projects/library/repositories/other").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    }
);

backend_test!(
    /// `with_immutable_status=true` reports what the rules enforce, on the tag
    /// listing and on the tags embedded in artifacts.
    async fn immutable_status_follows_the_rules(app) {
        let res = app.post(RULES).admin().json(&rule("{v*,stable}", "app")).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let (_, digest) = push_image(&app, "library/app", "v1", &[b"one"]).await;
        for tag in ["stable", "dev"] {
            let res = app
                .post(&format!("/api/v2.0/projects/library/repositories/app/artifacts/{digest}/tags"))
                .admin()
                .json(&json!({"name": tag}))
                .send()
                .await;
            assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        }
        let statuses = |body: &Value| -> Vec<(String, bool)> {
            let mut out: Vec<(String, bool)> = body
                .as_array()
                .unwrap()
                .iter()
                .map(|t| (t["name"].as_str().unwrap().to_string(), t["immutable"].as_bool().unwrap()))
                .collect();
            out.sort();
            out
        };
        let expected = vec![("dev".to_string(), false), ("stable".to_string(), true), ("v1".to_string(), true)];
        let tags = format!("/api/v2.0/projects/library/repositories/app/artifacts/{digest}/tags");
        let res = app.get(&format!("{tags}?with_immutable_status=true")).admin().send().await;
        assert_eq!(statuses(&res.json()), expected);
        let res = app.get(&tags).admin().send().await;
        assert!(statuses(&res.json()).iter().all(|(_, immutable)| !immutable), "not asked for");
        let res = app
            .get("/api/v2.0/projects/library/repositories/app/artifacts?with_immutable_status=true")
            .admin()
            .send()
            .await;
        assert_eq!(statuses(&res.json()[0]["tags"]), expected);
        let res = app
            .get(&format!("/api/v2.0/projects/library/repositories/app/artifacts/{digest}?with_immutable_status=true"))
            .admin()
            .send()
            .await;
        assert_eq!(statuses(&res.json()["tags"]), expected);
        // What the status says is what is enforced.
        let res = app.delete(&format!("{tags}/dev")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.delete(&format!("{tags}/stable")).admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED);
    }
);
