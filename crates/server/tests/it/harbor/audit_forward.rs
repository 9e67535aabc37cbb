//! Audit log forwarding (`audit_log_forward_endpoint`, `skip_audit_log_database`,
//! `disabled_audit_log_event_types`) against the real rsyslogd that
//! `scripts/test` starts (`scripts/syslog-fixture`), which files every message
//! it receives in one file as `<input> <facility>.<severity> <host> <tag><message>`.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;

use crate::backend_test;
use crate::harbor::fixtures;
use crate::registry::push_image;
use crate::util::TestApp;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// How long a forwarded line may take to be filed: a batch is written every
/// second, and the suite runs many tests at once.
const FILED_WITHIN: Duration = Duration::from_secs(15);

/// A variable `scripts/syslog-fixture` exports.
fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: run the suite with `bash scripts/test`, which starts rsyslogd \
             with scripts/syslog-fixture (or eval \"$(scripts/syslog-fixture DIR)\")"
        )
    })
}

/// A name no other test (on either backend) uses, for the resources whose
/// lines this test looks for in the shared file.
fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

async fn pull(app: &TestApp, repository: &str, reference: &str) {
    let res = app
        .get(&format!("/v2/{repository}/manifests/{reference}"))
        .admin()
        .header("accept", OCI_MANIFEST)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK);
}

async fn delete_tag(app: &TestApp, project: &str, repository: &str, tag: &str) {
    let path = format!(
        "/api/v2.0/projects/{project}/repositories/{repository}/artifacts/{tag}/tags/{tag}"
    );
    let res = app.delete(&path).admin().send().await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
}

/// The lines of the syslog file that contain `needle`.
fn filed(needle: &str) -> Vec<String> {
    let file = env("BERTH_TEST_SYSLOG_FILE");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {file}: {e}"));
    text.lines()
        .filter(|line| line.contains(needle))
        .map(str::to_string)
        .collect()
}

