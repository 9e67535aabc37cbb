//! LDAP directory integration against the real slapd that `scripts/test` starts
//! (`scripts/ldap-fixture`): ping, user search and import, group search, and
//! sign-in in `ldap_auth` mode with admin and group mapping.

use axum::http::StatusCode;
use berth_domain::model::ConfigValue;
use serde_json::json;

use crate::backend_test;
use crate::util::{RefusedPort, TestApp};

/// A variable `scripts/ldap-fixture` exports.
pub(crate) fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the suite with `bash scripts/test`, which starts slapd")
    })
}

pub(crate) const PEOPLE: &str = "ou=people,dc=berth,dc=test";
pub(crate) const GROUPS: &str = "ou=groups,dc=berth,dc=test";
pub(crate) const DEVELOPERS: &str = "cn=developers,ou=groups,dc=berth,dc=test";
const ADMINS: &str = "cn=registry-admins,ou=groups,dc=berth,dc=test";

/// A string configuration value.
pub(crate) fn s(value: &str) -> ConfigValue {
    ConfigValue::String(value.to_string())
}

/// Points the stored configuration at the test directory.
pub(crate) async fn configure(app: &TestApp, extra: &[(&str, ConfigValue)]) {
    let mut items = vec![
        ("ldap_url", s(&env("BERTH_TEST_LDAP_URL"))),
        ("ldap_search_dn", s(&env("BERTH_TEST_LDAP_BIND_DN"))),
        (
            "ldap_search_password",
            s(&env("BERTH_TEST_LDAP_BIND_PASSWORD")),
        ),
        ("ldap_base_dn", s(PEOPLE)),
        ("ldap_filter", s("(objectClass=inetOrgPerson)")),
        ("ldap_uid", s("uid")),
        ("ldap_timeout", ConfigValue::Int(3)),
        ("ldap_group_base_dn", s(GROUPS)),
        ("ldap_group_search_filter", s("objectClass=groupOfNames")),
        ("ldap_group_attribute_name", s("cn")),
        ("ldap_group_admin_dn", s(ADMINS)),
    ];
    items.extend(extra.iter().cloned());
    app.store().configurations().save(&items).await.unwrap();
}

async fn ping(app: &TestApp, body: serde_json::Value) -> (StatusCode, serde_json::Value) {
    let res = app
        .post("/api/v2.0/ldap/ping")
        .admin()
        .json(&body)
        .send()
        .await;
    let status = res.status;
    (status, res.json())
}

backend_test!(
    async fn ping_uses_the_stored_configuration_or_the_body(app) {
        configure(&app, &[]).await;
        assert_eq!(ping(&app, json!({})).await, (StatusCode::OK, json!({"success": true})));
        let empty = app.post("/api/v2.0/ldap/ping").admin().send().await;
        assert_eq!(empty.status, StatusCode::OK);
        assert_eq!(empty.json()["success"], true);

        let (status, body) = ping(&app, json!({"ldap_search_password": "wrong"})).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, json!({"success": false, "message": "error: invalid credential"}));
    }
);

backend_test!(
    /// A ping of another directory than the stored one never sends it the
    /// stored search password: whatever the caller names receives only what
    /// the caller gave.
    async fn ping_of_another_url_does_not_send_the_stored_password(app) {
        configure(&app, &[]).await;
        let stored = env("BERTH_TEST_LDAP_BIND_PASSWORD");
        // A listener that keeps what it is sent (the bind request) and closes.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut all = Vec::new();
            while let Ok(Ok((mut socket, _))) =
                tokio::time::timeout(std::time::Duration::from_secs(3), listener.accept()).await
            {
                let mut buf = vec![0u8; 4096];
                if let Ok(Ok(n)) =
                    tokio::time::timeout(std::time::Duration::from_secs(2), socket.read(&mut buf)).await
                {
                    all.extend_from_slice(&buf[..n]);
                }
            }
            all
        });
        // Another host (localhost is 127.0.0.1, but not by name).
        let (status, body) = ping(
            &app,
            json!({"ldap_url": format!("ldap://localhost:{port}"), "ldap_connection_timeout": 1}),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["success"], false);
        assert!(body["message"].as_str().unwrap().contains("password"), "{body}");
        let received = received.await.unwrap();
        let text = String::from_utf8_lossy(&received);
        assert!(!text.contains(&stored), "the stored password went to another host");
        // The stored directory still gets it.
        assert_eq!(ping(&app, json!({"ldap_url": env("BERTH_TEST_LDAP_URL")})).await.1, json!({"success": true}));
    }
);

