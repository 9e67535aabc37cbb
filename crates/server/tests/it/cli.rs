//! The `berth` binary itself: first start, restart, flags, subcommands.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::util::{BERTH_BIN, Backend, RefusedPort, ServedBerth, Storage, database_url, free_port};

fn berth(data_dir: &Path, database_url: &str) -> Command {
    let mut command = Command::new(BERTH_BIN);
    command
        .arg("--data-dir")
        .arg(data_dir)
        .env("DATABASE_URL", database_url)
        .env_remove("MASTER_KEY")
        .env_remove("JWT_SECRET")
        .env_remove("CONFIG_SECRET_KEY")
        .env_remove("HARBOR_ADMIN_PASSWORD")
        .env_remove("BLOB_STORE");
    command
}

/// `berth serve` over a data directory and database, on a loopback port of its own.
async fn serve(data_dir: &Path, database_url: &str) -> ServedBerth {
    ServedBerth::start(|_port| berth(data_dir, database_url)).await
}

async fn current_user_status(server: &ServedBerth, login: &str, password: &str) -> u16 {
    reqwest::Client::new()
        .get(server.url("/api/v2.0/users/current"))
        .basic_auth(login, Some(password))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn first_start_then_restart(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(backend, dir.path()).await;
    let server = serve(dir.path(), &url).await;
    let admin_password =
        server.printed_line("Generated password of the system administrator `admin`: ");
    server.printed_line("Generated master key");
    assert_eq!(
        current_user_status(&server, "admin", &admin_password).await,
        200
    );

    let secrets_path = dir.path().join("secrets.json");
    let secrets = std::fs::read_to_string(&secrets_path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&secrets_path)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let status = std::process::Command::new(BERTH_BIN)
        .args(["healthcheck", "--url", &server.url("/api/v2.0/health")])
        .output()
        .unwrap()
        .status;
    assert!(status.success());

    let mut create = berth(dir.path(), &url)
        .args([
            "user",
            "create",
            "--username",
            "ops",
            "--email",
            "ops@example.com",
            "--admin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    create
        .stdin
        .take()
        .unwrap()
        .write_all(b"S3cret-pass\n")
        .unwrap();
    let out = create.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("created user ops"));
    assert_eq!(server.stop().0, Some(0), "a graceful stop exits 0");

    let again = serve(dir.path(), &url).await;
    assert_eq!(std::fs::read_to_string(&secrets_path).unwrap(), secrets);
    assert_eq!(
        current_user_status(&again, "admin", &admin_password).await,
        200
    );
    assert_eq!(current_user_status(&again, "ops", "S3cret-pass").await, 200);
    let (code, printed) = again.stop();
    assert_eq!(code, Some(0));
    assert!(
        printed.iter().all(|l| !l.starts_with("Generated")),
        "a restart prints no secrets: {printed:?}"
    );
}

#[tokio::test]
async fn first_start_then_restart_sqlite() {
    first_start_then_restart(Backend::Sqlite).await;
}

#[tokio::test]
async fn first_start_then_restart_postgres() {
    first_start_then_restart(Backend::Postgres).await;
}

/// The test harness itself: a server whose port was taken before it could
/// bind it is started again on another port, and what the lost attempt
/// printed (the first start's secrets) is not lost.
#[tokio::test]
async fn a_server_that_lost_its_port_is_started_on_another() {
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(Backend::Sqlite, dir.path()).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().port();
    let server = ServedBerth::start_on([taken, free_port()], |_port| berth(dir.path(), &url)).await;
    assert_ne!(server.port(), taken);
    let password = server.printed_line("Generated password of the system administrator `admin`: ");
    assert_eq!(current_user_status(&server, "admin", &password).await, 200);
    assert_eq!(server.stop().0, Some(0));
}

#[test]
fn bad_flags_exit_with_2_and_a_message() {
    for args in [
        &["--port", "notaport"][..],
        &["--no-such-flag"],
        &["--jwt-expires-in", "7w"],
    ] {
        let out = Command::new(BERTH_BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn a_blob_store_other_than_a_directory_exits_with_2_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let run = |command: &mut Command| {
        let out = command.current_dir(dir.path()).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = run(Command::new(BERTH_BIN)
        .args(["--blob-store", "s3://bucket/blobs"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("AWS_ACCESS_KEY_ID"), "{stderr}");
    let (code, stderr) = run(Command::new(BERTH_BIN)
        .args(["fsck"])
        .env("BLOB_STORE", "s3://bucket/blobs?colour=blue"));
    assert_eq!(code, Some(2), "from the environment too: {stderr}");
    assert!(stderr.contains("colour"), "{stderr}");
    // A bucket nothing answers for: said at start, before anything is created.
    let refused = RefusedPort::new();
    let unreachable = format!(
        "s3://bucket/blobs?endpoint=http://127.0.0.1:{}",
        refused.port()
    );
    for command in ["serve", "gc", "fsck"] {
        let (code, stderr) = run(Command::new(BERTH_BIN)
            .args([command, "--blob-store", &unreachable])
            .env("AWS_ACCESS_KEY_ID", "id")
            .env("AWS_SECRET_ACCESS_KEY", "not-logged-anywhere"));
        assert_eq!(code, Some(2), "{command}: {stderr}");
        assert!(stderr.contains("blob storage"), "{command}: {stderr}");
        assert!(!stderr.contains("not-logged-anywhere"), "{stderr}");
    }
    for bad in ["file://relative/blobs", "blobs", "gs://bucket"] {
        let (code, stderr) = run(Command::new(BERTH_BIN).args(["gc", "--blob-store", bad]));
        assert_eq!(code, Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("file:///absolute/path"), "{bad}: {stderr}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing was started or created"
    );
}

#[test]
fn healthcheck_fails_when_nothing_answers() {
    let refused = RefusedPort::new();
    let url = format!("http://127.0.0.1:{}/api/v2.0/health", refused.port());
    let out = Command::new(BERTH_BIN)
        .args(["healthcheck", "--url", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// `berth fsck` over an application's data directory and database.
fn fsck(app: &crate::util::TestApp, repair: bool) -> (Option<i32>, String) {
    let mut command = berth(app.data_dir(), &app.database_url);
    command.arg("fsck");
    if let Some(url) = &app.blob_store_url {
        command.args(["--blob-store", url]);
    }
    if repair {
        command.arg("--repair");
    }
    let out = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// Stores `bytes` under `digest` behind the registry's back.
async fn write_blob(app: &crate::util::TestApp, digest: &str, bytes: &[u8]) {
    let hex = &digest["sha256:".len()..];
    match &app.blob_store_url {
        None => {
            let path = berth::config::blob_dir(app.data_dir())
                .join("sha256")
                .join(&hex[..2])
                .join(hex);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        Some(url) => crate::util::s3_client(url)
            .put_object(
                &format!("sha256/{}/{hex}", &hex[..2]),
                bytes::Bytes::copy_from_slice(bytes),
            )
            .await
            .unwrap(),
    }
}

async fn fsck_finds_and_repairs(backend: Backend, storage: Storage) {
    use crate::registry::{digest_of, push_blob, push_image};
    let app = crate::util::TestApp::with_storage(backend, storage).await;
    push_image(&app, "library/checked", "v1", &[b"a good layer"]).await;
    let (code, text) = fsck(&app, false);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains(": 0 problems"), "{text}");

    // A layer whose bytes changed in storage, and a file the database does not know.
    let layer = digest_of(b"a good layer");
    write_blob(&app, &layer, b"a b4d layer").await;
    let stray = digest_of(b"nobody pushed me");
    write_blob(&app, &stray, b"nobody pushed me").await;
    let (code, text) = fsck(&app, false);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(&format!("{layer}: the blob file hashes to")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{stray}: a blob file the database does not know")),
        "{text}"
    );

    // Repair moves the bad file aside and removes the stray one; a push of
    // the layer then restores it.
    let (code, text) = fsck(&app, true);
    assert_eq!(code, Some(0), "{text}");
    let stray_digest = berth_domain::oci::Digest::parse(&stray).unwrap();
    assert!(!app.state.registry.blobs.exists(&stray_digest).await);
    let res = app
        .get(&format!("/v2/library/checked/blobs/{layer}"))
        .send()
        .await;
    assert_eq!(res.status.as_u16(), 404, "never the wrong bytes");
    let (code, text) = fsck(&app, false);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("pushing the blob again restores it"),
        "{text}"
    );
    push_blob(&app, "library/checked", b"a good layer").await;
    let (code, text) = fsck(&app, false);
    assert_eq!(code, Some(0), "{text}");
    let res = app
        .get(&format!("/v2/library/checked/blobs/{layer}"))
        .send()
        .await;
    assert_eq!(res.body, b"a good layer".as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsck_finds_and_repairs_sqlite() {
    fsck_finds_and_repairs(Backend::Sqlite, Storage::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsck_finds_and_repairs_postgres() {
    fsck_finds_and_repairs(Backend::Postgres, Storage::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsck_finds_and_repairs_postgres_s3() {
    fsck_finds_and_repairs(Backend::Postgres, Storage::S3).await;
}

/// Runs `command` to its end (at most 30 s); its exit code and standard error.
fn run_to_end(mut command: Command) -> (Option<i32>, String) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the command did not end");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A `secrets.json` of an earlier version gets a configuration key; a start
/// with another key refuses to run and says why.
async fn config_secret_key_is_kept_and_checked(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(backend, dir.path()).await;
    let server = serve(dir.path(), &url).await;
    let admin_password =
        server.printed_line("Generated password of the system administrator `admin`: ");
    let saved = reqwest::Client::new()
        .put(server.url("/api/v2.0/configurations"))
        .basic_auth("admin", Some(&admin_password))
        .json(&serde_json::json!({"ldap_search_password": "search-pw"}))
        .send()
        .await
        .unwrap();
    assert_eq!(saved.status().as_u16(), 200);
    assert_eq!(server.stop().0, Some(0));
    let secrets_path = dir.path().join("secrets.json");
    let secrets: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&secrets_path).unwrap()).unwrap();
    let key = secrets["config_secret_key"].as_str().unwrap().to_string();
    assert!(key.len() >= 32);

    let (code, stderr) = run_to_end({
        let mut command = berth(dir.path(), &url);
        command.env(
            "CONFIG_SECRET_KEY",
            "another-key-that-is-long-enough-000000",
        );
        command
    });
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("configurations/ldap_search_password")
            && stderr.contains("another CONFIG_SECRET_KEY"),
        "{stderr}"
    );

    // The key given by the environment opens what was sealed (and is not written down).
    let legacy = serde_json::json!({
        "master_key": secrets["master_key"],
        "jwt_secret": secrets["jwt_secret"],
    });
    std::fs::write(&secrets_path, legacy.to_string()).unwrap();
    let server = ServedBerth::start(|_port| {
        let mut command = berth(dir.path(), &url);
        command.env("CONFIG_SECRET_KEY", &key);
        command
    })
    .await;
    assert_eq!(
        current_user_status(&server, "admin", &admin_password).await,
        200
    );
    assert_eq!(server.stop().0, Some(0));
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&secrets_path).unwrap()).unwrap();
    assert!(kept.get("config_secret_key").is_none());

    // An earlier version's data: a secrets file without the key and a plain
    // row. The start adds a key to the file and seals the row with it.
    let store = berth_store::Store::connect(&url).await.unwrap();
    store
        .configurations()
        .store_text("ldap_search_password", "\"search-pw\"")
        .await
        .unwrap();
    let server = serve(dir.path(), &url).await;
    assert_eq!(server.stop().0, Some(0));
    let upgraded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&secrets_path).unwrap()).unwrap();
    assert!(upgraded["config_secret_key"].as_str().unwrap().len() >= 32);
    assert_eq!(upgraded["master_key"], secrets["master_key"]);
    let row = store
        .configurations()
        .stored_text("ldap_search_password")
        .await
        .unwrap()
        .unwrap();
    assert!(
        row.starts_with("\"enc:v1:") && !row.contains("search-pw"),
        "{row}"
    );
    store.close().await;
}

#[tokio::test]
async fn config_secret_key_is_kept_and_checked_sqlite() {
    config_secret_key_is_kept_and_checked(Backend::Sqlite).await;
}

#[tokio::test]
async fn config_secret_key_is_kept_and_checked_postgres() {
    config_secret_key_is_kept_and_checked(Backend::Postgres).await;
}

#[tokio::test]
async fn metrics_on_their_own_address_for_administrators() {
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(Backend::Sqlite, dir.path()).await;
    let metrics_port = free_port();
    let server = ServedBerth::start(|_port| {
        let mut command = berth(dir.path(), &url);
        command
            .env("HARBOR_ADMIN_PASSWORD", "Metrics-Passw0rd")
            .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
            .arg("--metrics-require-admin");
        command
    })
    .await;
    let client = reqwest::Client::new();
    let on_main = client.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(on_main.status().as_u16(), 404);
    let metrics = format!("http://127.0.0.1:{metrics_port}/metrics");
    let anonymous = client.get(&metrics).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let admin = client
        .get(&metrics)
        .basic_auth("admin", Some("Metrics-Passw0rd"))
        .send()
        .await
        .unwrap();
    assert_eq!(admin.status().as_u16(), 200);
    let text = admin.text().await.unwrap();
    assert!(text.contains("harbor_health 1"), "{text}");
    assert!(
        text.contains(
            "harbor_core_http_request_total{method=\"GET\",code=\"404\",operation=\"unmatched\"} 1"
        ),
        "{text}"
    );
    server.stop();
}

/// Pushes an image with one layer to `repository:tag` of `server` as admin.
async fn push_image_to(server: &ServedBerth, password: &str, repository: &str, tag: &str) {
    try_push_image_to(
        &server.url(""),
        password,
        repository,
        tag,
        b"a killed layer",
    )
    .await
    .unwrap();
}

/// Pushes an image whose one layer is `layer` to `repository:tag` of the
/// server at `base` as admin; what went wrong, if it was not acknowledged.
async fn try_push_image_to(
    base: &str,
    password: &str,
    repository: &str,
    tag: &str,
    layer: &[u8],
) -> Result<(), String> {
    let client = reqwest::Client::new();
    let mut descriptors = Vec::new();
    for bytes in [&b"{\"architecture\":\"amd64\",\"os\":\"linux\"}"[..], layer] {
        let digest = crate::registry::digest_of(bytes);
        let res = client
            .post(format!(
                "{base}/v2/{repository}/blobs/uploads/?digest={digest}"
            ))
            .basic_auth("admin", Some(password))
            .body(bytes.to_vec())
            .send()
            .await
            .map_err(|e| format!("blob upload: {e}"))?;
        if res.status() != 201 {
            return Err(format!("blob upload: {}", res.status()));
        }
        descriptors.push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": digest,
            "size": bytes.len(),
        }));
    }
    descriptors[0]["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": descriptors[0],
        "layers": [descriptors[1]],
    });
    let res = client
        .put(format!("{base}/v2/{repository}/manifests/{tag}"))
        .basic_auth("admin", Some(password))
        .header("content-type", "application/vnd.oci.image.manifest.v1+json")
        .body(manifest.to_string())
        .send()
        .await
        .map_err(|e| format!("manifest: {e}"))?;
    match res.status().as_u16() {
        201 => Ok(()),
        status => Err(format!(
            "manifest: {status} {}",
            res.text().await.unwrap_or_default()
        )),
    }
}

/// `berth gc`, `berth fsck` and `berth backup` run against the data of a
/// server while clients push: the server lives on, every acknowledged push
/// can be pulled, and the database is intact. (The SQLite log's checkpointer
/// once measured the log by opening the database's `-shm` file; closing it
/// dropped SQLite's locks, and a command's connection then rebuilt the
/// wal-index under the server: SIGBUS.) A backup is private: its directory
/// 0700, its database and secrets 0600, as the live database.
async fn operator_commands_beside_a_server_under_pushes(backend: Backend) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(backend, dir.path()).await;
    let server = serve(dir.path(), &url).await;
    let password = server.printed_line("Generated password of the system administrator `admin`: ");
    let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let pushers: Vec<_> = (0..2)
        .map(|pusher| {
            let (base, password, running) = (server.url(""), password.clone(), running.clone());
            tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                let mut n = 0;
                while running.load(std::sync::atomic::Ordering::Acquire) {
                    let (repository, tag) = (format!("library/beside{pusher}"), format!("v{n}"));
                    let layer = format!("layer {pusher} {n}").repeat(64);
                    match try_push_image_to(&base, &password, &repository, &tag, layer.as_bytes())
                        .await
                    {
                        Ok(()) => acknowledged.push((repository, tag, layer)),
                        Err(err) => return Err(format!("push {repository}:{tag}: {err}")),
                    }
                    n += 1;
                }
                Ok(acknowledged)
            })
        })
        .collect();

    let commands = [vec!["gc"], vec!["fsck"], vec!["backup", "--to"]];
    for round in 0..3 {
        for args in &commands {
            if args[0] == "backup" && backend == Backend::Postgres {
                continue; // a copy of a SQLite database only
            }
            let mut command = berth(dir.path(), &url);
            command.args(args);
            if args[0] == "backup" {
                command.arg(dir.path().join(format!("backup{round}")));
            }
            let out = tokio::task::spawn_blocking(move || command.output().unwrap())
                .await
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "berth {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    running.store(false, std::sync::atomic::Ordering::Release);
    let mut acknowledged = Vec::new();
    for pusher in pushers {
        match pusher.await.unwrap() {
            Ok(pushed) => acknowledged.extend(pushed),
            Err(err) => panic!("{err}\nthe server's log:\n{}", server.log()),
        }
    }
    assert!(
        acknowledged.len() >= 10,
        "only {} pushes",
        acknowledged.len()
    );

    let client = reqwest::Client::new();
    for (repository, tag, layer) in &acknowledged {
        let res = client
            .get(server.url(&format!("/v2/{repository}/manifests/{tag}")))
            .basic_auth("admin", Some(&password))
            .header("accept", "application/vnd.oci.image.manifest.v1+json")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{repository}:{tag}");
        let manifest: serde_json::Value = res.json().await.unwrap();
        let digest = manifest["layers"][0]["digest"].as_str().unwrap();
        let res = client
            .get(server.url(&format!("/v2/{repository}/blobs/{digest}")))
            .basic_auth("admin", Some(&password))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{repository}:{tag} layer");
        assert_eq!(res.bytes().await.unwrap(), layer.as_bytes());
    }
    assert_eq!(server.stop().0, Some(0), "the server lived to be stopped");

    if backend == Backend::Sqlite {
        use sqlx::Connection;
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
        let checked: String = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(checked, "ok");
        conn.close().await.unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode(&dir.path().join("berth.db")),
            0o600,
            "the live database"
        );
        let backup = dir.path().join("backup0");
        assert_eq!(mode(&backup), 0o700, "the backup's directory");
        assert_eq!(
            mode(&backup.join("berth.db")),
            0o600,
            "the backup's database"
        );
        assert_eq!(
            mode(&backup.join("secrets.json")),
            0o600,
            "the backup's secrets"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_commands_beside_a_server_under_pushes_sqlite() {
    operator_commands_beside_a_server_under_pushes(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_commands_beside_a_server_under_pushes_postgres() {
    operator_commands_beside_a_server_under_pushes(Backend::Postgres).await;
}

/// A push acknowledged right before a kill -9 keeps its audit entry: its
/// event was written with it, and the next start delivers it, once.
async fn a_killed_server_delivers_the_events_of_acknowledged_pushes(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(backend, dir.path()).await;
    let server = serve(dir.path(), &url).await;
    let password = server.printed_line("Generated password of the system administrator `admin`: ");
    push_image_to(&server, &password, "library/killed", "v1").await;
    drop(server); // SIGKILL, right after the 201
    {
        let store = berth_store::Store::connect(&url).await.unwrap();
        let pending = store
            .events()
            .pending(berth_store::repo::events::AUDIT)
            .await;
        assert_eq!(pending.unwrap(), 1, "the push's event outlived the process");
        store.close().await;
    }
    let again = serve(dir.path(), &url).await;
    let client = reqwest::Client::new();
    let mut entries = Vec::new();
    for _ in 0..100 {
        let res = client
            .get(again.url("/api/v2.0/audit-logs?q=operation=create&page_size=100"))
            .basic_auth("admin", Some(&password))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let body: serde_json::Value = res.json().await.unwrap();
        entries = body
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["resource"] == "library/killed:v1")
            .cloned()
            .collect();
        if !entries.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(entries.len(), 1, "one entry for the push: {entries:?}");
    assert_eq!(entries[0]["resource_type"], "artifact");
    assert_eq!(entries[0]["username"], "admin");
    let store = berth_store::Store::connect(&url).await.unwrap();
    let pending = store
        .events()
        .pending(berth_store::repo::events::AUDIT)
        .await;
    assert_eq!(pending.unwrap(), 0, "delivered, and only once");
    store.close().await;
    assert_eq!(again.stop().0, Some(0));
}

#[tokio::test]
async fn a_killed_server_delivers_the_events_of_acknowledged_pushes_sqlite() {
    a_killed_server_delivers_the_events_of_acknowledged_pushes(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_killed_server_delivers_the_events_of_acknowledged_pushes_postgres() {
    a_killed_server_delivers_the_events_of_acknowledged_pushes(Backend::Postgres).await;
}

#[test]
fn version_names_the_commit_and_bad_log_filters_are_refused() {
    let out = Command::new(BERTH_BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    let commit = said
        .strip_prefix(concat!("berth ", env!("CARGO_PKG_VERSION"), " ("))
        .and_then(|rest| rest.trim_end().strip_suffix(')'))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
        "{said}"
    );
    let out = Command::new(BERTH_BIN)
        .args(["--log", "berth=[", "migrate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a log filter"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Probes and `berth healthcheck` while the database refuses connections,
/// and after it takes them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_503_while_the_database_is_down() {
    use sqlx::Connection as _;
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(Backend::Postgres, dir.path()).await;
    let name = url.rsplit('/').next().unwrap().to_string();
    let server = serve(dir.path(), &url).await;
    let get = |path: &str| {
        let url = server.url(path);
        async move {
            let res = reqwest::get(url).await.unwrap();
            (res.status().as_u16(), res.text().await.unwrap())
        }
    };
    let healthcheck = || {
        Command::new(BERTH_BIN)
            .args(["healthcheck", "--port", &server.port().to_string()])
            .output()
            .unwrap()
    };
    assert_eq!(get("/livez").await, (200, "ok\n".to_string()));
    assert_eq!(get("/readyz").await, (200, "ok\n".to_string()));
    assert!(healthcheck().status.success());

    sqlx::any::install_default_drivers();
    let mut admin =
        sqlx::AnyConnection::connect(&std::env::var("BERTH_TEST_POSTGRES_URL").unwrap())
            .await
            .unwrap();
    let statement = |sql: String| sqlx::query(sqlx::AssertSqlSafe(sql));
    statement(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
        .execute(&mut admin)
        .await
        .unwrap();
    statement(format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    ))
    .execute(&mut admin)
    .await
    .unwrap();
    let (status, body) = get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("database: "), "{body}");
    assert_eq!(get("/livez").await.0, 200, "the process still answers");
    let (status, body) = get("/api/v2.0/health").await;
    assert_eq!(status, 200, "Harbor's shape: always 200");
    assert!(body.contains("\"status\":\"unhealthy\""), "{body}");
    let out = healthcheck();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("503"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    statement(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
        .execute(&mut admin)
        .await
        .unwrap();
    let mut ready = get("/readyz").await;
    for _ in 0..50 {
        if ready.0 == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        ready = get("/readyz").await;
    }
    assert_eq!(ready, (200, "ok\n".to_string()), "ready again");
}

/// `--config FILE` and the `*_FILE` secrets, as a container platform mounts
/// them; `berth config check`.
#[tokio::test]
async fn a_config_file_and_secret_files() {
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(Backend::Sqlite, dir.path()).await;
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let master = file("master-key", "Master-Key-From-A-File-0123456789\n");
    let admin = file("admin-password", "Admin-From-A-File-42\n");
    let config = file(
        "berth.toml",
        "# Berth's settings\nmetrics-require-admin = true\njwt-expires-in = \"1h\"\ncors-origins = [\"https://a.example\", \"https://b.example\"]\n",
    );
    let with_files = |command: &mut Command| {
        command
            .args(["--config", &config])
            .env("MASTER_KEY_FILE", &master)
            .env("HARBOR_ADMIN_PASSWORD_FILE", &admin);
    };
    let server = ServedBerth::start(|_port| {
        let mut command = berth(dir.path(), &url);
        with_files(&mut command);
        command
    })
    .await;
    assert_eq!(
        current_user_status(&server, "admin", "Admin-From-A-File-42").await,
        200
    );
    let client = reqwest::Client::new();
    let created = client
        .post(server.url("/users"))
        .json(&serde_json::json!({
            "email": "filed@example.com",
            "password": "123456",
            "access_token": "Master-Key-From-A-File-0123456789",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        created.status().as_u16(),
        201,
        "the master key from its file"
    );
    let metrics = client.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(
        metrics.status().as_u16(),
        401,
        "metrics-require-admin from the file"
    );
    server.stop();

    let mut check = berth(dir.path(), &url);
    with_files(&mut check);
    let out = check.args(["config", "check"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "metrics-require-admin = \"true\"  # file",
        "cors-origins = \"https://a.example,https://b.example\"  # file",
        "database-url = ",
        "port = \"9000\"  # default",
        &format!("# MASTER_KEY: set, from MASTER_KEY_FILE ({master})"),
        "# JWT_SECRET: not set",
        "the configuration is valid",
    ] {
        assert!(said.contains(line), "{line:?} in {said}");
    }
    assert!(!said.contains("Master-Key-From-A-File"), "{said}");

    let mut both = berth(dir.path(), &url);
    with_files(&mut both);
    let out = both
        .env("MASTER_KEY", "another")
        .args(["config", "check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("both MASTER_KEY and MASTER_KEY_FILE"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = file("bad.toml", "port = 9000\nlisten-adress = \"0.0.0.0\"\n");
    let out = berth(dir.path(), &url)
        .args(["--config", &bad, "config", "check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown key `listen-adress`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--no-migrate` changes no schema: it refuses a database older or newer
/// than the binary, and runs on one that is the same.
#[tokio::test]
async fn no_migrate_leaves_the_schema_alone() {
    use sqlx::Connection as _;
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(Backend::Sqlite, dir.path()).await;
    let run = |args: &[&str]| {
        let out = berth(dir.path(), &url).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, said) = run(&["--no-migrate", "fsck"]);
    assert_eq!(code, Some(1));
    assert!(said.contains("older than this berth"), "{said}");
    let (code, said) = run(&["--no-migrate", "migrate"]);
    assert_eq!(code, Some(1));
    assert!(said.contains("contradict"), "{said}");
    assert_eq!(run(&["migrate"]).0, Some(0));
    let (code, said) = run(&["--no-migrate", "fsck"]);
    assert_eq!(code, Some(0), "{said}");

    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99999, 'from a newer berth', 1, x'00', 0)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    let (code, said) = run(&["--no-migrate", "fsck"]);
    assert_eq!(code, Some(1));
    assert!(
        said.contains("newer than this berth (migration 99999)"),
        "{said}"
    );
    assert_eq!(
        run(&["fsck"]).0,
        Some(1),
        "an older berth never migrates a newer schema"
    );
}
