//! The server loop: connections from a listener, each served by hyper with a
//! deadline for a request's headers, a pace for its body, an idle bound, at
//! most so many at once, and a graceful end. Plain connections speak
//! HTTP/1.1; TLS ones (`--tls-cert`, see [`crate::tls`]) HTTP/2 or HTTP/1.1 as
//! ALPN settled, after a handshake that must end within the header timeout.
//!
//! What `axum::serve` does not bound, and this does:
//! - a client that sends its headers a byte at a time (slowloris) is cut off
//!   when they are not complete within the header timeout; an idle
//!   keep-alive connection ends the same way;
//! - a request body that sends nothing for the body timeout, or less than the
//!   minimum rate on average, fails (see [`Paced`]): a slow but steady push
//!   of any size goes on, a body sent a byte a second does not;
//! - a connection with no request in flight for the idle timeout is closed
//!   (gracefully: HTTP/2 says `GOAWAY`): a TLS connection that sends nothing
//!   after its handshake, an HTTP/2 connection that opens no stream; HTTP/2
//!   pings find a peer that went away while a stream was open;
//! - past the connection limit, new connections wait in the listen backlog
//!   instead of each taking a task and a file descriptor.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::BoxError;
use axum::extract::Request;
use axum::extract::connect_info::ConnectInfo;
use axum::response::Response;
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulConnection;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tower::{Service, ServiceExt as _};

/// Limits of the server loop.
#[derive(Debug, Clone, Copy)]
pub struct ServeLimits {
    /// How long a client has to send a request's headers (and how long an
    /// idle keep-alive connection is kept).
    pub header_timeout: Duration,
    /// How long a connection with no request in flight stays open.
    pub idle_timeout: Duration,
    /// How long a request body may send nothing; also how much waiting a
    /// body may bank when it is faster than `body_min_rate`.
    pub body_timeout: Duration,
    /// The least a request body must send on average, in bytes a second
    /// (0: only `body_timeout` applies).
    pub body_min_rate: u64,
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
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            body_min_rate: 1024,
            max_connections: 4096,
            shutdown_timeout: Duration::from_secs(30),
        }
    }
}

/// How long an HTTP/2 peer has to answer a ping before its connection is closed.
const PING_TIMEOUT: Duration = Duration::from_secs(20);

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
    let max = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    let permits = Arc::new(Semaphore::new(max as usize));
    let (stop, stopping) = watch::channel(false);
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
    negotiated
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.idle_timeout)
        .keep_alive_timeout(PING_TIMEOUT);
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
        let stopping = stopping.clone();
        let Some(tls) = &tls else {
            let activity = Activity::new();
            let per_request = per_request(service, peer, activity.clone(), limits);
            let connection = builder.serve_connection(TokioIo::new(stream), per_request);
            tokio::spawn(async move {
                drive(connection, &activity, limits.idle_timeout, stopping, peer).await;
                drop(permit);
            });
            continue;
        };
        let (tls, negotiated) = (tls.clone(), negotiated.clone());
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
            let activity = Activity::new();
            let per_request = per_request(service, peer, activity.clone(), limits);
            let connection = negotiated.serve_connection(TokioIo::new(stream), per_request);
            drive(connection, &activity, limits.idle_timeout, stopping, peer).await;
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    if tokio::time::timeout(limits.shutdown_timeout, permits.acquire_many(max))
        .await
        .is_err()
    {
        tracing::warn!(
            after = ?limits.shutdown_timeout,
            "shutting down: closing the connections still open"
        );
    }
}

/// The hyper service of one connection: each request gets the peer's address
/// and a paced body, and counts as in flight until its answer is sent.
fn per_request<S>(
    service: S,
    peer: std::net::SocketAddr,
    activity: Arc<Activity>,
    limits: ServeLimits,
) -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = Response,
    Error = Infallible,
    Future = impl Future<Output = Result<Response, Infallible>> + Send,
> + Clone
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let in_flight = activity.enter();
        let mut request = request.map(|body| {
            axum::body::Body::new(Paced::new(body, limits.body_timeout, limits.body_min_rate))
        });
        request.extensions_mut().insert(ConnectInfo(peer));
        let answered = service.clone().oneshot(request);
        async move {
            let response = answered.await?;
            Ok(response.map(|body| {
                axum::body::Body::new(Answering {
                    body,
                    _in_flight: in_flight,
                })
            }))
        }
    })
}

