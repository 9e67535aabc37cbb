//! `GET /metrics`: the Prometheus text format (0.0.4), as Harbor's exporter serves it.
//!
//! Live figures (requests, bytes, GC runs) are `prometheus-client` metrics
//! owned by the application state, not a process-wide recorder: every test
//! application counts alone, and recording is an atomic add or an uncontended
//! lock per request. Figures read from the database (Harbor's project gauges,
//! health) come from [`exporter`], computed in a few statements and kept for a
//! few seconds. Requests are labelled by method, status code and operation
//! (the route table's operationId, never a raw path), so the label sets stay
//! bounded whatever paths clients send.
//!
//! Harbor's job service figures are counted where the work happens: this
//! instance's pool (`harbor_jobservice_info`) when its workers start, each
//! attempt at a task as it ends (`harbor_jobservice_task_total` and the
//! process time, a summary without quantiles); the queues, schedules and
//! running tasks (`harbor_task_*`) are read with the other database figures.
//! `/v2/` requests also feed distribution's `registry_http_requests_total`
//! and its request and response size histograms. Go's runtime series
//! (`go_*`) have no equivalent in a Rust process and are not served.

mod exporter;
mod jobs;
mod process;
mod record;

use std::net::SocketAddr;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::error::HarborResult;
use crate::extract::Principal;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub use exporter::{EXPORTER_STALE_LIMIT, EXPORTER_TTL};
pub use record::{Recorder, record};

/// Where `/metrics` is served and who may read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsSettings {
    /// Serve `/metrics` on this address only (not on the main port).
    pub addr: Option<SocketAddr>,
    /// Answer only system administrators (Basic auth), not everybody.
    pub require_admin: bool,
}

/// The labels of an HTTP request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// The method (`GET` ... or `OTHER`).
    pub method: &'static str,
    /// The status code answered.
    pub code: u16,
    /// The operationId, or the route template where a route has none.
    pub operation: std::sync::Arc<str>,
}

/// The labels of distribution's `registry_http_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeMethod {
    code: u16,
    method: &'static str,
}

/// The labels of a registry request's or response's size.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SizeLabels {
    method: &'static str,
    operation: std::sync::Arc<str>,
}

/// How a GC run ended.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GcLabels {
    status: &'static str,
}

/// Upper bounds of the request duration buckets, in seconds.
const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

type DurationFamily = Family<HttpLabels, Histogram, fn() -> Histogram>;

/// Upper bounds of the request and response size buckets, in bytes: 256
/// bytes to 1 GiB, by fours.
fn size_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        256.0, 4.0, 12,
    ))
}

type SizeFamily = Family<SizeLabels, Histogram, fn() -> Histogram>;

