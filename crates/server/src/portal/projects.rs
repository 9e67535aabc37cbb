//! The projects list (search, paging, public/private, repository counts),
//! creating and deleting projects.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use berth_domain::model::ProjectRef;
use berth_domain::query::Paging;
use berth_domain::rbac::{self, Action, Resource, Role};
use berth_store::repo::projects::ProjectFilter;
use serde::Deserialize;

use super::html::{self, esc, url_part};
use super::{PortalError, PortalForm, PortalUser, TokenForm, check_form_csrf, pager, see_other};
use crate::error::{ApiError, ErrorKind};
use crate::service::projects::{self, NewProjectSpec, viewer};
use crate::state::AppState;

/// Projects per page.
const PAGE_SIZE: i64 = 15;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/harbor/projects", get(list_projects).post(create_project))
        .route(
            "/harbor/projects/{project_name}/delete",
            post(delete_project),
        )
}

/// The list's query: search text, visibility, page, and a message to show.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ListQuery {
    #[serde(default)]
    name: String,
    #[serde(default)]
    public: String,
    #[serde(default)]
    page: Option<i64>,
    #[serde(default)]
    deleted: Option<String>,
}

/// `GET /harbor/projects`.
async fn list_projects(
    State(state): State<AppState>,
    portal: PortalUser,
    Query(query): Query<ListQuery>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    let principal = portal.principal();
    let page = query.page.unwrap_or(1).clamp(1, 1_000_000);
    let name = query.name.trim().to_string();
    let public = match query.public.as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    };
    let filter = ProjectFilter {
        public,
        name: (!name.is_empty()).then(|| name.clone()),
        owner: None,
        query: Default::default(),
        sort: Vec::new(),
        paging: Paging {
            page,
            page_size: PAGE_SIZE,
        },
    };
    let listed = state
        .store
        .projects()
        .list(viewer(&principal), &filter, Some(session.user.id))
        .await
        .map_err(|e| PortalError::api(e.into(), Some(session)))?;
    let mut rows = String::new();
    for project in &listed.projects {
        let roles: Vec<Role> = listed
            .details
            .role_ids
            .get(&project.id)
            .map(|ids| ids.iter().filter_map(|&id| Role::from_id(id)).collect())
            .unwrap_or_default();
        let may_delete = session.user.is_sysadmin()
            || roles
                .iter()
                .any(|&r| rbac::role_allows(r, Resource::Project, Action::Delete));
        let role = rbac::highest(&roles).map_or("—".to_string(), |r| r.name().to_string());
        let delete = if may_delete {
            format!(
                r#"<form class="inline" method="post" action="/harbor/projects/{path}/delete" data-confirm="Delete project {name}?">{csrf}<button class="danger small" type="submit">Delete</button></form>"#,
                path = url_part(&project.name),
                name = esc(&project.name),
                csrf = html::csrf_field(session),
            )
        } else {
            String::new()
        };
        rows.push_str(&format!(
            r#"<tr data-project="{name}"><td><a href="/harbor/projects/{path}">{name}</a></td><td>{access}</td><td class="project-type">{kind}</td><td>{role}</td><td class="repo-count">{repos}</td><td>{created}</td><td>{delete}</td></tr>"#,
            name = esc(&project.name),
            path = url_part(&project.name),
            access = if project.public { "Public" } else { "Private" },
            kind = if project.registry_id.is_some() { "Proxy Cache" } else { "Project" },
            role = esc(&role),
            repos = listed.details.repo_counts.get(&project.id).copied().unwrap_or(0),
            created = esc(&html::when(&project.created_at)),
        ));
    }
    if rows.is_empty() {
        rows = r#"<tr><td colspan="7" class="muted">No projects.</td></tr>"#.into();
    }
    let notice = match &query.deleted {
        Some(name) => html::notice("ok", &format!("Project {name} was deleted.")),
        None => String::new(),
    };
    let selected = |value: &str| {
        if query.public == value {
            " selected"
        } else {
            ""
        }
    };
    let main = format!(
        r#"<h1>Projects</h1>{notice}
<div class="toolbar">
<form method="get" action="/harbor/projects" role="search">
<input type="search" name="name" id="project_search" value="{name}" placeholder="Search by name" aria-label="Search projects by name">
<select name="public" aria-label="Visibility"><option value="">All</option><option value="true"{sel_pub}>Public</option><option value="false"{sel_priv}>Private</option></select>
<button class="secondary" type="submit">Search</button></form>
<form method="post" action="/harbor/projects">{csrf}
<input type="text" name="project_name" id="create_project_name" placeholder="New project name" required aria-label="New project name">
<label><input type="checkbox" name="public" value="true"> Public</label>
<button type="submit" id="create_project">New project</button></form>
</div>
<table id="projects"><thead><tr><th>Name</th><th>Access</th><th>Type</th><th>Role</th><th>Repositories</th><th>Created</th><th></th></tr></thead>
<tbody>{rows}</tbody></table>
{pager}"#,
        name = esc(&name),
        sel_pub = selected("true"),
        sel_priv = selected("false"),
        csrf = html::csrf_field(session),
        pager = pager(
            &format!(
                "/harbor/projects?name={}&public={}&",
                url_part(&name),
                url_part(&query.public)
            ),
            page,
            PAGE_SIZE,
            listed.total,
            "projects"
        ),
    );
    Ok(html::page("Projects", Some(session), &main).into_response())
}

/// The create form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct CreateForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    project_name: String,
    #[serde(default)]
    public: Option<String>,
}

/// `POST /harbor/projects`: creates a project with createProject's rules.
async fn create_project(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<CreateForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let name = form.project_name.trim().to_string();
    let public = form.public.as_deref() == Some("true");
    let project = projects::create(&state, &portal.principal(), NewProjectSpec::named(name, public))
        .await
        .map_err(|err| {
            let err = match err.kind {
                ErrorKind::Conflict => ApiError::new(
                    ErrorKind::Conflict,
                    "A project with this name already exists.",
                ),
                ErrorKind::BadRequest => ApiError::bad_request(format!(
                    "{}. Project names are 1 to 255 lower-case letters, digits and . _ - (starting with a letter or digit).",
                    err.message.trim_end_matches('.')
                )),
                _ => err,
            };
            PortalError::api(err, Some(session))
        })?;
    Ok(see_other(&format!(
        "/harbor/projects/{}",
        url_part(&project.name)
    )))
}

/// `POST /harbor/projects/{project_name}/delete`: deleteProject's rules; a
/// project that still has repositories is explained (412).
async fn delete_project(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    PortalForm(form): PortalForm<TokenForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let reference = ProjectRef::Name(project_name.clone());
    match projects::delete(&state, &portal.principal(), &reference).await {
        Ok(()) => Ok(see_other(&format!(
            "/harbor/projects?deleted={}",
            url_part(&project_name)
        ))),
        Err(err) if err.kind == ErrorKind::Precondition => Err(failed(ApiError::new(
            ErrorKind::Precondition,
            format!(
                "Project {project_name} cannot be deleted because it still contains repositories. Delete its repositories (or their artifacts) first, then the project."
            ),
        ))),
        Err(err) => Err(failed(err)),
    }
}
