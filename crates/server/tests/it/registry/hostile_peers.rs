//! Replication and the proxy cache against peers that misbehave, written
//! here as small servers on real sockets (docker-registry does none of
//! this): a blob that stalls after one byte, a token service that never
//! answers, a blob far longer than its manifest declares, and a catalog of
//! names no push would accept. Each fails its task with the reason in the
//! task's log, within the deadlines the test sets, and the run ends.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{descriptor, digest_of};
use crate::backend_test;
use crate::harbor::fixtures::id_from_location;
use crate::util::TestApp;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// Short deadlines, so that a silent peer fails a step within about a second.
const SHORT: berth::upstream::Deadlines = berth::upstream::Deadlines {
    connect: Duration::from_secs(2),
    answer: Duration::from_secs(1),
    idle: Duration::from_secs(1),
};

/// How a blob is answered.
type BlobAnswer = Arc<dyn Fn() -> Response + Send + Sync>;

/// What a peer serves.
#[derive(Clone, Default)]
struct Content {
    /// The catalog, with each repository's tags.
    repositories: Vec<(String, Vec<String>)>,
    /// Manifests by tag or digest (the same in every repository).
    manifests: HashMap<String, Vec<u8>>,
    /// Blobs by digest.
    blobs: HashMap<String, BlobAnswer>,
    /// `/v2/...` asks for a Bearer token from `/token`, which never answers.
    silent_token_service: bool,
    /// What `/v2/<name>/referrers/<digest>` lists, when anything.
    referrers: Option<Value>,
}

/// A registry that serves [`Content`] on a real socket, counting the bytes
/// of blob bodies it handed out.
struct Peer {
    url: String,
    /// `host:port`, as the task logs name it.
    host: String,
    /// `METHOD path` of each request, in order.
    requests: Arc<Mutex<Vec<String>>>,
}

impl Peer {
    async fn start(content: Content) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let url = format!("http://{addr}");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (seen, base) = (requests.clone(), url.clone());
        let content = Arc::new(content);
        let router =
            axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap| {
                let (content, seen, base) = (content.clone(), seen.clone(), base.clone());
                async move {
                    seen.lock()
                        .unwrap()
                        .push(format!("{method} {}", uri.path()));
                    answer(&content, &base, &method, &uri, &headers).await
                }
            });
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        Self {
            url,
            host: addr.to_string(),
            requests,
        }
    }

    fn asked(&self, request: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with(request))
            .count()
    }
}

