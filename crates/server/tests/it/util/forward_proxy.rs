//! A forward proxy (Debian's `tinyproxy`) whose log names every request it
//! forwarded: `CONNECT host:port` for tunnels, `GET http://...` for plain ones.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

/// tinyproxy on a loopback port of its own; killed when dropped.
pub struct ForwardProxy {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl ForwardProxy {
    /// Starts tinyproxy in `dir`, in the foreground, logging each request.
    pub fn start(dir: &Path) -> Self {
        let port = free_port();
        let log = dir.join("tinyproxy.log");
        let config = dir.join("tinyproxy.conf");
        // No ConnectPort line: tunnels to every port are allowed.
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListen 127.0.0.1\nTimeout 60\nLogFile \"{}\"\nLogLevel Info\n\
                 MaxClients 20\nAllow 127.0.0.1\nDisableViaHeader Yes\n",
                log.display()
            ),
        )
        .unwrap();
        let child = Command::new("tinyproxy")
            .arg("-d")
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "tinyproxy: run `bash scripts/test`, which installs it (apt-get install tinyproxy)",
            );
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "tinyproxy did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port, log }
    }

    /// `http://127.0.0.1:PORT`, for `HTTPS_PROXY`/`HTTP_PROXY`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The request lines it logged so far (`CONNECT 127.0.0.1:9000 HTTP/1.1`).
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split_once("): ").map(|(_, request)| request))
            .filter(|request| request.ends_with(" HTTP/1.1") || request.ends_with(" HTTP/1.0"))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
