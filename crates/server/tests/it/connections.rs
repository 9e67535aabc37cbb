//! The server loop of the real binary: a client that never finishes its
//! headers is cut off, connections beyond the limit wait, and an answer given
//! before the request body was read says `Connection: close`.

use std::process::Command;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::util::{BERTH_BIN, ServedBerth};

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
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
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
