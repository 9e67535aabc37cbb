//! `/quotas`: each project's storage limit and usage, for administrators.

use axum::http::StatusCode;
use serde_json::json;

use crate::backend_test;
use crate::registry::{digest_of, push_blob, push_image};

backend_test!(
    async fn quotas_show_each_project_with_its_limit_and_exact_usage(app) {
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "quoted"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get("/api/v2.0/quotas").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("x-total-count"), Some("2"));
        let body = res.json();
        assert_eq!(body[0]["id"], 1);
        assert_eq!(body[0]["ref"], json!({"id": 1, "name": "library", "owner_name": "admin"}));
        assert_eq!(body[0]["hard"], json!({"storage": -1}));
        assert_eq!(body[0]["used"], json!({"storage": 0}));
        assert!(body[0]["creation_time"].as_str().is_some_and(|t| !t.is_empty()));
        let quoted = body[1]["id"].as_i64().unwrap();
        assert_eq!(body[1]["ref"]["name"], "quoted");

        // Usage: a blob shared by two repositories of the project counts once.
        let shared = b"a layer two repositories share".to_vec();
        push_image(&app, "quoted/one", "v1", &[&shared]).await;
        push_image(&app, "quoted/two", "v1", &[&shared]).await;
        let config_one = br#"{"architecture":"amd64","os":"linux","layers":1}"#.len() as i64;
        let body = app.get(&format!("/api/v2.0/quotas/{quoted}")).admin().send().await.json();
        let used = body["used"]["storage"].as_i64().unwrap();
        let (_, expected) = app.store().projects().quota(quoted).await.unwrap().unwrap();
        assert_eq!(used, expected);
        assert!(used >= shared.len() as i64 + config_one, "{body}");
        assert!(used < 2 * shared.len() as i64 + config_one + 2000, "the layer counts once: {body}");

        // Filters, sorting and paging.
        let res = app.get(&format!("/api/v2.0/quotas?reference=project&reference_id={quoted}")).admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));
        assert_eq!(res.json()[0]["ref"]["name"], "quoted");
        for other in ["reference=robot", "reference_id=nope"] {
            let res = app.get(&format!("/api/v2.0/quotas?{other}")).admin().send().await;
            assert_eq!(res.status, StatusCode::OK);
            assert_eq!(res.json(), json!([]), "{other}");
        }
        let res = app.get("/api/v2.0/quotas?sort=-used.storage&page_size=1").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("2"));
        assert_eq!(res.json()[0]["ref"]["name"], "quoted");
        assert!(res.header("link").is_some_and(|l| l.contains("rel=\"next\"")));
    }
);

backend_test!(
    async fn a_lowered_quota_refuses_pushes_beyond_it(app) {
        let body = json!({"hard": {"storage": 10}});
        let res = app.put("/api/v2.0/quotas/1").admin().json(&body).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(app.get("/api/v2.0/quotas/1").admin().send().await.json()["hard"]["storage"], 10);
        let res = app
            .post(&format!("/v2/library/limited/blobs/uploads/?digest={}", digest_of(b"more than ten bytes")))
            .admin()
            .raw("application/octet-stream", b"more than ten bytes".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert_eq!(res.json()["errors"][0]["code"], "DENIED");
        assert!(res.text().contains("Quota exceeded"), "{}", res.text());
        assert!(res.text().contains("upper limit of 10 bytes"), "{}", res.text());
        let res = app.put("/api/v2.0/quotas/1").admin().json(&json!({"hard": {"storage": -1}})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        push_blob(&app, "library/limited", b"more than ten bytes").await;
    }
);

backend_test!(
    async fn quota_requests_are_checked_and_for_administrators_only(app) {
        for (body, message) in [
            (json!({}), "hard required in body"),
            (json!({"hard": {}}), "hard required in body"),
            (json!({"hard": {"storage": 0}}), "invalid value for resource storage"),
            (json!({"hard": {"storage": -2}}), "invalid value for resource storage"),
            (json!({"hard": {"count": 5, "storage": 5}}), "resource count not support"),
        ] {
            let res = app.put("/api/v2.0/quotas/1").admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}");
            assert!(res.text().contains(message), "{body}: {}", res.text());
        }
        assert_eq!(app.store().projects().quota(1).await.unwrap(), Some((-1, 0)), "nothing changed");
        let res = app.get("/api/v2.0/quotas/999").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.put("/api/v2.0/quotas/999").admin().json(&json!({"hard": {"storage": 5}})).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get("/api/v2.0/quotas/x").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);

        app.create_user("quota-user", "Quota-Passw0rd").await;
        for (method, path) in [("GET", "/api/v2.0/quotas"), ("GET", "/api/v2.0/quotas/1"), ("PUT", "/api/v2.0/quotas/1")] {
            let method: axum::http::Method = method.parse().unwrap();
            let res = app
                .request(method.clone(), path)
                .basic("quota-user", "Quota-Passw0rd")
                .json(&json!({"hard": {"storage": 5}}))
                .send()
                .await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "{method} {path}");
            let res = app.request(method.clone(), path).json(&json!({"hard": {"storage": 5}})).send().await;
            assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        }
        assert_eq!(app.store().projects().quota(1).await.unwrap(), Some((-1, 0)));
    }
);
