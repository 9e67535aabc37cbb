//! Outbound HTTP connections, the same for every client Berth has (S3 and its
//! credential services, upstream registries, identity providers): through the
//! forward proxy that `HTTPS_PROXY`, `HTTP_PROXY` and `ALL_PROXY` name unless
//! `NO_PROXY` exempts the host (curl's rules, read once at start by hyper-util's
//! matcher), TLS by rustls with ring, trusting what [`Trust`] says.

mod proxy;
mod tls;

pub use proxy::{Connector, Stream};
pub use tls::{Trust, any_certificate_config, ca_roots};

use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;

/// How long establishing a TCP connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connector for `http://` and `https://` URLs (HTTP/1.1), through the
/// environment's proxies, trusting `trust` for the servers' certificates.
pub fn https_connector(trust: Trust) -> Result<HttpsConnector<Connector>, String> {
    https_connector_over(trust, Connector::from_env(tcp_connector()))
}

/// [`https_connector`] that never goes through a proxy: for services only the
/// host reaches (EC2 instance metadata, the ECS and EKS credential agents).
pub fn direct_connector(trust: Trust) -> Result<HttpsConnector<Connector>, String> {
    https_connector_over(trust, Connector::direct(tcp_connector()))
}

fn https_connector_over(
    trust: Trust,
    connector: Connector,
) -> Result<HttpsConnector<Connector>, String> {
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match trust {
        Trust::Platform => builder
            .with_provider_and_platform_verifier(tls::provider())
            .map_err(|e| format!("TLS set-up: {e}"))?,
        trust => builder.with_tls_config(trust.client_config()?),
    };
    Ok(builder
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector))
}

/// The TCP connector under every client: [`CONNECT_TIMEOUT`], no Nagle delay.
pub fn tcp_connector() -> HttpConnector {
    let mut connector = HttpConnector::new();
    connector.enforce_http(false);
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    connector.set_nodelay(true);
    connector
}

/// An error and its causes, `: `-separated, each cause once (hyper's own
/// error says only "client error"; the cause says what failed).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// One line for the log naming the proxies the environment sets (without
/// their credentials), or `None` when it sets none.
pub fn proxies_in_use() -> Option<String> {
    proxy::describe_env(|name| std::env::var(name).ok())
}
