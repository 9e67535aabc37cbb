//! getConfigurations, updateConfigurations, getInternalconfig.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::{PASSWORD, message, user};
use crate::backend_test;

backend_test!(
    async fn configurations_are_admin_only_typed_and_persisted(app) {
        user(&app, "alice").await;
        for path in ["/api/v2.0/configurations", "/api/v2.0/internalconfig"] {
            assert_eq!(app.get(path).send().await.status, StatusCode::UNAUTHORIZED, "{path}");
            let res = app.get(path).basic("alice", PASSWORD).send().await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "{path}");
            assert_eq!(message(&res), "alice");
        }
        let res = app.get("/api/v2.0/configurations").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let body = res.json();
        assert_eq!(body["auth_mode"], json!({"value": "db_auth", "editable": false}), "a user exists besides admin");
        assert_eq!(body["ldap_scope"], json!({"value": 2, "editable": true}));
        assert_eq!(body["self_registration"], json!({"value": false, "editable": true}));
        assert!(body.get("ldap_search_password").is_none());
        assert!(body.get("oidc_client_secret").is_none());
        let internal = app.get("/api/v2.0/internalconfig").admin().send().await;
        assert_eq!(internal.status, StatusCode::OK);
        assert_eq!(internal.json()["token_expiration"]["value"], 30);

        let res = app.put("/api/v2.0/configurations").admin()
            .json(&json!({"token_expiration": 45, "ldap_url": "ldap://dir", "ldap_verify_cert": false, "ldap_search_password": "s3cret"}))
            .send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert!(res.body.is_empty());
        let body = app.get("/api/v2.0/configurations").admin().send().await.json();
        assert_eq!(body["token_expiration"]["value"], 45);
        assert_eq!(body["ldap_url"]["value"], "ldap://dir");
        assert_eq!(body["ldap_verify_cert"]["value"], false);
        assert!(!body.to_string().contains("s3cret"), "passwords are never returned");
        let stored = app.store().configurations().load().await.unwrap();
        assert_eq!(stored.int("token_expiration"), 45);
        assert_eq!(stored.string("ldap_search_password"), "s3cret");

        assert_eq!(app.put("/api/v2.0/configurations").basic("alice", PASSWORD).json(&json!({"read_only": true})).send().await.status, StatusCode::FORBIDDEN);
        assert_eq!(app.put("/api/v2.0/configurations").json(&json!({"read_only": true})).send().await.status, StatusCode::UNAUTHORIZED);
    }
);

backend_test!(
    async fn bad_configuration_updates_are_400_and_change_nothing(app) {
        let cases = [
            (json!({}), "Missing configure item"),
            (json!({"no_such_key": 1}), "unknown configuration item: no_such_key"),
            (json!({"token_expiration": "45"}), "must be of type integer"),
            (json!({"token_expiration": 4.5}), "must be of type integer"),
            (json!({"self_registration": "true"}), "must be of type boolean"),
            (json!({"ldap_url": 5}), "must be of type string"),
            (json!({"auth_mode": "magic"}), "invalid auth_mode"),
            (json!({"project_creation_restriction": "nobody"}), "invalid project_creation_restriction"),
            (json!({"storage_per_project": 0}), "quota value should be -1 or great than zero"),
            (json!({"ldap_scope": 3}), "invalid scope"),
            (json!({"token_expiration": 0}), "the token_expiration value must be positive"),
            (json!({"robot_name_prefix": " "}), "robot_name_prefix cannot be empty"),
            (json!({"skip_audit_log_database": true}), "audit_log_forward_endpoint"),
            (json!({"token_expiration": 60, "ldap_scope": 9}), "invalid scope"),
        ];
        for (body, expected) in cases {
            let res = app.put("/api/v2.0/configurations").admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}");
            assert!(message(&res).contains(expected), "{body}: {}", message(&res));
        }
        let res = app.put("/api/v2.0/configurations").admin().raw("application/json", "[1").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let body = app.get("/api/v2.0/configurations").admin().send().await.json();
        assert_eq!(body["token_expiration"]["value"], 30, "the partly valid update changed nothing");

        // auth_mode can change only while nobody but admin exists.
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"auth_mode": "ldap_auth"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"auth_mode": "db_auth"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        user(&app, "alice").await;
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"auth_mode": "ldap_auth"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(message(&res), "the auth mode cannot be modified as new users have been inserted into database");
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"auth_mode": "db_auth"})).send().await;
        assert_eq!(res.status, StatusCode::OK, "setting the same mode is fine");
    }
);
