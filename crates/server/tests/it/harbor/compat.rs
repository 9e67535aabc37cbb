//! The real `harborapi` Python client (PyPI) against `berth serve` on a real socket.
//! `scripts/test` installs the client; a missing Python or client fails the test.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{Backend, postgres_database_url};

const PASSWORD: &str = "Compat-Admin-Passw0rd";

/// Kills the server when the test ends, however it ends.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn run_client(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let url = match backend {
        Backend::Sqlite => format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("berth.db").display()
        ),
        Backend::Postgres => postgres_database_url().await,
    };
    let port = free_port();
    let _server = Served(
        Command::new(env!("CARGO_BIN_EXE_berth"))
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--ip", "127.0.0.1", "--port", &port.to_string()])
            .env("DATABASE_URL", &url)
            .env("HARBOR_ADMIN_PASSWORD", PASSWORD)
            .env_remove("MASTER_KEY")
            .env_remove("JWT_SECRET")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    loop {
        let up = reqwest::get(format!("{base}/api/v2.0/ping"))
            .await
            .is_ok_and(|r| r.status() == 200);
        if up {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "berth did not come up"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/harborapi_compat.py");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(script)
            .args([&base, PASSWORD])
            .output()
    })
    .await
    .unwrap()
    .expect("python3 is required for the harborapi compatibility test (scripts/test installs it)");
    assert!(
        output.status.success(),
        "harborapi compatibility script failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

mod harborapi_client_drives_the_api {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        run_client(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        run_client(Backend::Postgres).await;
    }
}
