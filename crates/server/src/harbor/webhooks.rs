//! Harbor's webhooks (`/projects/{p}/webhook/...`, the `webhook` tag):
//! project administrators manage a project's policies and read them, their
//! deliveries (executions with one task each) and the tasks' logs;
//! maintainers only list them, as in Harbor.

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::webhook::{self, Policy};
use berth_domain::rbac::{Action, Resource};
use berth_domain::time::ZERO_TIME;
use berth_store::repo::jobs::{Execution, Task};
use serde_json::{Map, Value, json};

use berth_store::repo::webhooks::SYSTEM;

use crate::error::{ApiError, HarborError, HarborResult};
use crate::extract::harbor::{HarborQuery, LaterJson, paged, path_int};
use crate::harbor::projects::ProjectCaller;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

const BASE: &str = "/projects/{project_name_or_id}/webhook";
/// Berth's system-wide policies (goharbor/harbor #21370), for administrators.
const SYSTEM_BASE: &str = "/system/webhook/policies";

pub(super) fn routes() -> Routes {
    use axum::http::Method;
    use axum::routing::{delete, get, post, put};
    let policies = format!("{BASE}/policies");
    let policy = format!("{policies}/{{webhook_policy_id}}");
    let executions = format!("{policy}/executions");
    let tasks = format!("{executions}/{{execution_id}}/tasks");
    let log = format!("{tasks}/{{task_id}}/log");
    // Harbor's operationIds of this tag start with a capital.
    Routes::new(Surface::Harbor)
        .named(
            Method::GET,
            &policies,
            "ListWebhookPoliciesOfProject",
            get(list_webhook_policies_of_project),
        )
        .named(
            Method::POST,
            &policies,
            "CreateWebhookPolicyOfProject",
            post(create_webhook_policy_of_project),
        )
        .named(
            Method::GET,
            &policy,
            "GetWebhookPolicyOfProject",
            get(get_webhook_policy_of_project),
        )
        .named(
            Method::PUT,
            &policy,
            "UpdateWebhookPolicyOfProject",
            put(update_webhook_policy_of_project),
        )
        .named(
            Method::DELETE,
            &policy,
            "DeleteWebhookPolicyOfProject",
            delete(delete_webhook_policy_of_project),
        )
        .named(
            Method::GET,
            &executions,
            "ListExecutionsOfWebhookPolicy",
            get(list_executions_of_webhook_policy),
        )
        .named(
            Method::GET,
            &tasks,
            "ListTasksOfWebhookExecution",
            get(list_tasks_of_webhook_execution),
        )
        .named(
            Method::GET,
            &log,
            "GetLogsOfWebhookTask",
            get(get_logs_of_webhook_task),
        )
        .named(
            Method::GET,
            &format!("{BASE}/lasttrigger"),
            "LastTrigger",
            get(last_trigger),
        )
        .named(
            Method::GET,
            &format!("{BASE}/events"),
            "GetSupportedEventTypes",
            get(get_supported_event_types),
        )
        .named(
            Method::GET,
            &format!("{BASE}/jobs"),
            "ListWebhookJobs",
            get(list_webhook_jobs),
        )
        .merge(system_routes())
}

/// Berth's own operations (not Harbor's), in the Harbor API's tree and error format.
fn system_routes() -> Routes {
    let system_policy = format!("{SYSTEM_BASE}/{{webhook_policy_id}}");
    Routes::new(Surface::Berth)
        .get(SYSTEM_BASE, list_system_webhook_policies)
        .post(SYSTEM_BASE, create_system_webhook_policy)
        .get(&system_policy, get_system_webhook_policy)
        .put(&system_policy, update_system_webhook_policy)
        .delete(&system_policy, delete_system_webhook_policy)
        .get(
            &format!("{system_policy}/executions"),
            list_executions_of_system_webhook_policy,
        )
        .get(
            &format!("{system_policy}/executions/{{execution_id}}/tasks"),
            list_tasks_of_system_webhook_execution,
        )
        .get(
            &format!("{system_policy}/executions/{{execution_id}}/tasks/{{task_id}}/log"),
            get_logs_of_system_webhook_task,
        )
}

fn policy_not_found(id: i64) -> ApiError {
    ApiError::not_found(format!("notificationPolicy {id} not found"))
}

