//! Real clients against the real binary on a loopback socket: skopeo push and
//! pull round trips (a multi-layer image and an index, built offline with
//! umoci), error bodies, and a crash in the middle of a chunked upload.
//! skopeo and umoci are required: `scripts/test` installs them, and a missing
//! tool fails these tests instead of skipping them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::digest_of;
use berth_store::BlobStore;

use crate::util::{
    ADMIN_PASSWORD, BERTH_BIN, Backend, ServedBerth, Storage, database_url, s3_blob_store,
    s3_blob_store_url,
};

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// Panics with a clear message when `tool` is missing (never a silent pass).
pub(crate) fn require(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "{tool} is required for the registry client tests: run `bash scripts/test` (it installs it) \
         or `apt-get install {tool}`"
    );
}

/// Runs `command`, failing the test with its output unless it succeeds; its standard output.
pub(crate) fn run(command: &mut Command) -> String {
    let output = command.output().expect("spawn");
    assert!(
        output.status.success(),
        "{command:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `berth serve` over a data directory and database, on a loopback port of
/// its own, with blobs in `blob_store` (a `--blob-store` URL) or the data directory.
async fn serve(data_dir: &Path, database_url: &str, blob_store: Option<&str>) -> ServedBerth {
    ServedBerth::start(|port| {
        let mut command = Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(data_dir)
            .env("DATABASE_URL", database_url)
            .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("EXTERNAL_URL", format!("http://127.0.0.1:{port}"))
            .env_remove("BLOB_STORE");
        if let Some(store) = blob_store {
            command.args(["--blob-store", store]);
        }
        command
    })
    .await
}

/// The `--blob-store` URL of a test on `storage`: a fresh bucket prefix, or
/// none (the data directory).
async fn blob_store(storage: Storage) -> Option<String> {
    match storage {
        Storage::Files => None,
        Storage::S3 => Some(s3_blob_store_url().await),
    }
}

/// Deterministic incompressible bytes.
pub(super) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// An OCI layout with `v3` (three layers, one of them 3 MiB), `arm` (same
/// layers, arm64 config) and `multi` (an index of both).
pub(crate) struct Layout {
    /// The layout directory.
    pub(crate) dir: PathBuf,
    /// The digest of the `v3` manifest.
    pub(crate) v3: String,
    /// The digest of the `multi` index.
    pub(super) multi: String,
}

/// The manifest digest tagged `tag` in the OCI layout at `dir`.
pub(crate) fn layout_ref(dir: &Path, tag: &str) -> String {
    let index: Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
        .map(|m| m["digest"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no {tag} in {}", dir.display()))
}

/// The bytes of blob `digest` in the OCI layout at `dir`.
pub(super) fn blob_of(dir: &Path, digest: &str) -> Vec<u8> {
    std::fs::read(dir.join("blobs/sha256").join(&digest["sha256:".len()..])).unwrap()
}

/// Builds the [`Layout`] under `work` with umoci.
pub(crate) fn build_layout(work: &Path) -> Layout {
    require("umoci");
    let dir = work.join("layout");
    let image = |tag: &str| format!("{}:{tag}", dir.display());
    run(Command::new("umoci").args(["init", "--layout"]).arg(&dir));
    run(Command::new("umoci").args(["new", "--image", &image("v0")]));
    for (i, content) in [
        b"first layer\n".to_vec(),
        noise(3 << 20, 7),
        b"third\n".to_vec(),
    ]
    .into_iter()
    .enumerate()
    {
        let bundle = work.join(format!("bundle{i}"));
        run(Command::new("umoci")
            .args(["unpack", "--rootless", "--image", &image(&format!("v{i}"))])
            .arg(&bundle));
        std::fs::write(bundle.join(format!("rootfs/file{i}")), content).unwrap();
        run(Command::new("umoci")
            .args(["repack", "--image", &image(&format!("v{}", i + 1))])
            .arg(&bundle));
    }
    run(Command::new("umoci").args([
        "config",
        "--image",
        &image("v3"),
        "--tag",
        "arm",
        "--architecture",
        "arm64",
    ]));
    let v3 = layout_ref(&dir, "v3");
    let arm = layout_ref(&dir, "arm");
    let index = json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": v3, "size": blob_of(&dir, &v3).len(),
             "platform": {"architecture": "amd64", "os": "linux"}},
            {"mediaType": OCI_MANIFEST, "digest": arm, "size": blob_of(&dir, &arm).len(),
             "platform": {"architecture": "arm64", "os": "linux"}},
        ],
    })
    .to_string()
    .into_bytes();
    let multi = digest_of(&index);
    std::fs::write(
        dir.join("blobs/sha256").join(&multi["sha256:".len()..]),
        &index,
    )
    .unwrap();
    let mut layout_index: Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    layout_index["manifests"]
        .as_array_mut()
        .unwrap()
        .push(json!({
            "mediaType": OCI_INDEX, "digest": multi, "size": index.len(),
            "annotations": {"org.opencontainers.image.ref.name": "multi"},
        }));
    std::fs::write(dir.join("index.json"), layout_index.to_string()).unwrap();
    Layout { dir, v3, multi }
}

