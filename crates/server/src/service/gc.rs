//! Garbage collection: starting a run in the background and its history.

use berth_domain::cron::Cron;
use berth_domain::rbac::{Action, SystemResource};
use berth_store::StoreError;
use berth_store::repo::gc::{
    GcOptions, GcRun, GcStats, RunningGc, estimate_garbage, run_garbage_collection,
};
use berth_store::repo::jobs::{NewSchedule, Schedule, Task};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::error::{ApiError, ErrorKind};
use crate::extract::Principal;
use crate::state::AppState;

/// A run's status in Harbor's words, which the portal shows too: `Running`,
/// `Success`, `Stopped` or `Error`.
pub fn job_status(run: &GcRun) -> &'static str {
    match run.status.as_str() {
        "running" => "Running",
        "done" if stopped(run) => "Stopped",
        "done" => "Success",
        _ => "Error",
    }
}

/// Whether run `run` ended because it was asked to stop.
fn stopped(run: &GcRun) -> bool {
    serde_json::from_str::<Value>(&run.stats)
        .ok()
        .and_then(|stats| stats.get("stopped").and_then(Value::as_bool))
        .unwrap_or(false)
}

/// Asks run `id` to stop at its next step (administrators); one that ended
/// stays as it ended, as in Harbor. 404 when there is no such run.
pub async fn stop(state: &AppState, principal: &Principal, id: i64) -> Result<(), ApiError> {
    principal.require_system(SystemResource::GarbageCollection, Action::Stop)?;
    match state.store.stop_gc_run(id).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(format!("execution {id} not found"))),
    }
}

/// What run `run` did, as the lines of a log: its start, its counts (or why
/// it failed) and its end.
pub fn log_of(run: &GcRun) -> String {
    let mut log = format!(
        "{} garbage collection {} started ({})\n",
        run.started_at,
        run.id,
        run.trigger.to_ascii_lowercase()
    );
    let stats: Value = serde_json::from_str(&run.stats).unwrap_or(Value::Null);
    let count = |name: &str| stats.get(name).and_then(Value::as_i64).unwrap_or(0);
    let Some(end) = run.finished_at.as_deref() else {
        log.push_str(&format!("{} running\n", run.heartbeat_at));
        return log;
    };
    if stopped(run) {
        log.push_str(&format!("{end} received the stop signal, quit GC job.\n"));
    }
    let dry_run = stats.get("dry_run").and_then(Value::as_bool) == Some(true);
    let workers = stats.get("workers").and_then(Value::as_i64).unwrap_or(1);
    log.push_str(&format!("{} workers: {workers}\n", run.started_at));
    if stats.get("delete_untagged").and_then(Value::as_bool) == Some(true) {
        log.push_str(&format!(
            "{end} {} {} untagged artifacts\n",
            if dry_run { "would delete" } else { "deleted" },
            count("untagged")
        ));
    }
    if stats.get("error").is_none() {
        log.push_str(&format!(
            "{end} {} blobs and {} manifests eligible for deletion\n",
            count("blobs"),
            count("manifests")
        ));
    }
    match stats.get("error").and_then(Value::as_str) {
        Some(error) => log.push_str(&format!("{end} failed: {error}\n")),
        None if dry_run => log.push_str(&format!(
            "{end} dry run: would expire {} upload sessions, drop {} unused blob links, delete {} blobs \
             ({} bytes) and remove {} stray files; nothing was removed\n{end} finished\n",
            count("uploads"),
            count("links"),
            count("blobs"),
            count("bytes"),
            count("stray_files"),
        )),
        None => log.push_str(&format!(
            "{end} expired {} upload sessions, dropped {} unused blob links, deleted {} blobs \
             ({} bytes), removed {} stray files\n{end} finished\n",
            count("uploads"),
            count("links"),
            count("blobs"),
            count("bytes"),
            count("stray_files"),
        )),
    }
    log
}

/// Harbor's `job_parameters` of run `run`: what it was asked
/// (`delete_untagged`, `dry_run`, `workers`) and what it did (`freed_space`
/// in bytes, `purged_blobs`, `purged_manifests`), as a JSON text.
pub fn job_parameters(run: &GcRun) -> String {
    let stats: Value = serde_json::from_str(&run.stats).unwrap_or(Value::Null);
    let count = |name: &str| stats.get(name).and_then(Value::as_i64).unwrap_or(0);
    let flag = |name: &str| stats.get(name).and_then(Value::as_bool).unwrap_or(false);
    json!({
        "delete_untagged": flag("delete_untagged"),
        "dry_run": flag("dry_run"),
        "workers": stats.get("workers").and_then(Value::as_i64).unwrap_or(1),
        "freed_space": count("bytes"),
        "purged_blobs": count("blobs"),
        "purged_manifests": count("manifests"),
    })
    .to_string()
}

