//! Harbor users: the current user, Basic and bearer sign-in.

use axum::http::StatusCode;

use crate::backend_test;
use crate::util::ADMIN_PASSWORD;

backend_test!(
    async fn current_user_is_the_admin_with_basic_auth(app) {
        let res = app.get("/api/v2.0/users/current").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let body = res.json();
        assert_eq!(body["user_id"], 1);
        assert_eq!(body["username"], "admin");
        assert_eq!(body["sysadmin_flag"], true);
        assert_eq!(body["admin_role_in_auth"], false);
        assert_eq!(body["email"], "admin@example.com");
        assert!(body.get("password").is_none());
        assert_eq!(body["creation_time"].as_str().unwrap().len(), 24);
    }
);

backend_test!(
    async fn current_user_needs_a_login(app) {
        let res = app.get("/api/v2.0/users/current").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            res.json(),
            serde_json::json!({"errors": [{"code": "UNAUTHORIZED", "message": "unauthorized"}]})
        );
    }
);

backend_test!(
    async fn wrong_credentials_are_refused_not_anonymous(app) {
        for (login, password) in [("admin", "wrong"), ("nobody", ADMIN_PASSWORD), ("", "")] {
            let res = app.get("/api/v2.0/users/current").basic(login, password).send().await;
            assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{login}:{password}");
        }
        let res = app.get("/api/v2.0/health").basic("admin", "wrong").send().await;
        assert_eq!(res.status, StatusCode::OK, "health needs no authentication");
        let res = app.get("/api/v2.0/users/current").header("authorization", "Digest x").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
    }
);

backend_test!(
    async fn users_sign_in_by_username_or_email(app) {
        let id = app.create_user("alice", "Passw0rd:with:colons").await;
        for login in ["alice", "alice@example.com", "ALICE@example.com"] {
            let res = app.get("/api/v2.0/users/current").basic(login, "Passw0rd:with:colons").send().await;
            assert_eq!(res.status, StatusCode::OK, "{login}");
            assert_eq!(res.json()["user_id"], id);
            assert_eq!(res.json()["sysadmin_flag"], false);
        }
    }
);

backend_test!(
    async fn a_password_change_invalidates_cached_credentials(app) {
        let id = app.create_user("bob", "Old-Passw0rd").await;
        let ok = app.get("/api/v2.0/users/current").basic("bob", "Old-Passw0rd").send().await;
        assert_eq!(ok.status, StatusCode::OK);
        // The change goes straight to the store, as another instance would make it:
        // it takes effect once the cached entry is due for revalidation, which
        // the cache's clock reaches without waiting.
        let hash = berth_auth::password::hash_password("New-Passw0rd");
        assert!(app.store().users().set_password(id, &hash).await.unwrap());
        let credentials = &app.state.credentials;
        credentials.advance_clock(credentials.times().revalidate);
        let old = app.get("/api/v2.0/users/current").basic("bob", "Old-Passw0rd").send().await;
        assert_eq!(old.status, StatusCode::UNAUTHORIZED);
        let new = app.get("/api/v2.0/users/current").basic("bob", "New-Passw0rd").send().await;
        assert_eq!(new.status, StatusCode::OK);
    }
);

backend_test!(
    async fn bearer_user_tokens_sign_in(app) {
        let id = app.create_user("carol", "Passw0rd").await;
        let token = app.state.tokens.sign_user(id, time_now());
        let res = app.get("/api/v2.0/users/current").bearer(&token).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json()["username"], "carol");
        let res = app.get("/api/v2.0/users/current").bearer("not.a.token").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
    }
);

fn time_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}
