//! Reading S3's answers: statuses and error documents, XML bodies, object streams and
//! listing pages.

use std::io;
use std::pin::Pin;
use std::time::SystemTime;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::{BodyExt, Limited};
use hyper::Response;
use hyper::body::Incoming;
use hyper::header;

use super::{MAX_XML, ObjectEntry, S3Error, xml};

/// The `Content-Length` of a response.
pub(super) fn content_length(response: &Response<Incoming>) -> Result<u64, S3Error> {
    response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
        .ok_or_else(|| S3Error::BadResponse("no valid Content-Length".into()))
}

/// Reads a small body to its end, so that the connection goes back to the pool.
pub(super) async fn drain(response: Response<Incoming>) -> Result<(), S3Error> {
    read_body(response).await.map(drop)
}

pub(super) async fn read_body(response: Response<Incoming>) -> Result<Bytes, S3Error> {
    Limited::new(response.into_body(), MAX_XML)
        .collect()
        .await
        .map(|body| body.to_bytes())
        .map_err(|e| S3Error::Transport(format!("reading the answer: {}", chain(&*e))))
}

/// Reads and parses an XML answer; an `<Error>` document (which S3 may send with status
/// 200) becomes [`S3Error::Status`].
pub(super) async fn read_xml(response: Response<Incoming>) -> Result<xml::Flat, S3Error> {
    let status = response.status().as_u16();
    let body = read_body(response).await?;
    let document = xml::parse(&body).map_err(S3Error::BadResponse)?;
    if document.root == "Error" {
        return Err(S3Error::Status {
            status,
            code: document.text("Code").unwrap_or_default().to_string(),
            message: document.text("Message").unwrap_or_default().to_string(),
        });
    }
    Ok(document)
}

/// The [`S3Error::Status`] of an answer other than 2xx.
pub(super) async fn status_error(response: Response<Incoming>) -> S3Error {
    let status = response.status();
    let reason = || {
        status
            .canonical_reason()
            .unwrap_or("Unknown")
            .replace(' ', "")
    };
    let body = read_body(response).await.unwrap_or_default();
    let (code, message) = match xml::parse(&body) {
        Ok(document) if document.root == "Error" => (
            document.text("Code").map_or_else(reason, str::to_string),
            document.text("Message").unwrap_or_default().to_string(),
        ),
        _ if body.is_empty() => (reason(), "(no error document)".to_string()),
        _ => (
            reason(),
            String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
        ),
    };
    S3Error::Status {
        status: status.as_u16(),
        code,
        message,
    }
}

/// The body as a stream of chunks that fails unless exactly `len` bytes arrive.
pub(super) fn body_stream(
    body: Incoming,
    len: u64,
) -> Pin<Box<dyn Stream<Item = Result<Bytes, io::Error>> + Send>> {
    let chunks = body.into_data_stream();
    Box::pin(futures_util::stream::unfold(
        Some((chunks, 0u64)),
        move |state| async move {
            let (mut chunks, received) = state?;
            match chunks.next().await {
                Some(Ok(chunk)) => {
                    let received = received + chunk.len() as u64;
                    if received > len {
                        let error = format!("the S3 body runs past its {len} bytes");
                        Some((Err(io::Error::new(io::ErrorKind::InvalidData, error)), None))
                    } else {
                        Some((Ok(chunk), Some((chunks, received))))
                    }
                }
                Some(Err(e)) => Some((Err(io::Error::other(chain(&e))), None)),
                None if received < len => {
                    let error = format!("the S3 body ended after {received} of {len} bytes");
                    Some((
                        Err(io::Error::new(io::ErrorKind::UnexpectedEof, error)),
                        None,
                    ))
                }
                None => None,
            }
        },
    ))
}

pub(super) use berth_net::error_chain as chain;

/// Takes the objects of a listing page, keys made relative to the client's prefix.
pub(super) fn parse_entries(
    page: &xml::Flat,
    full_prefix: &str,
    strip: usize,
    entries: &mut Vec<ObjectEntry>,
) -> Result<(), S3Error> {
    let bad = |what: String| S3Error::BadResponse(format!("listing: {what}"));
    let (mut key, mut size, mut modified) = (None, None, None);
    for (path, text) in &page.items {
        match (path.as_str(), text.as_deref()) {
            ("Contents/Key", Some(text)) => key = Some(text.to_string()),
            ("Contents/Size", Some(text)) => {
                size = Some(
                    text.parse::<u64>()
                        .map_err(|_| bad(format!("size {text:?}")))?,
                );
            }
            ("Contents/LastModified", Some(text)) => {
                let when = time::OffsetDateTime::parse(
                    text,
                    &time::format_description::well_known::Rfc3339,
                )
                .map_err(|_| bad(format!("LastModified {text:?}")))?;
                modified = Some(SystemTime::from(when));
            }
            ("Contents", None) => {
                let key = key
                    .take()
                    .ok_or_else(|| bad("an entry without Key".into()))?;
                if !key.starts_with(full_prefix) || key.len() < strip {
                    return Err(bad(format!("{key:?} is not under {full_prefix:?}")));
                }
                entries.push(ObjectEntry {
                    key: key[strip..].to_string(),
                    size: size
                        .take()
                        .ok_or_else(|| bad(format!("{key:?} has no Size")))?,
                    last_modified: modified
                        .take()
                        .ok_or_else(|| bad(format!("{key:?} has no LastModified")))?,
                });
            }
            _ => {}
        }
    }
    Ok(())
}
