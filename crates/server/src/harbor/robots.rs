//! Harbor's robot accounts (`/robots`): system robots for system
//! administrators, project robots for the project's administrators (Harbor's
//! `robot` resource of the project role model). The secret is shown once, at
//! creation or refresh, and kept as a slow hash; sign-in is in
//! [`crate::identity`].

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_auth::secret::random_alphanumeric;
use berth_domain::model::robot::{
    self, LEVEL_PROJECT, LEVEL_SYSTEM, RequestedPermission, RequestedScope, Robot, RobotAccess,
    RobotPermission, RobotScope,
};
use berth_domain::model::{Configuration, ProjectRef};
use berth_domain::query::QueryValue;
use berth_domain::rbac::{Action, Resource, SystemResource};
use berth_store::repo::robots::{NewRobot, RobotLevel};
use serde::{Deserialize, Serialize};

use crate::access::{ProjectAccess, require_project};
use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, LaterJson, paged, path_int};
use crate::identity::hash_password;
use crate::operations::{Routes, Surface};
use crate::service::robots;
use crate::state::AppState;
use berth_store::repo::robots::RobotChange;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/robots", list_robot)
        .post("/robots", create_robot)
        .get("/robots/{robot_id}", get_robot_by_id)
        .put("/robots/{robot_id}", update_robot)
        .patch("/robots/{robot_id}", refresh_sec)
        .delete("/robots/{robot_id}", delete_robot)
}

/// Harbor's `Access`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AccessWire {
    resource: String,
    action: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    effect: String,
}

/// Harbor's `RobotPermission`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PermissionWire {
    kind: String,
    namespace: String,
    access: Vec<AccessWire>,
}

impl PermissionWire {
    fn requested(&self) -> RequestedPermission {
        RequestedPermission {
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            access: self
                .access
                .iter()
                .map(|a| RobotAccess {
                    resource: a.resource.clone(),
                    action: a.action.clone(),
                    effect: a.effect.clone(),
                })
                .collect(),
        }
    }
}

impl From<&RobotPermission> for PermissionWire {
    fn from(p: &RobotPermission) -> Self {
        Self {
            kind: p.scope.kind().to_string(),
            namespace: p.scope.namespace().to_string(),
            access: p
                .access
                .iter()
                .map(|a| AccessWire {
                    resource: a.resource.clone(),
                    action: a.action.clone(),
                    effect: a.effect.clone(),
                })
                .collect(),
        }
    }
}

/// Harbor's `Robot` (never with its secret).
#[derive(Debug, Serialize)]
pub struct RobotWire {
    id: i64,
    name: String,
    description: String,
    level: &'static str,
    duration: i64,
    editable: bool,
    disable: bool,
    expires_at: i64,
    permissions: Vec<PermissionWire>,
    creator_type: String,
    creator_ref: i64,
    creation_time: String,
    update_time: String,
}

fn robot_wire(robot: &Robot, prefix: &str) -> RobotWire {
    RobotWire {
        id: robot.id,
        name: format!("{prefix}{}", robot.name),
        description: robot.description.clone(),
        level: robot.level(),
        duration: robot.duration,
        editable: true,
        disable: robot.disabled,
        expires_at: robot.expires_at,
        permissions: robot.permissions.iter().map(PermissionWire::from).collect(),
        creator_type: robot.creator_type.clone(),
        creator_ref: robot.creator_ref,
        creation_time: robot.created_at.clone(),
        update_time: robot.updated_at.clone(),
    }
}

/// Harbor's `RobotCreate`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RobotCreate {
    name: String,
    description: String,
    secret: Option<String>,
    level: String,
    disable: bool,
    duration: i64,
    permissions: Vec<PermissionWire>,
}

/// Harbor's `RobotCreated`.
#[derive(Debug, Serialize)]
pub struct RobotCreated {
    id: i64,
    name: String,
    secret: String,
    creation_time: String,
    expires_at: i64,
}

/// Harbor's `Robot` as an update body.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RobotUpdate {
    name: String,
    description: String,
    level: String,
    disable: bool,
    duration: Option<i64>,
    permissions: Vec<PermissionWire>,
}

/// Harbor's `RobotSec`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RobotSec {
    #[serde(skip_serializing_if = "String::is_empty")]
    secret: String,
}

async fn robot_prefix(state: &AppState) -> Result<String, ApiError> {
    let config = state.store.configurations().load().await?;
    Ok(config.string("robot_name_prefix").to_string())
}

