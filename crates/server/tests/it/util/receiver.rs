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
    scheme: &'static str,
    shared: Arc<Mutex<Shared>>,
    server: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Starts a receiver answering `script`'s statuses in turn, then 200.
    pub async fn start(script: &[u16]) -> Self {
        Self::start_with(script, None).await
    }

    /// [`Receiver::start`] over TLS with this certificate and key (PEM files).
    pub async fn start_tls(script: &[u16], cert: &std::path::Path, key: &std::path::Path) -> Self {
        let files = berth::tls::TlsFiles {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            client_ca: None,
        };
        let config = berth::tls::server_config(&files).expect("the receiver's certificate loads");
        Self::start_with(script, Some(config)).await
    }

    async fn start_with(script: &[u16], tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let scheme = if tls.is_some() { "https" } else { "http" };
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
        let server = tokio::spawn(berth::serve::serve(
            listener,
            app,
            berth::serve::ServeLimits::default(),
            tls,
            std::future::pending(),
        ));
        Self {
            port,
            scheme,
            shared,
            server,
        }
    }

    /// `http(s)://127.0.0.1:PORT/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("{}://127.0.0.1:{}/{path}", self.scheme, self.port)
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
