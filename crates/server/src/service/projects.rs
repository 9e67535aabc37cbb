//! Projects: creating one (with its creation rules) and deleting one, for
//! every surface, and the view of projects a caller has.

use berth_domain::model::metadata;
use berth_domain::model::project::{MAX_STORAGE_LIMIT, validate_project_name};
use berth_domain::model::registry::RegistryType;
use berth_domain::model::{ADMIN_USER_ID, NewProject, Project, ProjectRef};
use berth_domain::rbac::{Action, Resource, SystemResource};
use berth_store::repo::projects::Viewer;
use serde_json::Value;

use crate::access::require_project;
use crate::error::{ApiError, ErrorKind};
use crate::extract::Principal;
use crate::state::AppState;

/// A project to create, as createProject describes it.
#[derive(Debug, Default)]
pub struct NewProjectSpec {
    /// Its name.
    pub project_name: Option<String>,
    /// Whether anyone may pull from it (unless `metadata.public` says).
    pub public: Option<bool>,
    /// Its metadata, as given (values must be strings).
    pub metadata: Option<serde_json::Map<String, Value>>,
    /// Its storage limit in bytes (administrators only; else the default).
    pub storage_limit: Option<i64>,
    /// The upstream registry of a proxy-cache project.
    pub registry_id: Option<i64>,
}

impl NewProjectSpec {
    /// A project named `name`, public or not, with defaults for the rest.
    pub fn named(name: String, public: bool) -> Self {
        Self {
            project_name: Some(name),
            public: Some(public),
            ..Self::default()
        }
    }
}

/// The viewer of lists for a principal.
pub fn viewer(principal: &Principal) -> Viewer {
    match principal {
        Principal::User(u) if u.is_sysadmin() => Viewer::Admin,
        Principal::User(u) => Viewer::User(u.id),
        Principal::Robot(r) => Viewer::Robot(r.robot.id),
        Principal::Anonymous => Viewer::Anonymous,
    }
}

/// The viewer of listProjects: as [`viewer`], except that a robot with the
/// system `project` `list` permission sees every project, as Harbor shows
/// them to whoever holds it.
pub fn project_list_viewer(principal: &Principal) -> Viewer {
    match principal {
        Principal::Robot(_) if principal.can(SystemResource::Project, Action::List) => {
            Viewer::Admin
        }
        _ => viewer(principal),
    }
}

/// Harbor's message for a `retention_id` in a createProject body.
const RETENTION_ON_CREATE: &str = "bad request: the retention_id in the request's payload when creating a project should be omitted, alternatively passing an empty string";
/// Harbor's message for a `retention_id` in an updateProject body.
pub const RETENTION_ON_UPDATE: &str = "the retention_id in the request's payload when updating a project should be omitted, alternatively passing the one that has already been associated to this project";

/// The metadata of a ProjectReq, as given: unknown keys are dropped (as
/// go-swagger's binding drops them), and so are the proxy-cache keys of a
/// normal project and `enable_content_trust` of a proxy-cache one (`proxy`);
/// values must be strings; a non-empty `retention_id` is a 400 with
/// `retention_message`.
pub fn request_metadata(
    map: Option<&serde_json::Map<String, Value>>,
    proxy: bool,
    retention_message: &'static str,
) -> Result<Vec<(String, String)>, ApiError> {
    let mut out = Vec::new();
    for (key, value) in map.into_iter().flatten() {
        let proxy_only = key.starts_with("proxy_") || key == "max_upstream_conn";
        let dropped = if proxy {
            key == "enable_content_trust"
        } else {
            proxy_only
        };
        if key != "retention_id" && (!metadata::is_writable(key) || dropped) {
            continue;
        }
        let value = match value {
            Value::String(s) => s.clone(),
            Value::Null => continue,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "metadata.{key} in body must be of type string"
                )));
            }
        };
        if key == "retention_id" {
            if !value.is_empty() {
                return Err(ApiError::bad_request(retention_message));
            }
            continue;
        }
        out.push((key.clone(), value));
    }
    Ok(out)
}

