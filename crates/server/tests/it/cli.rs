//! The `berth` binary itself: first start, restart, flags, subcommands.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use crate::util::{Backend, postgres_database_url};

const BIN: &str = env!("CARGO_BIN_EXE_berth");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn berth(data_dir: &Path, database_url: &str) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("--data-dir")
        .arg(data_dir)
        .env("DATABASE_URL", database_url)
        .env_remove("MASTER_KEY")
        .env_remove("JWT_SECRET")
        .env_remove("HARBOR_ADMIN_PASSWORD");
    command
}

/// A `berth serve` child process on a free loopback port.
struct Server {
    child: Child,
    port: u16,
    stdout: Receiver<String>,
}

impl Server {
    async fn start(data_dir: &Path, database_url: &str) -> Self {
        let port = free_port();
        let mut child = berth(data_dir, database_url)
            .args(["--ip", "127.0.0.1", "--port", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, stdout) = channel();
        let pipe = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let server = Self {
            child,
            port,
            stdout,
        };
        let started = Instant::now();
        while !server.healthy().await {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "server did not come up"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        server
    }

    async fn healthy(&self) -> bool {
        match reqwest::get(self.url("/api/v2.0/health")).await {
            Ok(res) => res.status() == 200,
            Err(_) => false,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// What the server printed on standard output so far.
    fn printed(&self) -> Vec<String> {
        self.stdout.try_iter().collect()
    }

    /// Stops the server with SIGTERM and returns its exit code.
    fn stop(mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.child.wait().unwrap().code()
    }
}

async fn database_url(backend: Backend, dir: &Path) -> String {
    match backend {
        Backend::Sqlite => format!("sqlite://{}?mode=rwc", dir.join("berth.db").display()),
        Backend::Postgres => postgres_database_url().await,
    }
}

async fn current_user_status(server: &Server, login: &str, password: &str) -> u16 {
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
    let server = Server::start(dir.path(), &url).await;
    let printed = server.printed();
    let admin_password = printed
        .iter()
        .find_map(|l| l.strip_prefix("Generated password of the system administrator `admin`: "))
        .unwrap_or_else(|| panic!("no admin password in {printed:?}"))
        .to_string();
    assert!(
        printed
            .iter()
            .any(|l| l.starts_with("Generated master key"))
    );
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
    let status = std::process::Command::new(BIN)
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
    assert_eq!(server.stop(), Some(0), "a graceful stop exits 0");

    let again = Server::start(dir.path(), &url).await;
    assert_eq!(std::fs::read_to_string(&secrets_path).unwrap(), secrets);
    assert_eq!(
        current_user_status(&again, "admin", &admin_password).await,
        200
    );
    assert_eq!(current_user_status(&again, "ops", "S3cret-pass").await, 200);
    assert!(
        again.printed().iter().all(|l| !l.starts_with("Generated")),
        "a restart prints no secrets"
    );
    assert_eq!(again.stop(), Some(0));
}

#[tokio::test]
async fn first_start_then_restart_sqlite() {
    first_start_then_restart(Backend::Sqlite).await;
}

#[tokio::test]
async fn first_start_then_restart_postgres() {
    first_start_then_restart(Backend::Postgres).await;
}

#[test]
fn bad_flags_exit_with_2_and_a_message() {
    for args in [
        &["--port", "notaport"][..],
        &["--no-such-flag"],
        &["--jwt-expires-in", "7w"],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn healthcheck_fails_when_nothing_answers() {
    let url = format!("http://127.0.0.1:{}/api/v2.0/health", free_port());
    let out = Command::new(BIN)
        .args(["healthcheck", "--url", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}
