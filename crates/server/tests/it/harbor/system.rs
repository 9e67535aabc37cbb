//! health, systeminfo, unknown paths, request ids.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::{PASSWORD, message, user};
use crate::util::Storage;
use crate::{backend_test, registry_test};

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
        std::fs::remove_dir_all(berth::config::blob_dir(app.data_dir())).unwrap();
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

registry_test!(
    async fn volumes_report_the_blob_storage_to_administrators(app) {
        user(&app, "alice").await;
        assert_eq!(app.get("/api/v2.0/systeminfo/volumes").send().await.status, StatusCode::UNAUTHORIZED);
        let res = app.get("/api/v2.0/systeminfo/volumes").basic("alice", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.get("/api/v2.0/systeminfo/volumes").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let body = res.json();
        let storage = body["storage"].as_array().unwrap();
        assert_eq!(storage.len(), 1, "{body}");
        let (total, free) = (storage[0]["total"].as_u64().unwrap(), storage[0]["free"].as_u64().unwrap());
        match app.storage {
            Storage::Files => {
                // df's figures for the blob directory's filesystem.
                let dir = berth::config::blob_dir(app.data_dir());
                let df = std::process::Command::new("df").args(["-B1", "--output=size"]).arg(&dir).output().unwrap();
                let size: u64 = String::from_utf8_lossy(&df.stdout).lines().nth(1).unwrap().trim().parse().unwrap();
                assert_eq!(total, size, "{body}");
                assert!(free > 0 && free <= total, "{body}");
            }
            // A bucket has no size: zeros, Harbor's answer when its storage path is absent.
            Storage::S3 => assert_eq!((total, free), (0, 0)),
        }
    }
);

backend_test!(
    async fn getcert_is_404_as_harbor_answers_without_a_root_ca(app) {
        for res in [
            app.get("/api/v2.0/systeminfo/getcert").send().await,
            app.get("/api/v2.0/systeminfo/getcert").admin().send().await,
        ] {
            assert_eq!(res.status, StatusCode::NOT_FOUND);
            assert_eq!(res.json()["errors"][0]["code"], "NOT_FOUND");
            assert!(message(&res).starts_with("cert not found"), "routed: {}", message(&res));
        }
        let info = app.get("/api/v2.0/systeminfo").admin().send().await.json();
        assert_eq!(info["has_ca_root"], false);
    }
);

backend_test!(
    async fn system_cve_allowlist_is_read_by_everyone_signed_in_and_written_by_admins(app) {
        user(&app, "alice").await;
        let path = "/api/v2.0/system/CVEAllowlist";
        assert_eq!(app.get(path).send().await.status, StatusCode::UNAUTHORIZED);
        let res = app.get(path).basic("alice", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(
            res.json(),
            json!({"items": [], "creation_time": "0001-01-01T00:00:00.000Z", "update_time": "0001-01-01T00:00:00.000Z"}),
            "empty before the first write, with go-swagger's omissions"
        );

        let list = json!({"items": [{"cve_id": "CVE-2019-10164"}, {"cve_id": " CVE-2021-44228 "}], "expires_at": 1893456000});
        assert_eq!(app.put(path).json(&list).send().await.status, StatusCode::UNAUTHORIZED);
        let res = app.put(path).basic("alice", PASSWORD).json(&list).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.put(path).admin().json(&list).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert!(res.body.is_empty());
        let body = app.get(path).basic("alice", PASSWORD).send().await.json();
        assert_eq!(body["id"], 1);
        assert!(body.get("project_id").is_none(), "0, left out: {body}");
        assert_eq!(body["expires_at"], 1893456000);
        assert_eq!(body["items"], json!([{"cve_id": "CVE-2019-10164"}, {"cve_id": "CVE-2021-44228"}]));
        let created = body["creation_time"].as_str().unwrap().to_string();
        assert_ne!(created, "0001-01-01T00:00:00.000Z");

        // A new list replaces the old; no expires_at is "never".
        let res = app.put(path).admin().json(&json!({"items": [{"cve_id": "CVE-2020-1"}], "project_id": 7, "id": 9})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let body = app.get(path).admin().send().await.json();
        assert_eq!(body["items"], json!([{"cve_id": "CVE-2020-1"}]));
        assert!(body.get("expires_at").is_none());
        assert_eq!(body["id"], 1);
        assert_eq!(body["creation_time"], created.as_str());
        assert!(body["update_time"].as_str().unwrap() >= created.as_str());

        // Harbor's validator: no empty and no repeated CVE ids (400, nothing stored).
        for (bad, expected) in [
            (json!({"items": [{"cve_id": "CVE-1"}, {"cve_id": "  "}]}), "items[1].cve_id is required"),
            (json!({"items": [{}]}), "items[0].cve_id is required"),
            (json!({"items": [{"cve_id": "CVE-1"}, {"cve_id": "CVE-1"}]}), "duplicated"),
        ] {
            let res = app.put(path).admin().json(&bad).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{bad}");
            assert!(message(&res).contains(expected), "{bad}: {}", message(&res));
        }
        let res = app.put(path).admin().json(&json!({})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let body = app.get(path).admin().send().await.json();
        assert_eq!(body["items"], json!([]));
    }
);