/// A robot's lifetime in days: as asked, or the configured
/// `robot_token_duration` for 0 (Harbor's default).
fn lifetime_days(config: &Configuration, days: i64) -> i64 {
    match days {
        0 => config.int("robot_token_duration"),
        days => days,
    }
}

/// A generated secret that meets Harbor's rule (upper, lower, digit).
fn generate_secret() -> String {
    loop {
        let secret = random_alphanumeric(32);
        if robot::validate_secret(&secret).is_ok() {
            return secret;
        }
    }
}

/// The access to a project robot's project that `action` on robots needs;
/// for system robots, the system permission (system administrators, and
/// robots given it).
async fn require_robot_access(
    state: &AppState,
    principal: &Principal,
    project: Option<ProjectRef>,
    action: Action,
) -> Result<Option<ProjectAccess>, ApiError> {
    match project {
        None => {
            principal.require_system(SystemResource::Robot, action)?;
            Ok(None)
        }
        Some(project) => {
            let access =
                require_project(state, principal.actor(), &project, Resource::Robot, action)
                    .await?;
            Ok(Some(access))
        }
    }
}

/// Resolves the namespaces of `requested` to projects (404 for a missing
/// one) and checks that the caller holds every access it grants, so that no
/// one makes a robot stronger than themselves: system robots are made by
/// system administrators; a project robot's accesses must each be held by
/// its maker in that project.
async fn resolve_permissions(
    state: &AppState,
    principal: &Principal,
    requested: Vec<RequestedPermission>,
    maker: Option<&ProjectAccess>,
) -> Result<Vec<RobotPermission>, ApiError> {
    let mut permissions = Vec::with_capacity(requested.len());
    for permission in requested {
        let scope = match permission.scope()? {
            RequestedScope::System => RobotScope::System,
            RequestedScope::AllProjects => RobotScope::AllProjects,
            RequestedScope::Project(name) => {
                // A project robot's own project was loaded by the access check.
                let project = match maker.map(|m| &m.project).filter(|p| p.name == name) {
                    Some(project) => project.clone(),
                    None => state
                        .store
                        .projects()
                        .find(&ProjectRef::Name(name.clone()))
                        .await?
                        .ok_or_else(|| ApiError::not_found(format!("project {name} not found")))?,
                };
                RobotScope::Project {
                    id: project.id,
                    name: project.name,
                }
            }
        };
        let held = |a: &RobotAccess| match (maker, principal) {
            (Some(maker), _) => maker.holds(a),
            // A robot making a system robot grants only what it holds there.
            (None, Principal::Robot(robot)) => robot.robot.holds_in(&scope, a),
            (None, _) => true,
        };
        if let Some(access) = permission.access.iter().find(|a| !held(a)) {
            return Err(ApiError::forbidden(format!(
                "the caller does not hold {}:{} to grant it",
                access.resource, access.action
            )));
        }
        permissions.push(RobotPermission {
            scope,
            access: permission.access,
        });
    }
    Ok(permissions)
}

/// The project a request for a project-level robot names.
fn project_of(level: &str, permissions: &[PermissionWire]) -> Option<ProjectRef> {
    (level == LEVEL_PROJECT)
        .then(|| permissions.first())
        .flatten()
        .map(|p| ProjectRef::Name(p.namespace.clone()))
}

