//! `/password-resets` against a real SMTP server (aiosmtpd, started by
//! scripts/test: `BERTH_TEST_SMTP_URL` and the maildir it delivers to,
//! `BERTH_TEST_MAILDIR`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;

use super::{assert_challenge_401, assert_empty_401, assert_empty_404, assert_param_400, sign_up};
use crate::backend_test;
use crate::util::{MASTER_KEY, TestApp};

/// The SMTP server of the run and the maildir it delivers to. Missing, the
/// test fails: these tests need a real mail server, never a silent pass.
fn smtp_server() -> (String, PathBuf) {
    let var = |name: &str| {
        std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| {
            panic!(
                "{name} is not set: run the suite with `bash scripts/test`, which starts an SMTP \
                 server (aiosmtpd), or start one and set BERTH_TEST_SMTP_URL=smtp://127.0.0.1:PORT \
                 and BERTH_TEST_MAILDIR to the maildir it delivers to"
            )
        })
    };
    (var("BERTH_TEST_SMTP_URL"), var("BERTH_TEST_MAILDIR").into())
}

fn with_smtp(app: TestApp, url: &str) -> TestApp {
    app.with_rest(berth::outbound::RestConfig {
        smtp_url: Some(url.into()),
        smtp_from: "no-reply@berth.test".into(),
        ..Default::default()
    })
}

