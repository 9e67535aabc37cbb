//! Debian's `docker-registry` (distribution 2.8) as a peer registry on a
//! loopback port of its own, optionally behind htpasswd (Basic) auth and TLS;
//! killed when dropped. A child counts as started once it logged that *it*
//! listens; one that lost its port to another process is started again on
//! another one (see `served.rs` for why).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::certs::{Purpose, TestCa};
use super::free_port;

/// What distribution logs once its socket is bound.
const LISTENING: &str = "listening on";
/// How many ports are tried before giving up.
const ATTEMPTS: usize = 5;
/// How long one start may take.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How the peer is set up.
#[derive(Debug, Clone, Default)]
pub struct PeerOptions {
    /// `(user, password)`: htpasswd auth (a Basic challenge on `/v2/`).
    pub basic_auth: Option<(String, String)>,
    /// Serve HTTPS with a certificate for 127.0.0.1 signed by a fresh CA.
    pub tls: bool,
}

/// A running `docker-registry`.
pub struct DockerRegistry {
    child: Child,
    port: u16,
    tls: bool,
    /// Its access log: one line per request answered.
    access: Arc<Mutex<String>>,
    /// The PEM of the CA that signed its certificate (TLS only).
    pub ca_pem: String,
    _dir: tempfile::TempDir,
}

impl DockerRegistry {
    /// Starts a peer with `options` and waits until it listens.
    pub async fn start(options: PeerOptions) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut auth = String::new();
        if let Some((user, password)) = &options.basic_auth {
            let hash = bcrypt::hash(password, 4).unwrap();
            std::fs::write(dir.path().join("htpasswd"), format!("{user}:{hash}\n")).unwrap();
            auth = format!(
                "auth:\n  htpasswd:\n    realm: berth-test\n    path: {}\n",
                dir.path().join("htpasswd").display()
            );
        }
        let (ca_pem, tls) = if options.tls {
            let ca = TestCa::new(dir.path());
            let (cert, key) = ca.issue("server", Purpose::Server);
            let ca = ca.pem();
            let tls = format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                cert.display(),
                key.display()
            );
            (ca, tls)
        } else {
            (String::new(), String::new())
        };
        for _ in 0..ATTEMPTS {
            let port = free_port();
            let config = dir.path().join("config.yml");
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: info\n\
                     storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
                     http:\n  addr: 127.0.0.1:{port}\n{tls}{auth}",
                    dir.path().join("data").display()
                ),
            )
            .unwrap();
            let mut child = Command::new("docker-registry")
                .arg("serve")
                .arg(&config)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("docker-registry must be installed (apt-get install docker-registry)");
            let access = Arc::new(Mutex::new(String::new()));
            {
                let access = access.clone();
                let stdout = child.stdout.take().unwrap();
                std::thread::spawn(move || {
                    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                        let mut access = access.lock().unwrap();
                        access.push_str(&line);
                        access.push('\n');
                    }
                });
            }
            let log = Arc::new(Mutex::new(String::new()));
            let reader = {
                let log = log.clone();
                let stderr = child.stderr.take().unwrap();
                std::thread::spawn(move || {
                    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                        let mut log = log.lock().unwrap();
                        log.push_str(&line);
                        log.push('\n');
                    }
                })
            };
            let started = Instant::now();
            loop {
                if log.lock().unwrap().contains(LISTENING) {
                    return Self {
                        child,
                        port,
                        tls: options.tls,
                        access,
                        ca_pem,
                        _dir: dir,
                    };
                }
                if let Some(status) = child.try_wait().unwrap() {
                    let _ = reader.join();
                    let text = log.lock().unwrap().clone();
                    if text.contains("address already in use") {
                        break;
                    }
                    panic!("docker-registry exited ({status}) on port {port}:\n{text}");
                }
                if started.elapsed() > START_TIMEOUT {
                    let _ = child.kill();
                    panic!(
                        "docker-registry did not listen on port {port}:\n{}",
                        log.lock().unwrap()
                    );
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        panic!("no port to start docker-registry on")
    }

    /// Its base URL (`http://127.0.0.1:<port>`, or `https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }
}

impl DockerRegistry {
    /// How many requests it answered whose request line (`GET /v2/...`)
    /// starts with `request` (the access log is written as each ends).
    pub fn requests(&self, request: &str) -> usize {
        let needle = format!("\"{request}");
        self.access
            .lock()
            .unwrap()
            .lines()
            .filter(|line| line.contains(&needle))
            .count()
    }
}

impl Drop for DockerRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