/// `POST /robots`: 201 with the robot's id, full name and secret (shown only
/// here), and its `Location`.
pub async fn create_robot(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
    body: LaterJson<RobotCreate>,
) -> HarborResult<Response> {
    principal.require_authenticated()?;
    let req = body.parse()?;
    robot::validate_name(&req.name)?;
    let requested: Vec<RequestedPermission> = req
        .permissions
        .iter()
        .map(PermissionWire::requested)
        .collect();
    robot::validate_grant(req.duration, &req.level, &requested)?;
    if let Some(secret) = &req.secret {
        robot::validate_secret(secret)?;
    }
    let project = project_of(&req.level, &req.permissions);
    let access = require_robot_access(&state, &principal, project, Action::Create).await?;
    let permissions = resolve_permissions(&state, &principal, requested, access.as_ref()).await?;
    let config = state.store.configurations().load().await?;
    let duration = lifetime_days(&config, req.duration);
    let expires_at = robot::expiry(berth_domain::time::unix_now(), duration);
    check_lifetime(&principal, expires_at)?;
    let secret = req.secret.unwrap_or_else(generate_secret);
    let (name, project_id) = match &access {
        Some(access) => (
            format!("{}+{}", access.project.name, req.name),
            Some(access.project.id),
        ),
        None => (req.name.clone(), None),
    };
    let (creator_type, creator_ref) = match &principal {
        Principal::Robot(robot) => ("robot", robot.robot.id),
        Principal::User(user) => ("local", user.id),
        Principal::Anonymous => return Err(ApiError::unauthorized().into()),
    };
    let change = RobotChange {
        prefix: config.string("robot_name_prefix"),
        by: principal.audit_name(),
    };
    let created = robots::create(
        &state,
        &NewRobot {
            name,
            description: req.description,
            project_id,
            secret_hash: hash_password(&secret).await?,
            duration,
            expires_at,
            disabled: req.disable,
            creator_type: creator_type.to_string(),
            creator_ref,
            permissions,
        },
        &change,
    )
    .await?;
    let full_name = format!("{}{}", config.string("robot_name_prefix"), created.name);
    let location = format!("{}/{}", query.path.trim_end_matches('/'), created.id);
    let body = RobotCreated {
        id: created.id,
        name: full_name,
        secret,
        creation_time: created.created_at,
        expires_at: created.expires_at,
    };
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(body),
    )
        .into_response())
}

/// What `q` asks a listing for: `Level=system` (the default) or
/// `Level=project,ProjectID=<id>`.
fn requested_level(query: &HarborQuery) -> Result<RobotLevel, ApiError> {
    let q = query.query()?;
    let exact = |names: &[&str]| {
        q.terms_for(names).find_map(|t| match &t.value {
            QueryValue::Exact(v) => Some(v.clone()),
            _ => None,
        })
    };
    match exact(&["Level", "level"]).as_deref() {
        None | Some(LEVEL_SYSTEM) => Ok(RobotLevel::System),
        Some(LEVEL_PROJECT) => {
            let id = exact(&["ProjectID", "project_id"]).ok_or_else(|| {
                ApiError::bad_request("must with project ID when to query project robots")
            })?;
            let id = id
                .parse()
                .map_err(|_| ApiError::bad_request("Project ID must be int type."))?;
            Ok(RobotLevel::Project(id))
        }
        Some(_) => Err(ApiError::bad_request("bad request error level input")),
    }
}

/// `GET /robots?q=Level=project,ProjectID=<id>`: a page of one level's robots.
pub async fn list_robot(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_authenticated()?;
    let level = requested_level(&query)?;
    let project = match level {
        RobotLevel::System => None,
        RobotLevel::Project(id) => Some(ProjectRef::Id(id)),
    };
    require_robot_access(&state, &principal, project, Action::List).await?;
    let paging = query.paging()?;
    let (total, robots) = state
        .store
        .robots()
        .list(level, &query.query()?, &query.sort()?, paging)
        .await?;
    let prefix = robot_prefix(&state).await?;
    let wire: Vec<RobotWire> = robots.iter().map(|r| robot_wire(r, &prefix)).collect();
    Ok(paged(&wire, total, query.link(paging, total)))
}

/// Robot `{robot_id}` if the caller may do `action` on it (404 when missing).
async fn robot_for(
    state: &AppState,
    principal: &Principal,
    robot_id: &str,
    action: Action,
) -> Result<(Robot, Option<ProjectAccess>), ApiError> {
    principal.require_authenticated()?;
    let id = path_int("robot_id", robot_id)?;
    let robot = state
        .store
        .robots()
        .get(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("robot {id} not found")))?;
    let project = robot.project_id.map(ProjectRef::Id);
    let access = require_robot_access(state, principal, project, action).await?;
    // Changing a robot, its secret included, is acting with its power: the
    // caller must hold every access it has.
    let held = |scope: &RobotScope, a: &RobotAccess| match (&access, principal) {
        (Some(access), _) => access.holds(a),
        (None, Principal::Robot(caller)) => caller.robot.holds_in(scope, a),
        (None, _) => true,
    };
    if action != Action::Read
        && let Some(stronger) = robot
            .permissions
            .iter()
            .flat_map(|p| p.access.iter().map(move |a| (&p.scope, a)))
            .find(|(scope, a)| !held(scope, a))
            .map(|(_, a)| a)
    {
        return Err(ApiError::forbidden(format!(
            "the robot holds {}:{}, which the caller does not",
            stronger.resource, stronger.action
        )));
    }
    Ok((robot, access))
}