/// The live metrics of one application.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<HttpLabels, Counter>,
    durations: DurationFamily,
    registry_durations: DurationFamily,
    registry_requests: Family<CodeMethod, Counter>,
    registry_request_sizes: SizeFamily,
    registry_response_sizes: SizeFamily,
    jobservice_info: Family<jobs::InfoLabels, Gauge>,
    tasks: Family<jobs::TaskLabels, Counter>,
    task_times: jobs::ProcessTimes,
    in_flight: Gauge,
    blob_bytes_in: Counter,
    blob_bytes_out: Counter,
    uploads_in_flight: Gauge,
    gc_runs: Family<GcLabels, Counter>,
    gc_reclaimed_bytes: Counter,
    pub(crate) exporter: exporter::Exporter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Fresh metrics, all zero.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "harbor_core_http_request",
            "The number of HTTP requests, by method, status code and operation",
            requests.clone(),
        );
        let durations: DurationFamily = Family::new_with_constructor(duration_histogram);
        registry.register(
            "harbor_core_http_request_duration_seconds",
            "The time until the response headers, by method, status code and operation",
            durations.clone(),
        );
        let registry_durations: DurationFamily = Family::new_with_constructor(duration_histogram);
        registry.register(
            "registry_http_request_duration_seconds",
            "The time until the response headers of /v2/ requests, by method, status code and operation",
            registry_durations.clone(),
        );
        let registry_requests = Family::<CodeMethod, Counter>::default();
        registry.register(
            "registry_http_requests",
            "The number of /v2/ requests, by status code and method",
            registry_requests.clone(),
        );
        let registry_request_sizes: SizeFamily = Family::new_with_constructor(size_histogram);
        registry.register(
            "registry_http_request_size_bytes",
            "The sizes of /v2/ request bodies, in bytes, by method and operation",
            registry_request_sizes.clone(),
        );
        let registry_response_sizes: SizeFamily = Family::new_with_constructor(size_histogram);
        registry.register(
            "registry_http_response_size_bytes",
            "The sizes of /v2/ response bodies, in bytes, by method and operation",
            registry_response_sizes.clone(),
        );
        let jobservice_info = Family::<jobs::InfoLabels, Gauge>::default();
        registry.register(
            "harbor_jobservice_info",
            "the information of jobservice",
            jobservice_info.clone(),
        );
        let tasks = Family::<jobs::TaskLabels, Counter>::default();
        registry.register(
            "harbor_jobservice_task",
            "The number of processed tasks",
            tasks.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "harbor_core_http_inflight_requests",
            "The HTTP requests being answered now",
            in_flight.clone(),
        );
        let blob_bytes_in = Counter::default();
        registry.register(
            "berth_blob_bytes_in",
            "Blob bytes received in uploads (PATCH, PUT and monolithic POST)",
            blob_bytes_in.clone(),
        );
        let blob_bytes_out = Counter::default();
        registry.register(
            "berth_blob_bytes_out",
            "Blob bytes sent in downloads (redirected downloads send none)",
            blob_bytes_out.clone(),
        );
        let uploads_in_flight = Gauge::default();
        registry.register(
            "berth_blob_upload_requests_in_flight",
            "Blob upload requests transferring bytes on this instance now",
            uploads_in_flight.clone(),
        );
        let gc_runs = Family::<GcLabels, Counter>::default();
        registry.register(
            "berth_gc_runs",
            "Garbage collections this instance ran, by outcome",
            gc_runs.clone(),
        );
        let gc_reclaimed_bytes = Counter::default();
        registry.register(
            "berth_gc_reclaimed_bytes",
            "Bytes of blobs garbage collections on this instance deleted",
            gc_reclaimed_bytes.clone(),
        );
        Self {
            registry,
            requests,
            durations,
            registry_durations,
            registry_requests,
            registry_request_sizes,
            registry_response_sizes,
            jobservice_info,
            tasks,
            task_times: jobs::ProcessTimes::default(),
            in_flight,
            blob_bytes_in,
            blob_bytes_out,
            uploads_in_flight,
            gc_runs,
            gc_reclaimed_bytes,
            exporter: exporter::Exporter::default(),
        }
    }

    /// Notes a finished garbage collection: `reclaimed` bytes when it succeeded.
    pub fn gc_finished(&self, reclaimed: Option<i64>) {
        let status = if reclaimed.is_some() {
            "success"
        } else {
            "error"
        };
        self.gc_runs.get_or_create(&GcLabels { status }).inc();
        if let Some(bytes) = reclaimed {
            self.gc_reclaimed_bytes
                .inc_by(u64::try_from(bytes).unwrap_or(0));
        }
    }

    /// Notes that this instance's job workers started: `pool` (`host:pid`)
    /// with `workers` workers in all (`harbor_jobservice_info`).
    pub fn jobservice_started(&self, pool: &str, workers: usize) {
        let node = pool.rsplit_once(':').map_or(pool, |(host, _)| host);
        self.jobservice_info
            .get_or_create(&jobs::InfoLabels {
                node: node.to_string(),
                pool: pool.to_string(),
                workers: workers.to_string(),
            })
            .set(1);
    }

    /// Notes an attempt at a task of `vendor_type` that ended here as
    /// `outcome` after `took`.
    pub fn task_finished(
        &self,
        vendor_type: &str,
        outcome: &berth_store::repo::jobs::Outcome,
        took: std::time::Duration,
    ) {
        let labels = jobs::TaskLabels {
            r#type: vendor_type.to_string(),
            status: jobs::status_of(outcome),
        };
        self.tasks.get_or_create(&labels).inc();
        self.task_times.observe(labels, took);
    }

    /// Drops the figures read from the database (kept for [`EXPORTER_TTL`]):
    /// the next scrape reads them again.
    pub fn forget_cached(&self) {
        self.exporter.forget();
    }

    /// The whole scrape: live metrics, then the sampled and the cached
    /// figures; the per-project series only when `per_project`.
    pub async fn render(&self, state: &AppState, per_project: bool) -> String {
        let cached = self.exporter.text(state).await;
        let mut out =
            String::with_capacity(cached.aggregate.len() + cached.per_project.len() + 64 * 1024);
        if let Err(err) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            tracing::error!(error = %err, "encoding the metrics failed");
        }
        self.task_times.render(&mut exporter::Text(&mut out));
        sampled(state, &mut out);
        process::sample(&mut exporter::Text(&mut out));
        out.push_str(&cached.aggregate);
        if per_project {
            out.push_str(&cached.per_project);
        }
        out
    }
}

