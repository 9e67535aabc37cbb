//! health, systeminfo, unknown paths, request ids.

use axum::http::StatusCode;

use crate::backend_test;

backend_test!(
    async fn health_reports_every_component_healthy(app) {
        let res = app.get("/api/v2.0/health").send().await;
        assert_eq!(res.status, StatusCode::OK);
        let body = res.json();
        assert_eq!(body["status"], "healthy");
        let names: Vec<_> = body["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["name"].as_str().unwrap().to_string(), c["status"].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(
            names,
            [("core", "healthy"), ("database", "healthy"), ("storage", "healthy")]
                .map(|(n, s)| (n.to_string(), s.to_string()))
        );
    }
);

backend_test!(
    async fn health_shows_a_closed_database_as_unhealthy(app) {
        app.store().close().await;
        let res = app.get("/api/v2.0/health").send().await;
        assert_eq!(res.status, StatusCode::OK);
        let body = res.json();
        assert_eq!(body["status"], "unhealthy");
        assert_eq!(body["components"][1]["name"], "database");
        assert_eq!(body["components"][1]["status"], "unhealthy");
        assert!(body["components"][1]["error"].as_str().unwrap().contains("failed"));
    }
);

backend_test!(
    async fn health_shows_missing_storage_as_unhealthy(app) {
        std::fs::remove_dir_all(berth::bootstrap::blob_dir(app.data_dir())).unwrap();
        let body = app.get("/api/v2.0/health").send().await.json();
        assert_eq!(body["status"], "unhealthy");
        assert_eq!(body["components"][2]["status"], "unhealthy");
    }
);

backend_test!(
    async fn systeminfo_shows_anonymous_callers_the_public_fields_only(app) {
        let body = app.get("/api/v2.0/systeminfo").send().await.json();
        assert_eq!(body["auth_mode"], "db_auth");
        assert_eq!(body["self_registration"], false);
        assert!(body.get("harbor_version").is_none());
        assert!(body.get("external_url").is_none());

        let body = app.get("/api/v2.0/systeminfo").admin().send().await.json();
        assert_eq!(body["external_url"], "http://127.0.0.1:9000");
        assert_eq!(body["registry_url"], "127.0.0.1:9000");
        assert!(body["harbor_version"].as_str().unwrap().starts_with("v2."));
        assert_eq!(body["project_creation_restriction"], "everyone");
    }
);

backend_test!(
    async fn unknown_paths_get_harbor_404_bodies(app) {
        let res = app.get("/api/v2.0/no/such/thing").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(res.header("content-type"), Some("application/json; charset=utf-8"));
        assert_eq!(
            res.json(),
            serde_json::json!({"errors": [{"code": "NOT_FOUND", "message": "path /api/v2.0/no/such/thing was not found"}]})
        );
        let res = app.post("/api/v2.0/health").send().await;
        assert_eq!(res.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(res.json()["errors"][0]["code"], "METHOD_NOT_ALLOWED");
        let res = app.get("/nowhere").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(res.json()["errors"][0]["code"], "NOT_FOUND");
    }
);

backend_test!(
    async fn request_ids_are_echoed_or_generated(app) {
        let res = app.get("/api/v2.0/health").header("x-request-id", "abc-123").send().await;
        assert_eq!(res.header("x-request-id"), Some("abc-123"));
        let res = app.get("/api/v2.0/health").send().await;
        let generated = res.header("x-request-id").unwrap();
        assert_eq!(generated.len(), 36, "a UUID: {generated}");
    }
);

backend_test!(
    async fn trailing_and_repeated_slashes_are_normalized(app) {
        assert_eq!(app.get("/api/v2.0/health/").send().await.status, StatusCode::OK);
        assert_eq!(app.get("//api/v2.0//health").send().await.status, StatusCode::OK);
    }
);