/// Refuses a robot that would outlive the robot making or changing it.
fn check_lifetime(principal: &Principal, expires_at: i64) -> Result<(), ApiError> {
    match principal {
        Principal::Robot(maker) if maker.robot.outlived_by(expires_at) => Err(ApiError::forbidden(
            "a robot cannot give a robot a longer life than its own",
        )),
        _ => Ok(()),
    }
}

/// `GET /robots/{robot_id}`.
pub async fn get_robot_by_id(
    State(state): State<AppState>,
    principal: Principal,
    Path(robot_id): Path<String>,
) -> HarborResult<Json<RobotWire>> {
    let (robot, _) = robot_for(&state, &principal, &robot_id, Action::Read).await?;
    Ok(Json(robot_wire(&robot, &robot_prefix(&state).await?)))
}

/// `PUT /robots/{robot_id}`: description, disabled flag, duration (the
/// expiry counts from creation) and permissions; name and level stay.
pub async fn update_robot(
    State(state): State<AppState>,
    principal: Principal,
    Path(robot_id): Path<String>,
    body: LaterJson<RobotUpdate>,
) -> HarborResult<StatusCode> {
    let (mut robot, access) = robot_for(&state, &principal, &robot_id, Action::Update).await?;
    let req = body.parse()?;
    let duration = req.duration.unwrap_or(robot.duration);
    let requested: Vec<RequestedPermission> = req
        .permissions
        .iter()
        .map(PermissionWire::requested)
        .collect();
    robot::validate_grant(duration, &req.level, &requested)?;
    let config = state.store.configurations().load().await?;
    let prefix = config.string("robot_name_prefix");
    if req.level != robot.level() || req.name != format!("{prefix}{}", robot.name) {
        return Err(ApiError::bad_request("cannot update the level or name of robot").into());
    }
    if let (Some(access), Some(wire)) = (&access, req.permissions.first())
        && wire.namespace != access.project.name
    {
        return Err(ApiError::bad_request("bad request permission").into());
    }
    let permissions = resolve_permissions(&state, &principal, requested, access.as_ref()).await?;
    if duration != robot.duration {
        let duration = lifetime_days(&config, duration);
        let created = berth_domain::time::parse_timestamp(&robot.created_at)
            .map_or_else(berth_domain::time::unix_now, |t| t.unix_timestamp());
        robot.duration = duration;
        robot.expires_at = robot::expiry(created, duration);
        check_lifetime(&principal, robot.expires_at)?;
    }
    robot.description = req.description;
    robot.disabled = req.disable;
    robot.permissions = permissions;
    let change = RobotChange {
        prefix,
        by: principal.audit_name(),
    };
    if !robots::update(&state, &robot, &change).await? {
        return Err(ApiError::not_found(format!("robot {} not found", robot.id)).into());
    }
    Ok(StatusCode::OK)
}

/// `PATCH /robots/{robot_id}`: a new secret, the caller's (answered with an
/// empty body) or a generated one (answered once).
pub async fn refresh_sec(
    State(state): State<AppState>,
    principal: Principal,
    Path(robot_id): Path<String>,
    body: LaterJson<RobotSec>,
) -> HarborResult<Json<RobotSec>> {
    let (robot, _) = robot_for(&state, &principal, &robot_id, Action::Update).await?;
    let req = body.parse()?;
    let (secret, shown) = if req.secret.is_empty() {
        let secret = generate_secret();
        (secret.clone(), secret)
    } else {
        robot::validate_secret(&req.secret)?;
        (req.secret, String::new())
    };
    let hash = hash_password(&secret).await?;
    if !robots::set_secret(&state, robot.id, &hash).await? {
        return Err(ApiError::not_found(format!("robot {} not found", robot.id)).into());
    }
    Ok(Json(RobotSec { secret: shown }))
}

/// `DELETE /robots/{robot_id}`.
pub async fn delete_robot(
    State(state): State<AppState>,
    principal: Principal,
    Path(robot_id): Path<String>,
) -> HarborResult<StatusCode> {
    let (robot, _) = robot_for(&state, &principal, &robot_id, Action::Delete).await?;
    let prefix = robot_prefix(&state).await?;
    let change = RobotChange {
        prefix: &prefix,
        by: principal.audit_name(),
    };
    if !robots::delete(&state, &robot, &change).await? {
        return Err(ApiError::not_found(format!("robot {} not found", robot.id)).into());
    }
    Ok(StatusCode::OK)
}