backend_test!(
    async fn ping_reports_an_unreachable_directory_without_hanging(app) {
        configure(&app, &[]).await;
        let closed = RefusedPort::new();
        let (status, body) = ping(&app, json!({"ldap_url": format!("ldap://127.0.0.1:{}", closed.port())})).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["success"], false);
        assert!(body["message"].as_str().unwrap().starts_with("error: "), "{body}");

        // A server that accepts connections and never answers: the timeout must end it.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let silent_port = silent.local_addr().unwrap().port();
        let (status, body) = ping(
            &app,
            json!({"ldap_url": format!("ldap://127.0.0.1:{silent_port}"), "ldap_connection_timeout": 1}),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["success"], false);
        assert!(body["message"].as_str().unwrap().contains("did not answer"), "{body}");
        drop(silent);
    }
);

backend_test!(
    async fn ping_refuses_malformed_settings_with_400(app) {
        configure(&app, &[]).await;
        for body in [
            json!({"ldap_url": "http://example.com"}),
            json!({"ldap_base_dn": "not a dn"}),
            json!({"ldap_filter": "(&(uid=a)"}),
            json!({"ldap_scope": 7}),
            json!({"ldap_scope": "two"}),
        ] {
            let res = app.post("/api/v2.0/ldap/ping").admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(res.json()["errors"][0]["code"], "BAD_REQUEST");
        }
        let res = app.post("/api/v2.0/ldap/ping").admin().raw("application/json", "{nope").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
    }
);

backend_test!(
    async fn ping_over_ldaps_and_starttls(app) {
        configure(&app, &[("ldap_verify_cert", ConfigValue::Bool(false))]).await;
        let ldaps = env("BERTH_TEST_LDAPS_URL");
        assert_eq!(ping(&app, json!({"ldap_url": ldaps})).await.1, json!({"success": true}));
        // The fixture's certificate is self-signed: verification must refuse it.
        let (_, body) = ping(&app, json!({"ldap_url": ldaps, "ldap_verify_cert": true})).await;
        assert_eq!(body["success"], false, "{body}");

        configure(&app, &[("ldap_verify_cert", ConfigValue::Bool(false)), ("ldap_starttls", ConfigValue::Bool(true))]).await;
        assert_eq!(ping(&app, json!({})).await.1, json!({"success": true}));
    }
);

backend_test!(
    async fn ldap_operations_are_for_administrators(app) {
        configure(&app, &[]).await;
        let hash = berth_auth::password::hash_password("Passw0rd");
        app.store()
            .users()
            .create(&berth_domain::model::NewUser {
                username: "plain".into(),
                email: Some("plain@example.com".into()),
                password_hash: Some(hash),
                ..Default::default()
            })
            .await
            .unwrap();
        for (method, path) in [
            ("POST", "/api/v2.0/ldap/ping"),
            ("GET", "/api/v2.0/ldap/users/search"),
            ("POST", "/api/v2.0/ldap/users/import"),
            ("GET", "/api/v2.0/ldap/groups/search?groupname=developers"),
        ] {
            let method: axum::http::Method = method.parse().unwrap();
            let anonymous = app.request(method.clone(), path).json(&json!({"ldap_uid_list": ["alice"]})).send().await;
            assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{path}");
            let user = app
                .request(method, path)
                .basic("plain", "Passw0rd")
                .json(&json!({"ldap_uid_list": ["alice"]}))
                .send()
                .await;
            assert_eq!(user.status, StatusCode::FORBIDDEN, "{path}");
        }
        assert!(app.store().users().find_by_username("alice").await.unwrap().is_none());
    }
);

