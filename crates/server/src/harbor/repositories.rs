//! Harbor's repositories: listAllRepositories, listRepositories, getRepository,
//! updateRepository, deleteRepository. Repository names with `/` arrive
//! double-encoded (`a%252Fb`) and are decoded a second time here.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{OriginalUri, Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use berth_domain::model::{Project, ProjectRef, Repository};
use berth_domain::rbac::{Action, Resource};
use berth_store::repo::repositories::{RepositoryQuery, RepositorySort, Visibility};
use percent_encoding::percent_decode_str;
use serde_json::{Value, json};

use super::listing::{Paging, parse_q, parse_sort};
use crate::access::require_project;
use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::state::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/repositories", get(list_all_repositories))
        .route(
            "/projects/{project_name}/repositories",
            get(list_repositories),
        )
        .route(
            "/projects/{project_name}/repositories/{repository_name}",
            get(get_repository)
                .put(update_repository)
                .delete(delete_repository),
        )
}

/// The full repository name from the path: `project/` + the twice-decoded name.
pub(super) fn full_name(project_name: &str, repository_name: &str) -> String {
    let decoded = percent_decode_str(repository_name).decode_utf8_lossy();
    format!("{project_name}/{decoded}")
}

/// The query string as pairs; a malformed one is a 400.
pub(super) fn query_pairs(raw: Option<&str>) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(raw.unwrap_or(""))
        .map_err(|_| ApiError::bad_request("invalid query string"))
}

/// The value of `key` among `pairs`.
pub(super) fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
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

fn repository_query(pairs: &[(String, String)]) -> Result<(RepositoryQuery, Paging), ApiError> {
    let paging = Paging::parse(param(pairs, "page"), param(pairs, "page_size"))?;
    let mut query = RepositoryQuery {
        project_id: None,
        visibility: Visibility::All,
        name: None,
        id: None,
        sort: Vec::new(),
        page: paging.store_page(),
    };
    if let Some(q) = param(pairs, "q").filter(|q| !q.is_empty()) {
        for (key, value) in parse_q(q)? {
            match key.as_str() {
                "name" => query.name = value.text_match(),
                "repository_id" | "id" => {
                    if let super::listing::QValue::Exact(v) = &value {
                        query.id = Some(v.parse().map_err(|_| {
                            ApiError::bad_request(format!("invalid query string value: {v}"))
                        })?);
                    }
                }
                "project_id" => {
                    if let super::listing::QValue::Exact(v) = &value {
                        query.project_id = Some(v.parse().map_err(|_| {
                            ApiError::bad_request(format!("invalid query string value: {v}"))
                        })?);
                    }
                }
                _ => {}
            }
        }
    }
    if let Some(sort) = param(pairs, "sort") {
        query.sort = parse_sort(sort)
            .into_iter()
            .filter_map(|(key, desc)| {
                let column = match key.as_str() {
                    "name" => RepositorySort::Name,
                    "creation_time" => RepositorySort::CreationTime,
                    "update_time" => RepositorySort::UpdateTime,
                    "pull_count" => RepositorySort::PullCount,
                    "repository_id" | "id" => RepositorySort::Id,
                    _ => return None,
                };
                Some((column, desc))
            })
            .collect();
    }
    Ok((query, paging))
}

async fn list(
    state: &AppState,
    uri: &axum::http::Uri,
    query: RepositoryQuery,
    paging: Paging,
) -> HarborResult<Response> {
    let (repositories, total) = state.store.repositories().list(&query).await?;
    let body: Vec<Value> = repositories.iter().map(repository_json).collect();
    Ok((paging.headers(uri, total), axum::Json(body)).into_response())
}

/// `GET /repositories`: the repositories of every project the caller can see.
pub async fn list_all_repositories(
    State(state): State<AppState>,
    principal: Principal,
    OriginalUri(uri): OriginalUri,
    RawQuery(raw): RawQuery,
) -> HarborResult<Response> {
    let pairs = query_pairs(raw.as_deref())?;
    let (mut query, paging) = repository_query(&pairs)?;
    query.visibility = match principal.user() {
        None => Visibility::Public,
        Some(user) if user.sysadmin => Visibility::All,
        Some(user) => Visibility::User(user.id),
    };
    list(&state, &uri, query, paging).await
}

/// `GET /projects/{project_name}/repositories`.
pub async fn list_repositories(
    State(state): State<AppState>,
    principal: Principal,
    Path(project_name): Path<String>,
    OriginalUri(uri): OriginalUri,
    RawQuery(raw): RawQuery,
) -> HarborResult<Response> {
    let pairs = query_pairs(raw.as_deref())?;
    let access = require_project(
        &state,
        principal.user(),
        &ProjectRef::Name(project_name),
        Resource::Repository,
        Action::List,
    )
    .await?;
    let (mut query, paging) = repository_query(&pairs)?;
    query.project_id = Some(access.project.id);
    list(&state, &uri, query, paging).await
}

/// Checks `action` on the project and loads the repository (404 when missing).
pub(super) async fn load_repository(
    state: &AppState,
    principal: &Principal,
    project_name: &str,
    repository_name: &str,
    resource: Resource,
    action: Action,
) -> Result<(Project, String, Option<Repository>), ApiError> {
    let access = require_project(
        state,
        principal.user(),
        &ProjectRef::Name(project_name.to_string()),
        resource,
        action,
    )
    .await?;
    let name = full_name(project_name, repository_name);
    let repository = state.store.repositories().find(&name).await?;
    Ok((access.project, name, repository))
}

fn repository_not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("repository {name} not found"))
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
    let (_, name, repository) = load_repository(
        &state,
        &principal,
        &project_name,
        &repository_name,
        Resource::Repository,
        Action::Update,
    )
    .await?;
    let update: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid repository body: {e}")))?;
    if !update.is_object() {
        return Err(ApiError::bad_request("the body must be a Repository object").into());
    }
    let repository = repository.ok_or_else(|| repository_not_found(&name))?;
    let description = match update.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => html_escape(s),
        Some(_) => return Err(ApiError::bad_request("description must be a string").into()),
    };
    state
        .store
        .repositories()
        .update_description(repository.id, &description)
        .await?;
    Ok(())
}

/// `DELETE /projects/{project_name}/repositories/{repository_name}`: the
/// repository and every artifact in it.
pub async fn delete_repository(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name)): Path<(String, String)>,
) -> HarborResult<()> {
    let (_, name, repository) = load_repository(
        &state,
        &principal,
        &project_name,
        &repository_name,
        Resource::Repository,
        Action::Delete,
    )
    .await?;
    let repository = repository.ok_or_else(|| repository_not_found(&name))?;
    state.store.repositories().delete(repository.id).await?;
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
