//! Harbor's exporter figures (`harbor_project_*`, `harbor_artifact_pulled`,
//! `harbor_health`, `harbor_up`, `harbor_system_info`) and Berth's own figures
//! read from the database, rendered as text and kept for [`EXPORTER_TTL`]; a
//! scrape then costs a copy, whatever the number of projects, and a scrape of
//! older figures starts their next reading in the background.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_domain::model::Configuration;
use berth_store::StoreError;
use berth_store::repo::statistics::ProjectFigures;

use super::jobs::JobFigures;
use crate::state::AppState;

/// How long the figures read from the database are served before they are read again.
pub const EXPORTER_TTL: Duration = Duration::from_secs(5);

/// Up to this age, figures past [`EXPORTER_TTL`] are still served while they
/// are read again in the background (a scrape never waits for the database
/// then); older ones are read again before answering.
pub const EXPORTER_STALE_LIMIT: Duration = Duration::from_secs(60);

/// One reading, rendered in two parts: figures about the whole registry, and
/// the per-project series, which name projects (private ones too) and are
/// shown only to callers who may see every project.
#[derive(Debug, Clone)]
pub struct Reading {
    /// Health, system information, project totals, upload sessions.
    pub aggregate: Arc<str>,
    /// `harbor_project_repo_total`, members, quota, pulls: one series per project.
    pub per_project: Arc<str>,
}

/// The rendered figures and when they were read.
#[derive(Debug, Default)]
pub struct Exporter {
    cached: Mutex<Option<(Instant, Reading)>>,
    refreshing: AtomicBool,
}

impl Exporter {
    fn kept(&self) -> Option<(Instant, Reading)> {
        self.cached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn keep(&self, text: Reading) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), text));
    }

    /// The figures: kept ones younger than [`EXPORTER_TTL`]; kept ones up to
    /// [`EXPORTER_STALE_LIMIT`] while one background task reads them again;
    /// else read now.
    pub async fn text(&self, state: &AppState) -> Reading {
        if let Some((at, text)) = self.kept() {
            let age = at.elapsed();
            if age < EXPORTER_TTL {
                return text;
            }
            if age < EXPORTER_STALE_LIMIT {
                if !self.refreshing.swap(true, Ordering::AcqRel) {
                    let state = state.clone();
                    tokio::spawn(async move {
                        let exporter = &state.metrics.exporter;
                        // Cleared however the task ends (a panic too), so
                        // that a later scrape can start another.
                        let _refreshing = Cleared(&exporter.refreshing);
                        exporter.keep(read(&state).await);
                    });
                }
                return text;
            }
        }
        let text = read(state).await;
        self.keep(text.clone());
        text
    }

    /// Drops the kept figures: the next scrape reads the database.
    pub fn forget(&self) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Sets its flag to `false` when dropped.
struct Cleared<'a>(&'a AtomicBool);

impl Drop for Cleared<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A text exposition being written.
pub struct Text<'a>(pub &'a mut String);