backend_test!(
    async fn search_ldap_users(app) {
        configure(&app, &[]).await;
        let all = app.get("/api/v2.0/ldap/users/search").admin().send().await;
        assert_eq!(all.status, StatusCode::OK);
        let mut names: Vec<String> =
            all.json().as_array().unwrap().iter().map(|u| u["username"].as_str().unwrap().to_string()).collect();
        names.sort();
        assert_eq!(names, ["admin", "alice", "bob", "carol", "dave", "erin"]);

        let alice = app.get("/api/v2.0/ldap/users/search?username=alice").admin().send().await.json();
        assert_eq!(alice, json!([{"username": "alice", "realname": "Alice Liddell", "email": "alice@berth.test"}]));
        let injected = app.get("/api/v2.0/ldap/users/search?username=*").admin().send().await.json();
        assert_eq!(injected, json!([]), "filter metacharacters are escaped");
        let none = app.get("/api/v2.0/ldap/users/search?username=nobody").admin().send().await.json();
        assert_eq!(none, json!([]));
    }
);

backend_test!(
    async fn import_ldap_users_reports_failures_with_404(app) {
        configure(&app, &[]).await;
        let ok = app.post("/api/v2.0/ldap/users/import").admin().json(&json!({"ldap_uid_list": ["bob"]})).send().await;
        assert_eq!(ok.status, StatusCode::OK);
        assert!(ok.body.is_empty());
        let bob = app.store().users().find_by_username("bob").await.unwrap().unwrap();
        assert_eq!(bob.email.as_deref(), Some("bob@berth.test"));
        assert_eq!(bob.realname.as_deref(), Some("Bob Builder"));
        assert_eq!(bob.ldap_dn.as_deref(), Some("uid=bob,ou=people,dc=berth,dc=test"));

        let mixed = app
            .post("/api/v2.0/ldap/users/import")
            .admin()
            .json(&json!({"ldap_uid_list": ["alice", "nobody", ""]}))
            .send()
            .await;
        assert_eq!(mixed.status, StatusCode::NOT_FOUND);
        assert_eq!(
            mixed.json(),
            json!([{"uid": "nobody", "error": "unknown_user"}, {"uid": "", "error": "empty_uid"}])
        );
        assert!(app.store().users().find_by_username("alice").await.unwrap().is_some(), "the good uid is imported");
        let again = app.post("/api/v2.0/ldap/users/import").admin().json(&json!({"ldap_uid_list": ["bob"]})).send().await;
        assert_eq!(again.status, StatusCode::OK, "importing twice is fine");
        // Unknown keys are dropped, as go-swagger does: no list is an empty import.
        let none = app.post("/api/v2.0/ldap/users/import").admin().json(&json!({"uids": []})).send().await;
        assert_eq!(none.status, StatusCode::OK);
    }
);

backend_test!(
    async fn search_ldap_groups_by_name_or_dn(app) {
        configure(&app, &[]).await;
        let by_name = app.get("/api/v2.0/ldap/groups/search?groupname=developers").admin().send().await;
        assert_eq!(by_name.status, StatusCode::OK);
        assert_eq!(by_name.json(), json!([{"group_name": "developers", "ldap_group_dn": DEVELOPERS}]));
        let by_dn = app
            .get(&format!("/api/v2.0/ldap/groups/search?groupdn={}", ADMINS.replace(',', "%2C").replace('=', "%3D")))
            .admin()
            .send()
            .await;
        assert_eq!(by_dn.json(), json!([{"group_name": "registry-admins", "ldap_group_dn": ADMINS}]));
        let missing = app.get("/api/v2.0/ldap/groups/search?groupname=nobody").admin().send().await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        assert_eq!(missing.json()["errors"][0]["message"], "resource not found: group name:nobody, group DN:");
        let bad_dn = app.get("/api/v2.0/ldap/groups/search?groupdn=garbage").admin().send().await;
        assert_eq!(bad_dn.status, StatusCode::BAD_REQUEST);
        let neither = app.get("/api/v2.0/ldap/groups/search").admin().send().await;
        assert_eq!(neither.status, StatusCode::BAD_REQUEST);
    }
);

