//! Content integrity under concurrency, garbage collection and crashes: only
//! bytes that hash to their digest are ever stored, and nothing acknowledged
//! is lost. Every race runs many rounds on both backends; `fsck` is the judge.

use std::io::Write as _;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use berth_store::repo::gc::{GcOptions, collect_garbage, run_garbage_collection};
use serde_json::json;
use sha2::{Digest as _, Sha512};

use super::{digest_of, error_code, image_manifest, push_blob, push_image, put_manifest};
use crate::registry_test;
use crate::util::TestApp;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn options(grace: u64, upload_expiry: u64) -> GcOptions {
    GcOptions {
        grace: Duration::from_secs(grace),
        upload_expiry: Duration::from_secs(upload_expiry),
        ..Default::default()
    }
}

/// Starts a run once the lock of a collector that just stopped is free: at
/// once on SQLite; on PostgreSQL once the server has seen the dead
/// collector's connection close (bounded).
async fn start_run_soon(app: &TestApp) -> berth_store::repo::gc::RunningGc {
    for _ in 0..200 {
        match app.store().start_gc_run().await {
            Ok(run) => return run,
            Err(berth_store::StoreError::Domain(berth_domain::DomainError::Conflict(_))) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(err) => panic!("{err}"),
        }
    }
    panic!("the lock of a stopped collector was not released within 2 s")
}

