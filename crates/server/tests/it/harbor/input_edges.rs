//! Harbor input edges found by schemathesis and the harborapi client: boolean
//! query values, body limits, `Link` headers, empty LDAP imports.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::{PASSWORD, code, message, user};
use crate::backend_test;

const ARTIFACTS: &str = "/api/v2.0/projects/library/repositories/none/artifacts";

backend_test!(
    async fn boolean_query_values_must_be_booleans(app) {
        for uri in [
            "/api/v2.0/projects?with_detail=null",
            "/api/v2.0/projects?public=maybe",
            &format!("{ARTIFACTS}?with_tag=null"),
            &format!("{ARTIFACTS}?with_label=2"),
            &format!("{ARTIFACTS}?with_scan_overview=yes-please"),
            &format!("{ARTIFACTS}/latest?with_signature=null"),
            &format!("{ARTIFACTS}/latest/tags?with_immutable_status=nope"),
        ] {
            let res = app.get(uri).admin().send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{uri}: {}", res.text());
            assert_eq!(code(&res), "BAD_REQUEST");
            assert!(message(&res).contains("must be of type boolean"), "{}", message(&res));
        }
        // true/false spellings and an empty value (the default) are fine.
        for uri in [
            "/api/v2.0/projects?with_detail=false",
            "/api/v2.0/projects?with_detail=TRUE&public=0",
            "/api/v2.0/projects?with_detail=",
            &format!("{ARTIFACTS}?with_tag=false&with_label=true&with_scan_overview=1"),
        ] {
            let res = app.get(uri).admin().send().await;
            assert_eq!(res.status, StatusCode::OK, "{uri}: {}", res.text());
        }
        let detail = app.get("/api/v2.0/projects?with_detail=false").admin().send().await.json();
        assert!(detail[0].get("owner_name").is_none() || detail[0]["owner_name"].is_null() || detail[0]["owner_name"] == "");
    }
);

