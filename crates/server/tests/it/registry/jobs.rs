//! Jobs run by `berth serve` itself: a job whose process is killed is taken
//! up by the next instance once its lease ends, and scheduled retention and
//! garbage collection prune skopeo-pushed images, leaving what stays
//! pullable and a store `berth fsck` finds nothing wrong with.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::clients::{build_layout, require, run, skopeo};
use crate::util::{
    ADMIN_PASSWORD, BERTH_BIN, Backend, ServedBerth, database_url, make_schedules_due,
};

/// `berth serve` over `data` and `database`, holding job tasks for 3 s.
async fn serve(data: &Path, database: &str) -> ServedBerth {
    ServedBerth::start(|port| {
        let mut command = Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(data)
            .env("DATABASE_URL", database)
            .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("EXTERNAL_URL", format!("http://127.0.0.1:{port}"))
            .env("BERTH_JOB_LEASE", "3s")
            .env_remove("BLOB_STORE");
        command
    })
    .await
}

async fn call(
    server: &ServedBerth,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .request(method, server.url(path))
        .basic_auth("admin", Some(ADMIN_PASSWORD));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let res = request.send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

async fn get_json(server: &ServedBerth, path: &str) -> Value {
    let (status, text) = call(server, reqwest::Method::GET, path, None).await;
    assert_eq!(status, 200, "{path}: {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// Waits (up to `limit`) until `done` holds of what `path` answers; that answer.
async fn wait_for(
    server: &ServedBerth,
    path: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let found = get_json(server, path).await;
        if done(&found) {
            return found;
        }
        assert!(Instant::now() < deadline, "{path} never got there: {found}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn sql(database: &str, statement: &str) -> i64 {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(database).await.unwrap();
    let count = if statement.starts_with("SELECT") {
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(statement))
            .fetch_one(&pool)
            .await
            .unwrap();
        n
    } else {
        let done = sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&pool)
            .await
            .unwrap();
        i64::try_from(done.rows_affected()).unwrap()
    };
    pool.close().await;
    count
}

async fn a_job_killed_with_its_process_is_taken_up_again(backend: Backend) {
    let work = tempfile::tempdir().unwrap();
    let database = database_url(backend, work.path()).await;
    let first = serve(&work.path().join("data"), &database).await;
    let generate = match backend {
        Backend::Postgres => {
            "INSERT INTO audit_logs (operation, resource_type, resource, username, op_time) \
            SELECT 'pull', 'artifact', 'library/app:' || g, 'admin', '2020-01-01T00:00:00.000Z' \
            FROM generate_series(1, 1000000) g"
        }
        Backend::Sqlite => {
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000) \
            INSERT INTO audit_logs (operation, resource_type, resource, username, op_time) \
            SELECT 'pull', 'artifact', 'library/app:' || i, 'admin', '2020-01-01T00:00:00.000Z' FROM n"
        }
    };
    sql(&database, generate).await;
    if backend == Backend::Postgres {
        sql(&database, "ANALYZE audit_logs").await;
    }
    let purge = json!({"schedule": {"type": "Manual"}, "parameters": {"audit_retention_hour": 24, "include_event_types": "pull_artifact"}});
    let (status, text) = call(
        &first,
        reqwest::Method::POST,
        "/api/v2.0/system/purgeaudit/schedule",
        Some(purge),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let history = wait_for(
        &first,
        "/api/v2.0/system/purgeaudit",
        Duration::from_secs(30),
        |h| h[0]["job_status"] == "Running",
    )
    .await;
    let id = history[0]["id"].as_i64().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    first.crash();
    let left = sql(
        &database,
        "SELECT COUNT(*) FROM audit_logs WHERE operation = 'pull'",
    )
    .await;
    assert!(left > 0, "the purge was still going when its process died");

    // The next instance takes the task once the lease (3 s) has ended, and finishes it.
    let second = serve(&work.path().join("data"), &database).await;
    let path = format!("/api/v2.0/system/purgeaudit/{id}");
    wait_for(&second, &path, Duration::from_secs(120), |e| {
        e["job_status"] == "Success"
    })
    .await;
    let (_, log) = call(&second, reqwest::Method::GET, &format!("{path}/log"), None).await;
    assert!(log.contains("attempt 2"), "{log}");
    assert!(
        log.contains(&format!("Purged {left} rows of audit logs")) || left < 1_000_000,
        "{log}"
    );
    assert_eq!(
        sql(
            &database,
            "SELECT COUNT(*) FROM audit_logs WHERE operation = 'pull'"
        )
        .await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_killed_with_its_process_is_taken_up_again_sqlite() {
    a_job_killed_with_its_process_is_taken_up_again(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_killed_with_its_process_is_taken_up_again_postgres() {
    a_job_killed_with_its_process_is_taken_up_again(Backend::Postgres).await;
}

async fn scheduled_retention_and_gc_prune_pushed_images(backend: Backend) {
    require("skopeo");
    let work = tempfile::tempdir().unwrap();
    let layout = build_layout(work.path());
    let data = work.path().join("data");
    let database = database_url(backend, work.path()).await;
    let server = serve(&data, &database).await;
    let creds = format!("admin:{ADMIN_PASSWORD}");
    let remote = |reference: &str| format!("docker://{}/library/{reference}", server.host());
    let push = |from: &str, to: &str| {
        run(skopeo()
            .args([
                "copy",
                "--all",
                "--dest-tls-verify=false",
                "--dest-creds",
                &creds,
            ])
            .arg(format!("oci:{}:{from}", layout.dir.display()))
            .arg(remote(to)));
    };
    // Two artifacts in `app` (the older pushed first; the layers are the
    // same, the configs differ), and `other`, which no rule covers.
    push("v3", "app:old");
    tokio::time::sleep(Duration::from_millis(20)).await;
    push("arm", "app:new");
    push("arm", "other:latest");

    let policy = json!({
        "algorithm": "or",
        "rules": [{"action": "retain", "template": "latestPushedK", "params": {"latestPushedK": 1},
            "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": "**"}],
            "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": "app"}]}}],
        "trigger": {"kind": "Schedule", "settings": {"cron": "0 * * * * *"}},
        "scope": {"level": "project", "ref": 1},
    });
    let (status, text) = call(
        &server,
        reqwest::Method::POST,
        "/api/v2.0/retentions",
        Some(policy.clone()),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let id = get_json(&server, "/api/v2.0/projects/1/metadatas").await["retention_id"]
        .as_str()
        .unwrap()
        .to_string();
    let every_minute = json!({"schedule": {"type": "Custom", "cron": "0 * * * * *"}});
    let (status, text) = call(
        &server,
        reqwest::Method::POST,
        "/api/v2.0/system/gc/schedule",
        Some(every_minute),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    make_schedules_due(&database).await;

    // The schedule fires, the run deletes the older artifact.
    let executions = format!("/api/v2.0/retentions/{id}/executions");
    wait_for(&server, &executions, Duration::from_secs(60), |list| {
        list.as_array().is_some_and(|l| {
            l.iter()
                .any(|e| e["status"] == "Success" && e["trigger"] == "Schedule")
        })
    })
    .await;
    let tags = get_json(&server, "/v2/library/app/tags/list").await;
    assert_eq!(tags["tags"], json!(["new"]), "{tags}");
    // A collection after it frees the older artifact's own blobs.
    make_schedules_due(&database).await;
    wait_for(
        &server,
        "/api/v2.0/system/gc",
        Duration::from_secs(60),
        |runs| {
            runs.as_array().is_some_and(|runs| {
                runs.iter().any(|r| {
                    r["job_status"] == "Success"
                        && serde_json::from_str::<Value>(
                            r["job_parameters"].as_str().unwrap_or("{}"),
                        )
                        .is_ok_and(|stats| stats["purged_blobs"].as_i64().unwrap_or(0) > 0)
                })
            })
        },
    )
    .await;
    let mut manual = policy;
    manual["trigger"]["settings"]["cron"] = json!("");
    let (status, _) = call(
        &server,
        reqwest::Method::PUT,
        &format!("/api/v2.0/retentions/{id}"),
        Some(manual),
    )
    .await;
    assert_eq!(status, 200);
    let none = json!({"schedule": {"type": "None"}});
    let (status, _) = call(
        &server,
        reqwest::Method::PUT,
        "/api/v2.0/system/gc/schedule",
        Some(none),
    )
    .await;
    assert_eq!(status, 200);

    // What stays pulls, with every blob; what went does not.
    for (reference, to) in [("app:new", "new"), ("other:latest", "other")] {
        let out = work.path().join(format!("pulled-{to}"));
        run(skopeo()
            .args([
                "copy",
                "--all",
                "--src-tls-verify=false",
                "--src-creds",
                &creds,
            ])
            .arg(remote(reference))
            .arg(format!("oci:{}:{to}", out.display())));
    }
    let gone = skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--creds", &creds])
        .arg(format!(
            "docker://{}/library/app@{}",
            server.host(),
            layout.v3
        ))
        .output()
        .unwrap();
    assert!(!gone.status.success(), "the older artifact is gone");

    // Nothing is out of place.
    server.stop();
    let fsck = Command::new(BERTH_BIN)
        .arg("--data-dir")
        .arg(&data)
        .env("DATABASE_URL", &database)
        .env_remove("BLOB_STORE")
        .arg("fsck")
        .output()
        .unwrap();
    assert_eq!(
        fsck.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_retention_and_gc_prune_pushed_images_sqlite() {
    scheduled_retention_and_gc_prune_pushed_images(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_retention_and_gc_prune_pushed_images_postgres() {
    scheduled_retention_and_gc_prune_pushed_images(Backend::Postgres).await;
}