/// Waits until every one of `needles` is in a line of the syslog file;
/// returns those lines, in `needles`' order.
async fn wait_filed(needles: &[String]) -> Vec<String> {
    let started = Instant::now();
    loop {
        let found: Vec<Option<String>> = needles.iter().map(|needle| filed(needle).pop()).collect();
        if found.iter().all(Option::is_some) {
            return found.into_iter().flatten().collect();
        }
        if started.elapsed() > FILED_WITHIN {
            let missing: Vec<&String> = needles
                .iter()
                .zip(&found)
                .filter(|(_, line)| line.is_none())
                .map(|(needle, _)| needle)
                .collect();
            panic!("not in the syslog file after {FILED_WITHIN:?}: {missing:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What marks a forwarded entry (its description follows).
fn action(operation: &str, resource: &str) -> String {
    format!("]: action:{operation}, resource:{resource}, operation_description:")
}

/// The stored entries whose resource contains `resource`, after a flush, as
/// `(operation, resource_type, resource)`.
async fn stored(app: &TestApp, resource: &str) -> Vec<(String, String, String)> {
    app.state.audit_queue.flush(app.store()).await;
    let res = app
        .get(&format!(
            "/api/v2.0/audit-logs?page_size=100&q=resource=~{resource}"
        ))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    res.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (s("operation"), s("resource_type"), s("resource"))
        })
        .collect()
}

fn row(operation: &str, kind: &str, resource: &str) -> (String, String, String) {
    (
        operation.to_string(),
        kind.to_string(),
        resource.to_string(),
    )
}

backend_test!(
    async fn entries_go_to_syslog_over_tcp_as_harbor_sends_them(app) {
        fixtures::configure(&app, json!({"audit_log_forward_endpoint": env("BERTH_TEST_SYSLOG_TCP")})).await;
        let project = unique("fwd-tcp");
        fixtures::project(&app, None, &project, false).await;
        let repository = format!("{project}/app");
        push_image(&app, &repository, "v1", &[b"forwarded layer"]).await;
        pull(&app, &repository, "v1").await;
        delete_tag(&app, &project, "app", "v1").await;

        let image = format!("{repository}:v1");
        let lines = wait_filed(&[
            action("create", &project),
            action("create", &image),
            action("pull", &image),
            action("delete", &image),
        ])
        .await;
        // rsyslog filed them as TCP messages of facility kern, severity info,
        // tag `audit[<pid>]:` (Go's syslog writer for Harbor), with Harbor's fields.
        let tag = format!(" audit[{}]: ", std::process::id());
        for (line, kind) in lines.iter().zip(["project", "artifact", "artifact", "tag"]) {
            assert!(line.starts_with("imtcp kern.info "), "{line}");
            assert!(line.contains(&tag), "{line}");
            let fields = format!(" [INFO] [operator=\"admin\" resourceType=\"{kind}\" time=\"");
            assert!(line.contains(&fields), "{line}");
        }
        assert!(lines[0].ends_with(&format!("operation_description:create project: {project}")), "{}", lines[0]);
        assert!(lines[1].ends_with(&format!("operation_description:push artifact: {image}")), "{}", lines[1]);
        // The rows are written too.
        let rows = stored(&app, &project).await;
        for expected in [
            row("create", "project", &project),
            row("create", "artifact", &image),
            row("pull", "artifact", &image),
            row("delete", "tag", &image),
        ] {
            assert!(rows.contains(&expected), "{expected:?} in {rows:?}");
        }
    }
);

backend_test!(
    async fn a_udp_endpoint_gets_one_datagram_per_entry(app) {
        let endpoint = format!("udp://{}", env("BERTH_TEST_SYSLOG_UDP"));
        fixtures::configure(&app, json!({"audit_log_forward_endpoint": endpoint})).await;
        let first = unique("fwd-udp");
        let second = unique("fwd-udp");
        fixtures::project(&app, None, &first, false).await;
        fixtures::project(&app, None, &second, false).await;
        let lines = wait_filed(&[action("create", &first), action("create", &second)]).await;
        for line in &lines {
            assert!(line.starts_with("imudp kern.info "), "{line}");
            assert!(line.contains(" [INFO] [operator=\"admin\" resourceType=\"project\" "), "{line}");
        }
    }
);

backend_test!(
    async fn skipping_the_database_forwards_without_rows(app) {
        fixtures::configure(
            &app,
            json!({"audit_log_forward_endpoint": env("BERTH_TEST_SYSLOG_TCP"), "skip_audit_log_database": true}),
        )
        .await;
        let project = unique("fwd-skip");
        fixtures::project(&app, None, &project, false).await;
        let repository = format!("{project}/app");
        push_image(&app, &repository, "v1", &[b"skipped layer"]).await;
        wait_filed(&[action("create", &project), action("create", &format!("{repository}:v1"))]).await;

        app.state.audit_queue.flush(app.store()).await;
        let res = app.get("/api/v2.0/audit-logs").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json(), json!([]), "the configuration change included");
        assert_eq!(res.header("x-total-count"), Some("0"));

        // Turned off again, rows come back.
        fixtures::configure(&app, json!({"skip_audit_log_database": false})).await;
        let again = unique("fwd-skip");
        fixtures::project(&app, None, &again, false).await;
        assert_eq!(stored(&app, &again).await, vec![row("create", "project", &again)]);
    }
);

backend_test!(
    async fn disabled_event_types_are_neither_stored_nor_forwarded(app) {
        // Harbor's names: `create_member` is Berth's `project_member`.
        fixtures::configure(
            &app,
            json!({
                "audit_log_forward_endpoint": env("BERTH_TEST_SYSLOG_TCP"),
                "disabled_audit_log_event_types": "create_project, Pull_Artifact,create_member",
            }),
        )
        .await;
        let project = unique("fwd-off");
        fixtures::project(&app, None, &project, false).await;
        let repository = format!("{project}/app");
        push_image(&app, &repository, "v1", &[b"disabled layer"]).await;
        pull(&app, &repository, "v1").await;
        let user = app.create_user(&unique("member"), "Member-Passw0rd1").await;
        let res = app
            .post(&format!("/api/v2.0/projects/{project}/members"))
            .admin()
            .json(&json!({"role_id": 2, "member_user": {"user_id": user}}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        // Last, an enabled one: once it is filed, so is everything before it.
        delete_tag(&app, &project, "app", "v1").await;

        let image = format!("{repository}:v1");
        wait_filed(&[action("create", &image), action("delete", &image)]).await;
        assert_eq!(filed(&action("create", &project)), Vec::<String>::new());
        assert_eq!(filed(&action("pull", &image)), Vec::<String>::new());
        let file = std::fs::read_to_string(env("BERTH_TEST_SYSLOG_FILE")).unwrap();
        let members = format!("resource:{project}/members/");
        assert!(!file.lines().any(|line| line.contains(&members)), "no member entry forwarded");

        let rows = stored(&app, &project).await;
        assert_eq!(
            rows,
            vec![row("delete", "tag", &image), row("create", "artifact", &image)],
            "newest first, disabled types absent"
        );
    }
);

backend_test!(
    async fn an_endpoint_that_is_down_loses_copies_not_rows_or_time(app) {
        // A bound port that does not listen yet: connections are refused.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let endpoint = socket.local_addr().unwrap().to_string();
        fixtures::configure(&app, json!({"audit_log_forward_endpoint": endpoint})).await;

        let lost = unique("fwd-down");
        let started = Instant::now();
        fixtures::project(&app, None, &lost, false).await;
        push_image(&app, &format!("{lost}/app"), "v1", &[b"unforwarded layer"]).await;
        // Let the batch writer meet the refusal before the flush below.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let flushed = Instant::now();
        assert_eq!(
            stored(&app, &lost).await,
            vec![row("create", "artifact", &format!("{lost}/app:v1")), row("create", "project", &lost)],
        );
        assert!(flushed.elapsed() < Duration::from_secs(3), "a refused endpoint is not waited for");
        assert!(started.elapsed() < Duration::from_secs(10), "requests are not slowed");

        // The endpoint answers again: the next batch connects, and what was
        // lost is not sent late.
        let listener = socket.listen(16).unwrap();
        let back = unique("fwd-back");
        fixtures::project(&app, None, &back, false).await;
        let (stream, _) = tokio::time::timeout(FILED_WITHIN, listener.accept())
            .await
            .expect("the next batch connects")
            .unwrap();
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stream));
        let line = tokio::time::timeout(FILED_WITHIN, lines.next_line())
            .await
            .expect("a line arrives")
            .unwrap()
            .expect("a line, not the end");
        assert!(line.starts_with("<6>"), "{line}");
        assert!(line.contains(&action("create", &back)), "only the new entry: {line}");
    }
);
