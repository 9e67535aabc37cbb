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

/// How long each step of an exchange with another server may take: a
/// silent peer fails the step instead of holding it for as long as it
/// stays silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// Establishing the TCP connection (to the forward proxy, through one).
    pub connect: Duration,
    /// From sending a request (or its body's last byte) to the answer's
    /// headers, TLS handshake included; also how long a small document
    /// (a manifest, a token, a page of a listing) may take to arrive whole.
    pub answer: Duration,
    /// How long a body being streamed (a blob, in or out) may go without
    /// a byte moving.
    pub idle: Duration,
}

impl Deadlines {
    /// The defaults: 10 s to connect, 30 s for an answer, 30 s of silence.
    pub const DEFAULT: Self = Self {
        connect: CONNECT_TIMEOUT,
        answer: Duration::from_secs(30),
        idle: Duration::from_secs(30),
    };
}

impl Default for Deadlines {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A duration as a person reads it in a log line: `30 s`, `1.5 s`, `250 ms`.
pub fn spoken(duration: Duration) -> String {
    if duration.subsec_millis() == 0 && duration.as_secs() > 0 {
        format!("{} s", duration.as_secs())
    } else if duration.as_secs() > 0 {
        format!("{:.1} s", duration.as_secs_f64())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// A connector for `http://` and `https://` URLs (HTTP/1.1), through the
/// environment's proxies, trusting `trust` for the servers' certificates.
pub fn https_connector(trust: Trust) -> Result<HttpsConnector<Connector>, String> {
    https_connector_within(trust, CONNECT_TIMEOUT)
}

/// [`https_connector`] giving up on a TCP connection after `connect`.
pub fn https_connector_within(
    trust: Trust,
    connect: Duration,
) -> Result<HttpsConnector<Connector>, String> {
    let mut tcp = tcp_connector();
    tcp.set_connect_timeout(Some(connect));
    https_connector_over(trust, Connector::from_env(tcp))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_spoken_in_their_unit() {
        assert_eq!(spoken(Duration::from_secs(30)), "30 s");
        assert_eq!(spoken(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(spoken(Duration::from_millis(250)), "250 ms");
    }
}
