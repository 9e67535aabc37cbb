//! Audit logs: who pushed, pulled, deleted and changed what, for
//! administrators and project administrators.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backend_test;
use crate::registry::push_image;
use crate::util::TestApp;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

async fn logs(
    app: &TestApp,
    path: &str,
    user: Option<(&str, &str)>,
) -> (StatusCode, Value, Option<String>) {
    app.state.audit_queue.flush(app.store()).await;
    let mut request = app.get(path);
    request = match user {
        Some((login, password)) => request.basic(login, password),
        None => request.admin(),
    };
    let res = request.send().await;
    let total = res.header("x-total-count").map(str::to_string);
    let body = if res.status == StatusCode::OK {
        res.json()
    } else {
        Value::Null
    };
    (res.status, body, total)
}

fn operations(body: &Value) -> Vec<(String, String, String, String)> {
    body.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (
                s("operation"),
                s("resource_type"),
                s("resource"),
                s("username"),
            )
        })
        .collect()
}

backend_test!(
    async fn operations_are_logged_and_shown_to_whom_they_concern(app) {
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "audited"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        push_image(&app, "audited/app", "v1", &[b"audited layer"]).await;
        for _ in 0..3 {
            let res = app.get("/v2/audited/app/manifests/v1").admin().header("accept", OCI_MANIFEST).send().await;
            assert_eq!(res.status, StatusCode::OK);
        }
        let boss = app.create_user("boss", "Boss-Passw0rd1").await;
        let dev = app.create_user("dev", "Dev-Passw0rd1").await;
        for (user, role) in [(boss, 1), (dev, 2)] {
            let res = app
                .post("/api/v2.0/projects/audited/members")
                .admin()
                .json(&json!({"role_id": role, "member_user": {"user_id": user}}))
                .send()
                .await;
            assert_eq!(res.status, StatusCode::CREATED);
        }
        let res = app.delete("/api/v2.0/projects/audited/repositories/app/artifacts/v1/tags/v1").basic("boss", "Boss-Passw0rd1").send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"token_expiration": 40})).send().await;
        assert_eq!(res.status, StatusCode::OK);

        let (status, body, total) = logs(&app, "/api/v2.0/audit-logs?page_size=100", None).await;
        assert_eq!(status, StatusCode::OK);
        let seen = operations(&body);
        assert_eq!(total.as_deref(), Some(seen.len().to_string().as_str()));
        let entry = |op: &str, kind: &str, resource: &str, user: &str| {
            (op.to_string(), kind.to_string(), resource.to_string(), user.to_string())
        };
        for expected in [
            entry("create", "project", "audited", "admin"),
            entry("create", "artifact", "audited/app:v1", "admin"),
            entry("pull", "artifact", "audited/app:v1", "admin"),
            entry("delete", "tag", "audited/app:v1", "boss"),
            entry("update", "configuration", "token_expiration", "admin"),
        ] {
            assert!(seen.contains(&expected), "{expected:?} in {seen:?}");
        }
        let members = seen.iter().filter(|e| e.0 == "create" && e.1 == "project_member");
        assert!(members.map(|e| (e.2.starts_with("audited/members/"), e.3.as_str())).all(|e| e == (true, "admin")));
        assert_eq!(seen.iter().filter(|e| e.1 == "project_member").count(), 2, "{seen:?}");
        assert_eq!(seen.iter().filter(|e| e.0 == "pull").count(), 3, "{seen:?}");
        assert_eq!(seen[0].0, "update", "newest first: {seen:?}");

        // q filters.
        let (_, body, total) = logs(&app, "/api/v2.0/audit-logs?q=operation=pull", None).await;
        assert_eq!(total.as_deref(), Some("3"));
        assert!(operations(&body).iter().all(|e| e.0 == "pull"));
        let (_, body, _) = logs(&app, "/api/v2.0/audit-logs?q=username=boss", None).await;
        assert_eq!(operations(&body).len(), 1);
        let (_, body, _) = logs(&app, "/api/v2.0/audit-logs?q=resource=~audited/app&page_size=100", None).await;
        assert!(operations(&body).len() >= 5);
        let (_, body, _) = logs(&app, "/api/v2.0/audit-logs?q=op_time=[2000-01-01%2000:00:00~2001-01-01%2000:00:00]", None).await;
        assert_eq!(body, json!([]));
        let (_, body, total) = logs(&app, "/api/v2.0/audit-logs?q=op_time=[2000-01-01%2000:00:00~2999-01-01%2000:00:00]&page_size=1", None).await;
        assert_eq!(operations(&body).len(), 1);
        assert_eq!(total.as_deref(), Some(seen.len().to_string().as_str()));

        // Who sees what.
        let (status, body, _) = logs(&app, "/api/v2.0/audit-logs?page_size=100", Some(("boss", "Boss-Passw0rd1"))).await;
        assert_eq!(status, StatusCode::OK);
        let boss_view = operations(&body);
        assert!(!boss_view.is_empty());
        assert!(boss_view.iter().all(|e| e.1 != "configuration"), "{boss_view:?}");
        let (status, body, _) = logs(&app, "/api/v2.0/audit-logs", Some(("dev", "Dev-Passw0rd1"))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, json!([]));
        let res = app.get("/api/v2.0/audit-logs").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let (status, body, _) = logs(&app, "/api/v2.0/projects/audited/logs?page_size=100", Some(("boss", "Boss-Passw0rd1"))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(operations(&body).len(), boss_view.len());
        let (status, _, _) = logs(&app, "/api/v2.0/projects/audited/logs", Some(("dev", "Dev-Passw0rd1"))).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let (status, body, _) = logs(&app, "/api/v2.0/projects/library/logs", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, json!([]), "nothing happened in library");
    }
);

