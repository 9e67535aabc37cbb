//! A small HTTPS client for identity providers: JSON GETs with a timeout and
//! a size limit, through the environment's proxies (`berth_net`).

use std::time::Duration;

use axum::http::{Request, StatusCode, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// How long a provider may take to answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The largest profile document read.
const MAX_BODY: usize = 1024 * 1024;

/// Why a GET gave no JSON document.
#[derive(Debug)]
pub enum FetchError {
    /// The server answered with this 4xx status.
    Refused(StatusCode),
    /// Unreachable, timed out, 5xx, too large or not the expected JSON.
    Failed(String),
}

/// The client; cheap to clone.
#[derive(Clone)]
pub struct HttpClient(Client<HttpsConnector<berth_net::Connector>, Empty<Bytes>>);

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpClient")
    }
}

impl HttpClient {
    /// A client for `http://` and `https://` URLs, verifying certificates with the platform's roots.
    pub fn new() -> anyhow::Result<Self> {
        let https =
            berth_net::https_connector(berth_net::Trust::Platform).map_err(anyhow::Error::msg)?;
        Ok(Self(Client::builder(TokioExecutor::new()).build(https)))
    }

    /// GETs `url` with `headers` and parses the JSON answer as `T`.
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        headers: &[(header::HeaderName, &str)],
    ) -> Result<T, FetchError> {
        let mut request = Request::get(url)
            .header(header::ACCEPT, "application/json")
            .header(
                header::USER_AGENT,
                concat!("berth/", env!("CARGO_PKG_VERSION")),
            );
        for (name, value) in headers {
            request = request.header(name, *value);
        }
        let request = request
            .body(Empty::new())
            .map_err(|e| FetchError::Failed(format!("request: {e}")))?;
        let fetch = async {
            let response = self
                .0
                .request(request)
                .await
                .map_err(|e| FetchError::Failed(format!("connection: {e}")))?;
            let status = response.status();
            if status.is_client_error() {
                return Err(FetchError::Refused(status));
            }
            if !status.is_success() {
                return Err(FetchError::Failed(format!("status {status}")));
            }
            Limited::new(response.into_body(), MAX_BODY)
                .collect()
                .await
                .map(|body| body.to_bytes())
                .map_err(|e| FetchError::Failed(format!("body: {e}")))
        };
        let body = tokio::time::timeout(TIMEOUT, fetch)
            .await
            .map_err(|_| FetchError::Failed("timed out".into()))??;
        serde_json::from_slice(&body).map_err(|e| FetchError::Failed(format!("JSON: {e}")))
    }
}