/// Harbor's Execution: zero values left out; a delivery not yet done is `Running`.
fn execution_json(execution: &Execution, tasks: &[Task]) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(execution.id));
    out.insert("vendor_type".into(), json!(execution.vendor_type));
    out.insert("vendor_id".into(), json!(execution.vendor_id));
    let status = match execution.status.as_str() {
        "Pending" => "Running",
        other => other,
    };
    out.insert("status".into(), json!(status));
    if !execution.status_message.is_empty() {
        out.insert("status_message".into(), json!(execution.status_message));
    }
    let mut metrics = Map::new();
    metrics.insert("task_count".into(), json!(tasks.len()));
    for task in tasks {
        let key = format!("{}_task_count", task.status.to_ascii_lowercase());
        let count = metrics.get(&key).and_then(Value::as_i64).unwrap_or(0) + 1;
        metrics.insert(key, json!(count));
    }
    out.insert("metrics".into(), Value::Object(metrics));
    out.insert("trigger".into(), json!(execution.trigger));
    let attrs: Value = serde_json::from_str(&execution.extra_attrs).unwrap_or(Value::Null);
    if attrs.as_object().is_some_and(|a| !a.is_empty()) {
        out.insert("extra_attrs".into(), attrs);
    }
    out.insert("start_time".into(), json!(execution.start_time));
    out.insert(
        "end_time".into(),
        json!(execution.end_time.as_deref().unwrap_or(ZERO_TIME)),
    );
    Value::Object(out)
}

/// Harbor's Task.
fn task_json(task: &Task) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(task.id));
    out.insert("execution_id".into(), json!(task.execution_id));
    out.insert("status".into(), json!(task.status));
    if !task.status_message.is_empty() {
        out.insert("status_message".into(), json!(task.status_message));
    }
    out.insert("run_count".into(), json!(task.attempts));
    out.insert("creation_time".into(), json!(task.creation_time));
    out.insert("update_time".into(), json!(task.update_time));
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

/// A policy scope's list, paged.
async fn list_in(state: &AppState, scope: i64, query: &HarborQuery) -> HarborResult<Response> {
    let paging = query.paging()?;
    let (total, policies) = state.store.webhooks().list(scope, paging).await?;
    Ok(paged(&policies, total, query.link(paging, total)))
}

/// Checks and adds a policy to a scope; 201 with its location under `base`.
async fn create_in(
    state: &AppState,
    scope: i64,
    principal: &crate::extract::Principal,
    body: &LaterJson<Policy>,
    base: &str,
) -> HarborResult<Response> {
    let mut policy = body.parse()?;
    policy.validate()?;
    // The creator is who asks, whatever the body says.
    let id = state
        .store
        .webhooks()
        .create(scope, &policy, principal.audit_name())
        .await?;
    crate::service::webhooks::refresh_watching(state).await;
    let location = format!("/api/v2.0{base}/{id}");
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
}

/// Policy `id` of a scope; 404 when it has none.
async fn policy_in(state: &AppState, scope: i64, id: &str) -> Result<Policy, HarborError> {
    let id = path_int("webhook_policy_id", id)?;
    Ok(state
        .store
        .webhooks()
        .get(scope, id)
        .await?
        .ok_or_else(|| policy_not_found(id))?)
}

/// Replaces policy `id` of a scope (every field, as Harbor: an `enabled`
/// left out disables it).
async fn update_in(
    state: &AppState,
    scope: i64,
    id: &str,
    body: &LaterJson<Policy>,
) -> HarborResult<StatusCode> {
    let id = policy_in(state, scope, id).await?.id;
    let mut policy = body.parse()?;
    policy.validate()?;
    if !state.store.webhooks().update(scope, id, &policy).await? {
        return Err(policy_not_found(id).into());
    }
    crate::service::webhooks::refresh_watching(state).await;
    Ok(StatusCode::OK)
}

/// Removes policy `id` of a scope and its deliveries.
async fn delete_in(state: &AppState, scope: i64, id: &str) -> HarborResult<StatusCode> {
    let id = path_int("webhook_policy_id", id)?;
    if !state.store.webhooks().delete(scope, id).await? {
        return Err(policy_not_found(id).into());
    }
    crate::service::webhooks::refresh_watching(state).await;
    Ok(StatusCode::OK)
}

