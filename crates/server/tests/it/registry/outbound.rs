//! Outbound connections as a cloud deployment has them: S3 keys that no one
//! gave Berth, obtained with web identity from STS (EKS's IAM roles for
//! service accounts) and renewed; a private CA for the object store
//! (`AWS_CA_BUNDLE`); every request through a forward proxy (`HTTPS_PROXY`,
//! `HTTP_PROXY`, `NO_PROXY`). The S3 and STS server is moto, which refuses
//! requests signed with keys it did not issue; the proxy is tinyproxy.

use std::path::Path;
use std::process::Command;

use super::clients::{build_layout, layout_ref, require, run, skopeo};
use crate::util::{
    ADMIN_PASSWORD, BERTH_BIN, ForwardProxy, Moto, Purpose, ServedBerth, TestCa, free_port,
    s3_blob_store_url,
};

const ROLE: &str = "berth-blobs";
const BUCKET: &str = "berth-blobs";

/// `berth` on SQLite in `work`, blobs in `blob_store`, with the AWS and
/// proxy environment cleared and then set to `env`.
fn berth(work: &Path, name: &str, blob_store: &str, env: &[(&str, String)]) -> Command {
    let mut command = Command::new(BERTH_BIN);
    command
        .arg("--data-dir")
        .arg(work.join(name))
        .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("BLOB_STORE", blob_store)
        .env_remove("DATABASE_URL")
        // Nothing of the test run's own S3 keys, profiles or proxies.
        .env("HOME", work)
        .env("AWS_CONFIG_FILE", work.join("no-aws-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            work.join("no-aws-credentials"),
        )
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for name in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CA_BUNDLE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ENDPOINT_URL_STS",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// Runs `command` on a free port: true when it exits with an error (the
/// blob store refused it), and everything it printed.
fn start_refused(mut command: Command) -> (bool, String) {
    let output = command
        .args(["--ip", "127.0.0.1", "--port", &free_port().to_string()])
        .args(["--log", "warn,berth=info"])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (!output.status.success(), said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_identity_keys_a_ca_bundle_and_a_forward_proxy() {
    require("skopeo");
    require("tinyproxy");
    require("openssl");
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let layout = build_layout(work);
    let pki = work.join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    let ca = TestCa::new(&pki);
    let (cert, key) = ca.issue("moto", Purpose::Server);
    let moto = Moto::start(work, Some((&cert, &key, &ca.path())), ROLE, BUCKET);
    let proxy = ForwardProxy::start(work);
    let token = work.join("web-identity-token");
    std::fs::write(&token, "a projected service account token").unwrap();
    let blob_store = format!("s3://{BUCKET}?endpoint={}&region=us-east-1", moto.url());
    let cloud = [
        ("AWS_ROLE_ARN", Moto::role_arn(ROLE)),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token.display().to_string()),
        ("AWS_ROLE_SESSION_NAME", "berth".to_string()),
        ("AWS_ENDPOINT_URL_STS", moto.url()),
        ("AWS_CA_BUNDLE", ca.path().display().to_string()),
        ("HTTPS_PROXY", proxy.url()),
        ("HTTP_PROXY", proxy.url()),
    ];

    // Keys from STS, through the proxy's tunnel, trusting the CA bundle.
    let server = ServedBerth::start(|_| berth(work, "data", &blob_store, &cloud)).await;
    let host = server.host();
    let auth = work.join("auth.json");
    run(skopeo()
        .args(["login", "--tls-verify=false", "--authfile"])
        .arg(&auth)
        .args(["-u", "admin", "-p", ADMIN_PASSWORD, &host]));
    run(skopeo()
        .args(["copy", "--dest-tls-verify=false", "--authfile"])
        .arg(&auth)
        .arg(format!("oci:{}:v3", layout.dir.display()))
        .arg(format!("docker://{host}/library/cloud:v3")));
    let pulled = work.join("pulled");
    run(skopeo()
        .args(["copy", "--src-tls-verify=false", "--authfile"])
        .arg(&auth)
        .arg(format!("docker://{host}/library/cloud:v3"))
        .arg(format!("oci:{}:v3", pulled.display())));
    assert_eq!(layout_ref(&pulled, "v3"), layout.v3);
    let log = server.log();
    let renewal = log
        .lines()
        .find(|line| line.contains("S3 credentials renewed"))
        .unwrap_or_else(|| panic!("no renewal logged: {log}"));
    assert!(
        renewal.contains("ASIA"),
        "temporary keys from STS: {renewal}"
    );
    let moto_host = moto.url().replace("https://", "");
    let requests = proxy.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with(&format!("CONNECT {moto_host} "))),
        "S3 and STS went through the proxy's tunnel: {requests:?}"
    );

    // Without the CA bundle the object store's certificate is not trusted.
    let untrusting: Vec<_> = cloud
        .iter()
        .filter(|(name, _)| *name != "AWS_CA_BUNDLE")
        .cloned()
        .collect();
    let (refused, said) = start_refused(berth(work, "untrusting", &blob_store, &untrusting));
    assert!(refused, "{said}");
    assert!(said.contains("no S3 credentials"), "{said}");
    assert!(said.contains("certificate"), "the reason is logged: {said}");

    // Keys STS did not issue are refused: moto checks signatures.
    let forged = [
        ("AWS_ACCESS_KEY_ID", "ASIAFORGEDFORGED0000".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "forged".to_string()),
        ("AWS_CA_BUNDLE", ca.path().display().to_string()),
    ];
    let (refused, said) = start_refused(berth(work, "forged", &blob_store, &forged));
    assert!(refused, "forged keys are refused: {said}");
    assert!(said.contains("403"), "{said}");

    // NO_PROXY exempts a host: nothing more goes through the proxy. (Given
    // keys, on the suite's S3 server: moto answers one STS call unsigned.)
    let before = proxy.requests().len();
    let given_keys = s3_blob_store_url().await;
    let mut direct: Vec<(&str, String)> = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
        .into_iter()
        .map(|name| (name, std::env::var(name).expect("the suite's S3 keys")))
        .collect();
    direct.push(("HTTP_PROXY", proxy.url()));
    direct.push(("HTTPS_PROXY", proxy.url()));
    direct.push(("NO_PROXY", "localhost,127.0.0.1".to_string()));
    let server = ServedBerth::start(|_| berth(work, "direct", &given_keys, &direct)).await;
    drop(server);
    assert_eq!(proxy.requests().len(), before, "{:?}", proxy.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_requests_are_forwarded_by_the_proxy() {
    require("tinyproxy");
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let moto = Moto::start(work, None, ROLE, BUCKET);
    let proxy = ForwardProxy::start(work);
    let token = work.join("web-identity-token");
    std::fs::write(&token, "a projected service account token").unwrap();
    let blob_store = format!("s3://{BUCKET}?endpoint={}", moto.url());
    let env = [
        ("AWS_ROLE_ARN", Moto::role_arn(ROLE)),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token.display().to_string()),
        ("AWS_ENDPOINT_URL_STS", moto.url()),
        ("HTTP_PROXY", proxy.url()),
    ];
    let server = ServedBerth::start(|_| berth(work, "data", &blob_store, &env)).await;
    let res = reqwest::Client::new()
        .get(server.url("/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        200,
        "{}\n{}",
        res.text().await.unwrap(),
        server.log()
    );
    let requests = proxy.requests();
    let origin = moto.url();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with(&format!("POST {origin}/ "))),
        "STS in absolute form: {requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with(&format!("HEAD {origin}/{BUCKET} "))),
        "S3 in absolute form: {requests:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_from_a_shared_profile() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let blob_store = s3_blob_store_url().await;
    let key = |name: &str| std::env::var(name).expect("the suite's S3 keys");
    let credentials = work.join("credentials");
    std::fs::write(
        &credentials,
        format!(
            "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n\
             [registry]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            key("AWS_ACCESS_KEY_ID"),
            key("AWS_SECRET_ACCESS_KEY")
        ),
    )
    .unwrap();
    let profile = |name: &str| {
        vec![
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                credentials.display().to_string(),
            ),
            ("AWS_PROFILE", name.to_string()),
        ]
    };
    let server =
        ServedBerth::start(|_| berth(work, "data", &blob_store, &profile("registry"))).await;
    let ready = reqwest::get(server.url("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200, "{}", server.log());
    drop(server);
    let (refused, said) = start_refused(berth(work, "other", &blob_store, &profile("default")));
    assert!(refused, "the default profile's keys are wrong: {said}");
}