backend_test!(
    async fn auditlog_exts_show_the_same_entries_as_audit_log_ext(app) {
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "extended"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        push_image(&app, "extended/app", "v1", &[b"extended layer"]).await;
        let res = app.get("/v2/extended/app/manifests/v1").admin().header("accept", OCI_MANIFEST).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let boss = app.create_user("boss", "Boss-Passw0rd1").await;
        let dev = app.create_user("dev", "Dev-Passw0rd1").await;
        for (user, role) in [(boss, 1), (dev, 2)] {
            let res = app
                .post("/api/v2.0/projects/extended/members")
                .admin()
                .json(&json!({"role_id": role, "member_user": {"user_id": user}}))
                .send()
                .await;
            assert_eq!(res.status, StatusCode::CREATED);
        }
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"token_expiration": 40})).send().await;
        assert_eq!(res.status, StatusCode::OK);

        // The same rows, page and total as /audit-logs, in Harbor 2.13's AuditLogExt.
        let (status, plain, total) = logs(&app, "/api/v2.0/audit-logs?page_size=100", None).await;
        assert_eq!(status, StatusCode::OK);
        let (status, ext, ext_total) = logs(&app, "/api/v2.0/auditlog-exts?page_size=100", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(ext_total, total);
        assert_eq!(operations(&ext), operations(&plain));
        for (e, p) in ext.as_array().unwrap().iter().zip(plain.as_array().unwrap()) {
            assert_eq!(e["id"], p["id"]);
            assert_eq!(e["op_time"], p["op_time"]);
            assert_eq!(e["operation_result"], true);
            let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                ["id", "op_time", "operation", "operation_description", "operation_result", "resource", "resource_type", "username"]
            );
        }
        let described = |operation: &str, kind: &str| {
            ext.as_array()
                .unwrap()
                .iter()
                .find(|e| e["operation"] == operation && e["resource_type"] == kind)
                .map(|e| e["operation_description"].as_str().unwrap().to_string())
                .unwrap_or_else(|| panic!("no {operation} {kind} in {ext}"))
        };
        assert_eq!(described("create", "project"), "create project: extended");
        assert_eq!(described("create", "artifact"), "push artifact: extended/app:v1");
        assert_eq!(described("pull", "artifact"), "pull artifact: extended/app:v1");
        assert_eq!(described("update", "configuration"), "update configuration with name: token_expiration");

        // q, sort and paging as for /audit-logs.
        let (_, body, total) = logs(&app, "/api/v2.0/auditlog-exts?q=operation=pull", None).await;
        assert_eq!(total.as_deref(), Some("1"));
        assert_eq!(operations(&body)[0].0, "pull");
        let (_, body, _) = logs(&app, "/api/v2.0/auditlog-exts?q=resource_type=project&sort=op_time", None).await;
        assert_eq!(operations(&body), [("create".into(), "project".into(), "extended".into(), "admin".into())]);
        let (status, _, _) = logs(&app, "/api/v2.0/auditlog-exts?q=op_time=[x~y]", None).await;
        let (plain_status, _, _) = logs(&app, "/api/v2.0/audit-logs?q=op_time=[x~y]", None).await;
        assert_eq!(status, plain_status);

        // The same permissions: project administrators see their projects' rows.
        let boss_login = Some(("boss", "Boss-Passw0rd1"));
        let (status, body, _) = logs(&app, "/api/v2.0/auditlog-exts?page_size=100", boss_login).await;
        assert_eq!(status, StatusCode::OK);
        let (_, plain, _) = logs(&app, "/api/v2.0/audit-logs?page_size=100", boss_login).await;
        assert_eq!(operations(&body), operations(&plain));
        assert!(operations(&body).iter().all(|e| e.1 != "configuration"));
        let (status, body, _) = logs(&app, "/api/v2.0/auditlog-exts", Some(("dev", "Dev-Passw0rd1"))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, json!([]));
        assert_eq!(app.get("/api/v2.0/auditlog-exts").send().await.status, StatusCode::UNAUTHORIZED);

        let (status, body, total) = logs(&app, "/api/v2.0/projects/extended/auditlog-exts?page_size=100", boss_login).await;
        assert_eq!(status, StatusCode::OK);
        let (_, plain, plain_total) = logs(&app, "/api/v2.0/projects/extended/logs?page_size=100", boss_login).await;
        assert_eq!(total, plain_total);
        assert_eq!(operations(&body), operations(&plain));
        let (status, _, _) = logs(&app, "/api/v2.0/projects/extended/auditlog-exts", Some(("dev", "Dev-Passw0rd1"))).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(app.get("/api/v2.0/projects/extended/auditlog-exts").send().await.status, StatusCode::UNAUTHORIZED);
        let (status, body, _) = logs(&app, "/api/v2.0/projects/library/auditlog-exts", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, json!([]));
        let (status, _, _) = logs(&app, "/api/v2.0/projects/nothere/auditlog-exts", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    /// A batch of entries is stored as given, whatever its size and text:
    /// quotes, backslashes, non-ASCII, no project.
    async fn a_batch_of_entries_is_stored_as_given(app) {
        use berth_store::repo::audit_logs::{AuditScope, NewAuditLog};
        let odd = r#"library/a"b\c:ü 🚢 ' ; --"#;
        let entries: Vec<NewAuditLog> = (0..450)
            .map(|i| NewAuditLog {
                project_id: (i % 2 == 0).then_some(1),
                operation: "pull".into(),
                resource_type: "artifact".into(),
                resource: format!("{odd}{i}"),
                username: "Zoë".into(),
                op_time: berth_domain::time::now(),
            })
            .collect();
        app.store().audit_logs().record(&entries).await.unwrap();
        let paging = berth_domain::query::Paging { page: 1, page_size: 0 };
        let (total, all) = app
            .store()
            .audit_logs()
            .list(&AuditScope::All, &Default::default(), &[], paging)
            .await
            .unwrap();
        assert_eq!(total, 450);
        let mut resources: Vec<String> = all.iter().map(|e| e.resource.clone()).collect();
        resources.sort();
        let mut expected: Vec<String> = entries.iter().map(|e| e.resource.clone()).collect();
        expected.sort();
        assert_eq!(resources, expected);
        assert!(all.iter().all(|e| e.username == "Zoë"));
        let (in_project, _) = app
            .store()
            .audit_logs()
            .list(&AuditScope::Projects(vec![1]), &Default::default(), &[], paging)
            .await
            .unwrap();
        assert_eq!(in_project, 225, "the project of every other entry, the others none");

    }
);

