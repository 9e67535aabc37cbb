//! Proxy-cache projects pulling through real upstreams: Debian's
//! docker-registry (anonymous and behind htpasswd) and a served Berth of type
//! `harbor` (a Bearer token service). What a pull fetches is stored as
//! ordinary content, served again while upstream is down, fetched once however
//! many clients ask, and checked upstream no more than once per TTL.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::clients::{blob_of, build_layout, layout_ref, noise, require, run, skopeo};
use super::{digest_of, error_code, image_manifest};
use crate::backend_test;
use crate::harbor::fixtures::id_from_location;
use crate::util::{
    ADMIN_PASSWORD, BERTH_BIN, Backend, DockerRegistry, PeerOptions, ServedBerth, Storage, TestApp,
    database_url, s3_blob_store_url,
};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// An image pushed upstream.
struct Image {
    manifest: Vec<u8>,
    digest: String,
    /// Config first, then the layers.
    blobs: Vec<Vec<u8>>,
}

impl Image {
    fn new(config: &str, layers: &[Vec<u8>]) -> Self {
        let layer_refs: Vec<&[u8]> = layers.iter().map(Vec::as_slice).collect();
        let manifest = image_manifest(config.as_bytes(), &layer_refs);
        let digest = digest_of(&manifest);
        let mut blobs = vec![config.as_bytes().to_vec()];
        blobs.extend(layers.iter().cloned());
        Self {
            manifest,
            digest,
            blobs,
        }
    }
}

