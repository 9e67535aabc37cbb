//! A small HTTPS client for identity providers: JSON GETs and form POSTs with
//! a timeout and a size limit, through the environment's proxies (`berth_net`).

use std::time::Duration;

use axum::http::{Request, StatusCode, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// How long a provider may take to answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The largest document read.
const MAX_BODY: usize = 1024 * 1024;

/// Why a request gave no JSON document.
#[derive(Debug)]
pub enum FetchError {
    /// The server answered with this 4xx status and body (the first part of it).
    Refused(StatusCode, String),
    /// Unreachable, timed out, 5xx, too large or not the expected JSON.
    Failed(String),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(status, body) => write!(f, "refused with {status}: {body}"),
            Self::Failed(why) => f.write_str(why),
        }
    }
}

type HttpsClient = Client<HttpsConnector<berth_net::Connector>, Full<Bytes>>;

/// The client; cheap to clone.
#[derive(Clone)]
pub struct HttpClient(HttpsClient);

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpClient")
    }
}

/// How much of a refusal's body is kept.
const REFUSAL_SHOWN: usize = 512;

impl HttpClient {
    /// A client for `http://` and `https://` URLs, verifying certificates with the platform's roots.
    pub fn new() -> anyhow::Result<Self> {
        Self::trusting(berth_net::Trust::Platform)
    }

    /// A client that trusts the certificates `trust` says.
    pub fn trusting(trust: berth_net::Trust) -> anyhow::Result<Self> {
        let https = berth_net::https_connector(trust).map_err(anyhow::Error::msg)?;
        Ok(Self(Client::builder(TokioExecutor::new()).build(https)))
    }

    /// GETs `url` with `headers` and parses the JSON answer as `T`.
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        headers: &[(header::HeaderName, &str)],
    ) -> Result<T, FetchError> {
        self.exchange(Request::get(url), headers, Bytes::new())
            .await
    }

    /// POSTs `form` (`application/x-www-form-urlencoded`) to `url` with
    /// `headers` and parses the JSON answer as `T`.
    pub async fn post_form<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        headers: &[(header::HeaderName, &str)],
        form: &[(&str, &str)],
    ) -> Result<T, FetchError> {
        let body = serde_urlencoded::to_string(form)
            .map_err(|e| FetchError::Failed(format!("form: {e}")))?;
        let request =
            Request::post(url).header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        self.exchange(request, headers, Bytes::from(body)).await
    }

    async fn exchange<T: serde::de::DeserializeOwned>(
        &self,
        request: axum::http::request::Builder,
        headers: &[(header::HeaderName, &str)],
        body: Bytes,
    ) -> Result<T, FetchError> {
        let mut request = request.header(header::ACCEPT, "application/json").header(
            header::USER_AGENT,
            concat!("berth/", env!("CARGO_PKG_VERSION")),
        );
        for (name, value) in headers {
            request = request.header(name, *value);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| FetchError::Failed(format!("request: {e}")))?;
        let fetch = async {
            let response = self.0.request(request).await.map_err(|e| {
                FetchError::Failed(format!("connection: {}", berth_net::error_chain(&e)))
            })?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_BODY)
                .collect()
                .await
                .map(|body| body.to_bytes())
                .map_err(|e| FetchError::Failed(format!("body: {e}")));
            if status.is_client_error() {
                let body = body.unwrap_or_default();
                let shown = String::from_utf8_lossy(&body[..body.len().min(REFUSAL_SHOWN)]);
                return Err(FetchError::Refused(status, shown.into_owned()));
            }
            if !status.is_success() {
                return Err(FetchError::Failed(format!("status {status}")));
            }
            body
        };
        let body = tokio::time::timeout(TIMEOUT, fetch)
            .await
            .map_err(|_| FetchError::Failed("timed out".into()))??;
        serde_json::from_slice(&body).map_err(|e| FetchError::Failed(format!("JSON: {e}")))
    }
}