/// Figures read from memory at every scrape: the pool and the caches.
fn sampled(state: &AppState, out: &mut String) {
    let mut text = exporter::Text(out);
    let pool = state.store.pool_status();
    text.family(
        "berth_db_pool_connections",
        "Database connections of this instance, by state; in_use at the maximum means requests wait for one",
        "gauge",
    );
    let in_use = pool.open.saturating_sub(pool.idle);
    text.sample(
        "berth_db_pool_connections",
        &[("state", "idle")],
        i64::from(pool.idle),
    );
    text.sample(
        "berth_db_pool_connections",
        &[("state", "in_use")],
        i64::from(in_use),
    );
    text.family(
        "berth_db_pool_max_connections",
        "The most database connections this instance opens",
        "gauge",
    );
    text.sample("berth_db_pool_max_connections", &[], i64::from(pool.max));
    // Defined where they are counted (berth_store::PoolStatus).
    for (name, help, count) in [
        (
            "berth_db_pool_acquires_total",
            "Database connections this instance asked its pool for (one per query outside a transaction, per transaction, per connection kept for several statements)",
            pool.acquires,
        ),
        (
            "berth_db_pool_waits_total",
            "Connection acquisitions that found every connection open and in use, and waited for one to be given back",
            pool.waits,
        ),
        (
            "berth_db_pool_acquire_timeouts_total",
            "Connection acquisitions that gave up without a connection after the acquire timeout",
            pool.timeouts,
        ),
    ] {
        text.family(name, help, "counter");
        text.sample(name, &[], count);
    }
    for (name, help, time) in [
        (
            "berth_db_pool_wait_seconds_total",
            "Time spent in the acquisitions counted by berth_db_pool_waits_total",
            pool.wait_time,
        ),
        (
            "berth_db_pool_acquire_seconds_total",
            "Time spent in every connection acquisition: waits, opening connections, checking idle ones",
            pool.acquire_time,
        ),
    ] {
        text.family(name, help, "counter");
        text.sample(name, &[], time.as_secs_f64());
    }
    let (hits, misses) = state.rest.article_pages.counts();
    text.family(
        "berth_cache_requests_total",
        "Cache look-ups, by cache and result (hit rate = hit / (hit + miss))",
        "counter",
    );
    for (result, count) in [("hit", hits), ("miss", misses)] {
        text.sample(
            "berth_cache_requests_total",
            &[("cache", "article_pages"), ("result", result)],
            i64::try_from(count).unwrap_or(i64::MAX),
        );
    }
}

/// The content type of the Prometheus text format.
const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

fn scrape_response(body: String) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
        body,
    )
        .into_response()
}

/// `GET /metrics` on the main port: open (Harbor's exporter is), but the
/// series that name projects only for system administrators (Basic auth),
/// since they would list private projects to anyone.
pub async fn get_metrics(State(state): State<AppState>, principal: Principal) -> Response {
    let per_project = principal.is_sysadmin();
    scrape_response(state.metrics.render(&state, per_project).await)
}

/// `GET /metrics` on `--metrics-addr`, an address of its own that only the
/// scraper reaches: everything.
pub async fn get_all_metrics(State(state): State<AppState>) -> Response {
    scrape_response(state.metrics.render(&state, true).await)
}

/// `GET /metrics` for system administrators only (`--metrics-require-admin`).
pub async fn get_metrics_as_admin(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Response> {
    principal.require_sysadmin()?;
    Ok(scrape_response(state.metrics.render(&state, true).await))
}

/// The `/metrics` route: for administrators when `require_admin`; else on
/// its own address everything, on the main port the aggregate figures to
/// anyone and the per-project ones to administrators.
pub fn routes(settings: &MetricsSettings) -> Routes {
    let route = if settings.require_admin {
        get(get_metrics_as_admin)
    } else if settings.addr.is_some() {
        get(get_all_metrics)
    } else {
        get(get_metrics)
    };
    Routes::new(Surface::Berth).named(axum::http::Method::GET, "/metrics", "get_metrics", route)
}

/// The router of a separate metrics address (`--metrics-addr`): `/metrics` only.
pub fn router(state: AppState, settings: &MetricsSettings) -> axum::Router {
    let (router, _) = routes(settings).into_parts();
    router.with_state(state)
}
