//! The client against a real S3 server: `BERTH_TEST_S3_URL` (`scripts/s3-fixture` starts
//! one) with the `AWS_*` credentials of the environment. Each test works under its own
//! random prefix.

use super::*;
use futures_util::{StreamExt, TryStreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn config() -> S3Config {
    let url = std::env::var("BERTH_TEST_S3_URL").unwrap_or_else(|_| {
        panic!(
            "BERTH_TEST_S3_URL is not set: start an S3 server with \
             `eval \"$(scripts/s3-fixture DIR)\"` (or run scripts/test)"
        )
    });
    let (location, query) = url.split_once('?').unwrap_or((&url, ""));
    let url = format!(
        "{}/{}?{query}",
        location.trim_end_matches('/'),
        uuid::Uuid::new_v4()
    );
    S3Config::parse(&url, |name| std::env::var(name).ok())
        .unwrap_or_else(|e| panic!("BERTH_TEST_S3_URL and AWS_*: {e}"))
}

fn client() -> S3Client {
    S3Client::new(config()).unwrap()
}

/// `len` bytes that differ with `seed` and do not repeat every 256.
fn pattern(len: usize, seed: u32) -> Bytes {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(31).wrapping_add(i >> 8).wrapping_add(seed)) as u8)
        .collect::<Vec<u8>>()
        .into()
}

async fn read_all(body: ObjectBody) -> Vec<u8> {
    let len = body.len;
    let bytes: Vec<u8> = body
        .stream
        .map_ok(|chunk| chunk.to_vec())
        .try_concat()
        .await
        .unwrap();
    assert_eq!(bytes.len() as u64, len);
    bytes
}

#[tokio::test]
async fn put_get_head_delete_round_trip() {
    let s3 = client();
    s3.head_bucket().await.unwrap();
    assert!(s3.describe().starts_with("s3://"), "{}", s3.describe());
    let key = "dir/a b+c=d&ü~(1).txt";
    let body = pattern(100_000, 1);
    s3.put_object(key, body.clone()).await.unwrap();
    assert_eq!(s3.head_object(key).await.unwrap(), Some(100_000));
    let got = s3.get_object(key, None).await.unwrap().expect("the object");
    assert_eq!(read_all(got).await, body);

    s3.put_object("empty", Bytes::new()).await.unwrap();
    assert_eq!(s3.head_object("empty").await.unwrap(), Some(0));
    let got = s3.get_object("empty", None).await.unwrap().unwrap();
    assert!(read_all(got).await.is_empty());

    s3.delete_object(key).await.unwrap();
    assert_eq!(s3.head_object(key).await.unwrap(), None);
    s3.delete_object(key).await.unwrap();
    s3.delete_object("empty").await.unwrap();
}

