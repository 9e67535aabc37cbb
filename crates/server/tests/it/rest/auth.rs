//! `POST /auth` and how user tokens travel.

use axum::http::StatusCode;
use base64::Engine;
use serde_json::json;

use super::{
    assert_challenge_401, assert_empty_401, assert_param_400, three_users, unix_now, wire_keys,
};
use crate::backend_test;
use crate::util::{JWT_SECRET, MASTER_KEY};

backend_test!(
    async fn authenticate_with_master_key_and_basic(app) {
        let (a, _, _) = three_users(&app).await;
        let res = app
            .post(&format!("/auth?access_token={MASTER_KEY}"))
            .basic("a@a.com", "123456")
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(wire_keys(&res.text())[0], vec!["token", "user"]);
        let body = res.json();
        assert_eq!(body["user"]["id"], a.id);
        assert_eq!(body["user"]["email"], "a@a.com");
        let token = body["token"].as_str().unwrap();
        // HS256 with {id, iat, exp}; exp is JWT_EXPIRES_IN (7 days here) after iat.
        let payload = token.split('.').nth(1).unwrap();
        let claims: serde_json::Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap(),
        )
        .unwrap();
        assert_eq!(claims["id"], a.id);
        assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 7 * 86_400);
        let me = app.get("/users/me").bearer(token).send().await;
        assert_eq!(me.json()["id"], a.id);

        // The key in a form body; the e-mail trimmed and case-insensitive.
        let res = app
            .post("/auth")
            .basic(" A@A.com", "123456")
            .form(&[("access_token", MASTER_KEY)])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED);
    }
);

backend_test!(
    async fn authenticate_errors(app) {
        three_users(&app).await;
        let auth = || app.post(&format!("/auth?access_token={MASTER_KEY}"));
        assert_param_400(&auth().basic("invalid", "123456").send().await, "email");
        assert_param_400(&auth().basic("a@a.com", "123").send().await, "password");
        assert_empty_401(&auth().basic("z@z.com", "123456").send().await);
        assert_empty_401(&auth().basic("a@a.com", "1234567").send().await);
        assert_empty_401(&auth().basic("a@a.com", "").send().await);
        assert_empty_401(&auth().send().await);
        assert_empty_401(&auth().header("authorization", "Basic !!!").send().await);
        // The master key is checked first.
        assert_challenge_401(&app.post("/auth").basic("a@a.com", "123456").send().await, false);
        assert_challenge_401(
            &app.post("/auth?access_token=wrong").basic("a@a.com", "123456").send().await,
            true,
        );
        let res = app
            .post(&format!("/auth?access_token={MASTER_KEY}"))
            .basic("a@a.com", "123456")
            .json(&json!({"access_token": MASTER_KEY}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(res.text(), "Bad Request");
    }
);

backend_test!(
    async fn user_tokens_from_query_body_or_header(app) {
        let (a, b, _) = three_users(&app).await;
        let res = app.get(&format!("/users/me?access_token={}", a.token)).send().await;
        assert_eq!(res.json()["id"], a.id);
        let res = app.get("/users/me").json(&json!({"access_token": a.token})).send().await;
        assert_eq!(res.json()["id"], a.id, "bodies are read on GET too");
        let res = app.get("/users/me").header("authorization", &format!("bearer  {}", a.token)).send().await;
        assert_eq!(res.json()["id"], a.id);
        // The first non-empty source wins, with no conflict check.
        let res = app.get(&format!("/users/me?access_token={}", b.token)).bearer(&a.token).send().await;
        assert_eq!(res.json()["id"], b.id);
        let res = app.get("/users/me?access_token=").bearer(&a.token).send().await;
        assert_eq!(res.json()["id"], a.id, "an empty query token is skipped");
        assert_empty_401(&app.get("/users/me?access_token=garbage").bearer(&a.token).send().await);

        // An expired token, and one signed with another secret.
        let expired = berth_auth::TokenKeys::new(JWT_SECRET.as_bytes(), 60)
            .sign_user(a.id.parse().unwrap(), unix_now() - 3600);
        assert_empty_401(&app.get("/users/me").bearer(&expired).send().await);
        let forged = berth_auth::TokenKeys::new(b"another secret", 60).sign_user(a.id.parse().unwrap(), unix_now());
        assert_empty_401(&app.get("/users/me").bearer(&forged).send().await);
        // The master key is not a user token.
        assert_empty_401(&app.get("/users/me").bearer(MASTER_KEY).send().await);
        // A token valid only from an hour on (`nbf`) is not valid now.
        let with_nbf = |nbf: i64| {
            jsonwebtoken::encode(
                &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
                &json!({"id": a.id, "iat": unix_now(), "nbf": nbf}),
                &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
            )
            .unwrap()
        };
        assert_empty_401(&app.get("/users/me").bearer(&with_nbf(unix_now() + 3600)).send().await);
        let res = app.get("/users/me").bearer(&with_nbf(unix_now() - 60)).send().await;
        assert_eq!(res.json()["id"], a.id, "a past nbf is fine");
    }
);

backend_test!(
    async fn bad_input_is_never_html(app) {
        let (a, _, _) = three_users(&app).await;
        let res = app.post("/articles").bearer(&a.token).raw("application/json", "{not json").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(res.json()["valid"], false);
        let res = app.post("/articles").bearer(&a.token).raw("application/json", "\"text\"").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let big = format!("{{\"title\":\"{}\"}}", "x".repeat(200 * 1024));
        let res = app.post("/articles").bearer(&a.token).raw("application/json", big).send().await;
        assert_eq!(res.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(res.json()["valid"], false);
        let res = app.get("/no/such/route").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert!(res.header("content-type").unwrap().starts_with("application/json"));
        let res = app.get("/users/").bearer(&a.token).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED, "trailing slashes are optional");
    }
);

backend_test!(
    async fn cors_is_open_on_the_rest_routes(app) {
        let res = app
            .request(axum::http::Method::OPTIONS, "/articles")
            .header("origin", "http://example.org")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type,authorization")
            .send()
            .await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        assert_eq!(res.header("access-control-allow-origin"), Some("*"));
        assert_eq!(
            res.header("access-control-allow-methods"),
            Some("GET,HEAD,PUT,PATCH,POST,DELETE")
        );
        assert_eq!(
            res.header("access-control-allow-headers"),
            Some("content-type,authorization")
        );
        let res = app.get("/articles").header("origin", "http://example.org").send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("access-control-allow-origin"), Some("*"));

        // Configurable: an explicit list, and off.
        let app = app.with_rest(berth::outbound::RestConfig {
            cors_origins: "https://ui.example".into(),
            ..Default::default()
        });
        let res = app.get("/articles").header("origin", "https://ui.example").send().await;
        assert_eq!(res.header("access-control-allow-origin"), Some("https://ui.example"));
        let res = app.get("/articles").header("origin", "https://evil.example").send().await;
        assert_eq!(res.header("access-control-allow-origin"), None);
        let app = app.with_rest(berth::outbound::RestConfig {
            cors_origins: "none".into(),
            ..Default::default()
        });
        let res = app.get("/articles").header("origin", "http://example.org").send().await;
        assert_eq!(res.header("access-control-allow-origin"), None);
    }
);
