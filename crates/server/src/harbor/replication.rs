//! Harbor's replication (`/replication/policies`, `/replication/executions`,
//! the `replication` tag, and `/replication/adapterinfos`): system
//! administrators manage policies that copy artifacts to or from another
//! registry, start and stop their runs, and read the runs' tasks and logs.

use berth_domain::rbac::{Action, SystemResource};
use std::collections::HashMap;
use std::collections::hash_map::Entry;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::registry::RegistryType;
use berth_domain::model::replication::{self as model, Filter, Policy, Trigger};
use berth_domain::time::ZERO_TIME;
use berth_store::repo::jobs::{Execution, Task};
use berth_store::repo::replication::ExecutionFilter;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, LaterJson, paged, path_int};
use crate::operations::{Routes, Surface};
use crate::service::replication::{self, Work};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/replication/policies", list_replication_policies)
        .post("/replication/policies", create_replication_policy)
        .get("/replication/policies/{id}", get_replication_policy)
        .put("/replication/policies/{id}", update_replication_policy)
        .delete("/replication/policies/{id}", delete_replication_policy)
        .get("/replication/executions", list_replication_executions)
        .post("/replication/executions", start_replication)
        .get("/replication/executions/{id}", get_replication_execution)
        .put("/replication/executions/{id}", stop_replication)
        .get("/replication/executions/{id}/tasks", list_replication_tasks)
        .get(
            "/replication/executions/{id}/tasks/{task_id}/log",
            get_replication_log,
        )
        .get("/replication/adapterinfos", list_registry_provider_infos)
}

/// A registry as a policy names it: by id, 0 (or none) for this registry.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RegistryRef {
    id: i64,
}

/// Harbor's `ReplicationPolicy` as a request carries it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PolicyReq {
    name: String,
    description: String,
    src_registry: Option<RegistryRef>,
    dest_registry: Option<RegistryRef>,
    dest_namespace: String,
    dest_namespace_replace_count: Option<i8>,
    trigger: Option<Trigger>,
    filters: Option<Vec<Filter>>,
    replicate_deletion: Option<bool>,
    deletion: Option<bool>,
    #[serde(rename = "override")]
    overwrite: bool,
    enabled: bool,
    speed: Option<i32>,
    copy_by_chunk: Option<bool>,
    single_active_replication: Option<bool>,
}

impl PolicyReq {
    /// The policy it describes. Harbor reads the deprecated `deletion`;
    /// Berth takes either.
    fn into_policy(self) -> Policy {
        let other = |r: Option<RegistryRef>| r.map(|r| r.id).filter(|&id| id != 0);
        Policy {
            id: 0,
            name: self.name,
            description: self.description,
            src_registry: other(self.src_registry),
            dest_registry: other(self.dest_registry),
            dest_namespace: self.dest_namespace,
            dest_namespace_replace_count: self.dest_namespace_replace_count.unwrap_or(-1),
            trigger: self.trigger.unwrap_or_else(|| Trigger {
                kind: model::MANUAL.into(),
                trigger_settings: None,
            }),
            filters: self.filters.unwrap_or_default(),
            replicate_deletion: self.deletion.unwrap_or(false)
                || self.replicate_deletion.unwrap_or(false),
            overwrite: self.overwrite,
            enabled: self.enabled,
            speed: self.speed.unwrap_or(0).max(0),
            copy_by_chunk: self.copy_by_chunk.unwrap_or(false),
            single_active_replication: self.single_active_replication.unwrap_or(false),
            creator: String::new(),
            creation_time: String::new(),
            update_time: String::new(),
        }
    }
}

/// This registry as a policy's side: Harbor's `Local` registry.
fn local_registry(state: &AppState) -> Value {
    json!({
        "id": 0,
        "name": "Local",
        "type": "harbor",
        "url": state.external_url,
        "insecure": true,
        "status": "healthy",
        "creation_time": ZERO_TIME,
        "update_time": ZERO_TIME,
    })
}

/// The registries `policies` name, each read once, as policies show them.
async fn registries_of(
    state: &AppState,
    policies: &[Policy],
) -> Result<HashMap<i64, Value>, ApiError> {
    let mut shown = HashMap::new();
    for id in policies.iter().map(Policy::remote) {
        if let Entry::Vacant(slot) = shown.entry(id) {
            let wire = match state.store.registries().get(id).await? {
                Some(registry) => {
                    serde_json::to_value(super::registries::registry_wire(&registry, true))
                        .unwrap_or(Value::Null)
                }
                None => json!({"id": id}),
            };
            slot.insert(wire);
        }
    }
    Ok(shown)
}

