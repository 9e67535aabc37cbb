//! Copies of audit entries sent to a syslog server (`audit_log_forward_endpoint`).
//!
//! Harbor dials the endpoint over TCP with Go's `log/syslog` (priority
//! `LOG_INFO`, tag `audit`) and writes one line per entry; Berth sends the same
//! lines, from a task of its own fed by the batch writer through a bounded
//! buffer, so neither a request nor a database write ever waits on the network.
//! An endpoint that is down loses its copies (logged once per outage); the next
//! batch connects again.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use berth_store::repo::audit_logs::NewAuditLog;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::{mpsc, oneshot};

/// `<PRI>` of every line: facility 0 (`kern`), severity 6 (`info`), what Go's
/// `syslog.Dial(.., syslog.LOG_INFO, "audit")` sends for Harbor: rules a
/// syslog server has for Harbor's copies match Berth's.
const PRIORITY: u8 = 6;
/// The syslog tag (program name), Harbor's.
const TAG: &str = "audit";
/// How long a connection may take before the batch's copies are given up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one batch may take to be written.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How many lines wait for the sending task at most: past it a slow endpoint
/// loses copies instead of growing memory.
const MAX_QUEUED_LINES: usize = 100_000;

/// The sending side, shared by the audit queue's clones; its task starts with
/// the first batch and ends when this is dropped.
#[derive(Debug, Default)]
pub struct Forwarder {
    batches: OnceLock<mpsc::UnboundedSender<Batch>>,
    counts: Arc<Counts>,
}

/// Lines in flight and lines dropped, shared with the task.
#[derive(Debug, Default)]
struct Counts {
    /// Lines handed to the task and not yet sent or given up.
    queued: AtomicUsize,
    /// Lines dropped because the buffer was full, since it last drained.
    dropped: AtomicUsize,
}

/// One batch's lines for one endpoint.
#[derive(Debug)]
struct Batch {
    endpoint: String,
    lines: Vec<String>,
    /// Told when the lines are sent or given up (a flush at a stop waits).
    done: Option<oneshot::Sender<()>>,
}

impl Forwarder {
    /// Hands `lines` to the sending task; `None` when they are dropped (the
    /// buffer is full). The receiver resolves once they are sent or given up.
    pub fn send(&self, endpoint: &str, lines: Vec<String>) -> Option<oneshot::Receiver<()>> {
        if lines.is_empty() {
            return None;
        }
        let count = lines.len();
        if !self.reserve(count) {
            if self.counts.dropped.fetch_add(count, Ordering::AcqRel) == 0 {
                tracing::warn!(
                    endpoint,
                    "the audit log forwarding buffer is full; copies are dropped until it drains"
                );
            }
            return None;
        }
        let (done, delivered) = oneshot::channel();
        let batch = Batch {
            endpoint: endpoint.to_string(),
            lines,
            done: Some(done),
        };
        if self.sender().send(batch).is_err() {
            self.counts.queued.fetch_sub(count, Ordering::AcqRel);
            return None;
        }
        Some(delivered)
    }

    /// Counts `count` more lines in the buffer, if they fit.
    fn reserve(&self, count: usize) -> bool {
        self.counts
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                (queued + count <= MAX_QUEUED_LINES).then_some(queued + count)
            })
            .is_ok()
    }

    /// The task's channel, the task started on first use.
    fn sender(&self) -> &mpsc::UnboundedSender<Batch> {
        self.batches.get_or_init(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(run(receiver, self.counts.clone()));
            sender
        })
    }
}

/// The sending task: one batch after another, until the forwarder is dropped.
async fn run(mut batches: mpsc::UnboundedReceiver<Batch>, counts: Arc<Counts>) {
    let mut link = Link::default();
    while let Some(batch) = batches.recv().await {
        let result = link.deliver(&batch.endpoint, &batch.lines).await;
        counts.queued.fetch_sub(batch.lines.len(), Ordering::AcqRel);
        match result {
            Ok(()) => link.delivered(),
            Err(err) => link.failed(&err, batch.lines.len()),
        }
        if let Some(done) = batch.done {
            let _ = done.send(());
        }
        if batches.is_empty() {
            counts.drained();
        }
    }
}

impl Counts {
    /// The buffer is empty: copies dropped while it was full are reported once.
    fn drained(&self) {
        let dropped = self.dropped.swap(0, Ordering::AcqRel);
        if dropped > 0 {
            tracing::info!(dropped, "the audit log forwarding buffer drained");
        }
    }
}

/// The connection to the endpoint, and whether it is in an outage.
#[derive(Debug, Default)]
struct Link {
    endpoint: String,
    connection: Option<Connection>,
    /// Copies lost since the endpoint stopped answering; `None` while it answers.
    outage: Option<usize>,
}

