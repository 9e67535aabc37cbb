//! search, getStatistic and ping.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::{PASSWORD, message, project, user};
use crate::backend_test;
use crate::registry::{digest_of, image_manifest, push_image};

/// The bytes `push_image` stores for one image of `layers` (config, layers, manifest).
fn stored_bytes(layers: &[&[u8]]) -> usize {
    let config = format!(
        r#"{{"architecture":"amd64","os":"linux","layers":{}}}"#,
        layers.len()
    );
    let manifest = image_manifest(config.as_bytes(), layers);
    config.len() + layers.iter().map(|l| l.len()).sum::<usize>() + manifest.len()
}

backend_test!(
    async fn counts_follow_content_pushed_through_v2(app) {
        user(&app, "alice").await;
        let id = project(&app, Some("alice"), "counted", false).await;
        let (manifest, digest) = push_image(&app, "counted/app", "v1", &[b"layer-one", b"layer-two"]).await;
        assert_eq!(digest, digest_of(&manifest));
        let stored = stored_bytes(&[b"layer-one", b"layer-two"]);

        // getProjectSummary: one repository; the quota charged with every blob of the push.
        let summary = app.get("/api/v2.0/projects/counted/summary").basic("alice", PASSWORD).send().await;
        assert_eq!(summary.status, StatusCode::OK, "{}", summary.text());
        let summary = summary.json();
        assert_eq!(summary["repo_count"], 1);
        assert_eq!(summary["quota"]["used"]["storage"], stored, "{summary}");

        // listProjects and getProject: repo_count.
        let listed = app.get("/api/v2.0/projects?name=counted").basic("alice", PASSWORD).send().await.json();
        assert_eq!(listed[0]["repo_count"], 1, "{listed}");
        let got = app.get(&format!("/api/v2.0/projects/{id}")).basic("alice", PASSWORD).send().await.json();
        assert_eq!(got["repo_count"], 1, "{got}");

        // getStatistic: a private repository; admins also see the total and the bytes stored.
        let alice = app.get("/api/v2.0/statistics").basic("alice", PASSWORD).send().await.json();
        assert_eq!(alice["private_project_count"], 1);
        assert_eq!(alice["private_repo_count"], 1);
        assert_eq!(alice["public_repo_count"], 0);
        let admin = app.get("/api/v2.0/statistics").admin().send().await.json();
        assert_eq!(admin["private_repo_count"], 1);
        assert_eq!(admin["total_repo_count"], 1);
        assert_eq!(admin["total_storage_consumption"], stored);

        // search: the project with its repo_count, the repository with its artifact_count.
        let found = app.get("/api/v2.0/search?q=counted").basic("alice", PASSWORD).send().await.json();
        assert_eq!(found["project"][0]["name"], "counted");
        assert_eq!(found["project"][0]["repo_count"], 1, "{found}");
        // (`project_public` false is omitted, as Harbor's omitempty does.)
        assert_eq!(found["repository"], json!([{"project_id": id, "project_name": "counted",
            "repository_name": "counted/app", "artifact_count": 1}]));
        let anon = app.get("/api/v2.0/search?q=counted").send().await.json();
        assert_eq!(anon["repository"], json!([]), "a private project's repository stays hidden");

        // deleteProject: 412 while the repository exists, 200 once it is gone.
        let res = app.delete("/api/v2.0/projects/counted").basic("alice", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED);
        let res = app.get("/api/v2.0/projects/counted/_deletable").basic("alice", PASSWORD).send().await;
        assert_eq!(res.json(), json!({"message": "the project contains repositories, can not be deleted"}));
        let res = app.delete("/api/v2.0/projects/counted/repositories/app").basic("alice", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let summary = app.get("/api/v2.0/projects/counted/summary").basic("alice", PASSWORD).send().await.json();
        assert_eq!(summary["repo_count"], 0);
        let res = app.delete("/api/v2.0/projects/counted").basic("alice", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(app.get("/api/v2.0/projects/counted").admin().send().await.status, StatusCode::NOT_FOUND);
        let admin = app.get("/api/v2.0/statistics").admin().send().await.json();
        assert_eq!(admin["total_repo_count"], 0);
    }
);

backend_test!(
    async fn search_shows_visible_projects_and_repositories(app) {
        user(&app, "alice").await;
        user(&app, "bob").await;
        project(&app, Some("alice"), "alpha-private", false).await;
        project(&app, Some("bob"), "alpha-bob", false).await;
        push_image(&app, "alpha-private/web", "v1", &[b"web"]).await;
        push_image(&app, "alpha-bob/web", "v1", &[b"web"]).await;
        push_image(&app, "library/web-alpha", "v1", &[b"web"]).await;

        let names = |v: &serde_json::Value, key: &str, field: &str| -> Vec<String> {
            v[key].as_array().unwrap().iter().map(|x| x[field].as_str().unwrap().to_string()).collect()
        };
        let anon = app.get("/api/v2.0/search?q=alpha").send().await;
        assert_eq!(anon.status, StatusCode::OK);
        let body = anon.json();
        assert_eq!(body["project"], json!([]));
        assert_eq!(names(&body, "repository", "repository_name"), ["library/web-alpha"]);
        assert_eq!(body["repository"][0], json!({"project_id": 1, "project_name": "library", "project_public": true,
            "repository_name": "library/web-alpha", "artifact_count": 1}));

        let alice = app.get("/api/v2.0/search?q=alpha").basic("alice", PASSWORD).send().await.json();
        assert_eq!(names(&alice, "project", "name"), ["alpha-private"]);
        assert_eq!(alice["project"][0]["repo_count"], 1);
        assert_eq!(alice["project"][0]["current_user_role_ids"], json!([1]));
        assert!(alice["project"][0].get("owner_name").is_none());
        assert_eq!(names(&alice, "repository", "repository_name"), ["alpha-private/web", "library/web-alpha"]);

        let admin = app.get("/api/v2.0/search?q=alpha").admin().send().await.json();
        assert_eq!(names(&admin, "project", "name"), ["alpha-bob", "alpha-private"]);
        assert_eq!(admin["repository"].as_array().unwrap().len(), 3);
        let case = app.get("/api/v2.0/search?q=ALPHA").admin().send().await.json();
        assert_eq!(case["project"], json!([]), "project names match case-sensitively");
        assert_eq!(case["repository"].as_array().unwrap().len(), 3, "repository names do not");
        let percent = app.get("/api/v2.0/search?q=%25").admin().send().await.json();
        assert_eq!(percent["repository"], json!([]), "% is literal");

        let res = app.get("/api/v2.0/search").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(message(&res).contains("q in query is required"));
    }
);

backend_test!(
    async fn statistics_per_caller(app) {
        user(&app, "alice").await;
        project(&app, Some("alice"), "mine", false).await;
        project(&app, None, "others", false).await;
        project(&app, None, "open", true).await;
        push_image(&app, "mine/a", "v1", &[b"layer"]).await;
        push_image(&app, "mine/b", "v1", &[b"layer"]).await;
        push_image(&app, "open/a", "v1", &[b"layer"]).await;
        let stored = stored_bytes(&[b"layer"]);

        assert_eq!(app.get("/api/v2.0/statistics").send().await.status, StatusCode::UNAUTHORIZED);
        let alice = app.get("/api/v2.0/statistics").basic("alice", PASSWORD).send().await.json();
        assert_eq!(alice, json!({"private_project_count": 1, "private_repo_count": 2, "public_project_count": 2,
            "public_repo_count": 1, "total_project_count": 0, "total_repo_count": 0, "total_storage_consumption": 0}));
        let admin = app.get("/api/v2.0/statistics").admin().send().await.json();
        assert_eq!(admin, json!({"private_project_count": 2, "private_repo_count": 2, "public_project_count": 2,
            "public_repo_count": 1, "total_project_count": 4, "total_repo_count": 3, "total_storage_consumption": stored}));
    }
);

backend_test!(
    async fn ping_answers_pong(app) {
        let res = app.get("/api/v2.0/ping").send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.text(), "Pong");
    }
);
