//! Purging the audit log (`/system/purgeaudit`): parameters checked, dry
//! runs that only count, real ones that delete by age and event type in
//! batches (a million entries while pushes go on), the history, logs, stops
//! and the schedule.

use axum::http::StatusCode;
use berth_store::repo::audit_logs::NewAuditLog;
use serde_json::{Value, json};

use crate::backend_test;
use crate::harbor::fixtures::{PASSWORD, id_from_location, user};
use crate::registry::push_image;
use crate::util::{Backend, TestApp, TestResponse};

const SCHEDULE: &str = "/api/v2.0/system/purgeaudit/schedule";

fn message(res: &TestResponse) -> String {
    res.json()["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn body(kind: &str, parameters: Value) -> Value {
    json!({"schedule": {"type": kind, "cron": ""}, "parameters": parameters})
}

/// Starts a purge now; its id.
async fn purge(app: &TestApp, parameters: Value) -> i64 {
    let res = app
        .post(SCHEDULE)
        .admin()
        .json(&body("Manual", parameters))
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    let id = id_from_location(&res);
    assert_eq!(
        res.header("location"),
        Some(format!("/api/v2.0/system/purgeaudit/{id}").as_str())
    );
    id
}

async fn work(app: &TestApp) -> usize {
    berth::workers::run_due(&app.state, "test").await.unwrap()
}

fn entry(operation: &str, resource_type: &str, days_ago: i64) -> NewAuditLog {
    NewAuditLog {
        project_id: None,
        operation: operation.into(),
        resource_type: resource_type.into(),
        resource: format!("{operation} {resource_type} {days_ago}"),
        username: "admin".into(),
        op_time: berth_domain::time::now_plus_seconds(-days_ago * 86_400),
    }
}

/// The entries left, as `operation resource_type days_ago`, sorted.
async fn left(app: &TestApp) -> Vec<String> {
    let res = app
        .get("/api/v2.0/audit-logs?page_size=100")
        .admin()
        .send()
        .await
        .json();
    let mut left: Vec<String> = res
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["resource"].as_str().unwrap().to_string())
        .collect();
    left.sort();
    left
}