/// An open way to the endpoint.
#[derive(Debug)]
enum Connection {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

impl Link {
    /// Sends `lines` to `endpoint`, connecting first when there is no live
    /// connection to it.
    async fn deliver(&mut self, endpoint: &str, lines: &[String]) -> io::Result<()> {
        if self.endpoint != endpoint {
            self.endpoint = endpoint.to_string();
            self.connection = None;
            self.outage = None;
        }
        if self.connection.as_ref().is_some_and(|c| !c.is_live()) {
            self.connection = None;
        }
        let connection = match &mut self.connection {
            Some(connection) => connection,
            None => self.connection.insert(connect(endpoint).await?),
        };
        let written = tokio::time::timeout(WRITE_TIMEOUT, connection.write(lines))
            .await
            .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "write timed out")));
        if written.is_err() {
            self.connection = None;
        }
        written
    }

    /// Notes a failed batch: the first of an outage is logged.
    fn failed(&mut self, err: &io::Error, lost: usize) {
        match &mut self.outage {
            Some(count) => *count += lost,
            None => {
                tracing::warn!(
                    endpoint = %self.endpoint,
                    error = %err,
                    "forwarding audit logs failed; copies are lost until the endpoint answers \
                     (database rows are still written unless skip_audit_log_database is set)"
                );
                self.outage = Some(lost);
            }
        }
    }

    /// Notes a sent batch: the end of an outage is logged with what it lost.
    fn delivered(&mut self) {
        if let Some(lost) = self.outage.take() {
            tracing::info!(endpoint = %self.endpoint, lost, "forwarding audit logs works again");
        }
    }
}

impl Connection {
    /// Whether a kept TCP connection is still open: a syslog server never
    /// sends, so a readable socket means the server closed it (it restarted),
    /// and a write would vanish.
    fn is_live(&self) -> bool {
        match self {
            Self::Tcp(stream) => {
                let mut byte = [0u8; 1];
                match stream.try_read(&mut byte) {
                    Ok(0) => false,
                    Ok(_) => true,
                    Err(err) => err.kind() == io::ErrorKind::WouldBlock,
                }
            }
            Self::Udp(_) => true,
        }
    }

    /// TCP: the lines, each ended by a newline (non-transparent framing, as
    /// Go's syslog writer); UDP: one datagram per line.
    async fn write(&mut self, lines: &[String]) -> io::Result<()> {
        match self {
            Self::Tcp(stream) => {
                let mut buffer = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
                for line in lines {
                    buffer.push_str(line);
                    buffer.push('\n');
                }
                stream.write_all(buffer.as_bytes()).await?;
                stream.flush().await
            }
            Self::Udp(socket) => {
                for line in lines {
                    socket.send(line.as_bytes()).await?;
                }
                Ok(())
            }
        }
    }
}

/// Where `audit_log_forward_endpoint` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `host:port` or `tcp://host:port`: syslog over TCP, as Harbor.
    Tcp(String),
    /// `udp://host:port`: syslog over UDP (a Berth extension).
    Udp(String),
}

impl Target {
    /// Reads the configured value; an error names what is wrong.
    pub fn parse(endpoint: &str) -> io::Result<Self> {
        let endpoint = endpoint.trim();
        let (udp, address) = match endpoint.split_once("://") {
            None => (false, endpoint),
            Some(("tcp", address)) => (false, address),
            Some(("udp", address)) => (true, address),
            Some(_) => return Err(invalid(endpoint)),
        };
        let valid = address.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        match (valid, udp) {
            (false, _) => Err(invalid(endpoint)),
            (true, false) => Ok(Self::Tcp(address.to_string())),
            (true, true) => Ok(Self::Udp(address.to_string())),
        }
    }
}

fn invalid(endpoint: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{endpoint:?} is not host:port, tcp://host:port or udp://host:port"),
    )
}

/// Opens a connection (TCP) or a connected socket (UDP) to `endpoint`.
async fn connect(endpoint: &str) -> io::Result<Connection> {
    let target = Target::parse(endpoint)?;
    let connecting = async {
        match target {
            Target::Tcp(address) => TcpStream::connect(address).await.map(Connection::Tcp),
            Target::Udp(address) => {
                let peer = tokio::net::lookup_host(&address)
                    .await?
                    .next()
                    .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
                let local = if peer.is_ipv4() {
                    "0.0.0.0:0"
                } else {
                    "[::]:0"
                };
                let socket = UdpSocket::bind(local).await?;
                socket.connect(peer).await?;
                Ok(Connection::Udp(socket))
            }
        }
    };
    tokio::time::timeout(CONNECT_TIMEOUT, connecting)
        .await
        .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")))
}

