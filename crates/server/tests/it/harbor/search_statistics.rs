//! search, getStatistic and ping.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::{PASSWORD, message, project, user};
use crate::backend_test;

backend_test!(
    async fn search_shows_visible_projects_and_repositories(app) {
        user(&app, "alice").await;
        user(&app, "bob").await;
        let a = project(&app, Some("alice"), "alpha-private", false).await;
        let b = project(&app, Some("bob"), "alpha-bob", false).await;
        app.store().statistics().add_empty_repository(a, "alpha-private/web").await.unwrap();
        app.store().statistics().add_empty_repository(b, "alpha-bob/web").await.unwrap();
        app.store().statistics().add_empty_repository(1, "library/Web-Alpha").await.unwrap();

        let names = |v: &serde_json::Value, key: &str, field: &str| -> Vec<String> {
            v[key].as_array().unwrap().iter().map(|x| x[field].as_str().unwrap().to_string()).collect()
        };
        let anon = app.get("/api/v2.0/search?q=alpha").send().await;
        assert_eq!(anon.status, StatusCode::OK);
        let body = anon.json();
        assert_eq!(body["project"], json!([]));
        assert_eq!(names(&body, "repository", "repository_name"), ["library/Web-Alpha"]);
        assert_eq!(body["repository"][0], json!({"project_id": 1, "project_name": "library", "project_public": true,
            "repository_name": "library/Web-Alpha"}));

        let alice = app.get("/api/v2.0/search?q=alpha").basic("alice", PASSWORD).send().await.json();
        assert_eq!(names(&alice, "project", "name"), ["alpha-private"]);
        assert_eq!(alice["project"][0]["repo_count"], 1);
        assert_eq!(alice["project"][0]["current_user_role_ids"], json!([1]));
        assert!(alice["project"][0].get("owner_name").is_none());
        assert_eq!(names(&alice, "repository", "repository_name"), ["alpha-private/web", "library/Web-Alpha"]);

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
        let private = project(&app, Some("alice"), "mine", false).await;
        project(&app, None, "others", false).await;
        let public = project(&app, None, "open", true).await;
        app.store().statistics().add_empty_repository(private, "mine/a").await.unwrap();
        app.store().statistics().add_empty_repository(private, "mine/b").await.unwrap();
        app.store().statistics().add_empty_repository(public, "open/a").await.unwrap();

        assert_eq!(app.get("/api/v2.0/statistics").send().await.status, StatusCode::UNAUTHORIZED);
        let alice = app.get("/api/v2.0/statistics").basic("alice", PASSWORD).send().await.json();
        assert_eq!(alice, json!({"private_project_count": 1, "private_repo_count": 2, "public_project_count": 2,
            "public_repo_count": 1, "total_project_count": 0, "total_repo_count": 0, "total_storage_consumption": 0}));
        let admin = app.get("/api/v2.0/statistics").admin().send().await.json();
        assert_eq!(admin, json!({"private_project_count": 2, "private_repo_count": 2, "public_project_count": 2,
            "public_repo_count": 1, "total_project_count": 4, "total_repo_count": 3, "total_storage_consumption": 0}));
    }
);

backend_test!(
    async fn ping_answers_pong(app) {
        let res = app.get("/api/v2.0/ping").send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.text(), "Pong");
    }
);
