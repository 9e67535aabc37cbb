//! Sending requests to a `TestApp` in process.

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use base64::Engine;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::TestApp;

/// A response, fully read.
#[derive(Debug)]
pub struct TestResponse {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Vec<u8>,
}

impl TestResponse {
    /// The body as JSON; panics with the body text if it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON ({}): {}", self.status, self.text()))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A request being built for a `TestApp`.
pub struct RequestBuilder<'a> {
    app: &'a TestApp,
    builder: axum::http::request::Builder,
    body: Body,
}

impl TestApp {
    /// Starts a request.
    pub fn request(&self, method: Method, uri: &str) -> RequestBuilder<'_> {
        RequestBuilder {
            app: self,
            builder: Request::builder().method(method).uri(uri),
            body: Body::empty(),
        }
    }

    /// Starts a GET.
    pub fn get(&self, uri: &str) -> RequestBuilder<'_> {
        self.request(Method::GET, uri)
    }

    /// Starts a POST.
    pub fn post(&self, uri: &str) -> RequestBuilder<'_> {
        self.request(Method::POST, uri)
    }

    /// Starts a PUT.
    pub fn put(&self, uri: &str) -> RequestBuilder<'_> {
        self.request(Method::PUT, uri)
    }

    /// Starts a DELETE.
    pub fn delete(&self, uri: &str) -> RequestBuilder<'_> {
        self.request(Method::DELETE, uri)
    }
}

impl RequestBuilder<'_> {
    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.builder = self.builder.header(name, value);
        self
    }

    /// Adds HTTP Basic credentials.
    pub fn basic(self, login: &str, password: &str) -> Self {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{login}:{password}"));
        self.header("authorization", &format!("Basic {encoded}"))
    }

    /// Signs in as the built-in admin.
    pub fn admin(self) -> Self {
        self.basic("admin", super::ADMIN_PASSWORD)
    }

    /// Sends the request as if over a connection from `peer` (an address,
    /// `1.2.3.4`), as a server started with connect info sees it.
    pub fn peer(mut self, peer: &str) -> Self {
        let ip: std::net::IpAddr = peer.parse().expect("an IP address");
        self.builder =
            self.builder
                .extension(axum::extract::ConnectInfo(std::net::SocketAddr::new(
                    ip, 40_000,
                )));
        self
    }

    /// Adds a bearer token.
    pub fn bearer(self, token: &str) -> Self {
        self.header("authorization", &format!("Bearer {token}"))
    }

    /// Sends a JSON body.
    pub fn json(mut self, body: &Value) -> Self {
        self.builder = self
            .builder
            .header(header::CONTENT_TYPE, "application/json");
        self.body = Body::from(body.to_string());
        self
    }

    /// Sends a form body.
    pub fn form(mut self, fields: &[(&str, &str)]) -> Self {
        self.builder = self
            .builder
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        self.body = Body::from(serde_urlencoded::to_string(fields).unwrap());
        self
    }

    /// Sends raw bytes with a content type.
    pub fn raw(mut self, content_type: &str, body: impl Into<Body>) -> Self {
        self.builder = self.builder.header(header::CONTENT_TYPE, content_type);
        self.body = body.into();
        self
    }

    /// Sends the request and reads the whole response.
    pub async fn send(self) -> TestResponse {
        let request = self.builder.body(self.body).expect("valid request");
        let response = self
            .app
            .app
            .clone()
            .oneshot(request)
            .await
            .expect("infallible service");
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec();
        TestResponse {
            status,
            headers,
            body,
        }
    }
}
