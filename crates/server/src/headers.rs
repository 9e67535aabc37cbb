//! Response headers every surface shares: `X-Content-Type-Options: nosniff` on
//! every answer, `Cache-Control: no-store` on the answers that carry a token
//! or another secret, and `Connection: close` on an answer given before the
//! request's body was read.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::header::{
    CACHE_CONTROL, CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderValue, Response, Version};
use axum::middleware::Next;
use hyper::body::{Frame, SizeHint};

/// Adds `X-Content-Type-Options: nosniff`, so no browser guesses a type other
/// than the one declared (a JSON error page rendered as HTML, say).
pub async fn nosniff<B>(mut response: Response<B>) -> Response<B> {
    response
        .headers_mut()
        .insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// Adds `Cache-Control: no-store`: the answer carries a token or a secret that
/// no cache (browser or proxy) may keep.
pub async fn no_store<B>(mut response: Response<B>) -> Response<B> {
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Adds `Connection: close` to an HTTP/1 answer given before the request's
/// body was read to its end (a 413 or 401 refused from the headers alone):
/// the server cannot read the next request after an unread body, and a client
/// told so opens a new connection instead of having its next request cut off.
pub async fn close_after_unread_body(request: Request, next: Next) -> axum::response::Response {
    let http1 = matches!(request.version(), Version::HTTP_11 | Version::HTTP_10);
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let has_body =
        declared.is_some_and(|n| n > 0) || request.headers().contains_key(TRANSFER_ENCODING);
    if !http1 || !has_body {
        return next.run(request).await;
    }
    let ended = Arc::new(AtomicBool::new(false));
    let request = request.map(|inner| {
        Body::new(Tracked {
            inner,
            ended: ended.clone(),
        })
    });
    let mut response = next.run(request).await;
    if !ended.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that notes when it has been read to its end.
struct Tracked {
    inner: Body,
    ended: Arc<AtomicBool>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.ended.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
