//! Harbor's repositories: listAllRepositories, listRepositories, getRepository,
//! updateRepository, deleteRepository. Repository names with `/` arrive
//! double-encoded (`a%252Fb`) and are decoded a second time here.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use berth_domain::model::{Project, ProjectRef, Repository};
use berth_domain::rbac::{Action, Resource};
use berth_store::repo::projects::Viewer;
use berth_store::repo::repositories::RepositoryFilter;
use percent_encoding::percent_decode_str;
use serde_json::{Value, json};

use crate::access::require_project;
use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, paged};
use crate::operations::{Routes, Surface};
use crate::service::repositories::{self, repository_not_found};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/repositories", list_all_repositories)
        .get("/projects/{project_name}/repositories", list_repositories)
        .get(
            "/projects/{project_name}/repositories/{repository_name}",
            get_repository,
        )
        .put(
            "/projects/{project_name}/repositories/{repository_name}",
            update_repository,
        )
        .delete(
            "/projects/{project_name}/repositories/{repository_name}",
            delete_repository,
        )
}

/// The repository name within the project from the path: Harbor's clients
/// encode a `/` in it twice (`a%252Fb` arrives as `a%2Fb`), so it is decoded again.
pub(super) fn name_in_project(repository_name: &str) -> String {
    percent_decode_str(repository_name)
        .decode_utf8_lossy()
        .into_owned()
}

/// The full repository name from the path: `project/` + the twice-decoded name.
pub(super) fn full_name(project_name: &str, repository_name: &str) -> String {
    format!("{project_name}/{}", name_in_project(repository_name))
}

/// Harbor's Repository model.
pub(super) fn repository_json(r: &Repository) -> Value {
    let mut body = json!({
        "id": r.id,
        "project_id": r.project_id,
        "name": r.name,
        "artifact_count": r.artifact_count,
        "pull_count": r.pull_count,
        "creation_time": r.created_at,
        "update_time": r.updated_at,
    });
    if !r.description.is_empty() {
        body["description"] = json!(r.description);
    }
    body
}

/// Lists the repositories `filter` selects, with Harbor's paging headers.
async fn list(
    state: &AppState,
    query: &HarborQuery,
    viewer: Viewer,
    project_id: Option<i64>,
) -> HarborResult<Response> {
    let filter = RepositoryFilter {
        project_id,
        viewer,
        query: query.query()?,
        sort: query.sort()?,
        paging: query.paging()?,
    };
    let (repositories, total) = state.store.repositories().list(&filter).await?;
    let body: Vec<Value> = repositories.iter().map(repository_json).collect();
    Ok(paged(&body, total, query.link(filter.paging, total)))
}

/// `GET /repositories`: the repositories of every project the caller can see.
pub async fn list_all_repositories(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    list(
        &state,
        &query,
        crate::service::projects::viewer(&principal),
        None,
    )
    .await
}

/// `GET /projects/{project_name}/repositories`.
pub async fn list_repositories(
    State(state): State<AppState>,
    principal: Principal,
    Path(project_name): Path<String>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let access = require_project(
        &state,
        principal.actor(),
        &ProjectRef::Name(project_name),
        Resource::Repository,
        Action::List,
    )
    .await?;
    list(&state, &query, Viewer::Admin, Some(access.project.id)).await
}

/// Checks `action` on the project and loads the repository (missing: `None`).
pub(crate) async fn load_repository(
    state: &AppState,
    principal: &Principal,
    project_name: &str,
    repository_name: &str,
    resource: Resource,
    action: Action,
) -> Result<(Project, String, Option<Repository>), ApiError> {
    let reached = repositories::reach(
        state,
        principal,
        project_name,
        &name_in_project(repository_name),
        resource,
        action,
    )
    .await?;
    Ok((reached.access.project, reached.name, reached.repository))
}

/// `GET /projects/{project_name}/repositories/{repository_name}`.
pub async fn get_repository(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name)): Path<(String, String)>,
) -> HarborResult<axum::Json<Value>> {
    let (_, name, repository) = load_repository(
        &state,
        &principal,
        &project_name,
        &repository_name,
        Resource::Repository,
        Action::Read,
    )
    .await?;
    let repository = repository.ok_or_else(|| repository_not_found(&name))?;
    Ok(axum::Json(repository_json(&repository)))
}

/// Go's `template.HTMLEscapeString`, which Harbor applies to descriptions.
fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// `PUT /projects/{project_name}/repositories/{repository_name}`: only the description changes.
pub async fn update_repository(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name)): Path<(String, String)>,
    _headers: HeaderMap,
    body: Bytes,
) -> HarborResult<()> {
    let update: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid repository body: {e}")))?;
    if !update.is_object() {
        return Err(ApiError::bad_request("the body must be a Repository object").into());
    }
    let description = match update.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => html_escape(s),
        Some(_) => return Err(ApiError::bad_request("description must be a string").into()),
    };
    let name = name_in_project(&repository_name);
    repositories::describe(&state, &principal, &project_name, &name, &description).await?;
    Ok(())
}

/// `DELETE /projects/{project_name}/repositories/{repository_name}`: the
/// repository and every artifact in it.
pub async fn delete_repository(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name)): Path<(String, String)>,
) -> HarborResult<()> {
    let name = name_in_project(&repository_name);
    repositories::delete(&state, &principal, &project_name, &name).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_escaping() {
        assert_eq!(full_name("p", "a%2Fb"), "p/a/b");
        assert_eq!(full_name("p", "a"), "p/a");
        assert_eq!(
            html_escape(r#"<b>"x"&'y'</b>"#),
            "&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;"
        );
    }
}