/// Execution `execution_id` of `policy`; 404 when it is another's.
async fn execution_of(
    state: &AppState,
    policy: &Policy,
    execution_id: &str,
) -> Result<Execution, HarborError> {
    let eid = path_int("execution_id", execution_id)?;
    match state.store.jobs().execution(eid).await? {
        Some(execution)
            if execution.vendor_id == policy.id
                && berth_store::repo::webhooks::VENDOR_TYPES
                    .contains(&execution.vendor_type.as_str()) =>
        {
            Ok(execution)
        }
        _ => Err(
            ApiError::not_found(format!("execution {eid} not found in policy {}", policy.id))
                .into(),
        ),
    }
}

/// A policy's deliveries, newest first, paged.
async fn executions_of(
    state: &AppState,
    policy: &Policy,
    query: &HarborQuery,
) -> HarborResult<Response> {
    let paging = query.paging()?;
    let (total, executions) = state.store.webhooks().executions(policy.id, paging).await?;
    let ids: Vec<i64> = executions.iter().map(|e| e.id).collect();
    let tasks = state.store.jobs().tasks_of(&ids).await?;
    let items: Vec<Value> = executions
        .iter()
        .map(|execution| {
            let own: Vec<Task> = tasks
                .iter()
                .filter(|t| t.execution_id == execution.id)
                .cloned()
                .collect();
            execution_json(execution, &own)
        })
        .collect();
    Ok(paged(&items, total, query.link(paging, total)))
}

/// The task of one of a policy's deliveries, paged.
async fn tasks_of(
    state: &AppState,
    policy: &Policy,
    eid: &str,
    query: &HarborQuery,
) -> HarborResult<Response> {
    let execution = execution_of(state, policy, eid).await?;
    let paging = query.paging()?;
    let (total, tasks) = paging.page_of(state.store.jobs().tasks(execution.id).await?);
    let items: Vec<Value> = tasks.iter().map(task_json).collect();
    Ok(paged(&items, total, query.link(paging, total)))
}

/// The log of a task of one of a policy's deliveries, as text.
async fn log_of(state: &AppState, policy: &Policy, eid: &str, tid: &str) -> HarborResult<Response> {
    let execution = execution_of(state, policy, eid).await?;
    let tid = path_int("task_id", tid)?;
    let jobs = state.store.jobs();
    match jobs.task(tid).await? {
        Some(task) if task.execution_id == execution.id => {
            Ok(super::text(jobs.log_text(task.id).await?))
        }
        _ => Err(ApiError::not_found(format!(
            "task {tid} not found in execution {}",
            execution.id
        ))
        .into()),
    }
}

/// `GET .../webhook/policies`: the project's policies, by id, paged.
pub async fn list_webhook_policies_of_project(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project): Path<String>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let access = caller
        .require(&state, &project, Resource::NotificationPolicy, Action::List)
        .await?;
    list_in(&state, access.project.id, &query).await
}

/// `POST .../webhook/policies`: 201 with the new policy's location.
pub async fn create_webhook_policy_of_project(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project): Path<String>,
    body: LaterJson<Policy>,
) -> HarborResult<Response> {
    let access = caller
        .require(
            &state,
            &project,
            Resource::NotificationPolicy,
            Action::Create,
        )
        .await?;
    let base = format!("/projects/{project}/webhook/policies");
    create_in(&state, access.project.id, &caller.principal, &body, &base).await
}

/// `GET .../webhook/policies/{id}`.
pub async fn get_webhook_policy_of_project(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project, id)): Path<(String, String)>,
) -> HarborResult<axum::Json<Policy>> {
    let access = caller
        .require(&state, &project, Resource::NotificationPolicy, Action::Read)
        .await?;
    Ok(axum::Json(policy_in(&state, access.project.id, &id).await?))
}

/// `PUT .../webhook/policies/{id}`.
pub async fn update_webhook_policy_of_project(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project, id)): Path<(String, String)>,
    body: LaterJson<Policy>,
) -> HarborResult<StatusCode> {
    let access = caller
        .require(
            &state,
            &project,
            Resource::NotificationPolicy,
            Action::Update,
        )
        .await?;
    update_in(&state, access.project.id, &id, &body).await
}

/// `DELETE .../webhook/policies/{id}`, with its deliveries.
pub async fn delete_webhook_policy_of_project(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project, id)): Path<(String, String)>,
) -> HarborResult<StatusCode> {
    let access = caller
        .require(
            &state,
            &project,
            Resource::NotificationPolicy,
            Action::Delete,
        )
        .await?;
    delete_in(&state, access.project.id, &id).await
}

