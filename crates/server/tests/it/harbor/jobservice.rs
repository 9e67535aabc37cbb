//! The job service dashboard (`/jobservice`, `/schedules`): instances as
//! worker pools, queues paused, resumed and stopped, jobs stopped and their
//! logs, schedules listed and paused altogether.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backend_test;
use crate::harbor::fixtures::{PASSWORD, id_from_location, user};
use crate::util::{TestApp, TestResponse};

fn message(res: &TestResponse) -> String {
    res.json()["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn queue(app: &TestApp, job_type: &str) -> Value {
    let queues = app
        .get("/api/v2.0/jobservice/queues")
        .admin()
        .send()
        .await
        .json();
    queues
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["job_type"] == job_type)
        .cloned()
        .unwrap_or(Value::Null)
}

async fn act(app: &TestApp, job_type: &str, action: &str) -> TestResponse {
    app.put(&format!("/api/v2.0/jobservice/queues/{job_type}"))
        .admin()
        .json(&json!({"action": action}))
        .send()
        .await
}

/// Starts a dry-run audit purge; its id.
async fn purge(app: &TestApp) -> i64 {
    let body = json!({"schedule": {"type": "Manual"}, "parameters": {"audit_retention_hour": 1, "include_event_types": "pull_artifact", "dry_run": true}});
    let res = app
        .post("/api/v2.0/system/purgeaudit/schedule")
        .admin()
        .json(&body)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    id_from_location(&res)
}

async fn work(app: &TestApp) -> usize {
    berth::workers::run_due(&app.state, "test").await.unwrap()
}

