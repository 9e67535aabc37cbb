//! `/quotas`: each project's storage limit and usage, for administrators.

use std::collections::HashMap;
use std::time::Duration;

use axum::http::StatusCode;
use berth_store::repo::gc::{GcOptions, collect_garbage};
use serde_json::{Value, json};

use crate::backend_test;
use crate::registry::{digest_of, error_code, image_manifest, push_blob, push_image, put_manifest};
use crate::util::TestApp;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

backend_test!(
    async fn quotas_show_each_project_with_its_limit_and_exact_usage(app) {
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "quoted"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get("/api/v2.0/quotas").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("x-total-count"), Some("2"));
        let body = res.json();
        assert_eq!(body[0]["id"], 1);
        assert_eq!(body[0]["ref"], json!({"id": 1, "name": "library", "owner_name": "admin"}));
        assert_eq!(body[0]["hard"], json!({"storage": -1}));
        assert_eq!(body[0]["used"], json!({"storage": 0}));
        assert!(body[0]["creation_time"].as_str().is_some_and(|t| !t.is_empty()));
        let quoted = body[1]["id"].as_i64().unwrap();
        assert_eq!(body[1]["ref"]["name"], "quoted");

        // Usage: a blob shared by two repositories of the project counts once.
        let shared = b"a layer two repositories share".to_vec();
        push_image(&app, "quoted/one", "v1", &[&shared]).await;
        push_image(&app, "quoted/two", "v1", &[&shared]).await;
        let config_one = br#"{"architecture":"amd64","os":"linux","layers":1}"#.len() as i64;
        let body = app.get(&format!("/api/v2.0/quotas/{quoted}")).admin().send().await.json();
        let used = body["used"]["storage"].as_i64().unwrap();
        let (_, expected) = app.store().projects().quota(quoted).await.unwrap().unwrap();
        assert_eq!(used, expected);
        assert!(used >= shared.len() as i64 + config_one, "{body}");
        assert!(used < 2 * shared.len() as i64 + config_one + 2000, "the layer counts once: {body}");

        // Filters, sorting and paging.
        let res = app.get(&format!("/api/v2.0/quotas?reference=project&reference_id={quoted}")).admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));
        assert_eq!(res.json()[0]["ref"]["name"], "quoted");
        for other in ["reference=robot", "reference_id=nope"] {
            let res = app.get(&format!("/api/v2.0/quotas?{other}")).admin().send().await;
            assert_eq!(res.status, StatusCode::OK);
            assert_eq!(res.json(), json!([]), "{other}");
        }
        let res = app.get("/api/v2.0/quotas?sort=-used.storage&page_size=1").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("2"));
        assert_eq!(res.json()[0]["ref"]["name"], "quoted");
        assert!(res.header("link").is_some_and(|l| l.contains("rel=\"next\"")));
    }
);

