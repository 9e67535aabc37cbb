//! Garbage collection: starting a run in the background and its history.

use berth_store::repo::gc::{GcOptions, GcRun, run_garbage_collection};
use tracing::Instrument;

use crate::error::ApiError;
use crate::extract::Principal;
use crate::state::AppState;

/// A run's status in Harbor's words, which the portal shows too: `Running`,
/// `Success` or `Error`.
pub fn job_status(run: &GcRun) -> &'static str {
    match run.status.as_str() {
        "running" => "Running",
        "done" => "Success",
        _ => "Error",
    }
}

/// Starts a manual run in the background (administrators; not in read-only
/// mode); its id. A run already going is a 409.
pub async fn start(state: &AppState, principal: &Principal) -> Result<i64, ApiError> {
    principal.require_sysadmin()?;
    if state.configuration().await?.flag("read_only") {
        return Err(crate::read_only::refusal());
    }
    let run = state.store.start_gc_run().await?;
    let id = run.id;
    let worker = state.clone();
    // The run's log lines carry the id of the request that started it.
    let task = async move {
        match run_garbage_collection(
            &worker.store,
            &worker.registry.blobs,
            GcOptions::default(),
            run,
        )
        .await
        {
            Ok(stats) => worker.metrics.gc_finished(Some(stats.bytes)),
            Err(err) => {
                worker.metrics.gc_finished(None);
                tracing::error!(error = %err, run = id, "garbage collection failed");
            }
        }
    };
    tokio::spawn(task.in_current_span());
    Ok(id)
}

/// The latest `limit` runs, newest first (administrators).
pub async fn history(
    state: &AppState,
    principal: &Principal,
    limit: i64,
) -> Result<Vec<GcRun>, ApiError> {
    principal.require_sysadmin()?;
    Ok(state.store.gc_runs(limit).await?)
}
