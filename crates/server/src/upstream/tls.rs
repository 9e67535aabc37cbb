//! TLS for connections to an upstream registry: the platform's roots by
//! default, the registry's own CA certificates instead when it names some, or
//! no certificate check at all for a registry marked `insecure` (as Harbor).

use std::sync::Arc;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The certificates of a PEM text, as trust anchors; an error names what is
/// wrong (no certificate, a block that is not one).
pub fn ca_roots(pem: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let cert = cert.map_err(|e| format!("invalid CA certificate: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("invalid CA certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("invalid CA certificate: no PEM certificate found".into());
    }
    Ok(roots)
}

/// Checks a registry's `ca_certificate` (Harbor's 400 when it is not PEM
/// certificates); an empty text is none.
pub fn validate_ca_certificate(pem: &str) -> Result<(), String> {
    if pem.trim().is_empty() {
        return Ok(());
    }
    ca_roots(pem).map(|_| ())
}

/// A connector for `http://` and `https://` URLs with the TLS settings of a registry.
pub fn connector(
    insecure: bool,
    ca_certificate: &str,
) -> Result<HttpsConnector<HttpConnector>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls_error = |e: rustls::Error| format!("TLS set-up: {e}");
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = if insecure {
        builder.with_tls_config(any_certificate_config().map_err(tls_error)?)
    } else if !ca_certificate.trim().is_empty() {
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_error)?
            .with_root_certificates(ca_roots(ca_certificate)?)
            .with_no_client_auth();
        builder.with_tls_config(config)
    } else {
        builder
            .with_provider_and_platform_verifier(provider)
            .map_err(|e| format!("TLS set-up: {e}"))?
    };
    Ok(builder.https_or_http().enable_http1().build())
}

/// A client configuration that takes any server certificate (a registry
/// marked `insecure`, `berth healthcheck` asking its own listener); the
/// handshake's signatures are still checked against the presented one.
pub fn any_certificate_config() -> Result<ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth())
}

/// Accepts any server certificate ([`any_certificate_config`]).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
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
