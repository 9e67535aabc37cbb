//! listProjectMetadatas, addProjectMetadatas, getProjectMetadata,
//! updateProjectMetadata, deleteProjectMetadata.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::{CALLERS, PASSWORD, as_caller, message, project_with_every_role};
use crate::backend_test;

backend_test!(
    async fn metadata_crud_keeps_public_in_step(app) {
        let id = project_with_every_role(&app).await;
        let base = format!("/api/v2.0/projects/{id}/metadatas");
        let list = app.get(&format!("{base}/")).admin().send().await;
        assert_eq!(list.status, StatusCode::OK);
        assert_eq!(list.json(), json!({"public": "false"}));

        let res = app.post(&base).basic("pa", PASSWORD).json(&json!({"auto_scan": "1"})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert!(res.body.is_empty());
        let res = app.post(&base).basic("pa", PASSWORD).json(&json!({"auto_scan": "false"})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        assert_eq!(message(&res), format!("metadata auto_scan already exists for project {id}"));
        let get = app.get(&format!("{base}/auto_scan")).basic("maint", PASSWORD).send().await;
        assert_eq!(get.json(), json!({"auto_scan": "true"}), "booleans are normalized");
        let missing = app.get(&format!("{base}/severity")).basic("maint", PASSWORD).send().await;
        assert_eq!(missing.status, StatusCode::OK);
        assert_eq!(missing.json(), json!({}));

        // Updating a key that is not set writes nothing.
        let res = app.put(&format!("{base}/severity")).admin().json(&json!({"severity": "low"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(app.get(&format!("{base}/severity")).admin().send().await.json(), json!({}));

        assert_eq!(app.get("/api/v2.0/projects/p").send().await.status, StatusCode::UNAUTHORIZED);
        let res = app.put(&format!("{base}/public")).basic("pa", PASSWORD).json(&json!({"public": "true"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(app.get("/api/v2.0/projects/p").send().await.status, StatusCode::OK, "public for anonymous now");
        let anon = app.get("/api/v2.0/projects?name=p").send().await.json();
        assert!(anon.as_array().unwrap().iter().any(|x| x["name"] == "p"));

        let res = app.delete(&format!("{base}/public")).basic("pa", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(app.get("/api/v2.0/projects/p").send().await.status, StatusCode::UNAUTHORIZED, "private again");
        assert_eq!(app.delete(&format!("{base}/public")).admin().send().await.status, StatusCode::OK, "absent: still 200");
        let list = app.get(&base).admin().send().await.json();
        assert_eq!(list, json!({"auto_scan": "true"}));
    }
);

backend_test!(
    async fn metadata_follows_the_role_matrix(app) {
        let id = project_with_every_role(&app).await;
        let base = format!("/api/v2.0/projects/{id}/metadatas");
        for (label, login) in CALLERS {
            let list = as_caller(app.get(&base), login).send().await;
            let read = as_caller(app.get(&format!("{base}/public")), login).send().await;
            let add = as_caller(app.post(&base), login).json(&json!({"prevent_vul": "true"})).send().await;
            let denied = if login.is_none() { StatusCode::UNAUTHORIZED } else { StatusCode::FORBIDDEN };
            let (list_s, read_s, add_s) = match label {
                "admin" => (StatusCode::OK, StatusCode::OK, StatusCode::CONFLICT),
                "pa" => (denied, StatusCode::OK, StatusCode::OK),
                "maint" => (denied, StatusCode::OK, denied),
                _ => (denied, denied, denied),
            };
            assert_eq!(list.status, list_s, "list as {label}");
            assert_eq!(read.status, read_s, "read as {label}");
            assert_eq!(add.status, add_s, "add as {label}");
        }
        for (label, login) in CALLERS {
            let update = as_caller(app.put(&format!("{base}/prevent_vul")), login).json(&json!({"prevent_vul": "false"})).send().await;
            let expected = match label {
                "anonymous" => StatusCode::UNAUTHORIZED,
                "pa" | "admin" => StatusCode::OK,
                _ => StatusCode::FORBIDDEN,
            };
            assert_eq!(update.status, expected, "update as {label}");
        }
        let del = app.delete(&format!("{base}/prevent_vul")).basic("maint", PASSWORD).send().await;
        assert_eq!(del.status, StatusCode::FORBIDDEN);
        assert_eq!(app.get(&format!("{base}/prevent_vul")).admin().send().await.json(), json!({"prevent_vul": "false"}));
    }
);

backend_test!(
    async fn metadata_rejects_unknown_keys_and_bad_values(app) {
        let id = project_with_every_role(&app).await;
        let base = format!("/api/v2.0/projects/{id}/metadatas");
        for (body, expected) in [
            (json!({"colour": "red"}), "invalid key: colour"),
            (json!({"retention_id": "1"}), "invalid key: retention_id"),
            (json!({"severity": "urgent"}), "invalid value: urgent"),
            (json!({"auto_scan": "yes"}), "invalid value: yes"),
            (json!({"max_upstream_conn": "0"}), "invalid value: 0"),
            (json!({"auto_scan": "true", "severity": "low"}), "only allow one key/value pair"),
            (json!({}), "only allow one key/value pair"),
            (json!({"auto_scan": true}), "parsing the request body failed"),
            (json!(["auto_scan"]), "parsing the request body failed"),
        ] {
            let res = app.post(&base).admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}");
            assert!(message(&res).contains(expected), "{body}: {}", message(&res));
        }
        let res = app.put(&format!("{base}/public")).admin().json(&json!({"other": "true"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "missing value is validated as empty");
        let res = app.put(&format!("{base}/colour")).admin().json(&json!({"colour": "red"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.delete(&format!("{base}/colour")).admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(app.get(&base).admin().send().await.json(), json!({"public": "false"}));
    }
);