/// `fsck` finds nothing wrong.
async fn assert_consistent(app: &TestApp) {
    let report = berth_store::repo::fsck::check(app.store(), &app.state.registry.blobs, false)
        .await
        .unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

/// Starts an upload session in `name`; returns its location.
async fn start_upload(app: &TestApp, name: &str) -> String {
    let res = app
        .post(&format!("/v2/{name}/blobs/uploads/"))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
    res.header("location").unwrap().to_string()
}

async fn patch(
    app: &TestApp,
    location: &str,
    range: &str,
    body: Vec<u8>,
) -> crate::util::TestResponse {
    app.request(Method::PATCH, location)
        .admin()
        .header("content-range", range)
        .raw("application/octet-stream", body)
        .send()
        .await
}

/// The blob's bytes as served, or the status.
async fn pull_blob(app: &TestApp, name: &str, digest: &str) -> Result<Vec<u8>, StatusCode> {
    let res = app
        .get(&format!("/v2/{name}/blobs/{digest}"))
        .admin()
        .send()
        .await;
    if res.status == StatusCode::OK {
        Ok(res.body.to_vec())
    } else {
        Err(res.status)
    }
}

/// `len` bytes, different for every (seed, round).
fn body(seed: u8, round: usize, len: usize) -> Vec<u8> {
    let mut bytes = format!("{seed}/{round}/").into_bytes();
    bytes.extend((0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    bytes.truncate(len);
    bytes
}

/// The `sha512:` digest of `bytes`.
fn sha512_of(bytes: &[u8]) -> String {
    let hex: String = Sha512::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha512:{hex}")
}

/// Compares blob contents without printing megabytes when they differ.
#[track_caller]
fn assert_same(found: Result<Vec<u8>, StatusCode>, expected: &[u8], context: &str) {
    match found {
        Ok(bytes) => assert!(
            bytes == expected,
            "{context}: other bytes ({} instead of {})",
            bytes.len(),
            expected.len()
        ),
        Err(status) => panic!("{context}: {status}"),
    }
}

registry_test!(
    async fn concurrent_chunks_of_one_upload_store_only_matching_bytes(app) {
        let name = "library/race-patch";
        const LEN: usize = 2 << 20;
        for round in 0..10 {
            let location = start_upload(&app, name).await;
            let (a, b) = (body(1, round, LEN), body(2, round, LEN));
            let range = format!("0-{}", LEN - 1);
            let (ra, rb) = tokio::join!(
                patch(&app, &location, &range, a.clone()),
                patch(&app, &location, &range, b.clone())
            );
            let mut statuses = [ra.status, rb.status];
            statuses.sort();
            assert_eq!(statuses, [StatusCode::ACCEPTED, StatusCode::RANGE_NOT_SATISFIABLE], "round {round}");
            let (winner, loser) = if ra.status == StatusCode::ACCEPTED { (a, b) } else { (b, a) };
            // The loser's digest is refused; the session is gone with it.
            if round % 2 == 0 {
                let res = app.put(&format!("{location}?digest={}", digest_of(&loser))).admin().send().await;
                assert_eq!(error_code(&res), "DIGEST_INVALID", "round {round}");
                assert!(pull_blob(&app, name, &digest_of(&loser)).await == Err(StatusCode::NOT_FOUND), "round {round}");
                continue;
            }
            let res = app.put(&format!("{location}?digest={}", digest_of(&winner))).admin().send().await;
            assert_eq!(res.status, StatusCode::CREATED, "round {round}: {}", res.text());
            assert_same(pull_blob(&app, name, &digest_of(&winner)).await, &winner, &format!("round {round}"));
        }
        assert_consistent(&app).await;
    }
);

registry_test!(
    async fn a_commit_racing_a_chunk_stores_exactly_what_it_names(app) {
        let name = "library/race-put";
        for round in 0..10 {
            let location = start_upload(&app, name).await;
            let first = body(3, round, 1 << 20);
            let res = patch(&app, &location, &format!("0-{}", first.len() - 1), first.clone()).await;
            assert_eq!(res.status, StatusCode::ACCEPTED);
            let second = body(4, round, 1 << 20);
            let range = format!("{}-{}", first.len(), first.len() + second.len() - 1);
            let commit = app.put(&format!("{location}?digest={}", digest_of(&first))).admin().send();
            let (put, more) = tokio::join!(commit, patch(&app, &location, &range, second.clone()));
            match (put.status, more.status) {
                // The commit won: the chunk changed nothing.
                (StatusCode::CREATED, StatusCode::NOT_FOUND | StatusCode::RANGE_NOT_SATISFIABLE) => {
                    assert_same(pull_blob(&app, name, &digest_of(&first)).await, &first, "the commit");
                }
                // The chunk won: the commit changed nothing and the session goes on.
                (StatusCode::RANGE_NOT_SATISFIABLE, StatusCode::ACCEPTED) => {
                    assert!(pull_blob(&app, name, &digest_of(&first)).await == Err(StatusCode::NOT_FOUND));
                    let all = [first.clone(), second.clone()].concat();
                    let res = app.put(&format!("{location}?digest={}", digest_of(&all))).admin().send().await;
                    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
                    assert_same(pull_blob(&app, name, &digest_of(&all)).await, &all, "both chunks");
                }
                // The chunk came first, and the commit's digest does not name
                // the whole: refused, and the session ends with nothing stored.
                (StatusCode::BAD_REQUEST, StatusCode::ACCEPTED) => {
                    assert_eq!(error_code(&put), "DIGEST_INVALID");
                    assert!(pull_blob(&app, name, &digest_of(&first)).await == Err(StatusCode::NOT_FOUND));
                    let res = app.get(&location).admin().send().await;
                    assert_eq!(res.status, StatusCode::NOT_FOUND);
                }
                other => panic!("round {round}: {other:?}: {} / {}", put.text(), more.text()),
            }
        }
        assert_consistent(&app).await;
    }
);

registry_test!(
    async fn gc_racing_pushes_of_the_same_blobs_loses_nothing(app) {
        let name = "library/race-gc";
        for round in 0..8 {
            let blobs: Vec<Vec<u8>> = (0..6).map(|i| body(i, round, 4096 + i as usize)).collect();
            for blob in &blobs {
                let digest = push_blob(&app, name, blob).await;
                let res = app.delete(&format!("/v2/{name}/blobs/{digest}")).admin().send().await;
                assert_eq!(res.status, StatusCode::ACCEPTED);
            }
            // The links are gone: a collection (at any grace) now removes every
            // one, while the same blobs are pushed again.
            let gc = collect_garbage(app.store(), &app.state.registry.blobs, options(3600, 3600));
            let pushes = futures_util::future::join_all(blobs.iter().map(|blob| {
                let app = &app;
                async move {
                    app.post(&format!("/v2/{name}/blobs/uploads/?digest={}", digest_of(blob)))
                        .admin()
                        .raw("application/octet-stream", blob.clone())
                        .send()
                        .await
                        .status
                }
            }));
            let (collected, statuses) = tokio::join!(gc, pushes);
            collected.unwrap();
            for (blob, status) in blobs.iter().zip(statuses) {
                assert_eq!(status, StatusCode::CREATED, "round {round}");
                // Acknowledged, so present until a collection that starts later.
                let res = app.request(Method::HEAD, &format!("/v2/{name}/blobs/{}", digest_of(blob))).admin().send().await;
                assert_eq!(res.status, StatusCode::OK, "round {round}");
                assert_same(pull_blob(&app, name, &digest_of(blob)).await, blob, &format!("round {round}"));
            }
            assert_consistent(&app).await;
        }
    }
);

registry_test!(
    async fn a_dead_collector_blocks_nobody(app) {
        let name = "library/dead-gc";
        // A collector that stopped without finishing (its lock went with it).
        let dead = app.store().start_gc_run().await.unwrap();
        let dead_id = dead.id;
        drop(dead);
        let res = app.get(&format!("/api/v2.0/system/gc/{dead_id}")).admin().send().await;
        assert_eq!(res.json()["job_status"], "Running");
        let run = start_run_soon(&app).await;
        let res = app.get(&format!("/api/v2.0/system/gc/{dead_id}")).admin().send().await;
        assert_eq!(res.json()["job_status"], "Error");
        run_garbage_collection(app.store(), &app.state.registry.blobs, options(0, 3600), run).await.unwrap();

        // Collectors stopped at every point of their work: whatever they
        // claimed, pushes of the same blobs succeed at once and are whole.
        for round in 0..12 {
            let blobs: Vec<Vec<u8>> = (0..8).map(|i| body(i, round, 2048)).collect();
            for blob in &blobs {
                let digest = push_blob(&app, name, blob).await;
                app.delete(&format!("/v2/{name}/blobs/{digest}")).admin().send().await;
            }
            let store = app.store().clone();
            let files = app.state.registry.blobs.clone();
            let collector = tokio::spawn(async move { collect_garbage(&store, &files, options(0, 3600)).await });
            tokio::time::sleep(Duration::from_micros(300 * round as u64)).await;
            collector.abort();
            let _ = collector.await;
            for blob in &blobs {
                push_blob(&app, name, blob).await;
                assert_same(pull_blob(&app, name, &digest_of(blob)).await, blob, &format!("round {round}"));
            }
            let run = start_run_soon(&app).await;
            run_garbage_collection(app.store(), &app.state.registry.blobs, options(3600, 3600), run).await.unwrap();
            assert_consistent(&app).await;
        }
        let runs = app.store().gc_runs(100).await.unwrap();
        assert!(runs.iter().all(|r| r.status != "running"), "{runs:?}");
    }
);

registry_test!(
    async fn an_expired_session_ends_cleanly_between_chunks(app) {
        let name = "library/expiring";
        let location = start_upload(&app, name).await;
        let res = patch(&app, &location, "0-4", b"hello".to_vec()).await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let stats = collect_garbage(app.store(), &app.state.registry.blobs, options(3600, 0)).await.unwrap();
        assert_eq!(stats.uploads, 1);
        let res = patch(&app, &location, "5-10", b" world".to_vec()).await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(error_code(&res), "BLOB_UPLOAD_UNKNOWN");
        let left = app.stored_uploads().await;
        assert!(left.is_empty(), "nothing of the session is left: {left:?}");
        assert_consistent(&app).await;
    }
);

registry_test!(
    async fn pushes_deletes_and_collections_at_once_leave_consistent_content(app) {
        // Eight clients push images (one layer shared by all, one of their
        // own) into four repositories, delete some and push them again,
        // while collections with no grace at all run back to back. A push
        // whose blobs a collection took is repeated, as a client would.
        let stop = std::sync::atomic::AtomicBool::new(false);
        let collector = async {
            let mut runs = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // A push that met a claimed blob may hold the lock for a moment
                // (it checks whether a collector died): then this run waits.
                match collect_garbage(app.store(), &app.state.registry.blobs, options(0, 0)).await {
                    Ok(_) => runs += 1,
                    Err(berth_store::StoreError::Domain(berth_domain::DomainError::Conflict(_))) => {}
                    Err(err) => panic!("{err}"),
                }
                // Runs on S3 take longer (listings): a longer pause between
                // them leaves pushes the same chance to get their manifest in.
                // 3 ms pauses left a push on a busy two-core machine no
                // chance in 200 tries (twice in nine runs); collections still
                // run back to back, only less densely.
                let pause = if app.storage == crate::util::Storage::S3 { 30 } else { 10 };
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            runs
        };
        let clients = futures_util::future::join_all((0..8u8).map(|client| {
            let app = &app;
            async move {
                let mut pushed = Vec::new();
                for step in 0..4usize {
                    let name = format!("library/mix{}", (client as usize + step) % 4);
                    let own = body(client, step, 3000);
                    let layers: [&[u8]; 2] = [b"layer shared by everyone", &own];
                    let config = format!(r#"{{"architecture":"amd64","os":"linux","client":{client},"step":{step}}}"#).into_bytes();
                    let manifest = image_manifest(&config, &layers);
                    let tag = format!("c{client}s{step}");
                    let mut stored = false;
                    // A liveness bound, generous for a loaded machine: a collection
                    // may take the fresh blobs again and again before a push wins.
                    for attempt in 0..200u64 {
                        for blob in [config.as_slice(), layers[0], layers[1]] {
                            let res = app.post(&format!("/v2/{name}/blobs/uploads/?digest={}", digest_of(blob)))
                                .admin().raw("application/octet-stream", blob.to_vec()).send().await;
                            assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
                        }
                        let res = put_manifest(app, &name, &tag, OCI_MANIFEST, &manifest).await;
                        if res.status == StatusCode::CREATED {
                            stored = true;
                            break;
                        }
                        assert_eq!(error_code(&res), "MANIFEST_BLOB_UNKNOWN", "{}", res.text());
                        // As a client would, wait a little longer each time.
                        tokio::time::sleep(Duration::from_millis(2 * attempt)).await;
                    }
                    assert!(stored, "client {client} step {step} never got its manifest in");
                    if step == 1 {
                        let res = app.delete(&format!("/v2/{name}/manifests/{}", digest_of(&manifest))).admin().send().await;
                        assert_eq!(res.status, StatusCode::ACCEPTED);
                    } else {
                        pushed.push((name, tag, manifest, vec![config.clone(), layers[0].to_vec(), own.clone()]));
                    }
                }
                pushed
            }
        }));
        let (runs, pushed) = tokio::join!(collector, async {
            let pushed = clients.await;
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            pushed
        });
        assert!(runs > 0);
        // One more collection with the default grace; then every image that
        // is still named is whole, and the content is consistent.
        collect_garbage(app.store(), &app.state.registry.blobs, GcOptions::default()).await.unwrap();
        for (name, tag, manifest, blobs) in pushed.into_iter().flatten() {
            let res = app.get(&format!("/v2/{name}/manifests/{tag}")).admin().send().await;
            assert_eq!(res.status, StatusCode::OK, "{name}:{tag}");
            assert_eq!(res.body.to_vec(), manifest);
            for blob in blobs {
                assert_same(pull_blob(&app, &name, &digest_of(&blob)).await, &blob, &format!("{name}:{tag}"));
            }
        }
        assert_consistent(&app).await;
    }
);

registry_test!(
    async fn blobs_are_visible_per_repository_and_mounts_link_them(app) {
        let digest = push_blob(&app, "library/vis-a", b"only in a").await;
        for other in ["library/vis-b", "library/never-pushed"] {
            let res = app.request(Method::HEAD, &format!("/v2/{other}/blobs/{digest}")).admin().send().await;
            assert_eq!(res.status, StatusCode::NOT_FOUND, "{other}");
            let res = app.get(&format!("/v2/{other}/blobs/{digest}")).admin().send().await;
            assert_eq!(error_code(&res), "BLOB_UNKNOWN");
        }
        // A mount from a repository without the blob opens a session instead.
        let res = app.post(&format!("/v2/library/vis-b/blobs/uploads/?mount={digest}&from=library/vis-c")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let res = app.post(&format!("/v2/library/vis-b/blobs/uploads/?mount={digest}&from=library/vis-a")).admin().send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(pull_blob(&app, "library/vis-b", &digest).await.unwrap(), b"only in a");

        // A docker-style client: one token for both scopes, then the mount.
        let res = app
            .get("/service/token?service=harbor-registry&scope=repository:library/vis-d:push,pull&scope=repository:library/vis-a:pull")
            .admin()
            .send()
            .await;
        let token = res.json()["token"].as_str().unwrap().to_string();
        let res = app
            .post(&format!("/v2/library/vis-d/blobs/uploads/?mount={digest}&from=library/vis-a"))
            .bearer(&token)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());

        // Deleting the blob in one repository leaves it in the others.
        let res = app.delete(&format!("/v2/library/vis-a/blobs/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        assert_eq!(pull_blob(&app, "library/vis-a", &digest).await, Err(StatusCode::NOT_FOUND));
        assert_eq!(pull_blob(&app, "library/vis-b", &digest).await.unwrap(), b"only in a");
        assert_consistent(&app).await;
    }
);

registry_test!(
    async fn sha512_content_end_to_end(app) {
        let name = "library/sha512";
        let sha512 = sha512_of;
        let layer = b"a layer addressed by sha512".to_vec();
        let digest = sha512(&layer);
        let res = app.post(&format!("/v2/{name}/blobs/uploads/?digest={digest}")).admin().raw("application/octet-stream", layer.clone()).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        let res = app.request(Method::HEAD, &format!("/v2/{name}/blobs/{digest}")).admin().send().await;
        assert_eq!(res.header("content-length"), Some(layer.len().to_string().as_str()));
        assert_eq!(pull_blob(&app, name, &digest).await.unwrap(), layer);

        // Chunked, hashing with sha512 from the start.
        let res = app.post(&format!("/v2/{name}/blobs/uploads/?digest-algorithm=sha512")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let location = res.header("location").unwrap().to_string();
        assert_eq!(patch(&app, &location, "0-2", b"abc".to_vec()).await.status, StatusCode::ACCEPTED);
        let res = app.put(&format!("{location}?digest={}", sha512(b"abcdef"))).admin().raw("application/octet-stream", b"def".to_vec()).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        // Chunked with the default algorithm, committed by a sha512 digest.
        let location = start_upload(&app, name).await;
        assert_eq!(patch(&app, &location, "0-2", b"xyz".to_vec()).await.status, StatusCode::ACCEPTED);
        let res = app.put(&format!("{location}?digest={}", sha512(b"xyz"))).admin().send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(pull_blob(&app, name, &sha512(b"xyz")).await.unwrap(), b"xyz");

        let res = app.post(&format!("/v2/{name}/blobs/uploads/?digest-algorithm=sha384")).admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(error_code(&res), "DIGEST_INVALID");

        // A manifest over sha512 blobs; the blob goes with a collection once unused.
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        push_blob(&app, name, config).await;
        let manifest = json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest_of(config), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest, "size": layer.len()}],
        }).to_string().into_bytes();
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_consistent(&app).await;
        let res = app.delete(&format!("/v2/{name}/blobs/{}", sha512(b"xyz"))).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let stats = collect_garbage(app.store(), &app.state.registry.blobs, options(0, 3600)).await.unwrap();
        assert!(stats.blobs >= 1, "{stats:?}");
        assert_eq!(pull_blob(&app, name, &sha512(b"xyz")).await, Err(StatusCode::NOT_FOUND));
        assert_eq!(pull_blob(&app, name, &digest).await.unwrap(), layer);
        assert_consistent(&app).await;
    }
);

registry_test!(
    async fn deleting_a_child_while_its_index_is_pushed_never_fails_the_server(app) {
        let name = "library/index-race";
        for round in 0..10 {
            let own = body(9, round, 100);
            let layers: [&[u8]; 1] = [&own];
            let config = format!(r#"{{"architecture":"amd64","os":"linux","round":{round}}}"#).into_bytes();
            push_blob(&app, name, &config).await;
            push_blob(&app, name, &own).await;
            let child = image_manifest(&config, &layers);
            let res = put_manifest(&app, name, &format!("child{round}"), OCI_MANIFEST, &child).await;
            assert_eq!(res.status, StatusCode::CREATED);
            let index = json!({
                "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [{"mediaType": OCI_MANIFEST, "digest": digest_of(&child), "size": child.len(),
                               "platform": {"architecture": "amd64", "os": "linux"}}],
            }).to_string().into_bytes();
            let tag = format!("index{round}");
            let (put, delete) = tokio::join!(
                put_manifest(&app, name, &tag, "application/vnd.oci.image.index.v1+json", &index),
                app.delete(&format!("/v2/{name}/manifests/{}", digest_of(&child))).admin().send()
            );
            assert!(put.status.is_client_error() || put.status == StatusCode::CREATED, "{}", put.text());
            assert!(delete.status.is_client_error() || delete.status == StatusCode::ACCEPTED, "{}", delete.text());
            // Exactly one of them won.
            assert_ne!(put.status == StatusCode::CREATED, delete.status == StatusCode::ACCEPTED, "round {round}: {} {}", put.status, delete.status);
        }
        assert_consistent(&app).await;
    }
);

registry_test!(
    async fn a_chunk_must_have_the_length_its_range_names(app) {
        let name = "library/ranges";
        let location = start_upload(&app, name).await;
        // Said up front by Content-Length: refused before a byte is read.
        let res = app
            .request(Method::PATCH, &location)
            .admin()
            .header("content-range", "0-0")
            .header("content-length", "4")
            .raw("application/octet-stream", b"abcd".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(error_code(&res), "BLOB_UPLOAD_INVALID");
        // Found while streaming (no Content-Length): refused, nothing kept.
        let res = patch(&app, &location, "0-0", b"abcd".to_vec()).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        assert_eq!(error_code(&res), "BLOB_UPLOAD_INVALID");
        let res = app.get(&location).admin().send().await;
        assert_eq!(res.header("range"), Some("0-0"));
        let res = patch(&app, &location, "0-3", b"abcd".to_vec()).await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        assert_eq!(res.header("range"), Some("0-3"));
        let res = app
            .put(&format!("{location}?digest={}", digest_of(b"abcdef")))
            .admin()
            .header("content-range", "4-9")
            .raw("application/octet-stream", b"ef".to_vec())
            .send()
            .await;
        assert_eq!(error_code(&res), "BLOB_UPLOAD_INVALID");
        let res = app
            .put(&format!("{location}?digest={}", digest_of(b"abcdef")))
            .admin()
            .header("content-range", "4-5")
            .raw("application/octet-stream", b"ef".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_same(pull_blob(&app, name, &digest_of(b"abcdef")).await, b"abcdef", "the blob");
        assert_consistent(&app).await;
    }
);

registry_test!(
    async fn a_manifest_is_served_as_a_blob_too(app) {
        let name = "library/manifest-blob";
        let (manifest, digest) = push_image(&app, name, "v1", &[b"some layer"]).await;
        let res = app.request(Method::HEAD, &format!("/v2/{name}/blobs/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("content-length"), Some(manifest.len().to_string().as_str()));
        assert_same(pull_blob(&app, name, &digest).await, &manifest, "the manifest as a blob");
        let res = app.get(&format!("/v2/{name}/blobs/{digest}")).header("range", "bytes=2-5").admin().send().await;
        assert_eq!(res.status, StatusCode::PARTIAL_CONTENT);
        assert_eq!(res.body, manifest[2..6].to_vec());
        assert_eq!(pull_blob(&app, "library/elsewhere", &digest).await, Err(StatusCode::NOT_FOUND));
    }
);

crate::backend_test!(
    async fn chunks_in_a_directory_extend_one_file_under_its_lock(app) {
        let berth_store::blobs::BlobStore::Files(files) = &app.state.registry.blobs else {
            panic!("backend tests keep blobs in a directory");
        };
        let name = "library/in-place";
        let location = start_upload(&app, name).await;
        let id = location.rsplit('/').next().unwrap().to_string();
        let data = files.upload_dir(&id).join(berth_store::blobs::IN_PLACE);
        let res = patch(&app, &location, "0-4", b"hello".to_vec()).await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        assert_eq!(std::fs::read(&data).unwrap(), b"hello", "the chunk is the file");
        // A request killed mid-chunk leaves bytes past the recorded ones.
        std::fs::OpenOptions::new().append(true).open(&data).unwrap().write_all(b"GARBAGE").unwrap();
        let res = app.get(&location).admin().send().await;
        assert_eq!(res.header("range"), Some("0-4"), "the session records what was recorded");
        // While another request holds the file, a chunk and a commit are
        // refused and change nothing.
        let held = files.hold(&id).await.unwrap().expect("the file is free");
        let res = patch(&app, &location, "5-10", b" world".to_vec()).await;
        assert_eq!(res.status, StatusCode::RANGE_NOT_SATISFIABLE, "{}", res.text());
        assert_eq!(res.header("range"), Some("0-4"));
        let res = app.put(&format!("{location}?digest={}", digest_of(b"hello"))).admin().send().await;
        assert_eq!(res.status, StatusCode::RANGE_NOT_SATISFIABLE, "{}", res.text());
        assert!(files.hold(&id).await.unwrap().is_none(), "one holder at a time");
        drop(held);
        // The next chunk goes after the recorded bytes, not after the garbage.
        let res = patch(&app, &location, "5-10", b" world".to_vec()).await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        assert_eq!(std::fs::read(&data).unwrap(), b"hello world");
        std::fs::OpenOptions::new().append(true).open(&data).unwrap().write_all(b"TAIL").unwrap();
        let res = app.put(&format!("{location}?digest={}", digest_of(b"hello world"))).admin().send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_same(pull_blob(&app, name, &digest_of(b"hello world")).await, b"hello world", "the blob");
        assert!(!files.upload_dir(&id).exists(), "the session's directory is gone");
        // A digest of another algorithm than the session's hash reads the file again.
        let location = start_upload(&app, name).await;
        let res = patch(&app, &location, "0-5", b"sha512".to_vec()).await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let sha512 = sha512_of(b"sha512!");
        let res = app
            .put(&format!("{location}?digest={sha512}"))
            .admin()
            .header("content-range", "6-6")
            .raw("application/octet-stream", b"!".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_same(pull_blob(&app, name, &sha512).await, b"sha512!", "the sha512 blob");
        assert_consistent(&app).await;
    }
);