backend_test!(
    async fn a_lowered_quota_refuses_pushes_beyond_it(app) {
        let body = json!({"hard": {"storage": 10}});
        let res = app.put("/api/v2.0/quotas/1").admin().json(&body).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(app.get("/api/v2.0/quotas/1").admin().send().await.json()["hard"]["storage"], 10);
        let res = app
            .post(&format!("/v2/library/limited/blobs/uploads/?digest={}", digest_of(b"more than ten bytes")))
            .admin()
            .raw("application/octet-stream", b"more than ten bytes".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert_eq!(res.json()["errors"][0]["code"], "DENIED");
        assert!(res.text().contains("Quota exceeded"), "{}", res.text());
        assert!(res.text().contains("upper limit of 10 bytes"), "{}", res.text());
        let res = app.put("/api/v2.0/quotas/1").admin().json(&json!({"hard": {"storage": -1}})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        push_blob(&app, "library/limited", b"more than ten bytes").await;
    }
);

backend_test!(
    async fn quota_requests_are_checked_and_for_administrators_only(app) {
        for (body, message) in [
            (json!({}), "hard required in body"),
            (json!({"hard": {}}), "hard required in body"),
            (json!({"hard": {"storage": 0}}), "invalid value for resource storage"),
            (json!({"hard": {"storage": -2}}), "invalid value for resource storage"),
            (json!({"hard": {"count": 5, "storage": 5}}), "resource count not support"),
        ] {
            let res = app.put("/api/v2.0/quotas/1").admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}");
            assert!(res.text().contains(message), "{body}: {}", res.text());
        }
        assert_eq!(app.store().projects().quota(1).await.unwrap(), Some((-1, 0)), "nothing changed");
        let res = app.get("/api/v2.0/quotas/999").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.put("/api/v2.0/quotas/999").admin().json(&json!({"hard": {"storage": 5}})).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get("/api/v2.0/quotas/x").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);

        app.create_user("quota-user", "Quota-Passw0rd").await;
        for (method, path) in [("GET", "/api/v2.0/quotas"), ("GET", "/api/v2.0/quotas/1"), ("PUT", "/api/v2.0/quotas/1")] {
            let method: axum::http::Method = method.parse().unwrap();
            let res = app
                .request(method.clone(), path)
                .basic("quota-user", "Quota-Passw0rd")
                .json(&json!({"hard": {"storage": 5}}))
                .send()
                .await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "{method} {path}");
            let res = app.request(method.clone(), path).json(&json!({"hard": {"storage": 5}})).send().await;
            assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        }
        assert_eq!(app.store().projects().quota(1).await.unwrap(), Some((-1, 0)));
    }
);

/// Creates project `name` as admin (with `storage_limit` when given); returns its id.
async fn create_project(app: &TestApp, name: &str, limit: Option<i64>) -> i64 {
    let mut body = json!({"project_name": name});
    if let Some(limit) = limit {
        body["storage_limit"] = json!(limit);
    }
    let res = app
        .post("/api/v2.0/projects")
        .admin()
        .json(&body)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    crate::harbor::fixtures::id_from_location(&res)
}

/// The project's usage as `GET /quotas/{id}` shows it; the project summary must agree.
async fn usage(app: &TestApp, project: &str, id: i64) -> i64 {
    let quota = app
        .get(&format!("/api/v2.0/quotas/{id}"))
        .admin()
        .send()
        .await
        .json();
    let used = quota["used"]["storage"]
        .as_i64()
        .unwrap_or_else(|| panic!("{quota}"));
    let summary = app
        .get(&format!("/api/v2.0/projects/{project}/summary"))
        .admin()
        .send()
        .await
        .json();
    assert_eq!(
        summary["quota"]["used"]["storage"],
        json!(used),
        "the summary agrees with /quotas"
    );
    used
}

/// The blobs a manifest stands for, by digest with their sizes: itself, and
/// the config and layers it names.
fn blobs_of(manifest: &[u8]) -> Vec<(String, i64)> {
    let body: Value = serde_json::from_slice(manifest).unwrap();
    let mut found = vec![(digest_of(manifest), manifest.len() as i64)];
    let named = body
        .get("config")
        .into_iter()
        .chain(body["layers"].as_array().into_iter().flatten());
    for descriptor in named {
        found.push((
            descriptor["digest"].as_str().unwrap().to_string(),
            descriptor["size"].as_i64().unwrap(),
        ));
    }
    found
}

/// The total size of the distinct blobs among `sets`.
fn distinct(sets: &[&[(String, i64)]]) -> i64 {
    let mut all: HashMap<&str, i64> = HashMap::new();
    for set in sets {
        for (digest, size) in set.iter() {
            all.insert(digest, *size);
        }
    }
    all.values().sum()
}

/// The blobs pushed into project `id` that no manifest has named yet, as the store lists them.
async fn pending_blobs(app: &TestApp, id: i64) -> Vec<(String, i64)> {
    let pool = sqlx::AnyPool::connect(&app.database_url)
        .await
        .expect("connect");
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT b.digest, b.size FROM project_blobs pb JOIN blobs b ON b.id = pb.blob_id \
         WHERE pb.project_id = $1 AND pb.pending_since IS NOT NULL",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    rows
}

