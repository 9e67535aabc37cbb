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

backend_test!(
    async fn terraform_bodies_with_scan_all_policy_and_nulls_are_accepted(app) {
        // terraform-provider-harbor's harbor_config_auth (LDAP) body: `scan_all_policy`
        // always goes along, empty when unset (models/config.go, ConfigBodyAuthPost).
        let auth = json!({
            "oidc_verify_cert": false, "oidc_auto_onboard": false, "oidc_logout": false,
            "auth_mode": "ldap_auth", "self_registration": false,
            "scan_all_policy": {"parameter": {}},
            "ldap_timeout": 5, "ldap_base_dn": "dc=example,dc=org", "ldap_filter": "(objectClass=person)",
            "ldap_url": "ldap://directory:389", "ldap_uid": "uid",
            "ldap_scope": 2, "ldap_group_search_scope": 2, "ldap_verify_cert": true
        });
        let res = app.put("/api/v2.0/configurations").admin().json(&auth).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        // harbor_config_system's body (ConfigBodySystemPost).
        let system = json!({
            "project_creation_restriction": "adminonly", "read_only": false, "robot_token_duration": 30,
            "token_expiration": 30, "session_timeout": 60, "quota_per_project_enable": true,
            "robot_name_prefix": "robot$", "storage_per_project": -1, "scanner_skip_update_pulltime": false,
            "skip_audit_log_database": false, "banner_message": "", "notification_enable": true
        });
        let res = app.put("/api/v2.0/configurations").admin().json(&system).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());

        // null leaves an item as it is, as Harbor's binding drops it.
        let res = app.put("/api/v2.0/configurations").admin()
            .json(&json!({"ldap_filter": null, "ldap_search_password": null, "ldap_uid": "cn"}))
            .send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"banner_message": null})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let body = app.get("/api/v2.0/configurations").admin().send().await.json();
        assert_eq!(body["ldap_filter"], json!({"value": "(objectClass=person)", "editable": true}));
        assert_eq!(body["ldap_uid"]["value"], "cn");
        assert_eq!(body["project_creation_restriction"]["value"], "adminonly");
        assert_eq!(body["auth_mode"]["value"], "ldap_auth");

        // scan_all_policy is kept and shown as ConfigurationsResponse types it.
        assert_eq!(body["scan_all_policy"], json!({"parameter": {}}));
        let policy = json!({"type": "daily", "parameter": {"daily_time": 3600}});
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"scan_all_policy": policy})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let body = app.get("/api/v2.0/configurations").admin().send().await.json();
        assert_eq!(body["scan_all_policy"], policy);
        let internal = app.get("/api/v2.0/internalconfig").admin().send().await.json();
        let text = internal["scan_all_policy"]["value"].as_str().unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(text).unwrap(), policy);

        // Still refused: what Harbor does not know, and a policy that is not an object.
        for (body, expected) in [
            (json!({"no_such_key": null}), "unknown configuration item: no_such_key"),
            (json!({"ldap_group_gid": "cn"}), "unknown configuration item: ldap_group_gid"),
            (json!({"scan_all_policy": "daily"}), "the value of scan_all_policy must be of type object"),
            (json!({"ldap_filter": null, "ldap_scope": "2"}), "must be of type integer"),
        ] {
            let res = app.put("/api/v2.0/configurations").admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}");
            assert!(message(&res).contains(expected), "{body}: {}", message(&res));
        }
        let body = app.get("/api/v2.0/configurations").admin().send().await.json();
        assert_eq!(body["scan_all_policy"], policy);
    }
);

backend_test!(
    async fn every_key_of_harbors_configurations_response_is_shown(app) {
        let body = app.get("/api/v2.0/configurations").admin().send().await.json();
        // The properties of Harbor's ConfigurationsResponse model (swagger).
        let swagger = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/harbor-swagger.yaml"),
        )
        .unwrap();
        let model = swagger.split("\n  ConfigurationsResponse:\n").nth(1).unwrap();
        let properties = model.split("\n  Configurations:\n").next().unwrap();
        let keys: Vec<&str> = properties
            .lines()
            .filter_map(|l| l.strip_prefix("      ").filter(|k| !k.starts_with(' ')))
            .filter_map(|l| l.strip_suffix(':'))
            .collect();
        assert!(keys.len() > 50, "{keys:?}");
        // Berth keeps `uaa_client_secret` a password item, never returned
        // (docs/compatibility.md); Harbor returns it.
        for key in keys.into_iter().filter(|k| *k != "uaa_client_secret") {
            assert!(body.get(key).is_some(), "{key} is missing");
        }
        assert_eq!(body["scan_all_policy"], json!({"type": "none"}), "Harbor's default policy");
    }
);

backend_test!(
    /// An `auth_mode` Berth has no sign-in flow for is refused, not stored
    /// while sign-in silently stays with local passwords.
    async fn auth_modes_without_a_sign_in_flow_are_refused(app) {
        for mode in ["uaa_auth", "http_auth"] {
            let res = app.put("/api/v2.0/configurations").admin().json(&json!({"auth_mode": mode})).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{mode}: {}", res.text());
            assert!(message(&res).contains("not supported yet"), "{}", res.text());
        }
        let body = app.get("/api/v2.0/configurations").admin().send().await.json();
        assert_eq!(body["auth_mode"]["value"], "db_auth");
        for mode in ["ldap_auth", "oidc_auth"] {
            let res = app.put("/api/v2.0/configurations").admin().json(&json!({"auth_mode": mode})).send().await;
            assert_eq!(res.status, StatusCode::OK, "{mode}: {}", res.text());
        }
    }
);