/// What a collection is asked to do: Harbor's `parameters` of a run or
/// schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcParameters {
    /// Only count what a run would remove.
    pub dry_run: bool,
    /// Delete untagged artifacts first.
    pub delete_untagged: bool,
    /// How many blobs are removed at once, 1-5.
    pub workers: usize,
}

impl Default for GcParameters {
    fn default() -> Self {
        Self {
            dry_run: false,
            delete_untagged: false,
            workers: 1,
        }
    }
}

impl GcParameters {
    /// The store's options for a run with these parameters, whose untagged
    /// artifacts are deleted as `operator`.
    fn options(self, operator: &str) -> GcOptions {
        GcOptions {
            delete_untagged: self.delete_untagged,
            workers: self.workers,
            operator: operator.to_string(),
            ..GcOptions::default()
        }
    }
}

/// The actions of Harbor's createGCSchedule and updateGCSchedule, either of
/// which starts a run or sets the schedule.
const STARTERS: &[Action] = &[Action::Create, Action::Update];

/// Starts a manual run in the background (administrators; not in read-only
/// mode, unless a dry run, which only counts what a run would remove); its
/// id. A run already going is a 409.
pub async fn start(
    state: &AppState,
    principal: &Principal,
    parameters: GcParameters,
) -> Result<i64, ApiError> {
    principal.require_system_any(SystemResource::GarbageCollection, STARTERS)?;
    if !parameters.dry_run && state.configuration().await?.flag("read_only") {
        return Err(crate::read_only::refusal());
    }
    let run = state.store.start_gc_run().await?;
    let id = run.id;
    let worker = state.clone();
    let options = parameters.options(principal.audit_name());
    // The run's log lines carry the id of the request that started it.
    let task = async move {
        if parameters.dry_run {
            if let Err(err) =
                estimate_garbage(&worker.store, &worker.registry.blobs, options, run).await
            {
                tracing::error!(error = %err, run = id, "a garbage collection dry run failed");
            }
        } else {
            let _ = collect(&worker, run, options).await;
        }
    };
    tokio::spawn(task.in_current_span());
    Ok(id)
}

/// Runs the collection of `run` to its end, counted in the metrics and, when
/// it fails, logged.
async fn collect(
    state: &AppState,
    run: RunningGc,
    options: GcOptions,
) -> Result<GcStats, StoreError> {
    let id = run.id;
    let result = run_garbage_collection(&state.store, &state.registry.blobs, options, run).await;
    match &result {
        Ok(stats) => state.metrics.gc_finished(Some(stats.bytes)),
        Err(err) => {
            state.metrics.gc_finished(None);
            tracing::error!(error = %err, run = id, "garbage collection failed");
        }
    }
    result
}

/// The latest `limit` runs, newest first (administrators).
pub async fn history(
    state: &AppState,
    principal: &Principal,
    limit: i64,
) -> Result<Vec<GcRun>, ApiError> {
    principal.require_system(SystemResource::GarbageCollection, Action::List)?;
    Ok(state.store.gc_runs(limit).await?)
}

/// The jobs' name for garbage collection (Harbor's vendor type).
pub const VENDOR_TYPE: &str = "GARBAGE_COLLECTION";

/// How garbage collection runs on its own: Harbor's schedule types, with the
/// cron each stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// No schedule.
    None,
    /// `Hourly`, `Daily`, `Weekly` or `Custom`, with its cron.
    Every {
        /// The schedule type as Harbor names it.
        kind: &'static str,
        /// The cron expression, seconds first.
        cron: String,
    },
}

impl Plan {
    /// The plan Harbor's schedule `kind` and `cron` describe (`Manual` is not a plan).
    pub fn parse(kind: &str, cron: &str) -> Result<Self, ApiError> {
        let fixed = |kind, cron: &str| Plan::Every {
            kind,
            cron: cron.to_string(),
        };
        Ok(match kind.to_ascii_lowercase().as_str() {
            "none" => Plan::None,
            "hourly" => fixed("Hourly", "0 0 * * * *"),
            "daily" => fixed("Daily", "0 0 0 * * *"),
            "weekly" => fixed("Weekly", "0 0 0 * * 0"),
            // Harbor creates a schedule of the cron given whatever the type
            // says, an empty one included (an update that gives only a cron).
            "" if !cron.trim().is_empty() => fixed("Custom", cron.trim()),
            "custom" if cron.trim().is_empty() => {
                return Err(ApiError::bad_request("empty cron string for gc schedule"));
            }
            "custom" => fixed("Custom", cron.trim()),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "invalid schedule type {kind:?}: one of Manual, None, Hourly, Daily, Weekly, Custom"
                )));
            }
        })
    }
}

