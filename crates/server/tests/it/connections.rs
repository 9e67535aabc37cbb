//! The server loop of the real binary: a client that never finishes its
//! headers is cut off, connections beyond the limit wait, an answer given
//! before the request body was read says `Connection: close`, and slow
//! clients (a stalled or trickling body, a TLS or HTTP/2 connection that asks
//! nothing) are closed after their bounds while others are served.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::util::{ADMIN_PASSWORD, BERTH_BIN, Purpose, ServedBerth, TestCa};

async fn serve(dir: &std::path::Path, extra: &[&str]) -> ServedBerth {
    let dir = dir.to_path_buf();
    let extra: Vec<String> = extra.iter().map(|s| (*s).to_string()).collect();
    ServedBerth::start(move |_port| {
        let mut command = Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(&dir)
            .args(&extra)
            .env_remove("DATABASE_URL")
            .env_remove("BLOB_STORE");
        command
    })
    .await
}

/// Reads until the peer closes (or `limit` passes); what was read and whether it closed.
async fn read_until_closed(
    stream: &mut (impl AsyncRead + Unpin),
    limit: Duration,
) -> (Vec<u8>, bool) {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (all, true),
            Ok(Ok(n)) => all.extend_from_slice(&buf[..n]),
            Err(_) => return (all, false),
        }
    }
}

