//! Replication policies (`/replication/policies`, `/replication/executions`):
//! Harbor's checks and messages, schedules set and removed with the policy,
//! runs listed, filtered and stopped; and Berth to Berth through the
//! `harbor` adapter (the project is made on the far side).

use std::process::Command;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backend_test;
use crate::harbor::fixtures::{id_from_location, message};
use crate::harbor::registries::served_berth;
use crate::registry::push_image;
use crate::util::{ADMIN_PASSWORD, DockerRegistry, PeerOptions, TestApp};

async fn registry(app: &TestApp, kind: &str, url: &str, user: &str, secret: &str) -> i64 {
    let res = app
        .post("/api/v2.0/registries")
        .admin()
        .json(
            &json!({"name": format!("{kind}-peer"), "type": kind, "url": url,
            "credential": {"type": "basic", "access_key": user, "access_secret": secret}}),
        )
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    id_from_location(&res)
}

const BASE: &str = "/api/v2.0/replication/policies";

backend_test!(
    /// Create, read, list, replace and delete with Harbor's checks; a
    /// scheduled policy has a schedule while it is enabled.
    async fn policies_are_checked_and_kept(app) {
        let peer = DockerRegistry::start(PeerOptions { basic_auth: None, tls: false }).await;
        let id = {
            let res = app.post("/api/v2.0/registries").admin()
                .json(&json!({"name": "peer", "type": "docker-registry", "url": peer.url()}))
                .send().await;
            assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
            id_from_location(&res)
        };
        let good = json!({"name": "nightly", "dest_registry": {"id": id}, "enabled": true,
            "trigger": {"type": "scheduled", "trigger_settings": {"cron": "0 0 3 * * *"}},
            "filters": [{"type": "tag", "value": "release-*", "decoration": "excludes"}]});
        let res = app.post(BASE).admin().json(&good).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let policy = id_from_location(&res);
        assert_eq!(res.header("location"), Some(format!("{BASE}/{policy}").as_str()));
        let res = app.post(BASE).admin().json(&good).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        assert_eq!(message(&res), "policy nightly already exists");

        for (body, said) in [
            (json!({"dest_registry": {"id": id}}), "empty name"),
            (json!({"name": "x"}), "either src_registry or dest_registry should be empty and the other one shouldn't be empty"),
            (json!({"name": "x", "src_registry": {"id": id}, "dest_registry": {"id": id}}), "either src_registry or dest_registry should be empty and the other one shouldn't be empty"),
            (json!({"name": "x", "src_registry": {"id": 0}, "dest_registry": {"id": 0}}), "either src_registry or dest_registry should be empty and the other one shouldn't be empty"),
            (json!({"name": "x", "dest_registry": {"id": id}, "filters": [{"type": "size", "value": "1"}]}), "invalid filter type"),
            (json!({"name": "x", "dest_registry": {"id": id}, "filters": [{"type": "resource", "value": "chart"}]}), "invalid resource filter: chart"),
            (json!({"name": "x", "dest_registry": {"id": id}, "dest_namespace": "Not Valid"}), "invalid destination namespace: Not Valid"),
            (json!({"name": "x", "dest_registry": {"id": id}, "trigger": {"type": "scheduled"}}), "the cron string cannot be empty when the trigger type is scheduled"),
            (json!({"name": "x", "dest_registry": {"id": id}, "trigger": {"type": "scheduled", "trigger_settings": {"cron": "every day"}}}), "invalid cron string for scheduled trigger: every day"),
            (json!({"name": "x", "dest_registry": {"id": id}, "trigger": {"type": "sometimes"}}), "invalid trigger type"),
            (json!({"name": "x", "dest_registry": {"id": 9999}}), "registry 9999 not found"),
        ] {
            let res = app.post(BASE).admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}: {}", res.text());
            assert_eq!(message(&res), said, "{body}");
        }

        let got = app.get(&format!("{BASE}/{policy}")).admin().send().await.json();
        assert_eq!(got["trigger"], json!({"type": "scheduled", "trigger_settings": {"cron": "0 0 3 * * *"}}));
        assert_eq!(got["filters"], json!([{"type": "tag", "value": "release-*", "decoration": "excludes"}]));
        assert_eq!(got["dest_namespace_replace_count"], -1, "the legacy mode when not given");
        assert_eq!(got["speed"], 0);
        let schedules = app.get("/api/v2.0/schedules").admin().send().await.json();
        assert!(schedules.to_string().contains("REPLICATION"), "{schedules}");

        let listed = app.get(&format!("{BASE}?name=night")).admin().send().await;
        assert_eq!(listed.header("x-total-count"), Some("1"));
        let listed = app.get(&format!("{BASE}?q=name%3Dother")).admin().send().await;
        assert_eq!(listed.header("x-total-count"), Some("0"));

        // A full replace: `enabled` left out disables it, and its schedule goes.
        let res = app.put(&format!("{BASE}/{policy}")).admin()
            .json(&json!({"name": "nightly", "dest_registry": {"id": id},
                "trigger": {"type": "scheduled", "trigger_settings": {"cron": "0 0 3 * * *"}}, "deletion": true}))
            .send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let got = app.get(&format!("{BASE}/{policy}")).admin().send().await.json();
        assert!(got.get("enabled").is_none(), "{got}");
        assert_eq!((got["deletion"].as_bool(), got["replicate_deletion"].as_bool()), (Some(true), Some(true)));
        let schedules = app.get("/api/v2.0/schedules").admin().send().await.json();
        assert!(!schedules.to_string().contains("REPLICATION"), "{schedules}");
        let res = app.post("/api/v2.0/replication/executions").admin().json(&json!({"policy_id": policy})).send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "a disabled policy does not run: {}", res.text());

        // Only administrators.
        crate::harbor::fixtures::user(&app, "dev").await;
        let res = app.get(BASE).basic("dev", crate::harbor::fixtures::PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);

        let res = app.delete(&format!("{BASE}/{policy}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get(&format!("{BASE}/{policy}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get("/api/v2.0/replication/executions/424242").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let infos = app.get("/api/v2.0/replication/adapterinfos").admin().send().await.json();
        assert_eq!(infos["docker-hub"]["endpoint_pattern"]["endpoint_type"], "EndpointPatternTypeFix");
        let info = app.get(&format!("/api/v2.0/registries/{id}/info")).admin().send().await.json();
        assert_eq!(info["type"], "docker-registry");
    }
);

