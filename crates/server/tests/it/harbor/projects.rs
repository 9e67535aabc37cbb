//! listProjects, headProject, createProject, getProject, updateProject,
//! deleteProject, getProjectDeletable, getProjectSummary.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::{
    CALLERS, PASSWORD, as_caller, code, member, message, project, project_with_every_role, user,
};
use crate::backend_test;
use crate::util::TestApp;

async fn project_count(app: &TestApp) -> i64 {
    app.get("/api/v2.0/projects?page_size=0")
        .admin()
        .send()
        .await
        .header("x-total-count")
        .unwrap()
        .parse()
        .unwrap()
}

backend_test!(
    async fn library_exists_after_first_start_and_is_public(app) {
        let res = app.get("/api/v2.0/projects").send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("x-total-count"), Some("1"));
        assert!(res.header("link").is_none());
        let body = res.json();
        let library = &body[0];
        assert_eq!(library["project_id"], 1);
        assert_eq!(library["name"], "library");
        assert_eq!(library["owner_id"], 1);
        assert_eq!(library["owner_name"], "admin");
        assert_eq!(library["repo_count"], 0);
        assert_eq!(library["metadata"], json!({"public": "true"}));
        assert_eq!(library["current_user_role_ids"], serde_json::Value::Null);
        assert!(library.get("current_user_role_id").is_none());
        assert!(library.get("registry_id").is_none());
        assert!(library.get("deleted").is_none());
        assert_eq!(library["cve_allowlist"]["items"], json!([]));
        assert_eq!(library["cve_allowlist"]["creation_time"], "0001-01-01T00:00:00.000Z");
        assert_eq!(library["creation_time"].as_str().unwrap().len(), 24);

        let admin = app.get("/api/v2.0/projects/library").admin().send().await.json();
        assert_eq!(admin["current_user_role_ids"], json!([1]));
        assert_eq!(admin["current_user_role_id"], 1);
        let by_id = app.get("/api/v2.0/projects/1").send().await;
        assert_eq!(by_id.status, StatusCode::OK);
        assert_eq!(by_id.json()["name"], "library");
    }
);

