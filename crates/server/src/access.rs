//! Project permission checks with Harbor's role model, shared by the Harbor and
//! registry surfaces. Each surface renders the resulting [`ApiError`] its own way.

use berth_domain::model::project::validate_project_name;
use berth_domain::model::{Project, ProjectRef, User};
use berth_domain::rbac::{self, Action, Resource, Role};

use crate::error::{ApiError, ErrorKind};
use crate::state::AppState;

/// A caller's standing in one project.
#[derive(Debug, Clone)]
pub struct ProjectAccess {
    /// The project.
    pub project: Project,
    /// The caller's roles in it (direct and through groups).
    pub roles: Vec<Role>,
    /// Whether the caller is a system administrator (allowed everything).
    pub sysadmin: bool,
    /// Whether the caller is anonymous.
    pub anonymous: bool,
}

impl ProjectAccess {
    /// Whether the caller may do `action` on `resource` in this project.
    pub fn allows(&self, resource: Resource, action: Action) -> bool {
        self.sysadmin
            || (self.project.public && rbac::public_allows(resource, action))
            || self
                .roles
                .iter()
                .any(|&r| rbac::role_allows(r, resource, action))
    }

    /// Passes when allowed; else 401 for anonymous callers, 403 `forbidden` for others.
    pub fn require(&self, resource: Resource, action: Action) -> Result<(), ApiError> {
        if self.allows(resource, action) {
            Ok(())
        } else {
            Err(denied(self.anonymous))
        }
    }

    /// The caller's highest role, if any.
    pub fn highest_role(&self) -> Option<Role> {
        rbac::highest(&self.roles)
    }
}

fn denied(anonymous: bool) -> ApiError {
    if anonymous {
        ApiError::unauthorized()
    } else {
        ApiError::new(ErrorKind::Forbidden, "forbidden")
    }
}

/// Loads `project` and the caller's roles in it, and checks `action` on
/// `resource`. As in Harbor, a missing project is a 404 only for system
/// administrators; everyone else gets the 401/403 a forbidden project gives.
/// A name no project can have (`a b`, `UPPER`, a NUL byte, 300 characters) is
/// missing without asking the database.
pub async fn require_project(
    state: &AppState,
    user: Option<&User>,
    project: &ProjectRef,
    resource: Resource,
    action: Action,
) -> Result<ProjectAccess, ApiError> {
    let found = match project {
        ProjectRef::Name(name) if validate_project_name(name).is_err() => None,
        _ => state.store.projects().find(project).await?,
    };
    require_found_project(state, user, project, found, resource, action).await
}

/// [`require_project`] for a project the caller already looked up: `found` is
/// what `project` resolved to (`None`: no such project).
pub async fn require_found_project(
    state: &AppState,
    user: Option<&User>,
    project: &ProjectRef,
    found: Option<Project>,
    resource: Resource,
    action: Action,
) -> Result<ProjectAccess, ApiError> {
    let sysadmin = user.is_some_and(|u| u.sysadmin);
    let Some(found) = found else {
        return Err(if sysadmin {
            ApiError::not_found(format!("project {project} not found"))
        } else {
            denied(user.is_none())
        });
    };
    let roles = match user {
        Some(u) => state.store.projects().roles_of(found.id, u.id).await?,
        _ => Vec::new(),
    };
    let access = ProjectAccess {
        project: found,
        roles,
        sysadmin,
        anonymous: user.is_none(),
    };
    access.require(resource, action)?;
    Ok(access)
}
