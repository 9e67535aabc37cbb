//! Replication's copy step (`service::replication::push_artifact`) against
//! docker-registry 2.8.2 behind htpasswd: an image and a multi-arch index
//! pushed from Berth arrive whole (skopeo reads them back with the same
//! digests); a second copy finds everything there and sends nothing.

use super::clients::{require, run as run_command, skopeo};
use super::{digest_of, push_image, put_manifest};
use crate::registry_test;
use crate::util::{DockerRegistry, PeerOptions};

const USER: &str = "mirror";
const PASSWORD: &str = "mirror-secret";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

fn inspect_digest(peer: &DockerRegistry, reference: &str) -> String {
    let host = peer.url().replace("http://", "");
    let raw = run_command(
        skopeo()
            .args(["inspect", "--raw", "--tls-verify=false", "--creds"])
            .arg(format!("{USER}:{PASSWORD}"))
            .arg(format!("docker://{host}/{reference}")),
    );
    digest_of(raw.as_bytes())
}

registry_test!(
    async fn an_image_and_an_index_arrive_whole_at_a_peer(app) {
        require("skopeo");
        let peer = DockerRegistry::start(PeerOptions {
            basic_auth: Some((USER.into(), PASSWORD.into())),
            tls: false,
        })
        .await;
        let (image_body, image) = push_image(&app, "library/app", "v1", &[b"first layer", &vec![9u8; 300_000]]).await;
        let (arm, arm_digest) = push_image(&app, "library/app", "arm", &[b"arm layer"]).await;
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": image,
                 "size": image_body.len(), "platform": {"architecture": "amd64", "os": "linux"}},
                {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": arm_digest,
                 "size": arm.len(), "platform": {"architecture": "arm64", "os": "linux"}},
            ],
        });
        let index = serde_json::to_vec(&index).unwrap();
        let res = put_manifest(&app, "library/app", "multi", OCI_INDEX, &index).await;
        assert_eq!(res.status, axum::http::StatusCode::CREATED, "{}", res.text());

        let remote = berth::upstream::Remote::new(&berth::upstream::Target {
            base: peer.url(),
            insecure: false,
            ca_certificate: "",
            credential: Some((USER, PASSWORD)),
            deadlines: berth::upstream::Deadlines::DEFAULT,
        })
        .unwrap();
        let copied = berth::service::replication::push_artifact(&app.state, &remote, "library/app", "v1", "mirror/app")
            .await
            .unwrap();
        assert_eq!((copied.manifests, copied.blobs), (1, 3), "{copied:?}");
        assert_eq!(inspect_digest(&peer, "mirror/app:v1"), image);

        let copied = berth::service::replication::push_artifact(&app.state, &remote, "library/app", "multi", "mirror/app")
            .await
            .unwrap();
        assert_eq!(
            (copied.manifests, copied.manifests_present, copied.blobs),
            (2, 1, 2),
            "the index and the arm image; the first image was there: {copied:?}"
        );
        assert_eq!(inspect_digest(&peer, "mirror/app:multi"), digest_of(&index));
        assert_eq!(inspect_digest(&peer, &format!("mirror/app@{arm_digest}")), arm_digest);
        let pulled = tempfile::tempdir().unwrap();
        let host = peer.url().replace("http://", "");
        run_command(skopeo()
            .args(["copy", "--all", "--src-tls-verify=false", "--src-creds"])
            .arg(format!("{USER}:{PASSWORD}"))
            .arg(format!("docker://{host}/mirror/app:multi"))
            .arg(format!("oci:{}:multi", pulled.path().display())));

        let again = berth::service::replication::push_artifact(&app.state, &remote, "library/app", "multi", "mirror/app")
            .await
            .unwrap();
        assert_eq!((again.manifests, again.blobs, again.manifests_present), (0, 0, 1), "{again:?}");
    }
);

