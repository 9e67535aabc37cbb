//! Harbor's audit logs: `GET /audit-logs` (system administrators see every
//! entry, project administrators those of their projects) and
//! `GET /projects/{project_name}/logs` (one project's, for its administrators),
//! and the same rows as Harbor 2.13's extended audit logs (`AuditLogExt`):
//! `GET /auditlog-exts` and `GET /projects/{project_name}/auditlog-exts`, and
//! the event types they hold (`GET /auditlog-exts/events`).

use axum::extract::{Path, State};
use axum::response::Response;
use berth_domain::model::ProjectRef;
use berth_domain::rbac::{Action, Resource, SystemResource};
use berth_store::repo::audit_logs::{AuditLog, AuditScope};
use serde::Serialize;

use crate::access::require_project;
use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, paged};
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/audit-logs", list_audit_logs)
        .get("/projects/{project_name}/logs", get_logs)
        .get("/auditlog-exts", list_audit_log_exts)
        .get("/projects/{project_name}/auditlog-exts", get_log_exts)
        .get("/auditlog-exts/events", list_audit_log_event_types)
}

/// Harbor's AuditLog.
#[derive(Debug, Serialize)]
pub struct AuditLogWire {
    id: i64,
    username: String,
    resource: String,
    resource_type: String,
    operation: String,
    op_time: String,
}

impl From<AuditLog> for AuditLogWire {
    fn from(log: AuditLog) -> Self {
        Self {
            id: log.id,
            username: log.username,
            resource: log.resource,
            resource_type: log.resource_type,
            operation: log.operation,
            op_time: log.op_time,
        }
    }
}

/// Harbor's AuditLogExt: Berth's entries are those of operations that were
/// done, so `operation_result` is always true; the description is worded as
/// Harbor's event handlers word it.
#[derive(Debug, Serialize)]
pub struct AuditLogExtWire {
    id: i64,
    username: String,
    resource: String,
    resource_type: String,
    operation: String,
    operation_description: String,
    operation_result: bool,
    op_time: String,
}

impl From<AuditLog> for AuditLogExtWire {
    fn from(log: AuditLog) -> Self {
        let operation_description =
            crate::audit::operation_description(&log.operation, &log.resource_type, &log.resource);
        Self {
            id: log.id,
            username: log.username,
            resource: log.resource,
            resource_type: log.resource_type,
            operation: log.operation,
            operation_description,
            operation_result: true,
            op_time: log.op_time,
        }
    }
}

/// Whose entries the caller of `/audit-logs` and `/auditlog-exts` sees, as
/// in Harbor: with the system `audit-log` `list` permission (system
/// administrators, robots given it) every entry; other users those of the
/// projects whose log they may list (the projects they administer); other
/// robots none.
async fn caller_scope(state: &AppState, principal: &Principal) -> Result<AuditScope, ApiError> {
    principal.require_authenticated()?;
    if principal.can(SystemResource::AuditLog, Action::List) {
        return Ok(AuditScope::All);
    }
    Ok(AuditScope::Projects(match principal.user() {
        Some(user) => state.store.projects().administered_by(user.id).await?,
        None => Vec::new(),
    }))
}

/// The scope of `/projects/{project_name}/logs` and `.../auditlog-exts`: the
/// project, for those who may list its log (`log` `list`: its administrators,
/// system administrators, robots given it).
async fn project_scope(
    state: &AppState,
    principal: &Principal,
    project_name: String,
) -> Result<AuditScope, ApiError> {
    let access = require_project(
        state,
        principal.actor(),
        &ProjectRef::Name(project_name),
        Resource::Log,
        Action::List,
    )
    .await?;
    Ok(AuditScope::Projects(vec![access.project.id]))
}

/// `GET /audit-logs`.
pub async fn list_audit_logs(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    let scope = caller_scope(&state, &principal).await?;
    list::<AuditLogWire>(&state, &scope, &query).await
}

/// `GET /projects/{project_name}/logs`: for the project's administrators.
pub async fn get_logs(
    State(state): State<AppState>,
    principal: Principal,
    Path(project_name): Path<String>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let scope = project_scope(&state, &principal, project_name).await?;
    list::<AuditLogWire>(&state, &scope, &query).await
}

/// Harbor's AuditLogEventType.
#[derive(Debug, Serialize)]
pub struct AuditLogEventTypeWire {
    event_type: String,
}

/// `GET /auditlog-exts/events`: the event types Berth records, named as
/// `disabled_audit_log_event_types` and audit purges name them; for the
/// callers of `/auditlog-exts` (signed-in users).
pub async fn list_audit_log_event_types(
    principal: Principal,
) -> HarborResult<axum::Json<Vec<AuditLogEventTypeWire>>> {
    principal.require_user()?;
    Ok(axum::Json(
        crate::audit::event_types()
            .into_iter()
            .map(|event_type| AuditLogEventTypeWire { event_type })
            .collect(),
    ))
}

/// `GET /auditlog-exts`: `/audit-logs`' entries and rules, as AuditLogExt.
pub async fn list_audit_log_exts(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    let scope = caller_scope(&state, &principal).await?;
    list::<AuditLogExtWire>(&state, &scope, &query).await
}

/// `GET /projects/{project_name}/auditlog-exts`: `/projects/{project_name}/logs`'
/// entries and rules, as AuditLogExt.
pub async fn get_log_exts(
    State(state): State<AppState>,
    principal: Principal,
    Path(project_name): Path<String>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let scope = project_scope(&state, &principal, project_name).await?;
    list::<AuditLogExtWire>(&state, &scope, &query).await
}

/// One page of `scope`'s entries, filtered and sorted by `query`, as `W`.
async fn list<W: From<AuditLog> + Serialize>(
    state: &AppState,
    scope: &AuditScope,
    query: &HarborQuery,
) -> HarborResult<Response> {
    let paging = query.paging()?;
    let (total, logs) = state
        .store
        .audit_logs()
        .list(scope, &query.query()?, &query.sort()?, paging)
        .await?;
    let wire: Vec<W> = logs.into_iter().map(W::from).collect();
    Ok(paged(&wire, total, query.link(paging, total)))
}
