//! Response headers every surface shares: `X-Content-Type-Options: nosniff` on
//! every answer, and `Cache-Control: no-store` on the answers that carry a
//! token or another secret.

use axum::http::HeaderValue;
use axum::http::Response;
use axum::http::header::{CACHE_CONTROL, X_CONTENT_TYPE_OPTIONS};

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
