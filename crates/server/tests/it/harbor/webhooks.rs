//! Webhooks (`/projects/{p}/webhook/...`): policies checked as Harbor checks
//! them, and pushes and deletes delivered to a real receiver in Harbor's
//! Default and CloudEvents formats, retried when the receiver fails.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backend_test;
use crate::harbor::fixtures::{PASSWORD, id_from_location, member, project, user};
use crate::registry::push_image;
use crate::util::{Receiver, TestApp, TestResponse};

fn message(res: &TestResponse) -> String {
    res.json()["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn policy(name: &str, targets: Value, events: &[&str]) -> Value {
    json!({"name": name, "targets": targets, "event_types": events, "enabled": true})
}

async fn create(app: &TestApp, project: &str, body: &Value) -> i64 {
    let res = app
        .post(&format!("/api/v2.0/projects/{project}/webhook/policies"))
        .admin()
        .json(body)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    id_from_location(&res)
}

/// Hands the pending events to the webhooks and runs the deliveries due.
async fn deliver(app: &TestApp) {
    berth::events::deliver(&app.state).await;
    berth::workers::run_due(&app.state, "test").await.unwrap();
}

backend_test!(
    /// Create, read, list, replace and delete, with Harbor's checks and messages.
    async fn policies_are_checked_and_kept(app) {
        let target = json!([{"type": "http", "address": "https://hooks.example/in", "auth_header": "Bearer t0ken"}]);
        let id = create(&app, "library", &policy("deploy", target.clone(), &["PUSH_ARTIFACT"])).await;
        let base = "/api/v2.0/projects/library/webhook/policies";
        let got = app.get(&format!("{base}/{id}")).admin().send().await;
        assert_eq!(got.status, StatusCode::OK, "{}", got.text());
        let got = got.json();
        assert_eq!(got["name"], "deploy");
        assert_eq!(got["enabled"], true);
        assert_eq!(got["creator"], "admin");
        assert_eq!(got["event_types"], json!(["PUSH_ARTIFACT"]));
        assert_eq!(
            got["targets"],
            json!([{"type": "http", "address": "https://hooks.example/in", "auth_header": "Bearer t0ken", "payload_format": "Default"}]),
            "zero values left out, the default format filled in"
        );
        assert!(got.get("description").is_none());

        let res = app.post(base).admin().json(&policy("deploy", target.clone(), &["PUSH_ARTIFACT"])).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        assert_eq!(message(&res), "notification policy named deploy already exists");
        for (body, said) in [
            (policy("x", target.clone(), &[]), "empty event type"),
            (policy("x", target.clone(), &["FOO"]), "unsupported event type FOO"),
            (policy("x", json!([]), &["PUSH_ARTIFACT"]), "empty notification target with policy x"),
            (policy("x", json!([{"type": "http", "address": "ftp://h/x"}]), &["PUSH_ARTIFACT"]), "invalid scheme: ftp"),
            (policy("x", json!([{"type": "email", "address": "http://h/x"}]), &["PUSH_ARTIFACT"]), "unsupported target type email with policy x"),
            (policy("x", json!([{"type": "slack", "address": "http://h/x", "payload_format": "CloudEvents"}]), &["PUSH_ARTIFACT"]), "set payload format is not allowed for slack"),
            (policy("x", json!([{"type": "http", "address": "http://h/x", "payload_format": "Xml"}]), &["PUSH_ARTIFACT"]), "unsupported payload format type: Xml"),
        ] {
            let res = app.post(base).admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}: {}", res.text());
            assert_eq!(message(&res), said);
        }

        // PUT replaces every field: `enabled` left out disables.
        let res = app.put(&format!("{base}/{id}")).admin()
            .json(&json!({"name": "deploy2", "targets": target, "event_types": ["DELETE_ARTIFACT", "PUSH_ARTIFACT"]}))
            .send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let got = app.get(&format!("{base}/{id}")).admin().send().await.json();
        assert_eq!((got["name"].clone(), got["enabled"].clone()), (json!("deploy2"), json!(false)));
        let listed = app.get(&format!("{base}?page_size=1")).admin().send().await;
        assert_eq!(listed.header("x-total-count"), Some("1"));
        assert_eq!(listed.json().as_array().unwrap().len(), 1);

        let events = app.get("/api/v2.0/projects/library/webhook/events").admin().send().await.json();
        assert_eq!(events["notify_type"], json!(["http", "slack"]));
        assert_eq!(events["payload_formats"], json!([{"notify_type": "http", "formats": ["Default", "CloudEvents"]}]));
        assert_eq!(events["event_type"][0], "PUSH_ARTIFACT");
        assert_eq!(events["event_type"].as_array().unwrap().len(), 10);

        let res = app.delete(&format!("{base}/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get(&format!("{base}/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(message(&res), format!("notificationPolicy {id} not found"));
    }
);

backend_test!(
    /// A policy's creator is the caller, whatever the body says; a policy of
    /// more than ten targets is refused with Harbor's 400, on create and on
    /// update.
    async fn the_creator_is_the_caller_and_targets_are_bounded(app) {
        let base = "/api/v2.0/projects/library/webhook/policies";
        let mut body = policy("forged", json!([{"type": "http", "address": "http://h/x"}]), &["PUSH_ARTIFACT"]);
        body["creator"] = json!("mallory");
        let id = create(&app, "library", &body).await;
        let got = app.get(&format!("{base}/{id}")).admin().send().await.json();
        assert_eq!(got["creator"], "admin", "the caller, not the body's");

        let targets = |n: usize| -> Value {
            (0..n).map(|i| json!({"type": "http", "address": format!("http://h/{i}")})).collect()
        };
        let res = app.post(base).admin().json(&policy("eleven", targets(11), &["PUSH_ARTIFACT"])).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        assert_eq!(res.json()["errors"][0]["code"], "BAD_REQUEST");
        assert_eq!(message(&res), "too many notification targets with policy eleven: at most 10");
        let res = app.put(&format!("{base}/{id}")).admin().json(&policy("forged", targets(11), &["PUSH_ARTIFACT"])).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        create(&app, "library", &policy("ten", targets(10), &["PUSH_ARTIFACT"])).await;
    }
);

backend_test!(
    /// Project administrators manage and read policies; maintainers only
    /// list them (as in Harbor: a single policy, with its targets' auth
    /// headers, and its deliveries are the administrators'); developers see
    /// nothing.
    async fn only_project_administrators_change_policies(app) {
        let project_id = project(&app, None, "hooked", false).await;
        for (name, role) in [("pa", 1), ("ma", 4), ("dev", 2)] {
            let uid = user(&app, name).await;
            member(&app, project_id, uid, role).await;
        }
        let body = policy("p", json!([{"type": "http", "address": "http://h/x"}]), &["PUSH_ARTIFACT"]);
        let base = "/api/v2.0/projects/hooked/webhook/policies";
        let as_user = |name: &'static str| (name, PASSWORD);
        let res = app.post(base).basic(as_user("ma").0, PASSWORD).json(&body).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.post(base).basic(as_user("pa").0, PASSWORD).json(&body).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let id = id_from_location(&res);
        let res = app.get(base).basic("ma", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get(base).basic("dev", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        for path in [format!("{base}/{id}"), format!("{base}/{id}/executions")] {
            let res = app.get(&path).basic("ma", PASSWORD).send().await;
            assert_eq!(res.status, StatusCode::FORBIDDEN, "{path}: {}", res.text());
            let res = app.get(&path).basic("pa", PASSWORD).send().await;
            assert_eq!(res.status, StatusCode::OK, "{path}: {}", res.text());
        }
    }
);

backend_test!(
    /// A push reaches both targets of a policy, in each's format, with the
    /// auth header; the delivery is recorded with its log and last trigger.
    async fn pushes_and_deletes_are_delivered_in_both_formats(app) {
        let receiver = Receiver::start(&[]).await;
        let targets = json!([
            {"type": "http", "address": receiver.url("default"), "auth_header": "Bearer s3cret"},
            {"type": "http", "address": receiver.url("cloud"), "payload_format": "CloudEvents"},
        ]);
        let id = create(&app, "library", &policy("both", targets, &["PUSH_ARTIFACT", "DELETE_ARTIFACT"])).await;
        let (_, digest) = push_image(&app, "library/hooked", "v1", &[b"hooked layer"]).await;
        deliver(&app).await;
        let got = receiver.received();
        assert_eq!(got.len(), 2, "{got:?}");
        let default = got.iter().find(|r| r.path == "/default").expect("the Default target");
        assert_eq!(default.header("content-type"), Some("application/json"));
        assert_eq!(default.header("authorization"), Some("Bearer s3cret"));
        assert!(default.text().starts_with(r#"{"type":"PUSH_ARTIFACT","occur_at":"#), "{}", default.text());
        let body = default.json();
        assert!(body["occur_at"].is_i64());
        assert_eq!(body["operator"], "admin");
        let host = app.state.external_url.split_once("://").unwrap().1.to_string();
        assert_eq!(
            body["event_data"]["resources"],
            json!([{"digest": digest, "tag": "v1", "resource_url": format!("{host}/library/hooked:v1")}])
        );
        let repository = &body["event_data"]["repository"];
        assert!(repository["date_created"].is_i64());
        assert_eq!(
            (repository["name"].clone(), repository["namespace"].clone(), repository["repo_full_name"].clone(), repository["repo_type"].clone()),
            (json!("hooked"), json!("library"), json!("library/hooked"), json!("public"))
        );
        let cloud = got.iter().find(|r| r.path == "/cloud").expect("the CloudEvents target");
        assert_eq!(cloud.header("content-type"), Some("application/cloudevents+json"));
        assert_eq!(cloud.header("authorization"), None);
        assert!(cloud.text().starts_with(r#"{"specversion":"1.0","id":""#), "{}", cloud.text());
        let event = cloud.json();
        assert_eq!(event["type"], "harbor.artifact.pushed");
        assert_eq!(event["source"], format!("/projects/1/webhook/policies/{id}"));
        assert_eq!(event["datacontenttype"], "application/json");
        assert_eq!(event["operator"], "admin");
        assert_eq!(event["data"], body["event_data"]);
        assert!(event["time"].as_str().unwrap().ends_with('Z'));

        // The deliveries: two executions, each with a task and its log.
        let base = format!("/api/v2.0/projects/library/webhook/policies/{id}");
        let executions = app.get(&format!("{base}/executions")).admin().send().await;
        assert_eq!(executions.header("x-total-count"), Some("2"));
        let executions = executions.json();
        let execution = &executions[0];
        assert_eq!((execution["vendor_type"].clone(), execution["status"].clone(), execution["trigger"].clone()),
            (json!("WEBHOOK"), json!("Success"), json!("EVENT")));
        assert_eq!(execution["extra_attrs"]["event_type"], "PUSH_ARTIFACT");
        let eid = execution["id"].as_i64().unwrap();
        let tasks = app.get(&format!("{base}/executions/{eid}/tasks")).admin().send().await.json();
        assert_eq!(tasks[0]["status"], "Success");
        assert_eq!(tasks[0]["run_count"], 1);
        let tid = tasks[0]["id"].as_i64().unwrap();
        let log = app.get(&format!("{base}/executions/{eid}/tasks/{tid}/log")).admin().send().await;
        assert!(log.text().contains("send request to remote endpoint, body: {"), "{}", log.text());
        let res = app.get(&format!("/api/v2.0/projects/library/webhook/policies/{id}/executions/999999/tasks")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let last = app.get("/api/v2.0/projects/library/webhook/lasttrigger").admin().send().await.json();
        let pushed = last.as_array().unwrap().iter().find(|t| t["event_type"] == "PUSH_ARTIFACT").unwrap();
        assert_eq!(pushed["policy_name"], "both");
        assert_ne!(pushed["last_trigger_time"], "0001-01-01T00:00:00.000Z");
        let deleted = last.as_array().unwrap().iter().find(|t| t["event_type"] == "DELETE_ARTIFACT").unwrap();
        assert_eq!(deleted["last_trigger_time"], "0001-01-01T00:00:00.000Z");

        // A deleted artifact is named by the first tag it had, as Harbor names it.
        let res = app.delete(&format!("/api/v2.0/projects/library/repositories/hooked/artifacts/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        deliver(&app).await;
        let got = receiver.received();
        let deleted = got.iter().skip(2).find(|r| r.path == "/default").expect("the delete delivered");
        let body = deleted.json();
        assert_eq!(body["type"], "DELETE_ARTIFACT");
        assert_eq!(body["event_data"]["resources"][0]["tag"], "v1");
        assert_eq!(body["event_data"]["resources"][0]["digest"], json!(digest));
        assert_eq!(
            body["event_data"]["resources"][0]["resource_url"],
            json!(format!("{host}/library/hooked:v1"))
        );
    }
);

backend_test!(
    /// A receiver that fails gets the same payload again after the backoff;
    /// a disabled policy and `notification_enable=false` send nothing.
    async fn failed_deliveries_are_retried_and_disabled_ones_not_sent(app) {
        let receiver = Receiver::start(&[503]).await;
        let targets = json!([{"type": "http", "address": receiver.url("flaky")}]);
        let id = create(&app, "library", &policy("flaky", targets, &["PUSH_ARTIFACT"])).await;
        push_image(&app, "library/flaky", "v1", &[b"flaky layer"]).await;
        deliver(&app).await;
        assert_eq!(receiver.received().len(), 1);
        let base = format!("/api/v2.0/projects/library/webhook/policies/{id}");
        let executions = app.get(&format!("{base}/executions")).admin().send().await.json();
        assert_eq!(executions[0]["status"], "Running", "waiting for its retry");
        // The retry's time comes.
        app.execute_sql("UPDATE job_tasks SET run_after = '2000-01-01T00:00:00.000Z'").await;
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let got = receiver.received();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].body, got[1].body, "the same payload again");
        let executions = app.get(&format!("{base}/executions")).admin().send().await.json();
        assert_eq!(executions[0]["status"], "Success");
        let eid = executions[0]["id"].as_i64().unwrap();
        let tasks = app.get(&format!("{base}/executions/{eid}/tasks")).admin().send().await.json();
        assert_eq!(tasks[0]["run_count"], 2);

        // Off: nothing is made for what happens meanwhile, even once back on.
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"notification_enable": false})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        push_image(&app, "library/flaky", "v2", &[b"quiet layer"]).await;
        deliver(&app).await;
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"notification_enable": true})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        deliver(&app).await;
        assert_eq!(receiver.received().len(), 2);
        let executions = app.get(&format!("{base}/executions")).admin().send().await;
        assert_eq!(executions.header("x-total-count"), Some("1"));
    }
);

/// Pushes a one-layer image to `server` as `name:tag` with admin's
/// credentials; its manifest's digest.
async fn push_to(server: &crate::util::ServedBerth, name: &str, tag: &str) -> String {
    use crate::registry::{digest_of, image_manifest};
    let client = reqwest::Client::new();
    let config = format!(r#"{{"architecture":"amd64","os":"linux","tag":"{tag}"}}"#).into_bytes();
    let layer = format!("layer of {tag}").into_bytes();
    for blob in [&config, &layer] {
        let res = client
            .post(server.url(&format!(
                "/v2/{name}/blobs/uploads/?digest={}",
                digest_of(blob)
            )))
            .basic_auth("admin", Some(crate::util::ADMIN_PASSWORD))
            .body(blob.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
    }
    let manifest = image_manifest(&config, &[&layer]);
    let res = client
        .put(server.url(&format!("/v2/{name}/manifests/{tag}")))
        .basic_auth("admin", Some(crate::util::ADMIN_PASSWORD))
        .header("content-type", "application/vnd.oci.image.manifest.v1+json")
        .body(manifest.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    digest_of(&manifest)
}

/// A push acknowledged just before Berth is killed (-9), before it could
/// hand the event over, is delivered once Berth is back: the event was
/// committed with the push.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_acknowledged_before_a_crash_is_delivered_after_it() {
    use crate::util::{ADMIN_PASSWORD, BERTH_BIN, ServedBerth};
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let receiver = Receiver::start(&[]).await;
    let serve = |_| {
        let mut command = std::process::Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(&data)
            .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env_remove("DATABASE_URL")
            .env_remove("BLOB_STORE");
        command
    };
    let server = ServedBerth::start(serve).await;
    let res = reqwest::Client::new()
        .post(server.url("/api/v2.0/projects/library/webhook/policies"))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .json(&policy(
            "crash",
            json!([{"type": "http", "address": receiver.url("in")}]),
            &["PUSH_ARTIFACT"],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let digest = push_to(&server, "library/survivor", "v1").await;
    server.crash();
    assert!(receiver.received().is_empty(), "killed before its hand-off");

    let _server = ServedBerth::start(serve).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while receiver.received().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let got = receiver.received();
    assert_eq!(got.len(), 1, "delivered once after the restart");
    let body = got[0].json();
    assert_eq!(body["type"], "PUSH_ARTIFACT");
    assert_eq!(body["event_data"]["resources"][0]["digest"], json!(digest));
}

backend_test!(
    /// An HTTPS receiver with a certificate of its own CA is reached only
    /// with `skip_cert_verify`; a Slack target gets Harbor's message blocks
    /// and no Authorization header.
    async fn https_receivers_and_slack(app) {
        let pki = tempfile::tempdir().unwrap();
        let ca = crate::util::TestCa::new(pki.path());
        let (cert, key) = ca.issue("receiver", crate::util::Purpose::Server);
        let secure = Receiver::start_tls(&[], &cert, &key).await;
        let slack = Receiver::start(&[]).await;
        let targets = json!([
            {"type": "http", "address": secure.url("trusting"), "skip_cert_verify": true},
            {"type": "http", "address": secure.url("verifying")},
            {"type": "slack", "address": slack.url("services/T0/B0/x"), "auth_header": "ignored"},
        ]);
        let id = create(&app, "library", &policy("tls", targets, &["PUSH_ARTIFACT"])).await;
        push_image(&app, "library/secure", "v1", &[b"secure layer"]).await;
        deliver(&app).await;
        let got = secure.received();
        assert_eq!(got.len(), 1, "only the target that skips verification got in: {got:?}");
        assert_eq!(got[0].path, "/trusting");
        let executions = app.get(&format!("/api/v2.0/projects/library/webhook/policies/{id}/executions?page_size=10")).admin().send().await.json();
        let refused = executions.as_array().unwrap().iter()
            .find(|e| e["status"] == "Running").expect("the verifying target waits for its retry");
        let eid = refused["id"].as_i64().unwrap();
        let tasks = app.get(&format!("/api/v2.0/projects/library/webhook/policies/{id}/executions/{eid}/tasks")).admin().send().await.json();
        let tid = tasks[0]["id"].as_i64().unwrap();
        let log = app.get(&format!("/api/v2.0/projects/library/webhook/policies/{id}/executions/{eid}/tasks/{tid}/log")).admin().send().await.text();
        assert!(log.contains("certificate") || log.contains("UnknownIssuer"), "{log}");

        let message = slack.received();
        assert_eq!(message.len(), 1);
        assert_eq!(message[0].header("authorization"), None);
        assert_eq!(message[0].header("content-type"), Some("application/json"));
        let blocks = message[0].json()["blocks"].clone();
        assert_eq!(blocks.as_array().unwrap().len(), 6);
        assert_eq!(blocks[0]["text"]["text"], "*Harbor webhook events*");
        assert_eq!(blocks[1]["text"]["text"], "*event_type:* PUSH_ARTIFACT");
        let data = blocks[5]["text"]["text"].as_str().unwrap();
        assert!(data.starts_with("```{\n\t\"resources\": ["), "{data}");
        let executions = app.get(&format!("/api/v2.0/projects/library/webhook/policies/{id}/executions?page_size=10")).admin().send().await.json();
        assert!(executions.as_array().unwrap().iter().any(|e| e["vendor_type"] == "SLACK" && e["status"] == "Success"));
    }
);

backend_test!(
    /// Pulls are announced to the projects whose webhooks ask for them, by
    /// tag or by digest, and audited once as before.
    async fn pulls_are_delivered_to_the_policies_asking_for_them(app) {
        let receiver = Receiver::start(&[]).await;
        let targets = json!([{"type": "http", "address": receiver.url("pulls")}]);
        create(&app, "library", &policy("pulls", targets, &["PULL_ARTIFACT"])).await;
        let (_, digest) = push_image(&app, "library/pulled", "v1", &[b"pulled layer"]).await;
        for reference in ["v1", digest.as_str()] {
            let res = app.get(&format!("/v2/library/pulled/manifests/{reference}")).admin().send().await;
            assert_eq!(res.status, StatusCode::OK);
        }
        berth::service::webhooks::write_pulls(&app.state).await;
        deliver(&app).await;
        let got = receiver.received();
        assert_eq!(got.len(), 2, "one per pull, the push not asked for: {got:?}");
        let bodies: Vec<Value> = got.iter().map(|r| r.json()).collect();
        assert!(bodies.iter().all(|b| b["type"] == "PULL_ARTIFACT" && b["operator"] == "admin"));
        let tags: Vec<&Value> = bodies.iter().map(|b| &b["event_data"]["resources"][0]["tag"]).collect();
        assert!(tags.contains(&&json!("v1")) && tags.contains(&&json!(digest)), "{tags:?}");
        assert!(bodies.iter().all(|b| b["event_data"]["resources"][0]["digest"] == json!(digest)));

        app.state.audit_queue.flush(app.store()).await;
        let logs = app.get("/api/v2.0/audit-logs?q=operation=pull&page_size=100").admin().send().await;
        assert_eq!(logs.header("x-total-count"), Some("2"), "{}", logs.text());
    }
);

backend_test!(
    /// A retention run that deleted something is announced once it ends,
    /// with its counts, rules and what it deleted; a dry run is not.
    async fn a_retention_run_is_announced_when_it_ends(app) {
        let receiver = Receiver::start(&[]).await;
        let targets = json!([{"type": "http", "address": receiver.url("retention")}]);
        create(&app, "library", &policy("kept", targets, &["TAG_RETENTION"])).await;
        push_image(&app, "library/kept", "old", &[b"old layer"]).await;
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        push_image(&app, "library/kept", "new", &[b"new layer"]).await;
        let rule = json!({
            "disabled": false, "action": "retain", "template": "latestPushedK", "params": {"latestPushedK": 1},
            "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": "**"}],
            "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": "**"}]},
        });
        let res = app.post("/api/v2.0/retentions").admin().json(&json!({
            "algorithm": "or", "rules": [rule],
            "trigger": {"kind": "Schedule", "settings": {"cron": ""}, "references": {}},
            "scope": {"level": "project", "ref": 1},
        })).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let retention = id_from_location(&res);
        for dry_run in [true, false] {
            let res = app.post(&format!("/api/v2.0/retentions/{retention}/executions")).admin()
                .json(&json!({"dry_run": dry_run})).send().await;
            assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
            while berth::workers::run_due(&app.state, "test").await.unwrap() > 0 {}
        }
        deliver(&app).await;
        let got = receiver.received();
        assert_eq!(got.len(), 1, "the real run only: {got:?}");
        let body = got[0].json();
        assert_eq!(body["type"], "TAG_RETENTION");
        assert_eq!(body["operator"], "admin");
        let data = &body["event_data"]["retention"];
        assert_eq!((data["total"].clone(), data["retained"].clone()), (json!(2), json!(1)));
        assert_eq!(data["project_name"], "library");
        assert_eq!(data["retention_policy_id"], json!(retention));
        assert_eq!(data["result"], "SUCCESS");
        assert_eq!(data["retention_rule"][0]["template"], "latestPushedK");
        assert_eq!(
            data["deleted_artifact"],
            json!([{"type": "image", "status": "SUCCESS", "name_tag": "kept:old", "references": null}])
        );
    }
);

backend_test!(
    /// A push the storage quota refuses is announced as `QUOTA_EXCEED`, one
    /// that takes the usage past 85 % as `QUOTA_WARNING`, with Harbor's details.
    async fn quota_refusals_and_warnings_are_announced(app) {
        use crate::registry::{image_manifest, push_blob, put_manifest};
        let receiver = Receiver::start(&[]).await;
        let targets = json!([{"type": "http", "address": receiver.url("quota")}]);
        create(&app, "library", &policy("quota", targets, &["QUOTA_EXCEED", "QUOTA_WARNING"])).await;
        let (config, layer) = (br#"{"os":"linux"}"#.to_vec(), vec![7u8; 2000]);
        push_blob(&app, "library/full", &config).await;
        push_blob(&app, "library/full", &layer).await;
        let manifest = image_manifest(&config, &[&layer]);
        let used = app.get("/api/v2.0/quotas/1").admin().send().await.json()["used"]["storage"].as_i64().unwrap();
        let manifest_size = i64::try_from(manifest.len()).unwrap();
        let set_hard = |hard: i64| {
            let app = &app;
            async move {
                let res = app.put("/api/v2.0/quotas/1").admin().json(&json!({"hard": {"storage": hard}})).send().await;
                assert_eq!(res.status, StatusCode::OK, "{}", res.text());
            }
        };
        set_hard(used + manifest_size - 1).await;
        let res = put_manifest(&app, "library/full", "v1", "application/vnd.oci.image.manifest.v1+json", &manifest).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        // Room for it, at more than 85 %.
        set_hard(used + manifest_size + 10).await;
        let res = put_manifest(&app, "library/full", "v1", "application/vnd.oci.image.manifest.v1+json", &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        deliver(&app).await;
        let got: Vec<Value> = receiver.received().iter().map(|r| r.json()).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        let exceeded = got.iter().find(|b| b["type"] == "QUOTA_EXCEED").expect("QUOTA_EXCEED");
        let details = exceeded["event_data"]["custom_attributes"]["Details"].as_str().unwrap();
        assert!(details.starts_with(&format!("adding {manifest_size} B of storage resource")), "{details}");
        assert!(details.contains("will exceed the configured upper limit of"), "{details}");
        assert_eq!(exceeded["event_data"]["resources"][0]["tag"], "v1");
        assert!(exceeded["event_data"]["resources"][0].get("resource_url").is_none());
        assert!(exceeded["event_data"]["repository"].get("date_created").is_none());
        assert_eq!(exceeded["event_data"]["repository"]["repo_full_name"], "library/full");
        let warned = got.iter().find(|b| b["type"] == "QUOTA_WARNING").expect("QUOTA_WARNING");
        let details = warned["event_data"]["custom_attributes"]["Details"].as_str().unwrap();
        assert!(details.starts_with("quota usage reach 85%: resource storage used "), "{details}");
    }
);

backend_test!(
    /// Beyond Harbor (goharbor/harbor #21370): administrators' system
    /// policies receive every project's events; nobody else may see them.
    async fn system_policies_receive_every_projects_events(app) {
        let receiver = Receiver::start(&[]).await;
        project(&app, None, "second", false).await;
        user(&app, "someone").await;
        let base = "/api/v2.0/system/webhook/policies";
        let body = policy("everything", json!([{"type": "http", "address": receiver.url("all"), "payload_format": "CloudEvents"}]), &["PUSH_ARTIFACT"]);
        let res = app.post(base).basic("someone", PASSWORD).json(&body).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.post(base).admin().json(&body).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let id = id_from_location(&res);
        assert_eq!(res.header("location"), Some(format!("/api/v2.0/system/webhook/policies/{id}").as_str()));
        let res = app.post(base).admin().json(&body).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT, "names are unique among system policies");
        let res = app.post("/api/v2.0/projects/library/webhook/policies").admin().json(&body).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "a project's may have the same name");
        let res = app.get(base).basic("someone", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);

        push_image(&app, "library/one", "v1", &[b"one layer"]).await;
        push_image(&app, "second/two", "v1", &[b"two layer"]).await;
        deliver(&app).await;
        let sources: Vec<String> = receiver.received().iter().map(|r| r.json()["source"].as_str().unwrap().to_string()).collect();
        let system = format!("/system/webhook/policies/{id}");
        assert_eq!(sources.iter().filter(|s| **s == system).count(), 2, "{sources:?}");
        assert_eq!(sources.len(), 3, "and the library policy's own: {sources:?}");
        let executions = app.get(&format!("{base}/{id}/executions")).admin().send().await;
        assert_eq!(executions.header("x-total-count"), Some("2"));
        let res = app.delete(&format!("{base}/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
    }
);

backend_test!(
    /// Each policy keeps its newest ended deliveries (Harbor's 50); the
    /// older ones go, with their tasks.
    async fn old_deliveries_are_swept(app) {
        let receiver = Receiver::start(&[]).await;
        let targets = json!([{"type": "http", "address": receiver.url("many")}]);
        let id = create(&app, "library", &policy("many", targets, &["PUSH_ARTIFACT"])).await;
        for n in 0..4 {
            push_image(&app, "library/many", &format!("v{n}"), &[format!("layer {n}").as_bytes()]).await;
        }
        deliver(&app).await;
        assert_eq!(receiver.received().len(), 4);
        let swept = ["WEBHOOK", "SLACK"];
        let removed = app.store().jobs().sweep(&swept, 3).await.unwrap();
        assert_eq!(removed, 1);
        let executions = app.get(&format!("/api/v2.0/projects/library/webhook/policies/{id}/executions")).admin().send().await;
        assert_eq!(executions.header("x-total-count"), Some("3"));
        assert_eq!(app.store().jobs().sweep(&swept, 3).await.unwrap(), 0, "once");
    }
);

/// A TCP listener that accepts every connection and never answers (nor
/// closes): a receiver that went silent. Stops when dropped.
struct BlackHole {
    port: u16,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    server: tokio::task::JoinHandle<()>,
}

impl BlackHole {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = accepted.clone();
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(socket);
            }
        });
        Self {
            port,
            accepted,
            server,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Waits up to `limit` for `done`; how long it took, `None` past the limit.
async fn within(
    limit: std::time::Duration,
    done: impl Fn() -> bool,
) -> Option<std::time::Duration> {
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if done() {
            return Some(started.elapsed());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    None
}

/// The real server (its own lanes and sockets): project A's two policies of
/// ten targets each point at a receiver that accepts and never answers;
/// project B's delivery, pushed while A's hang, arrives promptly (served one
/// at a time, it waited behind twenty 3 s attempts: a minute). A's attempts
/// each end at their deadline; the dashboard shows the webhook lane's
/// workers busy with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_receiver_does_not_hold_up_another_projects_deliveries() {
    use crate::util::{ADMIN_PASSWORD, BERTH_BIN, ServedBerth};
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let hole = BlackHole::start().await;
    let healthy = Receiver::start(&[]).await;
    let server = ServedBerth::start(|_| {
        let mut command = std::process::Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(&data)
            .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env_remove("DATABASE_URL")
            .env_remove("BLOB_STORE")
            .env_remove("BERTH_JOB_WORKERS");
        command
    })
    .await;
    let client = reqwest::Client::new();
    let admin =
        |request: reqwest::RequestBuilder| request.basic_auth("admin", Some(ADMIN_PASSWORD));
    for name in ["deadend", "healthy"] {
        let res = admin(client.post(server.url("/api/v2.0/projects")))
            .json(&json!({"project_name": name, "metadata": {"public": "false"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
    }
    let mut silent = Vec::new();
    for p in 0..2 {
        let targets: Vec<Value> = (0..10)
            .map(|t| json!({"type": "http", "address": format!("http://127.0.0.1:{}/p{p}/t{t}", hole.port)}))
            .collect();
        let res = admin(client.post(server.url("/api/v2.0/projects/deadend/webhook/policies")))
            .json(&policy(
                &format!("silent{p}"),
                json!(targets),
                &["PUSH_ARTIFACT"],
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        silent.push(
            res.headers()["location"]
                .to_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_string(),
        );
    }
    let res = admin(client.post(server.url("/api/v2.0/projects/healthy/webhook/policies")))
        .json(&policy(
            "healthy",
            json!([{"type": "http", "address": healthy.url("in")}]),
            &["PUSH_ARTIFACT"],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);

    push_to(&server, "deadend/app", "v1").await;
    let hanging = within(std::time::Duration::from_secs(20), || hole.accepted() >= 1).await;
    assert!(
        hanging.is_some(),
        "project A's deliveries never reached the silent receiver"
    );
    push_to(&server, "healthy/app", "v1").await;
    let waited = within(std::time::Duration::from_secs(10), || {
        !healthy.received().is_empty()
    })
    .await;
    assert!(
        waited.is_some(),
        "project B's delivery did not arrive within 10 s while project A's receiver hung \
         (A's attempts so far: {})",
        hole.accepted()
    );
    assert_eq!(
        healthy.received()[0].json()["event_data"]["repository"]["repo_full_name"],
        "healthy/app"
    );
    assert!(
        hole.accepted() >= 5,
        "A's deliveries run side by side: {}",
        hole.accepted()
    );

    let workers: Value = admin(client.get(server.url("/api/v2.0/jobservice/pools/all/workers")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let workers = workers.as_array().unwrap();
    assert_eq!(workers.len(), 18, "the default lanes: {workers:?}");
    let busy = workers
        .iter()
        .filter(|w| w["job_name"] == "WEBHOOK")
        .count();
    assert!((1..=10).contains(&busy), "{workers:?}");
    assert!(
        workers
            .iter()
            .filter(|w| w["job_name"] == "WEBHOOK")
            .all(|w| w["id"].as_str().unwrap().contains("/webhook/"))
    );

    // Each attempt at the silent receiver ends at its deadline.
    let base = format!("/api/v2.0/projects/deadend/webhook/policies/{}", silent[0]);
    let mut log = String::new();
    for _ in 0..100 {
        let executions: Value = admin(client.get(server.url(&format!("{base}/executions"))))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let eid = executions[0]["id"].as_i64().unwrap();
        let tasks: Value = admin(client.get(server.url(&format!("{base}/executions/{eid}/tasks"))))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let tid = tasks[0]["id"].as_i64().unwrap();
        log = admin(client.get(server.url(&format!("{base}/executions/{eid}/tasks/{tid}/log"))))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if log.contains("failed: error to send request: no answer within 3s") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        log.contains("failed: error to send request: no answer within 3s"),
        "{log}"
    );
}