backend_test!(
    async fn purges_delete_old_entries_of_the_types_asked_and_dry_runs_only_count(app) {
        for (parameters, expected) in [
            (json!({}), "schedule parameter cann't be empty"),
            (json!({"include_event_types": "pull_artifact"}), "audit_retention_hour should provide"),
            (json!({"audit_retention_hour": 2.5, "include_event_types": "pull_artifact"}), "audit_retention_hour should be integer format"),
            (json!({"audit_retention_hour": 240001, "include_event_types": "pull_artifact"}), "audit_retention_hour should be less than 240000"),
            (json!({"audit_retention_hour": 24}), "include_event_types should provide"),
        ] {
            let res = app.post(SCHEDULE).admin().json(&body("Manual", parameters.clone())).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{parameters}");
            assert_eq!(message(&res), expected);
        }
        let res = app.post(SCHEDULE).admin().json(&json!({"parameters": {"audit_retention_hour": 1}})).send().await;
        assert_eq!((res.status, message(&res)), (StatusCode::BAD_REQUEST, "schedule cann't be empty".to_string()));
        user(&app, "alice").await;
        let valid = json!({"audit_retention_hour": 24, "include_event_types": "pull_artifact", "dry_run": true});
        let res = app.post(SCHEDULE).basic("alice", PASSWORD).json(&body("Manual", valid.clone())).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.get("/api/v2.0/system/purgeaudit").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);

        app.state.audit_queue.flush(app.store()).await;
        app.execute_sql("DELETE FROM audit_logs").await;
        app.store().audit_logs().record(&[
            entry("pull", "artifact", 10),
            entry("create", "artifact", 10),
            entry("delete", "project", 10),
            entry("update", "configuration", 10),
            entry("create", "project_member", 10),
            entry("pull", "artifact", 0),
            entry("delete", "project", 0),
        ]).await.unwrap();

        let dry = purge(&app, json!({"audit_retention_hour": 24, "include_event_types": "pull_artifact,other", "dry_run": true})).await;
        assert_eq!(work(&app).await, 1);
        let log = app.get(&format!("/api/v2.0/system/purgeaudit/{dry}/log")).admin().send().await;
        assert!(log.header("content-type").unwrap().starts_with("text/plain"));
        assert!(log.text().contains("[DRYRUN]Purged 4 rows of audit logs"), "{}", log.text());
        assert_eq!(left(&app).await.len(), 7, "a dry run deletes nothing");

        let real = purge(&app, json!({"audit_retention_hour": 24, "include_event_types": "Pull_Artifact, update_member,create_member", "dry_run": false})).await;
        work(&app).await;
        assert!(app.get(&format!("/api/v2.0/system/purgeaudit/{real}/log")).admin().send().await.text().contains("Purged 2 rows of audit logs"));
        assert_eq!(
            left(&app).await,
            ["create artifact 10", "delete project 0", "delete project 10", "pull artifact 0", "update configuration 10"],
            "old pulls and member additions went; the rest stays"
        );
        purge(&app, json!({"audit_retention_hour": 24, "include_event_types": "other"})).await;
        work(&app).await;
        assert_eq!(left(&app).await, ["create artifact 10", "delete project 0", "pull artifact 0"], "`other` leaves the artifact events");

        let history = app.get("/api/v2.0/system/purgeaudit?page=1&page_size=2").admin().send().await;
        assert_eq!(history.header("x-total-count"), Some("3"));
        let newest = &history.json()[1];
        assert_eq!(newest["id"], real);
        assert_eq!((newest["job_name"].as_str(), newest["job_kind"].as_str(), newest["job_status"].as_str()), (Some("PURGE_AUDIT_LOG"), Some("MANUAL"), Some("Success")));
        let parameters: Value = serde_json::from_str(newest["job_parameters"].as_str().unwrap()).unwrap();
        assert_eq!(parameters, json!({"audit_retention_hour": 24, "dry_run": false, "include_event_types": "pull_artifact,update_member,create_member"}));
        assert_eq!(newest["schedule"]["type"], "Manual");
        let one = app.get(&format!("/api/v2.0/system/purgeaudit/{dry}")).admin().send().await.json();
        assert_eq!(one["id"], dry);
        // Stopping one that ended leaves it as it ended; an unknown one is a 404.
        let res = app.put(&format!("/api/v2.0/system/purgeaudit/{dry}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(app.get(&format!("/api/v2.0/system/purgeaudit/{dry}")).admin().send().await.json()["job_status"], "Success");
        let res = app.put("/api/v2.0/system/purgeaudit/99999").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get("/api/v2.0/system/purgeaudit/nope").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
    }
);

backend_test!(
    async fn the_purge_schedule_fires_once_per_tick(app) {
        let res = app.get(SCHEDULE).admin().send().await;
        assert_eq!((res.status, res.text()), (StatusCode::OK, String::new()));
        let parameters = json!({"audit_retention_hour": 168, "include_event_types": "create_artifact,delete_artifact,pull_artifact", "dry_run": true});
        let res = app.post(SCHEDULE).admin().json(&json!({"schedule": {"type": "Custom", "cron": "0 0 * *"}, "parameters": parameters})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(message(&res).starts_with("invalid cron string for scheduled log rotation purge: 0 0 * *"), "{}", res.text());
        let res = app.post(SCHEDULE).admin().json(&json!({"schedule": {"type": "Hourly", "cron": "0 0 * * * *"}, "parameters": parameters})).send().await;
        assert_eq!((res.status, res.header("location")), (StatusCode::CREATED, Some("/api/v2.0/system/purgeaudit/0")));
        let shown = app.get(SCHEDULE).admin().send().await.json();
        assert_eq!(shown["schedule"]["type"], "Hourly");
        assert_eq!(shown["job_kind"], "0 0 * * * *");
        let shown: Value = serde_json::from_str(shown["job_parameters"].as_str().unwrap()).unwrap();
        assert_eq!(shown, parameters);

        let every = json!({"schedule": {"type": "Custom", "cron": "0 * * * * *"}, "parameters": parameters});
        let res = app.put(SCHEDULE).admin().json(&every).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        app.make_schedules_due().await;
        let (one, two) = tokio::join!(berth::workers::run_due(&app.state, "one"), berth::workers::run_due(&app.state, "two"));
        assert_eq!(one.unwrap() + two.unwrap(), 1, "one tick, one purge");
        let history = app.get("/api/v2.0/system/purgeaudit").admin().send().await.json();
        assert_eq!(history[0]["job_kind"], "SCHEDULE");
        assert_eq!(history[0]["schedule"]["type"], "Schedule");
        let res = app.put(SCHEDULE).admin().json(&json!({"schedule": {"type": "None"}, "parameters": parameters})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(app.get(SCHEDULE).admin().send().await.text(), "");
    }
);

backend_test!(
    async fn a_million_entries_go_in_batches_while_pushes_go_on(app) {
        let generate = match app.backend {
            Backend::Postgres => "INSERT INTO audit_logs (operation, resource_type, resource, username, op_time) \
                SELECT 'pull', 'artifact', 'library/app:' || g, 'admin', '2020-01-01T00:00:00.000Z' \
                FROM generate_series(1, 1000000) g",
            Backend::Sqlite => "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000) \
                INSERT INTO audit_logs (operation, resource_type, resource, username, op_time) \
                SELECT 'pull', 'artifact', 'library/app:' || i, 'admin', '2020-01-01T00:00:00.000Z' FROM n",
        };
        app.execute_sql(generate).await;
        if app.backend == Backend::Postgres {
            // As autovacuum would have by the time a table grew this large
            // (without statistics the planner sorts every match per batch).
            app.execute_sql("ANALYZE audit_logs").await;
        }
        let id = purge(&app, json!({"audit_retention_hour": 24, "include_event_types": "pull_artifact"})).await;
        let pushes = async {
            for n in 0..20 {
                push_image(&app, "library/busy", &format!("v{n}"), &[format!("busy {n}").as_bytes()]).await;
            }
        };
        let (ran, ()) = tokio::join!(work(&app), pushes);
        assert_eq!(ran, 1);
        let log = app.get(&format!("/api/v2.0/system/purgeaudit/{id}/log")).admin().send().await.text();
        assert!(log.contains("Purged 1000000 rows of audit logs"), "{log}");
        let res = app.get("/api/v2.0/audit-logs?q=resource%3D~library/app:").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("0"));
        let res = app.get("/v2/library/busy/tags/list").admin().send().await;
        assert_eq!(res.json()["tags"].as_array().unwrap().len(), 20, "every push went through");
    }
);

backend_test!(
    /// A scheduled purge fires in read-only mode but deletes nothing: it
    /// is skipped, saying why.
    async fn a_scheduled_purge_deletes_nothing_in_read_only_mode(app) {
        let audit_logs = app.store().audit_logs();
        audit_logs.record(&[entry("create", "artifact", 30)]).await.unwrap();
        let parameters = json!({"audit_retention_hour": 24, "include_event_types": "create_artifact", "dry_run": false});
        let every = json!({"schedule": {"type": "Custom", "cron": "0 * * * * *"}, "parameters": parameters});
        let res = app.post(SCHEDULE).admin().json(&every).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"read_only": true})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        app.make_schedules_due().await;
        assert_eq!(work(&app).await, 1);
        let history = app.get("/api/v2.0/system/purgeaudit").admin().send().await.json();
        assert_eq!(history[0]["job_status"], "Success", "{history}");
        let log = app.get(&format!("/api/v2.0/system/purgeaudit/{}/log", history[0]["id"])).admin().send().await.text();
        assert!(log.contains("the registry is in read-only mode: no audit log was purged"), "{log}");
        let left = left(&app).await;
        assert!(left.contains(&"create artifact 30".to_string()), "nothing was purged: {left:?}");
    }
);

backend_test!(
    /// As Harbor: event types that name no event are kept (and match
    /// nothing), and an update that gives a cron without a type sets that
    /// cron (Harbor's own API tests send both).
    async fn harbors_loose_schedules_are_taken(app) {
        let loose = json!({"audit_retention_hour": 24, "include_event_types": "push,pull", "dry_run": false});
        let res = app
            .post(SCHEDULE)
            .admin()
            .json(&json!({"schedule": {"type": "Custom", "cron": "0 0 * * * *"}, "parameters": loose}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app
            .put(SCHEDULE)
            .admin()
            .json(&json!({"schedule": {"cron": "0 30 * * * *"}, "parameters": loose}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let shown = app.get(SCHEDULE).admin().send().await.json();
        assert_eq!(shown["schedule"]["cron"], "0 30 * * * *", "{shown}");
        let parameters: Value = serde_json::from_str(shown["job_parameters"].as_str().unwrap()).unwrap();
        assert_eq!(parameters["include_event_types"], "push,pull", "{parameters}");
        // No type and no cron is still refused.
        let res = app.put(SCHEDULE).admin().json(&json!({"schedule": {}, "parameters": loose})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
    }
);