/// Serves `connection` to its end: gracefully closed when the server stops
/// or when it has had no request in flight for `idle`.
async fn drive<C>(
    connection: C,
    activity: &Activity,
    idle: Duration,
    mut stopping: watch::Receiver<bool>,
    peer: std::net::SocketAddr,
) where
    C: GracefulConnection,
    C::Error: std::fmt::Display,
{
    tokio::pin!(connection);
    // After an idle close began, how long the peer has to let it finish.
    let mut closing_until = None;
    let mut stop_asked = false;
    let ended = loop {
        tokio::select! {
            ended = connection.as_mut() => break Some(ended),
            _ = stopping.wait_for(|stop| *stop), if !stop_asked => {
                stop_asked = true;
                if closing_until.is_none() {
                    connection.as_mut().graceful_shutdown();
                }
            }
            () = activity.idle_for(idle), if closing_until.is_none() && !stop_asked => {
                tracing::debug!(%peer, "closing a connection with no request for {idle:?}");
                connection.as_mut().graceful_shutdown();
                closing_until = Some(Instant::now() + idle);
            }
            () = tokio::time::sleep_until(closing_until.unwrap_or_else(Instant::now)),
                if closing_until.is_some() => break None,
        }
    };
    match ended {
        Some(Err(err)) => tracing::debug!(error = %err, %peer, "connection ended with an error"),
        Some(Ok(())) => {}
        None => tracing::debug!(%peer, "an idle connection did not close in time; dropped"),
    }
}

/// What a connection is doing: how many requests are in flight and when the
/// last one ended.
#[derive(Debug)]
struct Activity {
    began: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds from `began` to the last request's end.
    last: AtomicU64,
}

impl Activity {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            began: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last: AtomicU64::new(0),
        })
    }

    /// A request begins; it is in flight until the guard drops.
    fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    fn last_ended(&self) -> Instant {
        self.began + Duration::from_millis(self.last.load(Ordering::SeqCst))
    }

    /// Resolves once no request has been in flight for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let deadline = self.last_ended() + idle;
            if Instant::now() < deadline {
                tokio::time::sleep_until(deadline).await;
            } else if self.in_flight.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(idle).await;
            } else if self.last_ended() + idle <= Instant::now() {
                // Read again: a request that ended since the first read moved it.
                return;
            }
        }
    }
}

/// A request in flight on its connection.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let at = u64::try_from(self.0.began.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.last.store(at, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request in flight until it is sent (or dropped).
struct Answering {
    body: axum::body::Body,
    _in_flight: InFlight,
}

impl HttpBody for Answering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Why a request body was cut off.
#[derive(Debug, thiserror::Error)]
#[error("the request body sent too little for too long (slower than the server accepts)")]
pub struct BodyTooSlow;

/// A request body held to a pace. It has a budget of waiting time, `idle`
/// at first: the time the server spends waiting for the client's next bytes
/// (not the time it takes to handle them) is taken from it, and each byte
/// received gives back `1 / min_rate` seconds, up to `idle` again. A body that
/// sends nothing for `idle`, or less than `min_rate` bytes a second for long
/// enough to use up its budget, fails with [`BodyTooSlow`]; one that keeps
/// the pace may take any time.
struct Paced<B> {
    inner: B,
    idle: Duration,
    min_rate: u64,
    budget: Duration,
    waiting_since: Option<Instant>,
    timer: Pin<Box<Sleep>>,
}

impl<B> Paced<B> {
    fn new(inner: B, idle: Duration, min_rate: u64) -> Self {
        Self {
            inner,
            idle,
            min_rate,
            budget: idle,
            waiting_since: None,
            timer: Box::pin(tokio::time::sleep(idle)),
        }
    }

    /// The waiting time `bytes` earn.
    fn earned(&self, bytes: usize) -> Duration {
        if self.min_rate == 0 {
            return self.idle;
        }
        Duration::from_secs_f64(bytes as f64 / self.min_rate as f64)
    }
}

impl<B> HttpBody for Paced<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let since = match this.waiting_since {
            Some(since) => since,
            None => {
                let now = Instant::now();
                this.timer.as_mut().reset(now + this.budget);
                this.waiting_since = Some(now);
                now
            }
        };
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.waiting_since = None;
                let earned = this.earned(frame.data_ref().map_or(0, Bytes::len));
                this.budget = (this.budget.saturating_sub(since.elapsed()) + earned).min(this.idle);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(err.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(BodyTooSlow.into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