async fn answer(
    content: &Content,
    base: &str,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Response {
    let path = uri.path();
    if path == "/token" {
        return std::future::pending().await;
    }
    if content.silent_token_service && !headers.contains_key(header::AUTHORIZATION) {
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header(
                header::WWW_AUTHENTICATE,
                format!(r#"Bearer realm="{base}/token",service="peer""#),
            )
            .body(Body::from(r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#))
            .unwrap();
    }
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
    if path == "/v2/_catalog" {
        let names: Vec<&str> = content
            .repositories
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        return axum::Json(json!({"repositories": names})).into_response();
    }
    let rest = path.strip_prefix("/v2/").unwrap_or(path);
    if let Some(name) = rest.strip_suffix("/tags/list") {
        return match content.repositories.iter().find(|(n, _)| n == name) {
            Some((_, tags)) => axum::Json(json!({"name": name, "tags": tags})).into_response(),
            None => not_found(),
        };
    }
    if rest.contains("/referrers/") {
        return match &content.referrers {
            Some(listed) => Response::builder()
                .header(
                    header::CONTENT_TYPE,
                    "application/vnd.oci.image.index.v1+json",
                )
                .body(Body::from(listed.to_string()))
                .unwrap(),
            None => not_found(),
        };
    }
    if let Some((_, reference)) = rest.rsplit_once("/manifests/") {
        let Some(manifest) = content.manifests.get(reference) else {
            return not_found();
        };
        let body = if *method == Method::HEAD {
            Body::empty()
        } else {
            Body::from(manifest.clone())
        };
        return Response::builder()
            .header(header::CONTENT_TYPE, OCI_MANIFEST)
            .header(header::CONTENT_LENGTH, manifest.len())
            .header("docker-content-digest", digest_of(manifest))
            .body(body)
            .unwrap();
    }
    match rest
        .rsplit_once("/blobs/")
        .and_then(|(_, digest)| content.blobs.get(digest))
    {
        Some(answer) => answer(),
        None => not_found(),
    }
}

/// A blob answer: `bytes`, whole.
fn whole(bytes: Vec<u8>) -> BlobAnswer {
    Arc::new(move || Body::from(bytes.clone()).into_response())
}

/// A blob answer: the first byte of `bytes`, then nothing, the connection
/// held open (its `Content-Length` says all of it).
fn one_byte_then_silence(bytes: Vec<u8>) -> BlobAnswer {
    Arc::new(move || {
        let first = futures_util::stream::once(std::future::ready(Ok::<_, Infallible>(
            Bytes::copy_from_slice(&bytes[..1]),
        )));
        Response::builder()
            .header(header::CONTENT_LENGTH, bytes.len())
            .body(Body::from_stream(
                first.chain(futures_util::stream::pending()),
            ))
            .unwrap()
    })
}

/// A blob answer that never ends (chunked, 64 KiB at a time), counting in
/// `sent` the bytes it handed out.
fn endless(sent: Arc<AtomicU64>) -> BlobAnswer {
    Arc::new(move || {
        let sent = sent.clone();
        let chunks = futures_util::stream::repeat_with(move || {
            sent.fetch_add(64 << 10, Ordering::Relaxed);
            Ok::<_, Infallible>(Bytes::from(vec![7u8; 64 << 10]))
        });
        Body::from_stream(chunks).into_response()
    })
}

/// An image: its config, its layer, its manifest.
struct Image {
    config: Vec<u8>,
    layer: Vec<u8>,
    manifest: Vec<u8>,
}

impl Image {
    fn new(layer: &[u8]) -> Self {
        let config = br#"{"architecture":"amd64","os":"linux"}"#.to_vec();
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": descriptor("application/vnd.oci.image.config.v1+json", &config),
            "layers": [descriptor("application/vnd.oci.image.layer.v1.tar+gzip", layer)],
        })
        .to_string()
        .into_bytes();
        Self {
            config,
            layer: layer.to_vec(),
            manifest,
        }
    }

    /// `repositories` each holding this image as `v1`, its layer answered by `layer`.
    fn served(&self, repositories: &[&str], layer: BlobAnswer) -> Content {
        Content {
            repositories: repositories
                .iter()
                .map(|r| (r.to_string(), vec!["v1".to_string()]))
                .collect(),
            manifests: HashMap::from([
                ("v1".to_string(), self.manifest.clone()),
                (digest_of(&self.manifest), self.manifest.clone()),
            ]),
            blobs: HashMap::from([
                (digest_of(&self.config), whole(self.config.clone())),
                (digest_of(&self.layer), layer),
            ]),
            ..Content::default()
        }
    }
}

/// Registers `peer` (without a credential) and a pull-based policy from it; the policy's id.
async fn pull_policy(app: &TestApp, peer: &Peer, trigger: Value) -> i64 {
    let res = app
        .post("/api/v2.0/registries")
        .admin()
        .json(&json!({"name": "peer", "type": "docker-registry", "url": peer.url}))
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    let registry = id_from_location(&res);
    let res = app
        .post("/api/v2.0/replication/policies")
        .admin()
        .json(&json!({"name": "from-peer", "src_registry": {"id": registry}, "trigger": trigger, "enabled": true}))
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    id_from_location(&res)
}

/// Starts a run of `policy` by hand; its id.
async fn start(app: &TestApp, policy: i64) -> i64 {
    let res = app
        .post("/api/v2.0/replication/executions")
        .admin()
        .json(&json!({"policy_id": policy}))
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    id_from_location(&res)
}

/// Runs the jobs until run `id` ends, making each retry due at once (a
/// task has 3 attempts); gives up after 60 s, which only a hung step takes.
async fn run_to_end(app: &TestApp, id: i64) -> Value {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let ran =
            tokio::time::timeout_at(until.into(), berth::workers::run_due(&app.state, "test"))
                .await;
        assert!(ran.is_ok(), "run {id} hung for 60 s");
        let run = execution(app, id).await;
        if run["status"] != "InProgress" {
            return run;
        }
        app.execute_sql("UPDATE job_tasks SET run_after = '2000-01-01T00:00:00.000Z'")
            .await;
    }
}

async fn execution(app: &TestApp, id: i64) -> Value {
    let res = app
        .get(&format!("/api/v2.0/replication/executions/{id}"))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    res.json()
}

/// Every task of run `id` with its log: `(task, log)`.
async fn logs(app: &TestApp, id: i64) -> Vec<(Value, String)> {
    let tasks = app
        .get(&format!("/api/v2.0/replication/executions/{id}/tasks"))
        .admin()
        .send()
        .await
        .json();
    let mut logs = Vec::new();
    for task in tasks.as_array().unwrap() {
        let path = format!(
            "/api/v2.0/replication/executions/{id}/tasks/{}/log",
            task["id"]
        );
        logs.push((task.clone(), app.get(&path).admin().send().await.text()));
    }
    logs
}

/// The log of run `id`'s planning task (which the API does not list).
async fn plan_log(app: &TestApp, id: i64) -> String {
    let store = &app.state.store;
    let task = store
        .replication()
        .planning_task(id)
        .await
        .unwrap()
        .expect("a planning task");
    store.jobs().log_text(task).await.unwrap()
}

backend_test!(
    /// A source that sends one byte of a layer and goes silent fails the
    /// layer's task after the idle deadline, saying so, on each attempt;
    /// the run ends Failed.
    async fn a_source_that_stalls_mid_blob_fails_the_run(app) {
        let app = app.with_peer_deadlines(SHORT);
        let image = Image::new(&[5u8; 4096]);
        let peer = Peer::start(image.served(&["app"], one_byte_then_silence(image.layer.clone()))).await;
        let policy = pull_policy(&app, &peer, json!({"type": "manual"})).await;
        let started = Instant::now();
        let id = start(&app, policy).await;
        let run = run_to_end(&app, id).await;
        let took = started.elapsed();
        assert_eq!(run["status"], "Failed", "{run}");
        let logs = logs(&app, id).await;
        let (task, log) = logs.iter().find(|(t, _)| t["src_resource"] == "app:[v1]").expect("the repository's task");
        assert_eq!(task["status"], "Failed", "{task}");
        let reason = format!("no data from {} for 1 s (blob {})", peer.host, digest_of(&image.layer));
        assert_eq!(log.matches(&reason).count(), 3, "each attempt says why: {log}");
        assert_eq!(peer.asked(&format!("GET /v2/app/blobs/{}", digest_of(&image.layer))), 3);
        assert!(took < Duration::from_secs(20), "three attempts of about a second each took {took:?}");
        let res = app.get("/v2/library/app/manifests/v1").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "nothing half-made is listed");
    }
);