backend_test!(
    async fn ldap_auth_signs_users_in_through_the_directory(app) {
        configure(&app, &[("auth_mode", s("ldap_auth"))]).await;
        let developers = app.store().groups().onboard_ldap(DEVELOPERS, "developers").await.unwrap();

        let alice = app.get("/api/v2.0/users/current").basic("alice", "alice-pw").send().await;
        assert_eq!(alice.status, StatusCode::OK);
        let body = alice.json();
        assert_eq!(body["username"], "alice");
        assert_eq!(body["email"], "alice@berth.test");
        assert_eq!(body["sysadmin_flag"], false);
        let id = body["user_id"].as_i64().unwrap();
        assert_eq!(app.store().groups().memberships(id).await.unwrap(), vec![developers.id]);

        let wrong = app.get("/api/v2.0/users/current").basic("alice", "nope").send().await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
        let unknown = app.get("/api/v2.0/users/current").basic("nobody", "x").send().await;
        assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);

        // Members of ldap_group_admin_dn are administrators by the directory's
        // role, as Harbor reports it; their flag stays as it was.
        let carol = app.get("/api/v2.0/users/current").basic("carol", "carol-pw").send().await;
        assert_eq!(carol.json()["sysadmin_flag"], false, "{}", carol.text());
        assert_eq!(carol.json()["admin_role_in_auth"], true, "{}", carol.text());
        let carol_id = carol.json()["user_id"].as_i64().unwrap();
        let by_admin = app.get(&format!("/api/v2.0/users/{carol_id}")).admin().send().await;
        assert_eq!(by_admin.json()["sysadmin_flag"], false, "{}", by_admin.text());
        assert_eq!(by_admin.json()["admin_role_in_auth"], false, "told to the user only");
        let own = app.get(&format!("/api/v2.0/users/{carol_id}")).basic("carol", "carol-pw").send().await;
        assert_eq!(own.json()["admin_role_in_auth"], true, "{}", own.text());
        assert_eq!(body["admin_role_in_auth"], false, "alice is in no administrator group");
        // And they act as administrators: system operations, every project.
        let users = app.get("/api/v2.0/users").basic("carol", "carol-pw").send().await;
        assert_eq!(users.status, StatusCode::OK, "{}", users.text());
        let res = app.get("/api/v2.0/configurations").basic("carol", "carol-pw").send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let users = app.get("/api/v2.0/users").basic("alice", "alice-pw").send().await;
        assert_eq!(users.status, StatusCode::FORBIDDEN, "{}", users.text());
        let admin = app.get("/api/v2.0/users/current").admin().send().await;
        assert_eq!(admin.status, StatusCode::OK, "admin stays local");
    }
);

backend_test!(
    /// A directory user whose uid is `admin` never becomes the built-in
    /// administrator: not by Basic sign-in, not by its directory e-mail at
    /// `POST /auth`, not by an import; the built-in account is left as it was.
    async fn a_directory_user_named_admin_never_becomes_the_built_in_admin(app) {
        configure(&app, &[("auth_mode", s("ldap_auth"))]).await;
        let before = app.store().users().find_by_id(1).await.unwrap().unwrap();
        let res = app.get("/api/v2.0/users/current").basic("admin", "admin-pw").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED, "the built-in admin's password is checked locally");
        let res = app
            .post(&format!("/auth?access_token={}", crate::util::MASTER_KEY))
            .basic("admin@berth.test", "admin-pw")
            .send()
            .await;
        assert!(res.status.is_client_error(), "{} {}", res.status, res.text());
        assert!(!res.text().contains("token"), "{}", res.text());
        let res = app.post("/api/v2.0/ldap/users/import").admin().json(&json!({"ldap_uid_list": ["admin"]})).send().await;
        assert!(res.status.is_client_error(), "{} {}", res.status, res.text());
        let after = app.store().users().find_by_id(1).await.unwrap().unwrap();
        assert_eq!(after.origin, before.origin);
        assert!(after.ldap_dn.is_none() && after.sysadmin, "{after:?}");
        assert_eq!(app.get("/api/v2.0/users/current").admin().send().await.status, StatusCode::OK);
        // Other directory users still sign in.
        let res = app.get("/api/v2.0/users/current").basic("alice", "alice-pw").send().await;
        assert_eq!(res.status, StatusCode::OK);
    }
);