backend_test!(
    async fn bodies_over_the_limit_are_413_in_harbor_shape(app) {
        let name = "x".repeat(1024 * 1024 + 10);
        let res = app
            .post("/api/v2.0/projects")
            .admin()
            .json(&json!({"project_name": name}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", res.text());
        assert_eq!(code(&res), "REQUEST_ENTITY_TOO_LARGE");
        // Past axum's own limit as well, and for raw-body operations.
        let huge = format!("{{\"name\": \"{}\"}}", "y".repeat(3 * 1024 * 1024));
        for uri in ["/api/v2.0/projects", "/api/v2.0/labels", "/api/v2.0/ldap/users/import"] {
            let res = app.post(uri).admin().raw("application/json", huge.clone()).send().await;
            assert_eq!(res.status, StatusCode::PAYLOAD_TOO_LARGE, "{uri}: {}", res.text());
            assert_eq!(code(&res), "REQUEST_ENTITY_TOO_LARGE", "{uri}");
        }
        assert_eq!(
            app.get("/api/v2.0/projects/x").admin().send().await.status,
            StatusCode::NOT_FOUND,
            "nothing was created"
        );
    }
);

backend_test!(
    async fn link_headers_keep_q_values_whole(app) {
        // Harbor decodes `q` once more after the query string: its `+` is a space.
        for i in 1..=3 {
            app.create_user(&format!("x&y z#{i}"), "Passw0rd-1").await;
        }
        app.create_user("x", "Passw0rd-1").await;
        let res = app.get("/api/v2.0/users?q=username%3D~x%26y%2Bz%23&page_size=1&sort=username").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("x-total-count"), Some("3"));
        assert_eq!(res.json()[0]["username"], "x&y z#1");
        let mut link = res.header("link").unwrap().to_string();
        for expected in ["x&y z#2", "x&y z#3"] {
            let next = link
                .split(" , ")
                .find(|l| l.ends_with("rel=\"next\""))
                .unwrap_or_else(|| panic!("no next link in {link}"));
            let url = next.trim_start_matches('<').split('>').next().unwrap();
            assert!(!url.contains('#') && !url.contains('+'), "{url}");
            let res = app.get(url).admin().send().await;
            assert_eq!(res.status, StatusCode::OK, "{url}");
            assert_eq!(res.header("x-total-count"), Some("3"), "{url}");
            assert_eq!(res.json()[0]["username"], expected, "{url}");
            link = res.header("link").unwrap().to_string();
        }
        assert!(!link.contains("rel=\"next\""), "{link}");
    }
);

backend_test!(
    async fn an_ldap_import_without_uids_imports_nothing(app) {
        for body in [json!({}), json!({"ldap_uid_list": []})] {
            let res = app.post("/api/v2.0/ldap/users/import").admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::OK, "{body}: {}", res.text());
            assert!(res.body.is_empty());
        }
        let res = app.post("/api/v2.0/ldap/users/import").admin().json(&json!({"ldap_uid_list": "bob"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
    }
);

backend_test!(
    async fn projects_that_cannot_exist_are_not_found(app) {
        user(&app, "bob").await;
        let long = "a".repeat(300);
        let names = ["a%20b", "UPPER", "-x", "a..b", "nul%00l", long.as_str(), "nope", "999999"];
        for name in names {
            let base = format!("/api/v2.0/projects/{name}");
            for (method, uri) in [
                ("GET", base.clone()),
                ("DELETE", base.clone()),
                ("GET", format!("{base}/summary")),
                ("GET", format!("{base}/_deletable")),
                ("GET", format!("{base}/metadatas")),
                ("GET", format!("{base}/members")),
                ("GET", format!("{base}/repositories")),
                ("GET", format!("{base}/repositories/r/artifacts/latest")),
            ] {
                let res = app.request(method.parse().unwrap(), &uri).admin().send().await;
                assert_eq!(res.status, StatusCode::NOT_FOUND, "{method} {uri}: {}", res.text());
                assert_eq!(code(&res), "NOT_FOUND", "{uri}");
            }
            // The project is looked up before the body is judged.
            for body in ["not json", "{\"metadata\": {\"public\": 1}}", ""] {
                let res = app.put(&base).admin().raw("application/json", body).send().await;
                assert_eq!(res.status, StatusCode::NOT_FOUND, "PUT {base} {body:?}: {}", res.text());
            }
            // Others learn nothing more than for a project they may not see.
            let res = app.get(&base).basic("bob", PASSWORD).send().await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "{base}");
            let res = app.get(&base).send().await;
            assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{base}");
        }
        for name in ["UPPER", "nul%00l", "-x"] {
            let res = app.request("HEAD".parse().unwrap(), &format!("/api/v2.0/projects?project_name={name}")).admin().send().await;
            assert_eq!(res.status, StatusCode::NOT_FOUND, "{name}");
        }
        // A project that exists still has its body judged.
        let res = app.put("/api/v2.0/projects/library").admin().raw("application/json", "not json").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
    }
);

backend_test!(
    async fn allowlist_items_need_a_cve_id(app) {
        for items in [json!([{}]), json!([{"cve_id": null}]), json!([{"cve_id": "CVE-1"}, {"cve_id": "  "}])] {
            let res = app
                .put("/api/v2.0/projects/library")
                .admin()
                .json(&json!({"cve_allowlist": {"items": items}}))
                .send()
                .await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{items}: {}", res.text());
            assert!(message(&res).contains("cve_id"), "{}", message(&res));
        }
        let library = app.get("/api/v2.0/projects/library").admin().send().await.json();
        assert_eq!(library["cve_allowlist"]["items"], json!([]), "nothing was stored");
        let res = app
            .put("/api/v2.0/projects/library")
            .admin()
            .json(&json!({"cve_allowlist": {"items": [{"cve_id": "CVE-2024-9"}]}}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
    }
);

backend_test!(
    async fn harbor_names_are_bounded(app) {
        let huge = "u".repeat(90 * 1024);
        let long_email = format!("{}@example.com", "e".repeat(250));
        let create = |username: &str, email: &str, realname: &str, comment: &str| {
            json!({"username": username, "email": email, "realname": realname, "comment": comment, "password": "Passw0rd-1"})
        };
        for (body, text) in [
            (create(&huge, "a@example.com", "A", ""), "username with illegal length"),
            (create("a", &long_email, "A", ""), "email"),
            (create("a", "a@example.com", &huge, ""), "realname with illegal length"),
            (create("a", "a@example.com", "A", &"c".repeat(31)), "comment with illegal length"),
        ] {
            let res = app.post("/api/v2.0/users").admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
            assert!(message(&res).contains(text), "{}", message(&res));
        }
        assert_eq!(
            app.post("/api/v2.0/users").admin().json(&create(&"u".repeat(255), "a@example.com", "A", "")).send().await.status,
            StatusCode::CREATED
        );
        let bob = user(&app, "bob").await;
        for body in [json!({"realname": huge}), json!({"email": long_email}), json!({"comment": "c".repeat(31)})] {
            let res = app.put(&format!("/api/v2.0/users/{bob}")).admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}");
        }
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "p".repeat(256)})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(message(&res).contains("illegal in length"), "{}", message(&res));
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "p".repeat(255)})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
    }
);

backend_test!(
    async fn a_missing_project_is_404_before_its_body_is_judged(app) {
        for path in [
            "/api/v2.0/projects/nothere/members",
            "/api/v2.0/projects/nothere/metadatas",
        ] {
            let res = app.post(path).admin().raw("application/json", b"{not json".to_vec()).send().await;
            assert_eq!(res.status, axum::http::StatusCode::NOT_FOUND, "{path}: {}", res.text());
        }
        for path in [
            "/api/v2.0/projects/nothere/members/3",
            "/api/v2.0/projects/nothere/metadatas/public",
        ] {
            let res = app.put(path).admin().raw("application/json", b"{not json".to_vec()).send().await;
            assert_eq!(res.status, axum::http::StatusCode::NOT_FOUND, "{path}: {}", res.text());
        }
        // An existing project still judges the body.
        let res = app.post("/api/v2.0/projects/library/members").admin().raw("application/json", b"{not json".to_vec()).send().await;
        assert_eq!(res.status, axum::http::StatusCode::BAD_REQUEST);
    }
);