/// Pushes over HTTP to the registry at `url` (Basic `auth` when given):
/// `blobs`, then `manifest` as `name:reference`.
async fn push_to(
    url: &str,
    auth: Option<(&str, &str)>,
    name: &str,
    reference: &str,
    media_type: &str,
    manifest: &[u8],
    blobs: &[Vec<u8>],
) {
    let client = reqwest::Client::new();
    let with_auth = |request: reqwest::RequestBuilder| match auth {
        Some((user, password)) => request.basic_auth(user, Some(password)),
        None => request,
    };
    for blob in blobs {
        let started = with_auth(client.post(format!("{url}/v2/{name}/blobs/uploads/")))
            .send()
            .await
            .unwrap();
        assert_eq!(started.status(), 202, "{:?}", started.text().await);
        let location = started.headers()["location"].to_str().unwrap().to_string();
        let location = if location.starts_with('/') {
            format!("{url}{location}")
        } else {
            location
        };
        let separator = if location.contains('?') { '&' } else { '?' };
        let done = with_auth(
            client
                .put(format!("{location}{separator}digest={}", digest_of(blob)))
                .header("content-type", "application/octet-stream")
                .body(blob.clone()),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(done.status(), 201, "{:?}", done.text().await);
    }
    let res = with_auth(
        client
            .put(format!("{url}/v2/{name}/manifests/{reference}"))
            .header("content-type", media_type)
            .body(manifest.to_vec()),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 201, "{:?}", res.text().await);
}

async fn push_image_to(
    url: &str,
    auth: Option<(&str, &str)>,
    name: &str,
    tag: &str,
    image: &Image,
) {
    push_to(
        url,
        auth,
        name,
        tag,
        OCI_MANIFEST,
        &image.manifest,
        &image.blobs,
    )
    .await;
}

/// Creates registry `url` of `kind` (with `credential`) and the public proxy
/// project `cache` over it.
async fn proxy_project(app: &TestApp, url: &str, kind: &str, credential: Option<(&str, &str)>) {
    proxy_project_with(app, url, kind, credential, json!({"public": "true"})).await;
}

/// [`proxy_project`] with the project's `metadata`.
async fn proxy_project_with(
    app: &TestApp,
    url: &str,
    kind: &str,
    credential: Option<(&str, &str)>,
    metadata: Value,
) {
    let mut registry = json!({"name": "upstream", "url": url, "type": kind});
    if let Some((key, secret)) = credential {
        registry["credential"] =
            json!({"type": "basic", "access_key": key, "access_secret": secret});
    }
    let res = app
        .post("/api/v2.0/registries")
        .admin()
        .json(&registry)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    let id = id_from_location(&res);
    let res = app
        .post("/api/v2.0/projects")
        .admin()
        .json(&json!({"project_name": "cache", "registry_id": id, "metadata": metadata}))
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
}

/// The artifacts of `cache/<repository>` once the one of `digest` is listed
/// (a proxied manifest is stored by a background task once its blobs are).
async fn cached(app: &TestApp, repository: &str, digest: &str) -> Vec<Value> {
    let path = format!(
        "/api/v2.0/projects/cache/repositories/{}/artifacts?with_tag=true&page_size=50",
        repository.replace('/', "%252F")
    );
    for _ in 0..500 {
        let res = app.get(&path).admin().send().await;
        if res.status == StatusCode::OK {
            let artifacts: Vec<Value> = res.json().as_array().cloned().unwrap_or_default();
            if artifacts.iter().any(|a| a["digest"] == digest) {
                return artifacts;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{digest} was never cached in cache/{repository}");
}

/// GETs `path` (anonymously: the project is public), expecting 200 and `body`.
async fn pulls(app: &TestApp, path: &str, body: &[u8]) {
    let res = app.get(path).send().await;
    assert_eq!(res.status, StatusCode::OK, "{path}: {}", res.text());
    assert!(res.body == body, "{path}: other bytes than upstream's");
}

/// Pulls `image` as `cache/<name>:<tag>` the way docker does: the manifest
/// by tag, then every blob.
async fn pull_image(app: &TestApp, name: &str, tag: &str, image: &Image) {
    let res = app
        .get(&format!("/v2/cache/{name}/manifests/{tag}"))
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    assert_eq!(res.body, image.manifest);
    assert_eq!(
        res.header("docker-content-digest"),
        Some(image.digest.as_str())
    );
    assert_eq!(res.header("content-type"), Some(OCI_MANIFEST));
    for blob in &image.blobs {
        pulls(
            app,
            &format!("/v2/cache/{name}/blobs/{}", digest_of(blob)),
            blob,
        )
        .await;
    }
}

backend_test!(
    async fn a_proxy_fetches_on_a_miss_then_serves_its_cache_while_upstream_is_down(app) {
        let peer = DockerRegistry::start(PeerOptions::default()).await;
        let image = Image::new(r#"{"architecture":"amd64","os":"linux"}"#, &[noise(300_000, 1), b"small".to_vec()]);
        push_image_to(&peer.url(), None, "team/app", "v1", &image).await;
        proxy_project(&app, &peer.url(), "docker-registry", None).await;

        // Nothing is cached before the first pull.
        let res = app.get("/api/v2.0/projects/cache/repositories").admin().send().await;
        assert_eq!(res.json(), json!([]));
        pull_image(&app, "team/app", "v1", &image).await;

        // Stored as ordinary content: listed with its tag, counted, its pull noted.
        let artifacts = cached(&app, "team/app", &image.digest).await;
        assert_eq!(artifacts.len(), 1, "{artifacts:?}");
        assert_eq!(artifacts[0]["tags"][0]["name"], "v1");
        let size = image.manifest.len() + image.blobs.iter().map(Vec::len).sum::<usize>();
        assert_eq!(artifacts[0]["size"], size, "{artifacts:?}");
        // The first pull is noted once the artifact is stored (then written in a batch).
        let mut artifact = Value::Null;
        for _ in 0..250 {
            app.state.registry.flush_pulls(app.store()).await;
            artifact = app.get(&format!("/api/v2.0/projects/cache/repositories/team%252Fapp/artifacts/{}", image.digest)).admin().send().await.json();
            if !artifact["pull_time"].as_str().unwrap().starts_with("0001") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!artifact["pull_time"].as_str().unwrap().starts_with("0001"), "{artifact}");
        // Shown as a proxy cache: in search and in the portal's project list.
        let found = app.get("/api/v2.0/search?q=cache").admin().send().await.json();
        assert!(found["project"][0]["registry_id"].as_i64().is_some(), "{found}");
        let cookie = crate::portal::sign_in_admin(&app).await;
        let page = app.get("/harbor/projects").header("cookie", &cookie).send().await.text();
        assert!(page.contains(r#"<tr data-project="cache"><td><a href="/harbor/projects/cache">cache</a></td><td>Public</td><td class="project-type">Proxy Cache</td>"#), "{page}");
        assert!(page.contains(r#"<td class="project-type">Project</td>"#), "{page}");
        let repos = app.get("/api/v2.0/projects/cache/repositories").admin().send().await.json();
        assert_eq!(repos[0]["name"], "cache/team/app");
        assert_eq!(repos[0]["artifact_count"], 1);
        // Every blob came from upstream once, though the client and the cache both wanted it.
        for blob in &image.blobs {
            assert_eq!(peer.requests(&format!("GET /v2/team/app/blobs/{}", digest_of(blob))), 1);
        }

        // With the TTL spent (0 in tests), the tag is checked with a HEAD and served from the cache.
        pull_image(&app, "team/app", "v1", &image).await;
        assert_eq!(peer.requests("HEAD /v2/team/app/manifests/v1"), 1);
        assert_eq!(peer.requests("GET /v2/team/app/manifests/v1"), 1);
        for blob in &image.blobs {
            assert_eq!(peer.requests(&format!("GET /v2/team/app/blobs/{}", digest_of(blob))), 1);
        }

        // Upstream gone: the cache answers, by tag and by digest.
        drop(peer);
        pull_image(&app, "team/app", "v1", &image).await;
        pulls(&app, &format!("/v2/cache/team/app/manifests/{}", image.digest), &image.manifest).await;
        let res = app.request(Method::HEAD, "/v2/cache/team/app/manifests/v1").send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("docker-content-digest"), Some(image.digest.as_str()));
        // What was never cached is a clear error.
        let res = app.get("/v2/cache/team/app/manifests/v2").send().await;
        assert_eq!(res.status, StatusCode::SERVICE_UNAVAILABLE, "{}", res.text());
        assert_eq!(error_code(&res), "UNAVAILABLE");
        let message = res.json()["errors"][0]["message"].as_str().unwrap().to_string();
        assert!(message.starts_with("the upstream registry is unavailable and nothing is cached"), "{message}");
        let res = app.get(&format!("/v2/cache/team/app/blobs/{}", digest_of(b"never pushed"))).send().await;
        assert_eq!(res.status, StatusCode::SERVICE_UNAVAILABLE, "{}", res.text());
    }
);

backend_test!(
    async fn a_tag_is_checked_upstream_at_most_once_per_ttl(app) {
        let peer = DockerRegistry::start(PeerOptions::default()).await;
        let first = Image::new(r#"{"architecture":"amd64","os":"linux","n":1}"#, &[b"one".to_vec()]);
        let second = Image::new(r#"{"architecture":"amd64","os":"linux","n":2}"#, &[b"two".to_vec()]);
        push_image_to(&peer.url(), None, "app", "latest", &first).await;
        let app = app.with_proxy_ttl(Duration::from_secs(3600));
        proxy_project(&app, &peer.url(), "docker-registry", None).await;
        pull_image(&app, "app", "latest", &first).await;
        cached(&app, "app", &first.digest).await;

        // The tag moves upstream; within the TTL the cache answers without asking.
        push_image_to(&peer.url(), None, "app", "latest", &second).await;
        pull_image(&app, "app", "latest", &first).await;
        assert_eq!(peer.requests("HEAD /v2/app/manifests/latest"), 0);
        assert_eq!(peer.requests("GET /v2/app/manifests/latest"), 1);

        // Once it is spent (a new instance's memory), the HEAD finds the move and the new image is fetched.
        let app = app.with_proxy_ttl(Duration::ZERO);
        pull_image(&app, "app", "latest", &second).await;
        assert_eq!(peer.requests("HEAD /v2/app/manifests/latest"), 1);
        let artifacts = cached(&app, "app", &second.digest).await;
        assert_eq!(artifacts.len(), 2, "{artifacts:?}");
        let tagged: Vec<&Value> = artifacts.iter().filter(|a| a["tags"].is_array()).collect();
        assert_eq!(tagged.len(), 1, "{artifacts:?}");
        assert_eq!(tagged[0]["digest"], second.digest.as_str());
        // The first image stays pullable by its digest, from the cache.
        pulls(&app, &format!("/v2/cache/app/manifests/{}", first.digest), &first.manifest).await;
        assert_eq!(peer.requests(&format!("GET /v2/app/manifests/{}", first.digest)), 0);

        // A tag gone upstream is gone (the cached artifact stays, by digest).
        let res = app.get("/v2/cache/app/manifests/missing").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "{}", res.text());
        assert_eq!(error_code(&res), "MANIFEST_UNKNOWN");
    }
);

backend_test!(
    async fn concurrent_cold_pulls_go_upstream_once(app) {
        let peer = DockerRegistry::start(PeerOptions::default()).await;
        let image = Image::new(r#"{"architecture":"amd64","os":"linux"}"#, &[noise(50 << 20, 3)]);
        push_image_to(&peer.url(), None, "big", "v1", &image).await;
        let app = app.with_proxy_ttl(Duration::from_secs(300));
        proxy_project(&app, &peer.url(), "docker-registry", None).await;

        let manifests = (0..8).map(|_| app.get("/v2/cache/big/manifests/v1").send());
        for res in futures_util::future::join_all(manifests).await {
            assert_eq!(res.status, StatusCode::OK, "{}", res.text());
            assert_eq!(res.body, image.manifest);
        }
        let layer = &image.blobs[1];
        let path = format!("/v2/cache/big/blobs/{}", digest_of(layer));
        let blobs = (0..8).map(|_| app.get(&path).send());
        for res in futures_util::future::join_all(blobs).await {
            assert_eq!(res.status, StatusCode::OK, "{}", res.text());
            assert_eq!(res.header("content-length"), Some(layer.len().to_string().as_str()));
            assert!(res.body == *layer, "other bytes than upstream's");
        }
        cached(&app, "big", &image.digest).await;
        assert_eq!(peer.requests("GET /v2/big/manifests/v1"), 1);
        assert_eq!(peer.requests(&format!("GET /v2/big/blobs/{}", digest_of(layer))), 1);
        assert_eq!(peer.requests(&format!("GET /v2/big/blobs/{}", digest_of(&image.blobs[0]))), 1);
    }
);

backend_test!(
    async fn proxy_speed_kb_limits_the_upstream_rate(app) {
        let peer = DockerRegistry::start(PeerOptions::default()).await;
        let layer = noise(96 << 10, 5);
        let image = Image::new(r#"{"architecture":"amd64","os":"linux"}"#, std::slice::from_ref(&layer));
        push_image_to(&peer.url(), None, "slow", "v1", &image).await;
        proxy_project_with(&app, &peer.url(), "docker-registry", None, json!({"public": "true", "proxy_speed_kb": "32"})).await;
        let res = app.get("/v2/cache/slow/manifests/v1").send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        // 96 KiB at 32 KiB/s: three seconds at least, whatever the machine.
        let started = std::time::Instant::now();
        pulls(&app, &format!("/v2/cache/slow/blobs/{}", digest_of(&layer)), &layer).await;
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(2900), "96 KiB at 32 KiB/s came in {took:?}");
    }
);

backend_test!(
    async fn upstream_sign_in_is_answered_basic_and_bearer(app) {
        // htpasswd: a Basic challenge.
        let peer = DockerRegistry::start(PeerOptions {
            basic_auth: Some(("puller".into(), "Up5tream-secret".into())),
            tls: false,
        })
        .await;
        let image = Image::new(r#"{"architecture":"amd64","os":"linux"}"#, &[b"private".to_vec()]);
        push_image_to(&peer.url(), Some(("puller", "Up5tream-secret")), "team/app", "v1", &image).await;
        proxy_project(&app, &peer.url(), "docker-registry", Some(("puller", "Up5tream-secret"))).await;
        pull_image(&app, "team/app", "v1", &image).await;
        cached(&app, "team/app", &image.digest).await;

        // Another Berth (type harbor): a Bearer challenge and its token service.
        let dir = tempfile::tempdir().unwrap();
        let upstream = served_berth(dir.path(), Backend::Sqlite).await;
        let url = upstream.url("");
        let url = url.trim_end_matches('/');
        let other = Image::new(r#"{"architecture":"arm64","os":"linux"}"#, &[b"from berth".to_vec()]);
        push_image_to(url, Some(("admin", ADMIN_PASSWORD)), "library/tool", "1.0", &other).await;
        let res = app.post("/api/v2.0/registries").admin()
            .json(&json!({"name": "berth", "url": url, "type": "harbor", "credential": {"access_key": "admin", "access_secret": ADMIN_PASSWORD}}))
            .send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let id = id_from_location(&res);
        let res = app.post("/api/v2.0/projects").admin()
            .json(&json!({"project_name": "mirror", "registry_id": id}))
            .send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get("/v2/mirror/library/tool/manifests/1.0").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.body, other.manifest);
        for blob in &other.blobs {
            let res = app.get(&format!("/v2/mirror/library/tool/blobs/{}", digest_of(blob))).admin().send().await;
            assert_eq!(res.status, StatusCode::OK, "{}", res.text());
            assert!(res.body == *blob);
        }
        // A private proxy project is not pulled through by strangers.
        let res = app.get("/v2/mirror/library/tool/manifests/1.0").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{}", res.text());
    }
);

backend_test!(
    async fn an_index_is_cached_with_the_platforms_pulled(app) {
        let peer = DockerRegistry::start(PeerOptions::default()).await;
        let amd = Image::new(r#"{"architecture":"amd64","os":"linux"}"#, &[b"shared".to_vec(), b"amd only".to_vec()]);
        let arm = Image::new(r#"{"architecture":"arm64","os":"linux"}"#, &[b"shared".to_vec(), b"arm only".to_vec()]);
        push_image_to(&peer.url(), None, "multi", &amd.digest, &amd).await;
        push_image_to(&peer.url(), None, "multi", &arm.digest, &arm).await;
        let index = json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {"mediaType": OCI_MANIFEST, "digest": amd.digest, "size": amd.manifest.len(), "platform": {"architecture": "amd64", "os": "linux"}},
                {"mediaType": OCI_MANIFEST, "digest": arm.digest, "size": arm.manifest.len(), "platform": {"architecture": "arm64", "os": "linux"}},
            ],
        }).to_string().into_bytes();
        let index_digest = digest_of(&index);
        push_to(&peer.url(), None, "multi", "v1", OCI_INDEX, &index, &[]).await;
        proxy_project(&app, &peer.url(), "docker-registry", None).await;

        // A client on amd64: the index by tag, then its platform's image by digest.
        pulls(&app, "/v2/cache/multi/manifests/v1", &index).await;
        pull_image(&app, "multi", &amd.digest, &amd).await;
        // Listed as Harbor lists an index: its children under it, not beside it.
        let mut listed = Value::Null;
        for _ in 0..500 {
            let artifacts = cached(&app, "multi", &index_digest).await;
            listed = artifacts[0].clone();
            if artifacts.len() == 1 && listed["references"].as_array().is_some_and(|r| !r.is_empty()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(listed["digest"], index_digest.as_str(), "{listed}");
        assert_eq!(listed["tags"][0]["name"], "v1", "{listed}");
        let references = listed["references"].as_array().unwrap();
        assert_eq!(references.len(), 1, "{listed}");
        assert_eq!(references[0]["child_digest"], amd.digest.as_str());
        assert_eq!(references[0]["platform"]["architecture"], "amd64");
        let child = app.get(&format!("/api/v2.0/projects/cache/repositories/multi/artifacts/{}", amd.digest)).admin().send().await;
        assert_eq!(child.status, StatusCode::OK, "{}", child.text());
        let res = app.get(&format!("/api/v2.0/projects/cache/repositories/multi/artifacts/{}", arm.digest)).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "{}", res.text());
        // Nothing of the other platform was fetched.
        assert_eq!(peer.requests(&format!("GET /v2/multi/manifests/{}", arm.digest)), 0);
        assert_eq!(peer.requests(&format!("GET /v2/multi/blobs/{}", digest_of(b"arm only"))), 0);

        // Upstream gone: the index and the cached platform still answer.
        drop(peer);
        pulls(&app, "/v2/cache/multi/manifests/v1", &index).await;
        pull_image(&app, "multi", &amd.digest, &amd).await;
    }
);

/// `berth serve` on `backend` in `dir` with blobs in `blob_store` (else the
/// data directory), reachable at its own port.
async fn served_berth_with(dir: &Path, backend: Backend, blob_store: Option<&str>) -> ServedBerth {
    let database = database_url(backend, dir).await;
    ServedBerth::start(|port| {
        let mut command = Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(dir.join("data"))
            .env("DATABASE_URL", &database)
            .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("EXTERNAL_URL", format!("http://127.0.0.1:{port}"))
            .env("PROXY_CACHE_TTL", "0")
            .env_remove("BLOB_STORE");
        if let Some(store) = blob_store {
            command.args(["--blob-store", store]);
        }
        command
    })
    .await
}

async fn served_berth(dir: &Path, backend: Backend) -> ServedBerth {
    served_berth_with(dir, backend, None).await
}

/// skopeo pulls an image and one platform of an index through a served
/// Berth's proxy project; what it gets is what upstream has.
async fn skopeo_pulls_through_a_proxy(backend: Backend, storage: Storage) {
    require("skopeo");
    let work = tempfile::tempdir().unwrap();
    let layout = build_layout(work.path());
    let peer = DockerRegistry::start(PeerOptions::default()).await;
    let upstream = |repo: &str| {
        format!(
            "docker://{}/{repo}",
            peer.url().trim_start_matches("http://")
        )
    };
    run(skopeo()
        .args(["copy", "--dest-tls-verify=false"])
        .arg(format!("oci:{}:v3", layout.dir.display()))
        .arg(upstream("team/image:v3")));
    run(skopeo()
        .args(["copy", "--all", "--dest-tls-verify=false"])
        .arg(format!("oci:{}:multi", layout.dir.display()))
        .arg(upstream("team/multi:latest")));

    let blob_store = match storage {
        Storage::Files => None,
        Storage::S3 => Some(s3_blob_store_url().await),
    };
    let server = served_berth_with(work.path(), backend, blob_store.as_deref()).await;
    let client = reqwest::Client::new();
    let api = |path: &str| server.url(&format!("/api/v2.0{path}"));
    let res = client
        .post(api("/registries"))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .json(&json!({"name": "peer", "url": peer.url(), "type": "docker-registry"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{:?}", res.text().await);
    let id: i64 = res.headers()["location"]
        .to_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let res = client
        .post(api("/projects"))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .json(&json!({"project_name": "cache", "registry_id": id, "metadata": {"public": "true"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{:?}", res.text().await);

    let proxied = |repo: &str| format!("docker://{}/cache/{repo}", server.host());
    let out = work.path().join("pulled");
    run(skopeo()
        .args(["copy", "--src-tls-verify=false", "--src-no-creds"])
        .arg(proxied("team/image:v3"))
        .arg(format!("oci:{}:v3", out.display())));
    assert_eq!(layout_ref(&out, "v3"), layout.v3);
    let pulled: Value = serde_json::from_slice(&blob_of(&out, &layout.v3)).unwrap();
    for layer in pulled["layers"].as_array().unwrap() {
        let digest = layer["digest"].as_str().unwrap();
        assert_eq!(blob_of(&out, digest), blob_of(&layout.dir, digest));
    }
    // One platform of the index (skopeo picks linux/amd64 here).
    run(skopeo()
        .args([
            "copy",
            "--src-tls-verify=false",
            "--src-no-creds",
            "--override-arch",
            "amd64",
            "--override-os",
            "linux",
        ])
        .arg(proxied("team/multi:latest"))
        .arg(format!("oci:{}:multi", out.display())));
    assert_eq!(layout_ref(&out, "multi"), layout.v3);

    // Upstream gone: a second pull is answered from the cache.
    drop(peer);
    let again = work.path().join("again");
    let mut pulled_again = false;
    for _ in 0..100 {
        let status = skopeo()
            .args(["copy", "--src-tls-verify=false", "--src-no-creds"])
            .arg(proxied("team/image:v3"))
            .arg(format!("oci:{}:v3", again.display()))
            .output()
            .unwrap();
        if status.status.success() {
            pulled_again = true;
            break;
        }
        // The background store of the first pull may still be finishing.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        pulled_again,
        "the cached image was not served with upstream down"
    );
    assert_eq!(layout_ref(&again, "v3"), layout.v3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_pulls_through_a_proxy_sqlite() {
    skopeo_pulls_through_a_proxy(Backend::Sqlite, Storage::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_pulls_through_a_proxy_postgres_s3() {
    skopeo_pulls_through_a_proxy(Backend::Postgres, Storage::S3).await;
}

backend_test!(
    async fn a_manifest_head_fetches_no_layers(app) {
        let peer = DockerRegistry::start(PeerOptions::default()).await;
        let first = Image::new(r#"{"architecture":"amd64","os":"linux","n":1}"#, &[noise(200_000, 11)]);
        push_image_to(&peer.url(), None, "app", "v1", &first).await;
        proxy_project(&app, &peer.url(), "docker-registry", None).await;

        // A HEAD by tag and by digest is answered from upstream's HEAD, headers and all.
        for reference in ["v1", first.digest.as_str()] {
            let res = app.request(Method::HEAD, &format!("/v2/cache/app/manifests/{reference}")).send().await;
            assert_eq!(res.status, StatusCode::OK, "{reference}: {}", res.text());
            assert_eq!(res.header("docker-content-digest"), Some(first.digest.as_str()));
            assert_eq!(res.header("content-type"), Some(OCI_MANIFEST));
            assert_eq!(res.header("content-length"), Some(first.manifest.len().to_string().as_str()));
            assert!(res.body.is_empty());
        }
        let res = app.request(Method::HEAD, "/v2/cache/app/manifests/missing").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        // Nothing was pulled: no manifest GET upstream, no blob, nothing cached.
        nothing_pulled(&peer, &first).await;
        assert_eq!(peer.requests("GET /v2/app/manifests/v1"), 0);
        let res = app.get("/api/v2.0/projects/cache/repositories").admin().send().await;
        assert_eq!(res.json(), json!([]));

        // A pull caches it, every blob fetched once.
        pull_image(&app, "app", "v1", &first).await;
        cached(&app, "app", &first.digest).await;
        for blob in &first.blobs {
            assert_eq!(peer.requests(&format!("GET /v2/app/blobs/{}", digest_of(blob))), 1);
        }

        // The tag moves upstream: a HEAD names the new digest and fetches nothing of it.
        let second = Image::new(r#"{"architecture":"amd64","os":"linux","n":2}"#, &[noise(200_000, 12)]);
        push_image_to(&peer.url(), None, "app", "v1", &second).await;
        let res = app.request(Method::HEAD, "/v2/cache/app/manifests/v1").send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.header("docker-content-digest"), Some(second.digest.as_str()));
        nothing_pulled(&peer, &second).await;
        assert_eq!(peer.requests("GET /v2/app/manifests/v1"), 1, "only the pull fetched the tag");
        let res = app.get("/api/v2.0/projects/cache/repositories/app/artifacts").admin().send().await;
        assert_eq!(res.json().as_array().map(Vec::len), Some(1), "{}", res.text());
    }
);

/// Asserts that `peer` was asked for neither `image`'s manifest (by digest)
/// nor any of its blobs with a GET, a moment after it logged a manifest HEAD
/// (a fetch started by the HEAD would have asked by then).
async fn nothing_pulled(peer: &DockerRegistry, image: &Image) {
    for _ in 0..250 {
        if peer.requests("HEAD /v2/app/manifests/") > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        peer.requests(&format!("GET /v2/app/manifests/{}", image.digest)),
        0
    );
    for blob in &image.blobs {
        assert_eq!(
            peer.requests(&format!("GET /v2/app/blobs/{}", digest_of(blob))),
            0,
            "a HEAD fetched a blob"
        );
    }
}

/// How long a pull from a misbehaving upstream may take to fail.
const PROMPTLY: Duration = Duration::from_secs(10);

/// How the stand-in upstream answers the `n`th (from 0) request for a blob.
type BlobAnswer = Arc<dyn Fn(usize) -> Response + Send + Sync>;

/// A hand-written upstream for misbehaviours `docker-registry` cannot show:
/// `/v2/`, the manifests it was given (by tag or digest) and blobs answered
/// as told; stopped with the test's runtime.
struct StandIn {
    url: String,
    /// `METHOD path` of each request, in order.
    requests: Arc<Mutex<Vec<String>>>,
}

/// What the stand-in serves.
#[derive(Clone)]
struct StandInContent {
    manifests: Arc<HashMap<String, Vec<u8>>>,
    blobs: Arc<HashMap<String, BlobAnswer>>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl StandIn {
    /// Serves `manifests` (OCI image manifests by reference) and `blobs` (by digest).
    async fn start(
        manifests: HashMap<String, Vec<u8>>,
        blobs: HashMap<String, BlobAnswer>,
    ) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let content = StandInContent {
            manifests: Arc::new(manifests),
            blobs: Arc::new(blobs),
            requests: requests.clone(),
        };
        let router = axum::Router::new().fallback(move |method: Method, uri: Uri| {
            let content = content.clone();
            async move { content.answer(&method, uri.path()) }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        Self {
            url: format!("http://{addr}"),
            requests,
        }
    }

    /// How many requests started with `request` (`GET /v2/...`).
    fn requests(&self, request: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with(request))
            .count()
    }
}

impl StandInContent {
    fn answer(&self, method: &Method, path: &str) -> Response {
        let seen = {
            let mut requests = self.requests.lock().unwrap();
            requests.push(format!("{method} {path}"));
            requests
                .iter()
                .filter(|r| **r == format!("{method} {path}"))
                .count()
                - 1
        };
        let not_found = || {
            (
                StatusCode::NOT_FOUND,
                r#"{"errors":[{"code":"NOT_FOUND"}]}"#,
            )
                .into_response()
        };
        if path == "/v2/" {
            return (StatusCode::OK, "{}").into_response();
        }
        if let Some((_, reference)) = path.rsplit_once("/manifests/") {
            let Some(manifest) = self.manifests.get(reference) else {
                return not_found();
            };
            return Response::builder()
                .header(header::CONTENT_TYPE, OCI_MANIFEST)
                .header("docker-content-digest", digest_of(manifest))
                .body(Body::from(manifest.clone()))
                .unwrap();
        }
        match path
            .rsplit_once("/blobs/")
            .and_then(|(_, digest)| self.blobs.get(digest))
        {
            Some(answer) => answer(seen),
            None => not_found(),
        }
    }
}

/// A blob answer: `bytes`, whole.
fn whole(bytes: Vec<u8>) -> BlobAnswer {
    Arc::new(move |_| Body::from(bytes.clone()).into_response())
}

/// `bytes` then nothing more, the connection held open; with a
/// `Content-Length` of `announced` when given, else chunked.
fn then_stall(bytes: Vec<u8>, announced: Option<usize>) -> Response {
    let pieces: Vec<Result<Bytes, Infallible>> = bytes
        .chunks(64 << 10)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let body = Body::from_stream(
        futures_util::stream::iter(pieces).chain(futures_util::stream::pending()),
    );
    let mut response = Response::builder();
    if let Some(length) = announced {
        response = response.header(header::CONTENT_LENGTH, length);
    }
    response.body(body).unwrap()
}

/// The upstream of proxy project `cache`: `stand_in`, with `image` as `app:v1`
/// whose blobs are answered by `blobs` (whole when not named).
async fn stand_in_for(
    app: &TestApp,
    image: &Image,
    mut blobs: HashMap<String, BlobAnswer>,
) -> StandIn {
    for blob in &image.blobs {
        blobs
            .entry(digest_of(blob))
            .or_insert_with(|| whole(blob.clone()));
    }
    let manifests = HashMap::from([
        ("v1".to_string(), image.manifest.clone()),
        (image.digest.clone(), image.manifest.clone()),
    ]);
    let stand_in = StandIn::start(manifests, blobs).await;
    proxy_project(app, &stand_in.url, "docker-registry", None).await;
    stand_in
}

/// GETs `path` anonymously: `Ok(body)` for a 200 whose body came whole, else
/// the status and why. Fails the test when the answer takes over [`PROMPTLY`].
async fn try_pull(app: &TestApp, path: &str) -> Result<Vec<u8>, String> {
    let request = Request::get(path).body(Body::empty()).unwrap();
    let pull = async {
        let response = app
            .app
            .clone()
            .oneshot(request)
            .await
            .expect("infallible service");
        let status = response.status();
        match response.into_body().collect().await {
            Ok(body) if status == StatusCode::OK => Ok(body.to_bytes().to_vec()),
            Ok(body) => Err(format!(
                "{status}: {}",
                String::from_utf8_lossy(&body.to_bytes())
            )),
            Err(err) => Err(format!("{status}, then the body broke off: {err}")),
        }
    };
    tokio::time::timeout(PROMPTLY, pull)
        .await
        .unwrap_or_else(|_| panic!("{path}: still pulling after {PROMPTLY:?}"))
}

/// Whether blob `bytes` is in the store of `cache/<name>`.
async fn blob_stored(app: &TestApp, name: &str, bytes: &[u8]) -> bool {
    app.store()
        .registry()
        .repository_blob(&format!("cache/{name}"), &digest_of(bytes))
        .await
        .unwrap()
        .is_some()
}

backend_test!(
    async fn an_upstream_blob_longer_than_its_manifest_says_is_refused(app) {
        // Two layers, each sent with a mebibyte more than the manifest declares:
        // one announces it (Content-Length), the other streams it and holds on.
        let (announced, streamed) = (noise(300_000, 21), noise(300_000, 22));
        let image = Image::new(r#"{"architecture":"amd64","os":"linux"}"#, &[announced.clone(), streamed.clone()]);
        let longer = |layer: &[u8], seed| [layer, &noise(1 << 20, seed)].concat();
        let (announced_longer, streamed_longer) = (longer(&announced, 23), longer(&streamed, 24));
        let blobs = HashMap::from([
            (digest_of(&announced), whole(announced_longer)),
            (digest_of(&streamed), Arc::new(move |_| then_stall(streamed_longer.clone(), None)) as BlobAnswer),
        ]);
        let stand_in = stand_in_for(&app, &image, blobs).await;

        // The manifest is answered; every client of either layer gets an error, promptly.
        let manifest = try_pull(&app, "/v2/cache/app/manifests/v1").await;
        assert_eq!(manifest.as_deref(), Ok(image.manifest.as_slice()));
        let announced_path = format!("/v2/cache/app/blobs/{}", digest_of(&announced));
        let pulled = try_pull(&app, &announced_path).await;
        let refused = |why: &String| why.starts_with("502") && why.contains("may have");
        assert!(pulled.as_ref().is_err_and(refused), "refused before spooling: {pulled:?}");
        let streamed_path = format!("/v2/cache/app/blobs/{}", digest_of(&streamed));
        let pulls = (0..3).map(|_| try_pull(&app, &streamed_path));
        for pulled in futures_util::future::join_all(pulls).await {
            assert!(pulled.is_err(), "a body longer than declared was served");
        }
        // Nothing is stored: neither layer, nor the image.
        assert!(!blob_stored(&app, "app", &announced).await);
        assert!(!blob_stored(&app, "app", &streamed).await);
        let res = app.get("/api/v2.0/projects/cache/repositories/app/artifacts").admin().send().await;
        assert!(res.status == StatusCode::NOT_FOUND || res.json() == json!([]), "{}", res.text());
        assert!(stand_in.requests("GET /v2/app/blobs/") >= 2);

        // A manifest over 4 MiB (the limit of a pushed one) is not read whole.
        let padding = "x".repeat(4 << 20);
        let huge = json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "annotations": {"padding": padding}}).to_string().into_bytes();
        let big = StandIn::start(HashMap::from([("huge".to_string(), huge)]), HashMap::new()).await;
        let res = app.post("/api/v2.0/registries").admin().json(&json!({"name": "big", "url": big.url, "type": "docker-registry"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let id = id_from_location(&res);
        let res = app.post("/api/v2.0/projects").admin().json(&json!({"project_name": "big", "registry_id": id, "metadata": {"public": "true"}})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let pulled = try_pull(&app, "/v2/big/app/manifests/huge").await;
        assert!(pulled.as_ref().is_err_and(|why| why.starts_with("503")), "{pulled:?}");
    }
);

backend_test!(
    async fn a_stalled_upstream_blob_times_out(app) {
        let layer = noise(400_000, 31);
        let image = Image::new(r#"{"architecture":"amd64","os":"linux"}"#, std::slice::from_ref(&layer));
        // The first fetch sends half the layer and stalls; the next is whole.
        let sent = layer.clone();
        let blobs = HashMap::from([(
            digest_of(&layer),
            Arc::new(move |n: usize| match n {
                0 => then_stall(sent[..200_000].to_vec(), Some(sent.len())),
                _ => Body::from(sent.clone()).into_response(),
            }) as BlobAnswer,
        )]);
        let app = app.with_proxy_idle_timeout(Duration::from_secs(1));
        let stand_in = stand_in_for(&app, &image, blobs).await;
        let path = format!("/v2/cache/app/blobs/{}", digest_of(&layer));

        // The pull (and the cache's own fetch it joins) fails once upstream is silent.
        let manifest = try_pull(&app, "/v2/cache/app/manifests/v1").await;
        assert_eq!(manifest.as_deref(), Ok(image.manifest.as_slice()));
        let pulls = (0..2).map(|_| try_pull(&app, &path));
        for pulled in futures_util::future::join_all(pulls).await {
            assert!(pulled.is_err(), "a stalled body was served whole");
        }
        assert!(!blob_stored(&app, "app", &layer).await);

        // The fetch is over: the next pull asks upstream again and caches the image.
        assert_eq!(try_pull(&app, &path).await.as_deref(), Ok(layer.as_slice()));
        assert_eq!(stand_in.requests(&format!("GET /v2/app/blobs/{}", digest_of(&layer))), 2);
        pull_image(&app, "app", "v1", &image).await;
        cached(&app, "app", &image.digest).await;
    }
);

/// `bytes` after 300 ms, counting in `gauge` the answers under way (`.0`)
/// and the most at once (`.1`).
fn slowly(
    bytes: Vec<u8>,
    gauge: Arc<(
        std::sync::atomic::AtomicUsize,
        std::sync::atomic::AtomicUsize,
    )>,
) -> BlobAnswer {
    use std::sync::atomic::Ordering::SeqCst;
    Arc::new(move |_| {
        let now = gauge.0.fetch_add(1, SeqCst) + 1;
        gauge.1.fetch_max(now, SeqCst);
        let (gauge, bytes) = (gauge.clone(), bytes.clone());
        let body = futures_util::stream::once(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            gauge.0.fetch_sub(1, SeqCst);
            Ok::<_, Infallible>(Bytes::from(bytes))
        });
        Body::from_stream(body).into_response()
    })
}

backend_test!(
    /// `max_upstream_conn` bounds the requests to upstream a proxy project
    /// has under way (a blob's for as long as it streams).
    async fn max_upstream_conn_bounds_the_requests_to_upstream(app) {
        use std::sync::atomic::Ordering::SeqCst;
        let gauge = Arc::new(Default::default());
        let image = |n: u64| {
            let layers: Vec<Vec<u8>> = (0..4).map(|i| noise(20_000, n * 10 + i)).collect();
            Image::new(&format!(r#"{{"architecture":"amd64","os":"linux","n":{n}}}"#), &layers)
        };
        let (free, bounded) = (image(1), image(2));
        let mut blobs: HashMap<String, BlobAnswer> = HashMap::new();
        for blob in free.blobs.iter().chain(&bounded.blobs) {
            blobs.insert(digest_of(blob), slowly(blob.clone(), Arc::clone(&gauge)));
        }
        let manifests = HashMap::from([
            ("free".to_string(), free.manifest.clone()),
            ("bounded".to_string(), bounded.manifest.clone()),
        ]);
        let stand_in = StandIn::start(manifests, blobs).await;
        proxy_project(&app, &stand_in.url, "docker-registry", None).await;

        pull_image(&app, "app", "free", &free).await;
        assert!(gauge.1.load(SeqCst) > 1, "without a limit, blobs are fetched side by side");
        let res = app.post("/api/v2.0/projects/cache/metadatas").admin().json(&json!({"max_upstream_conn": "1"})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        gauge.1.store(0, SeqCst);
        pull_image(&app, "app", "bounded", &bounded).await;
        assert_eq!(gauge.1.load(SeqCst), 1, "one request to upstream at a time");
    }
);

backend_test!(
    /// `proxy_cache_local_on_not_found`: a tag upstream no longer has is
    /// served from the cache instead of 404.
    async fn a_tag_gone_upstream_is_served_from_the_cache_where_the_project_says_so(app) {
        let peer = DockerRegistry::start(PeerOptions::default()).await;
        let image = Image::new(r#"{"architecture":"amd64","os":"linux","gone":1}"#, &[b"gone".to_vec()]);
        push_image_to(&peer.url(), None, "app", "v1", &image).await;
        let app = app.with_proxy_ttl(Duration::ZERO);
        proxy_project(&app, &peer.url(), "docker-registry", None).await;
        pull_image(&app, "app", "v1", &image).await;
        cached(&app, "app", &image.digest).await;
        let deleted = reqwest::Client::new()
            .delete(format!("{}/v2/app/manifests/{}", peer.url(), image.digest))
            .send()
            .await
            .unwrap();
        assert_eq!(deleted.status().as_u16(), 202);

        let res = app.get("/v2/cache/app/manifests/v1").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "by default a tag gone upstream is gone");
        let res = app
            .post("/api/v2.0/projects/cache/metadatas")
            .admin()
            .json(&json!({"proxy_cache_local_on_not_found": "true"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        pull_image(&app, "app", "v1", &image).await;
    }
);
