//! Garbage collection: what goes, what stays.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use berth_store::repo::gc::{GcOptions, collect_garbage};
use serde_json::json;

use super::{digest_of, error_code, push_blob, push_image};
use crate::registry_test;
use crate::util::TestApp;

async fn blob_file_exists(app: &TestApp, digest: &str) -> bool {
    app.state
        .registry
        .blobs
        .exists(&berth_domain::oci::Digest::parse(digest).unwrap())
        .await
}

async fn gc(app: &TestApp, grace: u64) -> berth_store::repo::gc::GcStats {
    collect_garbage(
        app.store(),
        &app.state.registry.blobs,
        GcOptions {
            grace: Duration::from_secs(grace),
            upload_expiry: Duration::from_secs(24 * 3600),
        },
    )
    .await
    .unwrap()
}

registry_test!(
    async fn gc_removes_unreferenced_blobs_only(app) {
        let (_, kept) = push_image(&app, "library/kept", "v1", &[b"shared", b"kept-only"]).await;
        let (_, dropped) = push_image(&app, "library/dropped", "v1", &[b"shared", b"dropped-only"]).await;
        let loose = push_blob(&app, "library/kept", b"loose").await;
        // An upload in progress.
        let res = app.post("/v2/library/kept/blobs/uploads/").admin().send().await;
        let location = res.header("location").unwrap().to_string();
        let res = app.request(Method::PATCH, &location).admin().raw("application/octet-stream", b"half".to_vec()).send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);

        // A deleted artifact's blobs go at the next run; a blob pushed within
        // the grace period (its manifest may still come) stays.
        let res = app.delete(&format!("/api/v2.0/projects/library/repositories/dropped/artifacts/{dropped}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let stats = gc(&app, 3600).await;
        assert_eq!(stats.blobs, 2, "the manifest and its own layer: {stats:?}");
        assert!(!blob_file_exists(&app, &digest_of(b"dropped-only")).await);
        assert!(blob_file_exists(&app, &loose).await);
        let res = app.request(Method::HEAD, &format!("/v2/library/kept/blobs/{loose}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);

        // Past the grace period the loose blob goes too.
        let stats = gc(&app, 0).await;
        assert_eq!(stats.blobs, 1, "{stats:?}");
        assert!(!blob_file_exists(&app, &loose).await);
        let res = app.request(Method::HEAD, &format!("/v2/library/kept/blobs/{loose}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        // The kept image is whole, including the layer it shared.
        for layer in [b"shared".as_slice(), b"kept-only"] {
            assert!(blob_file_exists(&app, &digest_of(layer)).await);
            let res = app.get(&format!("/v2/library/kept/blobs/{}", digest_of(layer))).send().await;
            assert_eq!(res.body, layer);
        }
        let res = app.get(&format!("/v2/library/kept/manifests/{kept}")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        // The upload in progress survives and completes.
        let all = digest_of(b"half done");
        let res = app.put(&format!("{location}?digest={all}")).admin().raw("application/octet-stream", b" done".to_vec()).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        // The dropped manifest is gone; pushing it again works (its blobs are re-uploaded).
        let res = app.get(&format!("/v2/library/dropped/manifests/{dropped}")).send().await;
        assert_eq!(error_code(&res), "MANIFEST_UNKNOWN");
        push_image(&app, "library/dropped", "v1", &[b"shared", b"dropped-only"]).await;
        let stats = gc(&app, 0).await;
        assert_eq!(stats.blobs, 1, "only the finished upload no manifest uses: {stats:?}");
        assert!(!blob_file_exists(&app, &all).await);
        assert!(blob_file_exists(&app, &digest_of(b"dropped-only")).await);
    }
);

registry_test!(
    async fn gc_admin_endpoint(app) {
        let res = app.post("/api/v2.0/system/gc/schedule").json(&json!({"schedule": {"type": "Manual"}})).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let res = app.post("/api/v2.0/system/gc/schedule").admin().json(&json!({"schedule": {"type": "Fortnightly"}})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.post("/api/v2.0/system/gc/schedule").admin().json(&json!({"schedule": {"type": "Custom", "cron": ""}})).send().await;
        assert_eq!((res.status, error_message(&res).as_str()), (StatusCode::BAD_REQUEST, "empty cron string for gc schedule"));
        let res = app.post("/api/v2.0/system/gc/schedule").admin().json(&json!({"schedule": {"type": "Custom", "cron": "0 0 * * *"}})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "five fields: {}", res.text());
        let res = app.post("/api/v2.0/system/gc/schedule").admin().json(&json!({"schedule": {"type": "Manual"}})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        let location = res.header("location").unwrap().to_string();
        let mut status = String::new();
        for _ in 0..200 {
            let res = app.get(&location).admin().send().await;
            assert_eq!(res.status, StatusCode::OK);
            status = res.json()["job_status"].as_str().unwrap().to_string();
            if status != "Running" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(status, "Success");
        let res = app.get(&format!("{location}/log")).admin().send().await;
        assert_eq!((res.status, res.header("content-type")), (StatusCode::OK, Some("text/plain; charset=utf-8")));
        let log = res.text();
        let lines: Vec<_> = log.lines().map(|l| l.split_once(' ').unwrap().1).collect();
        assert!(lines[0].starts_with("garbage collection ") && lines[0].ends_with(" started (manual)"), "{log}");
        assert!(lines[1].starts_with("expired 0 upload sessions, dropped "), "{log}");
        assert_eq!(lines[2], "finished", "{log}");
        let res = app.get("/api/v2.0/system/gc/999/log").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get(&format!("{location}/log")).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let res = app.get("/api/v2.0/system/gc").admin().send().await;
        assert_eq!(res.json().as_array().unwrap().len(), 1);
        let res = app.get("/api/v2.0/system/gc/999").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        // One run at a time.
        let run = app.store().start_gc_run().await.unwrap();
        let res = app.post("/api/v2.0/system/gc/schedule").admin().json(&json!({"schedule": {"type": "Manual"}})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        let id = run.id;
        berth_store::repo::gc::run_garbage_collection(app.store(), &app.state.registry.blobs, GcOptions::default(), run).await.unwrap();
        assert_eq!(app.store().gc_run(id).await.unwrap().unwrap().status, "done");
    }
);

fn error_message(res: &crate::util::TestResponse) -> String {
    res.json()["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

registry_test!(
    /// Garbage collection on a schedule: Harbor's schedule types set it (with
    /// the parameters its runs get), getGCSchedule shows it with its next
    /// time, a due tick starts one run (however many look), recorded as
    /// `SCHEDULE` in the history, and `None` removes it.
    async fn gc_runs_on_its_schedule(app) {
        let res = app.get("/api/v2.0/system/gc/schedule").admin().send().await;
        assert_eq!((res.status, res.text()), (StatusCode::OK, String::new()), "no schedule yet");
        let res = app.get("/api/v2.0/system/gc/schedule").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        // What the collection does not do is refused, not accepted and ignored.
        let body = json!({"schedule": {"type": "Daily"}, "parameters": {"dry_run": true}});
        let res = app.post("/api/v2.0/system/gc/schedule").admin().json(&body).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(error_message(&res).starts_with("dry_run applies to a manual run"), "{}", res.text());
        for (parameters, why) in [
            (json!({"delete_untagged": true}), "delete_untagged is not supported"),
            (json!({"workers": 9}), "workers must be between 1 and 5"),
        ] {
            for kind in ["Manual", "Daily"] {
                let body = json!({"schedule": {"type": kind}, "parameters": parameters});
                let res = app.post("/api/v2.0/system/gc/schedule").admin().json(&body).send().await;
                assert_eq!(res.status, StatusCode::BAD_REQUEST, "{kind} {parameters}");
                assert!(error_message(&res).starts_with(why), "{}", res.text());
            }
        }
        let body = json!({"schedule": {"type": "Daily"}, "parameters": {"delete_untagged": false, "workers": 1}});
        let res = app.post("/api/v2.0/system/gc/schedule").admin().json(&body).send().await;
        assert_eq!((res.status, res.header("location")), (StatusCode::CREATED, Some("/api/v2.0/system/gc/0")));
        let shown = app.get("/api/v2.0/system/gc/schedule").admin().send().await.json();
        assert_eq!(shown["schedule"]["type"], "Daily");
        assert_eq!(shown["schedule"]["cron"], "0 0 0 * * *");
        assert_eq!(shown["job_kind"], "0 0 0 * * *");
        assert_eq!(shown["job_parameters"], r#"{"delete_untagged":false,"workers":1}"#);
        assert!(shown["schedule"]["next_scheduled_time"].as_str().unwrap().ends_with("T00:00:00.000Z"), "{shown}");

        // Every minute, and due now.
        let every = json!({"schedule": {"type": "Custom", "cron": "0 * * * * *"}});
        let res = app.put("/api/v2.0/system/gc/schedule").admin().json(&every).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        app.make_schedules_due().await;
        let (one, two) = tokio::join!(berth::workers::run_due(&app.state, "one"), berth::workers::run_due(&app.state, "two"));
        assert_eq!(one.unwrap() + two.unwrap(), 1, "one tick, one run");
        let runs = app.get("/api/v2.0/system/gc").admin().send().await.json();
        let runs = runs.as_array().unwrap();
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!((runs[0]["job_kind"].as_str(), runs[0]["job_status"].as_str()), (Some("SCHEDULE"), Some("Success")));
        assert_eq!(runs[0]["schedule"]["type"], "Schedule");

        let res = app.put("/api/v2.0/system/gc/schedule").admin().json(&json!({"schedule": {"type": "None"}})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get("/api/v2.0/system/gc/schedule").admin().send().await;
        assert_eq!(res.text(), "");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(berth::workers::run_due(&app.state, "one").await.unwrap(), 0, "no schedule, no run");
    }
);

registry_test!(
    async fn a_dry_run_counts_what_a_collection_would_remove_and_removes_nothing(app) {
        let (_, digest) = push_image(&app, "library/doomed", "v1", &[b"a doomed layer"]).await;
        let res = app.delete(&format!("/v2/library/doomed/manifests/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let layer = super::digest_of(b"a doomed layer");
        let body = json!({"schedule": {"type": "Manual"}, "parameters": {"dry_run": true}});
        let res = app.post("/api/v2.0/system/gc/schedule").admin().json(&body).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let id = res.header("location").unwrap().rsplit('/').next().unwrap().to_string();
        let mut shown = json!(null);
        for _ in 0..200 {
            shown = app.get(&format!("/api/v2.0/system/gc/{id}")).admin().send().await.json();
            if shown["job_status"] != "Running" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(shown["job_status"], "Success", "{shown}");
        let stats: serde_json::Value = serde_json::from_str(shown["job_parameters"].as_str().unwrap()).unwrap();
        assert_eq!(stats["dry_run"], true);
        let log = app.get(&format!("/api/v2.0/system/gc/{id}/log")).admin().send().await.text();
        assert!(log.contains("dry run: would") && log.contains("nothing was removed"), "{log}");
        assert!(blob_file_exists(&app, &layer).await, "a dry run removes nothing");
        // The default grace keeps the links of a fresh push; a run with the
        // same options removes what the dry run counted.
        let real = gc(&app, 24 * 3600).await;
        assert_eq!(real.blobs as i64, stats["blobs"].as_i64().unwrap(), "{real:?} vs {stats}");
    }
);

registry_test!(
    async fn a_stopped_collection_stops_at_its_next_step(app) {
        let (_, digest) = push_image(&app, "library/doomed", "v1", &[b"doomed layer"]).await;
        let res = app.delete(&format!("/v2/library/doomed/manifests/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let run = app.store().start_gc_run().await.unwrap();
        let id = run.id;
        let res = app.put(&format!("/api/v2.0/system/gc/{id}")).basic("nobody", "x").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let res = app.put(&format!("/api/v2.0/system/gc/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let options = GcOptions { grace: Duration::ZERO, upload_expiry: Duration::from_secs(24 * 3600) };
        let stats = berth_store::repo::gc::run_garbage_collection(app.store(), &app.state.registry.blobs, options, run).await.unwrap();
        assert!(stats.stopped && stats.blobs == 0, "{stats:?}");
        let shown = app.get(&format!("/api/v2.0/system/gc/{id}")).admin().send().await.json();
        assert_eq!(shown["job_status"], "Stopped", "{shown}");
        let log = app.get(&format!("/api/v2.0/system/gc/{id}/log")).admin().send().await.text();
        assert!(log.contains("received the stop signal, quit GC job."), "{log}");
        // One that ended stays as it ended; none is a 404.
        let res = app.put(&format!("/api/v2.0/system/gc/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.put("/api/v2.0/system/gc/9999").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        // The next run collects what the stopped one left.
        assert!(gc(&app, 0).await.blobs > 0);
    }
);

registry_test!(
    async fn quota_counts_linked_blobs_once_and_limits_pushes(app) {
        let projects = app.store().projects();
        assert_eq!(projects.quota(1).await.unwrap(), Some((-1, 0)));
        let (manifest, _) = push_image(&app, "library/q1", "v1", &[b"layer-a"]).await;
        let config = br#"{"architecture":"amd64","os":"linux","layers":1}"#;
        let expected = (manifest.len() + config.len() + b"layer-a".len()) as i64;
        assert_eq!(projects.quota(1).await.unwrap(), Some((-1, expected)));
        // The same blobs in another repository of the project are not charged again.
        push_image(&app, "library/q2", "v1", &[b"layer-a"]).await;
        assert_eq!(projects.quota(1).await.unwrap(), Some((-1, expected)));
        let loose = push_blob(&app, "library/q1", b"12345").await;
        assert_eq!(projects.quota(1).await.unwrap(), Some((-1, expected + 5)));
        let res = app.delete(&format!("/v2/library/q1/blobs/{loose}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        assert_eq!(projects.quota(1).await.unwrap(), Some((-1, expected)));

        assert!(projects.set_storage_limit(1, expected + 10).await.unwrap());
        let res = app
            .post(&format!("/v2/library/q1/blobs/uploads/?digest={}", digest_of(&[1u8; 11])))
            .admin()
            .raw("application/octet-stream", vec![1u8; 11])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert_eq!(error_code(&res), "DENIED");
        assert!(res.text().contains("Quota exceeded"), "{}", res.text());
        assert_eq!(projects.quota(1).await.unwrap(), Some((expected + 10, expected)));
        push_blob(&app, "library/q1", &[2u8; 10]).await;
        assert_eq!(projects.quota(1).await.unwrap(), Some((expected + 10, expected + 10)));
    }
);
