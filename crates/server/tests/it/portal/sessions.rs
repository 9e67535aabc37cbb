//! Portal sessions: sign-in through the shared password check and throttle,
//! cookie flags, CSRF on the Harbor API, sign-out, sessions across instances.

use std::time::Duration;

use axum::http::StatusCode;
use berth::signin::{SignInSettings, ThrottleLimits};
use serde_json::json;

use super::{cookie_of, csrf_for, sign_in, sign_in_admin, sign_in_as};
use crate::backend_test;

backend_test!(
    async fn portal_sign_in_sets_a_strict_cookie(app) {
        let res = sign_in_as(&app, "192.0.2.1", "admin", crate::util::ADMIN_PASSWORD).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        assert_eq!(res.header("location"), Some("/harbor/projects"));
        let set = res.header("set-cookie").unwrap();
        assert!(set.starts_with("sid="), "{set}");
        for flag in ["HttpOnly", "SameSite=Lax", "Path=/"] {
            assert!(set.contains(flag), "{set}");
        }
        assert!(!set.contains("Secure"), "plain http: {set}");
        let page = app
            .get("/harbor/projects")
            .header("cookie", &cookie_of(&res))
            .send()
            .await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(page.text().contains(r#"id="current_user">admin<"#));
    }
);

backend_test!(
    async fn portal_cookie_is_secure_behind_an_https_proxy(app) {
        let app = app.with_signin(SignInSettings {
            trusted_proxies: "192.0.2.10".parse().unwrap(),
            ..SignInSettings::default()
        });
        let res = app
            .post("/harbor/sign-in")
            .peer("192.0.2.10")
            .header("x-forwarded-proto", "https")
            .form(&[("principal", "admin"), ("password", crate::util::ADMIN_PASSWORD)])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        assert!(res.header("set-cookie").unwrap().contains("; Secure"));
        // The header from an untrusted client is ignored.
        let res = app
            .post("/harbor/sign-in")
            .peer("192.0.2.11")
            .header("x-forwarded-proto", "https")
            .form(&[("principal", "admin"), ("password", crate::util::ADMIN_PASSWORD)])
            .send()
            .await;
        assert!(!res.header("set-cookie").unwrap().contains("Secure"));
    }
);

backend_test!(
    async fn portal_bad_password_shows_an_error_and_is_throttled(app) {
        let app = app.with_signin(SignInSettings {
            limits: ThrottleLimits {
                account_address: 3,
                address: 100,
                account: 100,
                window: Duration::from_secs(900),
            },
            ..SignInSettings::default()
        });
        app.create_user("alice", "Alice-pass-1").await;
        for _ in 0..3 {
            let res = sign_in_as(&app, "192.0.2.1", "alice", "wrong").await;
            assert_eq!(res.status, StatusCode::UNAUTHORIZED);
            assert!(res.header("set-cookie").is_none());
            assert!(res.text().contains("Invalid user name or password."));
        }
        // Throttled: even the right password is refused, with Retry-After.
        let res = sign_in_as(&app, "192.0.2.1", "alice", "Alice-pass-1").await;
        assert_eq!(res.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(res.header("retry-after").is_some());
        assert!(res.text().contains("Too many failed sign-ins"));
        assert!(res.header("set-cookie").is_none());
        // The throttle is the one every surface shares: Basic on the API too.
        let res = app
            .get("/api/v2.0/users/current")
            .peer("192.0.2.1")
            .basic("alice", "Alice-pass-1")
            .send()
            .await;
        assert_eq!(res.status, StatusCode::TOO_MANY_REQUESTS);
        // Another address signs in.
        let res = sign_in_as(&app, "192.0.2.2", "alice", "Alice-pass-1").await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
    }
);

backend_test!(
    async fn portal_session_needs_the_csrf_header_on_the_api(app) {
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let res = app
            .get("/api/v2.0/users/current")
            .header("cookie", &cookie)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json()["username"], "admin");
        let create = json!({"project_name": "viacookie"});
        let res = app
            .post("/api/v2.0/projects")
            .header("cookie", &cookie)
            .json(&create)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert_eq!(
            res.json(),
            json!({"errors": [{"code": "FORBIDDEN", "message": "CSRF token invalid"}]})
        );
        let res = app
            .post("/api/v2.0/projects")
            .header("cookie", &cookie)
            .header("x-harbor-csrf-token", "not-the-token-not-the-token-1234")
            .json(&create)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app
            .post("/api/v2.0/projects")
            .header("cookie", &cookie)
            .header("x-harbor-csrf-token", &csrf)
            .json(&create)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        // A portal form without the token is refused as well.
        let res = app
            .post("/harbor/projects")
            .header("cookie", &cookie)
            .form(&[("project_name", "noform")])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.get("/api/v2.0/projects/noform").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn portal_sign_out_ends_the_session(app) {
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let res = app
            .post("/harbor/sign-out")
            .header("cookie", &cookie)
            .form(&[("csrf_token", &csrf)])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        assert!(res.header("set-cookie").unwrap().contains("Max-Age=0"));
        let res = app.get("/harbor/projects").header("cookie", &cookie).send().await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        assert_eq!(res.header("location"), Some("/harbor/sign-in"));
        let res = app
            .get("/api/v2.0/users/current")
            .header("cookie", &cookie)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
    }
);

backend_test!(
    async fn portal_session_ends_when_the_password_changes(app) {
        let id = app.create_user("alice", "Alice-pass-1").await;
        let cookie = sign_in(&app, "alice", "Alice-pass-1").await;
        let hash = berth_auth::password::hash_password("Alice-pass-2");
        app.store().users().set_password(id, &hash).await.unwrap();
        let res = app.get("/harbor/projects").header("cookie", &cookie).send().await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
    }
);

backend_test!(
    async fn portal_session_is_accepted_by_another_instance(app) {
        let cookie = sign_in_admin(&app).await;
        let other = app.second_instance().await;
        let res = other
            .get("/api/v2.0/users/current")
            .header("cookie", &cookie)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let csrf = csrf_for(&other, &cookie).await;
        let res = other
            .post("/harbor/sign-out")
            .header("cookie", &cookie)
            .form(&[("csrf_token", &csrf)])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        let res = app.get("/harbor/projects").header("cookie", &cookie).send().await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "signed out everywhere");
    }
);

backend_test!(
    async fn portal_browsers_asking_for_the_root_go_to_the_portal(app) {
        let res = app
            .get("/")
            .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8")
            .send()
            .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        assert_eq!(res.header("location"), Some("/harbor/projects"));
        let res = app.get("/").header("accept", "application/json").send().await;
        assert_ne!(res.status, StatusCode::SEE_OTHER);
        let res = app.get("/harbor/projects").send().await;
        assert_eq!(res.header("location"), Some("/harbor/sign-in"));
    }
);

backend_test!(
    async fn portal_sign_in_goes_through_the_directory_in_ldap_mode(app) {
        use crate::harbor::ldap::{configure, s};
        configure(&app, &[("auth_mode", s("ldap_auth"))]).await;
        let res = sign_in_as(&app, "192.0.2.1", "alice", "nope").await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let cookie = sign_in(&app, "alice", "alice-pw").await;
        let res = app
            .get("/api/v2.0/users/current")
            .header("cookie", &cookie)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json()["email"], "alice@berth.test", "onboarded from the directory");
    }
);

backend_test!(
    async fn portal_sign_in_from_another_site_is_refused(app) {
        let form = [("principal", "admin"), ("password", crate::util::ADMIN_PASSWORD)];
        let res = app
            .post("/harbor/sign-in")
            .header("origin", "http://evil.example")
            .form(&form)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert!(res.header("set-cookie").is_none());
        let res = app
            .post("/harbor/sign-in")
            .header("origin", "http://127.0.0.1:9000")
            .form(&form)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "the external URL's origin");
        let res = app
            .post("/harbor/sign-in")
            .header("host", "registry.example:8443")
            .header("origin", "https://registry.example:8443")
            .form(&form)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "the request's own host");
    }
);
