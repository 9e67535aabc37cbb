//! Loopback ports for tests: the real `berth` binary serving on a port of its
//! own, and a port that refuses connections.
//!
//! A port chosen by binding `127.0.0.1:0` and closing the socket is only free
//! until someone else takes it: another test can bind it before the server
//! does, and a health check would then be answered by that other server. So a
//! child counts as started only once it logged that *it* is listening, and a
//! child that lost the port (it exits with "Address already in use") is
//! started again on another one.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The path of the `berth` binary under test.
pub const BERTH_BIN: &str = env!("CARGO_BIN_EXE_berth");

/// What `berth serve` logs once its socket is bound (`main.rs`).
const LISTENING: &str = "berth is listening";
/// What a bind that lost its port to someone else fails with.
const ADDRESS_IN_USE: &str = "Address already in use";
/// How many ports are tried before giving up.
const ATTEMPTS: usize = 5;
/// How long one start may take: migrations on a busy machine included.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a line the server printed may take to be read.
const PRINTED_TIMEOUT: Duration = Duration::from_secs(10);
/// How many of the last standard-error lines are kept for failure messages.
const KEPT_LINES: usize = 200;

/// A loopback port bound by a socket that does not listen: connections to it
/// are refused, and nobody else can bind it while this value lives.
pub struct RefusedPort {
    _socket: tokio::net::TcpSocket,
    port: u16,
}

impl RefusedPort {
    /// Reserves a fresh loopback port.
    pub fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
        socket
            .bind("127.0.0.1:0".parse().unwrap())
            .expect("bind a loopback port");
        let port = socket.local_addr().unwrap().port();
        Self {
            _socket: socket,
            port,
        }
    }

    /// The reserved port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// The standard error of one child: its last lines, and whether it said it listens.
#[derive(Default)]
struct Stderr {
    lines: Mutex<VecDeque<String>>,
    listening: AtomicBool,
}

impl Stderr {
    /// Reads `pipe` to its end on a thread of its own.
    fn follow(pipe: impl Read + Send + 'static) -> (Arc<Self>, JoinHandle<()>) {
        let stderr = Arc::new(Self::default());
        let shared = stderr.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if line.contains(LISTENING) {
                    shared.listening.store(true, Ordering::Release);
                }
                let mut lines = shared.lines.lock().unwrap();
                if lines.len() == KEPT_LINES {
                    lines.pop_front();
                }
                lines.push_back(line);
            }
        });
        (stderr, reader)
    }

    fn text(&self) -> String {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A loopback port that was free a moment ago. Someone may take it since: only
/// for a server that notices losing it ([`ServedBerth::start_on`]).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Forwards every line of `pipe` to `sender` on a thread of its own.
fn forward_lines(pipe: impl Read + Send + 'static, sender: Sender<String>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    })
}

/// `berth serve` as a child process on `127.0.0.1` and a port of its own;
/// killed when dropped.
pub struct ServedBerth {
    child: Child,
    port: u16,
    stdout: Receiver<String>,
    /// The lines taken from `stdout` so far.
    printed: Mutex<Vec<String>>,
    /// Its log, as it goes.
    stderr: Arc<Stderr>,
}

impl ServedBerth {
    /// Starts `command(port)` (a `berth` command with its data directory,
    /// database and environment; this adds `--ip`, `--port`, `--log` and the
    /// pipes) and waits until it listens and answers `/api/v2.0/health`.
    /// A port lost to another process before the child bound it is replaced
    /// by another; any other early exit fails the test with the child's log.
    pub async fn start(command: impl Fn(u16) -> Command) -> Self {
        Self::start_on(std::iter::repeat_with(free_port).take(ATTEMPTS), command).await
    }

    /// [`ServedBerth::start`] on the first of `ports` the child can bind,
    /// trying them in order.
    pub async fn start_on(
        ports: impl IntoIterator<Item = u16>,
        command: impl Fn(u16) -> Command,
    ) -> Self {
        Self::start_probed(ports, command, false).await
    }

    /// [`ServedBerth::start`] for a server given `--tls-cert`: it counts as
    /// up once it logged that it listens (its socket is bound then).
    pub async fn start_tls(command: impl Fn(u16) -> Command) -> Self {
        Self::start_probed(
            std::iter::repeat_with(free_port).take(ATTEMPTS),
            command,
            true,
        )
        .await
    }

    async fn start_probed(
        ports: impl IntoIterator<Item = u16>,
        command: impl Fn(u16) -> Command,
        tls: bool,
    ) -> Self {
        let (stdout_sender, stdout) = channel();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let mut ports = ports.into_iter().peekable();
        while let Some(port) = ports.next() {
            let mut child = command(port)
                .args(["--ip", "127.0.0.1", "--port", &port.to_string()])
                .args(["--log", "warn,berth=info"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn berth");
            let stdout_reader = forward_lines(child.stdout.take().unwrap(), stdout_sender.clone());
            let (stderr, stderr_reader) = Stderr::follow(child.stderr.take().unwrap());
            let started = Instant::now();
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    let _ = stdout_reader.join();
                    let _ = stderr_reader.join();
                    let log = stderr.text();
                    if log.contains(ADDRESS_IN_USE) && ports.peek().is_some() {
                        break;
                    }
                    panic!("berth exited ({status}) before serving on port {port}:\n{log}");
                }
                if stderr.listening.load(Ordering::Acquire) {
                    let up = tls || {
                        let health = format!("http://127.0.0.1:{port}/api/v2.0/health");
                        client
                            .get(&health)
                            .send()
                            .await
                            .is_ok_and(|res| res.status() == 200)
                    };
                    if up {
                        return Self {
                            child,
                            port,
                            stdout,
                            printed: Mutex::default(),
                            stderr,
                        };
                    }
                }
                if started.elapsed() > START_TIMEOUT {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "berth did not come up on port {port} within {START_TIMEOUT:?}:\n{}",
                        stderr.text()
                    );
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
        panic!("no port to start berth on")
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port`, as registry clients name it.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The rest of the first line the server printed on standard output that
    /// starts with `prefix` (an attempt that lost its port counts too);
    /// waits a bounded time for it to be read.
    pub fn printed_line(&self, prefix: &str) -> String {
        let mut printed = self.printed.lock().unwrap();
        let deadline = Instant::now() + PRINTED_TIMEOUT;
        let mut next = 0;
        loop {
            if let Some(rest) = printed[next..].iter().find_map(|l| l.strip_prefix(prefix)) {
                return rest.to_string();
            }
            next = printed.len();
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => printed.push(line),
                Err(_) => panic!("berth printed no line starting with {prefix:?}: {printed:?}"),
            }
        }
    }

    /// Stops the server with SIGTERM; returns its exit code and everything it
    /// printed on standard output (complete: the pipe is read to its end).
    pub fn stop(mut self) -> (Option<i32>, Vec<String>) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success(), "kill -TERM {pid}");
        let code = self.child.wait().unwrap().code();
        let mut printed = std::mem::take(&mut *self.printed.lock().unwrap());
        printed.extend(self.stdout.iter());
        (code, printed)
    }

    /// The last lines of its log (standard error) so far.
    pub fn log(&self) -> String {
        self.stderr.text()
    }

    /// Kills the process without warning (a crash).
    pub fn crash(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServedBerth {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