/// `skopeo --insecure-policy`.
pub(crate) fn skopeo() -> Command {
    let mut command = Command::new("skopeo");
    command.arg("--insecure-policy");
    command
}

async fn skopeo_round_trips(backend: Backend, storage: Storage) {
    require("skopeo");
    let work = tempfile::tempdir().unwrap();
    let layout = build_layout(work.path());
    let data = work.path().join("data");
    let store = blob_store(storage).await;
    let server = serve(
        &data,
        &database_url(backend, work.path()).await,
        store.as_deref(),
    )
    .await;
    let creds = format!("admin:{ADMIN_PASSWORD}");
    let remote = |repo: &str| format!("docker://{}/library/{repo}", server.host());

    // Push the three-layer image and the index (with both children).
    run(skopeo()
        .args(["copy", "--dest-tls-verify=false", "--dest-creds", &creds])
        .arg(format!("oci:{}:v3", layout.dir.display()))
        .arg(remote("image:v3")));
    run(skopeo()
        .args([
            "copy",
            "--all",
            "--dest-tls-verify=false",
            "--dest-creds",
            &creds,
        ])
        .arg(format!("oci:{}:multi", layout.dir.display()))
        .arg(remote("nested/multi:latest")));

    // The registry serves exactly the bytes pushed (digests verified).
    let raw = run(skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--no-creds"])
        .arg(remote("image:v3")));
    assert_eq!(digest_of(raw.as_bytes()), layout.v3);
    let raw = run(skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--no-creds"])
        .arg(remote("nested/multi:latest")));
    assert_eq!(digest_of(raw.as_bytes()), layout.multi);
    let manifest: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(manifest["manifests"].as_array().unwrap().len(), 2);

    // Pull both back anonymously (a public project) into fresh layouts.
    let out = work.path().join("pulled");
    run(skopeo()
        .args(["copy", "--src-tls-verify=false", "--src-no-creds"])
        .arg(remote("image:v3"))
        .arg(format!("oci:{}:v3", out.display())));
    assert_eq!(layout_ref(&out, "v3"), layout.v3);
    let pulled: Value = serde_json::from_slice(&blob_of(&out, &layout.v3)).unwrap();
    let layers = pulled["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 3);
    for layer in layers {
        let digest = layer["digest"].as_str().unwrap();
        assert_eq!(digest_of(&blob_of(&out, digest)), digest);
        assert_eq!(blob_of(&out, digest), blob_of(&layout.dir, digest));
    }
    let out_all = work.path().join("pulled-all");
    run(skopeo()
        .args([
            "copy",
            "--all",
            "--src-tls-verify=false",
            "--src-creds",
            &creds,
        ])
        .arg(remote("nested/multi:latest"))
        .arg(format!("oci:{}:multi", out_all.display())));
    assert_eq!(layout_ref(&out_all, "multi"), layout.multi);

    // Tags, and skopeo's view of an error body.
    let tags = run(skopeo()
        .args(["list-tags", "--tls-verify=false", "--no-creds"])
        .arg(remote("image")));
    let tags: Value = serde_json::from_str(&tags).unwrap();
    assert_eq!(tags["Tags"], json!(["v3"]));
    let output = skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--no-creds"])
        .arg(remote("image:missing"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("manifest unknown"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = skopeo()
        .args(["copy", "--dest-tls-verify=false", "--dest-no-creds"])
        .arg(format!("oci:{}:v3", layout.dir.display()))
        .arg(remote("denied:v3"))
        .output()
        .unwrap();
    assert!(!output.status.success(), "anonymous push must fail");

    // The raw error body on the wire.
    let res = reqwest::get(server.url("/v2/library/image/manifests/missing"))
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(
        res.headers()["content-type"],
        "application/json; charset=utf-8"
    );
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["errors"][0]["code"], "MANIFEST_UNKNOWN");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_push_and_pull_round_trips_sqlite() {
    skopeo_round_trips(Backend::Sqlite, Storage::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_push_and_pull_round_trips_postgres() {
    skopeo_round_trips(Backend::Postgres, Storage::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_push_and_pull_round_trips_postgres_s3() {
    skopeo_round_trips(Backend::Postgres, Storage::S3).await;
}

/// A robot account's credentials with skopeo: push and pull where granted
/// (through the token service skopeo asks), refused elsewhere.
async fn skopeo_with_robot_credentials(backend: Backend) {
    require("skopeo");
    let work = tempfile::tempdir().unwrap();
    let layout = build_layout(work.path());
    let server = serve(
        &work.path().join("data"),
        &database_url(backend, work.path()).await,
        None,
    )
    .await;
    let client = reqwest::Client::new();
    let res = client
        .post(server.url("/api/v2.0/projects"))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .json(&json!({"project_name": "ci", "metadata": {"public": "false"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let robot = json!({
        "name": "builder", "level": "project", "duration": -1,
        "permissions": [{"kind": "project", "namespace": "ci",
            "access": [{"resource": "repository", "action": "push"}, {"resource": "repository", "action": "pull"}]}],
    });
    let res = client
        .post(server.url("/api/v2.0/robots"))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .json(&robot)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let created: Value = res.json().await.unwrap();
    let creds = format!(
        "{}:{}",
        created["name"].as_str().unwrap(),
        created["secret"].as_str().unwrap()
    );
    let remote = |path: &str| format!("docker://{}/{path}", server.host());

    run(skopeo()
        .args(["copy", "--dest-tls-verify=false", "--dest-creds", &creds])
        .arg(format!("oci:{}:v3", layout.dir.display()))
        .arg(remote("ci/app:v3")));
    let raw = run(skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--creds", &creds])
        .arg(remote("ci/app:v3")));
    assert_eq!(digest_of(raw.as_bytes()), layout.v3);
    let out = work.path().join("pulled");
    run(skopeo()
        .args(["copy", "--src-tls-verify=false", "--src-creds", &creds])
        .arg(remote("ci/app:v3"))
        .arg(format!("oci:{}:v3", out.display())));
    assert_eq!(layout_ref(&out, "v3"), layout.v3);

    // Beyond its permissions: another project, a delete, no credentials.
    let refused = |command: &mut Command, what: &str| {
        let output = command.output().unwrap();
        assert!(!output.status.success(), "{what} must be refused");
    };
    refused(
        skopeo()
            .args(["copy", "--dest-tls-verify=false", "--dest-creds", &creds])
            .arg(format!("oci:{}:v3", layout.dir.display()))
            .arg(remote("library/app:v3")),
        "a push to another project",
    );
    refused(
        skopeo()
            .args(["delete", "--tls-verify=false", "--creds", &creds])
            .arg(remote("ci/app:v3")),
        "a delete",
    );
    refused(
        skopeo()
            .args(["inspect", "--raw", "--tls-verify=false", "--no-creds"])
            .arg(remote("ci/app:v3")),
        "an anonymous pull of a private project",
    );
    let wrong = format!("{}:Wrong-Secret-1", created["name"].as_str().unwrap());
    refused(
        skopeo()
            .args(["inspect", "--raw", "--tls-verify=false", "--creds", &wrong])
            .arg(remote("ci/app:v3")),
        "a wrong secret",
    );
    // The image is still there.
    run(skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--creds", &creds])
        .arg(remote("ci/app:v3")));
}

#[tokio::test]
async fn skopeo_with_robot_credentials_sqlite() {
    skopeo_with_robot_credentials(Backend::Sqlite).await;
}

#[tokio::test]
async fn skopeo_with_robot_credentials_postgres() {
    skopeo_with_robot_credentials(Backend::Postgres).await;
}

async fn crash_during_chunked_upload(backend: Backend, storage: Storage) {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let url = database_url(backend, work.path()).await;
    let client = reqwest::Client::new();
    let store = blob_store(storage).await;
    let server = serve(&data, &url, store.as_deref()).await;
    let res = client
        .post(server.url("/v2/library/resumed/blobs/uploads/"))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let location = res.headers()["location"].to_str().unwrap().to_string();
    let blob = noise(5 << 20, 42);
    let (first, rest) = blob.split_at(2 << 20);
    let res = client
        .patch(server.url(&location))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .header("content-range", format!("0-{}", first.len() - 1))
        .body(first.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    server.crash();

    let server = serve(&data, &url, store.as_deref()).await;
    let res = client
        .get(server.url(&location))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(
        res.headers()["range"],
        format!("0-{}", first.len() - 1).as_str()
    );
    let digest = digest_of(&blob);
    let res = client
        .patch(server.url(&location))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .header(
            "content-range",
            format!("{}-{}", first.len(), blob.len() - 1),
        )
        .body(rest.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let res = client
        .put(server.url(&format!("{location}?digest={digest}")))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let res = client
        .get(server.url(&format!("/v2/library/resumed/blobs/{digest}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["docker-content-digest"], digest.as_str());
    let body = res.bytes().await.unwrap();
    assert_eq!(digest_of(&body), digest);
    server.crash();

    // `berth gc` with no grace: the blob no manifest uses goes.
    let mut gc = Command::new(BERTH_BIN);
    gc.args(["gc", "--grace", "0"])
        .arg("--data-dir")
        .arg(&data)
        .env("DATABASE_URL", &url)
        .env_remove("BLOB_STORE");
    if let Some(store) = &store {
        gc.args(["--blob-store", store]);
    }
    let output = gc.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(&format!("1 blobs ({} bytes) deleted", blob.len())),
        "{stdout}"
    );
    let stored = match &store {
        None => BlobStore::new(data.join("blobs")),
        Some(url) => s3_blob_store(url),
    };
    let digest = berth_domain::oci::Digest::parse(&digest).unwrap();
    assert!(!stored.exists(&digest).await, "the bytes went with the row");
    assert!(stored.committed_files().await.unwrap().is_empty());
    assert!(stored.upload_dirs().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_in_the_middle_of_a_chunked_upload_then_resume_sqlite() {
    crash_during_chunked_upload(Backend::Sqlite, Storage::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_in_the_middle_of_a_chunked_upload_then_resume_postgres() {
    crash_during_chunked_upload(Backend::Postgres, Storage::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_in_the_middle_of_a_chunked_upload_then_resume_postgres_s3() {
    crash_during_chunked_upload(Backend::Postgres, Storage::S3).await;
}

/// `podman` with private storage under `dir` (vfs: no kernel overlay needed).
pub(super) fn podman(dir: &Path) -> Command {
    let mut command = Command::new("podman");
    command
        .arg("--root")
        .arg(dir.join("root"))
        .arg("--runroot")
        .arg(dir.join("runroot"))
        .args(["--storage-driver", "vfs"]);
    command
}

async fn podman_round_trip(backend: Backend, storage: Storage) {
    require("podman");
    require("skopeo");
    let work = tempfile::tempdir().unwrap();
    let layout = build_layout(work.path());
    let store = blob_store(storage).await;
    let server = serve(
        &work.path().join("data"),
        &database_url(backend, work.path()).await,
        store.as_deref(),
    )
    .await;
    let creds = format!("admin:{ADMIN_PASSWORD}");
    let storage = work.path().join("podman");
    let source = format!("{}/library/podman:source", server.host());
    run(skopeo()
        .args(["copy", "--dest-tls-verify=false", "--dest-creds", &creds])
        .arg(format!("oci:{}:v3", layout.dir.display()))
        .arg(format!("docker://{source}")));
    let image = run(podman(&storage).args(["pull", "-q", "--tls-verify=false", &source]));
    let image = image.trim();
    // Docker schema 2 this time (podman converts), then OCI.
    for (format, tag) in [("v2s2", "docker"), ("oci", "oci")] {
        let target = format!("{}/library/podman:{tag}", server.host());
        run(podman(&storage)
            .args([
                "push",
                "--tls-verify=false",
                "--creds",
                &creds,
                "--format",
                format,
                image,
            ])
            .arg(format!("docker://{target}")));
        let raw = run(skopeo()
            .args(["inspect", "--raw", "--tls-verify=false", "--no-creds"])
            .arg(format!("docker://{target}")));
        let manifest: Value = serde_json::from_str(&raw).unwrap();
        let expected = if format == "v2s2" {
            "application/vnd.docker.distribution.manifest.v2+json"
        } else {
            OCI_MANIFEST
        };
        assert_eq!(
            manifest["mediaType"].as_str().unwrap_or(OCI_MANIFEST),
            expected
        );
        assert_eq!(manifest["layers"].as_array().unwrap().len(), 3);
        let res = reqwest::Client::new()
            .head(server.url(&format!("/v2/library/podman/manifests/{tag}")))
            .header("accept", expected)
            .send()
            .await
            .unwrap();
        assert_eq!(res.headers()["content-type"], expected);
        assert_eq!(
            res.headers()["docker-content-digest"],
            digest_of(raw.as_bytes()).as_str()
        );

        // Pull it back anonymously into empty storage; podman checks every digest.
        let fresh = work.path().join(format!("podman-{tag}"));
        run(podman(&fresh).args(["pull", "-q", "--tls-verify=false", &target]));
        let inspect = run(podman(&fresh).args(["image", "inspect", &target]));
        let inspect: Value = serde_json::from_str(&inspect).unwrap();
        assert_eq!(inspect[0]["Digest"], digest_of(raw.as_bytes()).as_str());
        assert_eq!(inspect[0]["RootFS"]["Layers"].as_array().unwrap().len(), 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podman_push_and_pull_round_trips_sqlite() {
    podman_round_trip(Backend::Sqlite, Storage::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podman_push_and_pull_round_trips_postgres() {
    podman_round_trip(Backend::Postgres, Storage::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podman_push_and_pull_round_trips_postgres_s3() {
    podman_round_trip(Backend::Postgres, Storage::S3).await;
}

/// `berth backup` while the server serves, then `berth restore` into an empty
/// data directory: every manifest and blob pushed before the backup pulls
/// back with the same digest, what came after is not there, and fsck is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_while_serving_then_restore_pulls_the_same_digests() {
    require("skopeo");
    let work = tempfile::tempdir().unwrap();
    let layout = build_layout(work.path());
    let (data, restored, backup) = (
        work.path().join("data"),
        work.path().join("restored"),
        work.path().join("backup"),
    );
    let url_of = |dir: &Path| format!("sqlite://{}?mode=rwc", dir.join("berth.db").display());
    let server = serve(&data, &url_of(&data), None).await;
    let creds = format!("admin:{ADMIN_PASSWORD}");
    let push = |server: &ServedBerth, tag: &str, target: &str| {
        run(skopeo()
            .args([
                "copy",
                "--all",
                "--dest-tls-verify=false",
                "--dest-creds",
                &creds,
            ])
            .arg(format!("oci:{}:{tag}", layout.dir.display()))
            .arg(format!("docker://{}/library/{target}", server.host())));
    };
    push(&server, "v3", "image:v3");
    push(&server, "multi", "nested/multi:latest");

    let berth = |data_dir: &Path| {
        let mut command = Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(data_dir)
            .env("DATABASE_URL", url_of(data_dir))
            .env_remove("BLOB_STORE");
        command
    };
    let said = run(berth(&data).arg("backup").arg("--to").arg(&backup));
    assert!(said.starts_with("backed up the database, "), "{said}");
    push(&server, "v3", "after:v3");
    let refused = berth(&data)
        .arg("backup")
        .arg("--to")
        .arg(&backup)
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "a backup never overwrites another"
    );
    server.stop();

    let said = run(berth(&restored).arg("restore").arg("--from").arg(&backup));
    assert!(said.starts_with("restored the database, "), "{said}");
    let again = berth(&restored)
        .arg("restore")
        .arg("--from")
        .arg(&backup)
        .output()
        .unwrap();
    assert!(
        !again.status.success(),
        "a restore never overwrites a database"
    );
    assert!(run(berth(&restored).arg("fsck")).contains(": 0 problems"));

    let server = serve(&restored, &url_of(&restored), None).await;
    for (reference, tag, digest) in [
        ("image:v3", "v3", &layout.v3),
        ("nested/multi:latest", "multi", &layout.multi),
    ] {
        let out = work.path().join(format!("pulled-{tag}"));
        run(skopeo()
            .args([
                "copy",
                "--all",
                "--src-tls-verify=false",
                "--src-creds",
                &creds,
            ])
            .arg(format!("docker://{}/library/{reference}", server.host()))
            .arg(format!("oci:{}:{tag}", out.display())));
        assert_eq!(&layout_ref(&out, tag), digest, "{reference}");
    }
    let missing = skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--creds", &creds])
        .arg(format!("docker://{}/library/after:v3", server.host()))
        .output()
        .unwrap();
    assert!(!missing.status.success(), "pushed after the backup");
}

/// skopeo copying an image between two projects of one Berth mounts its
/// layers from the first (one token for both repositories, then the mount)
/// instead of uploading them again: its debug log shows each layer's mount
/// and no upload of a layer into the second project.
async fn skopeo_mounts_layers_between_projects(backend: Backend) {
    require("skopeo");
    let work = tempfile::tempdir().unwrap();
    let layout = build_layout(work.path());
    let server = serve(
        &work.path().join("data"),
        &database_url(backend, work.path()).await,
        None,
    )
    .await;
    let client = reqwest::Client::new();
    for project in ["mount-from", "mount-into"] {
        let res = client
            .post(server.url("/api/v2.0/projects"))
            .basic_auth("admin", Some(ADMIN_PASSWORD))
            .json(&json!({"project_name": project, "metadata": {"public": "false"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
    }
    let creds = format!("admin:{ADMIN_PASSWORD}");
    let remote = |path: &str| format!("docker://{}/{path}", server.host());
    run(skopeo()
        .args(["copy", "--dest-tls-verify=false", "--dest-creds", &creds])
        .arg(format!("oci:{}:v3", layout.dir.display()))
        .arg(remote("mount-from/app:v3")));
    let output = skopeo()
        .args([
            "--debug",
            "copy",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            "--src-creds",
            &creds,
            "--dest-creds",
            &creds,
        ])
        .arg(remote("mount-from/app:v3"))
        .arg(remote("mount-into/app:v3"))
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{log}");
    let manifest: Value = serde_json::from_slice(&blob_of(&layout.dir, &layout.v3)).unwrap();
    let layers: Vec<&str> = manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["digest"].as_str().unwrap())
        .collect();
    assert_eq!(layers.len(), 3);
    assert_eq!(log.matches("... mount OK").count(), layers.len(), "{log}");
    for layer in &layers {
        let encoded = layer.replace(':', "%3A");
        assert!(
            log.contains(&format!("Trying to mount /v2/mount-into/app/blobs/uploads/?from=mount-from%2Fapp&mount={encoded}")),
            "{layer} is mounted: {log}"
        );
        let uploaded = log.lines().any(|line| {
            line.contains("PUT ")
                && line.contains("/v2/mount-into/app/blobs/uploads/")
                && line.contains(&encoded)
        });
        assert!(!uploaded, "{layer} is not uploaded again: {log}");
    }
    // The copy is whole: the same manifest, its layers readable in the second project.
    let raw = run(skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--creds", &creds])
        .arg(remote("mount-into/app:v3")));
    assert_eq!(digest_of(raw.as_bytes()), layout.v3);
    for layer in &layers {
        let res = client
            .get(server.url(&format!("/v2/mount-into/app/blobs/{layer}")))
            .basic_auth("admin", Some(ADMIN_PASSWORD))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(
            digest_of(&res.bytes().await.unwrap()),
            *layer,
            "the mounted layer's bytes"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_mounts_layers_between_projects_sqlite() {
    skopeo_mounts_layers_between_projects(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_mounts_layers_between_projects_postgres() {
    skopeo_mounts_layers_between_projects(Backend::Postgres).await;
}