backend_test!(
    async fn the_dashboard_shows_pools_and_queues_and_stops_and_pauses_them(app) {
        user(&app, "alice").await;
        for path in ["/api/v2.0/jobservice/pools", "/api/v2.0/jobservice/queues", "/api/v2.0/schedules"] {
            assert_eq!(app.get(path).send().await.status, StatusCode::UNAUTHORIZED, "{path}");
            assert_eq!(app.get(path).basic("alice", PASSWORD).send().await.status, StatusCode::FORBIDDEN, "{path}");
        }
        app.store().jobs().heartbeat("node-a:42", "2026-01-01T00:00:00.000Z", "webhook=2,gc=1").await.unwrap();
        let pools = app.get("/api/v2.0/jobservice/pools").admin().send().await.json();
        assert_eq!(pools, json!([{"pid": 42, "worker_pool_id": "node-a:42", "start_at": "2026-01-01T00:00:00.000Z",
            "heartbeat_at": pools[0]["heartbeat_at"], "concurrency": 3, "host": "node-a"}]));
        let workers = app.get("/api/v2.0/jobservice/pools/all/workers").admin().send().await.json();
        assert_eq!(workers, json!([
            {"id": "node-a:42/webhook/0", "pool_id": "node-a:42"},
            {"id": "node-a:42/webhook/1", "pool_id": "node-a:42"},
            {"id": "node-a:42/gc/0", "pool_id": "node-a:42"},
        ]), "idle: a worker per place of each lane");

        // A paused queue keeps its tasks waiting; resumed, they run.
        let first = purge(&app).await;
        let waiting = queue(&app, "PURGE_AUDIT_LOG").await;
        assert_eq!((waiting["count"].as_i64(), waiting["paused"].as_bool()), (Some(1), Some(false)), "{waiting}");
        assert_eq!(act(&app, "purge_audit_log", "pause").await.status, StatusCode::OK);
        assert_eq!(queue(&app, "PURGE_AUDIT_LOG").await["paused"], true);
        assert_eq!(work(&app).await, 0, "paused");
        assert_eq!(act(&app, "PURGE_AUDIT_LOG", "resume").await.status, StatusCode::OK);
        assert_eq!(work(&app).await, 1);
        let job = app.get(&format!("/api/v2.0/system/purgeaudit/{first}")).admin().send().await.json();
        assert_eq!(job["job_status"], "Success");

        // Stopping a queue stops what waits in it; a job is stopped by its id.
        let second = purge(&app).await;
        assert_eq!(act(&app, "all", "stop").await.status, StatusCode::OK);
        let job = app.get(&format!("/api/v2.0/system/purgeaudit/{second}")).admin().send().await.json();
        assert_eq!(job["job_status"], "Stopped", "{job}");
        let third = purge(&app).await;
        let task = app.store().jobs().tasks(third).await.unwrap()[0].id;
        let res = app.put(&format!("/api/v2.0/jobservice/jobs/{task}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let job = app.get(&format!("/api/v2.0/system/purgeaudit/{third}")).admin().send().await.json();
        assert_eq!(job["job_status"], "Stopped");
        // As Harbor: stopping a job that is not running (ended, unknown, or
        // named by Harbor's 24-hex job id) stops nothing and is no error.
        for id in ["999999", "5e6e2b6e5f1c4a0012d1b3f9"] {
            let res = app.put(&format!("/api/v2.0/jobservice/jobs/{id}")).admin().send().await;
            assert_eq!(res.status, StatusCode::OK, "{id}: {}", res.text());
        }
        // Harbor's other job types have their (empty) queues, and take actions.
        for job_type in ["IMAGE_SCAN", "P2P_PREHEAT", "SYSTEM_ARTIFACT_CLEANUP", "SCHEDULER"] {
            let shown = queue(&app, job_type).await;
            assert_eq!(shown["count"], 0, "{job_type}: {shown}");
        }
        assert_eq!(act(&app, "IMAGE_SCAN", "pause").await.status, StatusCode::OK);
        let first_task = app.store().jobs().tasks(first).await.unwrap()[0].id;
        let log = app.get(&format!("/api/v2.0/jobservice/jobs/{first_task}/log")).admin().send().await;
        assert!(log.header("content-type").unwrap().starts_with("text/plain"));
        assert!(log.text().contains("[DRYRUN]Purged"), "{}", log.text());

        let res = act(&app, "all", "bogus").await;
        assert_eq!((res.status, message(&res)), (StatusCode::BAD_REQUEST, "the action is not supported".to_string()));
        assert_eq!(act(&app, "NO_SUCH_JOB", "pause").await.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn schedules_are_listed_and_paused_altogether(app) {
        let res = app.post("/api/v2.0/system/gc/schedule").admin().json(&json!({"schedule": {"type": "Custom", "cron": "0 * * * * *"}})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get("/api/v2.0/schedules").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));
        let listed = &res.json()[0];
        assert_eq!((listed["vendor_type"].as_str(), listed["vendor_id"].as_i64(), listed["cron"].as_str()),
            (Some("GARBAGE_COLLECTION"), Some(-1), Some("0 * * * * *")));

        user(&app, "alice").await;
        let res = app.get("/api/v2.0/schedules/all/paused").basic("alice", PASSWORD).send().await;
        assert_eq!(res.json(), json!({"paused": false}), "any signed-in caller may ask");
        let res = app.get("/api/v2.0/schedules/gc/paused").admin().send().await;
        assert_eq!((res.status, message(&res)), (StatusCode::BAD_REQUEST, "job_type can only be 'all'".to_string()));

        assert_eq!(act(&app, "scheduler", "pause").await.status, StatusCode::OK);
        assert_eq!(app.get("/api/v2.0/schedules/all/paused").admin().send().await.json(), json!({"paused": true}));
        app.make_schedules_due().await;
        assert_eq!(work(&app).await, 0, "no schedule fires while paused");
        assert!(app.get("/api/v2.0/system/gc").admin().send().await.json().as_array().unwrap().is_empty());
        assert_eq!(act(&app, "scheduler", "stop").await.status, StatusCode::BAD_REQUEST);
        assert_eq!(act(&app, "scheduler", "resume").await.status, StatusCode::OK);
        app.make_schedules_due().await;
        assert_eq!(work(&app).await, 1, "fires again");
    }
);