impl Text<'_> {
    /// The `# HELP` and `# TYPE` lines of a family.
    pub fn family(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample (an integer, or seconds as a float).
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                self.0.push_str(key);
                self.0.push_str("=\"");
                escape_into(self.0, value);
                self.0.push('"');
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape_into(out: &mut String, value: &str) {
    if !value.contains(['\\', '"', '\n']) {
        out.push_str(value);
        return;
    }
    for ch in value.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Reads and renders every database figure (a failed part is left out and
/// logged), and logs how long the reading and the whole took (at debug level).
async fn read(state: &AppState) -> Reading {
    let started = Instant::now();
    let statistics = state.store.statistics();
    let configurations = state.store.configurations();
    let (components, projects, uploads, config, jobs) = tokio::join!(
        crate::service::health::check_components(state),
        statistics.project_figures(),
        statistics.open_uploads(),
        configurations.load(),
        job_figures(state),
    );
    let queried = started.elapsed();
    let text = render(Figures {
        components,
        projects,
        uploads,
        config,
        jobs,
    });
    tracing::debug!(
        millis = started.elapsed().as_secs_f64() * 1000.0,
        query_millis = queried.as_secs_f64() * 1000.0,
        bytes = text.aggregate.len() + text.per_project.len(),
        "metrics: database figures read"
    );
    text
}

/// What one reading found.
struct Figures {
    components: Vec<crate::service::health::Component>,
    projects: Result<Vec<ProjectFigures>, StoreError>,
    uploads: Result<i64, StoreError>,
    config: Result<Configuration, StoreError>,
    jobs: Result<JobFigures, StoreError>,
}

/// The queues (by the ready-tasks index), the running tasks (by the same
/// index) and the count of schedules.
async fn job_figures(state: &AppState) -> Result<JobFigures, StoreError> {
    let jobs = state.store.jobs();
    let (queues, running, scheduled) = tokio::join!(
        crate::service::jobservice::all_queues(state),
        jobs.running(),
        jobs.schedule_count(),
    );
    Ok(JobFigures {
        queues: queues?,
        running: running?,
        scheduled: scheduled?,
    })
}

/// The text of a reading.
fn render(figures: Figures) -> Reading {
    let Figures {
        components,
        projects,
        uploads,
        config,
        jobs,
    } = figures;
    let mut out = String::new();
    let mut per_project = String::new();
    let mut text = Text(&mut out);

    let healthy = components.iter().all(|c| c.is_healthy());
    text.family("harbor_health", "Running status of Harbor", "gauge");
    text.sample("harbor_health", &[], i64::from(healthy));
    text.family("harbor_up", "Running status of harbor component", "gauge");
    for component in &components {
        text.sample(
            "harbor_up",
            &[("component", component.name)],
            i64::from(component.is_healthy()),
        );
    }

    match config {
        Ok(config) => {
            text.family(
                "harbor_system_info",
                "Information of Harbor system",
                "gauge",
            );
            let self_registration = if config.flag("self_registration") {
                "true"
            } else {
                "false"
            };
            text.sample(
                "harbor_system_info",
                &[
                    ("auth_mode", config.string("auth_mode")),
                    ("harbor_version", crate::service::health::HARBOR_VERSION),
                    ("self_registration", self_registration),
                ],
                1,
            );
        }
        Err(err) => tracing::warn!(error = %err, "metrics: reading the configuration failed"),
    }

    match projects {
        Ok(projects) => {
            project_totals(&mut text, &projects);
            project_families(&mut Text(&mut per_project), &projects);
        }
        Err(err) => tracing::warn!(error = %err, "metrics: reading the project figures failed"),
    }

    match uploads {
        Ok(count) => {
            text.family(
                "berth_blob_upload_sessions",
                "Blob upload sessions started and not yet finished or cancelled (all instances)",
                "gauge",
            );
            text.sample("berth_blob_upload_sessions", &[], count);
        }
        Err(err) => tracing::warn!(error = %err, "metrics: counting the upload sessions failed"),
    }
    match jobs {
        Ok(jobs) => super::jobs::render(&mut text, &jobs),
        Err(err) => tracing::warn!(error = %err, "metrics: reading the job queues failed"),
    }
    Reading {
        aggregate: Arc::from(out),
        per_project: Arc::from(per_project),
    }
}

fn public_label(public: i64) -> &'static str {
    if public == 1 { "true" } else { "false" }
}

/// `harbor_project_total`: how many projects, public and private; and
/// Harbor's `harbor_statistics_*` registry-wide totals, from the same rows.
fn project_totals(text: &mut Text<'_>, projects: &[ProjectFigures]) {
    let public = projects.iter().filter(|p| p.public == 1).count();
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let repos = |public: Option<bool>| -> i64 {
        projects
            .iter()
            .filter(|p| public.is_none_or(|want| (p.public == 1) == want))
            .map(|p| p.repo_count)
            .sum()
    };
    for (name, help, value) in [
        (
            "harbor_statistics_total_project_amount",
            "The total amount of projects",
            count(projects.len()),
        ),
        (
            "harbor_statistics_public_project_amount",
            "The amount of public projects",
            count(public),
        ),
        (
            "harbor_statistics_private_project_amount",
            "The amount of private projects",
            count(projects.len() - public),
        ),
        (
            "harbor_statistics_total_repo_amount",
            "The total amount of repositories",
            repos(None),
        ),
        (
            "harbor_statistics_public_repo_amount",
            "The amount of public repositories",
            repos(Some(true)),
        ),
        (
            "harbor_statistics_private_repo_amount",
            "The amount of private repositories",
            repos(Some(false)),
        ),
        (
            "harbor_statistics_total_storage_consumption",
            "The total storage consumption of blobs, in bytes",
            projects.iter().map(|p| p.quota_used).sum(),
        ),
    ] {
        text.family(name, help, "gauge");
        text.sample(name, &[], value);
    }
    text.family("harbor_project_total", "Total projects number", "gauge");
    for (label, count) in [("true", public), ("false", projects.len() - public)] {
        text.sample(
            "harbor_project_total",
            &[("public", label)],
            i64::try_from(count).unwrap_or(i64::MAX),
        );
    }
}

/// Harbor's per-project families, from one row per project.
fn project_families(text: &mut Text<'_>, projects: &[ProjectFigures]) {
    text.family(
        "harbor_project_repo_total",
        "Total project repos number",
        "gauge",
    );
    for p in projects {
        text.sample(
            "harbor_project_repo_total",
            &[
                ("project_name", &p.name),
                ("public", public_label(p.public)),
            ],
            p.repo_count,
        );
    }
    type Figure = fn(&ProjectFigures) -> i64;
    let per_project: [(&str, &str, Figure); 4] = [
        (
            "harbor_project_member_total",
            "Total members number of a project",
            |p| p.member_count,
        ),
        (
            "harbor_project_quota_usage_byte",
            "The used resource of a project",
            |p| p.quota_used,
        ),
        ("harbor_project_quota_byte", "The quota of a project", |p| {
            p.quota_hard
        }),
        (
            "harbor_artifact_pulled",
            "The pull number of an artifact",
            |p| p.pull_count,
        ),
    ];
    for (name, help, figure) in per_project {
        text.family(name, help, "gauge");
        for p in projects {
            text.sample(name, &[("project_name", &p.name)], figure(p));
        }
    }
}
