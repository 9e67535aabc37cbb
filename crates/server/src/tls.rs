//! TLS on the listener (`--tls-cert`, `--tls-key`, `--tls-client-ca`).
//!
//! rustls with the certificate chain and key read from PEM files. They are
//! read again when they change: each handshake looks at the files' times (at
//! most once a second) and a changed pair is loaded and served from the next
//! handshake on, so a certificate renewed by cert-manager, certbot or a
//! mounted Kubernetes secret needs no restart. A pair that does not load (a
//! key written before its certificate, a half-written file) leaves the old
//! one in service and is tried again at the next look. ALPN offers HTTP/2 and
//! HTTP/1.1. With a client CA, every client must present a certificate that
//! CA signed (mutual TLS).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};

/// How often a handshake looks whether the files changed.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The files TLS is served from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA client certificates must chain to; `None`: no client certificates.
    pub client_ca: Option<PathBuf>,
}

/// The listener's TLS configuration; fails when the files do not load.
pub fn server_config(files: &TlsFiles) -> anyhow::Result<Arc<ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let resolver = Arc::new(Reloading::load(files, provider.clone())?);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(ca)? {
                roots
                    .add(cert)
                    .with_context(|| format!("client CA {}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .with_context(|| format!("client CA {}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificates of a PEM file; an error when it holds none.
fn certificates(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("reading {}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading certificates from {}", path.display()))?;
    anyhow::ensure!(!certs.is_empty(), "no certificate in {}", path.display());
    Ok(certs)
}

/// The certificate and key of `files`, checked to belong together.
fn certified_key(files: &TlsFiles, provider: &CryptoProvider) -> anyhow::Result<CertifiedKey> {
    let chain = certificates(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("reading a private key from {}", files.key.display()))?;
    CertifiedKey::from_der(chain, key, provider).with_context(|| {
        format!(
            "{} is not a key for the certificate in {}",
            files.key.display(),
            files.cert.display()
        )
    })
}

/// When the certificate and key files last changed.
fn changed_at(files: &TlsFiles) -> Option<(SystemTime, SystemTime)> {
    let at = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    Some((at(&files.cert)?, at(&files.key)?))
}

/// Serves the loaded pair and loads it again when its files change.
#[derive(Debug)]
struct Reloading {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    changed_at: Option<(SystemTime, SystemTime)>,
    looked_at: Instant,
}

impl Reloading {
    fn load(files: &TlsFiles, provider: Arc<CryptoProvider>) -> anyhow::Result<Self> {
        let changed_at = changed_at(files);
        let key = Arc::new(certified_key(files, &provider)?);
        Ok(Self {
            files: files.clone(),
            provider,
            state: Mutex::new(Loaded {
                key,
                changed_at,
                looked_at: Instant::now(),
            }),
        })
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut loaded = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if loaded.looked_at.elapsed() >= LOOK_EVERY {
            loaded.looked_at = Instant::now();
            let changed_at = changed_at(&self.files);
            if changed_at != loaded.changed_at {
                match certified_key(&self.files, &self.provider) {
                    Ok(key) => {
                        loaded.key = Arc::new(key);
                        loaded.changed_at = changed_at;
                        tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
                    }
                    Err(err) => tracing::warn!(
                        error = format!("{err:#}"),
                        "the changed TLS files do not load; the previous certificate stays in service"
                    ),
                }
            }
        }
        Some(loaded.key.clone())
    }
}

/// The TLS client of `berth healthcheck`: it asks whether the instance
/// answers, sends nothing secret and reads only a status, so it takes the
/// server's certificate as given (a local probe reaches the listener by an
/// address its certificate rarely names). The handshake's signatures are
/// still checked.
pub fn probe_connector() -> anyhow::Result<tokio_rustls::TlsConnector> {
    let config = berth_net::any_certificate_config().context("TLS set-up")?;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The server name to send for `authority` (`host:port`).
pub fn probe_server_name(
    authority: &str,
) -> anyhow::Result<rustls::pki_types::ServerName<'static>> {
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(host.to_string())
        .with_context(|| format!("`{host}` is not a host name or address"))
}
