//! Harbor's users API: createUser, listUsers, searchUsers, getUser,
//! updateUserProfile, updateUserPassword, setUserSysAdmin, deleteUser.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::{PASSWORD, member, message, project, user};
use crate::backend_test;

fn new_user(name: &str) -> serde_json::Value {
    json!({"username": name, "email": format!("{name}@example.com"), "realname": format!("{name} Real"),
        "password": "Str0ng-Pass", "comment": "hi"})
}

backend_test!(
    async fn create_user_as_admin_and_sign_in(app) {
        let res = app.post("/api/v2.0/users").admin().json(&new_user("carol")).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert!(res.body.is_empty());
        let location = res.header("location").unwrap().to_string();
        let id: i64 = location.strip_prefix("/api/v2.0/users/").unwrap().parse().unwrap();
        let me = app.get("/api/v2.0/users/current").basic("carol", "Str0ng-Pass").send().await;
        assert_eq!(me.status, StatusCode::OK);
        let me = me.json();
        assert_eq!(me["user_id"], id);
        assert_eq!(me["email"], "carol@example.com");
        assert_eq!(me["realname"], "carol Real");
        assert_eq!(me["comment"], "hi");
        assert_eq!(me["sysadmin_flag"], false);

        let dup = app.post("/api/v2.0/users").admin().json(&new_user("carol")).send().await;
        assert_eq!(dup.status, StatusCode::CONFLICT);
        assert_eq!(message(&dup), "user carol or email carol@example.com already exists");
        let mut same_email = new_user("carol2");
        same_email["email"] = json!("CAROL@example.com");
        assert_eq!(app.post("/api/v2.0/users").admin().json(&same_email).send().await.status, StatusCode::CONFLICT);
    }
);

backend_test!(
    async fn create_user_needs_admin_unless_self_registration(app) {
        user(&app, "alice").await;
        assert_eq!(app.post("/api/v2.0/users").json(&new_user("x")).send().await.status, StatusCode::UNAUTHORIZED);
        let res = app.post("/api/v2.0/users").basic("alice", PASSWORD).json(&new_user("x")).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert_eq!(message(&res), "alice");
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"self_registration": true})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.post("/api/v2.0/users").json(&new_user("selfmade")).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    }
);

backend_test!(
    async fn create_user_validates_every_field(app) {
        let cases = [
            (json!({"password": "weak"}), "the password or secret must be 8-128"),
            (json!({"password": "nouppercase1"}), "the password or secret must be 8-128"),
            (json!({"email": ""}), "email can't be empty"),
            (json!({"email": "not-an-email"}), "email with illegal format"),
            (json!({"realname": ""}), "realname with illegal length"),
            (json!({"realname": "a#b"}), "realname contains illegal characters"),
            (json!({"comment": "x".repeat(31)}), "comment with illegal length"),
            (json!({"username": "a$b"}), "username contains illegal characters"),
            (json!({"username": ""}), "username with illegal length"),
            (json!({"username": 5}), "parsing the request body failed"),
        ];
        for (patch, expected) in cases {
            let mut body = new_user("valid");
            for (k, v) in patch.as_object().unwrap() {
                body[k] = v.clone();
            }
            let res = app.post("/api/v2.0/users").admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{patch}");
            assert!(message(&res).contains(expected), "{patch}: {}", message(&res));
        }
        let list = app.get("/api/v2.0/users").admin().send().await;
        assert_eq!(list.header("x-total-count"), Some("0"));
    }
);

