//! Garbage collection: starting a run in the background and its history.

use berth_domain::cron::Cron;
use berth_domain::rbac::{Action, SystemResource};
use berth_store::StoreError;
use berth_store::repo::gc::{
    GcOptions, GcRun, GcStats, RunningGc, estimate_garbage, run_garbage_collection,
};
use berth_store::repo::jobs::{NewSchedule, Schedule};
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

/// The actions of Harbor's createGCSchedule and updateGCSchedule, either of
/// which starts a run or sets the schedule.
const STARTERS: &[Action] = &[Action::Create, Action::Update];

/// Starts a manual run in the background (administrators; not in read-only
/// mode, unless a dry run, which only counts what a run would remove); its
/// id. A run already going is a 409.
pub async fn start(
    state: &AppState,
    principal: &Principal,
    dry_run: bool,
) -> Result<i64, ApiError> {
    principal.require_system_any(SystemResource::GarbageCollection, STARTERS)?;
    if !dry_run && state.configuration().await?.flag("read_only") {
        return Err(crate::read_only::refusal());
    }
    let run = state.store.start_gc_run().await?;
    let id = run.id;
    let worker = state.clone();
    // The run's log lines carry the id of the request that started it.
    let task = async move {
        if dry_run {
            let options = GcOptions::default();
            if let Err(err) =
                estimate_garbage(&worker.store, &worker.registry.blobs, options, run).await
            {
                tracing::error!(error = %err, run = id, "a garbage collection dry run failed");
            }
        } else {
            let _ = collect(&worker, run).await;
        }
    };
    tokio::spawn(task.in_current_span());
    Ok(id)
}

/// Runs the collection of `run` to its end, counted in the metrics and, when
/// it fails, logged.
async fn collect(state: &AppState, run: RunningGc) -> Result<GcStats, StoreError> {
    let id = run.id;
    let result = run_garbage_collection(
        &state.store,
        &state.registry.blobs,
        GcOptions::default(),
        run,
    )
    .await;
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
        let parsed: Cron = cron.parse().map_err(|err| {
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

/// Checks the parameters of a run (Harbor's `delete_untagged`, `workers`;
/// `dry_run` is the caller's to read): what Berth's collection does not do
/// is refused, never accepted and ignored.
pub fn check_parameters(parameters: &Value) -> Result<(), ApiError> {
    let flag = |name: &str| {
        parameters
            .get(name)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    if flag("delete_untagged") {
        return Err(ApiError::bad_request(
            "delete_untagged is not supported: garbage collection keeps untagged artifacts \
             (delete them through the API or, once it exists, tag retention)",
        ));
    }
    match parameters.get("workers") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Number(n)) if n.as_i64().is_some_and(|w| (1..=5).contains(&w)) => Ok(()),
        Some(other) => Err(ApiError::bad_request(format!(
            "workers must be between 1 and 5, not {other}"
        ))),
    }
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
    check_parameters(&parameters)?;
    if parameters.get("dry_run").and_then(Value::as_bool) == Some(true) && *plan != Plan::None {
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

/// Runs the collection of a scheduled execution here and now; what it found
/// (the run's id and its stats). A run already going fails this one.
pub async fn run_scheduled(state: &AppState) -> Result<Value, String> {
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
    match collect(state, run).await {
        Ok(stats) => Ok(json!({"gc_run": id, "freed_bytes": stats.bytes})),
        Err(err) => Err(match ApiError::from(err) {
            e if e.kind == ErrorKind::Internal => {
                "the collection failed; see the server log".into()
            }
            e => e.message,
        }),
    }
}
