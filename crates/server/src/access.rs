//! Project permission checks with Harbor's role model, shared by the Harbor and
//! registry surfaces. Each surface renders the resulting [`ApiError`] its own way.

use berth_domain::model::project::validate_project_name;
use berth_domain::model::robot::RobotAccess;
use berth_domain::model::{Project, ProjectRef, Robot, User};
use berth_domain::rbac::{self, Action, Resource, Role};

use crate::error::{ApiError, ErrorKind};
use crate::state::AppState;

/// Who asks, as the role model sees them: every surface's caller comes down to one.
#[derive(Debug, Clone, Copy)]
pub enum Actor<'a> {
    /// No credentials.
    Anonymous,
    /// A user: roles from memberships, or a system administrator.
    User(&'a User),
    /// A robot account: exactly its permissions.
    Robot(&'a Robot),
}

impl Actor<'_> {
    /// Whether the caller is a system administrator.
    pub fn is_sysadmin(self) -> bool {
        matches!(self, Self::User(user) if user.is_sysadmin())
    }
}

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
    /// The calling robot account, whose permissions stand in for roles.
    pub robot: Option<Robot>,
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
            || self
                .robot
                .as_ref()
                .is_some_and(|r| r.allows(self.project.id, resource, action))
    }

    /// Whether the caller holds the whole of a robot access in this project,
    /// so that it may grant it or act on a robot that has it: system and
    /// project administrators hold every one; a robot, what its own
    /// permissions cover with no deny taking part of it away.
    pub fn holds(&self, access: &RobotAccess) -> bool {
        self.sysadmin
            || self.roles.contains(&Role::ProjectAdmin)
            || self
                .robot
                .as_ref()
                .is_some_and(|r| r.holds(self.project.id, access))
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
    actor: Actor<'_>,
    project: &ProjectRef,
    resource: Resource,
    action: Action,
) -> Result<ProjectAccess, ApiError> {
    let found = match project {
        ProjectRef::Name(name) if validate_project_name(name).is_err() => None,
        _ => state.store.projects().find(project).await?,
    };
    require_found_project(state, actor, project, found, resource, action).await
}

/// [`require_project`] for a project the caller already looked up: `found` is
/// what `project` resolved to (`None`: no such project).
pub async fn require_found_project(
    state: &AppState,
    actor: Actor<'_>,
    project: &ProjectRef,
    found: Option<Project>,
    resource: Resource,
    action: Action,
) -> Result<ProjectAccess, ApiError> {
    let anonymous = matches!(actor, Actor::Anonymous);
    let Some(found) = found else {
        return Err(if actor.is_sysadmin() {
            ApiError::not_found(format!("project {project} not found"))
        } else {
            denied(anonymous)
        });
    };
    let access = project_access(state, actor, found).await?;
    access.require(resource, action)?;
    Ok(access)
}

/// `actor`'s standing in `project`, with no check made yet.
pub async fn project_access(
    state: &AppState,
    actor: Actor<'_>,
    project: Project,
) -> Result<ProjectAccess, ApiError> {
    let roles = match actor {
        Actor::User(user) => state.roles_in(project.id, user.id).await?,
        _ => Vec::new(),
    };
    Ok(ProjectAccess {
        project,
        roles,
        sysadmin: actor.is_sysadmin(),
        anonymous: matches!(actor, Actor::Anonymous),
        robot: match actor {
            Actor::Robot(robot) => Some(robot.clone()),
            _ => None,
        },
    })
}