backend_test!(
    async fn list_and_search_users(app) {
        for name in ["dave", "erin", "frank"] {
            user(&app, name).await;
        }
        assert_eq!(app.get("/api/v2.0/users").send().await.status, StatusCode::UNAUTHORIZED);
        let res = app.get("/api/v2.0/users").basic("dave", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.get("/api/v2.0/users?page_size=2").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("x-total-count"), Some("3"), "admin is not counted");
        let names: Vec<_> = res.json().as_array().unwrap().iter().map(|u| u["username"].as_str().unwrap().to_string()).collect();
        assert_eq!(names, ["dave", "erin"]);
        assert_eq!(res.header("link"), Some("</api/v2.0/users?page=2&page_size=2>; rel=\"next\""));
        let sorted = app.get("/api/v2.0/users?sort=-username").admin().send().await.json();
        assert_eq!(sorted[0]["username"], "frank");
        let fuzzy = app.get("/api/v2.0/users?q=username%3D~RI").admin().send().await.json();
        assert_eq!(fuzzy.as_array().unwrap().len(), 1);
        assert_eq!(fuzzy[0]["username"], "erin");
        let by_email = app.get("/api/v2.0/users?email=frank@").admin().send().await.json();
        assert_eq!(by_email[0]["username"], "frank");
        let admin = app.get("/api/v2.0/users?q=user_id%3D1").admin().send().await.json();
        assert_eq!(admin[0]["username"], "admin", "admin is listed when asked for by id");
        assert_eq!(app.get("/api/v2.0/users?q=bad").admin().send().await.status, StatusCode::BAD_REQUEST);

        let search = app.get("/api/v2.0/users/search?username=R").basic("dave", PASSWORD).send().await;
        assert_eq!(search.status, StatusCode::OK);
        assert_eq!(search.header("x-total-count"), Some("2"));
        assert_eq!(search.json(), json!([{"user_id": 3, "username": "erin"}, {"user_id": 4, "username": "frank"}]));
        let paged = app.get("/api/v2.0/users/search?username=a&page_size=1").basic("dave", PASSWORD).send().await;
        assert_eq!(paged.header("x-total-count"), Some("3"), "admin, dave and frank");
        assert_eq!(paged.json(), json!([{"user_id": 1, "username": "admin"}]));
        assert_eq!(app.get("/api/v2.0/users/search?username=e").send().await.status, StatusCode::UNAUTHORIZED);
        let res = app.get("/api/v2.0/users/search").basic("dave", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(message(&res).contains("username in query is required"));
    }
);

backend_test!(
    async fn get_and_update_profiles(app) {
        let dave = user(&app, "dave").await;
        let erin = user(&app, "erin").await;
        let own = app.get(&format!("/api/v2.0/users/{dave}")).basic("dave", PASSWORD).send().await;
        assert_eq!(own.status, StatusCode::OK);
        assert_eq!(own.json()["username"], "dave");
        assert_eq!(app.get(&format!("/api/v2.0/users/{erin}")).basic("dave", PASSWORD).send().await.status, StatusCode::FORBIDDEN);
        assert_eq!(app.get(&format!("/api/v2.0/users/{erin}")).send().await.status, StatusCode::UNAUTHORIZED);
        assert_eq!(app.get(&format!("/api/v2.0/users/{erin}")).admin().send().await.status, StatusCode::OK);
        let res = app.get("/api/v2.0/users/999").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(message(&res), "user 999 not found");
        assert_eq!(app.get("/api/v2.0/users/abc").admin().send().await.status, StatusCode::BAD_REQUEST);

        let res = app.put(&format!("/api/v2.0/users/{dave}")).basic("dave", PASSWORD)
            .json(&json!({"email": "dave2@example.com", "realname": "Dave Two", "comment": "c"})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let updated = app.get(&format!("/api/v2.0/users/{dave}")).admin().send().await.json();
        assert_eq!((updated["email"].clone(), updated["realname"].clone()), (json!("dave2@example.com"), json!("Dave Two")));
        let res = app.put(&format!("/api/v2.0/users/{dave}")).basic("dave", PASSWORD)
            .json(&json!({"email": "erin@example.com"})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        let res = app.put(&format!("/api/v2.0/users/{dave}")).basic("dave", PASSWORD).json(&json!({"email": "bad"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.put(&format!("/api/v2.0/users/{erin}")).basic("dave", PASSWORD).json(&json!({"realname": "x"})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert_eq!(app.get(&format!("/api/v2.0/users/{dave}")).admin().send().await.json()["email"], "dave2@example.com");
    }
);

backend_test!(
    async fn password_changes(app) {
        let dave = user(&app, "dave").await;
        let erin = user(&app, "erin").await;
        let url = format!("/api/v2.0/users/{dave}/password");
        let res = app.put(&url).basic("dave", PASSWORD).json(&json!({"old_password": "wrong", "new_password": "N3w-Passw0rd"})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.put(&url).basic("dave", PASSWORD).json(&json!({"old_password": PASSWORD, "new_password": "weak"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.put(&url).basic("dave", PASSWORD).json(&json!({"old_password": PASSWORD, "new_password": PASSWORD})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.put(&url).basic("erin", PASSWORD).json(&json!({"new_password": "N3w-Passw0rd"})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.put(&url).basic("dave", PASSWORD).json(&json!({"old_password": PASSWORD, "new_password": "N3w-Passw0rd"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(app.get("/api/v2.0/users/current").basic("dave", PASSWORD).send().await.status, StatusCode::UNAUTHORIZED);
        assert_eq!(app.get("/api/v2.0/users/current").basic("dave", "N3w-Passw0rd").send().await.status, StatusCode::OK);
        let res = app.put(&format!("/api/v2.0/users/{erin}/password")).admin().json(&json!({"new_password": "Adm1n-Set-It"})).send().await;
        assert_eq!(res.status, StatusCode::OK, "admins need no old password for others");
        assert_eq!(app.get("/api/v2.0/users/current").basic("erin", "Adm1n-Set-It").send().await.status, StatusCode::OK);
    }
);

backend_test!(
    async fn sysadmin_flag_and_delete(app) {
        let dave = user(&app, "dave").await;
        let erin = user(&app, "erin").await;
        let id = project(&app, None, "team", false).await;
        member(&app, id, erin, 2).await;
        let res = app.put(&format!("/api/v2.0/users/{dave}/sysadmin")).basic("erin", PASSWORD).json(&json!({"sysadmin_flag": true})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.put(&format!("/api/v2.0/users/{dave}/sysadmin")).admin().json(&json!({"sysadmin_flag": true})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let me = app.get("/api/v2.0/users/current").basic("dave", PASSWORD).send().await.json();
        assert_eq!(me["sysadmin_flag"], true);
        assert_eq!(app.get("/api/v2.0/configurations").basic("dave", PASSWORD).send().await.status, StatusCode::OK);
        assert_eq!(app.put("/api/v2.0/users/999/sysadmin").admin().json(&json!({"sysadmin_flag": true})).send().await.status, StatusCode::NOT_FOUND);
        assert_eq!(app.put("/api/v2.0/users/1/sysadmin").admin().json(&json!({"sysadmin_flag": false})).send().await.status, StatusCode::FORBIDDEN);

        assert_eq!(app.delete(&format!("/api/v2.0/users/{dave}")).basic("erin", PASSWORD).send().await.status, StatusCode::FORBIDDEN);
        assert_eq!(app.delete(&format!("/api/v2.0/users/{dave}")).basic("dave", PASSWORD).send().await.status, StatusCode::FORBIDDEN, "not oneself");
        assert_eq!(app.delete("/api/v2.0/users/1").basic("dave", PASSWORD).send().await.status, StatusCode::FORBIDDEN);
        let res = app.delete(&format!("/api/v2.0/users/{erin}")).basic("dave", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(app.get("/api/v2.0/users/current").basic("erin", PASSWORD).send().await.status, StatusCode::UNAUTHORIZED);
        assert_eq!(app.get(&format!("/api/v2.0/users/{erin}")).admin().send().await.status, StatusCode::NOT_FOUND);
        assert_eq!(app.delete(&format!("/api/v2.0/users/{erin}")).admin().send().await.status, StatusCode::NOT_FOUND);
        let members = app.get("/api/v2.0/projects/team/members").admin().send().await;
        assert_eq!(members.header("x-total-count"), Some("1"), "memberships go with the user");
        // The name and e-mail are free again.
        let res = app.post("/api/v2.0/users").admin().json(&json!({"username": "erin", "email": "erin@example.com",
            "realname": "Erin", "password": "Str0ng-Pass"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
    }
);

backend_test!(
    async fn sysadmin_flag_absent_or_null_means_false(app) {
        let dave = user(&app, "dave").await;
        let path = format!("/api/v2.0/users/{dave}/sysadmin");
        let flag = || {
            let app = &app;
            async move {
                let me = app.get("/api/v2.0/users/current").basic("dave", PASSWORD).send().await.json();
                me["sysadmin_flag"].as_bool().unwrap()
            }
        };
        for revoke in [json!({}), json!({"sysadmin_flag": null})] {
            let res = app.put(&path).admin().json(&json!({"sysadmin_flag": true})).send().await;
            assert_eq!(res.status, StatusCode::OK);
            assert!(flag().await);
            // Terraform's harbor_user omits the flag when it is false.
            let res = app.put(&path).admin().json(&revoke).send().await;
            assert_eq!(res.status, StatusCode::OK, "{revoke}: {}", res.text());
            assert!(!flag().await, "{revoke}");
        }
        let res = app.put(&path).admin().json(&json!({"sysadmin_flag": "yes"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.put("/api/v2.0/users/1/sysadmin").admin().json(&json!({})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "the built-in admin stays one");
    }
);

backend_test!(
    /// Replication acts as `berth-replication` (its pushes start no
    /// event-based replication, and the audit log shows them as
    /// replication's): no user may take the name, in any case, by an
    /// administrator or by self-registration.
    async fn create_user_refuses_the_replication_actors_name(app) {
        for name in ["berth-replication", "Berth-Replication"] {
            let res = app.post("/api/v2.0/users").admin().json(&new_user(name)).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{name}: {}", res.text());
            assert_eq!(message(&res), format!("username {name} is reserved"));
        }
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"self_registration": true})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.post("/api/v2.0/users").json(&new_user("berth-replication")).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        assert!(app.store().users().find_by_username("berth-replication").await.unwrap().is_none());
        let res = app.post("/api/v2.0/users").admin().json(&new_user("berth-replication2")).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "a longer name is a name: {}", res.text());
    }
);
