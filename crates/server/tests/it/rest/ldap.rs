//! The generator-rest surface in `ldap_auth` mode, against the slapd of
//! `scripts/ldap-fixture`: directory users sign in at `POST /auth` with their
//! uid or e-mail, and `POST /users` refuses local users as Harbor's createUser does.

use axum::http::StatusCode;
use serde_json::json;

use super::assert_empty_401;
use crate::backend_test;
use crate::harbor::ldap::{configure, s};
use crate::util::MASTER_KEY;

backend_test!(
    async fn directory_users_sign_in_at_post_auth_and_write_articles(app) {
        configure(&app, &[("auth_mode", s("ldap_auth"))]).await;
        let auth = || app.post(&format!("/auth?access_token={MASTER_KEY}"));

        // The directory uid.
        let res = auth().basic("alice", "alice-pw").send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let body = res.json();
        assert_eq!(body["user"]["email"], "alice@berth.test");
        assert_eq!(body["user"]["name"], "Alice Liddell");
        let alice_id = body["user"]["id"].as_str().unwrap().to_string();
        let article = app
            .post("/articles")
            .bearer(body["token"].as_str().unwrap())
            .json(&json!({"title": "from the directory", "content": "hello"}))
            .send()
            .await;
        assert_eq!(article.status, StatusCode::CREATED, "{}", article.text());
        assert_eq!(article.json()["user"]["id"], alice_id.as_str());

        // The directory e-mail (the `mail` attribute), master key in a form body.
        let res = app
            .post("/auth")
            .basic("bob@berth.test", "bob-pw")
            .form(&[("access_token", MASTER_KEY)])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let bob = res.json();
        assert_eq!(bob["user"]["email"], "bob@berth.test");
        let token = bob["token"].as_str().unwrap();
        let article = app.post("/articles").bearer(token).json(&json!({"title": "bob"})).send().await;
        assert_eq!(article.status, StatusCode::CREATED, "{}", article.text());
        // One users table: the same account on the Harbor surface.
        let harbor = app.get("/api/v2.0/users/current").basic("bob", "bob-pw").send().await.json();
        assert_eq!(harbor["user_id"].to_string(), bob["user"]["id"].as_str().unwrap());
        let again = auth().basic("bob", "bob-pw").send().await.json();
        assert_eq!(again["user"]["id"], bob["user"]["id"], "uid and e-mail name one user");

        // Wrong or unknown credentials, and the master key still checked first.
        assert_empty_401(&auth().basic("alice", "wrong-pw").send().await);
        assert_empty_401(&auth().basic("alice@berth.test", "wrong-pw").send().await);
        assert_empty_401(&auth().basic("nobody@berth.test", "whatever").send().await);
        assert_empty_401(&auth().send().await);
        let no_master = app.post("/auth").basic("alice", "alice-pw").send().await;
        assert_eq!(no_master.status, StatusCode::UNAUTHORIZED);
        assert_eq!(no_master.text(), "Unauthorized");
    }
);

backend_test!(
    async fn post_users_refuses_local_users_in_ldap_auth_mode(app) {
        configure(&app, &[("auth_mode", s("ldap_auth"))]).await;
        let res = app
            .post("/users")
            .json(&json!({"access_token": MASTER_KEY, "email": "local@example.com", "password": "123456"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert_eq!(
            res.json(),
            json!({"valid": false, "message": "creating local user is not allowed under auth mode: ldap_auth"})
        );
        assert!(app.store().users().find_by_login("local@example.com").await.unwrap().is_none());
        // The same answer as Harbor's createUser.
        let harbor = app
            .post("/api/v2.0/users")
            .admin()
            .json(&json!({"username": "local", "email": "local@example.com", "realname": "L", "password": "Passw0rd1"}))
            .send()
            .await;
        assert_eq!(harbor.status, StatusCode::FORBIDDEN);
        assert_eq!(harbor.json()["errors"][0]["message"], res.json()["message"]);
        // Without the master key, still 401 first.
        let res = app.post("/users").json(&json!({"email": "local@example.com", "password": "123456"})).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
    }
);

backend_test!(
    async fn a_directory_user_keeps_no_local_password(app) {
        configure(&app, &[("auth_mode", s("ldap_auth"))]).await;
        let res = app.post(&format!("/auth?access_token={MASTER_KEY}")).basic("alice", "alice-pw").send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let id = res.json()["user"]["id"].as_str().unwrap().to_string();
        let res = app
            .put(&format!("/users/{id}/password"))
            .basic("alice@berth.test", "alice-pw")
            .json(&json!({"password": "Local-Passw0rd1"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let user = app.store().users().find_by_id(id.parse().unwrap()).await.unwrap().unwrap();
        assert!(user.password_hash.is_none(), "no local password was set");
        let res = app.post(&format!("/auth?access_token={MASTER_KEY}")).basic("alice", "alice-pw").send().await;
        assert_eq!(res.status, StatusCode::CREATED, "the directory password still signs in");
    }
);
