//! `GET /permissions` (Harbor's getPermissions): the permissions a robot
//! account can be given, system and project level, for the forms that make
//! robots.

use axum::Json;
use axum::extract::State;
use berth_domain::rbac::{ROBOT_PROJECT_PERMISSIONS, ROBOT_SYSTEM_PERMISSIONS};
use serde::Serialize;

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor).get("/permissions", get_permissions)
}

/// Harbor's Permission: one resource and action.
#[derive(Debug, Serialize)]
pub struct PermissionWire {
    resource: &'static str,
    action: &'static str,
}

/// Harbor's Permissions; a list nobody may see is left out.
#[derive(Debug, Serialize)]
pub struct PermissionsWire {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<PermissionWire>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    project: Vec<PermissionWire>,
}

fn wire(pairs: &[(&'static str, &'static str)]) -> Vec<PermissionWire> {
    pairs
        .iter()
        .map(|&(resource, action)| PermissionWire { resource, action })
        .collect()
}

/// `GET /permissions`: for system administrators both lists, for users who
/// administer a project (directly or through a group) the project list only;
/// anonymous callers 401, anyone else (robots included) 403, as in Harbor.
pub async fn get_permissions(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Json<PermissionsWire>> {
    principal.require_authenticated()?;
    let system = principal.is_sysadmin();
    let project_admin = match principal.user() {
        Some(user) if !system => {
            let administered = state.store.projects().administered_by(user.id).await?;
            !administered.is_empty()
        }
        _ => false,
    };
    if !system && !project_admin {
        return Err(
            ApiError::forbidden("only admins(system and project) can access permissions").into(),
        );
    }
    Ok(Json(PermissionsWire {
        system: if system {
            wire(ROBOT_SYSTEM_PERMISSIONS)
        } else {
            Vec::new()
        },
        project: wire(ROBOT_PROJECT_PERMISSIONS),
    }))
}