backend_test!(
    /// A run to a registry that is down fails its task with the reason and
    /// can be stopped; once the registry is back, a new run sends only what
    /// it lacks.
    async fn an_outage_fails_the_task_and_a_new_run_sends_only_what_is_missing(app) {
        let peer = DockerRegistry::start(PeerOptions { basic_auth: None, tls: false }).await;
        let url = peer.url();
        let id = {
            let res = app.post("/api/v2.0/registries").admin()
                .json(&json!({"name": "peer", "type": "docker-registry", "url": url}))
                .send().await;
            assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
            id_from_location(&res)
        };
        drop(peer);
        push_image(&app, "library/app", "v1", &[b"a layer"]).await;
        let res = app.post(BASE).admin()
            .json(&json!({"name": "out", "dest_registry": {"id": id}, "enabled": true}))
            .send().await;
        let policy = id_from_location(&res);
        let res = app.post("/api/v2.0/replication/executions").admin().json(&json!({"policy_id": policy})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let run = id_from_location(&res);
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let got = app.get(&format!("/api/v2.0/replication/executions/{run}")).admin().send().await.json();
        assert_eq!(got["status"], "InProgress", "the task waits for its retry: {got}");
        assert_eq!(got["in_progress"], 1, "{got}");
        let tasks = app.get(&format!("/api/v2.0/replication/executions/{run}/tasks")).admin().send().await.json();
        let task = &tasks[0];
        let log = app.get(&format!("/api/v2.0/replication/executions/{run}/tasks/{}/log", task["id"])).admin().send().await.text();
        assert!(log.contains("failed") && log.contains("127.0.0.1"), "the reason is logged: {log}");

        let res = app.put(&format!("/api/v2.0/replication/executions/{run}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let got = app.get(&format!("/api/v2.0/replication/executions/{run}")).admin().send().await.json();
        assert_eq!(got["status"], "Stopped", "{got}");
        let listed = app.get("/api/v2.0/replication/executions?status=Stopped").admin().send().await;
        assert_eq!(listed.header("x-total-count"), Some("1"), "{}", listed.text());

        // The registry is back (elsewhere) holding part of the image, as an
        // interrupted run leaves it: a new run sends only what is missing.
        let back = DockerRegistry::start(PeerOptions { basic_auth: None, tls: false }).await;
        let remote = berth::upstream::Remote::new(&berth::upstream::Target {
            base: back.url(),
            insecure: false,
            ca_certificate: "",
            credential: None,
            deadlines: berth::upstream::Deadlines::DEFAULT,
        })
        .unwrap();
        let layer: &[u8] = b"a layer";
        let layer_digest = crate::registry::digest_of(layer);
        let body = http_body_util::BodyExt::boxed_unsync(
            http_body_util::BodyExt::map_err(http_body_util::Full::new(bytes::Bytes::from_static(b"a layer")), |never| match never {}),
        );
        remote.push_blob("library/app", &layer_digest, layer.len() as u64, body).await.unwrap();
        let res = app.put(&format!("/api/v2.0/registries/{id}")).admin().json(&json!({"url": back.url()})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.post("/api/v2.0/replication/executions").admin().json(&json!({"policy_id": policy})).send().await;
        let again = id_from_location(&res);
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let got = app.get(&format!("/api/v2.0/replication/executions/{again}")).admin().send().await.json();
        assert_eq!(got["status"], "Succeed", "{got}");
        let tasks = app.get(&format!("/api/v2.0/replication/executions/{again}/tasks")).admin().send().await.json();
        let log = app.get(&format!("/api/v2.0/replication/executions/{again}/tasks/{}/log", tasks[0]["id"])).admin().send().await.text();
        assert!(log.contains("1 manifests and 1 blobs") && log.contains("0 manifests and 1 blobs already there"), "the config went, the layer was there: {log}");

        let res = app.delete(&format!("{BASE}/{policy}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "an ended run does not hold the policy: {}", res.text());
    }
);

backend_test!(
    /// Berth to Berth through the `harbor` adapter: the project is made on
    /// the far side, and skopeo reads the image there with its digest.
    async fn berth_to_berth_through_the_harbor_adapter(app) {
        let dir = tempfile::tempdir().unwrap();
        let far = served_berth(dir.path()).await;
        let id = registry(&app, "harbor", &far.url(""), "admin", ADMIN_PASSWORD).await;
        let (_, digest) = push_image(&app, "library/app", "v1", &[b"a layer for far away"]).await;
        let res = app.post(BASE).admin()
            .json(&json!({"name": "far", "dest_registry": {"id": id}, "dest_namespace": "copies", "enabled": true}))
            .send().await;
        let policy = id_from_location(&res);
        let res = app.post("/api/v2.0/replication/executions").admin().json(&json!({"policy_id": policy})).send().await;
        let run = id_from_location(&res);
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let got: Value = app.get(&format!("/api/v2.0/replication/executions/{run}")).admin().send().await.json();
        assert_eq!(got["status"], "Succeed", "{got}");
        let raw = Command::new("skopeo")
            .args(["inspect", "--raw", "--tls-verify=false", "--creds"])
            .arg(format!("admin:{ADMIN_PASSWORD}"))
            .arg(format!("docker://{}/copies/app:v1", far.host()))
            .output()
            .unwrap();
        assert!(raw.status.success(), "{}", String::from_utf8_lossy(&raw.stderr));
        assert_eq!(crate::registry::digest_of(&raw.stdout), digest);
    }
);

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// Pushes an accessory of `artifact_type` whose subject is `subject` (an
/// OCI manifest over the empty config and one layer); its digest.
async fn push_accessory(
    app: &TestApp,
    name: &str,
    artifact_type: &str,
    subject: Value,
    layer: &[u8],
) -> String {
    use crate::registry::{descriptor, digest_of, push_blob, put_manifest};
    push_blob(app, name, b"{}").await;
    push_blob(app, name, layer).await;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": descriptor("application/vnd.oci.empty.v1+json", b"{}"),
        "layers": [descriptor("application/octet-stream", layer)],
        "subject": subject,
    })
    .to_string()
    .into_bytes();
    let digest = digest_of(&manifest);
    let res = put_manifest(app, name, &digest, OCI_MANIFEST, &manifest).await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    digest
}

/// The digests a Berth at `base` lists as referrers of `name@digest`.
async fn referrers_at(base: &str, name: &str, digest: &str) -> Vec<String> {
    let res = reqwest::Client::new()
        .get(format!("{base}/v2/{name}/referrers/{digest}"))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), reqwest::StatusCode::OK);
    let listed: Value = res.json().await.unwrap();
    let mut digests: Vec<String> = listed["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["digest"].as_str().unwrap().to_string())
        .collect();
    digests.sort();
    digests
}

backend_test!(
    /// A multi-arch index with a signature on it and an SBOM on one of its
    /// images goes whole to another Berth (the accessories after their
    /// subjects) and comes back whole through a pull-based policy (the far
    /// side's referrers API).
    async fn an_index_with_its_signature_and_sbom_arrives_whole(app) {
        use crate::registry::{digest_of, put_manifest};
        let dir = tempfile::tempdir().unwrap();
        let far = served_berth(dir.path()).await;
        let id = registry(&app, "harbor", &far.url(""), "admin", ADMIN_PASSWORD).await;
        let (amd, amd_digest) = push_image(&app, "library/app", "amd", &[b"amd layer"]).await;
        let (arm, arm_digest) = push_image(&app, "library/app", "arm", &[b"arm layer"]).await;
        let index = json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {"mediaType": OCI_MANIFEST, "digest": amd_digest, "size": amd.len(), "platform": {"architecture": "amd64", "os": "linux"}},
                {"mediaType": OCI_MANIFEST, "digest": arm_digest, "size": arm.len(), "platform": {"architecture": "arm64", "os": "linux"}},
            ],
        })
        .to_string()
        .into_bytes();
        let index_digest = digest_of(&index);
        let res = put_manifest(&app, "library/app", "multi", OCI_INDEX, &index).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let signature = push_accessory(&app, "library/app", "application/vnd.dev.cosign.artifact.sig.v1+json",
            json!({"mediaType": OCI_INDEX, "digest": index_digest, "size": index.len()}), b"a signature").await;
        let sbom = push_accessory(&app, "library/app", "application/spdx+json",
            json!({"mediaType": OCI_MANIFEST, "digest": arm_digest, "size": arm.len()}), b"an sbom").await;

        let res = app.post(BASE).admin()
            .json(&json!({"name": "far", "dest_registry": {"id": id}, "dest_namespace": "copies",
                "filters": [{"type": "tag", "value": "multi"}], "enabled": true}))
            .send().await;
        let policy = id_from_location(&res);
        let res = app.post("/api/v2.0/replication/executions").admin().json(&json!({"policy_id": policy})).send().await;
        let run = id_from_location(&res);
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let got: Value = app.get(&format!("/api/v2.0/replication/executions/{run}")).admin().send().await.json();
        assert_eq!(got["status"], "Succeed", "{got}");
        let base = far.url("");
        assert_eq!(referrers_at(&base, "copies/app", &index_digest).await, vec![signature.clone()]);
        assert_eq!(referrers_at(&base, "copies/app", &arm_digest).await, vec![sbom.clone()]);

        let res = app.post(BASE).admin()
            .json(&json!({"name": "back", "src_registry": {"id": id}, "dest_namespace": "back",
                "filters": [{"type": "name", "value": "copies/app"}], "enabled": true}))
            .send().await;
        let policy = id_from_location(&res);
        let res = app.post("/api/v2.0/replication/executions").admin().json(&json!({"policy_id": policy})).send().await;
        let run = id_from_location(&res);
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let got: Value = app.get(&format!("/api/v2.0/replication/executions/{run}")).admin().send().await.json();
        assert_eq!(got["status"], "Succeed", "{got}");
        let res = app.get(&format!("/v2/back/app/referrers/{index_digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json()["manifests"][0]["digest"], signature.as_str(), "{}", res.text());
        let res = app.get(&format!("/v2/back/app/referrers/{arm_digest}")).admin().send().await;
        assert_eq!(res.json()["manifests"][0]["digest"], sbom.as_str(), "{}", res.text());
        let res = app.get("/v2/back/app/manifests/multi").admin().send().await;
        assert_eq!(res.header("docker-content-digest"), Some(index_digest.as_str()));
    }
);

backend_test!(
    /// Without webhook or event-based replication policies, a push writes no
    /// deliveries for them; with one, it does.
    async fn events_are_delivered_only_to_subscribers_with_policies(app) {
        let events = app.store().events();
        push_image(&app, "library/quiet", "v1", &[b"quiet layer"]).await;
        assert_eq!(events.pending("webhook").await.unwrap(), 0);
        assert_eq!(events.pending("replication").await.unwrap(), 0);
        assert!(
            events.pending("audit").await.unwrap() > 0,
            "the audit log hears of everything (not delivered yet: the dispatcher waits a second)"
        );

        let peer = DockerRegistry::start(PeerOptions { basic_auth: None, tls: false }).await;
        let res = app.post("/api/v2.0/registries").admin()
            .json(&json!({"name": "peer", "type": "docker-registry", "url": peer.url()}))
            .send().await;
        let id = id_from_location(&res);
        let res = app.post(BASE).admin()
            .json(&json!({"name": "on-push", "dest_registry": {"id": id}, "trigger": {"type": "event_based"}, "enabled": true}))
            .send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        push_image(&app, "library/quiet", "v2", &[b"another layer"]).await;
        // Taken already if the dispatcher ran: then it started a run.
        let runs = app.get("/api/v2.0/replication/executions?trigger=event_based").admin().send().await;
        let started: i64 = runs.header("x-total-count").unwrap().parse().unwrap();
        assert_eq!(events.pending("replication").await.unwrap() + started, 1, "the push, for the event-based policy");
        assert_eq!(events.pending("webhook").await.unwrap(), 0, "no webhook policy");
    }
);