/// What project `project`'s usage must be, read from what is stored: the
/// distinct blobs of the artifacts left (listed through the API, their
/// manifests pulled) and the blobs pushed but not yet named by a manifest.
async fn expected_usage(app: &TestApp, project: &str, id: i64) -> i64 {
    let mut blobs: HashMap<String, i64> = HashMap::new();
    let res = app
        .get(&format!(
            "/api/v2.0/projects/{project}/repositories?page_size=100"
        ))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    for repository in res.json().as_array().unwrap() {
        let name = repository["name"].as_str().unwrap();
        let short = name.strip_prefix(&format!("{project}/")).unwrap();
        let res = app
            .get(&format!(
                "/api/v2.0/projects/{project}/repositories/{short}/artifacts?page_size=100"
            ))
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let artifacts = res.json();
        assert!(
            artifacts.as_array().unwrap().len() < 100,
            "one page holds them all"
        );
        for artifact in artifacts.as_array().unwrap() {
            let digest = artifact["digest"].as_str().unwrap();
            let res = app
                .get(&format!("/v2/{name}/manifests/{digest}"))
                .admin()
                .header("accept", OCI_MANIFEST)
                .send()
                .await;
            assert_eq!(
                res.status,
                StatusCode::OK,
                "{name}@{digest}: {}",
                res.text()
            );
            blobs.extend(blobs_of(&res.body));
        }
    }
    blobs.extend(pending_blobs(app, id).await);
    blobs.values().sum()
}

/// Harbor's deleteArtifact of `digest` in `project/repository`.
async fn delete_artifact(
    app: &TestApp,
    project: &str,
    repository: &str,
    digest: &str,
) -> crate::util::TestResponse {
    app.delete(&format!(
        "/api/v2.0/projects/{project}/repositories/{repository}/artifacts/{digest}"
    ))
    .admin()
    .send()
    .await
}

backend_test!(
    async fn deleting_repositories_releases_what_only_they_used(app) {
        let id = create_project(&app, "drops", None).await;
        let shared = b"a layer both repositories use".to_vec();
        let (one, _) = push_image(&app, "drops/one", "v1", &[&shared, b"a layer only one uses"]).await;
        let (two, _) = push_image(&app, "drops/two", "v1", &[&shared, b"a layer only two uses, longer"]).await;
        let (one, two) = (blobs_of(&one), blobs_of(&two));
        assert_eq!(usage(&app, "drops", id).await, distinct(&[&one, &two]), "each blob counts once");

        let res = app.delete("/api/v2.0/projects/drops/repositories/one").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(usage(&app, "drops", id).await, distinct(&[&two]), "what only one used is released");
        let res = app.delete("/api/v2.0/projects/drops/repositories/two").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(usage(&app, "drops", id).await, 0);
        assert_eq!(usage(&app, "library", 1).await, 0, "other projects are untouched");
    }
);

