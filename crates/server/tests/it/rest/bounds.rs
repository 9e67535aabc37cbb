//! Length bounds on user names and e-mails of the generator-rest surface.

use serde_json::json;

use super::{assert_param_400, sign_up};
use crate::backend_test;
use crate::util::MASTER_KEY;

backend_test!(
    async fn user_names_and_emails_are_bounded(app) {
        let huge = "n".repeat(90 * 1024);
        let res = app
            .post("/users")
            .json(&json!({"access_token": MASTER_KEY, "email": "big@a.com", "password": "123456", "name": huge}))
            .send()
            .await;
        let body = assert_param_400(&res, "name");
        assert_eq!(body["name"], "maxlength");
        assert_eq!(body["maxlength"], 255);
        assert_eq!(body["message"], "name must have length lower than or equal to 255");
        assert!(app.store().users().find_by_email("big@a.com").await.unwrap().is_none());

        let long_email = format!("{}@a.com", "e".repeat(250));
        let res = app
            .post("/users")
            .json(&json!({"access_token": MASTER_KEY, "email": long_email, "password": "123456"}))
            .send()
            .await;
        let body = assert_param_400(&res, "email");
        assert_eq!(body["name"], "maxlength");

        // At the bound: fine.
        let res = app
            .post("/users")
            .json(&json!({"access_token": MASTER_KEY, "email": "ok@a.com", "password": "123456", "name": "n".repeat(255)}))
            .send()
            .await;
        assert_eq!(res.status, axum::http::StatusCode::CREATED, "{}", res.text());

        let a = sign_up(&app, "a@a.com", "user", "user").await;
        let res = app.put("/users/me").bearer(&a.token).json(&json!({"name": huge})).send().await;
        assert_param_400(&res, "name");
        let me = app.get("/users/me").bearer(&a.token).send().await.json();
        assert_eq!(me["name"], "user", "nothing changed");
    }
);
