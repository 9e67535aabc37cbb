//! Purging old audit log entries: Harbor's `PURGE_AUDIT_LOG` job, run now
//! or on a schedule, deleting in short batches the entries older than
//! `audit_retention_hour` of the event types `include_event_types` lists
//! (or counting them, in a dry run).

use berth_domain::rbac::{Action, SystemResource};
use std::time::Duration;

use berth_domain::query::Paging;
use berth_domain::time;
use berth_store::repo::audit_logs::PurgeFilter;
use berth_store::repo::jobs::{Execution, NewExecution, NewTask, Schedule, Task};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::extract::Principal;
use crate::service::gc::Plan;
use crate::state::AppState;

/// The jobs' name for the purge (Harbor's vendor type).
pub const VENDOR_TYPE: &str = "PURGE_AUDIT_LOG";

/// The longest retention Harbor takes, in hours.
const MAX_RETENTION_HOURS: i64 = 240_000;

/// How many entries one transaction deletes: a push, whose event writes an
/// entry, waits for one batch at most.
const BATCH: i64 = 5_000;

/// Harbor's three artifact event types, which `other` leaves.
const ARTIFACT_EVENTS: [&str; 3] = ["create_artifact", "delete_artifact", "pull_artifact"];

/// What a purge does, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameters {
    /// Entries older than this many hours go (0 or -1: none, as in Harbor).
    pub retention_hours: i64,
    /// The event types, as given (lower case, trimmed).
    pub event_types: Vec<String>,
    /// Count, do not delete.
    pub dry_run: bool,
}

