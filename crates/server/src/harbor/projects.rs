//! Projects: listProjects, headProject, createProject, getProject, updateProject,
//! deleteProject, getProjectDeletable, getProjectSummary. A project created
//! with a `registry_id` is a proxy cache of that upstream registry.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::project::validate_project_name;
use berth_domain::model::{CveAllowlist, Project, ProjectRef, metadata};
use berth_domain::rbac::{Action, Resource, Role};
use berth_domain::time::ZERO_TIME;
use berth_store::repo::projects::{ProjectDetails, ProjectFilter, REPOSITORIES_LEFT};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::registries::{RegistryWire, registry_wire};
use crate::access::{ProjectAccess, require_project};
use crate::error::{ApiError, HarborError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborJson, HarborQuery, LaterJson, header_bool, paged};
use crate::operations::{Routes, Surface};
use crate::service::projects::{self, NewProjectSpec};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/projects", list_projects)
        .head("/projects", head_project)
        .post("/projects", create_project)
        .get("/projects/{project_name_or_id}", get_project)
        .put("/projects/{project_name_or_id}", update_project)
        .delete("/projects/{project_name_or_id}", delete_project)
        .get(
            "/projects/{project_name_or_id}/_deletable",
            get_project_deletable,
        )
        .get(
            "/projects/{project_name_or_id}/summary",
            get_project_summary,
        )
}

/// Harbor's CVEAllowlistItem.
#[derive(Debug, Serialize)]
pub struct CveAllowlistItem {
    cve_id: String,
}