/// The project's policy `id`, as the caller may read it.
async fn readable_policy(
    state: &AppState,
    caller: &ProjectCaller,
    project: &str,
    id: &str,
) -> Result<Policy, HarborError> {
    let access = caller
        .require(state, project, Resource::NotificationPolicy, Action::Read)
        .await?;
    policy_in(state, access.project.id, id).await
}

/// `GET .../policies/{id}/executions`: the policy's deliveries, newest first.
pub async fn list_executions_of_webhook_policy(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project, id)): Path<(String, String)>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let policy = readable_policy(&state, &caller, &project, &id).await?;
    executions_of(&state, &policy, &query).await
}

/// `GET .../executions/{eid}/tasks`: the delivery's task.
pub async fn list_tasks_of_webhook_execution(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project, id, eid)): Path<(String, String, String)>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let policy = readable_policy(&state, &caller, &project, &id).await?;
    tasks_of(&state, &policy, &eid, &query).await
}

/// `GET .../tasks/{tid}/log`: what the delivery did, as text.
pub async fn get_logs_of_webhook_task(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project, id, eid, tid)): Path<(String, String, String, String)>,
) -> HarborResult<Response> {
    let policy = readable_policy(&state, &caller, &project, &id).await?;
    log_of(&state, &policy, &eid, &tid).await
}

/// `GET .../webhook/jobs?policy_id=N` (Harbor's deprecated `webhookjob`
/// tag): a policy's deliveries as jobs, newest first, paged, optionally of
/// some statuses (`status=Success&status=Error`).
pub async fn list_webhook_jobs(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project): Path<String>,
    query: HarborQuery,
    axum::extract::RawQuery(raw): axum::extract::RawQuery,
) -> HarborResult<Response> {
    let access = caller
        .require(&state, &project, Resource::NotificationPolicy, Action::List)
        .await?;
    let id = query.required("policy_id")?;
    let policy = policy_in(&state, access.project.id, &id).await?;
    let statuses: Vec<String> = url_pairs(raw.as_deref().unwrap_or(""))
        .filter(|(name, _)| name == "status")
        .map(|(_, value)| value)
        .collect();
    let paging = query.paging()?;
    let (_, executions) = state
        .store
        .webhooks()
        .executions(policy.id, berth_domain::query::Paging::new(1, 0)?)
        .await?;
    let jobs: Vec<Value> = executions
        .iter()
        .map(|execution| {
            let status = match execution.status.as_str() {
                "Pending" => "Running",
                other => other,
            };
            (status, execution)
        })
        .filter(|(status, _)| statuses.is_empty() || statuses.iter().any(|s| s == status))
        .map(|(status, execution)| {
            let attrs: Value = serde_json::from_str(&execution.extra_attrs).unwrap_or_default();
            json!({
                "id": execution.id,
                "policy_id": execution.vendor_id,
                "event_type": attrs["event_type"],
                "notify_type": if execution.vendor_type == "SLACK" { "slack" } else { "http" },
                "status": status,
                "job_detail": attrs["payload"].as_str().unwrap_or_default(),
                "creation_time": execution.start_time,
                "update_time": execution.update_time,
            })
        })
        .collect();
    let (total, page) = paging.page_of(jobs);
    Ok(paged(&page, total, query.link(paging, total)))
}

/// The decoded `name=value` pairs of a query string, repeated names kept.
fn url_pairs(raw: &str) -> impl Iterator<Item = (String, String)> + '_ {
    serde_urlencoded::from_str::<Vec<(String, String)>>(raw)
        .unwrap_or_default()
        .into_iter()
}

/// `GET /system/webhook/policies` (Berth's, administrators): policies that
/// receive every project's events.
pub async fn list_system_webhook_policies(
    State(state): State<AppState>,
    principal: crate::extract::Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_sysadmin()?;
    list_in(&state, SYSTEM, &query).await
}

/// `POST /system/webhook/policies`.
pub async fn create_system_webhook_policy(
    State(state): State<AppState>,
    principal: crate::extract::Principal,
    body: LaterJson<Policy>,
) -> HarborResult<Response> {
    principal.require_sysadmin()?;
    create_in(&state, SYSTEM, &principal, &body, SYSTEM_BASE).await
}

