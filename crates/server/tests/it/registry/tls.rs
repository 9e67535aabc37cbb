//! HTTPS on the listener (`--tls-cert`, `--tls-key`, `--tls-client-ca`) with
//! real clients and a test CA: skopeo and podman log in, push and pull; a
//! certificate replaced on disk is served without a restart; HTTP/2 is
//! offered by ALPN; with a client CA, only clients with a certificate it
//! signed get in. The CA and certificates are made with `openssl`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::clients::{build_layout, layout_ref, podman, require, run, skopeo};
use crate::util::{ADMIN_PASSWORD, BERTH_BIN, Purpose, ServedBerth, TestCa};

/// Berth over TLS with `cert`/`key` and `extra` flags, SQLite in `work`.
async fn serve_tls(work: &Path, cert: &Path, key: &Path, extra: &[&str]) -> ServedBerth {
    ServedBerth::start_tls(|port| {
        let mut command = Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(work.join("data"))
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .args(extra)
            .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("EXTERNAL_URL", format!("https://127.0.0.1:{port}"))
            .env_remove("DATABASE_URL")
            .env_remove("BLOB_STORE");
        command
    })
    .await
}

/// A directory in the layout of `/etc/containers/certs.d/<host>/`: the CA as
/// `ca.crt`, and a client certificate as `client.cert`/`client.key` if given.
fn cert_dir(work: &Path, name: &str, ca: &TestCa, client: Option<(&Path, &Path)>) -> PathBuf {
    let dir = work.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(ca.path(), dir.join("ca.crt")).unwrap();
    if let Some((cert, key)) = client {
        std::fs::copy(cert, dir.join("client.cert")).unwrap();
        std::fs::copy(key, dir.join("client.key")).unwrap();
    }
    dir
}

