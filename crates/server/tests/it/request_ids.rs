//! Every log line written while a request is answered carries its
//! `X-Request-Id`: the client's, or the one generated and answered.

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use berth::config::LogFormat;
use serde_json::Value;
use tracing_subscriber::fmt::MakeWriter;

use crate::util::{Backend, TestApp};

/// Log output kept in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn lines(&self) -> Vec<String> {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// A failed sign-in with the client's id, then a request without one; returns
/// the id generated for the second.
async fn two_requests(app: &TestApp) -> String {
    let failed = app
        .get("/api/v2.0/users/current")
        .basic("admin", "wrong-password")
        .header("x-request-id", "client-chosen-id-1")
        .send()
        .await;
    assert_eq!(failed.status, StatusCode::UNAUTHORIZED);
    assert_eq!(failed.header("x-request-id"), Some("client-chosen-id-1"));
    let health = app.get("/api/v2.0/health").send().await;
    assert_eq!(health.status, StatusCode::OK);
    let generated = health.header("x-request-id").expect("an id is answered");
    assert_eq!(generated.len(), 36, "a UUID: {generated}");
    generated.to_string()
}

/// Keeps tracing from deciding for every thread with another thread's logger.
///
/// tracing caches, per call site and for all threads, whether a logger wants
/// it, computed when a thread first reaches the site. While exactly one
/// scoped logger exists, it asks only the logger of that thread: a site first
/// reached by another test's thread (which has none) would be cached as
/// unwanted, and this test's lines at it lost. With a second scoped logger
/// alive (this one, wanting nothing), every logger alive is asked instead.
fn ask_every_logger() -> tracing::Dispatch {
    tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default())
}

// The logger is this thread's: a current-thread runtime polls every request here.
#[tokio::test(flavor = "current_thread")]
async fn every_json_log_line_of_a_request_carries_its_id() {
    let app = TestApp::new(Backend::Sqlite).await;
    let _second = ask_every_logger();
    let captured = Captured::default();
    let logger = berth::logging::subscriber(LogFormat::Json, "info", captured.clone(), false);
    let generated = {
        let _guard = tracing::subscriber::set_default(logger);
        two_requests(&app).await
    };
    let lines = captured.lines();
    assert!(lines.len() >= 3, "{lines:#?}");
    let mut ids = Vec::new();
    for line in &lines {
        let entry: Value = serde_json::from_str(line).unwrap();
        let id = entry["span"]["request_id"]
            .as_str()
            .unwrap_or_else(|| panic!("a line without a request id: {line}"));
        ids.push(id.to_string());
        if entry["fields"]["message"] == "failed sign-in" {
            assert_eq!(id, "client-chosen-id-1", "{line}");
        }
    }
    assert!(ids.iter().any(|id| id == "client-chosen-id-1"));
    assert!(ids.contains(&generated));
    assert!(
        ids.iter()
            .all(|id| id == "client-chosen-id-1" || *id == generated),
        "{ids:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("failed sign-in")),
        "{lines:#?}"
    );
    // Credentials are never logged.
    assert!(!lines.iter().any(|l| l.contains("wrong-password")));
}

#[tokio::test(flavor = "current_thread")]
async fn every_text_log_line_of_a_request_carries_its_id() {
    let app = TestApp::new(Backend::Sqlite).await;
    let _second = ask_every_logger();
    let captured = Captured::default();
    let logger = berth::logging::subscriber(LogFormat::Text, "info", captured.clone(), false);
    let generated = {
        let _guard = tracing::subscriber::set_default(logger);
        two_requests(&app).await
    };
    let lines = captured.lines();
    assert!(lines.len() >= 3, "{lines:#?}");
    for line in &lines {
        assert!(
            line.contains("request_id=\"client-chosen-id-1\"")
                || line.contains(&format!("request_id=\"{generated}\"")),
            "{line}"
        );
    }
    let failed = lines
        .iter()
        .find(|l| l.contains("failed sign-in"))
        .expect("the failed sign-in is logged");
    assert!(
        failed.contains("request_id=\"client-chosen-id-1\""),
        "{failed}"
    );
}
