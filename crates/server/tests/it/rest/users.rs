//! `/users`: sign-up, listing, views, profile and password changes, deletion.

use axum::http::StatusCode;
use serde_json::json;

use super::{
    assert_challenge_401, assert_empty_401, assert_empty_404, assert_param_400, sign_up,
    three_users, wire_keys,
};
use crate::backend_test;
use crate::util::MASTER_KEY;

backend_test!(
    async fn create_user_with_the_master_key(app) {
        // Form fields, the master key in the body.
        let res = app
            .post("/users")
            .form(&[("access_token", MASTER_KEY), ("email", " D@d.com "), ("password", "123456")])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(wire_keys(&res.text()), vec![vec!["id", "name", "picture", "email", "createdAt"]]);
        let body = res.json();
        assert_eq!(body["email"], "d@d.com");
        assert_eq!(body["name"], "d", "the name defaults to the e-mail's local part");
        assert_eq!(
            body["picture"],
            "https://gravatar.com/avatar/a937f72ddab021504b148a7d984bf4cb?d=identicon"
        );
        assert!(body["id"].is_string());
        assert_eq!(body["createdAt"].as_str().unwrap().len(), 24);
        assert!(!res.text().contains("123456"), "the password never appears");

        // JSON, role user, the key in the query; explicit empty name is kept.
        let res = app
            .post(&format!("/users?access_token={MASTER_KEY}"))
            .json(&json!({"email": "e@e.com", "password": 654321, "role": "user", "name": ""}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.json()["name"], "");

        // The key in the Authorization header, role admin: a Harbor system administrator.
        let res = app
            .post("/users")
            .bearer(MASTER_KEY)
            .json(&json!({"email": "f@f.com", "password": "123456", "role": "admin", "picture": " http://x/p.png "}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.json()["picture"], "http://x/p.png");
        let harbor = app.get("/api/v2.0/users/current").basic("f@f.com", "123456").send().await;
        assert_eq!(harbor.status, StatusCode::OK);
        assert_eq!(harbor.json()["sysadmin_flag"], true);
        assert_eq!(harbor.json()["username"], "f@f.com");
        let harbor = app.get("/api/v2.0/users/current").basic("e@e.com", "654321").send().await;
        assert_eq!(harbor.json()["sysadmin_flag"], false, "numbers are stringified passwords");
    }
);

backend_test!(
    async fn create_user_validation_and_conflicts(app) {
        sign_up(&app, "a@a.com", "user", "user").await;
        let post = |body: serde_json::Value| {
            let mut body = body;
            body["access_token"] = json!(MASTER_KEY);
            app.post("/users").json(&body).send()
        };
        let res = post(json!({"email": "A@a.com", "password": "123456"})).await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        assert_eq!(
            res.text(),
            r#"{"valid":false,"param":"email","message":"email already registered"}"#
        );
        let res = post(json!({"email": "invalid", "password": "123456"})).await;
        assert_eq!(
            res.text(),
            r#"{"name":"match","param":"email","value":"invalid","match":{},"valid":false,"message":"email must match regular expression /^\\S+@\\S+\\.\\S+$/"}"#
        );
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = post(json!({"password": "123456"})).await;
        assert_eq!(
            res.text(),
            r#"{"name":"required","param":"email","required":true,"valid":false,"message":"email is required"}"#
        );
        let res = post(json!({"email": "", "password": "123456"})).await;
        assert_eq!(assert_param_400(&res, "email")["name"], "match");
        let res = post(json!({"email": "d@d.com", "password": "123"})).await;
        assert_eq!(
            res.text(),
            r#"{"name":"minlength","param":"password","value":"123","minlength":6,"valid":false,"message":"password must have length greater than or equal to 6"}"#
        );
        let res = post(json!({"email": "d@d.com"})).await;
        assert_param_400(&res, "password");
        let res = post(json!({"email": "d@d.com", "password": ""})).await;
        assert_eq!(assert_param_400(&res, "password")["value"], "");
        let res = post(json!({"email": "d@d.com", "password": "123456", "role": "invalid"})).await;
        assert_eq!(
            res.text(),
            r#"{"name":"enum","param":"role","value":"invalid","enum":["user","admin"],"valid":0,"message":"role must be one of: user, admin"}"#
        );
        // Nothing was created by the failures.
        let res = app.post("/auth").basic("d@d.com", "123456").form(&[("access_token", MASTER_KEY)]).send().await;
        assert_empty_401(&res);
    }
);

backend_test!(
    async fn create_user_needs_the_master_key(app) {
        let (a, _, c) = three_users(&app).await;
        let body = json!({"email": "d@d.com", "password": "123456"});
        let res = app.post("/users").json(&body).send().await;
        assert_challenge_401(&res, false);
        let mut with = body.clone();
        with["access_token"] = json!(c.token);
        let res = app.post("/users").json(&with).send().await;
        assert_challenge_401(&res, true);
        with["access_token"] = json!(a.token);
        let res = app.post("/users").json(&with).send().await;
        assert_challenge_401(&res, true);
        with["access_token"] = json!(MASTER_KEY);
        let res = app.post(&format!("/users?access_token={MASTER_KEY}")).json(&with).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(res.text(), "Bad Request", "the key in two places");
        let res = app.post("/users").header("authorization", "Bearer").json(&body).send().await;
        assert_eq!(res.text(), "Bad Request", "a header that is not two parts");
        let res = app
            .post(&format!("/users?access_token={MASTER_KEY}&access_token={MASTER_KEY}"))
            .json(&body)
            .send()
            .await;
        assert_challenge_401(&res, true);
    }
);

backend_test!(
    async fn index_users_for_admins(app) {
        let (a, _, c) = three_users(&app).await;
        let res = app.get("/users").bearer(&c.token).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let list = res.json();
        // The three users and the built-in `admin`, newest first, public views.
        assert_eq!(list.as_array().unwrap().len(), 4);
        assert_eq!(list[0]["id"], c.id);
        let item_keys = wire_keys(&res.text());
        assert_eq!(item_keys[0], ["id", "name", "picture"]);
        assert_eq!(item_keys[3], ["id", "name"], "the built-in admin has no picture");
        let res = app.get(&format!("/users?access_token={}&page=2&limit=1", c.token)).send().await;
        assert_eq!(res.json().as_array().unwrap().len(), 1);
        assert_eq!(res.json()[0]["name"], "user");
        let res = app.get("/users?q=user").bearer(&c.token).send().await;
        assert_eq!(res.json().as_array().unwrap().len(), 2);
        let res = app.get("/users?q=B%40B.COM").bearer(&c.token).send().await;
        assert_eq!(res.json().as_array().unwrap().len(), 1, "q searches the e-mail too");
        let res = app.get("/users?q=nobody").bearer(&c.token).send().await;
        assert_eq!(res.json(), json!([]));
        let res = app.get("/users?fields=name").bearer(&c.token).send().await;
        assert!(wire_keys(&res.text()).iter().all(|k| k == &["id", "name"]), "{}", res.text());
        let res = app.get("/users?fields=-picture,-id").bearer(&c.token).send().await;
        assert!(wire_keys(&res.text()).iter().all(|k| k == &["name"]), "{}", res.text());
        let res = app.get("/users?sort=name,id&limit=2").bearer(&c.token).send().await;
        assert_eq!(res.json()[0]["name"], "c");
        assert_eq!(res.json()[1]["name"], "system admin");
        let res = app.get("/users?sort=bogus").bearer(&c.token).send().await;
        assert_eq!(res.status, StatusCode::OK, "unknown sort keys are ignored");

        let res = app.get("/users?page=31").bearer(&c.token).send().await;
        assert_eq!(
            res.text(),
            r#"{"name":"max","param":"page","value":31,"max":30,"valid":false,"message":"page must be lower than or equal to 30"}"#
        );
        let res = app.get("/users?page=0").bearer(&c.token).send().await;
        assert_eq!(
            res.text(),
            r#"{"name":"min","param":"page","value":0,"min":1,"valid":false,"message":"page must be greater than or equal to 1"}"#
        );
        let res = app.get("/users?limit=abc").bearer(&c.token).send().await;
        assert_eq!(
            res.text(),
            r#"{"name":"max","param":"limit","value":null,"max":100,"valid":false,"message":"limit must be lower than or equal to 100"}"#
        );
        let res = app.get("/users?limit=0").bearer(&c.token).send().await;
        assert_param_400(&res, "limit");

        assert_empty_401(&app.get("/users").bearer(&a.token).send().await);
        assert_empty_401(&app.get("/users").send().await);
        assert_empty_401(&app.get("/users?page=31").bearer(&a.token).send().await);
    }
);

backend_test!(
    async fn show_me_and_show_user(app) {
        let (a, _, _) = three_users(&app).await;
        let res = app.get("/users/me").bearer(&a.token).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json()["id"], a.id);
        assert_eq!(res.json()["email"], "a@a.com");
        assert_empty_401(&app.get("/users/me").send().await);
        assert_empty_401(&app.get("/users/me").bearer("garbage").send().await);

        let res = app.get(&format!("/users/{}", a.id)).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(wire_keys(&res.text()), vec![vec!["id", "name", "picture"]]);
        assert_eq!(res.json()["id"], a.id);
        assert_empty_404(&app.get("/users/123456789").send().await);
        assert_empty_404(&app.get("/users/123456789098765432123456").send().await);
        assert_empty_404(&app.get("/users/abc").send().await);
        assert_empty_404(&app.get("/users/%FF").send().await);
        assert_empty_404(&app.get("/users/99999999999999999999999").send().await);
    }
);

backend_test!(
    async fn update_user_replaces_name_and_picture(app) {
        let (a, b, c) = three_users(&app).await;
        let res = app.put("/users/me").bearer(&a.token).json(&json!({"name": "test"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let body = res.json();
        assert_eq!(body["name"], "test");
        assert!(body.get("picture").is_none(), "an omitted picture is removed (PUT replaces)");
        let res = app
            .put("/users/me")
            .bearer(&a.token)
            .json(&json!({"email": "test@test.com", "name": "n", "picture": "p"}))
            .send()
            .await;
        assert_eq!(res.json()["email"], "a@a.com", "email cannot be changed");
        assert_eq!(res.json()["picture"], "p");
        assert_empty_401(&app.put("/users/me").json(&json!({"name": "x"})).send().await);

        let res = app.put(&format!("/users/{}", a.id)).bearer(&a.token).form(&[("name", "own")]).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.put(&format!("/users/{}", a.id)).bearer(&c.token).json(&json!({"name": "by admin"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json()["name"], "by admin");
        let res = app.put(&format!("/users/{}", a.id)).bearer(&b.token).json(&json!({"name": "x"})).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(res.text(), r#"{"valid":false,"message":"You can't change other user's data"}"#);
        assert_empty_401(&app.put(&format!("/users/{}", a.id)).json(&json!({"name": "x"})).send().await);
        assert_empty_404(&app.put("/users/999999").bearer(&c.token).json(&json!({"name": "x"})).send().await);
        assert_empty_404(&app.put("/users/nope").bearer(&c.token).json(&json!({"name": "x"})).send().await);
        // The name is searchable under its new value only.
        let res = app.get("/users?q=by%20admin").bearer(&c.token).send().await;
        assert_eq!(res.json().as_array().unwrap().len(), 1);
    }
);

backend_test!(
    async fn update_password_with_basic_credentials(app) {
        let (a, b, _) = three_users(&app).await;
        let res = app
            .put(&format!("/users/{}/password", a.id))
            .basic("a@a.com", "123456")
            .json(&json!({"password": "654321"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.json()["email"], "a@a.com");
        let auth = |password: &'static str| {
            app.post(&format!("/auth?access_token={MASTER_KEY}")).basic("a@a.com", password).send()
        };
        assert_eq!(auth("654321").await.status, StatusCode::CREATED);
        assert_empty_401(&auth("123456").await);

        let res = app
            .put("/users/me/password")
            .basic("a@a.com", "654321")
            .form(&[("password", "abcdef")])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(auth("abcdef").await.status, StatusCode::CREATED);

        let res = app.put("/users/me/password").basic("a@a.com", "abcdef").json(&json!({"password": "321"})).send().await;
        assert_param_400(&res, "password");
        let res = app.put("/users/me/password").basic("a@a.com", "abc").json(&json!({"password": "654321"})).send().await;
        assert_param_400(&res, "password");
        let res = app.put("/users/me/password").basic("invalid", "abcdef").json(&json!({"password": "654321"})).send().await;
        assert_param_400(&res, "email");
        assert_empty_401(&app.put("/users/me/password").bearer(&a.token).json(&json!({"password": "654321"})).send().await);
        assert_empty_401(&app.put("/users/me/password").json(&json!({"password": "654321"})).send().await);
        assert_empty_401(&app.put("/users/me/password").basic("a@a.com", "wrong-pw").json(&json!({"password": "654321"})).send().await);
        let res = app
            .put(&format!("/users/{}/password", a.id))
            .basic("b@b.com", "123456")
            .json(&json!({"password": "654321"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            res.text(),
            r#"{"valid":false,"param":"password","message":"You can't change other user's password"}"#
        );
        let res = app.put("/users/999999/password").basic("b@b.com", "123456").json(&json!({"password": "654321"})).send().await;
        assert_empty_404(&res);
        assert_eq!(auth("abcdef").await.status, StatusCode::CREATED, "unchanged by the failures");
        let _ = b;
    }
);

backend_test!(
    async fn destroy_user_leaves_a_tombstone(app) {
        let (a, b, c) = three_users(&app).await;
        assert_empty_401(&app.delete(&format!("/users/{}", a.id)).bearer(&b.token).send().await);
        assert_empty_401(&app.delete(&format!("/users/{}", a.id)).send().await);
        assert_empty_404(&app.delete("/users/999999").bearer(&c.token).send().await);
        assert_empty_404(&app.delete("/users/xyz").bearer(&c.token).send().await);
        let res = app
            .delete(&format!("/users/{}", a.id))
            .json(&json!({"access_token": c.token}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::NO_CONTENT, "the token in a DELETE body counts");
        assert!(res.body.is_empty());
        assert_empty_404(&app.get(&format!("/users/{}", a.id)).send().await);
        assert_empty_401(&app.get("/users/me").bearer(&a.token).send().await);
        let res = app.post(&format!("/auth?access_token={MASTER_KEY}")).basic("a@a.com", "123456").send().await;
        assert_empty_401(&res);
        assert_empty_404(&app.delete(&format!("/users/{}", a.id)).bearer(&c.token).send().await);
        // The e-mail is free again, under a new id.
        let again = sign_up(&app, "a@a.com", "again", "user").await;
        assert_ne!(again.id, a.id);

        // Neither the built-in administrator nor oneself, as Harbor's deleteUser.
        for id in [c.id.as_str(), "1"] {
            let res = app.delete(&format!("/users/{id}")).bearer(&c.token).send().await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "{id}: {}", res.text());
        }
        assert_eq!(app.get("/users/me").bearer(&c.token).send().await.status, StatusCode::OK);
        assert!(app.store().users().find_by_id(1).await.unwrap().is_some_and(|u| u.username == "admin"));
    }
);

backend_test!(
    async fn a_token_sees_changes_to_its_user_at_once(app) {
        let (a, _, c) = three_users(&app).await;
        let me = |token: &str| app.get("/users/me").bearer(token).send();
        assert_eq!(me(&a.token).await.json()["name"], "user");

        // Changed through the generator-rest API.
        let res = app.put(&format!("/users/{}", a.id)).bearer(&c.token).json(&json!({"name": "renamed"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(me(&a.token).await.json()["name"], "renamed");

        // Changed through the Harbor API: profile, then the administrator flag.
        let res = app
            .put(&format!("/api/v2.0/users/{}", a.id))
            .admin()
            .json(&json!({"email": "a@a.com", "realname": "harbor name", "comment": ""}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(me(&a.token).await.json()["name"], "harbor name");
        assert_empty_401(&app.get("/users").bearer(&a.token).send().await);
        let res = app
            .put(&format!("/api/v2.0/users/{}/sysadmin", a.id))
            .admin()
            .json(&json!({"sysadmin_flag": true}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        // A role change ends the tokens issued before it; a new one has the new role.
        assert_empty_401(&me(&a.token).await);
        let res = app
            .post(&format!("/auth?access_token={MASTER_KEY}"))
            .basic("a@a.com", "123456")
            .send()
            .await;
        let token = res.json()["token"].as_str().unwrap().to_string();
        assert_eq!(app.get("/users").bearer(&token).send().await.status, StatusCode::OK);

        // Deleted: the token stops working.
        let res = app.delete(&format!("/users/{}", a.id)).bearer(&c.token).send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        assert_empty_401(&me(&token).await);
    }
);

backend_test!(
    async fn a_token_sees_changes_made_elsewhere_within_the_window(app) {
        let (a, _, _) = three_users(&app).await;
        let me = || app.get("/users/me").bearer(&a.token).send();
        assert_eq!(me().await.json()["name"], "user");
        // Another instance sharing the database changes the user: this one's
        // cache serves the old name for at most its revalidation window, which
        // the cache's clock crosses here without waiting.
        let id: i64 = a.id.parse().unwrap();
        app.store().users().update_profile(id, Some("elsewhere"), None, "").await.unwrap();
        app.state.users.advance_clock(app.state.users.times().revalidate);
        assert_eq!(me().await.json()["name"], "elsewhere", "the change shows once the window is over");
    }
);