/// Registers `peer` as a `docker-registry` endpoint; its id.
async fn register(app: &crate::util::TestApp, peer: &DockerRegistry, name: &str) -> i64 {
    let res = app
        .post("/api/v2.0/registries")
        .admin()
        .json(&serde_json::json!({
            "name": name, "type": "docker-registry", "url": peer.url(),
            "credential": {"type": "basic", "access_key": USER, "access_secret": PASSWORD},
        }))
        .send()
        .await;
    assert_eq!(
        res.status,
        axum::http::StatusCode::CREATED,
        "{}",
        res.text()
    );
    crate::harbor::fixtures::id_from_location(&res)
}

async fn create_policy(app: &crate::util::TestApp, body: &serde_json::Value) -> i64 {
    let res = app
        .post("/api/v2.0/replication/policies")
        .admin()
        .json(body)
        .send()
        .await;
    assert_eq!(
        res.status,
        axum::http::StatusCode::CREATED,
        "{}",
        res.text()
    );
    crate::harbor::fixtures::id_from_location(&res)
}

/// Starts a run of `policy` by hand and runs it to its end; the run as listed.
async fn run_policy(app: &crate::util::TestApp, policy: i64) -> serde_json::Value {
    let res = app
        .post("/api/v2.0/replication/executions")
        .admin()
        .json(&serde_json::json!({"policy_id": policy}))
        .send()
        .await;
    assert_eq!(
        res.status,
        axum::http::StatusCode::CREATED,
        "{}",
        res.text()
    );
    let id = crate::harbor::fixtures::id_from_location(&res);
    berth::workers::run_due(&app.state, "test").await.unwrap();
    let res = app
        .get(&format!("/api/v2.0/replication/executions/{id}"))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, axum::http::StatusCode::OK, "{}", res.text());
    res.json()
}

async fn tasks_of(
    app: &crate::util::TestApp,
    execution: &serde_json::Value,
) -> Vec<serde_json::Value> {
    let res = app
        .get(&format!(
            "/api/v2.0/replication/executions/{}/tasks",
            execution["id"]
        ))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, axum::http::StatusCode::OK, "{}", res.text());
    res.json().as_array().unwrap().clone()
}

async fn task_log(
    app: &crate::util::TestApp,
    execution: &serde_json::Value,
    task: &serde_json::Value,
) -> String {
    let res = app
        .get(&format!(
            "/api/v2.0/replication/executions/{}/tasks/{}/log",
            execution["id"], task["id"]
        ))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, axum::http::StatusCode::OK, "{}", res.text());
    res.text()
}

fn peer_has(peer: &DockerRegistry, reference: &str) -> bool {
    let host = peer.url().replace("http://", "");
    skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--creds"])
        .arg(format!("{USER}:{PASSWORD}"))
        .arg(format!("docker://{host}/{reference}"))
        .output()
        .unwrap()
        .status
        .success()
}

