//! TLS for connections to an upstream registry: the platform's roots by
//! default, the registry's own CA certificates instead when it names some, or
//! no certificate check at all for a registry marked `insecure` (as Harbor).

use berth_net::{Connector, Trust, ca_roots};
use hyper_rustls::HttpsConnector;

/// Checks a registry's `ca_certificate` (Harbor's 400 when it is not PEM
/// certificates); an empty text is none.
pub fn validate_ca_certificate(pem: &str) -> Result<(), String> {
    if pem.trim().is_empty() {
        return Ok(());
    }
    ca_roots(pem).map(|_| ())
}

/// A connector for `http://` and `https://` URLs with the TLS settings of a
/// registry, through the environment's proxies, giving up on a TCP
/// connection after `connect`.
pub fn connector(
    insecure: bool,
    ca_certificate: &str,
    connect: std::time::Duration,
) -> Result<HttpsConnector<Connector>, String> {
    let trust = if insecure {
        Trust::AnyCertificate
    } else if !ca_certificate.trim().is_empty() {
        Trust::Roots(ca_roots(ca_certificate)?)
    } else {
        Trust::Platform
    };
    berth_net::https_connector_within(trust, connect)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_certificates_must_be_pem_certificates() {
        assert!(validate_ca_certificate("").is_ok());
        assert!(validate_ca_certificate("not a certificate").is_err());
        let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(validate_ca_certificate(garbage).is_err());
    }
}