/// Harbor's CVEAllowlist as projects carry it (both times always the zero date).
#[derive(Debug, Serialize)]
pub struct CveAllowlistWire {
    #[serde(skip_serializing_if = "is_zero")]
    id: i64,
    #[serde(skip_serializing_if = "is_zero")]
    project_id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
    items: Option<Vec<CveAllowlistItem>>,
    creation_time: &'static str,
    update_time: &'static str,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// Harbor's Project model, with go-swagger's omission rules.
#[derive(Debug, Serialize)]
pub struct ProjectWire {
    project_id: i64,
    #[serde(skip_serializing_if = "is_zero")]
    owner_id: i64,
    name: String,
    #[serde(skip_serializing_if = "is_zero")]
    registry_id: i64,
    creation_time: String,
    update_time: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    owner_name: String,
    #[serde(skip_serializing_if = "is_zero")]
    current_user_role_id: i64,
    current_user_role_ids: Option<Vec<i64>>,
    repo_count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<BTreeMap<String, String>>,
    cve_allowlist: CveAllowlistWire,
}

/// Builds the wire form of `project` from the batched `details`.
pub(super) fn project_wire(project: &Project, details: &ProjectDetails, full: bool) -> ProjectWire {
    let role_ids = details.role_ids.get(&project.id).cloned();
    let highest = role_ids
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter_map(|&id| Role::from_id(id))
        .max_by_key(|r| r.rank())
        .map_or(0, Role::id);
    let allowlist = full.then(|| details.allowlists.get(&project.id)).flatten();
    let cve_allowlist = match allowlist {
        Some(list) => CveAllowlistWire {
            id: project.id,
            project_id: project.id,
            expires_at: list.expires_at,
            items: Some(
                list.items
                    .iter()
                    .map(|c| CveAllowlistItem { cve_id: c.clone() })
                    .collect(),
            ),
            creation_time: ZERO_TIME,
            update_time: ZERO_TIME,
        },
        None => CveAllowlistWire {
            id: 0,
            project_id: 0,
            expires_at: None,
            items: None,
            creation_time: ZERO_TIME,
            update_time: ZERO_TIME,
        },
    };
    ProjectWire {
        project_id: project.id,
        owner_id: project.owner_id,
        name: project.name.clone(),
        registry_id: project.registry_id.unwrap_or(0),
        creation_time: project.created_at.clone(),
        update_time: project.updated_at.clone(),
        owner_name: if full {
            details
                .owner_names
                .get(&project.id)
                .cloned()
                .unwrap_or_default()
        } else {
            String::new()
        },
        current_user_role_id: highest,
        current_user_role_ids: role_ids,
        repo_count: details.repo_counts.get(&project.id).copied().unwrap_or(0),
        metadata: full.then(|| {
            details
                .metadata
                .get(&project.id)
                .map(|m| m.iter().cloned().collect())
                .unwrap_or_default()
        }),
        cve_allowlist,
    }
}

/// Lists the projects the caller may see, paged.
pub async fn list_projects(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    let filter = ProjectFilter {
        public: query.opt_bool("public"),
        name: query.string("name"),
        owner: query.string("owner"),
        query: query.query()?,
        sort: query.sort()?,
        paging: query.paging()?,
    };
    let with_detail = query.bool("with_detail", true);
    let page = state
        .store
        .projects()
        .list(
            projects::project_list_viewer(&principal),
            &filter,
            principal.user().map(|u| u.id),
        )
        .await?;
    let wire: Vec<ProjectWire> = page
        .projects
        .iter()
        .map(|p| project_wire(p, &page.details, with_detail))
        .collect();
    Ok(paged(
        &wire,
        page.total,
        query.link(filter.paging, page.total),
    ))
}

/// 200 when a project with exactly `project_name` exists, else 404 (signed-in callers).
pub async fn head_project(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<StatusCode> {
    principal.require_authenticated()?;
    let name = query.required("project_name")?;
    if name.contains(' ') {
        return Err(ApiError::bad_request(format!("invalid project name: {name}")).into());
    }
    if validate_project_name(&name).is_ok() && state.store.projects().exists_named(&name).await? {
        Ok(StatusCode::OK)
    } else {
        Err(ApiError::not_found(format!("project {name} not found")).into())
    }
}

/// Harbor's ProjectReq.
#[derive(Debug, Deserialize)]
pub struct ProjectReq {
    #[serde(default)]
    project_name: Option<String>,
    #[serde(default)]
    public: Option<bool>,
    #[serde(default)]
    metadata: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    cve_allowlist: Option<CveAllowlistReq>,
    #[serde(default)]
    storage_limit: Option<i64>,
    #[serde(default)]
    registry_id: Option<i64>,
}

/// Harbor's CVEAllowlist as a request carries it (a project's, or the system's).
#[derive(Debug, Deserialize)]
pub struct CveAllowlistReq {
    #[serde(default)]
    project_id: Option<i64>,
    #[serde(default)]
    pub(super) expires_at: Option<i64>,
    #[serde(default)]
    pub(super) items: Option<Vec<CveAllowlistItemReq>>,
}

/// Harbor's CVEAllowlistItem as a request carries it: the swagger lets
/// `cve_id` be absent or null (then empty, which Harbor's validator refuses).
#[derive(Debug, Deserialize)]
pub struct CveAllowlistItemReq {
    #[serde(default)]
    cve_id: Option<String>,
}

/// The CVE ids of an allowlist's `items` (the field's name for messages):
/// trimmed, none empty (Harbor's validator's rule) and none twice.
pub(super) fn allowlist_items(
    items: Option<Vec<CveAllowlistItemReq>>,
    field: &str,
) -> Result<Vec<String>, ApiError> {
    let mut ids: Vec<String> = Vec::new();
    for (index, item) in items.unwrap_or_default().into_iter().enumerate() {
        let id = item.cve_id.unwrap_or_default().trim().to_string();
        if id.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{field}[{index}].cve_id is required: empty or whitespace-only CVE ID in allowlist"
            )));
        }
        if ids.contains(&id) {
            return Err(ApiError::bad_request(format!(
                "the cve_id {id} is duplicated in the allowlist"
            )));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// Creates a project owned by the caller, who becomes its projectAdmin.
pub async fn create_project(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    query: HarborQuery,
    HarborJson(req): HarborJson<ProjectReq>,
) -> HarborResult<Response> {
    let spec = NewProjectSpec {
        project_name: req.project_name,
        public: req.public,
        metadata: req.metadata,
        storage_limit: req.storage_limit,
        registry_id: req.registry_id,
    };
    let project = projects::create(&state, &principal, spec).await?;
    let base = query.path.trim_end_matches('/');
    let location = if header_bool(&headers, "x-resource-name-in-location") {
        format!("{base}/{}", project.name)
    } else {
        format!("{base}/{}", project.id)
    };
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
}

/// The caller of a project-scoped operation, with how its path names the
/// project (`X-Is-Resource-Name`): the preamble every such handler shares.
pub(crate) struct ProjectCaller {
    /// Who is calling.
    pub principal: Principal,
    is_resource_name: bool,
}

impl FromRequestParts<AppState> for ProjectCaller {
    type Rejection = HarborError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self {
            principal: Principal::from_request_parts(parts, state).await?,
            is_resource_name: header_bool(&parts.headers, "x-is-resource-name"),
        })
    }
}

impl ProjectCaller {
    /// The project `{project_name_or_id}` names.
    pub(super) fn project_ref(&self, text: &str) -> ProjectRef {
        ProjectRef::parse(text, self.is_resource_name)
    }

    /// Resolves `{project_name_or_id}` and checks that the caller may do
    /// `action` on `resource` there (Harbor's 401/403/404 semantics; a name no
    /// project can have is simply not found).
    pub(super) async fn require(
        &self,
        state: &AppState,
        project_name_or_id: &str,
        resource: Resource,
        action: Action,
    ) -> Result<ProjectAccess, ApiError> {
        let reference = self.project_ref(project_name_or_id);
        require_project(state, self.principal.actor(), &reference, resource, action).await
    }
}

/// One project with its details.
pub async fn get_project(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project_name_or_id): Path<String>,
) -> HarborResult<Json<ProjectWire>> {
    let access = caller
        .require(&state, &project_name_or_id, Resource::Project, Action::Read)
        .await?;
    let details = state
        .store
        .projects()
        .details(&[access.project.id], caller.principal.user().map(|u| u.id))
        .await?;
    Ok(Json(project_wire(&access.project, &details, true)))
}

