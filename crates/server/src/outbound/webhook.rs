//! POSTs webhook payloads to receivers: through the environment's proxies,
//! verifying the receiver's certificate with the platform's roots unless the
//! target says to skip it (Harbor's `skip_cert_verify`).

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Request, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// How long one attempt may take, connecting, sending and the answer's
/// status line and headers together (Harbor: 3 s); a receiver that accepts
/// and never answers fails the attempt at this deadline.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// How much of a refusal's body goes into the task log.
const BODY_SHOWN: usize = 512;

type HttpsClient = Client<HttpsConnector<berth_net::Connector>, Full<Bytes>>;

/// The two clients, kept for their connection pools.
#[derive(Clone)]
pub struct WebhookSender {
    verifying: HttpsClient,
    trusting: HttpsClient,
}

impl std::fmt::Debug for WebhookSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSender")
    }
}

impl WebhookSender {
    pub fn new() -> anyhow::Result<Self> {
        let client = |trust| -> anyhow::Result<HttpsClient> {
            let connector = berth_net::https_connector(trust).map_err(anyhow::Error::msg)?;
            Ok(Client::builder(TokioExecutor::new()).build(connector))
        };
        Ok(Self {
            verifying: client(berth_net::Trust::Platform)?,
            trusting: client(berth_net::Trust::AnyCertificate)?,
        })
    }

    /// POSTs `body` to `url` with `headers`; `Ok` with the status for a 2xx
    /// answer, else why not (Harbor's wording).
    pub async fn post(
        &self,
        url: &str,
        headers: &[(HeaderName, String)],
        body: Bytes,
        skip_cert_verify: bool,
    ) -> Result<u16, String> {
        let mut request = Request::post(url).header(
            header::USER_AGENT,
            concat!("berth/", env!("CARGO_PKG_VERSION")),
        );
        for (name, value) in headers {
            let value = HeaderValue::from_str(value)
                .map_err(|_| format!("the {name} header is not a valid header value"))?;
            request = request.header(name, value);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| format!("error to send request: {e}"))?;
        let client = if skip_cert_verify {
            &self.trusting
        } else {
            &self.verifying
        };
        let exchange = async {
            let response = client
                .request(request)
                .await
                .map_err(|e| format!("error to send request: {}", berth_net::error_chain(&e)))?;
            let status = response.status();
            if status.is_success() {
                return Ok(status.as_u16());
            }
            let body = Limited::new(response.into_body(), BODY_SHOWN * 4)
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let shown = String::from_utf8_lossy(&body[..body.len().min(BODY_SHOWN)]).into_owned();
            Err(format!(
                "abnormal response code: {}, body: {shown}",
                status.as_u16()
            ))
        };
        tokio::time::timeout(TIMEOUT, exchange).await.map_err(|_| {
            format!(
                "error to send request: no answer within {}s",
                TIMEOUT.as_secs()
            )
        })?
    }
}
