//! The server loop: connections from a listener, each served by hyper with a
//! deadline for a request's headers, at most so many at once, and a graceful
//! end. Plain connections speak HTTP/1.1; TLS ones (`--tls-cert`, see
//! [`crate::tls`]) HTTP/2 or HTTP/1.1 as ALPN settled, after a handshake
//! that must end within the header timeout.
//!
//! What `axum::serve` does not bound, and this does:
//! - a client that sends its headers a byte at a time (slowloris) is cut off
//!   when they are not complete within the header timeout; an idle
//!   keep-alive connection ends the same way;
//! - past the connection limit, new connections wait in the listen backlog
//!   instead of each taking a task and a file descriptor.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::extract::connect_info::ConnectInfo;
use axum::response::Response;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::{Service, ServiceExt as _};

/// Limits of the server loop.
#[derive(Debug, Clone, Copy)]
pub struct ServeLimits {
    /// How long a client has to send a request's headers (and how long an
    /// idle keep-alive connection is kept).
    pub header_timeout: Duration,
    /// How many connections are served at once.
    pub max_connections: usize,
    /// How long requests in flight may take to finish once shutdown began;
    /// the connections still open then are closed.
    pub shutdown_timeout: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(30),
            max_connections: 4096,
            shutdown_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `service` on `listener` (over TLS when `tls` is given) until
/// `shutdown` resolves, then lets the requests in flight finish. Each request
/// carries the peer's [`ConnectInfo<SocketAddr>`].
pub async fn serve<S>(
    listener: TcpListener,
    service: S,
    limits: ServeLimits,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()>,
) where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut negotiated = auto::Builder::new(TokioExecutor::new());
    negotiated
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    negotiated.http2().timer(TokioTimer::new());
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: wait, as hyper's examples do.
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let per_request = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let mut request = request.map(axum::body::Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            service.clone().oneshot(request)
        });
        let Some(tls) = &tls else {
            let connection =
                graceful.watch(builder.serve_connection(TokioIo::new(stream), per_request));
            tokio::spawn(async move {
                if let Err(err) = connection.await {
                    tracing::debug!(error = %err, %peer, "connection ended with an error");
                }
                drop(permit);
            });
            continue;
        };
        let (tls, negotiated, watcher) = (tls.clone(), negotiated.clone(), graceful.watcher());
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(limits.header_timeout, tls.accept(stream)).await
            {
                Ok(Ok(stream)) => stream,
                Ok(Err(err)) => {
                    tracing::debug!(error = %err, %peer, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let connection =
                watcher.watch(negotiated.serve_connection(TokioIo::new(stream), per_request));
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, %peer, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.shutdown_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            after = ?limits.shutdown_timeout,
            "shutting down: closing the connections still open"
        );
    }
}