/// A request on a fresh connection; the answer's head.
async fn head_of(server: &ServedBerth, request: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", server.port()))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let (bytes, _) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    String::from_utf8_lossy(&bytes).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--header-timeout", "1s"]).await;
    let mut slow = TcpStream::connect(("127.0.0.1", server.port()))
        .await
        .unwrap();
    slow.write_all(b"GET /api/v2.0/health HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // One more header line, well within the deadline: it does not extend it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    slow.write_all(b"X-Slow: 1\r\n").await.unwrap();
    let (_, closed) = read_until_closed(&mut slow, Duration::from_secs(10)).await;
    assert!(closed, "the unfinished request's connection stays open");
    // Everyone else is served meanwhile.
    let head = head_of(
        &server,
        "GET /api/v2.0/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_wait_their_turn() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--max-connections", "2"]).await;
    // ServedBerth's health checks are done; two idle connections take both places.
    let first = TcpStream::connect(("127.0.0.1", server.port()))
        .await
        .unwrap();
    let _second = TcpStream::connect(("127.0.0.1", server.port()))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = TcpStream::connect(("127.0.0.1", server.port()))
        .await
        .unwrap();
    third
        .write_all(b"GET /api/v2.0/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let (waiting, _) = read_until_closed(&mut third, Duration::from_millis(700)).await;
    assert!(
        waiting.is_empty(),
        "served past the limit: {}",
        String::from_utf8_lossy(&waiting)
    );
    drop(first);
    let (answer, closed) = read_until_closed(&mut third, Duration::from_secs(10)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200") && closed, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_before_the_body_was_read_closes_the_connection_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]).await;
    // 5 MiB announced on a Harbor operation (at most 1 MiB): 413 at once.
    let mut stream = TcpStream::connect(("127.0.0.1", server.port()))
        .await
        .unwrap();
    let request = "POST /api/v2.0/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5242880\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(&[b' '; 65536]).await.unwrap();
    let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(10)).await;
    let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 413"), "{answer}");
    assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
    assert!(closed);

    // A body read to its end keeps the connection for the next request.
    let mut stream = TcpStream::connect(("127.0.0.1", server.port()))
        .await
        .unwrap();
    let body = r#"{"project_name":"kept"}"#;
    let first = format!(
        "POST /api/v2.0/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(first.as_bytes()).await.unwrap();
    stream
        .write_all(b"GET /api/v2.0/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let (answers, _) = read_until_closed(&mut stream, Duration::from_secs(10)).await;
    let answers = String::from_utf8_lossy(&answers).to_ascii_lowercase();
    assert!(answers.starts_with("http/1.1 401"), "anonymous: {answers}");
    assert!(
        !answers
            .split("\r\n\r\n")
            .next()
            .unwrap()
            .contains("connection: close"),
        "{answers}"
    );
    assert_eq!(
        answers.matches("http/1.1 ").count(),
        2,
        "both answered on one connection: {answers}"
    );
}

/// A TLS connection to `server` offering `alpn` (none when empty).
async fn tls_connect(server: &ServedBerth, alpn: &[u8]) -> TlsStream<TcpStream> {
    let mut config = berth_net::any_certificate_config().unwrap();
    if !alpn.is_empty() {
        config.alpn_protocols = vec![alpn.to_vec()];
    }
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(("127.0.0.1", server.port()))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    connector.connect(name, tcp).await.unwrap()
}

/// The head of a project creation by the administrator announcing `length` bytes of body.
fn create_project_head(length: usize) -> String {
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("admin:{ADMIN_PASSWORD}"));
    format!(
        "POST /api/v2.0/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {basic}\r\n\
         Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_closed_after_their_bounds_and_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let (cert, key) = ca.issue("server", Purpose::Server);
    let data = dir.path().join("data");
    let server = ServedBerth::start_tls(|_port| {
        let mut command = Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(&data)
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .args([
                "--max-connections",
                "4",
                "--body-timeout",
                "1s",
                "--idle-timeout",
                "1s",
            ])
            .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env_remove("DATABASE_URL")
            .env_remove("BLOB_STORE");
        command
    })
    .await;
    let began = Instant::now();

    // Four slow clients take every place. A body that stalls after a byte:
    let mut stalled = tls_connect(&server, b"http/1.1").await;
    stalled
        .write_all(create_project_head(1000).as_bytes())
        .await
        .unwrap();
    stalled.write_all(b"{").await.unwrap();
    // a body sent a byte every 100 ms (10 bytes a second, under the 1024 asked):
    let mut trickling = tls_connect(&server, b"http/1.1").await;
    trickling
        .write_all(create_project_head(1000).as_bytes())
        .await
        .unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..200 {
            if trickling.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        read_until_closed(&mut trickling, Duration::from_secs(10)).await
    });
    // a TLS connection that sends nothing after its handshake:
    let mut silent = tls_connect(&server, b"").await;
    // an HTTP/2 connection with its preface and settings, and no stream:
    let mut streamless = tls_connect(&server, b"h2").await;
    assert_eq!(streamless.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    streamless
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();

    // A new client is served meanwhile (it waits for a place, not for ever):
    // its handshake and answer within 10 s.
    let served = tokio::time::timeout(Duration::from_secs(10), async {
        let mut next = tls_connect(&server, b"http/1.1").await;
        next.write_all(b"GET /api/v2.0/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        read_until_closed(&mut next, Duration::from_secs(10))
            .await
            .0
    })
    .await
    .expect("a new client is not served while slow ones hold every place");
    let answer = String::from_utf8_lossy(&served);
    assert!(answer.starts_with("HTTP/1.1 200"), "not served: {answer}");

    // The slow ones are closed, after their bounds.
    let (answer, closed) = read_until_closed(&mut stalled, Duration::from_secs(10)).await;
    assert!(closed, "the stalled body's connection stays open");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
        "{answer}"
    );
    let (answer, closed) = trickle.await.unwrap();
    assert!(closed, "the trickling body's connection stays open");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
        "{answer}"
    );
    let (_, closed) = read_until_closed(&mut silent, Duration::from_secs(10)).await;
    assert!(closed, "the silent TLS connection stays open");
    let (frames, closed) = read_until_closed(&mut streamless, Duration::from_secs(10)).await;
    assert!(closed, "the HTTP/2 connection without a stream stays open");
    // It said GOAWAY (frame type 7) before the close.
    let mut types = Vec::new();
    let mut rest = &frames[..];
    while rest.len() >= 9 {
        let length = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        types.push(rest[3]);
        rest = &rest[(9 + length).min(rest.len())..];
    }
    assert!(types.contains(&7), "frame types {types:?}");
    assert!(
        began.elapsed() >= Duration::from_secs(1),
        "closed before the bounds"
    );

    // A slow but steady body (8 KiB/s for 3 s, three times the body timeout) goes through.
    let body = format!("{{\"project_name\":\"steady\"}}{}", " ".repeat(24 * 1024));
    let mut steady = tls_connect(&server, b"http/1.1").await;
    steady
        .write_all(create_project_head(body.len()).as_bytes())
        .await
        .unwrap();
    let started = Instant::now();
    for chunk in body.as_bytes().chunks(2048) {
        steady.write_all(chunk).await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(started.elapsed() >= Duration::from_secs(3));
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), steady.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
}