/// `GET /system/webhook/policies/{id}`.
pub async fn get_system_webhook_policy(
    State(state): State<AppState>,
    principal: crate::extract::Principal,
    Path(id): Path<String>,
) -> HarborResult<axum::Json<Policy>> {
    principal.require_sysadmin()?;
    Ok(axum::Json(policy_in(&state, SYSTEM, &id).await?))
}

/// `PUT /system/webhook/policies/{id}`.
pub async fn update_system_webhook_policy(
    State(state): State<AppState>,
    principal: crate::extract::Principal,
    Path(id): Path<String>,
    body: LaterJson<Policy>,
) -> HarborResult<StatusCode> {
    principal.require_sysadmin()?;
    update_in(&state, SYSTEM, &id, &body).await
}

/// `DELETE /system/webhook/policies/{id}`.
pub async fn delete_system_webhook_policy(
    State(state): State<AppState>,
    principal: crate::extract::Principal,
    Path(id): Path<String>,
) -> HarborResult<StatusCode> {
    principal.require_sysadmin()?;
    delete_in(&state, SYSTEM, &id).await
}

/// `GET /system/webhook/policies/{id}/executions`.
pub async fn list_executions_of_system_webhook_policy(
    State(state): State<AppState>,
    principal: crate::extract::Principal,
    Path(id): Path<String>,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_sysadmin()?;
    let policy = policy_in(&state, SYSTEM, &id).await?;
    executions_of(&state, &policy, &query).await
}

/// `GET /system/webhook/policies/{id}/executions/{eid}/tasks`.
pub async fn list_tasks_of_system_webhook_execution(
    State(state): State<AppState>,
    principal: crate::extract::Principal,
    Path((id, eid)): Path<(String, String)>,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_sysadmin()?;
    let policy = policy_in(&state, SYSTEM, &id).await?;
    tasks_of(&state, &policy, &eid, &query).await
}

/// `GET /system/webhook/policies/{id}/executions/{eid}/tasks/{tid}/log`.
pub async fn get_logs_of_system_webhook_task(
    State(state): State<AppState>,
    principal: crate::extract::Principal,
    Path((id, eid, tid)): Path<(String, String, String)>,
) -> HarborResult<Response> {
    principal.require_sysadmin()?;
    let policy = policy_in(&state, SYSTEM, &id).await?;
    log_of(&state, &policy, &eid, &tid).await
}

/// `GET .../webhook/lasttrigger`: per policy and event type, when a delivery
/// last started (Harbor's zero time when never), newest policies first.
pub async fn last_trigger(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project): Path<String>,
) -> HarborResult<axum::Json<Vec<Value>>> {
    let access = caller
        .require(&state, &project, Resource::NotificationPolicy, Action::Read)
        .await?;
    let webhooks = state.store.webhooks();
    let (_, mut policies) = webhooks
        .list(access.project.id, berth_domain::query::Paging::new(1, 0)?)
        .await?;
    policies.reverse();
    let ids: Vec<i64> = policies.iter().map(|p| p.id).collect();
    let triggers = webhooks.last_triggers(&ids).await?;
    let mut items = Vec::new();
    for policy in &policies {
        for event_type in &policy.event_types {
            let last = triggers
                .iter()
                .find(|(id, kind, _)| *id == policy.id && kind == event_type)
                .map_or(ZERO_TIME, |(_, _, at)| at.as_str());
            let mut item = Map::new();
            item.insert("policy_name".into(), json!(policy.name));
            item.insert("event_type".into(), json!(event_type));
            if policy.enabled {
                item.insert("enabled".into(), json!(true));
            }
            item.insert("creation_time".into(), json!(policy.creation_time));
            item.insert("last_trigger_time".into(), json!(last));
            items.push(Value::Object(item));
        }
    }
    Ok(axum::Json(items))
}

/// `GET .../webhook/events`: the event types, notify types and payload formats.
pub async fn get_supported_event_types(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project): Path<String>,
) -> HarborResult<axum::Json<Value>> {
    caller
        .require(&state, &project, Resource::NotificationPolicy, Action::Read)
        .await?;
    Ok(axum::Json(json!({
        "event_type": webhook::EVENT_TYPES,
        "notify_type": webhook::NOTIFY_TYPES,
        "payload_formats": [{"notify_type": webhook::HTTP, "formats": webhook::payload_formats(webhook::HTTP)}],
    })))
}
