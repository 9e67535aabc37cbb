//! Administration pages (system administrators only): users, and that
//! everyone else is refused and changes nothing.

use axum::http::StatusCode;

use super::{csrf_for, post_form, sign_in, sign_in_admin, sign_in_as};
use crate::backend_test;
use crate::util::TestApp;

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

/// The configuration as Harbor's API returns it.
async fn configuration(app: &TestApp) -> serde_json::Value {
    app.get("/api/v2.0/configurations")
        .admin()
        .send()
        .await
        .json()
}

backend_test!(
    async fn portal_admin_changes_configuration_and_tests_ldap(app) {
        use crate::harbor::ldap::{PEOPLE, configure, env};
        configure(&app, &[]).await;
        let bind_password = env("BERTH_TEST_LDAP_BIND_PASSWORD");
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let res = app.get("/harbor/configuration").header("cookie", &cookie).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let page = res.text();
        assert!(page.contains(&format!(r#"value="{PEOPLE}""#)), "{page}");
        assert!(!page.contains(&bind_password), "the search password is never shown");
        assert!(page.contains(r#"name="ldap_search_password" id="ldap_search_password" value="""#));

        let url = env("BERTH_TEST_LDAP_URL");
        let bind_dn = env("BERTH_TEST_LDAP_BIND_DN");
        let form = |extra: &[(&'static str, &'static str)]| {
            let mut fields: Vec<(&'static str, String)> = vec![
                ("csrf_token", csrf.clone()),
                ("auth_mode", "db_auth".into()),
                ("project_creation_restriction", "everyone".into()),
                ("ldap_url", url.clone()),
                ("ldap_search_dn", bind_dn.clone()),
                ("ldap_search_password", String::new()),
                ("ldap_base_dn", PEOPLE.into()),
                ("ldap_filter", "(objectClass=inetOrgPerson)".into()),
                ("ldap_uid", "uid".into()),
                ("ldap_scope", "2".into()),
            ];
            for (k, v) in extra {
                fields.retain(|(name, _)| name != k);
                fields.push((k, v.to_string()));
            }
            fields
        };
        let send = |path: &'static str, fields: Vec<(&'static str, String)>| {
            let (app, cookie) = (&app, cookie.clone());
            async move {
                let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
                app.post(path).header("cookie", &cookie).form(&fields).send().await
            }
        };

        // Saved: the flags, the restriction, the scope; the empty password keeps the stored one.
        let res = send(
            "/harbor/configuration",
            form(&[
                ("self_registration", "true"),
                ("project_creation_restriction", "adminonly"),
                ("ldap_scope", "1"),
                ("ldap_uid", "mail"),
            ]),
        )
        .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert_eq!(res.header("location"), Some("/harbor/configuration?saved=1"));
        let config = configuration(&app).await;
        assert_eq!(config["self_registration"]["value"], true);
        assert_eq!(config["project_creation_restriction"]["value"], "adminonly");
        assert_eq!(config["ldap_scope"]["value"], 1);
        assert_eq!(config["ldap_uid"]["value"], "mail");
        assert_eq!(config["ldap_verify_cert"]["value"], false, "an unticked box is false");
        let stored = app.store().configurations().load().await.unwrap();
        assert_eq!(stored.string("ldap_search_password"), bind_password);
        // A new search password is stored.
        let res = send("/harbor/configuration", form(&[("ldap_search_password", "changed-secret")])).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        let stored = app.store().configurations().load().await.unwrap();
        assert_eq!(stored.string("ldap_search_password"), "changed-secret");
        assert!(!stored.flag("self_registration"));
        // Invalid values are refused with updateConfigurations' message.
        let res = send("/harbor/configuration", form(&[("ldap_scope", "7")])).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());

        // The connection test uses the form's values, saves nothing.
        let res = send(
            "/harbor/configuration/ldap-ping",
            form(&[("ldap_search_password", Box::leak(bind_password.clone().into_boxed_str()))]),
        )
        .await;
        assert_eq!(res.status, StatusCode::OK);
        assert!(res.text().contains("Connection to the LDAP server succeeded."), "{}", res.text());
        assert_eq!(
            app.store().configurations().load().await.unwrap().string("ldap_search_password"),
            "changed-secret"
        );
        // With the stored (now wrong) password: a failure, explained.
        let res = send("/harbor/configuration/ldap-ping", form(&[])).await;
        assert_eq!(res.status, StatusCode::OK);
        assert!(res.text().contains("Connection to the LDAP server failed: error: invalid credential"), "{}", res.text());
        // The unsaved values come back, escaped.
        let res = send("/harbor/configuration/ldap-ping", form(&[("ldap_url", "ldap://x\"><b>y")])).await;
        let page = res.text();
        assert!(page.contains("ldap://x&quot;&gt;&lt;b&gt;y") && !page.contains("<b>y"), "{page}");
        assert_eq!(
            app.store().configurations().load().await.unwrap().string("ldap_url"),
            url,
        );

        // The auth mode changes while only admin exists, not afterwards.
        let res = send("/harbor/configuration", form(&[("auth_mode", "ldap_auth")])).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        assert_eq!(configuration(&app).await["auth_mode"]["value"], "ldap_auth");
        let res = send("/harbor/configuration", form(&[])).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        app.create_user("frank", "Frank-pass-1").await;
        let res = send("/harbor/configuration", form(&[("auth_mode", "ldap_auth")])).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(res.text().contains("the auth mode cannot be modified"), "{}", res.text());
        assert_eq!(configuration(&app).await["auth_mode"]["value"], "db_auth");
        let page = app.get("/harbor/configuration").header("cookie", &cookie).send().await.text();
        assert!(page.contains(r#"id="auth_mode" disabled"#), "{page}");
        // Without the locked select the other settings still save.
        let mut fields = form(&[("self_registration", "true")]);
        fields.retain(|(k, _)| *k != "auth_mode");
        assert_eq!(send("/harbor/configuration", fields).await.status, StatusCode::SEE_OTHER);
        assert_eq!(configuration(&app).await["self_registration"]["value"], true);
    }
);

backend_test!(
    async fn portal_configuration_is_for_admins_only(app) {
        app.create_user("bob", "Bob-pass-1").await;
        let bob = sign_in(&app, "bob", "Bob-pass-1").await;
        let bob_csrf = csrf_for(&app, &bob).await;
        let admin = sign_in_admin(&app).await;
        for path in ["/harbor/configuration", "/harbor/system"] {
            let res = app.get(path).header("cookie", &bob).send().await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "{path}");
        }
        let fields = [("self_registration", "true"), ("project_creation_restriction", "adminonly")];
        for path in ["/harbor/configuration", "/harbor/configuration/ldap-ping", "/harbor/system/gc"] {
            let res = post_form(&app, &bob, path, Some(&bob_csrf), &fields).await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "bob on {path}");
            let res = post_form(&app, &admin, path, None, &fields).await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "no CSRF on {path}");
        }
        let config = configuration(&app).await;
        assert_eq!(config["self_registration"]["value"], false);
        assert_eq!(config["project_creation_restriction"]["value"], "everyone");
        let runs = app.get("/api/v2.0/system/gc").admin().send().await.json();
        assert_eq!(runs, serde_json::json!([]));
    }
);

backend_test!(
    async fn portal_admin_runs_gc_and_sees_statistics(app) {
        crate::registry::push_image(&app, "library/app", "v1", &[b"layer"]).await;
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let page = app.get("/harbor/system").header("cookie", &cookie).send().await.text();
        let stats = app.get("/api/v2.0/statistics").admin().send().await.json();
        assert_eq!(stats["total_repo_count"], 1);
        assert!(
            page.contains(&format!(
                r#"<dd id="total_projects">{} ({} public, {} private)</dd>"#,
                stats["total_project_count"], stats["public_project_count"], stats["private_project_count"]
            )),
            "{page}"
        );
        assert!(page.contains(r#"<dd id="total_repos">1 (1 public, 0 private)</dd>"#), "{page}");
        assert!(page.contains("No runs yet."));

        let res = post_form(&app, &cookie, "/harbor/system/gc", Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let location = res.header("location").unwrap().to_string();
        let id: i64 = location.strip_prefix("/harbor/system?started=").unwrap().parse().unwrap();
        let mut status = String::new();
        for _ in 0..200 {
            let res = app.get(&format!("/api/v2.0/system/gc/{id}")).admin().send().await;
            status = res.json()["job_status"].as_str().unwrap().to_string();
            if status != "Running" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        assert_eq!(status, "Success");
        let page = app.get(&location).header("cookie", &cookie).send().await.text();
        assert!(page.contains(&format!("Garbage collection run {id} started")));
        assert!(
            page.contains(&format!(r#"<tr data-gc="{id}"><td>{id}</td><td class="status">Success</td>"#)),
            "{page}"
        );
        assert!(page.contains("blobs deleted"), "{page}");
        // One run at a time: a run in progress is explained.
        let _run = app.store().start_gc_run().await.unwrap();
        let res = post_form(&app, &cookie, "/harbor/system/gc", Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        assert!(res.text().contains("already running"));
    }
);

backend_test!(
    async fn portal_users_are_paged(app) {
        for i in 0..17 {
            app.create_user(&format!("user{i:02}"), "User-pass-1").await;
        }
        let cookie = sign_in_admin(&app).await;
        let page = app.get("/harbor/users").header("cookie", &cookie).send().await.text();
        assert!(page.contains("Page 1 of 2 · 17 users"), "{page}");
        assert!(page.contains(r#"href="/harbor/users?username=&amp;page=2""#), "{page}");
        assert!(page.contains(r#"data-user="user00""#) && !page.contains(r#"data-user="user15""#));
        let page = app.get("/harbor/users?page=2").header("cookie", &cookie).send().await.text();
        assert!(page.contains(r#"data-user="user15""#) && page.contains(r#"data-user="user16""#));
        assert!(!page.contains(r#"data-user="user00""#));
        let page = app.get("/harbor/users?username=user1&page=1").header("cookie", &cookie).send().await.text();
        assert!(page.contains("Page 1 of 1 · 7 users"), "{page}");
    }
);
