//! Tag retention (`/retentions`): policies checked and bound to their
//! project, runs that delete what no rule keeps (and dry runs that only say
//! so), scheduled runs firing once, stops, and the proxy-cache default.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::backend_test;
use crate::harbor::fixtures::{PASSWORD, id_from_location, member, project, user};
use crate::registry::push_image;
use crate::util::{DockerRegistry, PeerOptions, TestApp, TestResponse};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn message(res: &TestResponse) -> String {
    res.json()["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn rule(template: &str, n: Option<i64>, tags: &str, repositories: &str) -> Value {
    let mut params = json!({});
    if let Some(n) = n {
        params[template] = json!(n);
    }
    json!({
        "disabled": false, "action": "retain", "template": template, "params": params,
        "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": tags, "extras": "{\"untagged\":true}"}],
        "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": repositories}]},
    })
}

fn policy(project_id: i64, rules: Value, cron: &str) -> Value {
    json!({
        "algorithm": "or", "rules": rules,
        "trigger": {"kind": "Schedule", "settings": {"cron": cron}, "references": {}},
        "scope": {"level": "project", "ref": project_id},
    })
}

async fn create(app: &TestApp, body: &Value) -> i64 {
    let res = app
        .post("/api/v2.0/retentions")
        .admin()
        .json(body)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    id_from_location(&res)
}

/// Starts a run of policy `id`; its execution id.
async fn start_run(app: &TestApp, id: i64, dry_run: bool) -> i64 {
    let res = app
        .post(&format!("/api/v2.0/retentions/{id}/executions"))
        .admin()
        .json(&json!({"dry_run": dry_run}))
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    let location = res.header("location").unwrap().to_string();
    assert!(
        location.starts_with(&format!("/api/v2.0/retentions/{id}/executions/")),
        "{location}"
    );
    id_from_location(&res)
}

/// Runs the job tasks waiting, as an instance's workers do.
async fn work(app: &TestApp) -> usize {
    berth::workers::run_due(&app.state, "test").await.unwrap()
}

async fn pullable(app: &TestApp, reference: &str) -> bool {
    let res = app
        .get(&format!("/v2/library/app/manifests/{reference}"))
        .admin()
        .header("accept", OCI_MANIFEST)
        .send()
        .await;
    res.status == StatusCode::OK
}