/// Waits for the mail to `to` in the maildir and returns its raw text.
async fn mail_to(maildir: &Path, to: &str) -> String {
    for _ in 0..100 {
        for sub in ["new", "cur"] {
            let Ok(entries) = std::fs::read_dir(maildir.join(sub)) else {
                continue;
            };
            for entry in entries.flatten() {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                if text.contains(to) {
                    return text;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no mail to {to} arrived in {}", maildir.display());
}

/// The token at the end of the link `http://example.com/reset/<token>` in a mail.
fn token_in(mail: &str) -> String {
    let text = mail.replace("=\r\n", "").replace("=\n", "");
    let start = text
        .find("example.com/reset/")
        .expect("the link is in the mail")
        + "example.com/reset/".len();
    let token: String = text[start..]
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    assert_eq!(token.len(), 32, "{mail}");
    token
}

backend_test!(
    async fn password_reset_by_email_works_once(app) {
        let (url, maildir) = smtp_server();
        let app = with_smtp(app, &url);
        let email = format!("reset-{}@example.com", uuid::Uuid::new_v4().simple());
        let user = sign_up(&app, &email, "Reset Me", "user").await;
        for _ in 0..2 {
            let res = app
                .post("/password-resets")
                .json(&json!({"access_token": MASTER_KEY, "email": email.to_uppercase(), "link": "http://example.com/reset/"}))
                .send()
                .await;
            assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
            assert!(res.body.is_empty());
        }
        let mail = mail_to(&maildir, &email).await;
        assert!(mail.contains("Subject: Berth - Password Reset"), "{mail}");
        assert!(mail.contains("From: no-reply@berth.test"), "{mail}");
        assert!(mail.contains("Reset Me"), "{mail}");
        let token = token_in(&mail);
        let uid: i64 = user.id.parse().unwrap();
        assert_eq!(app.store().password_resets().count_for_user(uid).await.unwrap(), 2);

        let res = app.get(&format!("/password-resets/{token}")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json()["token"], token.as_str());
        assert_eq!(res.json()["user"]["id"], user.id);
        assert_eq!(res.json()["user"]["email"], email.as_str());

        let res = app.put(&format!("/password-resets/{token}")).json(&json!({"password": "321"})).send().await;
        assert_param_400(&res, "password");
        let res = app.put(&format!("/password-resets/{token}")).send().await;
        assert_param_400(&res, "password");

        let res = app.put(&format!("/password-resets/{token}")).form(&[("password", "654321")]).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.json()["id"], user.id);
        assert_eq!(app.store().password_resets().count_for_user(uid).await.unwrap(), 0, "every reset of the user is gone");
        let auth = |password: &'static str| {
            app.post(&format!("/auth?access_token={MASTER_KEY}")).basic(&email, password).send()
        };
        assert_eq!(auth("654321").await.status, StatusCode::CREATED);
        assert_empty_401(&auth("123456").await);

        // Single use.
        assert_empty_404(&app.get(&format!("/password-resets/{token}")).send().await);
        assert_empty_404(&app.put(&format!("/password-resets/{token}")).json(&json!({"password": "abcdef"})).send().await);
        assert_eq!(auth("654321").await.status, StatusCode::CREATED);
    }
);

backend_test!(
    async fn password_reset_errors(app) {
        let (url, _) = smtp_server();
        let app = with_smtp(app, &url);
        sign_up(&app, "a@a.com", "user", "user").await;
        let post = |body: serde_json::Value| app.post("/password-resets").json(&body).send();
        let res = post(json!({"access_token": MASTER_KEY, "email": "invalid", "link": "http://example.com"})).await;
        assert_param_400(&res, "email");
        let res = post(json!({"access_token": MASTER_KEY, "link": "http://example.com"})).await;
        assert_param_400(&res, "email");
        let res = post(json!({"access_token": MASTER_KEY, "email": "a@a.com"})).await;
        assert_eq!(
            res.text(),
            r#"{"name":"required","param":"link","required":true,"valid":false,"message":"link is required"}"#
        );
        assert_empty_404(&post(json!({"access_token": MASTER_KEY, "email": "b@b.com", "link": "http://example.com"})).await);
        assert_challenge_401(&post(json!({"email": "a@a.com", "link": "http://example.com"})).await, false);
        assert_empty_404(&app.get("/password-resets/123").send().await);
        assert_empty_404(&app.get("/password-resets/%FF").send().await);
        assert_empty_404(&app.put("/password-resets/123").json(&json!({"password": "654321"})).send().await);
        let unknown = "A".repeat(32);
        assert_empty_404(&app.get(&format!("/password-resets/{unknown}")).send().await);

        // An expired reset is not found.
        let token = "B".repeat(32);
        let hash = {
            use sha2::Digest;
            hex::encode(sha2::Sha256::digest(token.as_bytes()))
        };
        let user = app.store().users().find_by_email("a@a.com").await.unwrap().unwrap();
        app.store().password_resets().create(&hash, user.id, -1).await.unwrap();
        assert_empty_404(&app.get(&format!("/password-resets/{token}")).send().await);
        assert_empty_404(&app.put(&format!("/password-resets/{token}")).json(&json!({"password": "654321"})).send().await);
    }
);

backend_test!(
    async fn password_reset_without_smtp_is_unavailable(app) {
        sign_up(&app, "a@a.com", "user", "user").await;
        let res = app
            .post("/password-resets")
            .json(&json!({"access_token": MASTER_KEY, "email": "a@a.com", "link": "http://example.com"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(res.json()["valid"], false);
        let user = app.store().users().find_by_email("a@a.com").await.unwrap().unwrap();
        assert_eq!(app.store().password_resets().count_for_user(user.id).await.unwrap(), 0);
        // An unknown e-mail is a 404 first, mail server or not (as the reference).
        let res = app
            .post("/password-resets")
            .json(&json!({"access_token": MASTER_KEY, "email": "nobody@a.com", "link": "http://example.com"}))
            .send()
            .await;
        assert_empty_404(&res);
        // An unreachable mail server: 502, and no reset is left behind.
        let app = with_smtp(app, "smtp://127.0.0.1:9");
        let res = app
            .post("/password-resets")
            .json(&json!({"access_token": MASTER_KEY, "email": "a@a.com", "link": "http://example.com"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::BAD_GATEWAY);
        assert_eq!(app.store().password_resets().count_for_user(user.id).await.unwrap(), 0);
    }
);