backend_test!(
    async fn ldap_auth_with_an_unreachable_directory_fails_clearly(app) {
        let closed = RefusedPort::new();
        let url = format!("ldap://127.0.0.1:{}", closed.port());
        configure(&app, &[("auth_mode", s("ldap_auth")), ("ldap_url", s(&url))]).await;
        let res = app.get("/api/v2.0/users/current").basic("alice", "alice-pw").send().await;
        assert_eq!(res.status, StatusCode::BAD_GATEWAY);
        assert!(res.json()["errors"][0]["message"].as_str().unwrap().starts_with("LDAP directory"));
    }
);

backend_test!(
    async fn members_are_onboarded_from_the_directory_and_groups_grant_roles(app) {
        configure(&app, &[("auth_mode", s("ldap_auth"))]).await;
        let project = crate::harbor::fixtures::project(&app, None, "team", false).await;

        // A username the registry does not know yet is looked up and onboarded.
        let res = app
            .post("/api/v2.0/projects/team/members")
            .admin()
            .json(&json!({"role_id": 3, "member_user": {"username": "dave"}}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let dave = app.store().users().find_by_username("dave").await.unwrap().unwrap();
        assert_eq!(dave.ldap_dn.as_deref(), Some("uid=dave,ou=people,dc=berth,dc=test"));
        let missing = app
            .post("/api/v2.0/projects/team/members")
            .admin()
            .json(&json!({"role_id": 3, "member_user": {"username": "nobody"}}))
            .send()
            .await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);

        // So is a group DN; its members then get the group's role at sign-in.
        let res = app
            .post("/api/v2.0/projects/team/members")
            .admin()
            .json(&json!({"role_id": 2, "member_group": {"ldap_group_dn": DEVELOPERS}}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let members = app.get("/api/v2.0/projects/team/members").admin().send().await.json();
        let group = members.as_array().unwrap().iter().find(|m| m["entity_type"] == "g").unwrap();
        assert_eq!(group["entity_name"], "developers");
        assert_eq!(group["role_name"], "developer");

        let bob = app.get(&format!("/api/v2.0/projects/{project}")).basic("bob", "bob-pw").send().await;
        assert_eq!(bob.status, StatusCode::OK, "bob is a developer through his group");
        assert_eq!(bob.json()["current_user_role_ids"], json!([2]));
        let carol = app.get(&format!("/api/v2.0/projects/{project}")).basic("carol", "carol-pw").send().await;
        assert_eq!(carol.status, StatusCode::OK, "carol is a system administrator");
        let unknown_group = app
            .post("/api/v2.0/projects/team/members")
            .admin()
            .json(&json!({"role_id": 2, "member_group": {"ldap_group_dn": "cn=nope,ou=groups,dc=berth,dc=test"}}))
            .send()
            .await;
        assert_eq!(unknown_group.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn ldap_settings_go_through_the_configurations_api(app) {
        let res = app
            .put("/api/v2.0/configurations")
            .admin()
            .json(&json!({
                "ldap_url": env("BERTH_TEST_LDAP_URL"),
                "ldap_search_dn": env("BERTH_TEST_LDAP_BIND_DN"),
                "ldap_search_password": env("BERTH_TEST_LDAP_BIND_PASSWORD"),
                "ldap_base_dn": PEOPLE,
                "ldap_uid": "uid",
                "ldap_scope": 2,
                "ldap_timeout": 3,
                "auth_mode": "ldap_auth",
            }))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let config = app.get("/api/v2.0/configurations").admin().send().await.json();
        assert_eq!(config["ldap_url"]["value"], env("BERTH_TEST_LDAP_URL"));
        assert!(config.get("ldap_search_password").is_none(), "secrets are never returned");
        assert_eq!(ping(&app, json!({})).await.1, json!({"success": true}));
        let alice = app.get("/api/v2.0/users/current").basic("alice", "alice-pw").send().await;
        assert_eq!(alice.status, StatusCode::OK);
    }
);

/// The stored text of a configuration item, as kept in its row.
async fn stored(app: &TestApp, name: &str) -> String {
    app.store()
        .configurations()
        .stored_text(name)
        .await
        .unwrap()
        .expect("a stored row")
}

backend_test!(
    async fn configuration_secrets_are_sealed_at_rest(app) {
        let password = env("BERTH_TEST_LDAP_BIND_PASSWORD");
        configure(&app, &[]).await;
        let res = app
            .put("/api/v2.0/configurations")
            .admin()
            .json(&json!({"ldap_search_password": password, "oidc_client_secret": "oidc-s3cret", "uaa_client_secret": "uaa-s3cret"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        for (name, plain) in [
            ("ldap_search_password", password.as_str()),
            ("oidc_client_secret", "oidc-s3cret"),
            ("uaa_client_secret", "uaa-s3cret"),
        ] {
            let text = stored(&app, name).await;
            assert!(text.starts_with("\"enc:v1:"), "{name} is sealed: {text}");
            assert!(!text.contains(plain), "{name} is not kept in plain text");
        }
        let config = app.get("/api/v2.0/configurations").admin().send().await;
        assert!(!config.text().contains("enc:v1:") && !config.text().contains("oidc-s3cret"));
        assert!(config.json().get("oidc_client_secret").is_none());
        assert!(!config.text().contains("uaa-s3cret"));
        let internal = app.get("/api/v2.0/internalconfig").admin().send().await.text();
        assert!(!internal.contains("enc:v1:") && !internal.contains(&password));

        // The directory is searched with the sealed password, opened.
        assert_eq!(ping(&app, json!({})).await.1, json!({"success": true}));
        let alice = app.get("/api/v2.0/ldap/users/search?username=alice").admin().send().await;
        assert_eq!(alice.status, StatusCode::OK);
        assert_eq!(alice.json()[0]["email"], "alice@berth.test");
        let loaded = app.store().configurations().load().await.unwrap();
        assert_eq!(loaded.string("ldap_search_password"), password);
        assert_eq!(loaded.string("oidc_client_secret"), "oidc-s3cret");
    }
);

backend_test!(
    async fn plain_secrets_of_earlier_versions_are_sealed_at_start(app) {
        configure(&app, &[]).await;
        let password = env("BERTH_TEST_LDAP_BIND_PASSWORD");
        // A row as an earlier version wrote it: the JSON string, in plain text.
        let plain = json!(password).to_string();
        app.store().configurations().store_text("ldap_search_password", &plain).await.unwrap();
        assert_eq!(ping(&app, json!({})).await.1, json!({"success": true}), "a plain row is still read");

        // The next start (a new connection given the key) seals it, once.
        let url = app.database_url.clone();
        let restarted = berth::bootstrap::seal_secrets(
            berth_store::Store::connect(&url).await.unwrap(),
            crate::util::CONFIG_SECRET_KEY,
        )
        .await
        .unwrap();
        let sealed = stored(&app, "ldap_search_password").await;
        assert!(sealed.starts_with("\"enc:v1:") && !sealed.contains(&password), "{sealed}");
        assert_eq!(restarted.configurations().seal_plain_secrets().await.unwrap(), 0, "idempotent");
        assert_eq!(stored(&app, "ldap_search_password").await, sealed, "a sealed row is left as it is");
        restarted.close().await;

        assert_eq!(ping(&app, json!({})).await.1, json!({"success": true}), "the sealed row opens");
        let bob = app.get("/api/v2.0/ldap/users/search?username=bob").admin().send().await;
        assert_eq!(bob.json()[0]["username"], "bob");
    }
);

backend_test!(
    async fn a_secret_sealed_with_another_key_is_a_clear_error(app) {
        configure(&app, &[]).await;
        let url = app.database_url.clone();

        // Starting with another key fails, and says which secret and which setting.
        let other = berth_store::Store::connect(&url).await.unwrap();
        let err = berth::bootstrap::seal_secrets(other.clone(), "another-key-that-is-long-enough-000000")
            .await
            .unwrap_err();
        let message = format!("{err:#}");
        assert!(message.contains("configurations/ldap_search_password"), "{message}");
        assert!(message.contains("another CONFIG_SECRET_KEY"), "{message}");

        // A store reading it with another key (or none) gets an error, not garbage.
        let wrong = other.clone().with_sealer(std::sync::Arc::new(
            berth_auth::SecretBox::new("another-key-that-is-long-enough-000000").unwrap(),
        ));
        let err = wrong.configurations().load().await.unwrap_err();
        assert!(
            matches!(
                &err,
                berth_store::StoreError::Secret { source: berth_domain::sealing::SealError::WrongKey, .. }
            ),
            "{err}"
        );
        assert!(matches!(
            other.configurations().load().await.unwrap_err(),
            berth_store::StoreError::Secret { source: berth_domain::sealing::SealError::NoKey, .. }
        ));
        assert!(other.configurations().save(&[("ldap_search_password", s("x"))]).await.is_err(), "no key, no plain write");
        other.close().await;
        assert!(berth::bootstrap::seal_secrets(berth_store::Store::connect(&url).await.unwrap(), "short").await.is_err());

        assert_eq!(ping(&app, json!({})).await.1, json!({"success": true}), "the right key still works");
    }
);

const AUDITORS: &str = "cn=auditors,ou=groups,dc=berth,dc=test";

/// The directory settings of [`configure`] with `extra` on top, as the client reads them.
async fn directory_settings(
    app: &TestApp,
    extra: &[(&str, ConfigValue)],
) -> berth_auth::ldap::LdapSettings {
    configure(app, extra).await;
    berth::directory::settings(&app.store().configurations().load().await.unwrap())
}

backend_test!(
    async fn group_side_membership_attributes_find_groups_without_member_of(app) {
        use berth_auth::ldap::authenticate;
        // erin is listed by auditors' uniqueMember only: the directory keeps no memberOf for her.
        let user_side = directory_settings(&app, &[]).await;
        let erin = authenticate(&user_side, "erin", "erin-pw").await.unwrap().unwrap();
        assert!(erin.groups.is_empty(), "no memberOf: {:?}", erin.groups);

        let unique = directory_settings(
            &app,
            &[
                ("ldap_group_membership_attribute", s("uniqueMember")),
                ("ldap_group_search_filter", s("objectClass=groupOfUniqueNames")),
            ],
        )
        .await;
        let erin = authenticate(&unique, "erin", "erin-pw").await.unwrap().unwrap();
        assert_eq!(erin.groups, [AUDITORS]);
        assert!(authenticate(&unique, "dave", "dave-pw").await.unwrap().unwrap().groups.is_empty());
        assert!(authenticate(&unique, "erin", "wrong").await.unwrap().is_none(), "the password is still checked");

        // `member` read from the groups gives what memberOf gives.
        let member = directory_settings(
            &app,
            &[
                ("ldap_group_membership_attribute", s("member")),
                ("ldap_group_search_filter", s("objectClass=groupOfNames")),
            ],
        )
        .await;
        let alice = authenticate(&member, "alice", "alice-pw").await.unwrap().unwrap();
        assert_eq!(alice.groups, [DEVELOPERS]);
        let carol = authenticate(&member, "carol@berth.test", "carol-pw").await.unwrap().unwrap();
        assert_eq!((carol.username.as_str(), carol.groups.as_slice()), ("carol", [ADMINS.to_string()].as_slice()));
    }
);

backend_test!(
    async fn a_unique_member_group_grants_its_project_role_end_to_end(app) {
        configure(
            &app,
            &[
                ("auth_mode", s("ldap_auth")),
                ("ldap_group_membership_attribute", s("uniqueMember")),
                ("ldap_group_search_filter", s("objectClass=groupOfUniqueNames")),
            ],
        )
        .await;
        let project = crate::harbor::fixtures::project(&app, None, "audit", false).await;
        let res = app
            .post("/api/v2.0/projects/audit/members")
            .admin()
            .json(&json!({"role_id": 2, "member_group": {"ldap_group_dn": AUDITORS}}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());

        // erin gets the group's developer role: she sees the private project, pushes and pulls.
        let seen = app.get(&format!("/api/v2.0/projects/{project}")).basic("erin", "erin-pw").send().await;
        assert_eq!(seen.status, StatusCode::OK, "{}", seen.text());
        assert_eq!(seen.json()["current_user_role_ids"], json!([2]));
        let listed = app.get("/api/v2.0/projects?name=audit").basic("erin", "erin-pw").send().await.json();
        assert_eq!(listed[0]["name"], "audit", "{listed}");
        let layer = b"audited layer".to_vec();
        let digest = crate::registry::digest_of(&layer);
        let pushed = app
            .post(&format!("/v2/audit/app/blobs/uploads/?digest={digest}"))
            .basic("erin", "erin-pw")
            .raw("application/octet-stream", layer.clone())
            .send()
            .await;
        assert_eq!(pushed.status, StatusCode::CREATED, "{}", pushed.text());
        let pulled = app.get(&format!("/v2/audit/app/blobs/{digest}")).basic("erin", "erin-pw").send().await;
        assert_eq!(pulled.status, StatusCode::OK);
        assert_eq!(pulled.body, layer);

        // dave, in no group, sees nothing of it.
        let dave = app.get(&format!("/api/v2.0/projects/{project}")).basic("dave", "dave-pw").send().await;
        assert_ne!(dave.status, StatusCode::OK);
        let listed = app.get("/api/v2.0/projects?name=audit").basic("dave", "dave-pw").send().await.json();
        assert_eq!(listed, json!([]));
        let denied = app.get(&format!("/v2/audit/app/blobs/{digest}")).basic("dave", "dave-pw").send().await;
        assert_eq!(denied.status, StatusCode::UNAUTHORIZED, "Harbor's refusal of a pull");
    }
);

backend_test!(
    async fn directory_users_are_not_changed_locally_in_ldap_mode(app) {
        configure(&app, &[("auth_mode", s("ldap_auth"))]).await;
        let alice = app.get("/api/v2.0/users/current").basic("alice", "alice-pw").send().await;
        let id = alice.json()["user_id"].as_i64().unwrap();
        let password = json!({"old_password": "alice-pw", "new_password": "Local-Passw0rd1"});
        for (path, body, who) in [
            (format!("/api/v2.0/users/{id}/password"), password.clone(), Some(("alice", "alice-pw"))),
            (format!("/api/v2.0/users/{id}/password"), json!({"new_password": "Local-Passw0rd1"}), None),
            (format!("/api/v2.0/users/{id}"), json!({"email": "elsewhere@example.com"}), None),
        ] {
            let mut request = app.put(&path).json(&body);
            request = match who {
                Some((login, pw)) => request.basic(login, pw),
                None => request.admin(),
            };
            let res = request.send().await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "{path}: {}", res.text());
            assert!(res.text().contains(&format!("User with ID {id} can't be updated")), "{}", res.text());
        }
        let user = app.store().users().find_by_id(id).await.unwrap().unwrap();
        assert_eq!(user.email.as_deref(), Some("alice@berth.test"), "nothing changed");
        // The built-in admin stays local and may still change its own password.
        let res = app
            .put("/api/v2.0/users/1/password")
            .admin()
            .json(&json!({"old_password": crate::util::ADMIN_PASSWORD, "new_password": "Admin-Passw0rd2"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    }
);