backend_test!(
    async fn create_project_makes_the_creator_project_admin(app) {
        let alice = user(&app, "alice").await;
        let res = app
            .post("/api/v2.0/projects")
            .basic("alice", PASSWORD)
            .json(&json!({"project_name": "alpha", "metadata": {"auto_scan": "true"}, "storage_limit": 5}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("location"), Some("/api/v2.0/projects/2"));
        assert!(res.body.is_empty());

        let res = app
            .post("/api/v2.0/projects/")
            .basic("alice", PASSWORD)
            .header("X-Resource-Name-In-Location", "true")
            .json(&json!({"project_name": "beta", "public": true}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(res.header("location"), Some("/api/v2.0/projects/beta"));

        let alpha = app.get("/api/v2.0/projects/alpha").basic("alice", PASSWORD).send().await.json();
        assert_eq!(alpha["owner_id"], alice);
        assert_eq!(alpha["owner_name"], "alice");
        assert_eq!(alpha["current_user_role_id"], 1);
        assert_eq!(alpha["current_user_role_ids"], json!([1]));
        assert_eq!(alpha["metadata"], json!({"auto_scan": "true", "public": "false"}));
        let beta = app.get("/api/v2.0/projects/beta").send().await.json();
        assert_eq!(beta["metadata"]["public"], "true", "the deprecated top-level public is honoured");

        let members = app.get("/api/v2.0/projects/alpha/members").basic("alice", PASSWORD).send().await.json();
        assert_eq!(members.as_array().unwrap().len(), 1);
        assert_eq!(members[0]["entity_name"], "alice");
        assert_eq!(members[0]["role_name"], "projectAdmin");

        // A non-admin's storage_limit is replaced by storage_per_project (-1).
        let summary = app.get("/api/v2.0/projects/alpha/summary").basic("alice", PASSWORD).send().await.json();
        assert_eq!(summary["quota"], json!({"hard": {"storage": -1}, "used": {"storage": 0}}));
        let res = app
            .post("/api/v2.0/projects")
            .admin()
            .json(&json!({"project_name": "gamma", "storage_limit": 1024}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED);
        let summary = app.get("/api/v2.0/projects/gamma/summary").admin().send().await.json();
        assert_eq!(summary["quota"]["hard"]["storage"], 1024);
    }
);

backend_test!(
    async fn create_project_rejects_bad_input_and_changes_nothing(app) {
        user(&app, "alice").await;
        let before = project_count(&app).await;
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (json!({"project_name": "Upper"}), "project name is not in lower case or contains illegal characters"),
            (json!({"project_name": "a b"}), "project name is not in lower case or contains illegal characters"),
            (json!({"project_name": "-x"}), "project name is not in lower case or contains illegal characters"),
            (json!({}), "Project name  is illegal in length. (greater than 255 or less than 1)"),
            (json!({"project_name": "x".repeat(256)}), "illegal in length"),
            (json!({"project_name": 5}), "parsing the request body failed"),
            (json!({"project_name": "ok", "public": "yes"}), "parsing the request body failed"),
            (json!({"project_name": "ok", "metadata": {"public": "maybe"}}), "metadata.public should only be 'true' or 'false', but got: 'maybe'"),
            (json!({"project_name": "ok", "metadata": {"public": true}}), "metadata.public in body must be of type string"),
            (json!({"project_name": "ok", "metadata": {"severity": "urgent"}}), "invalid value: urgent"),
            (json!({"project_name": "ok", "metadata": {"retention_id": "3"}}), "retention_id"),
            (json!({"project_name": "ok", "storage_limit": -5}), "bad request: invalid storage limit -5"),
            (json!({"project_name": "ok", "registry_id": 1}), "bad request: registry 1 not found"),
        ];
        for (body, expected) in cases {
            let res = app.post("/api/v2.0/projects").admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}: {}", res.text());
            assert_eq!(code(&res), "BAD_REQUEST");
            assert!(message(&res).contains(expected), "{body}: {}", message(&res));
        }
        let res = app.post("/api/v2.0/projects").admin().raw("application/json", "{not json").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.post("/api/v2.0/projects").admin().raw("text/plain", r#"{"project_name":"ok"}"#).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(message(&res).contains("unsupported media type"));
        let res = app.post("/api/v2.0/projects").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.post("/api/v2.0/projects").json(&json!({"project_name": "ok"})).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let res = app.post("/api/v2.0/projects").basic("alice", PASSWORD)
            .json(&json!({"project_name": "ok", "registry_id": 1})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert_eq!(message(&res), "Only system admin can create proxy cache project");
        assert_eq!(project_count(&app).await, before);

        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "library"})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        assert_eq!(res.json(), json!({"errors": [{"code": "CONFLICT", "message": "The project named library already exists"}]}));
        assert_eq!(project_count(&app).await, before);
    }
);

backend_test!(
    async fn concurrent_creation_of_one_name_gives_exactly_one_201(app) {
        let before = project_count(&app).await;
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let request = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "race"}));
            tasks.push(request.send());
        }
        let results = futures_util::future::join_all(tasks).await;
        let created = results.iter().filter(|r| r.status == StatusCode::CREATED).count();
        let conflicts = results.iter().filter(|r| r.status == StatusCode::CONFLICT).count();
        assert_eq!((created, conflicts), (1, 7), "{:?}", results.iter().map(|r| r.status).collect::<Vec<_>>());
        assert_eq!(project_count(&app).await, before + 1, "one project row");
        let members = app.get("/api/v2.0/projects/race/members").admin().send().await;
        assert_eq!(members.header("x-total-count"), Some("1"));
    }
);