/// Harbor's `ReplicationPolicy`, with go-swagger's omission rules; its
/// other registry from `registries` ([`registries_of`]).
fn policy_json(state: &AppState, policy: &Policy, registries: &HashMap<i64, Value>) -> Value {
    let side = |id: Option<i64>| match id {
        None => local_registry(state),
        Some(id) => registries.get(&id).cloned().unwrap_or(Value::Null),
    };
    let mut out = Map::new();
    out.insert("id".into(), json!(policy.id));
    out.insert("name".into(), json!(policy.name));
    if !policy.description.is_empty() {
        out.insert("description".into(), json!(policy.description));
    }
    out.insert("src_registry".into(), side(policy.src_registry));
    out.insert("dest_registry".into(), side(policy.dest_registry));
    if !policy.dest_namespace.is_empty() {
        out.insert("dest_namespace".into(), json!(policy.dest_namespace));
    }
    out.insert(
        "dest_namespace_replace_count".into(),
        json!(policy.dest_namespace_replace_count),
    );
    out.insert("trigger".into(), json!(policy.trigger));
    if !policy.filters.is_empty() {
        out.insert("filters".into(), json!(policy.filters));
    }
    for (key, on) in [
        ("replicate_deletion", policy.replicate_deletion),
        ("deletion", policy.replicate_deletion),
        ("override", policy.overwrite),
        ("enabled", policy.enabled),
    ] {
        if on {
            out.insert(key.into(), json!(true));
        }
    }
    out.insert("creation_time".into(), json!(policy.creation_time));
    out.insert("update_time".into(), json!(policy.update_time));
    out.insert("speed".into(), json!(policy.speed));
    out.insert("copy_by_chunk".into(), json!(policy.copy_by_chunk));
    out.insert(
        "single_active_replication".into(),
        json!(policy.single_active_replication),
    );
    Value::Object(out)
}

fn id_of(text: &str) -> Result<i64, ApiError> {
    path_int("id", text)
}

/// `GET /replication/policies?q&sort&page&page_size&name`.
pub async fn list_replication_policies(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::ReplicationPolicy, Action::List)?;
    let paging = query.paging()?;
    let name = query.string("name");
    let (total, policies) = state
        .store
        .replication()
        .list(&query.query()?, name.as_deref(), &query.sort()?, paging)
        .await?;
    let registries = registries_of(&state, &policies).await?;
    let items: Vec<Value> = policies
        .iter()
        .map(|policy| policy_json(&state, policy, &registries))
        .collect();
    Ok(paged(&items, total, query.link(paging, total)))
}

/// `POST /replication/policies`: 201 with the new policy's `Location`.
pub async fn create_replication_policy(
    State(state): State<AppState>,
    principal: Principal,
    body: LaterJson<PolicyReq>,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::ReplicationPolicy, Action::Create)?;
    let policy = body.parse()?.into_policy();
    let id = replication::create(&state, &principal, policy).await?;
    Ok((
        StatusCode::CREATED,
        [(
            header::LOCATION,
            format!("/api/v2.0/replication/policies/{id}"),
        )],
    )
        .into_response())
}

/// `GET /replication/policies/{id}`.
pub async fn get_replication_policy(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<Json<Value>> {
    principal.require_system(SystemResource::ReplicationPolicy, Action::Read)?;
    let policy = replication::get(&state, &principal, id_of(&id)?).await?;
    let registries = registries_of(&state, std::slice::from_ref(&policy)).await?;
    Ok(Json(policy_json(&state, &policy, &registries)))
}

/// `PUT /replication/policies/{id}`: a full replace.
pub async fn update_replication_policy(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: LaterJson<PolicyReq>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::ReplicationPolicy, Action::Update)?;
    let id = id_of(&id)?;
    let policy = body.parse()?.into_policy();
    replication::update(&state, &principal, id, policy).await?;
    Ok(StatusCode::OK)
}

/// `DELETE /replication/policies/{id}`: 412 while a run of it goes on.
pub async fn delete_replication_policy(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::ReplicationPolicy, Action::Delete)?;
    replication::delete(&state, &principal, id_of(&id)?).await?;
    Ok(StatusCode::OK)
}