/// Applies the metadata and CVE allowlist of a ProjectReq (other fields are
/// ignored). The project is looked up before the body is judged: an unknown
/// project is a 404 whatever the body.
pub async fn update_project(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project_name_or_id): Path<String>,
    body: LaterJson<ProjectReq>,
) -> HarborResult<StatusCode> {
    let access = caller
        .require(
            &state,
            &project_name_or_id,
            Resource::Project,
            Action::Update,
        )
        .await?;
    let req = body.parse()?;
    let project_id = access.project.id;
    let proxy = access.project.registry_id.is_some();
    let validated =
        projects::request_metadata(req.metadata.as_ref(), proxy, projects::RETENTION_ON_UPDATE)?
            .into_iter()
            .map(|(key, value)| metadata::normalize(&key, &value).map(|v| (key, v)))
            .collect::<Result<Vec<_>, _>>()?;
    let allowlist = match req.cve_allowlist {
        None => None,
        Some(list) => {
            if let Some(id) = list.project_id
                && id != 0
                && id != project_id
            {
                return Err(ApiError::bad_request(format!(
                    "project_id in cve_allowlist must be {project_id} but it's {id}"
                ))
                .into());
            }
            Some(CveAllowlist {
                expires_at: list.expires_at,
                items: allowlist_items(list.items, "cve_allowlist.items")?,
            })
        }
    };
    state
        .store
        .projects()
        .update(project_id, &validated, allowlist.as_ref())
        .await?;
    Ok(StatusCode::OK)
}

/// Deletes a project; 412 while it still has repositories.
pub async fn delete_project(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project_name_or_id): Path<String>,
) -> HarborResult<StatusCode> {
    let reference = caller.project_ref(&project_name_or_id);
    projects::delete(&state, &caller.principal, &reference).await?;
    Ok(StatusCode::OK)
}

/// Harbor's ProjectDeletable (`deletable: false` is omitted).
#[derive(Debug, Serialize)]
pub struct ProjectDeletable {
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deletable: bool,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'static str,
}

/// Whether the project could be deleted now.
pub async fn get_project_deletable(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project_name_or_id): Path<String>,
) -> HarborResult<Json<ProjectDeletable>> {
    let access = caller
        .require(
            &state,
            &project_name_or_id,
            Resource::Project,
            Action::Delete,
        )
        .await?;
    let repos = state
        .store
        .projects()
        .repository_count(access.project.id)
        .await?;
    Ok(Json(if repos > 0 {
        ProjectDeletable {
            deletable: false,
            message: REPOSITORIES_LEFT,
        }
    } else {
        ProjectDeletable {
            deletable: true,
            message: "",
        }
    }))
}

/// Harbor's ResourceList.
#[derive(Debug, Serialize)]
pub struct ResourceList {
    storage: i64,
}

/// The quota part of a summary.
#[derive(Debug, Serialize)]
pub struct SummaryQuota {
    hard: ResourceList,
    used: ResourceList,
}

/// Harbor's ProjectSummary.
#[derive(Debug, Default, Serialize)]
pub struct ProjectSummary {
    repo_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    project_admin_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    maintainer_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    developer_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    guest_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    limited_guest_count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    quota: Option<SummaryQuota>,
    #[serde(skip_serializing_if = "Option::is_none")]
    registry: Option<RegistryWire>,
}

/// Repository count, member counts (for callers who may list members) and quota.
pub async fn get_project_summary(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project_name_or_id): Path<String>,
) -> HarborResult<Json<ProjectSummary>> {
    let access = caller
        .require(&state, &project_name_or_id, Resource::Project, Action::Read)
        .await?;
    let counts = state.store.projects().counts(access.project.id).await?;
    let mut summary = ProjectSummary {
        repo_count: counts.repo_count,
        ..ProjectSummary::default()
    };
    if access.allows(Resource::Member, Action::List) {
        for (role, count) in counts.members_by_role {
            match Role::from_id(role) {
                Some(Role::ProjectAdmin) => summary.project_admin_count = count,
                Some(Role::Maintainer) => summary.maintainer_count = count,
                Some(Role::Developer) => summary.developer_count = count,
                Some(Role::Guest) => summary.guest_count = count,
                Some(Role::LimitedGuest) => summary.limited_guest_count = count,
                None => {}
            }
        }
    }
    if access.allows(Resource::Quota, Action::Read) {
        let config = state.store.configurations().load().await?;
        if config.flag("quota_per_project_enable")
            && let Some((hard, used)) = counts.quota
        {
            summary.quota = Some(SummaryQuota {
                hard: ResourceList { storage: hard },
                used: ResourceList { storage: used },
            });
        }
    }
    if let Some(id) = access.project.registry_id {
        summary.registry = state
            .store
            .registries()
            .get(id)
            .await?
            .map(|r| registry_wire(&r, false));
    }
    Ok(Json(summary))
}

impl ProjectWire {
    /// Drops `owner_name` (search results do not carry it).
    pub(super) fn clear_owner_name(&mut self) {
        self.owner_name.clear();
    }
}