backend_test!(
    async fn project_creation_restriction_adminonly(app) {
        user(&app, "alice").await;
        let res = app.put("/api/v2.0/configurations").admin()
            .json(&json!({"project_creation_restriction": "adminonly"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.post("/api/v2.0/projects").basic("alice", PASSWORD).json(&json!({"project_name": "x"})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert_eq!(message(&res), "Only system admin can create project");
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "x"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
    }
);

backend_test!(
    async fn list_projects_applies_visibility(app) {
        user(&app, "alice").await;
        user(&app, "bob").await;
        project(&app, Some("alice"), "alice-private", false).await;
        project(&app, Some("alice"), "alice-public", true).await;
        project(&app, Some("bob"), "bob-private", false).await;
        let names = |res: &crate::util::TestResponse| -> Vec<String> {
            res.json().as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_string()).collect()
        };
        let anon = app.get("/api/v2.0/projects").send().await;
        assert_eq!(names(&anon), ["alice-public", "library"]);
        let alice = app.get("/api/v2.0/projects").basic("alice", PASSWORD).send().await;
        assert_eq!(names(&alice), ["alice-private", "alice-public", "library"]);
        assert_eq!(alice.header("x-total-count"), Some("3"));
        let alice_private = app.get("/api/v2.0/projects?public=false").basic("alice", PASSWORD).send().await;
        assert_eq!(names(&alice_private), ["alice-private"]);
        let alice_public = app.get("/api/v2.0/projects?public=true").basic("alice", PASSWORD).send().await;
        assert_eq!(names(&alice_public), ["alice-public", "library"]);
        let anon_private = app.get("/api/v2.0/projects?public=false").send().await;
        assert_eq!(anon_private.header("x-total-count"), Some("0"));
        assert_eq!(anon_private.json(), json!([]));
        let admin = app.get("/api/v2.0/projects").admin().send().await;
        assert_eq!(names(&admin), ["alice-private", "alice-public", "bob-private", "library"]);
        let admin_private = app.get("/api/v2.0/projects?public=0").admin().send().await;
        assert_eq!(names(&admin_private), ["alice-private", "bob-private"]);
        let owner = app.get("/api/v2.0/projects?owner=bob").admin().send().await;
        assert_eq!(names(&owner), ["bob-private"]);
        let by_name = app.get("/api/v2.0/projects?name=PRIV").basic("alice", PASSWORD).send().await;
        assert_eq!(names(&by_name), ["alice-private"]);
        let q_public = app.get("/api/v2.0/projects?q=public%3Dtrue").admin().send().await;
        assert_eq!(names(&q_public), ["alice-public", "library"]);
        let q_owner = app.get("/api/v2.0/projects?q=owner%3Dalice").admin().send().await;
        assert_eq!(names(&q_owner), ["alice-private", "alice-public"]);
        // Role ids are the caller's own.
        let body = alice.json();
        let library = body.as_array().unwrap().iter().find(|p| p["name"] == "library").unwrap();
        assert_eq!(library["current_user_role_ids"], serde_json::Value::Null);
        assert_eq!(body[0]["current_user_role_ids"], json!([1]));
    }
);

backend_test!(
    async fn list_projects_pages_filters_and_sorts(app) {
        for i in 0..24 {
            let name = format!("test-{i:02}");
            app.store().projects().create(&berth_domain::model::NewProject {
                name,
                owner_id: 1,
                metadata: vec![("public".into(), "true".into())],
                storage_limit: -1,
                registry_id: None,
            }, "admin").await.unwrap();
        }
        let res = app.get("/api/v2.0/projects?page=2&page_size=10&q=name%3D~te").send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("x-total-count"), Some("24"));
        assert_eq!(
            res.header("link"),
            Some("</api/v2.0/projects?page=1&page_size=10&q=name=~te>; rel=\"prev\" , </api/v2.0/projects?page=3&page_size=10&q=name=~te>; rel=\"next\"")
        );
        let body = res.json();
        assert_eq!(body.as_array().unwrap().len(), 10);
        assert_eq!(body[0]["name"], "test-10");
        let last = app.get("/api/v2.0/projects?page=3&page_size=10&q=name%3D~te").send().await;
        assert_eq!(last.json().as_array().unwrap().len(), 4);
        assert_eq!(last.header("link"), Some("</api/v2.0/projects?page=2&page_size=10&q=name=~te>; rel=\"prev\""));
        let all = app.get("/api/v2.0/projects?page_size=0").send().await;
        assert_eq!(all.json().as_array().unwrap().len(), 25);
        assert!(all.header("link").is_none());
        let default = app.get("/api/v2.0/projects").send().await;
        assert_eq!(default.json().as_array().unwrap().len(), 10);
        assert_eq!(default.json()[0]["name"], "library");

        let sorted = app.get("/api/v2.0/projects?sort=-name&page_size=2").send().await.json();
        assert_eq!(sorted[0]["name"], "test-23");
        assert_eq!(sorted[1]["name"], "test-22");
        let by_id = app.get("/api/v2.0/projects?sort=-project_id,unknown&page_size=1").send().await.json();
        assert_eq!(by_id[0]["name"], "test-23");
        let exact = app.get("/api/v2.0/projects?q=name%3Dtest-05").send().await.json();
        assert_eq!(exact.as_array().unwrap().len(), 1);
        let list = app.get("/api/v2.0/projects?q=name%3D%7Btest-01%20test-02%7D").send().await.json();
        assert_eq!(list.as_array().unwrap().len(), 2);
        let range = app.get("/api/v2.0/projects?q=project_id%3D%5B2~4%5D").send().await;
        assert_eq!(range.header("x-total-count"), Some("3"));
        let ignored = app.get("/api/v2.0/projects?q=nonsense%3D1").send().await;
        assert_eq!(ignored.header("x-total-count"), Some("25"));

        let brief = app.get("/api/v2.0/projects?with_detail=false&page_size=1").send().await.json();
        assert!(brief[0].get("metadata").is_none());
        assert!(brief[0].get("owner_name").is_none());
        assert_eq!(brief[0]["cve_allowlist"]["items"], serde_json::Value::Null);

        for (query, expected) in [
            ("page_size=101", "page_size in query should be less than or equal to 100"),
            ("page_size=abc", "page_size in query must be of type int64: \"abc\""),
            ("page=x", "page in query must be of type int64"),
            ("q=name", "the query string must contain \"=\" and the key/value cannot be empty"),
            ("q=name%3D~", "invalid query string value: ~"),
            ("q=project_id%3D%5B1~2", "invalid query string value: [1~2"),
            ("q=project_id%3Dabc", "invalid query string value: abc"),
            ("sort=-", "invalid sort string"),
        ] {
            let res = app.get(&format!("/api/v2.0/projects?{query}")).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{query}");
            assert!(message(&res).contains(expected), "{query}: {}", message(&res));
        }
    }
);

backend_test!(
    async fn head_project_checks_existence_for_signed_in_callers(app) {
        user(&app, "alice").await;
        project(&app, None, "secret", false).await;
        let head = |name: &'static str, login: Option<&'static str>| {
            let request = app.request(axum::http::Method::HEAD, &format!("/api/v2.0/projects?project_name={name}"));
            as_caller(request, login).send()
        };
        assert_eq!(head("secret", Some("alice")).await.status, StatusCode::OK);
        let missing = head("nothing", Some("alice")).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        assert!(missing.body.is_empty());
        assert_eq!(head("secret", None).await.status, StatusCode::UNAUTHORIZED);
        let res = app.request(axum::http::Method::HEAD, "/api/v2.0/projects").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
    }
);

backend_test!(
    async fn get_project_follows_the_role_matrix(app) {
        let id = project_with_every_role(&app).await;
        for (label, login) in CALLERS {
            let res = as_caller(app.get(&format!("/api/v2.0/projects/{id}")), login).send().await;
            let expected = match label {
                "anonymous" => StatusCode::UNAUTHORIZED,
                "outsider" => StatusCode::FORBIDDEN,
                _ => StatusCode::OK,
            };
            assert_eq!(res.status, expected, "{label}");
        }
        let guest = app.get("/api/v2.0/projects/p").basic("guest", PASSWORD).send().await.json();
        assert_eq!(guest["current_user_role_ids"], json!([3]));
        // A missing project: 404 for admins, 401/403 for everyone else.
        let res = app.get("/api/v2.0/projects/nothing").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(message(&res), "project nothing not found");
        let res = app.get("/api/v2.0/projects/999").admin().send().await;
        assert_eq!(message(&res), "project 999 not found");
        assert_eq!(app.get("/api/v2.0/projects/nothing").basic("guest", PASSWORD).send().await.status, StatusCode::FORBIDDEN);
        assert_eq!(app.get("/api/v2.0/projects/nothing").send().await.status, StatusCode::UNAUTHORIZED);
        // A name no project can have is not found either (Harbor: 404).
        assert_eq!(app.get("/api/v2.0/projects/a%20b").admin().send().await.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn numeric_names_need_x_is_resource_name(app) {
        project(&app, None, "123", true).await;
        let by_name = app.get("/api/v2.0/projects/123").header("X-Is-Resource-Name", "true").send().await;
        assert_eq!(by_name.status, StatusCode::OK);
        assert_eq!(by_name.json()["name"], "123");
        let as_id = app.get("/api/v2.0/projects/123").admin().send().await;
        assert_eq!(as_id.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn update_project_merges_metadata_and_allowlist(app) {
        let id = project_with_every_role(&app).await;
        for (label, login) in CALLERS {
            let res = as_caller(app.put(&format!("/api/v2.0/projects/{id}")), login)
                .json(&json!({"metadata": {"auto_scan": "true"}}))
                .send()
                .await;
            let expected = match label {
                "anonymous" => StatusCode::UNAUTHORIZED,
                "pa" | "admin" => StatusCode::OK,
                _ => StatusCode::FORBIDDEN,
            };
            assert_eq!(res.status, expected, "{label}");
        }
        let res = app.put("/api/v2.0/projects/p").basic("pa", PASSWORD)
            .json(&json!({"project_name": "ignored", "metadata": {"public": "true", "severity": "HIGH", "unknown": "x"},
                "cve_allowlist": {"items": [{"cve_id": "CVE-2024-1"}], "expires_at": 2000000000}}))
            .send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert!(res.body.is_empty());
        let body = app.get("/api/v2.0/projects/p").send().await;
        assert_eq!(body.status, StatusCode::OK, "public now: anonymous may read");
        let body = body.json();
        assert_eq!(body["name"], "p");
        assert_eq!(body["metadata"], json!({"auto_scan": "true", "public": "true", "severity": "high"}));
        assert_eq!(body["cve_allowlist"]["items"], json!([{"cve_id": "CVE-2024-1"}]));
        assert_eq!(body["cve_allowlist"]["expires_at"], 2000000000);
        assert_eq!(body["cve_allowlist"]["project_id"], id);

        for bad in [
            json!({"metadata": {"public": "nope"}}),
            json!({"cve_allowlist": {"project_id": 999, "items": []}}),
            json!({"cve_allowlist": {"items": [{"cve_id": "A"}, {"cve_id": "A"}]}}),
            json!({"metadata": {"retention_id": "5"}}),
            json!({"metadata": "x"}),
        ] {
            let res = app.put("/api/v2.0/projects/p").admin().json(&bad).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{bad}");
        }
        let after = app.get("/api/v2.0/projects/p").send().await.json();
        assert_eq!(after["metadata"]["public"], "true", "rejected updates change nothing");
        assert_eq!(after["cve_allowlist"]["items"], json!([{"cve_id": "CVE-2024-1"}]));
    }
);

backend_test!(
    async fn delete_project_needs_project_admin_and_no_repositories(app) {
        let id = project_with_every_role(&app).await;
        for (label, login) in CALLERS {
            let res = as_caller(app.get(&format!("/api/v2.0/projects/{id}/_deletable")), login).send().await;
            let expected = match label {
                "anonymous" => StatusCode::UNAUTHORIZED,
                "pa" | "admin" => StatusCode::OK,
                _ => StatusCode::FORBIDDEN,
            };
            assert_eq!(res.status, expected, "{label}");
            if label != "pa" && label != "admin" {
                let res = as_caller(app.delete(&format!("/api/v2.0/projects/{id}")), login).send().await;
                assert_eq!(res.status, expected, "delete as {label}");
            }
        }
        assert_eq!(app.get("/api/v2.0/projects/p/_deletable").admin().send().await.json(), json!({"deletable": true}));

        crate::registry::push_image(&app, "p/app", "v1", &[b"app"]).await;
        let res = app.get("/api/v2.0/projects/p/_deletable").admin().send().await;
        assert_eq!(res.json(), json!({"message": "the project contains repositories, can not be deleted"}));
        let res = app.delete("/api/v2.0/projects/p").basic("pa", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED);
        assert_eq!(res.json(), json!({"errors": [{"code": "PRECONDITION", "message": "precondition failed: the project contains repositories, can not be deleted"}]}));
        let summary = app.get("/api/v2.0/projects/p/summary").admin().send().await.json();
        assert_eq!(summary["repo_count"], 1);
        let listed = app.get("/api/v2.0/projects?name=p&page_size=0").admin().send().await.json();
        let p = listed.as_array().unwrap().iter().find(|x| x["name"] == "p").unwrap().clone();
        assert_eq!(p["repo_count"], 1);

        let other = project(&app, None, "gone", false).await;
        let res = app.delete(&format!("/api/v2.0/projects/{other}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert!(res.body.is_empty());
        assert_eq!(app.get("/api/v2.0/projects/gone").admin().send().await.status, StatusCode::NOT_FOUND);
        assert_eq!(app.delete("/api/v2.0/projects/gone").admin().send().await.status, StatusCode::NOT_FOUND);
        project(&app, None, "gone", false).await;
    }
);

backend_test!(
    async fn summary_shows_member_counts_to_member_listers_only(app) {
        let id = project_with_every_role(&app).await;
        let extra = user(&app, "dev2").await;
        member(&app, id, extra, 2).await;
        let full = app.get("/api/v2.0/projects/p/summary").basic("guest", PASSWORD).send().await;
        assert_eq!(full.status, StatusCode::OK);
        assert_eq!(full.json(), json!({
            "repo_count": 0, "project_admin_count": 2, "maintainer_count": 1, "developer_count": 2,
            "guest_count": 1, "limited_guest_count": 1, "quota": {"hard": {"storage": -1}, "used": {"storage": 0}}
        }));
        let limited = app.get("/api/v2.0/projects/p/summary").basic("limited", PASSWORD).send().await.json();
        assert_eq!(limited, json!({"repo_count": 0, "quota": {"hard": {"storage": -1}, "used": {"storage": 0}}}));
        assert_eq!(app.get("/api/v2.0/projects/p/summary").basic("outsider", PASSWORD).send().await.status, StatusCode::FORBIDDEN);
        let public = app.get("/api/v2.0/projects/library/summary").send().await.json();
        assert_eq!(public, json!({"repo_count": 0}), "anonymous on a public project: no members, no quota");
    }
);
