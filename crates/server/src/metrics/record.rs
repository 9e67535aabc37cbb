//! The middleware that counts and times every routed request.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use super::{CodeMethod, HttpLabels, SizeLabels};
use crate::operations::{OperationIndex, V2_CATCH_ALL, oci_route};
use crate::state::AppState;

/// What the middleware needs: the application and the route table's index.
#[derive(Clone)]
pub struct Recorder {
    /// The application (its metrics).
    pub state: AppState,
    /// Operation names by method and route template.
    pub index: Arc<OperationIndex>,
    /// The label of requests no route matched.
    unmatched: Arc<str>,
}

impl Recorder {
    /// A recorder naming operations by `index`.
    pub fn new(state: AppState, index: Arc<OperationIndex>) -> Self {
        Self {
            state,
            index,
            unmatched: Arc::from("unmatched"),
        }
    }

    /// The operation label of a request: the route table's name, else the
    /// matched template, else `unmatched` (never the raw path).
    fn operation(&self, method: &Method, matched: Option<&str>, path: &str) -> Arc<str> {
        let template = match matched {
            Some(V2_CATCH_ALL) => oci_route(path),
            Some(template) if !template.contains("__private__") => Some(template),
            _ => None,
        };
        let Some(template) = template else {
            return self.unmatched.clone();
        };
        self.index
            .find(method, template)
            .cloned()
            .unwrap_or_else(|| Arc::from(template))
    }
}

/// The `method` label: the standard methods by name, any other as `OTHER`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

/// Takes one back from a gauge when dropped (a cancelled request included).
struct InFlight(Gauge);

impl InFlight {
    fn enter(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// `body` with every data frame's length added to `counter`.
fn counted(body: Body, counter: Counter) -> Body {
    Body::new(body.map_frame(move |frame| {
        if let Some(data) = frame.data_ref() {
            counter.inc_by(data.len() as u64);
        }
        frame
    }))
}

/// Observes the bytes of a body into a histogram once, when dropped.
struct Size {
    bytes: u64,
    histogram: Histogram,
}

impl Size {
    /// Adds `bytes` (a method, so that a closure calling it takes the whole
    /// value, and observes when that closure is dropped).
    fn add(&mut self, bytes: usize) {
        self.bytes += bytes as u64;
    }
}

impl Drop for Size {
    fn drop(&mut self) {
        #[expect(
            clippy::cast_precision_loss,
            reason = "a histogram's observations are floats"
        )]
        self.histogram.observe(self.bytes as f64);
    }
}

/// `body` with its size observed into `histogram`: at once when the body
/// says its exact length (the body is kept, and with it its length for the
/// `Content-Length` header), else when it is dropped (read to its end, or
/// not: what was transferred).
fn sized(body: Body, histogram: Histogram) -> Body {
    if let Some(exact) = body.size_hint().exact() {
        #[expect(
            clippy::cast_precision_loss,
            reason = "a histogram's observations are floats"
        )]
        histogram.observe(exact as f64);
        return body;
    }
    let mut size = Size {
        bytes: 0,
        histogram,
    };
    Body::new(body.map_frame(move |frame| {
        if let Some(data) = frame.data_ref() {
            size.add(data.len());
        }
        frame
    }))
}

/// Counts and times the request under its method, status code and operation.
pub async fn record(State(recorder): State<Recorder>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let metrics = &recorder.state.metrics;
    let method = request.method().clone();
    let matched = request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let is_registry = matches!(matched, Some("/v2" | V2_CATCH_ALL));
    let operation = recorder.operation(&method, matched, request.uri().path());
    let _in_flight = InFlight::enter(&metrics.in_flight);

    let uploading = matches!(
        &*operation,
        "post_blob_upload" | "patch_blob_upload" | "put_blob_upload"
    );
    let request = if uploading {
        request.map(|body| counted(body, metrics.blob_bytes_in.clone()))
    } else {
        request
    };
    let sizes = SizeLabels {
        method: method_label(&method),
        operation: operation.clone(),
    };
    let request = if is_registry {
        let histogram = metrics.registry_request_sizes.get_or_create(&sizes).clone();
        request.map(|body| sized(body, histogram))
    } else {
        request
    };
    let _uploading = uploading.then(|| InFlight::enter(&metrics.uploads_in_flight));

    let mut response = next.run(request).await;
    let code = response.status();
    if &*operation == "get_blob" && code.is_success() {
        response = response.map(|body| counted(body, metrics.blob_bytes_out.clone()));
    }

    if is_registry {
        let histogram = metrics
            .registry_response_sizes
            .get_or_create(&sizes)
            .clone();
        response = response.map(|body| sized(body, histogram));
    }

    let seconds = started.elapsed().as_secs_f64();
    let labels = HttpLabels {
        method: method_label(&method),
        code: code.as_u16(),
        operation,
    };
    metrics.requests.get_or_create(&labels).inc();
    metrics.durations.get_or_create(&labels).observe(seconds);
    if is_registry {
        metrics
            .registry_requests
            .get_or_create(&CodeMethod {
                code: labels.code,
                method: labels.method,
            })
            .inc();
        metrics
            .registry_durations
            .get_or_create(&labels)
            .observe(seconds);
    }
    response
}