backend_test!(
    async fn deleting_artifacts_releases_what_no_artifact_left_uses(app) {
        let id = create_project(&app, "gone", None).await;
        let shared = b"a layer three artifacts use".to_vec();
        let (a, a_digest) = push_image(&app, "gone/one", "a", &[&shared, b"only artifact a"]).await;
        let (b, b_digest) = push_image(&app, "gone/one", "b", &[&shared, b"only artifact b, in one"]).await;
        let (c, c_digest) = push_image(&app, "gone/two", "c", &[&shared, b"only artifact c, in the other one"]).await;
        // An accessory of c (deleted with it) and an index naming c.
        let (sig_config, sig_layer) = (br#"{"signed":"c"}"#, b"a signature of artifact c");
        push_blob(&app, "gone/two", sig_config).await;
        push_blob(&app, "gone/two", sig_layer).await;
        let mut accessory: Value = serde_json::from_slice(&image_manifest(sig_config, &[sig_layer])).unwrap();
        accessory["subject"] = json!({"mediaType": OCI_MANIFEST, "digest": c_digest, "size": c.len()});
        let accessory = accessory.to_string().into_bytes();
        let res = put_manifest(&app, "gone/two", &digest_of(&accessory), OCI_MANIFEST, &accessory).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": c_digest, "size": c.len(), "platform": {"architecture": "amd64", "os": "linux"}}
        ]})
        .to_string()
        .into_bytes();
        let res = put_manifest(&app, "gone/two", "multi", OCI_INDEX, &index).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let (a, b, c, accessory) = (blobs_of(&a), blobs_of(&b), blobs_of(&c), blobs_of(&accessory));
        let index_digest = digest_of(&index);
        let index = vec![(index_digest.clone(), index.len() as i64)];
        assert_eq!(usage(&app, "gone", id).await, distinct(&[&a, &b, &c, &accessory, &index]));

        // `/v2/` DELETE by digest: what only a used goes; the shared layer stays.
        let res = app.delete(&format!("/v2/gone/one/manifests/{a_digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        assert_eq!(usage(&app, "gone", id).await, distinct(&[&b, &c, &accessory, &index]));
        // The blobs stay fetchable in the repository until a collection.
        let res = app.get(&format!("/v2/gone/one/blobs/{}", digest_of(b"only artifact a"))).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        // Harbor's deleteArtifact.
        let res = delete_artifact(&app, "gone", "one", &b_digest).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(usage(&app, "gone", id).await, distinct(&[&c, &accessory, &index]));
        // A tag delete leaves its artifact (`/v2/` DELETE by tag removes the tag only).
        let res = app.delete("/v2/gone/two/manifests/c").admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        assert_eq!(usage(&app, "gone", id).await, distinct(&[&c, &accessory, &index]));
        // The index: its own manifest goes, its child stays.
        let res = app.delete(&format!("/v2/gone/two/manifests/{index_digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        assert_eq!(usage(&app, "gone", id).await, distinct(&[&c, &accessory]));
        // The last artifact, with its accessory.
        let res = delete_artifact(&app, "gone", "two", &c_digest).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(usage(&app, "gone", id).await, 0);
    }
);

backend_test!(
    async fn a_collection_releases_only_what_is_still_charged(app) {
        let id = create_project(&app, "swept", None).await;
        let (kept, _) = push_image(&app, "swept/kept", "v1", &[b"a layer that stays"]).await;
        let (gone, gone_digest) = push_image(&app, "swept/gone", "v1", &[b"a layer deleted", b"and another one"]).await;
        let loose = b"a blob no manifest names".to_vec();
        push_blob(&app, "swept/gone", &loose).await;
        let (kept, gone) = (blobs_of(&kept), blobs_of(&gone));
        let loose = vec![(digest_of(&loose), loose.len() as i64)];
        assert_eq!(usage(&app, "swept", id).await, distinct(&[&kept, &gone, &loose]));
        let res = delete_artifact(&app, "swept", "gone", &gone_digest).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(usage(&app, "swept", id).await, distinct(&[&kept, &loose]));
        // With no grace, the loose blob goes too, released once; the deleted
        // image's links, released at the delete, are not released again.
        let options = GcOptions { grace: Duration::ZERO, upload_expiry: Duration::from_secs(3600), ..Default::default() };
        let stats = collect_garbage(app.store(), &app.state.registry.blobs, options).await.unwrap();
        assert_eq!(stats.links, 4 + 1, "the image's own blobs and the loose one: {stats:?}");
        assert_eq!(usage(&app, "swept", id).await, distinct(&[&kept]));
    }
);

backend_test!(
    async fn a_push_after_a_delete_is_charged_again_within_the_limit(app) {
        let id = create_project(&app, "again", None).await;
        let (a, a_digest) = push_image(&app, "again/one", "v1", &[b"the layer pushed again"]).await;
        let image = distinct(&[&blobs_of(&a)]);
        assert_eq!(usage(&app, "again", id).await, image);
        let res = app.delete(&format!("/v2/again/one/manifests/{a_digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        assert_eq!(usage(&app, "again", id).await, 0);

        // The blobs are still linked: the manifest alone charges them again.
        let res = put_manifest(&app, "again/one", "v1", OCI_MANIFEST, &a).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(usage(&app, "again", id).await, image);
        // So does one that moves a tag (another path on SQLite).
        let (b, b_digest) = push_image(&app, "again/one", "moved", &[b"another layer"]).await;
        let both = distinct(&[&blobs_of(&a), &blobs_of(&b)]);
        assert_eq!(usage(&app, "again", id).await, both);
        let res = delete_artifact(&app, "again", "one", &a_digest).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(usage(&app, "again", id).await, distinct(&[&blobs_of(&b)]));
        let res = put_manifest(&app, "again/one", "moved", OCI_MANIFEST, &a).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(usage(&app, "again", id).await, both);
        for digest in [&a_digest, &b_digest] {
            let res = delete_artifact(&app, "again", "one", digest).await;
            assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        }
        assert_eq!(usage(&app, "again", id).await, 0);

        // The charge is checked against the limit: beyond it, refused with
        // Harbor's message, and nothing is charged or stored.
        let res = app.put(&format!("/api/v2.0/quotas/{id}")).admin().json(&json!({"hard": {"storage": image - 1}})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = put_manifest(&app, "again/one", "v1", OCI_MANIFEST, &a).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert_eq!(error_code(&res), "DENIED");
        let message = res.json()["errors"][0]["message"].as_str().unwrap().to_string();
        assert_eq!(
            message,
            format!(
                "Quota exceeded when processing the request of adding {image} bytes of storage resource, \
                 which when updated to current usage of 0 bytes will exceed the configured upper limit of {} \
                 bytes of the project's storage quota",
                image - 1
            )
        );
        assert_eq!(usage(&app, "again", id).await, 0);
        let res = app.get(&format!("/v2/again/one/manifests/{a_digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        // At the limit: accepted, and then nothing more fits.
        let res = app.put(&format!("/api/v2.0/quotas/{id}")).admin().json(&json!({"hard": {"storage": image}})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = put_manifest(&app, "again/one", "v1", OCI_MANIFEST, &a).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(usage(&app, "again", id).await, image);
        let res = app
            .post(&format!("/v2/again/one/blobs/uploads/?digest={}", digest_of(b"1")))
            .admin()
            .raw("application/octet-stream", b"1".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert_eq!(usage(&app, "again", id).await, image);
    }
);

backend_test!(
    async fn usage_stays_exact_under_concurrent_pushes_and_deletes(app) {
        let id = create_project(&app, "busy", None).await;
        let shared: Vec<Vec<u8>> = (0..4).map(|i| format!("shared layer {i}; ").repeat(i + 3).into_bytes()).collect();
        let shared_config = br#"{"architecture":"amd64","os":"linux","shared":true}"#.to_vec();
        for blob in shared.iter().chain([&shared_config]) {
            push_blob(&app, "busy/base", blob).await;
        }
        for round in 0..3usize {
            // Pushers: images with a shared layer and a layer of their own,
            // every other one with the shared config. Even pushers upload
            // the shared blobs again; odd ones name them in the manifest only.
            // A shared blob may be unknown by the time a manifest names it: a
            // collection takes it once no artifact uses it and no push awaits
            // it (another push's manifest ends the wait of an upload).
            let pushers = futures_util::future::join_all((0..6usize).map(|t| {
                let (app, shared, shared_config) = (&app, &shared, &shared_config);
                async move {
                    for k in 0..5usize {
                        let repository = format!("busy/r{}", (t + k) % 3);
                        let layer = &shared[(t + k) % shared.len()];
                        let own = format!("round {round}, pusher {t}, image {k}; ").repeat(t + k + 1).into_bytes();
                        let config = if k % 2 == 0 {
                            shared_config.clone()
                        } else {
                            format!(r#"{{"architecture":"amd64","os":"linux","round":{round},"pusher":{t},"image":{k}}}"#)
                                .into_bytes()
                        };
                        if k % 2 == 1 || t % 2 == 0 {
                            push_blob(app, &repository, &config).await;
                        }
                        if t % 2 == 0 {
                            push_blob(app, &repository, layer).await;
                        }
                        push_blob(app, &repository, &own).await;
                        let manifest = image_manifest(&config, &[layer, &own]);
                        let res = put_manifest(app, &repository, &format!("t{t}k{k}"), OCI_MANIFEST, &manifest).await;
                        match res.status {
                            StatusCode::CREATED => {}
                            StatusCode::BAD_REQUEST if error_code(&res) == "MANIFEST_BLOB_UNKNOWN" => {}
                            other => panic!("round {round}, pusher {t}, image {k}: {other}: {}", res.text()),
                        }
                        tokio::task::yield_now().await;
                    }
                }
            }));
            // Deleters: an artifact at a time (Harbor's deleteArtifact or
            // `/v2/`), and once a whole repository.
            let deleters = futures_util::future::join_all((0..3usize).map(|d| {
                let app = &app;
                async move {
                    for i in 0..10usize {
                        let short = format!("r{}", (d + i) % 3);
                        if d == 0 && i == 6 {
                            let res = app.delete(&format!("/api/v2.0/projects/busy/repositories/{short}")).admin().send().await;
                            assert!(matches!(res.status, StatusCode::OK | StatusCode::NOT_FOUND), "{}: {}", res.status, res.text());
                            continue;
                        }
                        let res = app
                            .get(&format!("/api/v2.0/projects/busy/repositories/{short}/artifacts?page_size=100"))
                            .admin()
                            .send()
                            .await;
                        assert!(matches!(res.status, StatusCode::OK | StatusCode::NOT_FOUND), "{}: {}", res.status, res.text());
                        let listed = if res.status == StatusCode::OK { res.json() } else { json!([]) };
                        let listed = listed.as_array().unwrap();
                        let Some(digest) = listed.get(i % listed.len().max(1)).and_then(|a| a["digest"].as_str()) else {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            continue;
                        };
                        let res = if i % 2 == 0 {
                            delete_artifact(app, "busy", &short, digest).await
                        } else {
                            app.delete(&format!("/v2/busy/{short}/manifests/{digest}")).admin().send().await
                        };
                        assert!(
                            matches!(res.status, StatusCode::OK | StatusCode::ACCEPTED | StatusCode::NOT_FOUND),
                            "{}: {}",
                            res.status,
                            res.text()
                        );
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                }
            }));
            // Blobs pushed and never named, which stay charged.
            let loose = async {
                for i in 0..4usize {
                    push_blob(&app, "busy/loose", format!("round {round}, loose blob {i}; ").repeat(i + 1).as_bytes()).await;
                    tokio::task::yield_now().await;
                }
            };
            // Collections, which take only links that are neither used nor pending.
            let collector = async {
                for _ in 0..2 {
                    tokio::time::sleep(Duration::from_millis(15)).await;
                    let options = GcOptions { grace: Duration::from_secs(3600), upload_expiry: Duration::from_secs(3600), ..Default::default() };
                    collect_garbage(app.store(), &app.state.registry.blobs, options).await.unwrap();
                }
            };
            tokio::join!(pushers, deleters, loose, collector);
            let expected = expected_usage(&app, "busy", id).await;
            assert_eq!(usage(&app, "busy", id).await, expected, "round {round}");
        }
        // Everything deleted: only the blobs pushed and never named are left charged.
        let res = app.get("/api/v2.0/projects/busy/repositories?page_size=100").admin().send().await;
        for repository in res.json().as_array().unwrap() {
            let short = repository["name"].as_str().unwrap().strip_prefix("busy/").unwrap().to_string();
            let res = app.delete(&format!("/api/v2.0/projects/busy/repositories/{short}")).admin().send().await;
            assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        }
        let pending: i64 = pending_blobs(&app, id).await.iter().map(|(_, size)| size).sum();
        assert!(pending > 0);
        assert_eq!(usage(&app, "busy", id).await, pending);
    }
);

backend_test!(
    async fn a_delete_racing_a_push_or_a_delete_of_the_same_blobs_counts_them_once(app) {
        let id = create_project(&app, "race", None).await;
        let delete = async |repository: &str, digest: &str, how: usize| match how % 3 {
            0 => delete_artifact(&app, "race", repository, digest).await,
            1 => app.delete(&format!("/v2/race/{repository}/manifests/{digest}")).admin().send().await,
            _ => app.delete(&format!("/api/v2.0/projects/race/repositories/{repository}")).admin().send().await,
        };
        for round in 0..24usize {
            // Blobs of this round, used by one artifact in `one`.
            let layer = format!("round {round}: the layer at stake; ").repeat(round + 1).into_bytes();
            let (first, first_digest) = push_image(&app, "race/one", &format!("r{round}"), &[&layer]).await;
            let pause = Duration::from_micros((round as u64 * 397) % 2000);
            if round % 2 == 0 {
                // Its last artifact is deleted while a push into `two` names
                // the same blobs (still linked, and then uncharged or not).
                let (push, deleted) = tokio::join!(
                    async {
                        tokio::time::sleep(pause).await;
                        put_manifest(&app, "race/two", &format!("r{round}"), OCI_MANIFEST, &first).await
                    },
                    delete("one", &first_digest, round / 2)
                );
                assert_eq!(push.status, StatusCode::CREATED, "round {round}: {}", push.text());
                assert!(deleted.status.is_success(), "round {round}: {}", deleted.text());
            } else {
                // The two artifacts using them are deleted at once.
                let res = put_manifest(&app, "race/two", &format!("r{round}"), OCI_MANIFEST, &first).await;
                assert_eq!(res.status, StatusCode::CREATED, "round {round}: {}", res.text());
                let (one, two) = tokio::join!(delete("one", &first_digest, round / 2), async {
                    tokio::time::sleep(pause).await;
                    delete("two", &first_digest, round / 2 + 1).await
                });
                assert!(one.status.is_success(), "round {round}: {}", one.text());
                assert!(two.status.is_success(), "round {round}: {}", two.text());
            }
            let expected = expected_usage(&app, "race", id).await;
            assert_eq!(usage(&app, "race", id).await, expected, "round {round}");
        }
    }
);

backend_test!(
    async fn fsck_finds_and_repairs_a_wrong_usage(app) {
        let id = create_project(&app, "checked", None).await;
        let (kept, _) = push_image(&app, "checked/one", "v1", &[b"a layer to count"]).await;
        let expected = distinct(&[&blobs_of(&kept)]);
        assert_eq!(usage(&app, "checked", id).await, expected);
        let fsck = async |repair| berth_store::repo::fsck::check(app.store(), &app.state.registry.blobs, repair).await.unwrap();
        let report = fsck(false).await;
        assert!(report.findings.is_empty(), "{:?}", report.findings);

        // A wrong usage is found, and repair recounts it.
        app.execute_sql(&format!("UPDATE project_quotas SET used = used + 1000 WHERE project_id = {id}")).await;
        let report = fsck(false).await;
        assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
        assert_eq!(report.findings[0].subject, "checked");
        assert!(report.findings[0].problem.contains("usage"), "{:?}", report.findings);
        assert!(report.unresolved());
        assert_eq!(usage(&app, "checked", id).await, expected + 1000, "a check alone changes nothing");
        let report = fsck(true).await;
        assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
        assert!(!report.unresolved(), "{:?}", report.findings);
        assert_eq!(usage(&app, "checked", id).await, expected);
        assert!(fsck(false).await.findings.is_empty());

        // So is a link an artifact uses but that is not charged, and one
        // charged that nothing uses or waits for.
        let (_, gone) = push_image(&app, "checked/one", "v2", &[b"a layer deleted"]).await;
        let res = delete_artifact(&app, "checked", "one", &gone).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(usage(&app, "checked", id).await, expected);
        let layer = digest_of(b"a layer to count");
        let deleted = digest_of(b"a layer deleted");
        app.execute_sql(&format!(
            "UPDATE project_blobs SET charged = CASE WHEN charged = 1 THEN 0 ELSE 1 END WHERE project_id = {id} \
             AND blob_id IN (SELECT id FROM blobs WHERE digest IN ('{layer}', '{deleted}'))"
        ))
        .await;
        let report = fsck(false).await;
        let subjects: Vec<&str> = report.findings.iter().map(|f| f.subject.as_str()).collect();
        assert!(subjects.contains(&layer.as_str()) && subjects.contains(&deleted.as_str()), "{:?}", report.findings);
        let report = fsck(true).await;
        assert!(!report.unresolved(), "{:?}", report.findings);
        assert!(fsck(false).await.findings.is_empty());
        assert_eq!(usage(&app, "checked", id).await, expected);
    }
);
