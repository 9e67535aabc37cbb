//! Harbor's audit logs: `GET /audit-logs` (system administrators see every
//! entry, project administrators those of their projects) and
//! `GET /projects/{project_name}/logs` (one project's, for its administrators).

use axum::extract::{Path, State};
use axum::response::Response;
use berth_domain::model::ProjectRef;
use berth_domain::rbac::{Action, Resource, Role};
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

/// `GET /audit-logs`.
pub async fn list_audit_logs(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    let user = principal.require_user()?;
    let scope = if user.sysadmin {
        AuditScope::All
    } else {
        AuditScope::Projects(state.store.projects().administered_by(user.id).await?)
    };
    list(&state, &scope, &query).await
}

/// `GET /projects/{project_name}/logs`: for the project's administrators.
pub async fn get_logs(
    State(state): State<AppState>,
    principal: Principal,
    Path(project_name): Path<String>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let access = require_project(
        &state,
        principal.actor(),
        &ProjectRef::Name(project_name),
        Resource::Project,
        Action::Read,
    )
    .await?;
    principal.require_user()?;
    if !access.sysadmin && !access.roles.contains(&Role::ProjectAdmin) {
        return Err(ApiError::forbidden("only the project's administrators read its logs").into());
    }
    list(
        &state,
        &AuditScope::Projects(vec![access.project.id]),
        &query,
    )
    .await
}

async fn list(state: &AppState, scope: &AuditScope, query: &HarborQuery) -> HarborResult<Response> {
    let paging = query.paging()?;
    let (total, logs) = state
        .store
        .audit_logs()
        .list(scope, &query.query()?, &query.sort()?, paging)
        .await?;
    let wire: Vec<AuditLogWire> = logs.into_iter().map(AuditLogWire::from).collect();
    Ok(paged(&wire, total, query.link(paging, total)))
}