/// Creates a project owned by the calling user, who becomes its
/// projectAdmin: the rules of createProject (project robots may not, the
/// creation restriction, quota, metadata); records `project.created`.
pub async fn create(
    state: &AppState,
    principal: &Principal,
    req: NewProjectSpec,
) -> Result<Project, ApiError> {
    if let Principal::Robot(robot) = principal
        && robot.robot.project_id.is_some()
    {
        return Err(ApiError::forbidden(
            "Only system level robot can create project",
        ));
    }
    principal.require_authenticated()?;
    // A robot's project is owned by the built-in administrator, as Harbor
    // gives it to the first one.
    let owner = match principal.user() {
        Some(user) => user.clone(),
        None => state
            .store
            .users()
            .find_by_id(ADMIN_USER_ID)
            .await?
            .ok_or_else(|| ApiError::internal("the built-in admin is missing"))?,
    };
    let admin = principal.can(SystemResource::Project, Action::Create);
    let config = state.store.configurations().load().await?;
    if config.string("project_creation_restriction") == "adminonly" && !admin {
        return Err(ApiError::forbidden("Only system admin can create project"));
    }
    if req.registry_id.is_some() && !admin {
        return Err(ApiError::forbidden(
            "Only system admin can create proxy cache project",
        ));
    }
    let mut storage_limit = -1;
    if config.flag("quota_per_project_enable") {
        storage_limit = match req.storage_limit {
            Some(limit) if limit != 0 && admin => limit,
            _ => config.int("storage_per_project"),
        };
    }
    let mut pairs = request_metadata(
        req.metadata.as_ref(),
        req.registry_id.is_some(),
        RETENTION_ON_CREATE,
    )?;
    if !pairs.iter().any(|(k, v)| k == "public" && !v.is_empty()) {
        pairs.retain(|(k, _)| k != "public");
        let public = req.public.unwrap_or(false);
        pairs.push(("public".into(), public.to_string()));
    }
    let mut validated = Vec::new();
    for (key, value) in pairs.into_iter().filter(|(_, v)| !v.is_empty()) {
        if key == "public" && value != "true" && value != "false" {
            return Err(ApiError::bad_request(format!(
                "metadata.public should only be 'true' or 'false', but got: '{value}'"
            )));
        }
        validated.push((key.clone(), metadata::normalize(&key, &value)?));
    }
    let registry_id = match req.registry_id {
        Some(id) => Some(proxy_registry(state, id).await?),
        None => None,
    };
    if storage_limit != -1 && !(1..=MAX_STORAGE_LIMIT).contains(&storage_limit) {
        return Err(ApiError::bad_request(format!(
            "bad request: invalid storage limit {storage_limit}: it should be -1 or between 1 and {MAX_STORAGE_LIMIT}"
        )));
    }
    let name = req.project_name.unwrap_or_default();
    validate_project_name(&name)?;
    let project = state
        .store
        .projects()
        .create(
            &NewProject {
                name,
                owner_id: owner.id,
                metadata: validated,
                storage_limit,
                registry_id,
            },
            principal.audit_name(),
        )
        .await?;
    state.deliver_events();
    if project.registry_id.is_some() {
        // Harbor's default for a proxy cache: what nobody pulled for a week
        // goes (the project's retention policy, editable like any).
        if let Err(err) = super::retention::create_proxy_cache_default(state, &project).await {
            tracing::warn!(error = %err.message, project = project.id, "giving a proxy-cache project its retention policy failed");
        }
    }
    Ok(project)
}

/// The upstream registry `id` of a new proxy-cache project, checked as
/// Harbor does (a positive id of a registry of a type proxies support); a
/// missing registry is a 400 (Harbor answers 500).
async fn proxy_registry(state: &AppState, id: i64) -> Result<i64, ApiError> {
    if id <= 0 {
        return Err(ApiError::bad_request(format!(
            "bad request: {id} is invalid value of registry_id, it should be greater than 0"
        )));
    }
    let registry =
        state.store.registries().get(id).await?.ok_or_else(|| {
            ApiError::bad_request(format!("bad request: registry {id} not found"))
        })?;
    if RegistryType::parse(&registry.settings.kind).is_none() {
        return Err(ApiError::bad_request(format!(
            "bad request: unsupported registry type {}",
            registry.settings.kind
        )));
    }
    Ok(registry.id)
}

/// Deletes the project `reference` names (project delete permission); 412
/// while it still has repositories; records `project.deleted`.
pub async fn delete(
    state: &AppState,
    principal: &Principal,
    reference: &ProjectRef,
) -> Result<(), ApiError> {
    let access = require_project(
        state,
        principal.actor(),
        reference,
        Resource::Project,
        Action::Delete,
    )
    .await?;
    match state
        .store
        .projects()
        .delete(access.project.id, principal.audit_name())
        .await
    {
        Ok(_) => {
            state.deliver_events();
            Ok(())
        }
        Err(berth_store::StoreError::Domain(berth_domain::DomainError::Precondition(m))) => Err(
            ApiError::new(ErrorKind::Precondition, format!("precondition failed: {m}")),
        ),
        Err(other) => Err(other.into()),
    }
}
