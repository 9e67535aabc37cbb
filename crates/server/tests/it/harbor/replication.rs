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
    /// A run to a registry that is down fails its task with the reason; the
    /// run can be stopped.
    async fn an_outage_fails_the_task_with_its_reason(app) {
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
