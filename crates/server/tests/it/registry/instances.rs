//! Several instances, one registry: two `berth serve` processes with data
//! directories of their own, one PostgreSQL database, one blob store (a
//! directory, `--blob-store file://...`, as a shared volume would be, or an
//! S3 bucket) and the same secrets, as behind a load balancer. A chunked upload moves between them, an
//! image pushed to one is pulled from the other, and `berth gc` runs while one
//! of them pushes.
//!
//! PostgreSQL only: a SQLite database is one machine's file, so instances
//! cannot share it.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::json;

use super::clients::{blob_of, build_layout, layout_ref, noise, require, run, skopeo};
use super::digest_of;
use berth_store::BlobStore;

use crate::util::{
    ADMIN_PASSWORD, BERTH_BIN, CONFIG_SECRET_KEY, JWT_SECRET, MASTER_KEY, ServedBerth, Storage,
    postgres_database_url, s3_blob_store, s3_blob_store_url,
};

/// How many pushes instance B makes at most while the collection runs.
const MAX_PUSHES: usize = 200;
/// How many pushes B makes at least, finished collection or not.
const MIN_PUSHES: usize = 5;
/// How many blobs no manifest names are pushed before the collection.
const LOOSE_BLOBS: usize = 40;
/// How long a subprocess (`berth gc`, `berth fsck`) may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// `berth` over `data_dir` with the shared database, blob store and secrets.
fn berth(data_dir: &Path, database_url: &str, blob_store: &str) -> Command {
    let mut command = Command::new(BERTH_BIN);
    command
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--blob-store", blob_store])
        .env("DATABASE_URL", database_url)
        .env("MASTER_KEY", MASTER_KEY)
        .env("JWT_SECRET", JWT_SECRET)
        .env("CONFIG_SECRET_KEY", CONFIG_SECRET_KEY)
        .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env_remove("BLOB_STORE");
    command
}

/// One instance: `berth serve` over its own data directory.
async fn instance(data_dir: &Path, database_url: &str, blob_store: &str) -> ServedBerth {
    ServedBerth::start(|port| {
        let mut command = berth(data_dir, database_url, blob_store);
        command.env("EXTERNAL_URL", format!("http://127.0.0.1:{port}"));
        command
    })
    .await
}

