//! Which server certificates an outbound connection accepts.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The certificates a client trusts.
pub enum Trust {
    /// The platform's roots (rustls-platform-verifier).
    Platform,
    /// These certificates only (a registry's own CA, `AWS_CA_BUNDLE`).
    Roots(RootCertStore),
    /// Any certificate ([`any_certificate_config`]).
    AnyCertificate,
}

impl Trust {
    /// The rustls configuration of [`Trust::Roots`] and [`Trust::AnyCertificate`].
    pub(crate) fn client_config(self) -> Result<ClientConfig, String> {
        let tls_error = |e: rustls::Error| format!("TLS set-up: {e}");
        match self {
            Trust::Platform => Err("the platform verifier has no plain configuration".into()),
            Trust::Roots(roots) => Ok(ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(tls_error)?
                .with_root_certificates(roots)
                .with_no_client_auth()),
            Trust::AnyCertificate => any_certificate_config().map_err(tls_error),
        }
    }
}

/// rustls's ring provider, passed explicitly (no process-wide default).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

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

/// A client configuration that takes any server certificate (a registry
/// marked `insecure`, `berth healthcheck` asking its own listener); the
/// handshake's signatures are still checked against the presented one.
pub fn any_certificate_config() -> Result<ClientConfig, rustls::Error> {
    let provider = provider();
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
    fn ca_roots_must_be_pem_certificates() {
        assert!(ca_roots("not a certificate").is_err());
        let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(ca_roots(garbage).is_err());
    }
}