/// What `openssl s_client` says of a handshake with `host` offering `h2`:
/// the served certificate's subject and the protocol ALPN chose.
fn handshake(host: &str, ca: &TestCa) -> String {
    let output = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            host,
            "-alpn",
            "h2,http/1.1",
            "-CAfile",
        ])
        .arg(ca.path())
        .args(["-verify_return_error"])
        .stdin(Stdio::null())
        .output()
        .expect("openssl s_client");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn healthcheck(url: &str) -> std::process::Output {
    Command::new(BERTH_BIN)
        .args(["healthcheck", "--url", url])
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_and_podman_over_https_with_a_rotated_certificate() {
    require("skopeo");
    require("podman");
    require("openssl");
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let layout = build_layout(work);
    let pki = work.join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    let ca = TestCa::new(&pki);
    let (cert, key) = ca.issue("first", Purpose::Server);
    let (served_cert, served_key) = (work.join("tls.crt"), work.join("tls.key"));
    std::fs::copy(&cert, &served_cert).unwrap();
    std::fs::copy(&key, &served_key).unwrap();
    let server = serve_tls(work, &served_cert, &served_key, &[]).await;
    let host = server.host();
    let certs = cert_dir(work, "certs", &ca, None);
    let auth = work.join("auth.json");
    let remote = |reference: &str| format!("docker://{host}/library/{reference}");

    // The probes and the healthcheck command over TLS.
    let ready = healthcheck(&format!("https://{host}/readyz"));
    assert!(ready.status.success(), "{ready:?}");
    let said = handshake(&host, &ca);
    assert!(
        said.contains("CN = first") || said.contains("CN=first"),
        "{said}"
    );
    assert!(
        said.contains("ALPN protocol: h2"),
        "HTTP/2 is offered: {said}"
    );
    assert!(said.contains("Verify return code: 0 (ok)"), "{said}");

    // skopeo: log in, push, pull back the same digest, verifying the server.
    run(skopeo()
        .args(["login", "--authfile"])
        .arg(&auth)
        .arg("--cert-dir")
        .arg(&certs)
        .args(["-u", "admin", "-p", ADMIN_PASSWORD, &host]));
    run(skopeo()
        .arg("copy")
        .arg("--authfile")
        .arg(&auth)
        .arg("--dest-cert-dir")
        .arg(&certs)
        .arg(format!("oci:{}:v3", layout.dir.display()))
        .arg(remote("tls:v3")));
    let pulled = work.join("pulled");
    run(skopeo()
        .arg("copy")
        .arg("--authfile")
        .arg(&auth)
        .arg("--src-cert-dir")
        .arg(&certs)
        .arg(remote("tls:v3"))
        .arg(format!("oci:{}:v3", pulled.display())));
    assert_eq!(layout_ref(&pulled, "v3"), layout.v3);
    // Without the CA, the client refuses the server.
    let untrusted = skopeo()
        .args(["inspect", "--raw", "--no-creds"])
        .arg(remote("tls:v3"))
        .output()
        .unwrap();
    assert!(!untrusted.status.success());
    assert!(
        String::from_utf8_lossy(&untrusted.stderr).contains("certificate"),
        "{}",
        String::from_utf8_lossy(&untrusted.stderr)
    );

    // podman: log in, pull, push under another tag, all verified by the CA.
    let storage = work.join("podman");
    run(podman(&storage)
        .args(["login", "--authfile"])
        .arg(&auth)
        .arg("--cert-dir")
        .arg(&certs)
        .args(["-u", "admin", "-p", ADMIN_PASSWORD, &host]));
    let image = run(podman(&storage)
        .args(["pull", "-q", "--authfile"])
        .arg(&auth)
        .arg("--cert-dir")
        .arg(&certs)
        .arg(format!("{host}/library/tls:v3")));
    run(podman(&storage)
        .args(["push", "--authfile"])
        .arg(&auth)
        .arg("--cert-dir")
        .arg(&certs)
        .arg(image.trim())
        .arg(remote("tls:podman")));
    let raw = run(skopeo()
        .args(["inspect", "--raw", "--authfile"])
        .arg(&auth)
        .arg("--cert-dir")
        .arg(&certs)
        .arg(remote("tls:podman")));
    assert!(raw.contains("layers"), "{raw}");

    // Rotation: new files in place (as a renewal writes them); the next
    // handshake a second later serves the new certificate, same process.
    let (cert, key) = ca.issue("second", Purpose::Server);
    std::fs::copy(&key, &served_key).unwrap();
    std::fs::copy(&cert, &served_cert).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let said = handshake(&host, &ca);
    assert!(
        said.contains("CN = second") || said.contains("CN=second"),
        "{said}"
    );
    run(skopeo()
        .args(["inspect", "--raw", "--authfile"])
        .arg(&auth)
        .arg("--cert-dir")
        .arg(&certs)
        .arg(remote("tls:v3")));

    // A broken replacement leaves the served certificate in service.
    std::fs::write(&served_cert, "not a certificate").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let said = handshake(&host, &ca);
    assert!(
        said.contains("CN = second") || said.contains("CN=second"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_ca_admits_only_clients_with_its_certificates() {
    require("skopeo");
    require("openssl");
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let pki = work.join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    let ca = TestCa::new(&pki);
    let (cert, key) = ca.issue("server", Purpose::Server);
    let (client_cert, client_key) = ca.issue("client", Purpose::Client);
    let client_ca = ca.path().display().to_string();
    let server = serve_tls(work, &cert, &key, &["--tls-client-ca", &client_ca]).await;
    let host = server.host();
    let login = |certs: &Path| {
        skopeo()
            .args(["login", "--authfile"])
            .arg(work.join("auth.json"))
            .arg("--cert-dir")
            .arg(certs)
            .args(["-u", "admin", "-p", ADMIN_PASSWORD, &host])
            .output()
            .unwrap()
    };
    let without = login(&cert_dir(work, "anonymous", &ca, None));
    assert!(!without.status.success(), "no client certificate, no entry");
    let with = login(&cert_dir(
        work,
        "client",
        &ca,
        Some((&client_cert, &client_key)),
    ));
    assert!(
        with.status.success(),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
}

#[test]
fn tls_files_that_do_not_load_stop_the_start() {
    let work = tempfile::tempdir().unwrap();
    let pki = work.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    let ca = TestCa::new(&pki);
    let (cert, _) = ca.issue("server", Purpose::Server);
    let (_, other_key) = ca.issue("other", Purpose::Server);
    let output = Command::new(BERTH_BIN)
        .arg("--data-dir")
        .arg(work.path().join("data"))
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&other_key)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("is not a key for the certificate"), "{said}");
    let output = Command::new(BERTH_BIN)
        .arg("--tls-cert")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(!output.status.success(), "a certificate needs its key");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--tls-key"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
