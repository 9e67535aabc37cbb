//! System administration: the statistics; garbage collection now, on a
//! schedule, and its last runs; purging the audit log now or on a schedule,
//! and its last purges; the job queues, paused and resumed. Through the same
//! functions as Harbor's /statistics, /system/gc, /system/purgeaudit and
//! /jobservice.

use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::Value;

use super::html::{self, esc};
use super::{PortalError, PortalForm, PortalUser, check_form_csrf, see_other};
use crate::error::{ApiError, ErrorKind};
use crate::service::audit_purge::{self, Parameters};
use crate::service::gc::{self, Plan, job_status};
use crate::service::jobservice::{self, QueueAction};
use crate::service::statistics;
use crate::state::AppState;

/// Runs shown.
const RUNS: i64 = 10;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/harbor/system", get(show_system))
        .route("/harbor/system/gc", post(run_gc))
        .route("/harbor/system/gc/schedule", post(schedule_gc))
        .route("/harbor/system/purge", post(purge_now))
        .route("/harbor/system/purge/schedule", post(schedule_purge))
        .route(
            "/harbor/system/queues/{job_type}/{action}",
            post(act_on_queue),
        )
}

/// What was just done.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ShowQuery {
    #[serde(default)]
    started: Option<i64>,
    #[serde(default)]
    done: Option<String>,
}

/// `GET /harbor/system`.
async fn show_system(
    State(state): State<AppState>,
    portal: PortalUser,
    Query(query): Query<ShowQuery>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    let principal = portal.principal();
    let failed = |err| PortalError::api(err, Some(session));
    let stats = statistics::counts(&state, &principal)
        .await
        .map_err(failed)?;
    let runs = gc::history(&state, &principal, RUNS)
        .await
        .map_err(failed)?;
    let mut rows = String::new();
    for run in &runs {
        let stats: Value = serde_json::from_str(&run.stats).unwrap_or(Value::Null);
        let count = |name: &str| stats.get(name).and_then(Value::as_i64).unwrap_or(0);
        let result = match stats.get("error").and_then(Value::as_str) {
            Some(error) => error.to_string(),
            None if run.status == "done" => format!(
                "{} blobs deleted ({} freed), {} project links dropped, {} uploads expired, {} stray files removed",
                count("blobs"),
                html::human_size(count("bytes")),
                count("links"),
                count("uploads"),
                count("stray_files")
            ),
            None => String::new(),
        };
        rows.push_str(&format!(
            r#"<tr data-gc="{id}"><td>{id}</td><td class="status">{status}</td><td>{started}</td><td>{finished}</td><td class="result">{result}</td></tr>"#,
            id = run.id,
            status = job_status(run),
            started = esc(&html::when(&run.started_at)),
            finished = esc(&html::when(run.finished_at.as_deref().unwrap_or(""))),
            result = esc(&result),
        ));
    }
    if rows.is_empty() {
        rows = r#"<tr><td colspan="5" class="muted">No runs yet.</td></tr>"#.into();
    }
    let notice = match (query.started, &query.done) {
        (Some(id), _) => html::notice(
            "ok",
            &format!("Garbage collection run {id} started; reload to follow it."),
        ),
        (None, Some(done)) => html::notice("ok", done),
        (None, None) => String::new(),
    };
    let jobs = jobs_section(&state, &portal).await.map_err(failed)?;
    let main = format!(
        r#"<h1>System</h1>{notice}
<h2>Statistics</h2>
<dl class="stats" id="statistics">
<dt>Projects</dt><dd id="total_projects">{total_projects} ({public_projects} public, {private_projects} private)</dd>
<dt>Repositories</dt><dd id="total_repos">{total_repos} ({public_repos} public, {private_repos} private)</dd>
<dt>Storage</dt><dd id="storage">{storage}</dd>
</dl>
<h2>Garbage collection</h2>
<form class="toolbar" method="post" action="/harbor/system/gc">{csrf}<button type="submit" id="run_gc">Run garbage collection now</button></form>
<table id="gc_runs"><thead><tr><th>Run</th><th>Status</th><th>Started</th><th>Finished</th><th>Result</th></tr></thead>
<tbody>{rows}</tbody></table>
{jobs}"#,
        total_projects = stats.total_project_count,
        public_projects = stats.public_project_count,
        private_projects = stats.private_project_count,
        total_repos = stats.total_repo_count,
        public_repos = stats.public_repo_count,
        private_repos = stats.private_repo_count,
        storage = esc(&html::human_size(stats.total_storage_consumption)),
        csrf = html::csrf_field(session),
    );
    Ok(html::page("System", Some(session), &main).into_response())
}