/// Harbor's status of a run (and of a task, whose `Pending` stays).
fn wire_status(status: &str, task: bool) -> &str {
    match status {
        "Pending" if task => "Pending",
        "Pending" | "Running" => "InProgress",
        "Success" => "Succeed",
        "Error" => "Failed",
        other => other,
    }
}

/// The job statuses of a Harbor status filter.
fn job_statuses(wire: &str, task: bool) -> Vec<String> {
    let statuses: &[&str] = match wire {
        "InProgress" if task => &["Running"],
        "InProgress" => &["Pending", "Running"],
        "Succeed" => &["Success"],
        "Failed" => &["Error"],
        other => return vec![other.to_string()],
    };
    statuses.iter().map(|s| s.to_string()).collect()
}

fn wire_trigger(trigger: &str) -> &str {
    match trigger {
        "MANUAL" => model::MANUAL,
        "SCHEDULE" => model::SCHEDULED,
        "EVENT" => model::EVENT_BASED,
        other => other,
    }
}

fn job_trigger(wire: &str) -> String {
    match wire {
        model::MANUAL => "MANUAL",
        model::SCHEDULED => "SCHEDULE",
        model::EVENT_BASED => "EVENT",
        other => other,
    }
    .to_string()
}

/// Harbor's `ReplicationExecution` with its task counts.
fn execution_json(execution: &Execution, counts: &[(i64, String, i64)]) -> Value {
    let count = |statuses: &[&str]| -> i64 {
        counts
            .iter()
            .filter(|(id, status, _)| *id == execution.id && statuses.contains(&status.as_str()))
            .map(|(_, _, n)| n)
            .sum()
    };
    json!({
        "id": execution.id,
        "policy_id": execution.vendor_id,
        "status": wire_status(&execution.status, false),
        "trigger": wire_trigger(&execution.trigger),
        "start_time": execution.start_time,
        "end_time": execution.end_time.as_deref().unwrap_or(ZERO_TIME),
        "status_text": execution.status_message,
        "total": count(&["Pending", "Running", "Success", "Error", "Stopped"]),
        "failed": count(&["Error"]),
        "succeed": count(&["Success"]),
        "in_progress": count(&["Pending", "Running"]),
        "stopped": count(&["Stopped"]),
    })
}

/// Harbor's `ReplicationTask`.
fn task_json(task: &Task) -> Value {
    let parameters: Value = serde_json::from_str(&task.parameters).unwrap_or(Value::Null);
    let work: Option<Work> = serde_json::from_value(parameters["work"].clone()).ok();
    let mut out = Map::new();
    out.insert("id".into(), json!(task.id));
    out.insert("execution_id".into(), json!(task.execution_id));
    out.insert("status".into(), json!(wire_status(&task.status, true)));
    out.insert("job_id".into(), json!(task.id.to_string()));
    if let Some(work) = work {
        let (from, to) = work.resources();
        out.insert("operation".into(), json!(work.operation));
        out.insert("resource_type".into(), json!(work.resource_type));
        out.insert("src_resource".into(), json!(from));
        out.insert("dst_resource".into(), json!(to));
    }
    out.insert(
        "start_time".into(),
        json!(task.start_time.as_deref().unwrap_or(ZERO_TIME)),
    );
    out.insert(
        "end_time".into(),
        json!(task.end_time.as_deref().unwrap_or(ZERO_TIME)),
    );
    Value::Object(out)
}

/// Run `id`, if it is a replication's.
async fn execution_for(state: &AppState, id: &str) -> Result<Execution, ApiError> {
    let id = id_of(id)?;
    match state.store.jobs().execution(id).await? {
        Some(execution) if execution.vendor_type == replication::REPLICATION => Ok(execution),
        _ => Err(ApiError::not_found(format!("execution {id} not found"))),
    }
}

/// `GET /replication/executions?policy_id&status&trigger&page&page_size`:
/// newest first.
pub async fn list_replication_executions(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::Replication, Action::List)?;
    let paging = query.paging()?;
    let policy_id = match query.get("policy_id") {
        Some(text) => Some(path_int("policy_id", text)?),
        None => None,
    };
    let filter = ExecutionFilter {
        policy_id,
        statuses: query
            .get("status")
            .map(|s| job_statuses(s, false))
            .unwrap_or_default(),
        trigger: query.get("trigger").map(job_trigger),
    };
    let store = state.store.replication();
    let (total, executions) = store.executions(&filter, paging).await?;
    let ids: Vec<i64> = executions.iter().map(|e| e.id).collect();
    let counts = store.task_counts(&ids).await?;
    let items: Vec<Value> = executions
        .iter()
        .map(|e| execution_json(e, &counts))
        .collect();
    Ok(paged(&items, total, query.link(paging, total)))
}

