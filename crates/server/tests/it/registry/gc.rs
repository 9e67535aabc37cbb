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
            ..Default::default()
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
        assert_eq!(lines[1], "workers: 1", "{log}");
        assert!(lines[2].ends_with(" manifests eligible for deletion"), "{log}");
        assert!(lines[3].starts_with("expired 0 upload sessions, dropped "), "{log}");
        assert_eq!(lines[4], "finished", "{log}");
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
            (json!({"delete_untagged": "yes"}), "delete_untagged must be true or false"),
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
        assert_eq!(real.blobs as i64, stats["purged_blobs"].as_i64().unwrap(), "{real:?} vs {stats}");
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
        let options = GcOptions { grace: Duration::ZERO, upload_expiry: Duration::from_secs(24 * 3600), ..Default::default() };
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

/// Starts a manual collection with `parameters` through Harbor's API and
/// waits for its end; the run as shown, and its log.
async fn run_manual(app: &TestApp, parameters: serde_json::Value) -> (serde_json::Value, String) {
    let body = json!({"schedule": {"type": "Manual"}, "parameters": parameters});
    let res = app
        .post("/api/v2.0/system/gc/schedule")
        .admin()
        .json(&body)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    let id = res
        .header("location")
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    let mut shown = json!(null);
    for _ in 0..500 {
        shown = app
            .get(&format!("/api/v2.0/system/gc/{id}"))
            .admin()
            .send()
            .await
            .json();
        if shown["job_status"] != "Running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let log = app
        .get(&format!("/api/v2.0/system/gc/{id}/log"))
        .admin()
        .send()
        .await
        .text();
    (shown, log)
}

registry_test!(
    /// `delete_untagged` deletes untagged artifacts first and then their
    /// blobs: never a tagged one (an immutable tag's included), a signature
    /// of a tagged artifact, or an untagged child of a tagged index; an
    /// untagged artifact's own signature goes with it. A dry run counts them.
    /// Harbor's `job_parameters` and log lines say what was asked and done,
    /// and `workers` is honoured.
    async fn delete_untagged_deletes_untagged_artifacts_and_keeps_what_tags_keep(app) {
        const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
        let (_, kept) = push_image(&app, "library/app", "v1", &[b"kept layer"]).await;
        // v2 pushed twice: the first image loses its tag.
        let (_, untagged) = push_image(&app, "library/app", "v2", &[b"untagged layer"]).await;
        push_image(&app, "library/app", "v2", &[b"second v2 layer"]).await;
        // Pushed by digest, never tagged.
        let (_, by_digest) = push_image(&app, "library/other", "v0", &[b"by digest layer"]).await;
        let res = app.delete("/api/v2.0/projects/library/repositories/other/artifacts/v0/tags/v0").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        // An immutable tag.
        let rule = json!({"disabled": false, "action": "immutable", "template": "immutable",
            "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": "frozen"}],
            "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": "**"}]}});
        let res = app.post("/api/v2.0/projects/library/immutabletagrules").admin().json(&rule).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let (_, frozen) = push_image(&app, "library/app", "frozen", &[b"frozen layer"]).await;
        // Signatures (accessories, untagged): of the tagged v1, and of the untagged image.
        let mut signatures = Vec::new();
        for (subject, name) in [(&kept, "v1"), (&untagged, "old v2")] {
            let (config, layer) = (format!(r#"{{"signed":"{name}"}}"#), format!("a signature of {name}"));
            push_blob(&app, "library/app", config.as_bytes()).await;
            push_blob(&app, "library/app", layer.as_bytes()).await;
            let mut signature: serde_json::Value =
                serde_json::from_slice(&crate::registry::image_manifest(config.as_bytes(), &[layer.as_bytes()])).unwrap();
            signature["subject"] = json!({"mediaType": OCI_MANIFEST, "digest": subject, "size": 1});
            let signature = signature.to_string().into_bytes();
            let digest = digest_of(&signature);
            let res = crate::registry::put_manifest(&app, "library/app", &digest, OCI_MANIFEST, &signature).await;
            assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
            signatures.push(digest);
        }
        // A tagged index over an untagged child.
        let (child, child_digest) = push_image(&app, "library/multi", "child", &[b"child layer"]).await;
        let res = app.delete("/api/v2.0/projects/library/repositories/multi/artifacts/child/tags/child").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let index = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": child_digest, "size": child.len(), "platform": {"architecture": "amd64", "os": "linux"}}
        ]})
        .to_string()
        .into_bytes();
        let res = crate::registry::put_manifest(&app, "library/multi", "latest", "application/vnd.oci.image.index.v1+json", &index).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());

        let manifest_status = |repository: &'static str, reference: String| {
            let app = &app;
            async move { app.get(&format!("/v2/library/{repository}/manifests/{reference}")).admin().send().await.status }
        };

        // A dry run counts the two untagged images (not the signature, which
        // goes with its subject) and removes nothing.
        let (shown, log) = run_manual(&app, json!({"dry_run": true, "delete_untagged": true})).await;
        assert_eq!(shown["job_status"], "Success", "{shown}");
        assert!(log.contains("would delete 2 untagged artifacts"), "{log}");
        assert_eq!(manifest_status("app", untagged.clone()).await, StatusCode::OK);

        let (shown, log) = run_manual(&app, json!({"delete_untagged": true, "workers": 3})).await;
        assert_eq!(shown["job_status"], "Success", "{shown}\n{log}");
        let parameters: serde_json::Value = serde_json::from_str(shown["job_parameters"].as_str().unwrap()).unwrap();
        assert_eq!(parameters["delete_untagged"], true, "{parameters}");
        assert_eq!(parameters["dry_run"], false, "{parameters}");
        assert_eq!(parameters["workers"], 3, "{parameters}");
        assert!(parameters["purged_blobs"].as_i64().unwrap() >= 6, "{parameters}");
        assert!(parameters["purged_manifests"].as_i64().unwrap() >= 3, "{parameters}");
        assert!(parameters["freed_space"].as_i64().unwrap() > 0, "{parameters}");
        assert!(log.contains("workers: 3"), "{log}");
        assert!(log.contains("deleted 2 untagged artifacts"), "{log}");
        assert!(log.contains("blobs and") && log.contains("manifests eligible for deletion"), "{log}");

        // Gone: the untagged images, the signature of one, their own layers.
        for (repository, digest) in [("app", &untagged), ("other", &by_digest), ("app", &signatures[1])] {
            assert_eq!(manifest_status(repository, digest.clone()).await, StatusCode::NOT_FOUND, "{repository}@{digest}");
        }
        for layer in [b"untagged layer".as_slice(), b"by digest layer", b"a signature of old v2"] {
            assert!(!blob_file_exists(&app, &digest_of(layer)).await, "{}", String::from_utf8_lossy(layer));
        }
        // Kept: tagged, immutable, the signature of a tagged one, an index's child.
        for (repository, reference) in [
            ("app", kept.clone()), ("app", "v2".to_string()), ("app", frozen.clone()),
            ("app", signatures[0].clone()), ("multi", child_digest.clone()), ("multi", "latest".to_string()),
        ] {
            assert_eq!(manifest_status(repository, reference.clone()).await, StatusCode::OK, "{repository}:{reference}");
        }
        for layer in [b"kept layer".as_slice(), b"second v2 layer", b"frozen layer", b"a signature of v1", b"child layer"] {
            assert!(blob_file_exists(&app, &digest_of(layer)).await, "{}", String::from_utf8_lossy(layer));
        }
    }
);