backend_test!(
    /// The same change is audited alike whichever surface makes it: a tag
    /// deleted through `/v2/`, the Harbor API or the portal; an artifact
    /// deleted through `/v2/` or the Harbor API; a repository deleted.
    async fn deletes_are_audited_alike_through_every_surface(app) {
        for tag in ["v2", "api", "portal"] {
            push_image(&app, "library/alike", tag, &[b"alike layer"]).await;
        }
        let res = app.delete("/v2/library/alike/manifests/v2").admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        let res = app.delete("/api/v2.0/projects/library/repositories/alike/artifacts/api/tags/api").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let cookie = crate::portal::sign_in_admin(&app).await;
        let csrf = crate::portal::csrf_for(&app, &cookie).await;
        let digest = app.get("/v2/library/alike/manifests/portal").admin().header("accept", OCI_MANIFEST).send().await;
        let digest = digest.header("docker-content-digest").unwrap().to_string();
        let fields = [("project", "library"), ("repository", "alike"), ("digest", digest.as_str()), ("tag", "portal")];
        let res = crate::portal::post_form(&app, &cookie, "/harbor/tags/delete", Some(&csrf), &fields).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let (_, body, _) = logs(&app, "/api/v2.0/audit-logs?q=operation=delete&page_size=100", None).await;
        let mut deleted = operations(&body);
        deleted.sort();
        let tag = |t: &str| ("delete".to_string(), "tag".to_string(), format!("library/alike:{t}"), "admin".to_string());
        assert_eq!(deleted, vec![tag("api"), tag("portal"), tag("v2")]);

        // Artifacts: by digest through /v2/, the Harbor API and the portal.
        let (_, one) = push_image(&app, "library/gone", "one", &[b"first gone"]).await;
        let (_, two) = push_image(&app, "library/gone", "two", &[b"second gone"]).await;
        let (_, three) = push_image(&app, "library/gone", "three", &[b"third gone"]).await;
        let res = app.delete(&format!("/v2/library/gone/manifests/{one}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        let res = app.delete(&format!("/api/v2.0/projects/library/repositories/gone/artifacts/{two}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let fields = [("project", "library"), ("repository", "gone"), ("digest", three.as_str())];
        let res = crate::portal::post_form(&app, &cookie, "/harbor/artifacts/delete", Some(&csrf), &fields).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let res = app.delete("/api/v2.0/projects/library/repositories/alike").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let (_, body, _) = logs(&app, "/api/v2.0/audit-logs?q=operation=delete&page_size=100", None).await;
        let artifacts: Vec<_> = operations(&body).into_iter().filter(|(_, kind, _, _)| kind != "tag").collect();
        let entry = |kind: &str, resource: String| ("delete".to_string(), kind.to_string(), resource, "admin".to_string());
        for expected in [
            entry("artifact", format!("library/gone@{one}")),
            entry("artifact", format!("library/gone@{two}")),
            entry("artifact", format!("library/gone@{three}")),
            entry("repository", "library/alike".to_string()),
        ] {
            assert!(artifacts.contains(&expected), "{expected:?} in {artifacts:?}");
        }
        assert_eq!(artifacts.len(), 4, "{artifacts:?}");
        assert_eq!(app.store().events().pending(berth_store::repo::events::AUDIT).await.unwrap(), 0);
    }
);

backend_test!(
    /// A push is audited alike whichever surface makes it: a manifest PUT
    /// through `/v2/` and a copy through the Harbor API each write one
    /// `create artifact` entry (the tags a copy sets with it write none), and
    /// every event is delivered.
    async fn pushes_are_audited_alike_through_every_surface(app) {
        let (_, digest) = push_image(&app, "library/pushed", "v1", &[b"pushed layer"]).await;
        let res = app.post(&format!("/api/v2.0/projects/library/repositories/pushed/artifacts/{digest}/tags"))
            .admin().json(&json!({"name": "stable"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.post("/api/v2.0/projects/library/repositories/copied/artifacts?from=library/pushed:v1").admin().send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let (_, body, _) = logs(&app, "/api/v2.0/audit-logs?q=operation=create&page_size=100", None).await;
        let mut created: Vec<_> = operations(&body).into_iter().filter(|(_, kind, _, _)| kind == "artifact").collect();
        created.sort();
        let entry = |resource: String| ("create".to_string(), "artifact".to_string(), resource, "admin".to_string());
        assert_eq!(created, vec![entry(format!("library/copied@{digest}")), entry("library/pushed:v1".to_string())]);
        assert_eq!(app.store().events().pending(berth_store::repo::events::AUDIT).await.unwrap(), 0);
    }
);

backend_test!(
    /// Events outlive what they tell of: a project pushed to, emptied and
    /// deleted before its events are delivered still gets every entry (kept
    /// with no project, as a deleted project's entries are).
    async fn events_of_a_project_deleted_before_delivery_are_audited(app) {
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "fleeting"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        push_image(&app, "fleeting/app", "v1", &[b"fleeting layer"]).await;
        let res = app.delete("/api/v2.0/projects/fleeting/repositories/app").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.delete("/api/v2.0/projects/fleeting").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let (_, body, _) = logs(&app, "/api/v2.0/audit-logs?q=resource=~fleeting&page_size=100", None).await;
        let mut found = operations(&body);
        found.sort();
        let entry = |op: &str, kind: &str, resource: &str| (op.to_string(), kind.to_string(), resource.to_string(), "admin".to_string());
        assert_eq!(found, vec![
            entry("create", "artifact", "fleeting/app:v1"),
            entry("create", "project", "fleeting"),
            entry("delete", "project", "fleeting"),
            entry("delete", "repository", "fleeting/app"),
        ]);
        assert_eq!(app.store().events().pending(berth_store::repo::events::AUDIT).await.unwrap(), 0);
    }
);

backend_test!(
    /// `GET /auditlog-exts/events` names the event types Berth records, as
    /// Harbor's AuditLogEventType list: every entry a push, a pull and a
    /// project's creation leave has its type there.
    async fn auditlog_event_types_name_what_is_recorded(app) {
        let res = app.get("/api/v2.0/auditlog-exts/events").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        app.create_user("eve", "Eve-Passw0rd").await;
        let res = app.get("/api/v2.0/auditlog-exts/events").basic("eve", "Eve-Passw0rd").send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let listed: Vec<String> = res
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                assert_eq!(e.as_object().unwrap().len(), 1, "{e}");
                e["event_type"].as_str().unwrap().to_string()
            })
            .collect();
        for expected in ["create_artifact", "delete_artifact", "pull_artifact", "create_project", "delete_project", "delete_repository", "delete_tag", "create_robot", "delete_robot", "create_member", "update_configuration"] {
            assert!(listed.iter().any(|t| t == expected), "{expected} in {listed:?}");
        }

        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "typed"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        push_image(&app, "typed/app", "v1", &[b"typed"]).await;
        let res = app.get("/v2/typed/app/manifests/v1").header("accept", OCI_MANIFEST).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let mut seen = Vec::new();
        for _ in 0..50 {
            let (_, body, _) = logs(&app, "/api/v2.0/auditlog-exts?page_size=100", None).await;
            seen = body
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    let kind = match e["resource_type"].as_str().unwrap() {
                        "project_member" => "member",
                        other => other,
                    };
                    format!("{}_{kind}", e["operation"].as_str().unwrap())
                })
                .collect();
            if seen.len() >= 3 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(seen.len() >= 3, "{seen:?}");
        for kind in &seen {
            assert!(listed.contains(kind), "{kind} is listed: {listed:?}");
        }
    }
);