impl Parameters {
    /// Harbor's `parameters` of a purge schedule, checked as Harbor checks
    /// them, and more: a retention that is not a whole number of hours, or
    /// is negative (but Harbor's -1), is refused rather than read as 0. Event
    /// types are kept as given (trimmed, lower case): as in Harbor, a type
    /// that names no event (`push`) matches nothing when the purge runs.
    pub fn parse(parameters: Option<&Value>) -> Result<Self, ApiError> {
        let parameters = match parameters {
            Some(Value::Object(map)) if !map.is_empty() => map,
            _ => return Err(ApiError::bad_request("schedule parameter cann't be empty")),
        };
        let hours = match parameters.get("audit_retention_hour") {
            None => return Err(ApiError::bad_request("audit_retention_hour should provide")),
            Some(value) => value
                .as_i64()
                .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
                .ok_or_else(|| {
                    ApiError::bad_request("audit_retention_hour should be integer format")
                })?,
        };
        if hours > MAX_RETENTION_HOURS {
            return Err(ApiError::bad_request(format!(
                "audit_retention_hour should be less than {MAX_RETENTION_HOURS}"
            )));
        }
        if hours < -1 {
            return Err(ApiError::bad_request(
                "audit_retention_hour should not be negative",
            ));
        }
        let event_types = match parameters.get("include_event_types") {
            None => return Err(ApiError::bad_request("include_event_types should provide")),
            Some(Value::String(types)) => types
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>(),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "include_event_types should be a comma-separated string",
                ));
            }
        };
        Ok(Self {
            retention_hours: hours,
            event_types,
            dry_run: parameters
                .get("dry_run")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// As Harbor keeps them in an execution (`job_parameters`).
    pub fn to_json(&self) -> Value {
        json!({
            "audit_retention_hour": self.retention_hours,
            "dry_run": self.dry_run,
            "include_event_types": self.event_types.join(","),
        })
    }

    /// Which entries the purge takes, at `now` (Unix seconds).
    fn filter(&self, now: i64) -> PurgeFilter {
        let before = ::time::OffsetDateTime::from_unix_timestamp(
            now.saturating_sub(self.retention_hours.saturating_mul(3600)),
        )
        .map(time::format_timestamp)
        .unwrap_or_else(|_| time::ZERO_TIME.to_string());
        PurgeFilter {
            before,
            kinds: self.event_types.iter().filter_map(|t| pair(t)).collect(),
            others: self.event_types.iter().any(|t| t == "other"),
            except: ARTIFACT_EVENTS.iter().filter_map(|t| pair(t)).collect(),
        }
    }
}

/// An event type's `(operation, resource_type)`: `create_artifact` is
/// `(create, artifact)`, Harbor's `member` Berth's `project_member`.
fn pair(event_type: &str) -> Option<(String, String)> {
    let (operation, resource) = event_type.split_once('_')?;
    if operation.is_empty() || resource.is_empty() {
        return None;
    }
    let resource = match resource {
        "member" => "project_member",
        other => other,
    };
    Some((operation.to_string(), resource.to_string()))
}

/// The actions of Harbor's createPurgeSchedule and updatePurgeSchedule,
/// either of which purges now or sets the schedule.
const STARTERS: &[Action] = &[Action::Create, Action::Update];

/// Starts a purge now (administrators); its execution's id.
pub async fn start(
    state: &AppState,
    principal: &Principal,
    parameters: &Parameters,
) -> Result<i64, ApiError> {
    principal.require_system_any(SystemResource::PurgeAuditLog, STARTERS)?;
    let new = NewExecution {
        vendor_type: VENDOR_TYPE.into(),
        vendor_id: 0,
        trigger: "MANUAL".into(),
        extra_attrs: parameters.to_json(),
    };
    Ok(state
        .store
        .jobs()
        .create(&new, &[task(parameters.to_json())])
        .await?)
}

/// A purge's one task: tried up to three times (deleting what is left is
/// safe to do again), where Harbor's job gives up after one.
fn task(parameters: Value) -> NewTask {
    NewTask {
        parameters,
        max_attempts: 3,
        sequence_key: None,
    }
}

/// The task a scheduled execution starts with.
pub fn tasks_of(schedule: &Schedule) -> Vec<NewTask> {
    vec![task(
        serde_json::from_str(&schedule.parameters).unwrap_or(Value::Null),
    )]
}

/// Sets (or, for [`Plan::None`], removes) the purge's schedule (administrators).
pub async fn set_schedule(
    state: &AppState,
    principal: &Principal,
    plan: &Plan,
    parameters: &Parameters,
    given: &Map<String, Value>,
) -> Result<(), ApiError> {
    principal.require_system_any(SystemResource::PurgeAuditLog, STARTERS)?;
    // What each run gets is the checked parameters; what the schedule shows
    // is what was given (Harbor shows the parameters as posted).
    let mut shown = given.clone();
    if let Value::Object(checked) = parameters.to_json() {
        shown.extend(checked);
    }
    plan.apply(
        state,
        VENDOR_TYPE,
        "scheduled log rotation purge",
        Value::Object(shown),
    )
    .await
}

/// The purge's schedule, if any (administrators).
pub async fn schedule(
    state: &AppState,
    principal: &Principal,
) -> Result<Option<Schedule>, ApiError> {
    principal.require_system(SystemResource::PurgeAuditLog, Action::Read)?;
    Ok(state.store.jobs().schedule(VENDOR_TYPE, 0).await?)
}

/// A page of the purges, newest first, and how many there are (administrators).
pub async fn history(
    state: &AppState,
    principal: &Principal,
    paging: Paging,
) -> Result<(i64, Vec<Execution>), ApiError> {
    principal.require_system(SystemResource::PurgeAuditLog, Action::List)?;
    Ok(state
        .store
        .jobs()
        .executions(VENDOR_TYPE, 0, paging)
        .await?)
}

/// Purge `id` (administrators).
pub async fn execution(
    state: &AppState,
    principal: &Principal,
    id: i64,
) -> Result<Execution, ApiError> {
    principal.require_system(SystemResource::PurgeAuditLog, Action::Read)?;
    purge(state, id).await
}

/// Purge `id`, whoever asks.
async fn purge(state: &AppState, id: i64) -> Result<Execution, ApiError> {
    match state.store.jobs().execution(id).await? {
        Some(e) if e.vendor_type == VENDOR_TYPE => Ok(e),
        _ => Err(ApiError::not_found(format!(
            "purge job with id {id} not found"
        ))),
    }
}

/// The log of purge `id` (administrators).
pub async fn log(state: &AppState, principal: &Principal, id: i64) -> Result<String, ApiError> {
    execution(state, principal, id).await?;
    let jobs = state.store.jobs();
    let tasks = jobs.tasks(id).await?;
    let Some(task) = tasks.first() else {
        return Err(ApiError::not_found(format!(
            "purge job with execution ID: {id} taskLog is not found"
        )));
    };
    Ok(jobs.log_text(task.id).await?)
}

/// Stops purge `id` (administrators): a finished one stays as it ended.
pub async fn stop(state: &AppState, principal: &Principal, id: i64) -> Result<(), ApiError> {
    principal.require_system(SystemResource::PurgeAuditLog, Action::Stop)?;
    purge(state, id).await?;
    state.store.jobs().stop(id).await?;
    Ok(())
}

/// Runs the purge of `task` here and now; how many entries it took.
pub async fn run_task(state: &AppState, task: &Task) -> Result<Value, String> {
    let given: Value = serde_json::from_str(&task.parameters).map_err(|e| e.to_string())?;
    let parameters = Parameters::parse(Some(&given)).map_err(|e| e.message)?;
    let note = |line: String| async move {
        let _ = state.store.jobs().log(task.id, &line).await;
    };
    note("Purge audit job start".into()).await;
    note(format!(
        "Purge operation parameter, retention_hour:{}, include_event_types:[{}], dry_run:{}",
        parameters.retention_hours,
        parameters.event_types.join(" "),
        parameters.dry_run
    ))
    .await;
    if parameters.retention_hours <= 0 {
        note(format!(
            "quit purge job, retentionHour:{}",
            parameters.retention_hours
        ))
        .await;
        return Ok(json!({"purged": 0}));
    }
    let filter = parameters.filter(time::unix_now());
    let audit_logs = state.store.audit_logs();
    if !parameters.dry_run
        && state
            .configuration()
            .await
            .map_err(|e| e.to_string())?
            .flag("read_only")
    {
        note("the registry is in read-only mode: no audit log was purged".into()).await;
        return Ok(json!({"purged": 0, "skipped": "read-only mode"}));
    }
    if parameters.dry_run {
        let count = audit_logs
            .count_purgeable(&filter)
            .await
            .map_err(|e| e.to_string())?;
        note(format!("[DRYRUN]Purged {count} rows of audit logs")).await;
        return Ok(json!({"purged": count, "dry_run": true}));
    }
    let mut purged = 0u64;
    let mut after = 0;
    loop {
        let (done, next) = audit_logs
            .purge_batch(&filter, after, BATCH)
            .await
            .map_err(|e| format!("failed to purge audit log, error: {e}"))?;
        purged += done;
        let Some(next) = next else { break };
        after = next;
        // Room for the writers waiting.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    note(format!("Purged {purged} rows of audit logs")).await;
    Ok(json!({"purged": purged}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_checked_as_harbor_checks_them_and_more() {
        let parse = |v: Value| Parameters::parse(Some(&v)).map_err(|e| e.message);
        assert_eq!(
            parse(
                json!({"audit_retention_hour": 168, "include_event_types": "Create_Artifact, pull_artifact,other", "dry_run": true})
            ),
            Ok(Parameters {
                retention_hours: 168,
                event_types: vec![
                    "create_artifact".into(),
                    "pull_artifact".into(),
                    "other".into()
                ],
                dry_run: true,
            })
        );
        for (given, message) in [
            (json!({}), "schedule parameter cann't be empty"),
            (
                json!({"include_event_types": ""}),
                "audit_retention_hour should provide",
            ),
            (
                json!({"audit_retention_hour": 1.5, "include_event_types": ""}),
                "audit_retention_hour should be integer format",
            ),
            (
                json!({"audit_retention_hour": "soon", "include_event_types": ""}),
                "audit_retention_hour should be integer format",
            ),
            (
                json!({"audit_retention_hour": 240001, "include_event_types": ""}),
                "audit_retention_hour should be less than 240000",
            ),
            (
                json!({"audit_retention_hour": -5, "include_event_types": ""}),
                "audit_retention_hour should not be negative",
            ),
            (
                json!({"audit_retention_hour": 1}),
                "include_event_types should provide",
            ),
        ] {
            let err = parse(given.clone()).unwrap_err();
            assert!(err.starts_with(message), "{given}: {err}");
        }
        assert_eq!(
            Parameters::parse(None).unwrap_err().message,
            "schedule parameter cann't be empty"
        );
        // Harbor keeps types that name no event (its UI once sent
        // `push,pull`); they match nothing when the purge runs.
        let kept =
            parse(json!({"audit_retention_hour": 1, "include_event_types": "push,pull"})).unwrap();
        assert_eq!(
            kept.event_types,
            vec!["push".to_string(), "pull".to_string()]
        );
        let filter = kept.filter(0);
        assert!(
            filter.kinds.is_empty() && !filter.others,
            "{:?}",
            filter.kinds
        );
    }

    #[test]
    fn event_types_name_operations_on_resources() {
        assert_eq!(
            pair("create_artifact"),
            Some(("create".into(), "artifact".into()))
        );
        assert_eq!(
            pair("update_member"),
            Some(("update".into(), "project_member".into()))
        );
        assert_eq!(
            pair("update_configuration"),
            Some(("update".into(), "configuration".into()))
        );
        assert_eq!(pair("artifact"), None);
        let p = Parameters::parse(Some(
            &json!({"audit_retention_hour": 1, "include_event_types": "other"}),
        ))
        .unwrap();
        let filter = p.filter(7200);
        assert_eq!(filter.before, "1970-01-01T01:00:00.000Z");
        assert!(filter.others && filter.kinds.is_empty());
        assert_eq!(filter.except.len(), 3);
    }
}