impl Plan {
    /// Sets (or, for [`Plan::None`], removes) the schedule of the system job
    /// `vendor_type`, whose runs get `parameters`; a cron that does not parse
    /// is refused in Harbor's words for `what` (`scheduled gc`, ...).
    pub async fn apply(
        &self,
        state: &AppState,
        vendor_type: &str,
        what: &str,
        parameters: Value,
    ) -> Result<(), ApiError> {
        let jobs = state.store.jobs();
        let Plan::Every { kind, cron } = self else {
            jobs.delete_schedule(vendor_type, 0).await?;
            return Ok(());
        };
        let parsed = Cron::schedule(cron).map_err(|err| {
            ApiError::bad_request(format!(
                "invalid cron string for {what}: {cron}, error: {err}"
            ))
        })?;
        let new = NewSchedule {
            vendor_type: vendor_type.into(),
            vendor_id: 0,
            schedule_type: (*kind).to_string(),
            cron: parsed,
            cron_text: cron.clone(),
            parameters,
        };
        match jobs.set_schedule(&new).await? {
            Some(_) => Ok(()),
            None => Err(ApiError::bad_request(format!(
                "the cron string {cron:?} never fires"
            ))),
        }
    }
}

/// Reads the parameters of a run or schedule (Harbor's `delete_untagged`,
/// `dry_run`, `workers`); a value of the wrong kind, or workers outside 1-5,
/// is refused, never ignored. Other keys (Harbor's `time_window`,
/// `redirect_url`) are kept with a schedule and have no effect.
pub fn check_parameters(parameters: &Value) -> Result<GcParameters, ApiError> {
    let flag = |name: &str| match parameters.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(flag)) => Ok(*flag),
        Some(other) => Err(ApiError::bad_request(format!(
            "{name} must be true or false, not {other}"
        ))),
    };
    let workers = match parameters.get("workers") {
        None | Some(Value::Null) => 1,
        Some(Value::Number(n)) if n.as_u64().is_some_and(|w| (1..=5).contains(&w)) => {
            n.as_u64().map_or(1, |w| w as usize)
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "workers must be between 1 and 5, not {other}"
            )));
        }
    };
    Ok(GcParameters {
        dry_run: flag("dry_run")?,
        delete_untagged: flag("delete_untagged")?,
        workers,
    })
}

/// Sets (or, for [`Plan::None`], removes) the schedule of garbage collection
/// (administrators), whose runs get `parameters`.
pub async fn set_schedule(
    state: &AppState,
    principal: &Principal,
    plan: &Plan,
    parameters: Value,
) -> Result<(), ApiError> {
    principal.require_system_any(SystemResource::GarbageCollection, STARTERS)?;
    if check_parameters(&parameters)?.dry_run && *plan != Plan::None {
        return Err(ApiError::bad_request(
            "dry_run applies to a manual run: a scheduled collection removes what it finds",
        ));
    }
    plan.apply(state, VENDOR_TYPE, "scheduled gc", parameters)
        .await
}

/// The schedule of garbage collection, if any (administrators).
pub async fn schedule(
    state: &AppState,
    principal: &Principal,
) -> Result<Option<Schedule>, ApiError> {
    principal.require_system(SystemResource::GarbageCollection, Action::Read)?;
    Ok(state.store.jobs().schedule(VENDOR_TYPE, 0).await?)
}

/// Runs the collection of a scheduled execution (`task`, whose parameters
/// are the schedule's) here and now; what it found (the run's id and its
/// stats). A run already going fails this one.
pub async fn run_scheduled(state: &AppState, task: &Task) -> Result<Value, String> {
    let parameters: Value = serde_json::from_str(&task.parameters).unwrap_or(Value::Null);
    let options = check_parameters(&parameters)
        .map_err(|e| e.message)?
        .options(crate::service::retention::SCHEDULER);
    if state
        .configuration()
        .await
        .map_err(|e| e.to_string())?
        .flag("read_only")
    {
        return Err("the registry is in read-only mode".into());
    }
    let run = state
        .store
        .start_gc_run_as("SCHEDULE")
        .await
        .map_err(|e| ApiError::from(e).message)?;
    let id = run.id;
    match collect(state, run, options).await {
        Ok(stats) => Ok(json!({
            "gc_run": id, "freed_bytes": stats.bytes, "untagged": stats.untagged,
        })),
        Err(err) => Err(match ApiError::from(err) {
            e if e.kind == ErrorKind::Internal => {
                "the collection failed; see the server log".into()
            }
            e => e.message,
        }),
    }
}
