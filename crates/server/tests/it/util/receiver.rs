//! A webhook receiver for tests: an HTTP server on a loopback port that keeps
//! every request it gets and answers each with the next status of a script
//! (200 once the script is used up).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Default)]
struct Shared {
    received: Vec<Received>,
    script: VecDeque<StatusCode>,
}

/// The receiver; stops when dropped.
pub struct Receiver {
    port: u16,
    shared: Arc<Mutex<Shared>>,
    server: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Starts a receiver answering `script`'s statuses in turn, then 200.
    pub async fn start(script: &[u16]) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            received: Vec::new(),
            script: script
                .iter()
                .map(|s| StatusCode::from_u16(*s).unwrap())
                .collect(),
        }));
        let kept = shared.clone();
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
                let kept = kept.clone();
                async move {
                    let mut shared = kept.lock().unwrap();
                    shared.received.push(Received {
                        path: uri.path().to_string(),
                        headers,
                        body,
                    });
                    shared.script.pop_front().unwrap_or(StatusCode::OK)
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            port,
            shared,
            server,
        }
    }

    /// `http://127.0.0.1:PORT/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// What it got so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().unwrap().received.clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}