#[tokio::test]
async fn missing_keys_are_none() {
    let s3 = client();
    assert!(s3.get_object("nothing", None).await.unwrap().is_none());
    assert!(
        s3.get_object("nothing", Some((3, 4)))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s3.get_object("nothing", Some((3, 0)))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(s3.head_object("nothing").await.unwrap(), None);
    s3.delete_object("nothing").await.unwrap();
}

#[tokio::test]
async fn ranged_get() {
    let s3 = client();
    let body = pattern(1000, 2);
    s3.put_object("r", body.clone()).await.unwrap();
    let part = s3.get_object("r", Some((10, 100))).await.unwrap().unwrap();
    assert_eq!(part.len, 100);
    assert_eq!(read_all(part).await, body[10..110]);
    let tail = s3.get_object("r", Some((990, 100))).await.unwrap().unwrap();
    assert_eq!(read_all(tail).await, body[990..]);
    let nothing = s3.get_object("r", Some((5, 0))).await.unwrap().unwrap();
    assert!(read_all(nothing).await.is_empty());
    let error = s3.get_object("r", Some((5000, 10))).await.unwrap_err();
    assert!(
        matches!(error, S3Error::Status { status: 416, .. }),
        "{error}"
    );
}

#[tokio::test]
async fn multipart_upload_is_read_back_whole() {
    let s3 = client();
    let parts = [pattern(5 << 20, 3), pattern(5 << 20, 4), pattern(12_345, 5)];
    let id = s3.create_multipart("big").await.unwrap();
    let mut etags = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let number = i as u32 + 1;
        let etag = s3
            .upload_part("big", &id, number, part.clone())
            .await
            .unwrap();
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
        etags.push((number, etag));
    }
    s3.complete_multipart("big", &id, &etags).await.unwrap();
    let whole: Vec<u8> = parts.concat();
    assert_eq!(
        s3.head_object("big").await.unwrap(),
        Some(whole.len() as u64)
    );
    let got = s3.get_object("big", None).await.unwrap().unwrap();
    assert!(
        read_all(got).await == whole,
        "the object differs from its parts"
    );
    let middle = s3
        .get_object("big", Some(((5 << 20) - 10, 20)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        read_all(middle).await,
        whole[(5 << 20) - 10..(5 << 20) + 10]
    );
}

#[tokio::test]
async fn abort_drops_the_upload() {
    let s3 = client();
    let id = s3.create_multipart("aborted").await.unwrap();
    let etag = s3
        .upload_part("aborted", &id, 1, pattern(1000, 7))
        .await
        .unwrap();
    s3.abort_multipart("aborted", &id).await.unwrap();
    let error = s3
        .complete_multipart("aborted", &id, &[(1, etag)])
        .await
        .unwrap_err();
    assert!(matches!(error, S3Error::Status { .. }), "{error}");
    assert_eq!(s3.head_object("aborted").await.unwrap(), None);
}

#[tokio::test]
async fn copy_object_within_the_bucket() {
    let s3 = client();
    let body = pattern(70_000, 8);
    s3.put_object("from/a b", body.clone()).await.unwrap();
    s3.copy_object("from/a b", "to/c+d").await.unwrap();
    let got = s3.get_object("to/c+d", None).await.unwrap().unwrap();
    assert_eq!(read_all(got).await, body);
    assert_eq!(s3.head_object("from/a b").await.unwrap(), Some(70_000));
    let error = s3.copy_object("nothing", "to/x").await.unwrap_err();
    assert!(error.is_not_found(), "{error}");
}

#[tokio::test]
async fn list_follows_continuation_tokens() {
    let config = config();
    let s3 = S3Client::new(config.clone()).unwrap();
    let keys: Vec<String> = (0..1003).map(|i| format!("k/{i:05}")).collect();
    futures_util::stream::iter(
        keys.iter()
            .map(|key| s3.put_object(key, Bytes::from_static(b"xy"))),
    )
    .buffer_unordered(32)
    .try_collect::<Vec<()>>()
    .await
    .unwrap();
    s3.put_object("other", Bytes::from_static(b"abc"))
        .await
        .unwrap();
    // A sibling prefix sharing the first characters must not show up.
    let mut sibling = config.clone();
    sibling.prefix.push('x');
    S3Client::new(sibling)
        .unwrap()
        .put_object("k/0", Bytes::new())
        .await
        .unwrap();

    let listed = s3.list("k/").await.unwrap();
    let listed_keys: Vec<&str> = listed.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(listed_keys, keys);
    assert!(listed.iter().all(|e| e.size == 2));
    let now = SystemTime::now();
    assert!(listed.iter().all(|e| {
        let age = now
            .duration_since(e.last_modified)
            .unwrap_or(Duration::ZERO);
        age < Duration::from_secs(3600)
    }));

    let (all, pages) = s3.list_pages("", Some(300)).await.unwrap();
    assert_eq!(all.len(), 1004);
    assert_eq!(pages, 4);
    assert_eq!(all.last().unwrap().key, "other");
    assert_eq!(s3.list("k/0010").await.unwrap().len(), 10);
    assert!(s3.list("none/").await.unwrap().is_empty());
}

#[tokio::test]
async fn presigned_get_works_and_refuses_tampering() {
    let s3 = client();
    let body = pattern(3000, 9);
    s3.put_object("shared/a b.bin", body.clone()).await.unwrap();
    let url = s3
        .presign_get("shared/a b.bin", Duration::from_secs(300))
        .await
        .unwrap();
    assert!(url.contains("X-Amz-Expires=300"), "{url}");
    let response = reqwest::get(&url).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().await.unwrap(), body);

    let (head, last) = url.split_at(url.len() - 1);
    let tampered = format!("{head}{}", if last == "0" { "1" } else { "0" });
    assert_eq!(reqwest::get(&tampered).await.unwrap().status(), 403);
    let other_key = url.replace("a%20b.bin", "a%20c.bin");
    assert_ne!(other_key, url);
    assert_eq!(reqwest::get(&other_key).await.unwrap().status(), 403);
}