backend_test!(
    async fn policies_are_checked_and_bound_to_their_project(app) {
        let res = app.get("/api/v2.0/retentions/metadatas").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let doc = app.get("/api/v2.0/retentions/metadatas").admin().send().await.json();
        assert_eq!(doc["templates"].as_array().unwrap().len(), 5, "{doc}");
        assert_eq!(doc["scope_selectors"][0]["decorations"], json!(["repoMatches", "repoExcludes"]));

        let good = rule("latestPushedK", Some(3), "**", "**");
        for (body, status, expected) in [
            (policy(1, json!([rule("nothing", None, "**", "**")]), ""), 400, "rule evaluator nothing is not registered"),
            (policy(1, json!([rule("latestPushedK", None, "**", "**")]), ""), 400, "missing required parameter latestPushedK"),
            (policy(1, json!([good.clone(), good.clone()]), ""), 409, "rule 1 is conflict with rule 0"),
            (policy(1, json!(vec![good.clone(); 16]), ""), 400, "only 15 rules are allowed at most"),
            (policy(1, json!([good.clone()]), "0 0 * *"), 400, "invalid cron string for scheduled tag retention: 0 0 * *"),
            (policy(4242, json!([good.clone()]), ""), 400, "invalid Project id 4242"),
            (json!({"rules": [good.clone()], "scope": {"level": "system", "ref": 0}}), 400, "invalid Project id 0"),
        ] {
            let res = app.post("/api/v2.0/retentions").admin().json(&body).send().await;
            assert_eq!(res.status.as_u16(), status, "{body}: {}", res.text());
            assert!(message(&res).contains(expected), "{}", message(&res));
        }
        let metadata = app.get("/api/v2.0/projects/1/metadatas").admin().send().await.json();
        assert!(metadata.get("retention_id").is_none(), "nothing half-made: {metadata}");

        let id = create(&app, &policy(1, json!([good.clone()]), "0 0 3 * * *")).await;
        let metadata = app.get("/api/v2.0/projects/1/metadatas").admin().send().await.json();
        assert_eq!(metadata["retention_id"], id.to_string());
        let res = app.post("/api/v2.0/retentions").admin().json(&policy(1, json!([good.clone()]), "")).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(message(&res).contains("already has retention policy"), "{}", res.text());

        let shown = app.get(&format!("/api/v2.0/retentions/{id}")).admin().send().await.json();
        assert_eq!(shown["id"], id);
        assert_eq!(shown["scope"], json!({"level": "project", "ref": 1}));
        assert_eq!(shown["rules"][0]["params"]["latestPushedK"], 3);
        assert!(shown["trigger"]["settings"]["next_scheduled_time"].as_str().unwrap().ends_with("T03:00:00.000Z"), "{shown}");
        let schedules = app.store().jobs().schedules().await.unwrap();
        assert_eq!(schedules.iter().filter(|s| s.vendor_type == "RETENTION" && s.vendor_id == id).count(), 1);

        // Updated: no cron, no schedule.
        let mut changed = policy(1, json!([rule("always", None, "v*", "**")]), "");
        changed["id"] = json!(id);
        let res = app.put(&format!("/api/v2.0/retentions/{id}")).admin().json(&changed).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let shown = app.get(&format!("/api/v2.0/retentions/{id}")).admin().send().await.json();
        assert_eq!(shown["rules"][0]["template"], "always");
        assert!(shown["trigger"]["settings"].get("next_scheduled_time").is_none());
        assert!(app.store().jobs().schedule("RETENTION", id).await.unwrap().is_none());

        // Who may: project administrators, maintainers and developers; not guests.
        let other = project(&app, None, "other", false).await;
        for (name, role, allowed) in [("dev", 2, true), ("guest", 3, false)] {
            let uid = user(&app, name).await;
            member(&app, 1, uid, role).await;
            let res = app.get(&format!("/api/v2.0/retentions/{id}")).basic(name, PASSWORD).send().await;
            assert_eq!(res.status == StatusCode::OK, allowed, "{name}: {}", res.text());
            let res = app.post("/api/v2.0/retentions").basic(name, PASSWORD).json(&policy(other, json!([good.clone()]), "")).send().await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "{name} is not a member of the other project");
        }
        let res = app.get(&format!("/api/v2.0/retentions/{id}")).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);

        let res = app.delete(&format!("/api/v2.0/retentions/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let metadata = app.get("/api/v2.0/projects/1/metadatas").admin().send().await.json();
        assert!(metadata.get("retention_id").is_none(), "{metadata}");
        let res = app.get(&format!("/api/v2.0/retentions/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        // The project may have a policy again.
        create(&app, &policy(1, json!([good]), "")).await;
    }
);

backend_test!(
    async fn a_run_deletes_what_no_rule_keeps_and_a_dry_run_only_says_so(app) {
        // v1 .. v5 pushed in turn; `other` is no rule's business.
        let mut digests = Vec::new();
        for n in 1..=5 {
            let layer = format!("layer {n}");
            let (_, digest) = push_image(&app, "library/app", &format!("v{n}"), &[layer.as_bytes()]).await;
            digests.push(digest);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        push_image(&app, "library/other", "v1", &[b"other"]).await;
        // v1 is immutable.
        let res = app.post("/api/v2.0/projects/library/immutabletagrules").admin().json(&json!({
            "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": "v1"}],
            "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": "**"}]},
        })).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let used = app.store().projects().quota(1).await.unwrap().unwrap().1;
        let id = create(&app, &policy(1, json!([rule("latestPushedK", Some(2), "**", "app")]), "")).await;

        let dry = start_run(&app, id, true).await;
        assert!(work(&app).await >= 2, "the plan, then the repository");
        let executions = app.get(&format!("/api/v2.0/retentions/{id}/executions")).admin().send().await;
        assert_eq!(executions.header("x-total-count"), Some("1"));
        let execution = &executions.json()[0];
        assert_eq!(
            (execution["id"].as_i64(), execution["status"].as_str(), execution["trigger"].as_str(), execution["dry_run"].as_bool()),
            (Some(dry), Some("Success"), Some("MANUAL"), Some(true)),
            "{execution}"
        );
        let tasks = app.get(&format!("/api/v2.0/retentions/{id}/executions/{dry}/tasks")).admin().send().await;
        assert_eq!(tasks.header("x-total-count"), Some("1"), "one repository is covered: {}", tasks.text());
        let task = &tasks.json()[0];
        assert_eq!(task["repository"], "app");
        assert_eq!((task["total"].as_i64(), task["retained"].as_i64()), (Some(5), Some(3)), "{task}");
        assert_eq!((task["status"].as_str(), task["status_code"].as_i64()), (Some("Success"), Some(3)));
        let log = app
            .get(&format!("/api/v2.0/retentions/{id}/executions/{dry}/tasks/{}", task["id"]))
            .admin()
            .send()
            .await;
        assert_eq!(log.status, StatusCode::OK);
        assert!(log.header("content-type").unwrap().starts_with("text/plain"));
        let log = log.text();
        assert!(log.contains("Dry Run: true"), "{log}");
        assert!(log.contains("| Digest | Tag | Kind | Labels | PushedTime | PulledTime | CreatedTime | Retention |"), "{log}");
        for (digest, verdict) in digests.iter().zip(["IMMUTABLE", "DEL", "DEL", "RETAIN", "RETAIN"]) {
            let row = log.lines().find(|l| l.contains(digest.as_str())).unwrap_or_else(|| panic!("{digest} in {log}"));
            assert!(row.ends_with(&format!("| {verdict} |")), "{row}");
        }
        for n in 1..=5 {
            assert!(pullable(&app, &format!("v{n}")).await, "a dry run deletes nothing");
        }

        let real = start_run(&app, id, false).await;
        work(&app).await;
        let tasks = app.get(&format!("/api/v2.0/retentions/{id}/executions/{real}/tasks")).admin().send().await.json();
        assert_eq!((tasks[0]["total"].as_i64(), tasks[0]["retained"].as_i64()), (Some(5), Some(3)), "{tasks}");
        let kept: Vec<bool> = futures_util::future::join_all((1..=5).map(|n| {
            let app = &app;
            async move { pullable(app, &format!("v{n}")).await }
        }))
        .await;
        assert_eq!(kept, [true, false, false, true, true], "exactly what the dry run listed");
        let res = app.get(&format!("/v2/library/app/manifests/{}", digests[1])).admin().header("accept", OCI_MANIFEST).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "the artifact went, not only its tag");
        assert!(app.get("/v2/library/other/manifests/v1").admin().header("accept", OCI_MANIFEST).send().await.status == StatusCode::OK);
        assert!(app.store().projects().quota(1).await.unwrap().unwrap().1 < used, "the quota usage drops");
        // Deletions are audited as the operator's.
        app.state.audit_queue.flush(app.store()).await;
        let logs = app.get("/api/v2.0/audit-logs?q=operation%3Ddelete").admin().send().await.json();
        let deleted: Vec<&str> = logs.as_array().unwrap().iter().filter_map(|l| l["resource"].as_str()).collect();
        assert!(deleted.iter().any(|r| r.contains(digests[1].as_str())), "{logs}");

        // The executions list pages, newest first.
        let res = app.get(&format!("/api/v2.0/retentions/{id}/executions?page=1&page_size=1")).admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("2"));
        assert_eq!(res.json()[0]["id"], real);
        assert!(res.header("link").unwrap().contains("rel=\"next\""));
        // Another policy's execution is not this one's.
        let res = app.get(&format!("/api/v2.0/retentions/{id}/executions/{}/tasks", real + 1000)).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn a_scheduled_run_fires_once_per_tick_and_a_stopped_run_deletes_nothing(app) {
        for n in 1..=3 {
            push_image(&app, &format!("library/r{n}"), "v1", &[format!("r{n}").as_bytes()]).await;
        }
        let id = create(&app, &policy(1, json!([rule("latestPushedK", Some(0), "**", "**")]), "0 * * * * *")).await;
        app.make_schedules_due().await;
        let jobs = app.store().jobs();
        let fired = tokio::join!(
            jobs.fire_due(time::OffsetDateTime::now_utc(), berth::service::retention::tasks_of),
            jobs.fire_due(time::OffsetDateTime::now_utc(), berth::service::retention::tasks_of),
        );
        assert_eq!(fired.0.unwrap().len() + fired.1.unwrap().len(), 1, "two instances, one tick, one run");
        // No more schedule: the next run is a manual one, stopped before it runs.
        let mut manual = policy(1, json!([rule("latestPushedK", Some(0), "**", "**")]), "");
        manual["id"] = json!(id);
        let res = app.put(&format!("/api/v2.0/retentions/{id}")).admin().json(&manual).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let executions = app.get(&format!("/api/v2.0/retentions/{id}/executions")).admin().send().await.json();
        let scheduled = executions[0]["id"].as_i64().unwrap();
        assert_eq!(executions[0]["trigger"], "Schedule");
        let res = app.request(Method::PATCH, &format!("/api/v2.0/retentions/{id}/executions/{scheduled}")).admin().json(&json!({"action": "pause"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(message(&res), "action should be 'stop'");
        let res = app.request(Method::PATCH, &format!("/api/v2.0/retentions/{id}/executions/{scheduled}")).admin().json(&json!({"action": "stop"})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(work(&app).await, 0, "a stopped run has nothing left to do");
        let executions = app.get(&format!("/api/v2.0/retentions/{id}/executions")).admin().send().await.json();
        assert_eq!(executions[0]["status"], "Stopped", "{executions}");
        for n in 1..=3 {
            let res = app.get(&format!("/v2/library/r{n}/manifests/v1")).admin().header("accept", OCI_MANIFEST).send().await;
            assert_eq!(res.status, StatusCode::OK);
        }
        // A run planned, then stopped between repositories: what ran stays done, the rest does not run.
        let eid = start_run(&app, id, false).await;
        let plan = app.store().jobs().claim("test", &["RETENTION"], Duration::from_secs(60)).await.unwrap().unwrap();
        let found = berth::service::retention::run_task(&app.state, &plan).await.unwrap();
        assert_eq!(found["repositories"], 3);
        app.store().jobs().finish(plan.id, "test", &berth_store::repo::jobs::Outcome::Success(found)).await.unwrap();
        let first = app.store().jobs().claim("test", &["RETENTION"], Duration::from_secs(60)).await.unwrap().unwrap();
        let found = berth::service::retention::run_task(&app.state, &first).await.unwrap();
        app.store().jobs().finish(first.id, "test", &berth_store::repo::jobs::Outcome::Success(found)).await.unwrap();
        let res = app.request(Method::PATCH, &format!("/api/v2.0/retentions/{id}/executions/{eid}")).admin().json(&json!({"action": "stop"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(work(&app).await, 0);
        let tasks = app.get(&format!("/api/v2.0/retentions/{id}/executions/{eid}/tasks")).admin().send().await.json();
        let statuses: Vec<&str> = tasks.as_array().unwrap().iter().map(|t| t["status"].as_str().unwrap()).collect();
        assert_eq!(statuses, ["Success", "Stopped", "Stopped"], "{tasks}");
        let left = futures_util::future::join_all((1..=3).map(|n| {
            let app = &app;
            async move {
                app.get(&format!("/v2/library/r{n}/manifests/v1")).admin().header("accept", OCI_MANIFEST).send().await.status == StatusCode::OK
            }
        }))
        .await;
        assert_eq!(left, [false, true, true], "only the first repository's run deleted");
        // A policy with a run going on is not deleted.
        let eid = start_run(&app, id, true).await;
        let res = app.delete(&format!("/api/v2.0/retentions/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert!(message(&res).contains(&format!("the execution {eid} has tasks that aren't in final status")));
    }
);

backend_test!(
    async fn a_proxy_cache_project_keeps_a_week_of_pulls_by_default(app) {
        let peer = DockerRegistry::start(PeerOptions::default()).await;
        let res = app.post("/api/v2.0/registries").admin()
            .json(&json!({"name": "hub", "url": peer.url(), "type": "docker-registry"}))
            .send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let registry = id_from_location(&res);
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "cache", "registry_id": registry})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let project = id_from_location(&res);
        let metadata = app.get(&format!("/api/v2.0/projects/{project}/metadatas")).admin().send().await.json();
        let id = metadata["retention_id"].as_str().expect("a retention policy").to_string();
        let shown = app.get(&format!("/api/v2.0/retentions/{id}")).admin().send().await.json();
        assert_eq!(shown["rules"][0]["template"], "nDaysSinceLastPull");
        assert_eq!(shown["rules"][0]["params"]["nDaysSinceLastPull"], 7);
        assert_eq!(shown["trigger"]["settings"]["cron"], "0 0 0 * * *");
        assert_eq!(shown["scope"]["ref"], project);
        // The project goes with its policy and schedule.
        let res = app.delete(&format!("/api/v2.0/projects/{project}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.get(&format!("/api/v2.0/retentions/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert!(app.store().jobs().schedules().await.unwrap().iter().all(|s| s.vendor_type != "RETENTION"));
    }
);
