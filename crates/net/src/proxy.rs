//! Connections through a forward proxy: `CONNECT` tunnels for `https://`
//! destinations (with the proxy's Basic credentials when its URL has some),
//! plain connections to the proxy for `http://` ones, which the client then
//! asks in absolute form, one request per connection: proxies differ in how
//! they keep such connections (tinyproxy relays one request, then leaves the
//! connection open without saying it will not take another).

use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower_service::Service;

type BoxError = Box<dyn StdError + Send + Sync>;

/// The variables curl reads, in the order the matcher prefers them.
const VARIABLES: [&str; 8] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// Connects directly, or through the proxy the environment names for the destination.
#[derive(Clone)]
pub struct Connector {
    tcp: HttpConnector,
    proxies: Arc<Matcher>,
}

impl Connector {
    /// Over `tcp`, with the proxies of the environment as it is now.
    pub fn from_env(tcp: HttpConnector) -> Self {
        Self {
            tcp,
            proxies: Arc::new(Matcher::from_env()),
        }
    }

    /// Over `tcp`, never through a proxy (link-local credential services).
    pub fn direct(tcp: HttpConnector) -> Self {
        Self {
            tcp,
            proxies: Arc::new(Matcher::builder().build()),
        }
    }
}

/// A TCP connection, to the destination or to a proxy that forwards requests.
pub struct Stream {
    io: TokioIo<TcpStream>,
    /// The peer is an HTTP proxy asked in absolute form.
    forwarding: bool,
}

impl Service<Uri> for Connector {
    type Response = Stream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Stream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, destination: Uri) -> Self::Future {
        let mut tcp = self.tcp.clone();
        let Some(proxy) = self.proxies.intercept(&destination) else {
            return Box::pin(async move {
                let io = tcp.call(destination).await?;
                Ok(Stream {
                    io,
                    forwarding: false,
                })
            });
        };
        let proxy_uri = proxy.uri().clone();
        if proxy_uri.scheme_str() != Some("http") {
            let scheme = proxy_uri.scheme_str().unwrap_or("").to_string();
            return Box::pin(async move {
                Err(format!(
                    "the proxy's scheme {scheme:?} is not supported: name an http:// proxy"
                )
                .into())
            });
        }
        if destination.scheme_str() == Some("https") {
            let mut tunnel = Tunnel::new(proxy_uri, tcp);
            if let Some(auth) = proxy.basic_auth() {
                tunnel = tunnel.with_auth(auth.clone());
            }
            Box::pin(async move {
                let io = tunnel.call(destination).await?;
                Ok(Stream {
                    io,
                    forwarding: false,
                })
            })
        } else {
            Box::pin(async move {
                let io = tcp.call(proxy_uri).await?;
                Ok(Stream {
                    io,
                    forwarding: true,
                })
            })
        }
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        let connected = self.io.connected().proxy(self.forwarding);
        if self.forwarding {
            connected.poison();
        }
        connected
    }
}

impl Read for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// `HTTPS_PROXY=http://proxy:3128, NO_PROXY=…` for the variables `env` sets,
/// a proxy URL's user and password left out; `None` when none is set.
pub(crate) fn describe_env(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let set: Vec<String> = VARIABLES
        .iter()
        .filter_map(|name| {
            let value = env(name).filter(|value| !value.is_empty())?;
            let shown = if name.eq_ignore_ascii_case("NO_PROXY") {
                value
            } else {
                without_credentials(&value)
            };
            Some(format!("{name}={shown}"))
        })
        .collect();
    (!set.is_empty()).then(|| set.join(", "))
}

/// `http://user:secret@host:3128` as `http://host:3128`.
fn without_credentials(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..authority_end].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    if scheme.is_empty() {
        rest.to_string()
    } else {
        format!("{scheme}://{rest}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_leaves_out_proxy_credentials() {
        let env = |name: &str| match name {
            "HTTPS_PROXY" => Some("http://bob:hunter2@proxy.example:3128".to_string()),
            "NO_PROXY" => Some("localhost,.internal".to_string()),
            "http_proxy" => Some(String::new()),
            _ => None,
        };
        assert_eq!(
            describe_env(env).as_deref(),
            Some("HTTPS_PROXY=http://proxy.example:3128, NO_PROXY=localhost,.internal")
        );
        assert_eq!(describe_env(|_| None), None);
        assert_eq!(without_credentials("proxy:8080"), "proxy:8080");
        assert_eq!(without_credentials("http://p:1/a@b"), "http://p:1/a@b");
    }
}