/// Harbor's `StartReplicationExecution`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct StartReq {
    policy_id: i64,
}

/// `POST /replication/executions`: starts a run of the policy; 201 with
/// the run's `Location`.
pub async fn start_replication(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
    body: LaterJson<StartReq>,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::Replication, Action::Create)?;
    let req = body.parse()?;
    let policy = replication::get_to_start(&state, &principal, req.policy_id).await?;
    // Harbor's legacy scheduler calls this with `?trigger=scheduled`.
    let trigger = if query.get("trigger") == Some(model::SCHEDULED) {
        "SCHEDULE"
    } else {
        "MANUAL"
    };
    let id = replication::start(&state, &policy, trigger).await?;
    Ok((
        StatusCode::CREATED,
        [(
            header::LOCATION,
            format!("/api/v2.0/replication/executions/{id}"),
        )],
    )
        .into_response())
}

/// `GET /replication/executions/{id}`.
pub async fn get_replication_execution(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<Json<Value>> {
    principal.require_system(SystemResource::Replication, Action::Read)?;
    let execution = execution_for(&state, &id).await?;
    let counts = state
        .store
        .replication()
        .task_counts(&[execution.id])
        .await?;
    Ok(Json(execution_json(&execution, &counts)))
}

/// `PUT /replication/executions/{id}`: stops the run (its waiting tasks at
/// once, its running one at its worker's next lease renewal).
pub async fn stop_replication(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::Replication, Action::Create)?;
    let execution = execution_for(&state, &id).await?;
    state.store.jobs().stop(execution.id).await?;
    Ok(StatusCode::OK)
}

/// `GET /replication/executions/{id}/tasks?status&page&page_size`: one task
/// per repository, by id.
pub async fn list_replication_tasks(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::Replication, Action::List)?;
    let execution = execution_for(&state, &id).await?;
    let paging = query.paging()?;
    let statuses = query
        .get("status")
        .map(|s| job_statuses(s, true))
        .unwrap_or_default();
    let (total, tasks) = state
        .store
        .replication()
        .tasks(execution.id, &statuses, paging)
        .await?;
    let mut items: Vec<Value> = tasks.iter().map(task_json).collect();
    if let Some(kind) = query.get("resource_type") {
        items.retain(|t| t["resource_type"] == kind);
    }
    Ok(paged(&items, total, query.link(paging, total)))
}

/// `GET /replication/executions/{id}/tasks/{task_id}/log`: the task's log as text.
pub async fn get_replication_log(
    State(state): State<AppState>,
    principal: Principal,
    Path((id, task_id)): Path<(String, String)>,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::Replication, Action::Read)?;
    let execution = execution_for(&state, &id).await?;
    let tid = path_int("task_id", &task_id)?;
    let jobs = state.store.jobs();
    let planning = state
        .store
        .replication()
        .planning_task(execution.id)
        .await?;
    match jobs.task(tid).await? {
        Some(task) if task.execution_id == execution.id && Some(task.id) != planning => {
            Ok(super::text(jobs.log_text(task.id).await?))
        }
        _ => Err(ApiError::not_found(format!(
            "execution {} contains no task with ID {tid}",
            execution.id
        ))
        .into()),
    }
}

/// `GET /replication/adapterinfos`: how each registry type's endpoint is
/// entered (Docker Hub's is fixed).
pub async fn list_registry_provider_infos(principal: Principal) -> HarborResult<Json<Value>> {
    principal.require_system(SystemResource::ReplicationAdapter, Action::List)?;
    let mut out = Map::new();
    for kind in RegistryType::ALL {
        let info = match kind {
            RegistryType::DockerHub => json!({
                "endpoint_pattern": {
                    "endpoint_type": "EndpointPatternTypeFix",
                    "endpoints": [{"key": "hub.docker.com", "value": "https://hub.docker.com"}],
                },
            }),
            _ => json!({}),
        };
        out.insert(kind.name().to_string(), info);
    }
    Ok(Json(Value::Object(out)))
}
