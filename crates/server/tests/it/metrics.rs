//! `GET /metrics`: counters move with the requests they count, Harbor's
//! exporter figures match the store, and the label sets stay bounded.

use std::collections::{BTreeMap, BTreeSet};

use axum::http::StatusCode;
use berth::metrics::MetricsSettings;
use serde_json::json;

use crate::backend_test;
use crate::harbor::fixtures;
use crate::registry::{digest_of, push_image};
use crate::util::{ADMIN_PASSWORD, TestApp};
use tower::ServiceExt;

/// One sample of a scrape: its name, labels and value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the text format (0.0.4): every non-comment line is one sample.
fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("`series value`");
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("a number: {line}"));
            let (name, labels) = match series.split_once('{') {
                None => (series, BTreeMap::new()),
                Some((name, rest)) => {
                    let body = rest.strip_suffix('}').expect("closing brace");
                    let labels = body
                        .split("\",")
                        .filter(|pair| !pair.is_empty())
                        .map(|pair| {
                            let (key, value) = pair.split_once("=\"").expect("key=\"value\"");
                            (key.to_string(), value.trim_end_matches('"').to_string())
                        })
                        .collect();
                    (name, labels)
                }
            };
            Sample {
                name: name.to_string(),
                labels,
                value,
            }
        })
        .collect()
}

/// The sum of the samples named `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}

/// An anonymous scrape of `app` (open `/metrics`).
async fn scrape(app: &TestApp) -> Vec<Sample> {
    scrape_text(app.get("/metrics").send().await)
}

/// A scrape as a system administrator, who also sees the per-project series.
async fn scrape_as_admin(app: &TestApp) -> Vec<Sample> {
    scrape_text(app.get("/metrics").admin().send().await)
}