registry_test!(
    /// A manual push-based run: the name and tag filters pick what goes,
    /// flattening names where it lands, and a second run sends nothing.
    async fn a_push_based_policy_copies_what_its_filters_keep(app) {
        require("skopeo");
        let peer = DockerRegistry::start(PeerOptions {
            basic_auth: Some((USER.into(), PASSWORD.into())),
            tls: false,
        })
        .await;
        let registry = register(&app, &peer, "peer").await;
        let (_, v1) = push_image(&app, "library/team/app", "v1", &[b"layer one", &vec![7u8; 200_000]]).await;
        push_image(&app, "library/team/app", "latest", &[b"latest layer"]).await;
        push_image(&app, "library/other", "v1", &[b"other layer"]).await;
        let policy = create_policy(&app, &serde_json::json!({
            "name": "to-peer",
            "dest_registry": {"id": registry},
            "dest_namespace": "mirror",
            "dest_namespace_replace_count": 1,
            "filters": [
                {"type": "name", "value": "library/team/**"},
                {"type": "tag", "value": "v*"},
            ],
            "trigger": {"type": "manual"},
            "enabled": true,
        })).await;

        let got = app.get(&format!("/api/v2.0/replication/policies/{policy}")).admin().send().await.json();
        assert_eq!(got["src_registry"]["id"], 0, "{got}");
        assert_eq!(got["src_registry"]["name"], "Local");
        assert_eq!(got["dest_registry"]["id"], registry);
        assert_eq!(got["dest_registry"]["credential"]["access_secret"], "*****");
        assert_eq!(got["dest_namespace_replace_count"], 1);
        assert_eq!(got["enabled"], true);
        assert!(got.get("override").is_none(), "false is left out: {got}");

        let receiver = crate::util::Receiver::start(&[]).await;
        let res = app.post("/api/v2.0/projects/library/webhook/policies").admin()
            .json(&serde_json::json!({"name": "replicated", "enabled": true, "event_types": ["REPLICATION"],
                "targets": [{"type": "http", "address": receiver.url("replication")}]}))
            .send().await;
        assert_eq!(res.status, axum::http::StatusCode::CREATED, "{}", res.text());

        let run = run_policy(&app, policy).await;
        assert_eq!(run["status"], "Succeed", "{run}");
        assert_eq!(run["trigger"], "manual");
        berth::events::deliver(&app.state).await;
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let received = receiver.received();
        assert_eq!(received.len(), 1, "one task, one REPLICATION event");
        let event = received[0].json();
        assert_eq!(event["type"], "REPLICATION", "{event}");
        assert_eq!(event["operator"], "MANUAL", "{event}");
        let data = &event["event_data"]["replication"];
        assert_eq!(data["job_status"], "Success", "{event}");
        assert_eq!(data["trigger_type"], "MANUAL");
        assert_eq!(data["policy_creator"], "admin");
        assert_eq!(data["src_resource"]["registry_type"], "harbor");
        assert_eq!(data["src_resource"]["namespace"], "library");
        assert_eq!(data["dest_resource"]["registry_name"], "peer");
        assert_eq!(data["dest_resource"]["registry_type"], "docker-registry");
        assert_eq!(data["dest_resource"]["namespace"], "mirror");
        assert_eq!(data["successful_artifact"][0]["name_tag"], "team/app:[v1]", "{event}");
        assert_eq!((run["total"].as_i64(), run["succeed"].as_i64()), (Some(1), Some(1)), "{run}");
        let tasks = tasks_of(&app, &run).await;
        assert_eq!(tasks.len(), 1, "{tasks:?}");
        assert_eq!(tasks[0]["src_resource"], "library/team/app:[v1]");
        assert_eq!(tasks[0]["dst_resource"], "mirror/team/app:[v1]");
        assert_eq!(tasks[0]["operation"], "copy");
        assert_eq!(tasks[0]["status"], "Succeed");
        assert!(task_log(&app, &run, &tasks[0]).await.contains("3 blobs"), "config and two layers");
        assert_eq!(inspect_digest(&peer, "mirror/team/app:v1"), v1);
        assert!(!peer_has(&peer, "mirror/team/app:latest"), "the tag filter keeps v* only");
        assert!(!peer_has(&peer, "mirror/other:v1"), "the name filter keeps library/team/** only");

        let again = run_policy(&app, policy).await;
        assert_eq!(again["status"], "Succeed", "{again}");
        let tasks = tasks_of(&app, &again).await;
        let log = task_log(&app, &again, &tasks[0]).await;
        assert!(log.contains("0 manifests and 0 blobs (0 bytes) sent"), "{log}");

        // On a schedule: the workers fire it, and the run copies a new tag.
        let (_, v2) = push_image(&app, "library/team/app", "v2", &[b"layer two"]).await;
        let res = app.put(&format!("/api/v2.0/replication/policies/{policy}")).admin()
            .json(&serde_json::json!({
                "name": "to-peer", "dest_registry": {"id": registry}, "dest_namespace": "mirror",
                "dest_namespace_replace_count": 1, "enabled": true,
                "filters": [{"type": "name", "value": "library/team/**"}, {"type": "tag", "value": "v*"}],
                "trigger": {"type": "scheduled", "trigger_settings": {"cron": "0 * * * * *"}},
            }))
            .send().await;
        assert_eq!(res.status, axum::http::StatusCode::OK, "{}", res.text());
        app.make_schedules_due().await;
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let runs = app
            .get(&format!("/api/v2.0/replication/executions?policy_id={policy}&trigger=scheduled"))
            .admin()
            .send()
            .await
            .json();
        assert_eq!(runs[0]["status"], "Succeed", "{runs}");
        assert_eq!(inspect_digest(&peer, "mirror/team/app:v2"), v2);
    }
);