#[tokio::test]
async fn a_wrong_secret_key_is_refused() {
    let mut config = config();
    config
        .keys
        .as_mut()
        .expect("the test server's keys")
        .secret_key
        .push('x');
    let error = S3Client::new(config)
        .unwrap()
        .head_bucket()
        .await
        .unwrap_err();
    assert!(
        matches!(error, S3Error::Status { status: 403, .. }),
        "{error}"
    );
    assert!(!error.is_not_found());
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut config = config();
    config.endpoint = Some(format!("http://127.0.0.1:{port}"));
    let error = S3Client::new(config)
        .unwrap()
        .head_bucket()
        .await
        .unwrap_err();
    assert!(matches!(error, S3Error::Transport(_)), "{error}");
}

/// A bucket that throttles (`503 SlowDown`) and then answers: the request is
/// sent again after a pause and succeeds; one that refuses (403) is not.
#[tokio::test]
async fn a_throttled_request_is_sent_again() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let answers: [&[u8]; 3] = [
        b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: 66\r\nConnection: close\r\n\r\n<Error><Code>SlowDown</Code><Message>Reduce rate</Message></Error>",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    ];
    let server = tokio::spawn(async move {
        let mut times = Vec::new();
        for answer in answers {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0);
                request.extend_from_slice(&buf[..n]);
            }
            times.push(std::time::Instant::now());
            socket.write_all(answer).await.unwrap();
        }
        times
    });
    let mut config = config();
    config.endpoint = Some(format!("http://127.0.0.1:{port}"));
    let s3 = S3Client::new(config).unwrap();
    s3.head_bucket().await.expect("the second try succeeds");
    let refused = s3.head_bucket().await.unwrap_err();
    assert!(
        matches!(refused, S3Error::Status { status: 403, .. }),
        "{refused}"
    );
    let times = server.await.unwrap();
    assert_eq!(times.len(), 3, "two tries, then one for the refusal");
    assert!(times[1] - times[0] <= THROTTLED_PAUSE + std::time::Duration::from_millis(500));
}

/// A server that announces 100 bytes and sends 10: the stream must end with an error.
#[tokio::test]
async fn a_short_body_ends_the_stream_with_an_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0);
            request.extend_from_slice(&buf[..n]);
        }
        socket
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            .await
            .unwrap();
    });
    let mut config = config();
    config.endpoint = Some(format!("http://127.0.0.1:{port}"));
    let s3 = S3Client::new(config).unwrap();
    let body = s3.get_object("short", None).await.unwrap().unwrap();
    assert_eq!(body.len, 100);
    let mut stream = body.stream;
    let mut received = 0;
    let error = loop {
        match stream.next().await {
            Some(Ok(chunk)) => received += chunk.len(),
            Some(Err(e)) => break e,
            None => panic!("the stream ended without an error after {received} bytes"),
        }
    };
    assert_eq!(received, 10, "{error}");
    server.await.unwrap();
}

/// The server checks the bytes against the signed `Content-MD5`.
#[tokio::test]
async fn the_server_checks_content_md5() {
    let s3 = client();
    let wrong = base64::engine::general_purpose::STANDARD.encode(Md5::digest(b"abc"));
    let error = s3
        .send_ok(Call {
            headers: vec![("content-md5", wrong)],
            ..Call::new(Method::PUT, Some("md5"))
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&error, S3Error::Status { status: 400, code, .. } if code == "BadDigest"),
        "{error}"
    );
    // Only the answer is checked: s3s-fs 0.14.1 keeps the bytes it refused.
}