/// The run form's field.
#[derive(Debug, Deserialize)]
pub(super) struct RunForm {
    #[serde(default)]
    csrf_token: String,
}

/// `POST /harbor/system/gc`: createGCSchedule's manual run.
async fn run_gc(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<RunForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let id = gc::start(&state, &portal.principal(), gc::GcParameters::default())
        .await
        .map_err(|err| {
            let err = match err.kind {
                ErrorKind::Conflict => ApiError::new(
                    ErrorKind::Conflict,
                    "A garbage collection is already running; wait for it to finish.",
                ),
                _ => err,
            };
            PortalError::api(err, Some(session))
        })?;
    Ok(see_other(&format!("/harbor/system?started={id}")))
}

/// The schedule types a form offers.
const SCHEDULE_TYPES: [&str; 5] = ["None", "Hourly", "Daily", "Weekly", "Custom"];

/// A schedule form's fields: its type and cron.
fn schedule_fields(id: &str, current: Option<&berth_store::repo::jobs::Schedule>) -> String {
    let kind = current.map_or("None", |s| s.schedule_type.as_str());
    let options: String = SCHEDULE_TYPES
        .iter()
        .map(|t| {
            let selected = if *t == kind { " selected" } else { "" };
            format!(r#"<option value="{t}"{selected}>{t}</option>"#)
        })
        .collect();
    let cron = current.map_or("", |s| s.cron.as_str());
    let next = current
        .map(|s| {
            format!(
                r#" <span class="muted">next: {}</span>"#,
                esc(&html::when(&s.next_fire_at))
            )
        })
        .unwrap_or_default();
    format!(
        r#"<select name="kind" id="{id}_kind" aria-label="Schedule">{options}</select>
<input type="text" name="cron" id="{id}_cron" value="{cron}" placeholder="0 0 3 * * * (Custom)" aria-label="Cron, seconds first">{next}"#,
        cron = esc(cron),
    )
}

/// The GC schedule, the audit purge and the job queues.
async fn jobs_section(state: &AppState, portal: &PortalUser) -> Result<String, ApiError> {
    let principal = portal.principal();
    let csrf = html::csrf_field(&portal.0);
    let gc_schedule = gc::schedule(state, &principal).await?;
    let purge_schedule = audit_purge::schedule(state, &principal).await?;
    let (_, purges) = audit_purge::history(
        state,
        &principal,
        berth_domain::query::Paging {
            page: 1,
            page_size: RUNS,
        },
    )
    .await?;
    let mut purge_rows = String::new();
    for purge in &purges {
        let parameters: Value = serde_json::from_str(&purge.extra_attrs).unwrap_or(Value::Null);
        purge_rows.push_str(&format!(
            r#"<tr data-purge="{id}"><td>{id}</td><td class="status">{status}</td><td>{trigger}</td><td>{hours} h, {types}{dry}</td><td>{started}</td></tr>"#,
            id = purge.id,
            status = esc(&purge.status),
            trigger = esc(&purge.trigger),
            hours = parameters["audit_retention_hour"].as_i64().unwrap_or(0),
            types = esc(parameters["include_event_types"].as_str().unwrap_or("")),
            dry = if parameters["dry_run"].as_bool().unwrap_or(false) { ", dry run" } else { "" },
            started = esc(&html::when(&purge.start_time)),
        ));
    }
    if purge_rows.is_empty() {
        purge_rows = r#"<tr><td colspan="5" class="muted">No purges yet.</td></tr>"#.into();
    }
    let mut queue_rows = String::new();
    for queue in jobservice::queues(state, &principal).await? {
        let (action, label) = if queue.paused {
            ("resume", "Resume")
        } else {
            ("pause", "Pause")
        };
        queue_rows.push_str(&format!(
            r#"<tr data-queue="{kind}"><td>{kind}</td><td>{count}</td><td>{latency} s</td><td class="status">{state}</td><td><form class="inline" method="post" action="/harbor/system/queues/{kind}/{action}">{csrf}<button type="submit" class="small">{label}</button></form></td></tr>"#,
            kind = esc(&queue.job_type),
            count = queue.count,
            latency = queue.latency,
            state = if queue.paused { "paused" } else { "running" },
        ));
    }
    let purge_parameters = purge_schedule
        .as_ref()
        .and_then(|s| serde_json::from_str::<Value>(&s.parameters).ok())
        .unwrap_or(Value::Null);
    Ok(format!(
        r#"<form class="toolbar" method="post" action="/harbor/system/gc/schedule">{csrf}{gc_fields}<button type="submit" id="schedule_gc">Set GC schedule</button></form>
<h2>Audit log purge</h2>
<form class="toolbar" method="post" action="/harbor/system/purge">{csrf}
<input type="number" name="hours" id="purge_hours" min="1" value="{hours}" aria-label="Keep the last hours">
<input type="text" name="types" id="purge_types" value="{types}" aria-label="Event types (create_artifact, pull_artifact, other, ...)">
<label><input type="checkbox" name="dry_run" value="true" id="purge_dry_run"> dry run</label>
<button type="submit" id="purge_now">Purge now</button></form>
<form class="toolbar" method="post" action="/harbor/system/purge/schedule">{csrf}{purge_fields}
<input type="hidden" name="hours" value="{hours}"><input type="hidden" name="types" value="{types}">
<button type="submit" id="schedule_purge">Set purge schedule</button></form>
<table id="purges"><thead><tr><th>Purge</th><th>Status</th><th>Trigger</th><th>Parameters</th><th>Started</th></tr></thead><tbody>{purge_rows}</tbody></table>
<h2>Job queues</h2>
<table id="job_queues"><thead><tr><th>Job</th><th>Waiting</th><th>Oldest</th><th>State</th><th></th></tr></thead><tbody>{queue_rows}</tbody></table>"#,
        gc_fields = schedule_fields("gc", gc_schedule.as_ref()),
        purge_fields = schedule_fields("purge", purge_schedule.as_ref()),
        hours = purge_parameters["audit_retention_hour"]
            .as_i64()
            .unwrap_or(24 * 30),
        types = esc(purge_parameters["include_event_types"]
            .as_str()
            .unwrap_or("pull_artifact,other")),
    ))
}

/// A schedule form.
#[derive(Debug, Deserialize)]
pub(super) struct ScheduleForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    cron: String,
    #[serde(default)]
    hours: String,
    #[serde(default)]
    types: String,
    #[serde(default)]
    dry_run: String,
}

