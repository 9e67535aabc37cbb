//! The real `harborapi` Python client (PyPI) against `berth serve` on a real socket.
//! `scripts/test` installs the client; a missing Python or client fails the test.

use std::path::Path;
use std::process::Command;

use crate::util::{BERTH_BIN, Backend, ServedBerth, database_url};

const PASSWORD: &str = "Compat-Admin-Passw0rd";

async fn run_client(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(backend, dir.path()).await;
    let server = ServedBerth::start(|_port| {
        let mut command = Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(dir.path())
            .env("DATABASE_URL", &url)
            .env("HARBOR_ADMIN_PASSWORD", PASSWORD)
            .env_remove("MASTER_KEY")
            .env_remove("JWT_SECRET");
        command
    })
    .await;
    let base = server.url("");
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