/// Runs a `berth` subcommand to its end, at most [`TOOL_TIMEOUT`].
fn finish(mut child: std::process::Child) -> Output {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > TOOL_TIMEOUT {
            let _ = child.kill();
            panic!("berth did not finish within {TOOL_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Standard output and error of a finished command, for assertion messages.
fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The shared blob store as the test sees it, and its `--blob-store` URL.
async fn shared_store(work: &Path, storage: Storage) -> (BlobStore, String) {
    match storage {
        Storage::Files => {
            let dir = work.join("shared-blobs");
            (BlobStore::new(&dir), format!("file://{}", dir.display()))
        }
        Storage::S3 => {
            let url = s3_blob_store_url().await;
            (s3_blob_store(&url), url)
        }
    }
}

/// Whether the shared store holds the bytes of `digest`.
async fn stored(blobs: &BlobStore, digest: &str) -> bool {
    blobs
        .exists(&berth_domain::oci::Digest::parse(digest).unwrap())
        .await
}

/// An admin client of the instances.
struct Admin {
    client: reqwest::Client,
}

impl Admin {
    fn new() -> Self {
        Self {
            client: reqwest::Client::new(),
        }
    }

    /// A request as `admin`.
    fn request(&self, method: reqwest::Method, url: String) -> reqwest::RequestBuilder {
        self.client
            .request(method, url)
            .basic_auth("admin", Some(ADMIN_PASSWORD))
    }

    /// Pushes `bytes` monolithically to `server`; the status and the digest.
    async fn push_blob(&self, server: &ServedBerth, name: &str, bytes: &[u8]) -> (u16, String) {
        let digest = digest_of(bytes);
        let res = self
            .request(
                reqwest::Method::POST,
                server.url(&format!("/v2/{name}/blobs/uploads/?digest={digest}")),
            )
            .header("content-type", "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), digest)
    }

    /// Pulls blob `digest` from `server`, which must have it.
    async fn pull_blob(&self, server: &ServedBerth, name: &str, digest: &str) -> Vec<u8> {
        let res = self
            .request(
                reqwest::Method::GET,
                server.url(&format!("/v2/{name}/blobs/{digest}")),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{digest} from port {}", server.port());
        res.bytes().await.unwrap().to_vec()
    }
}

/// A manifest instance B pushed and had acknowledged while the collection ran.
struct Acknowledged {
    tag: String,
    digest: String,
    blobs: Vec<Vec<u8>>,
}

/// Pushes one small image (a config and a layer of its own) to `server` as
/// `name:tag`. `None` when the collection took a blob between its push and
/// the manifest's (the client repeats the push, as any client would).
async fn push_small_image(
    admin: &Admin,
    server: &ServedBerth,
    name: &str,
    tag: &str,
) -> Option<Acknowledged> {
    let config = json!({"architecture": "amd64", "os": "linux", "tag": tag})
        .to_string()
        .into_bytes();
    let layer = format!("layer of {tag}").into_bytes();
    for blob in [&config, &layer] {
        let (status, _) = admin.push_blob(server, name, blob).await;
        assert_eq!(status, 201, "pushing a blob of {tag}");
    }
    let manifest = super::image_manifest(&config, &[&layer]);
    let res = admin
        .request(
            reqwest::Method::PUT,
            server.url(&format!("/v2/{name}/manifests/{tag}")),
        )
        .header("content-type", OCI_MANIFEST)
        .body(manifest.clone())
        .send()
        .await
        .unwrap();
    match res.status().as_u16() {
        201 => Some(Acknowledged {
            tag: tag.to_string(),
            digest: digest_of(&manifest),
            blobs: vec![config, layer],
        }),
        400 => {
            let body = res.text().await.unwrap();
            assert!(body.contains("MANIFEST_BLOB_UNKNOWN"), "{body}");
            None
        }
        status => panic!("manifest {tag}: {status} {}", res.text().await.unwrap()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_database_and_blob_directory_postgres() {
    two_instances_share_one_registry(Storage::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_database_and_bucket_postgres_s3() {
    two_instances_share_one_registry(Storage::S3).await;
}

async fn two_instances_share_one_registry(storage: Storage) {
    require("skopeo");
    require("umoci");
    let work = tempfile::tempdir().unwrap();
    let (shared, blob_store) = shared_store(work.path(), storage).await;
    let url = postgres_database_url().await;
    let a = instance(&work.path().join("a"), &url, &blob_store).await;
    let b = instance(&work.path().join("b"), &url, &blob_store).await;
    assert!(
        !work.path().join("a/blobs").exists() && !work.path().join("b/blobs").exists(),
        "blobs go to the shared store, not the data directories"
    );
    let admin = Admin::new();

    // (a) A chunked upload started on A, its chunks sent to A and B in turn,
    // committed on B: the blob is whole on A.
    let res = admin
        .request(
            reqwest::Method::POST,
            a.url("/v2/library/chunked/blobs/uploads/"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let location = res.headers()["location"].to_str().unwrap().to_string();
    assert!(location.starts_with('/'), "{location}");
    // On S3, chunks of 4 MiB (parts under S3's 5 MiB minimum) make a 20 MiB
    // blob, assembled in several 8 MiB pieces.
    let (blob, chunk) = match storage {
        Storage::Files => (noise(3 << 20, 12), 512 << 10),
        Storage::S3 => (noise(20 << 20, 12), 4 << 20),
    };
    for (i, part) in blob.chunks(chunk).enumerate() {
        let server = if i % 2 == 0 { &a } else { &b };
        let start = i * chunk;
        let res = admin
            .request(reqwest::Method::PATCH, server.url(&location))
            .header("content-type", "application/octet-stream")
            .header(
                "content-range",
                format!("{start}-{}", start + part.len() - 1),
            )
            .body(part.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 202, "chunk {i} on port {}", server.port());
        assert_eq!(
            res.headers()["range"],
            format!("0-{}", start + part.len() - 1).as_str()
        );
        if i == 0 {
            let sessions = shared.upload_dirs().await.unwrap().len();
            assert_eq!(sessions, 1, "the parts are written to the shared store");
        }
    }
    let digest = digest_of(&blob);
    let res = admin
        .request(
            reqwest::Method::PUT,
            b.url(&format!("{location}?digest={digest}")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    assert_eq!(
        admin.pull_blob(&a, "library/chunked", &digest).await,
        blob,
        "A serves the blob committed on B"
    );

    // (b) An image pushed with skopeo to A is pulled with skopeo from B.
    let layout = build_layout(work.path());
    let creds = format!("admin:{ADMIN_PASSWORD}");
    run(skopeo()
        .args(["copy", "--dest-tls-verify=false", "--dest-creds", &creds])
        .arg(format!("oci:{}:v3", layout.dir.display()))
        .arg(format!("docker://{}/library/image:v3", a.host())));
    let raw = run(skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--no-creds"])
        .arg(format!("docker://{}/library/image:v3", b.host())));
    assert_eq!(digest_of(raw.as_bytes()), layout.v3);
    let pulled = work.path().join("pulled");
    run(skopeo()
        .args(["copy", "--src-tls-verify=false", "--src-no-creds"])
        .arg(format!("docker://{}/library/image:v3", b.host()))
        .arg(format!("oci:{}:v3", pulled.display())));
    assert_eq!(layout_ref(&pulled, "v3"), layout.v3);
    let manifest: serde_json::Value =
        serde_json::from_slice(&blob_of(&pulled, &layout.v3)).unwrap();
    for layer in manifest["layers"].as_array().unwrap() {
        let digest = layer["digest"].as_str().unwrap();
        assert_eq!(blob_of(&pulled, digest), blob_of(&layout.dir, digest));
    }

    // (c) `berth gc --grace 0` runs while B pushes images. A blob no manifest
    // names may go at grace 0 (its manifest push then fails and is repeated);
    // every manifest acknowledged keeps its blobs.
    let mut loose = Vec::new();
    for i in 0..LOOSE_BLOBS {
        let server = if i % 2 == 0 { &a } else { &b };
        let (status, digest) = admin
            .push_blob(server, "library/loose", format!("loose {i}").as_bytes())
            .await;
        assert_eq!(status, 201);
        loose.push(digest);
    }
    let gc = berth(&work.path().join("gc"), &url, &blob_store)
        .args(["gc", "--grace", "0", "--upload-expiry", "1h"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut acknowledged = Vec::new();
    let mut repeated = 0;
    let mut gc = Some(gc);
    let mut gc_output = None;
    let mut pushes_while_gc_ran = 0;
    for i in 0..MAX_PUSHES {
        if let Some(child) = gc.as_mut()
            && child.try_wait().unwrap().is_some()
        {
            gc_output = Some(finish(gc.take().unwrap()));
            pushes_while_gc_ran = i;
        }
        if gc_output.is_some() && i >= MIN_PUSHES {
            break;
        }
        let tag = format!("t{i}");
        let mut pushed = None;
        for _ in 0..3 {
            pushed = push_small_image(&admin, &b, "library/during-gc", &tag).await;
            if pushed.is_some() {
                break;
            }
            repeated += 1;
        }
        acknowledged.push(pushed.expect("a repeated push succeeds"));
    }
    let gc_output = gc_output.unwrap_or_else(|| {
        pushes_while_gc_ran = MAX_PUSHES;
        finish(gc.take().unwrap())
    });
    assert!(gc_output.status.success(), "{}", text(&gc_output));
    assert!(
        text(&gc_output).contains("garbage collection done"),
        "{}",
        text(&gc_output)
    );
    for digest in &loose {
        assert!(
            !stored(&shared, digest).await,
            "loose blob {digest} was collected: {}",
            text(&gc_output)
        );
    }
    assert!(
        pushes_while_gc_ran >= 1,
        "B pushed while the collection ran"
    );
    assert!(acknowledged.len() >= MIN_PUSHES);
    for image in &acknowledged {
        let res = admin
            .request(
                reqwest::Method::GET,
                a.url(&format!("/v2/library/during-gc/manifests/{}", image.tag)),
            )
            .header("accept", OCI_MANIFEST)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "manifest {} on A", image.tag);
        assert_eq!(digest_of(&res.bytes().await.unwrap()), image.digest);
        for bytes in &image.blobs {
            let digest = digest_of(bytes);
            assert_eq!(
                &admin.pull_blob(&a, "library/during-gc", &digest).await,
                bytes,
                "a blob of {} ({repeated} pushes repeated)",
                image.tag
            );
        }
    }
    let fsck = finish(
        berth(&work.path().join("fsck"), &url, &blob_store)
            .arg("fsck")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(fsck.status.code(), Some(0), "{}", text(&fsck));

    // (d) Every session ended: nothing is left under the shared uploads
    // directory, and nothing of the blobs in the instances' own.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = shared.upload_dirs().await.unwrap();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "uploads left behind: {left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for instance in ["a", "b"] {
        let dir = work.path().join(instance);
        let mut kept: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        kept.sort();
        assert_eq!(
            kept,
            ["secrets.json"],
            "all instance {instance} keeps on disk"
        );
    }
}