backend_test!(
    /// A source whose token service never answers fails the run's planning
    /// (its catalog needs a token) after the answer deadline; the proxy
    /// cache, which signs in the same way, answers 503 as soon.
    async fn a_silent_token_service_fails_the_run_and_the_proxied_pull(app) {
        let app = app.with_peer_deadlines(SHORT);
        let image = Image::new(b"a layer");
        let peer = Peer::start(Content { silent_token_service: true, ..image.served(&["app"], whole(image.layer.clone())) }).await;
        let policy = pull_policy(&app, &peer, json!({"type": "manual"})).await;
        let id = start(&app, policy).await;
        let run = run_to_end(&app, id).await;
        assert_eq!(run["status"], "Failed", "{run}");
        let log = plan_log(&app, id).await;
        assert!(log.contains(&format!("http://{}/token", peer.host)) && log.contains("no answer within 1 s"), "{log}");

        let registry = app.get("/api/v2.0/registries").admin().send().await.json()[0]["id"].as_i64().unwrap();
        let res = app
            .post("/api/v2.0/projects")
            .admin()
            .json(&json!({"project_name": "cache", "registry_id": registry, "metadata": {"public": "true"}}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let started = Instant::now();
        let pulled = tokio::time::timeout(
            Duration::from_secs(30),
            app.get("/v2/cache/app/manifests/v1").admin().send(),
        )
        .await
        .expect("the proxied pull hung on the token service");
        assert_eq!(pulled.status, StatusCode::SERVICE_UNAVAILABLE, "{}", pulled.text());
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }
);

backend_test!(
    /// A layer its manifest declares as 16 bytes is read no further than
    /// that: the task fails on the 17th byte, saying so, and stores nothing.
    async fn a_blob_longer_than_declared_is_cut_at_its_size(app) {
        let image = Image::new(b"sixteen bytes!!!");
        let sent = Arc::new(AtomicU64::new(0));
        let peer = Peer::start(image.served(&["app"], endless(sent.clone()))).await;
        let policy = pull_policy(&app, &peer, json!({"type": "manual"})).await;
        let id = start(&app, policy).await;
        let run = run_to_end(&app, id).await;
        assert_eq!(run["status"], "Failed", "{run}");
        let logs = logs(&app, id).await;
        let (_, log) = logs.iter().find(|(t, _)| t["src_resource"] == "app:[v1]").expect("the repository's task");
        let reason = format!("{} sends more than the 16 bytes blob {} may have", peer.host, digest_of(&image.layer));
        assert_eq!(log.matches(&reason).count(), 3, "{log}");
        let sent = sent.load(Ordering::Relaxed);
        eprintln!("the peer handed out {sent} bytes over 3 attempts");
        assert!(sent < 48 << 20, "{sent} bytes were taken from the peer over 3 attempts");
    }
);

backend_test!(
    /// Names from a source's catalog pass the rules a push and Harbor's
    /// project creation apply: `EVIL/app`, `-dash/app`, `lib/../../x` and a
    /// repository listing the tag `-bad` each fail their task, saying why,
    /// and make no project; a good repository beside them arrives, and a
    /// referrer that is no digest fails its subject's task.
    async fn names_a_source_hands_out_are_checked(app) {
        let image = Image::new(b"a good layer");
        let mut content = image.served(&["EVIL/app", "-dash/app", "lib/../../x", "good/app", "tagged/app"], whole(image.layer.clone()));
        content.repositories[4].1.push("-bad".into());
        let peer = Peer::start(content).await;
        let policy = pull_policy(&app, &peer, json!({"type": "manual"})).await;
        let id = start(&app, policy).await;
        let run = run_to_end(&app, id).await;
        assert_eq!(run["status"], "Failed", "{run}");
        assert_eq!((run["total"].as_i64(), run["succeed"].as_i64(), run["failed"].as_i64()), (Some(5), Some(1), Some(4)), "{run}");
        let all = logs(&app, id).await;
        let log_of = |source: &str| {
            all.iter().find(|(t, _)| t["src_resource"].as_str().unwrap().starts_with(source)).map(|(_, l)| l.clone()).unwrap()
        };
        for (source, said) in [
            ("EVIL/app", r#"the repository name "EVIL/app" is not a valid repository name"#),
            ("-dash/app", r#"the repository name "-dash/app" is not a valid repository name"#),
            ("lib/../../x", r#"the repository name "lib/../../x" is not a valid repository name"#),
            ("tagged/app", r#"tagged/app: "-bad" is not a valid tag or digest"#),
        ] {
            let log = log_of(source);
            assert_eq!(log.matches(said).count(), 1, "one attempt, saying why: {log}");
        }
        assert_eq!(peer.asked("GET /v2/EVIL/"), 0, "an invalid name is not asked about");
        assert_eq!(peer.asked("GET /v2/lib/"), 0);
        let projects = app.get("/api/v2.0/projects?page_size=100").admin().send().await.json();
        let mut names: Vec<&str> = projects.as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        names.sort_unstable();
        assert_eq!(names, ["good", "library"], "no project from a bad name");
        let res = app.get("/v2/good/app/manifests/v1").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());

        // A referrer that is no digest.
        let mut content = image.served(&["refd/app"], whole(image.layer.clone()));
        content.referrers = Some(json!({"schemaVersion": 2, "manifests": [{"digest": "v1"}]}));
        let peer = Peer::start(content).await;
        let res = app.post("/api/v2.0/registries").admin().json(&json!({"name": "refs", "type": "docker-registry", "url": peer.url})).send().await;
        let registry = id_from_location(&res);
        let res = app.post("/api/v2.0/replication/policies").admin()
            .json(&json!({"name": "refs", "src_registry": {"id": registry}, "enabled": true}))
            .send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let id = start(&app, id_from_location(&res)).await;
        let run = run_to_end(&app, id).await;
        assert_eq!(run["status"], "Failed", "{run}");
        let log = logs(&app, id).await.into_iter().map(|(_, l)| l).collect::<String>();
        assert!(log.contains(r#"name "v1", which is not a digest"#), "{log}");
    }
);

backend_test!(
    /// A scheduled pull-based run fires in read-only mode, but pulls
    /// nothing and makes no project: it fails, saying why.
    async fn a_pull_replication_does_not_write_in_read_only_mode(app) {
        let image = Image::new(b"a layer");
        let peer = Peer::start(image.served(&["app"], whole(image.layer.clone()))).await;
        let policy = pull_policy(&app, &peer, json!({"type": "scheduled", "trigger_settings": {"cron": "0 * * * * *"}})).await;
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"read_only": true})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        app.make_schedules_due().await;
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let runs = app.get(&format!("/api/v2.0/replication/executions?policy_id={policy}")).admin().send().await.json();
        let run = &runs[0];
        assert_eq!(run["status"], "Failed", "{runs}");
        let log = plan_log(&app, run["id"].as_i64().unwrap()).await;
        assert!(log.contains("the registry is in read-only mode: a pull-based replication writes here"), "{log}");
        let res = app.get("/v2/library/app/manifests/v1").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "nothing was pulled: {}", res.text());
        assert_eq!(peer.asked("GET /v2/_catalog"), 0, "nothing was asked");
    }
);