/// One entry as a syslog line (without its newline), in the shape Harbor's
/// forwarder writes (Go's `log/syslog` header, then Harbor's text log format
/// with the fields of Harbor 2.13's `auditext` manager):
///
/// `<6>2024-01-02T03:04:05.678Z host audit[42]: 2024-01-02T03:04:05.678Z [INFO]
/// [operator="admin" resourceType="project" time="2024-01-02T03:04:05.678Z"]:
/// action:create, resource:library, operation_description:create project: library`
///
/// The entry's time stands where Harbor puts the time of sending, so a
/// server that files by timestamp files the operation's.
pub fn syslog_line(entry: &NewAuditLog) -> String {
    let time = plain(&entry.op_time);
    format!(
        "<{PRIORITY}>{time} {host} {TAG}[{pid}]: {time} [INFO] [operator=\"{user}\" \
         resourceType=\"{kind}\" time=\"{time}\"]: action:{operation}, resource:{resource}, \
         operation_description:{description}",
        host = hostname(),
        pid = std::process::id(),
        user = quoted(&entry.username),
        kind = quoted(&entry.resource_type),
        operation = plain(&entry.operation),
        resource = plain(&entry.resource),
        description = plain(&super::operation_description(
            &entry.operation,
            &entry.resource_type,
            &entry.resource
        )),
    )
}

/// `value` with control characters as spaces: a newline would end the line
/// and start a forged one.
fn plain(value: &str) -> String {
    value
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `value` fit to stand between double quotes.
fn quoted(value: &str) -> String {
    plain(value).replace('\\', "\\\\").replace('"', "\\\"")
}

/// This machine's name, as the syslog header's HOSTNAME (Go's `os.Hostname`).
fn hostname() -> &'static str {
    static HOSTNAME: OnceLock<String> = OnceLock::new();
    HOSTNAME.get_or_init(|| {
        let name = ["/proc/sys/kernel/hostname", "/etc/hostname"]
            .iter()
            .find_map(|path| std::fs::read_to_string(path).ok())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_default();
        let name: String = name
            .trim()
            .chars()
            .filter(|c| c.is_ascii_graphic())
            .collect();
        if name.is_empty() {
            "localhost".to_string()
        } else {
            name
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(resource: &str, username: &str) -> NewAuditLog {
        NewAuditLog {
            project_id: Some(1),
            operation: "create".into(),
            resource_type: "project".into(),
            resource: resource.into(),
            username: username.into(),
            op_time: "2024-01-02T03:04:05.678Z".into(),
        }
    }

    #[test]
    fn lines_have_harbors_shape() {
        let line = syslog_line(&entry("library", "admin"));
        let header = format!(
            "<6>2024-01-02T03:04:05.678Z {} audit[{}]: ",
            hostname(),
            std::process::id()
        );
        assert_eq!(
            line.strip_prefix(&header),
            Some(
                "2024-01-02T03:04:05.678Z [INFO] [operator=\"admin\" resourceType=\"project\" \
                 time=\"2024-01-02T03:04:05.678Z\"]: action:create, resource:library, \
                 operation_description:create project: library"
            ),
            "{line}"
        );
    }

    #[test]
    fn a_line_cannot_be_split_or_unquoted() {
        let line = syslog_line(&entry("a\nb\r\0c", "x\" y\\"));
        assert!(!line.contains(['\n', '\r', '\0']), "{line}");
        assert!(line.contains(r#"operator="x\" y\\""#), "{line}");
        assert!(
            line.ends_with("resource:a b  c, operation_description:create project: a b  c"),
            "{line}"
        );
    }

    /// A server that closed the kept connection (it restarted) gets the next
    /// batch on a new one, not into the closed one.
    #[tokio::test]
    async fn a_closed_connection_is_replaced_before_a_batch() {
        use tokio::io::AsyncBufReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = listener.local_addr().unwrap().to_string();
        let mut link = Link::default();
        let read_line = |stream: TcpStream| async move {
            let mut line = String::new();
            tokio::io::BufReader::new(stream)
                .read_line(&mut line)
                .await
                .unwrap();
            line
        };

        link.deliver(&endpoint, &["first".to_string()])
            .await
            .unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        assert_eq!(read_line(stream).await, "first\n");
        // The accepted stream is dropped: the server closed its end.
        tokio::time::sleep(Duration::from_millis(100)).await;
        link.deliver(&endpoint, &["second".to_string()])
            .await
            .unwrap();
        let (stream, _) = tokio::time::timeout(Duration::from_secs(5), listener.accept())
            .await
            .expect("a new connection")
            .unwrap();
        assert_eq!(read_line(stream).await, "second\n");
    }

    #[test]
    fn endpoints_are_host_port_with_an_optional_scheme() {
        let tcp = |a: &str| Target::Tcp(a.to_string());
        assert_eq!(
            Target::parse("syslog.example:514").unwrap(),
            tcp("syslog.example:514")
        );
        assert_eq!(
            Target::parse(" tcp://10.0.0.1:601 ").unwrap(),
            tcp("10.0.0.1:601")
        );
        assert_eq!(Target::parse("tcp://[::1]:514").unwrap(), tcp("[::1]:514"));
        assert_eq!(
            Target::parse("udp://127.0.0.1:514").unwrap(),
            Target::Udp("127.0.0.1:514".into())
        );
        for bad in [
            "",
            "syslog",
            ":514",
            "host:",
            "host:0",
            "host:99999",
            "http://h:1",
            "h:1/x",
        ] {
            assert_eq!(
                Target::parse(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{bad}"
            );
        }
    }
}