#[tokio::test]
async fn describe_and_addressing_without_a_server() {
    let config = |endpoint: Option<&str>, prefix: &str| S3Config {
        bucket: "bkt".into(),
        prefix: prefix.into(),
        endpoint: endpoint.map(str::to_string),
        region: "eu-west-3".into(),
        keys: Some(Keys {
            access_key: "AK".into(),
            secret_key: "SECRET".into(),
            session_token: Some("TOKEN".into()),
        }),
        ca_bundle: None,
        sts_endpoint: None,
    };
    let path_style = S3Client::new(config(Some("http://127.0.0.1:9000"), "a/b")).unwrap();
    assert_eq!(
        path_style.describe(),
        "s3://bkt/a/b at http://127.0.0.1:9000"
    );
    let url = path_style
        .presign_get("c d/e", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(
        url.starts_with("http://127.0.0.1:9000/bkt/a/b/c%20d/e?X-Amz-Algorithm="),
        "{url}"
    );
    assert!(url.contains("&X-Amz-Security-Token=TOKEN&"), "{url}");
    assert!(!url.contains("SECRET"), "{url}");

    let aws = S3Client::new(config(None, "")).unwrap();
    assert_eq!(
        aws.describe(),
        "s3://bkt at https://bkt.s3.eu-west-3.amazonaws.com"
    );
    let url = aws
        .presign_get("k", Duration::from_secs(30 * 24 * 3600))
        .await
        .unwrap();
    assert!(
        url.starts_with("https://bkt.s3.eu-west-3.amazonaws.com/k?"),
        "{url}"
    );
    assert!(url.contains("X-Amz-Expires=604800"), "{url}");
    assert!(!format!("{aws:?}").contains("SECRET"));
}

/// A server that answers each request with the next of `answers` (raw HTTP),
/// on a connection of its own; the port and how many requests came.
async fn scripted_server(answers: Vec<&'static [u8]>) -> (u16, tokio::task::JoinHandle<usize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let mut served = 0;
        for answer in answers {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0);
                request.extend_from_slice(&buf[..n]);
            }
            socket.write_all(answer).await.unwrap();
            served += 1;
        }
        served
    });
    (port, server)
}

/// A request the server failed is sent again; one it refused is not.
#[tokio::test]
async fn server_failures_are_retried_and_refusals_are_not() {
    const BUSY: &[u8] = b"HTTP/1.1 503 Slow Down\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    const FOUND: &[u8] = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 7\r\n\r\n";
    const DENIED: &[u8] =
        b"HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    let (port, server) = scripted_server(vec![BUSY, BUSY, FOUND]).await;
    let mut config = config();
    config.endpoint = Some(format!("http://127.0.0.1:{port}"));
    let s3 = S3Client::new(config.clone()).unwrap();
    assert_eq!(s3.head_object("busy").await.unwrap(), Some(7));
    assert_eq!(server.await.unwrap(), 3);

    let (port, server) = scripted_server(vec![BUSY, BUSY, BUSY]).await;
    config.endpoint = Some(format!("http://127.0.0.1:{port}"));
    let s3 = S3Client::new(config.clone()).unwrap();
    let error = s3.head_object("busy").await.unwrap_err();
    assert!(
        matches!(error, S3Error::Status { status: 503, .. }),
        "{error}"
    );
    assert_eq!(server.await.unwrap(), 3, "three tries, then the error");

    let (port, server) = scripted_server(vec![DENIED]).await;
    config.endpoint = Some(format!("http://127.0.0.1:{port}"));
    let s3 = S3Client::new(config).unwrap();
    let error = s3.head_object("denied").await.unwrap_err();
    assert!(
        matches!(error, S3Error::Status { status: 403, .. }),
        "{error}"
    );
    assert_eq!(server.await.unwrap(), 1);
}

#[test]
fn throttled_and_failed_requests_back_off_with_jitter() {
    let status = |status: u16, code: &str| S3Error::Status {
        status,
        code: code.into(),
        message: String::new(),
    };
    let slow_down = status(503, "SlowDown");
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        let first = retry_pause(&slow_down, true, 1).unwrap();
        let second = retry_pause(&slow_down, true, 2).unwrap();
        assert!(first <= THROTTLED_PAUSE && second <= THROTTLED_PAUSE * 2);
        seen.insert(first.as_millis() / 50);
        assert!(retry_pause(&status(429, "TooManyRequests"), false, 1).unwrap() <= THROTTLED_PAUSE);
        assert!(retry_pause(&status(500, "InternalError"), true, 1).unwrap() <= RETRY_PAUSE);
    }
    assert!(seen.len() > 5, "the pauses are spread out: {seen:?}");
    assert!(retry_pause(&slow_down, true, 30).unwrap() <= MAX_PAUSE);
    assert_eq!(retry_pause(&status(403, "AccessDenied"), true, 1), None);
    assert_eq!(retry_pause(&status(404, "NoSuchKey"), true, 1), None);
    let broken = S3Error::Transport("reset".into());
    assert!(retry_pause(&broken, true, 1).is_some());
    assert_eq!(
        retry_pause(&broken, false, 1),
        None,
        "a POST may have been done"
    );
    assert_eq!(
        retry_pause(&S3Error::Credentials("none".into()), true, 1),
        None
    );
}