fn done(what: &str) -> Response {
    see_other(&format!("/harbor/system?done={}", html::url_part(what)))
}

/// `POST /harbor/system/gc/schedule`.
async fn schedule_gc(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<ScheduleForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err| PortalError::api(err, Some(session));
    let plan = Plan::parse(&form.kind, &form.cron).map_err(failed)?;
    gc::set_schedule(&state, &portal.principal(), &plan, serde_json::json!({}))
        .await
        .map_err(failed)?;
    Ok(done("The garbage collection schedule was set."))
}

/// The purge parameters a form gives.
fn purge_parameters(form: &ScheduleForm) -> Result<Parameters, ApiError> {
    Parameters::parse(Some(&serde_json::json!({
        "audit_retention_hour": form.hours.trim(),
        "include_event_types": form.types,
        "dry_run": form.dry_run == "true",
    })))
}

/// `POST /harbor/system/purge`: a purge now.
async fn purge_now(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<ScheduleForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err| PortalError::api(err, Some(session));
    let parameters = purge_parameters(&form).map_err(failed)?;
    let id = audit_purge::start(&state, &portal.principal(), &parameters)
        .await
        .map_err(failed)?;
    Ok(done(&format!("Purge {id} started; reload to follow it.")))
}

/// `POST /harbor/system/purge/schedule`.
async fn schedule_purge(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<ScheduleForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err| PortalError::api(err, Some(session));
    let plan = Plan::parse(&form.kind, &form.cron).map_err(failed)?;
    let parameters = purge_parameters(&form).map_err(failed)?;
    let given = parameters
        .to_json()
        .as_object()
        .cloned()
        .unwrap_or_default();
    audit_purge::set_schedule(&state, &portal.principal(), &plan, &parameters, &given)
        .await
        .map_err(failed)?;
    Ok(done("The purge schedule was set."))
}

/// `POST /harbor/system/queues/{job_type}/{action}`: pauses or resumes a queue.
async fn act_on_queue(
    State(state): State<AppState>,
    portal: PortalUser,
    axum::extract::Path((job_type, action)): axum::extract::Path<(String, String)>,
    PortalForm(form): PortalForm<RunForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err| PortalError::api(err, Some(session));
    let (action, did) = match action.as_str() {
        "pause" => (QueueAction::Pause, "paused"),
        "resume" => (QueueAction::Resume, "resumed"),
        _ => return Err(failed(ApiError::not_found("There is no such action."))),
    };
    jobservice::act_on_queue(&state, &portal.principal(), &job_type, action)
        .await
        .map_err(failed)?;
    Ok(done(&format!("The {job_type} queue was {did}.")))
}