crate::backend_test!(
    /// No listing answers a whole table at once: `page_size=0` is a page of
    /// 100 with a `Link` to the next, and `/v2/` `tags/list` without `n` (or
    /// with a larger one) gives 1,000 tags and a `Link` to the rest.
    async fn listings_never_return_a_whole_table(app) {
        for i in 0..105 {
            let res = app.post("/api/v2.0/projects").admin().json(&serde_json::json!({"project_name": format!("p{i:03}")})).send().await;
            assert_eq!(res.status, axum::http::StatusCode::CREATED);
        }
        let res = app.get("/api/v2.0/projects?page_size=0").admin().send().await;
        assert_eq!(res.json().as_array().unwrap().len(), 100);
        assert_eq!(res.header("x-total-count"), Some("106"));
        assert!(res.header("link").is_some_and(|l| l.contains("rel=\"next\"")), "{:?}", res.header("link"));

        let (_, digest) = crate::registry::push_image(&app, "library/many", "t0000", &[b"many"]).await;
        for i in 1..1005 {
            let res = app
                .post(&format!("/api/v2.0/projects/library/repositories/many/artifacts/{digest}/tags"))
                .admin()
                .json(&serde_json::json!({"name": format!("t{i:04}")}))
                .send()
                .await;
            assert_eq!(res.status, axum::http::StatusCode::CREATED, "{}", res.text());
        }
        for query in ["", "?n=5000"] {
            let res = app.get(&format!("/v2/library/many/tags/list{query}")).admin().send().await;
            let tags = res.json()["tags"].as_array().unwrap().clone();
            assert_eq!(tags.len(), 1000, "{query}");
            assert_eq!(tags[999], "t0999");
            let link = res.header("link").expect("a Link to the rest").to_string();
            assert!(link.contains("last=t0999"), "{link}");
            let next = link.trim_start_matches('<').split('>').next().unwrap().to_string();
            let rest = app.get(&next).admin().send().await.json();
            assert_eq!(rest["tags"].as_array().unwrap().len(), 5, "{next}");
        }
    }
);

backend_test!(
    /// No schedule fires more than once a minute: a seconds field other than
    /// 0 is refused for every kind of schedule, in Harbor's words.
    async fn schedules_that_fire_more_than_once_a_minute_are_refused(app) {
        const SECONDS: &str = "the 1st field (indicating Seconds of time) of the cron setting must be 0";
        let every = |cron: &str| json!({"schedule": {"type": "Custom", "cron": cron}});
        let purge = |cron: &str| json!({"schedule": {"type": "Custom", "cron": cron}, "parameters": {"audit_retention_hour": 24, "include_event_types": "pull_artifact"}});
        let retention = |cron: &str| json!({
            "algorithm": "or",
            "rules": [{"disabled": false, "action": "retain", "template": "always", "params": {},
                "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": "**"}],
                "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": "**"}]}}],
            "trigger": {"kind": "Schedule", "settings": {"cron": cron}, "references": {}},
            "scope": {"level": "project", "ref": 1},
        });
        let peer = crate::util::DockerRegistry::start(crate::util::PeerOptions { basic_auth: None, tls: false }).await;
        let res = app.post("/api/v2.0/registries").admin()
            .json(&json!({"name": "peer", "type": "docker-registry", "url": peer.url()}))
            .send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let registry: i64 = res.header("location").unwrap().rsplit('/').next().unwrap().parse().unwrap();
        let replication = move |cron: &str| json!({"name": format!("r{}", cron.len()), "dest_registry": {"id": registry}, "enabled": true,
            "trigger": {"type": "scheduled", "trigger_settings": {"cron": cron}}});
        type Body = Box<dyn Fn(&str) -> serde_json::Value>;
        let kinds: [(&str, Body, String); 4] = [
            ("/api/v2.0/system/gc/schedule", Box::new(every), "invalid cron string for scheduled gc: {cron}, error: {SECONDS}".into()),
            ("/api/v2.0/system/purgeaudit/schedule", Box::new(purge), "invalid cron string for scheduled log rotation purge: {cron}, error: {SECONDS}".into()),
            ("/api/v2.0/retentions", Box::new(retention), "invalid cron string for scheduled tag retention: {cron}, error: {SECONDS}".into()),
            ("/api/v2.0/replication/policies", Box::new(replication), "invalid cron string for scheduled trigger: {cron}".into()),
        ];
        for (path, body, said) in &kinds {
            for cron in ["* * * * * *", "*/10 * * * * *", "30 0 3 * * *"] {
                let res = app.post(path).admin().json(&body(cron)).send().await;
                assert_eq!(res.status, StatusCode::BAD_REQUEST, "{path} {cron}: {}", res.text());
                assert_eq!(code(&res), "BAD_REQUEST", "{path}");
                let said = said.replace("{cron}", cron).replace("{SECONDS}", SECONDS);
                assert_eq!(message(&res), said, "{path}");
            }
            let res = app.post(path).admin().json(&body("0 */5 * * * *")).send().await;
            assert_eq!(res.status, StatusCode::CREATED, "{path}: {}", res.text());
        }
    }
);