fn scrape_text(res: crate::util::TestResponse) -> Vec<Sample> {
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    assert_eq!(
        res.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    parse(&res.text())
}

const REQUESTS: &str = "harbor_core_http_request_total";

backend_test!(
    async fn counters_move_with_a_push_a_pull_and_a_failed_sign_in(app) {
        let before = scrape(&app).await;
        assert_eq!(value(&before, REQUESTS, &[("operation", "put_manifest")]), 0.0);

        let layer = b"metrics layer bytes".as_slice();
        push_image(&app, "library/app", "v1", &[layer]).await;
        let pulled = app
            .get("/v2/library/app/manifests/v1")
            .admin()
            .header("accept", "application/vnd.oci.image.manifest.v1+json")
            .send()
            .await;
        assert_eq!(pulled.status, StatusCode::OK);
        let blob = app
            .get(&format!("/v2/library/app/blobs/{}", digest_of(layer)))
            .admin()
            .send()
            .await;
        assert_eq!(blob.status, StatusCode::OK);
        let failed = app
            .get("/api/v2.0/users/current")
            .basic("admin", "not-the-password")
            .send()
            .await;
        assert_eq!(failed.status, StatusCode::UNAUTHORIZED);
        let failed_rest = app
            .post("/auth")
            .basic("admin@example.com", "not-the-password")
            .send()
            .await;
        assert_eq!(failed_rest.status, StatusCode::UNAUTHORIZED);
        app.state.registry.flush_pulls(&app.state.store).await;
        // The database figures of the first scrape are kept for a few seconds.
        app.state.metrics.forget_cached();

        let after = scrape_as_admin(&app).await;
        let count = |method: &str, code: &str, operation: &str| {
            value(
                &after,
                REQUESTS,
                &[("method", method), ("code", code), ("operation", operation)],
            )
        };
        assert_eq!(count("PUT", "201", "put_manifest"), 1.0);
        assert_eq!(count("POST", "201", "post_blob_upload"), 2.0);
        assert_eq!(count("GET", "200", "get_manifest"), 1.0);
        assert_eq!(count("GET", "200", "get_blob"), 1.0);
        assert_eq!(count("GET", "401", "getCurrentUserInfo"), 1.0);
        assert_eq!(count("POST", "401", "authenticate"), 1.0);
        assert_eq!(
            value(
                &after,
                "registry_http_request_duration_seconds_count",
                &[("operation", "put_manifest")]
            ),
            1.0
        );
        assert_eq!(
            value(
                &after,
                "harbor_core_http_request_duration_seconds_count",
                &[("operation", "getCurrentUserInfo")]
            ),
            1.0
        );
        // The API's own requests are not registry requests.
        assert_eq!(
            value(
                &after,
                "registry_http_request_duration_seconds_count",
                &[("operation", "getCurrentUserInfo")]
            ),
            0.0
        );
        assert!(value(&after, "berth_blob_bytes_in_total", &[]) >= layer.len() as f64);
        assert_eq!(
            value(&after, "berth_blob_bytes_out_total", &[]),
            layer.len() as f64
        );

        // Harbor's exporter figures, read from the store.
        assert_eq!(value(&after, "harbor_project_total", &[("public", "true")]), 1.0);
        assert_eq!(
            value(
                &after,
                "harbor_project_repo_total",
                &[("project_name", "library"), ("public", "true")]
            ),
            1.0
        );
        assert_eq!(
            value(&after, "harbor_artifact_pulled", &[("project_name", "library")]),
            1.0
        );
        assert!(
            value(
                &after,
                "harbor_project_quota_usage_byte",
                &[("project_name", "library")]
            ) > 0.0
        );
        assert_eq!(
            value(&after, "harbor_project_quota_byte", &[("project_name", "library")]),
            -1.0
        );
        assert_eq!(value(&after, "harbor_health", &[]), 1.0);
        assert_eq!(value(&after, "harbor_up", &[("component", "database")]), 1.0);
        assert_eq!(
            value(&after, "harbor_system_info", &[("auth_mode", "db_auth")]),
            1.0
        );
        assert!(value(&after, "berth_db_pool_max_connections", &[]) > 0.0);

        // The requests took connections from the pool, and that took time.
        let pool = |samples: &[Sample], name: &str| value(samples, name, &[]);
        for name in [
            "berth_db_pool_acquires_total",
            "berth_db_pool_acquire_seconds_total",
        ] {
            assert!(pool(&after, name) > pool(&before, name), "{name} did not move");
        }
        // Waits are counted and served even when there were none.
        for name in [
            "berth_db_pool_waits_total",
            "berth_db_pool_wait_seconds_total",
            "berth_db_pool_acquire_timeouts_total",
        ] {
            assert!(after.iter().any(|s| s.name == name), "{name} is missing");
        }
        assert!(
            pool(&after, "berth_db_pool_waits_total")
                <= pool(&after, "berth_db_pool_acquires_total")
        );
        assert_eq!(pool(&after, "berth_db_pool_acquire_timeouts_total"), 0.0);
    }
);

backend_test!(
    async fn project_figures_count_members_and_repositories_per_project(app) {
        let alice = fixtures::user(&app, "alice").await;
        let id = fixtures::project(&app, None, "team", false).await;
        fixtures::member(&app, id, alice, 2).await;
        fixtures::project(&app, None, "empty", false).await;
        push_image(&app, "team/one", "v1", &[b"one".as_slice()]).await;
        push_image(&app, "team/two", "v1", &[b"two".as_slice()]).await;

        let samples = scrape_as_admin(&app).await;
        assert_eq!(value(&samples, "harbor_project_total", &[("public", "false")]), 2.0);
        let of = |name: &str, project: &str| value(&samples, name, &[("project_name", project)]);
        assert_eq!(of("harbor_project_repo_total", "team"), 2.0);
        assert_eq!(of("harbor_project_repo_total", "empty"), 0.0);
        // The creator (admin) and alice.
        assert_eq!(of("harbor_project_member_total", "team"), 2.0);
        assert_eq!(of("harbor_project_member_total", "empty"), 1.0);
        assert_eq!(of("harbor_artifact_pulled", "team"), 0.0);
    }
);

backend_test!(
    async fn label_sets_stay_bounded_over_a_thousand_repositories(app) {
        for i in 0..1000 {
            let res = app
                .get(&format!("/v2/library/repo-{i}/manifests/latest"))
                .admin()
                .send()
                .await;
            assert_eq!(res.status, StatusCode::NOT_FOUND);
            let res = app
                .get(&format!("/api/v2.0/projects/library/repositories/repo-{i}"))
                .admin()
                .send()
                .await;
            assert_eq!(res.status, StatusCode::NOT_FOUND);
            let res = app.get(&format!("/no-such-page/{i}")).send().await;
            assert_eq!(res.status, StatusCode::NOT_FOUND);
        }
        let res = app.get("/metrics").send().await;
        let text = res.text();
        assert!(!text.contains("repo-"), "a raw path became a label");
        assert!(!text.contains("no-such-page"), "a raw path became a label");
        let samples = parse(&text);
        let series: BTreeSet<_> = samples
            .iter()
            .filter(|s| s.name == REQUESTS)
            .map(|s| format!("{:?}", s.labels))
            .collect();
        assert!(series.len() <= 5, "{series:#?}");
        assert_eq!(
            value(
                &samples,
                REQUESTS,
                &[("code", "404"), ("operation", "get_manifest")]
            ),
            1000.0
        );
        assert_eq!(
            value(
                &samples,
                REQUESTS,
                &[("code", "404"), ("operation", "getRepository")]
            ),
            1000.0
        );
        assert_eq!(
            value(&samples, REQUESTS, &[("code", "404"), ("operation", "unmatched")]),
            1000.0
        );
    }
);

backend_test!(
    async fn garbage_collections_are_counted(app) {
        let res = app
            .post("/api/v2.0/system/gc/schedule")
            .admin()
            .json(&json!({"schedule": {"type": "Manual"}}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let mut runs = 0.0;
        for _ in 0..100 {
            runs = value(&scrape(&app).await, "berth_gc_runs_total", &[("status", "success")]);
            if runs > 0.0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(runs, 1.0);
    }
);

backend_test!(
    async fn metrics_can_require_an_administrator(app) {
        let settings = MetricsSettings {
            addr: None,
            require_admin: true,
        };
        let guarded = app.with_metrics(&settings);
        let anonymous = guarded.get("/metrics").send().await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
        fixtures::user(&guarded, "bob").await;
        let user = guarded
            .get("/metrics")
            .basic("bob", fixtures::PASSWORD)
            .send()
            .await;
        assert_eq!(user.status, StatusCode::FORBIDDEN);
        let admin = guarded
            .get("/metrics")
            .basic("admin", ADMIN_PASSWORD)
            .send()
            .await;
        assert_eq!(admin.status, StatusCode::OK);
        assert!(admin.text().contains("harbor_health 1"));
    }
);

backend_test!(
    async fn a_metrics_address_takes_metrics_off_the_main_port(app) {
        let settings = MetricsSettings {
            addr: Some("127.0.0.1:0".parse().unwrap()),
            require_admin: false,
        };
        let main = berth::app::build_with(app.state.clone(), &settings);
        let separate = berth::metrics::router(app.state.clone(), &settings);
        let request = || {
            axum::http::Request::get("/metrics")
                .body(axum::body::Body::empty())
                .unwrap()
        };
        let on_main = main.oneshot(request()).await.unwrap();
        assert_eq!(on_main.status(), StatusCode::NOT_FOUND);
        let on_own = separate.oneshot(request()).await.unwrap();
        assert_eq!(on_own.status(), StatusCode::OK);
    }
);

backend_test!(
    /// An anonymous scrape of the main port shows aggregate and process
    /// figures but no series that names a project: private projects stay
    /// private. Administrators, and the scraper of `--metrics-addr`, see them.
    async fn anonymous_scrapes_name_no_project(app) {
        fixtures::project(&app, None, "secret-team", false).await;
        let res = app.get("/metrics").send().await;
        assert_eq!(res.status, StatusCode::OK);
        let text = res.text();
        assert!(!text.contains("secret-team"), "a private project named: {text}");
        assert!(!text.contains("project_name="), "no per-project series");
        let samples = parse(&text);
        assert_eq!(value(&samples, "harbor_project_total", &[("public", "false")]), 1.0);
        // Harbor's registry-wide statistics: library (public) and secret-team (private).
        assert_eq!(value(&samples, "harbor_statistics_total_project_amount", &[]), 2.0);
        assert_eq!(value(&samples, "harbor_statistics_private_project_amount", &[]), 1.0);
        assert_eq!(value(&samples, "harbor_statistics_total_repo_amount", &[]), 0.0);
        assert!(samples.iter().any(|s| s.name == "harbor_statistics_total_storage_consumption"));
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            assert!(samples.iter().any(|s| s.name == name), "{name} missing");
        }
        assert!(value(&samples, "process_resident_memory_bytes", &[]) > 1_000_000.0);
        assert!(value(&samples, "process_open_fds", &[]) >= 3.0);
        let started = value(&samples, "process_start_time_seconds", &[]);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(started > now - 86_400.0 && started <= now + 1.0, "{started} vs {now}");

        fixtures::user(&app, "bob").await;
        let res = app.get("/metrics").basic("bob", fixtures::PASSWORD).send().await;
        assert!(!res.text().contains("secret-team"), "a user who is not an administrator");
        let admin = scrape_as_admin(&app).await;
        assert_eq!(value(&admin, "harbor_project_member_total", &[("project_name", "secret-team")]), 1.0);

        let settings = MetricsSettings {
            addr: Some("127.0.0.1:0".parse().unwrap()),
            require_admin: false,
        };
        let separate = berth::metrics::router(app.state.clone(), &settings);
        let request = axum::http::Request::get("/metrics")
            .body(axum::body::Body::empty())
            .unwrap();
        let res = separate.oneshot(request).await.unwrap();
        let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
        assert!(String::from_utf8_lossy(&body).contains("project_name=\"secret-team\""));
    }
);

/// Starts a dry-run audit purge (one task waiting in `PURGE_AUDIT_LOG`).
async fn purge(app: &TestApp) {
    let body = json!({"schedule": {"type": "Manual"}, "parameters": {"audit_retention_hour": 1, "include_event_types": "pull_artifact", "dry_run": true}});
    let res = app
        .post("/api/v2.0/system/purgeaudit/schedule")
        .admin()
        .json(&body)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
}

backend_test!(
    /// Harbor's job service and exporter task families, and distribution's
    /// request counts and sizes, after pushes, a pull and job runs.
    async fn harbor_job_and_registry_families_follow_pushes_and_jobs(app) {
        // This instance's workers: no lane that takes the test's tasks.
        let workers: berth::workers::JobWorkers =
            "webhook=3,replication=0,retention=0,gc=0,audit-purge=0".parse().unwrap();
        tokio::spawn(berth::workers::run(app.state.clone(), berth::workers::LEASE, workers));

        let layer = b"sized layer bytes".as_slice();
        push_image(&app, "library/sized", "v1", &[layer]).await;
        let blob = app
            .get(&format!("/v2/library/sized/blobs/{}", digest_of(layer)))
            .admin()
            .send()
            .await;
        assert_eq!(blob.status, StatusCode::OK);
        let res = app
            .post("/api/v2.0/system/gc/schedule")
            .admin()
            .json(&json!({"schedule": {"type": "Custom", "cron": "0 0 * * * *"}}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        purge(&app).await;
        purge(&app).await;

        let mut samples = Vec::new();
        for _ in 0..100 {
            app.state.metrics.forget_cached();
            samples = scrape(&app).await;
            if value(&samples, "harbor_jobservice_info", &[]) > 0.0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        let pool = format!("{}:{}", host.trim(), std::process::id());
        assert_eq!(
            value(
                &samples,
                "harbor_jobservice_info",
                &[("node", host.trim()), ("pool", &pool), ("workers", "3")]
            ),
            1.0
        );
        let queue = |samples: &[Sample], kind: &str| {
            value(samples, "harbor_task_queue_size", &[("type", kind)])
        };
        assert_eq!(queue(&samples, "PURGE_AUDIT_LOG"), 2.0);
        assert_eq!(queue(&samples, "GARBAGE_COLLECTION"), 0.0);
        assert!(samples.iter().any(|s| s.name == "harbor_task_queue_latency"
            && s.labels.get("type").map(String::as_str) == Some("PURGE_AUDIT_LOG")));
        assert_eq!(value(&samples, "harbor_task_scheduled_total", &[]), 1.0);

        // distribution's request count, by code and method, and sizes.
        // The blobs went up in monolithic POSTs, the manifest in a PUT.
        for (method, code, requests) in [("POST", "201", 2.0), ("PUT", "201", 1.0), ("GET", "200", 1.0)] {
            let labels = [("method", method), ("code", code)];
            assert_eq!(value(&samples, "registry_http_requests_total", &labels), requests, "{labels:?}");
        }
        let size = |name: &str, operation: &str| {
            value(&samples, name, &[("method", "GET"), ("operation", operation)])
        };
        assert_eq!(size("registry_http_response_size_bytes_count", "get_blob"), 1.0);
        assert_eq!(
            size("registry_http_response_size_bytes_sum", "get_blob"),
            layer.len() as f64
        );
        let manifest = |name: &str| {
            value(&samples, name, &[("method", "PUT"), ("operation", "put_manifest")])
        };
        assert_eq!(manifest("registry_http_request_size_bytes_count"), 1.0);
        assert!(manifest("registry_http_request_size_bytes_sum") > 100.0);
        assert_eq!(
            value(
                &samples,
                "registry_http_request_size_bytes_bucket",
                &[("operation", "put_manifest"), ("le", "+Inf")]
            ),
            1.0
        );

        // The tasks run and are counted as they end; one more is taken by another instance.
        assert_eq!(berth::workers::run_due(&app.state, "test").await.unwrap(), 2);
        purge(&app).await;
        let taken = app
            .store()
            .jobs()
            .claim("node-b:7", &["PURGE_AUDIT_LOG"], berth::workers::LEASE)
            .await
            .unwrap();
        assert!(taken.is_some());
        app.state.metrics.forget_cached();
        let after = scrape(&app).await;
        assert_eq!(queue(&after, "PURGE_AUDIT_LOG"), 0.0);
        let task = [("type", "PURGE_AUDIT_LOG"), ("status", "Success")];
        assert_eq!(value(&after, "harbor_jobservice_task_total", &task), 2.0);
        assert_eq!(
            value(&after, "harbor_jobservice_task_process_time_seconds_count", &task),
            2.0
        );
        assert!(value(&after, "harbor_jobservice_task_process_time_seconds_sum", &task) > 0.0);
        assert_eq!(
            value(
                &after,
                "harbor_task_concurrency",
                &[("type", "PURGE_AUDIT_LOG"), ("pool", "node-b:7")]
            ),
            1.0
        );
    }
);
