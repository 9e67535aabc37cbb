//! Administration pages (system administrators only): users, and that
//! everyone else is refused and changes nothing.

use axum::http::StatusCode;

use super::{csrf_for, sign_in, sign_in_admin, sign_in_as};
use crate::backend_test;
use crate::util::{TestApp, TestResponse};

/// Posts `fields` (after the CSRF token, when given) to `path` as `cookie`.
async fn post_form(
    app: &TestApp,
    cookie: &str,
    path: &str,
    csrf: Option<&str>,
    fields: &[(&str, &str)],
) -> TestResponse {
    let mut all: Vec<(&str, &str)> = csrf.map(|c| ("csrf_token", c)).into_iter().collect();
    all.extend_from_slice(fields);
    app.post(path)
        .header("cookie", cookie)
        .form(&all)
        .send()
        .await
}

backend_test!(
    async fn portal_admin_manages_users(app) {
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let res = app.get("/harbor/users").header("cookie", &cookie).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert!(res.text().contains(r#"href="/harbor/users""#));

        // Created with Harbor's validation: a weak password is refused.
        let create = |password: &'static str, username: &'static str| {
            let (app, cookie, csrf) = (&app, cookie.clone(), csrf.clone());
            async move {
                post_form(
                    app,
                    &cookie,
                    "/harbor/users",
                    Some(&csrf),
                    &[
                        ("username", username),
                        ("email", "dave@example.com"),
                        ("realname", "Dave <Tester>"),
                        ("password", password),
                    ],
                )
                .await
            }
        };
        let res = create("weak", "dave").await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(res.text().contains("at least 1 uppercase letter"), "{}", res.text());
        assert!(app.store().users().find_by_username("dave").await.unwrap().is_none());
        let res = create("Dave-pass-1", "dave").await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert_eq!(res.header("location"), Some("/harbor/users?done=created"));
        assert_eq!(create("Dave-pass-1", "dave").await.status, StatusCode::CONFLICT);
        let dave = app.store().users().find_by_username("dave").await.unwrap().unwrap();
        assert_eq!(dave.email.as_deref(), Some("dave@example.com"));
        assert!(!dave.sysadmin);
        let res = app.get(&format!("/api/v2.0/users/{}", dave.id)).admin().send().await;
        assert_eq!(res.json()["realname"], "Dave <Tester>");
        sign_in(&app, "dave", "Dave-pass-1").await;

        // Listed, searched, escaped.
        app.create_user("erin", "Erin-pass-1").await;
        let page = app
            .get("/harbor/users?username=DAV")
            .header("cookie", &cookie)
            .send()
            .await
            .text();
        assert!(page.contains(r#"data-user="dave""#) && !page.contains(r#"data-user="erin""#));
        assert!(page.contains("Dave &lt;Tester&gt;") && !page.contains("<Tester>"), "{page}");

        // The administrator flag, both ways.
        let path = format!("/harbor/users/{}/sysadmin", dave.id);
        let res = post_form(&app, &cookie, &path, Some(&csrf), &[("sysadmin", "true")]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert!(app.store().users().find_by_id(dave.id).await.unwrap().unwrap().sysadmin);
        let res = post_form(&app, &cookie, &path, Some(&csrf), &[("sysadmin", "false")]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        assert!(!app.store().users().find_by_id(dave.id).await.unwrap().unwrap().sysadmin);
        // The built-in admin keeps its role.
        let res = post_form(&app, &cookie, "/harbor/users/1/sysadmin", Some(&csrf), &[("sysadmin", "false")]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);

        // A password reset: the old one stops working, the new one signs in.
        let path = format!("/harbor/users/{}/password", dave.id);
        let res = post_form(&app, &cookie, &path, Some(&csrf), &[("new_password", "short")]).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = post_form(&app, &cookie, &path, Some(&csrf), &[("new_password", "Dave-pass-2")]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert_eq!(sign_in_as(&app, "192.0.2.9", "dave", "Dave-pass-1").await.status, StatusCode::UNAUTHORIZED);
        sign_in(&app, "dave", "Dave-pass-2").await;

        // Deleted; the admin cannot delete itself.
        let res = post_form(&app, &cookie, &format!("/harbor/users/{}/delete", dave.id), Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert!(app.store().users().find_by_id(dave.id).await.unwrap().is_none());
        let res = post_form(&app, &cookie, "/harbor/users/1/delete", Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert!(res.header("content-type").unwrap().starts_with("text/html"));
    }
);

backend_test!(
    async fn portal_admin_pages_refuse_others_and_forms_without_csrf(app) {
        let bob_id = app.create_user("bob", "Bob-pass-1").await;
        let carol_id = app.create_user("carol", "Carol-pass-1").await;
        let bob = sign_in(&app, "bob", "Bob-pass-1").await;
        let bob_csrf = csrf_for(&app, &bob).await;
        let page = app.get("/harbor/projects").header("cookie", &bob).send().await.text();
        assert!(!page.contains("/harbor/users"), "no admin links: {page}");
        let res = app.get("/harbor/users").header("cookie", &bob).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert!(res.header("content-type").unwrap().starts_with("text/html"));
        assert!(!res.text().contains("carol"));
        // Nobody signed in: the sign-in page.
        let res = app.get("/harbor/users").send().await;
        assert_eq!(res.header("location"), Some("/harbor/sign-in"));

        let attempts: Vec<(String, Vec<(&str, &str)>)> = vec![
            (
                "/harbor/users".into(),
                vec![
                    ("username", "mallory"),
                    ("email", "m@example.com"),
                    ("realname", "M"),
                    ("password", "Mallory-pass-1"),
                ],
            ),
            (format!("/harbor/users/{bob_id}/sysadmin"), vec![("sysadmin", "true")]),
            (format!("/harbor/users/{carol_id}/password"), vec![("new_password", "Carol-pass-2")]),
            (format!("/harbor/users/{carol_id}/delete"), vec![]),
        ];
        let admin = sign_in_admin(&app).await;
        for (path, fields) in &attempts {
            let res = post_form(&app, &bob, path, Some(&bob_csrf), fields).await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "bob on {path}");
            // An administrator without the token is refused too.
            let res = post_form(&app, &admin, path, None, fields).await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "no CSRF on {path}");
            let res = post_form(&app, &admin, path, Some("not-the-token"), fields).await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "wrong CSRF on {path}");
        }
        let users = app.store().users();
        assert!(users.find_by_username("mallory").await.unwrap().is_none());
        assert!(!users.find_by_id(bob_id).await.unwrap().unwrap().sysadmin);
        assert!(users.find_by_id(carol_id).await.unwrap().is_some());
        sign_in(&app, "carol", "Carol-pass-1").await;
    }
);