registry_test!(
    /// A pull-based run brings the peer's images in, making the project it
    /// needs; an event-based push policy copies each push and each delete.
    async fn pull_based_and_event_based_policies(app) {
        require("skopeo");
        let peer = DockerRegistry::start(PeerOptions {
            basic_auth: Some((USER.into(), PASSWORD.into())),
            tls: false,
        })
        .await;
        let registry = register(&app, &peer, "peer").await;
        let events = create_policy(&app, &serde_json::json!({
            "name": "on-push",
            "dest_registry": {"id": registry},
            "dest_namespace": "edge",
            "trigger": {"type": "event_based"},
            "filters": [{"type": "tag", "value": "v*"}],
            "deletion": true,
            "enabled": true,
        })).await;
        push_image(&app, "library/web", "latest", &[b"latest web layer"]).await;
        let (_, pushed) = push_image(&app, "library/web", "v2", &[b"web layer"]).await;
        berth::events::deliver(&app.state).await;
        berth::workers::run_due(&app.state, "test").await.unwrap();
        assert_eq!(inspect_digest(&peer, "edge/web:v2"), pushed, "the push was replicated");
        let runs = app
            .get(&format!("/api/v2.0/replication/executions?policy_id={events}&trigger=event_based"))
            .admin()
            .send()
            .await
            .json();
        assert_eq!(runs.as_array().map(Vec::len), Some(1), "the push of latest starts no run: {runs}");
        assert_eq!(runs[0]["status"], "Succeed", "{runs}");

        let pull = create_policy(&app, &serde_json::json!({
            "name": "from-peer",
            "src_registry": {"id": registry},
            "dest_namespace": "pulled",
            "filters": [{"type": "name", "value": "edge/**"}],
            "enabled": true,
        })).await;
        let run = run_policy(&app, pull).await;
        assert_eq!(run["status"], "Succeed", "{run}");
        let res = app.get("/v2/pulled/web/manifests/v2").admin().send().await;
        assert_eq!(res.status, axum::http::StatusCode::OK, "{}", res.text());
        assert_eq!(res.header("docker-content-digest"), Some(pushed.as_str()));
        let project = app.get("/api/v2.0/projects/pulled").admin().send().await;
        assert_eq!(project.status, axum::http::StatusCode::OK, "the project was made: {}", project.text());
        let again = run_policy(&app, pull).await;
        let tasks = tasks_of(&app, &again).await;
        assert!(task_log(&app, &again, &tasks[0]).await.contains("0 manifests"), "nothing new");

        let res = app
            .delete(&format!("/api/v2.0/projects/library/repositories/web/artifacts/{pushed}"))
            .admin()
            .send()
            .await;
        assert_eq!(res.status, axum::http::StatusCode::OK, "{}", res.text());
        berth::events::deliver(&app.state).await;
        berth::workers::run_due(&app.state, "test").await.unwrap();
        assert!(!peer_has(&peer, &format!("edge/web@{pushed}")), "the delete was replicated");

        // A registry a policy names stays.
        let res = app.delete(&format!("/api/v2.0/registries/{registry}")).admin().send().await;
        assert_eq!(res.status, axum::http::StatusCode::PRECONDITION_FAILED, "{}", res.text());
    }
);
