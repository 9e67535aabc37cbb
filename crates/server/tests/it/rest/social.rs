//! `POST /auth/{github,google,facebook}` against a local stand-in of each
//! provider's profile endpoints (the real providers are out of reach here).

use axum::Json;
use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use serde_json::{Value, json};

use super::{assert_challenge_401, sign_up};
use crate::backend_test;
use crate::util::TestApp;

fn bearer(headers: &HeaderMap, scheme: &str) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix(scheme))
        .unwrap_or("")
        .to_string()
}

/// Tokens: `good` signs in, `boom` makes the provider fail, anything else is refused.
fn answer(token: &str, profile: Value) -> (StatusCode, Json<Value>) {
    match token {
        "good" => (StatusCode::OK, Json(profile)),
        "boom" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": "down"})),
        ),
        _ => (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Bad credentials"})),
        ),
    }
}

/// Serves the three providers' profile endpoints on a loopback port; returns its base URL.
async fn stand_in_providers() -> String {
    let router = axum::Router::new()
        .route(
            "/user",
            get(|h: HeaderMap| async move {
                answer(
                    &bearer(&h, "token "),
                    json!({"id": 4242, "login": "octocat", "name": "Octo Cat", "avatar_url": "https://avatars.example/4242"}),
                )
            }),
        )
        .route(
            "/user/emails",
            get(|h: HeaderMap| async move {
                answer(
                    &bearer(&h, "token "),
                    json!([
                        {"email": "first@example.com", "primary": false, "verified": true},
                        {"email": "Octo@Example.com", "primary": true, "verified": true},
                    ]),
                )
            }),
        )
        .route(
            "/userinfo/v2/me",
            get(|h: HeaderMap| async move {
                answer(
                    &bearer(&h, "Bearer "),
                    json!({"id": "g-77", "name": "Google Name", "email": "a@a.com", "verified_email": true, "picture": "https://g.example/p"}),
                )
            }),
        )
        .route(
            "/me",
            get(|Query(q): Query<std::collections::HashMap<String, String>>| async move {
                assert_eq!(q.get("fields").map(String::as_str), Some("id,name,email,picture"));
                answer(
                    q.get("access_token").map(String::as_str).unwrap_or(""),
                    json!({"id": "fb-1", "name": "Face Book", "email": "fb@example.com", "picture": {"data": {"url": "https://fb.example/p"}}}),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// `app` with the stand-in providers, all enabled, and self-registration on.
async fn with_providers(app: TestApp) -> TestApp {
    let app = with_providers_only(app).await;
    crate::harbor::fixtures::configure(&app, json!({"self_registration": true})).await;
    app
}

/// `app` with the stand-in providers enabled, the registry's policy as it is.
async fn with_providers_only(app: TestApp) -> TestApp {
    let base = stand_in_providers().await;
    app.with_rest(berth::outbound::RestConfig {
        github_api_url: base.clone(),
        google_api_url: format!("{base}/"),
        facebook_api_url: base,
        providers: berth::config::Providers(vec![
            "github".into(),
            "google".into(),
            "facebook".into(),
        ]),
        ..Default::default()
    })
}

backend_test!(
    async fn github_sign_in_creates_then_finds_the_user(app) {
        let app = with_providers(app).await;
        let res = app.post("/auth/github").json(&json!({"access_token": "good"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let body = res.json();
        assert_eq!(body["user"]["email"], "octo@example.com");
        assert_eq!(body["user"]["name"], "Octo Cat");
        assert_eq!(body["user"]["picture"], "https://avatars.example/4242");
        let me = app.get("/users/me").bearer(body["token"].as_str().unwrap()).send().await;
        assert_eq!(me.json()["id"], body["user"]["id"]);
        // Again, with the token in the header and then in the query: the same user.
        let res = app.post("/auth/github").bearer("good").send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(res.json()["user"]["id"], body["user"]["id"]);
        let res = app.post("/auth/github?access_token=good").send().await;
        assert_eq!(res.json()["user"]["id"], body["user"]["id"]);
        // The user has no local password: Basic sign-in cannot succeed.
        let user = app.store().users().find_by_email("octo@example.com").await.unwrap().unwrap();
        assert!(user.password_hash.is_none());
    }
);

backend_test!(
    async fn google_and_facebook_link_by_email(app) {
        let app = with_providers(app).await;
        let a = sign_up(&app, "a@a.com", "user", "user").await;
        let res = app.post("/auth/google").bearer("good").send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.json()["user"]["id"], a.id, "linked to the user with the e-mail");
        assert_eq!(res.json()["user"]["name"], "Google Name", "the provider's name wins");
        assert_eq!(res.json()["user"]["picture"], "https://g.example/p");
        let auth = app
            .post(&format!("/auth?access_token={}", crate::util::MASTER_KEY))
            .basic("a@a.com", "123456")
            .send()
            .await;
        assert_eq!(auth.status, StatusCode::CREATED, "the password still works");

        let res = app.post("/auth/facebook").form(&[("access_token", "good")]).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.json()["user"]["email"], "fb@example.com");
        assert_eq!(res.json()["user"]["picture"], "https://fb.example/p");
        assert_ne!(res.json()["user"]["id"], a.id);
    }
);

backend_test!(
    async fn provider_errors(app) {
        let app = with_providers(app).await;
        for provider in ["github", "google", "facebook"] {
            let path = format!("/auth/{provider}");
            assert_challenge_401(&app.post(&path).send().await, false);
            assert_challenge_401(&app.post(&path).bearer("refused").send().await, true);
            let res = app.post(&path).bearer("boom").send().await;
            assert_eq!(res.status, StatusCode::BAD_GATEWAY, "{provider}");
            assert_eq!(res.json()["valid"], false);
            assert!(!res.text().contains("down"), "the provider's body is not passed on");
            let res = app.post(&format!("{path}?access_token=a")).json(&json!({"access_token": "b"})).send().await;
            assert_eq!(res.text(), "Bad Request");
        }
        let res = app.post("/auth/twitter").bearer("good").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        // Nothing was created by the failures.
        let admin_token = sign_up(&app, "z@z.com", "z", "admin").await.token;
        let list = app.get("/users").bearer(&admin_token).send().await.json();
        assert_eq!(list.as_array().unwrap().len(), 2, "admin and z only");

        // A provider that cannot be reached.
        let app = app.with_rest(berth::outbound::RestConfig {
            github_api_url: "http://127.0.0.1:9".into(),
            providers: berth::config::Providers(vec!["github".into()]),
            ..Default::default()
        });
        let res = app.post("/auth/github").bearer("good").send().await;
        assert_eq!(res.status, StatusCode::BAD_GATEWAY);
    }
);

backend_test!(
    /// Providers are off until enabled; a provider creates an account only
    /// where people may register themselves; an existing account is linked
    /// only through an address the provider vouches for.
    async fn social_sign_in_follows_the_registrys_policy(app) {
        // Not enabled: refused, whatever the token.
        let base = stand_in_providers().await;
        let off = app.with_rest(berth::outbound::RestConfig {
            github_api_url: base.clone(),
            ..Default::default()
        });
        let res = off.post("/auth/github").bearer("good").send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let app = with_providers_only(off).await;

        // Self-registration off (the default): no account is made, and no
        // token reaches the Harbor API.
        let res = app.post("/auth/github").bearer("good").send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert!(app.store().users().find_by_email("octo@example.com").await.unwrap().is_none());
        // An existing account is still found through a verified address.
        let a = sign_up(&app, "a@a.com", "user", "user").await;
        let res = app.post("/auth/google").bearer("good").send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.json()["user"]["id"], a.id);
        // Facebook does not vouch for addresses: an account with its address is not taken over.
        sign_up(&app, "fb@example.com", "user", "user").await;
        let res = app.post("/auth/facebook").bearer("good").send().await;
        assert_eq!(res.status, StatusCode::CONFLICT, "{}", res.text());
        assert!(app.store().identities().find_user_id("facebook", "fb-1").await.unwrap().is_none());

        // Under LDAP the directory holds the accounts.
        crate::harbor::fixtures::configure(&app, json!({"self_registration": true})).await;
        app.store()
            .configurations()
            .save(&[("auth_mode", berth_domain::model::configuration::ConfigValue::String("ldap_auth".into()))])
            .await
            .unwrap();
        app.state.forget_configuration();
        let res = app.post("/auth/github").bearer("good").send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        app.store()
            .configurations()
            .save(&[("auth_mode", berth_domain::model::configuration::ConfigValue::String("db_auth".into()))])
            .await
            .unwrap();
        app.state.forget_configuration();
        let res = app.post("/auth/github").bearer("good").send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.json()["user"]["email"], "octo@example.com", "the primary verified address");
    }
);
