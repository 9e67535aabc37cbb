//! A project's repositories, a repository's artifacts with their pull
//! commands, and deleting a tag.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use berth_domain::model::{Artifact, Tag};
use berth_domain::query::Paging;
use berth_domain::query::artifact::ArtifactFilter;
use berth_domain::rbac::{Action, Resource};
use berth_store::repo::projects::Viewer;
use berth_store::repo::repositories::RepositoryFilter;
use serde::Deserialize;

use super::artifacts::{
    artifact_link, repository_path, short_digest, show_artifact, split_artifact_path,
};
use super::html::{self, esc, url_part};
use super::tabs::{Tab, header};
use super::{PortalError, PortalForm, PortalUser, check_form_csrf, pager, see_other};
use crate::error::ApiError;
use crate::service::artifacts::{self, ArtifactAt};
use crate::service::repositories::{self, Reached};
use crate::session::SessionUser;
use crate::state::AppState;

/// Rows per page of repositories and of artifacts.
const PAGE_SIZE: i64 = 50;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/harbor/projects/{project_name}", get(show_project))
        .route(
            "/harbor/projects/{project_name}/repositories/{*repository_name}",
            get(show_repository),
        )
        .route("/harbor/tags/delete", post(delete_tag))
}

/// A page number from the query.
#[derive(Debug, Default, Deserialize)]
pub(super) struct PageQuery {
    #[serde(default)]
    page: Option<i64>,
    #[serde(default)]
    deleted: Option<String>,
    #[serde(default)]
    removed: Option<String>,
}

impl PageQuery {
    fn paging(&self) -> Paging {
        Paging {
            page: self.page.unwrap_or(1).clamp(1, 1_000_000),
            page_size: PAGE_SIZE,
        }
    }
}

/// `GET /harbor/projects/{project_name}`: the project's repositories.
async fn show_project(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    Query(query): Query<PageQuery>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let access = portal
        .require_project(&state, project_name, Resource::Repository, Action::List)
        .await?;
    let project = &access.project;
    let filter = RepositoryFilter {
        project_id: Some(project.id),
        viewer: Viewer::Admin,
        query: Default::default(),
        sort: Vec::new(),
        paging: query.paging(),
    };
    let (repositories, total) = state
        .store
        .repositories()
        .list(&filter)
        .await
        .map_err(|e| failed(e.into()))?;
    let mut rows = String::new();
    for repository in &repositories {
        let short = repository
            .name
            .strip_prefix(&format!("{}/", project.name))
            .unwrap_or(&repository.name);
        rows.push_str(&format!(
            r#"<tr data-repository="{name}"><td><a href="/harbor/projects/{project}/repositories/{path}">{name}</a></td><td>{artifacts}</td><td>{pulls}</td><td>{updated}</td></tr>"#,
            name = esc(&repository.name),
            project = url_part(&project.name),
            path = repository_path(short),
            artifacts = repository.artifact_count,
            pulls = repository.pull_count,
            updated = esc(&html::when(&repository.updated_at)),
        ));
    }
    if rows.is_empty() {
        rows = format!(
            r#"<tr><td colspan="4" class="muted">No repositories yet. Push one: <code>docker push {}/{}/IMAGE:TAG</code></td></tr>"#,
            esc(&registry_host(&state)),
            esc(&project.name)
        );
    }
    let main = format!(
        r#"{header}
<h2>Repositories ({total})</h2>
<table id="repositories"><thead><tr><th>Name</th><th>Artifacts</th><th>Pulls</th><th>Updated</th></tr></thead><tbody>{rows}</tbody></table>
{pager}"#,
        header = header(&access, Tab::Repositories),
        pager = pager(
            &format!("/harbor/projects/{}?", url_part(&project.name)),
            filter.paging.page,
            PAGE_SIZE,
            total,
            "repositories"
        ),
    );
    Ok(html::page(&project.name, Some(session), &main).into_response())
}

/// The host (and port) of the external URL, as pull commands name the registry.
pub(super) fn registry_host(state: &AppState) -> String {
    let url = state.external_url.as_str();
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// `GET /harbor/projects/{project_name}/repositories/{repository_name...}`: the
/// artifacts (or, for `.../artifacts/{digest}`, one artifact's page).
async fn show_repository(
    State(state): State<AppState>,
    portal: PortalUser,
    Path((project_name, repository_name)): Path<(String, String)>,
    Query(query): Query<PageQuery>,
) -> Result<Response, PortalError> {
    if let Some((repository, digest)) = split_artifact_path(&repository_name) {
        return show_artifact(&state, &portal, &project_name, repository, digest).await;
    }
    let session = &portal.0;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let Reached {
        access,
        name: full_name,
        repository,
    } = repositories::reach(
        &state,
        &portal.principal(),
        &project_name,
        &repository_name,
        Resource::Artifact,
        Action::List,
    )
    .await
    .map_err(failed)?;
    let project = &access.project;
    let may_delete_tags = access.allows(Resource::Tag, Action::Delete);
    let repository = repository.ok_or_else(|| {
        failed(ApiError::not_found(format!(
            "repository {full_name} not found"
        )))
    })?;
    let store = state.store.artifacts();
    let (artifacts, total) = store
        .list_artifacts(
            repository.id,
            &ArtifactFilter::default(),
            &[],
            query.paging(),
        )
        .await
        .map_err(|e| failed(e.into()))?;
    let ids: Vec<i64> = artifacts.iter().map(|a| a.id).collect();
    let tags = store.tags_of(&ids).await.map_err(|e| failed(e.into()))?;
    let host = registry_host(&state);
    let in_project = full_name
        .strip_prefix(&format!("{}/", project.name))
        .unwrap_or(&full_name)
        .to_string();
    let mut rows = String::new();
    for artifact in &artifacts {
        let own: Vec<&Tag> = tags
            .iter()
            .filter(|t| t.artifact_id == artifact.id)
            .collect();
        rows.push_str(&artifact_row(
            may_delete_tags.then_some(session),
            &host,
            &project.name,
            &in_project,
            artifact,
            &own,
        ));
    }
    if rows.is_empty() {
        rows = r#"<tr><td colspan="7" class="muted">No artifacts.</td></tr>"#.into();
    }
    let notice = match (&query.deleted, &query.removed) {
        (Some(tag), _) => html::notice("ok", &format!("Tag {tag} was deleted.")),
        (None, Some(digest)) => html::notice("ok", &format!("Artifact {digest} was deleted.")),
        (None, None) => String::new(),
    };
    let main = format!(
        r#"<p><a href="/harbor/projects">Projects</a> / <a href="/harbor/projects/{project_path}">{project}</a> /</p>
<h1>{name}</h1>{notice}
<h2>Artifacts ({total})</h2>
<table id="artifacts"><thead><tr><th>Digest</th><th>Tags</th><th>Type</th><th>Size</th><th>Pushed</th><th>Pulled</th><th>Pull by digest</th></tr></thead><tbody>{rows}</tbody></table>
{pager}"#,
        pager = pager(
            &format!(
                "/harbor/projects/{}/repositories/{}?",
                url_part(&project.name),
                repository_path(&in_project)
            ),
            query.paging().page,
            PAGE_SIZE,
            total,
            "artifacts"
        ),
        project_path = url_part(&project.name),
        project = esc(&project.name),
        name = esc(&full_name),
    );
    Ok(html::page(&full_name, Some(session), &main).into_response())
}

/// One artifact: short digest, tags with their pull command (and a delete
/// button for `deleter`, a session that may delete tags), type, size, push and
/// pull times, the pull-by-digest command.
fn artifact_row(
    deleter: Option<&SessionUser>,
    host: &str,
    project: &str,
    in_project: &str,
    artifact: &Artifact,
    tags: &[&Tag],
) -> String {
    let repository = &artifact.repository_name;
    let mut tag_cells = String::new();
    for tag in tags {
        let command = format!("docker pull {host}/{repository}:{}", tag.name);
        let delete = match deleter {
            Some(session) => format!(
                r#"<form class="inline" method="post" action="/harbor/tags/delete" data-confirm="Delete tag {name}?">{csrf}<input type="hidden" name="project" value="{project}"><input type="hidden" name="repository" value="{in_project}"><input type="hidden" name="digest" value="{digest}"><input type="hidden" name="tag" value="{name}"><button type="submit" class="danger small delete-tag">Delete</button></form>"#,
                name = esc(&tag.name),
                csrf = html::csrf_field(session),
                project = esc(project),
                in_project = esc(in_project),
                digest = esc(&artifact.digest),
            ),
            None => String::new(),
        };
        tag_cells.push_str(&format!(
            r#"<span class="tag" data-tag="{name}"><code>{name}</code><button type="button" class="secondary small copy-tag" data-copy="{command}" title="{command}">Copy pull command</button>{delete}</span>"#,
            name = esc(&tag.name),
            command = esc(&command),
        ));
    }
    if tag_cells.is_empty() {
        tag_cells = r#"<span class="muted">untagged</span>"#.into();
    }
    let by_digest = format!("docker pull {host}/{repository}@{}", artifact.digest);
    format!(
        r#"<tr data-digest="{digest}"><td><a class="artifact-link" href="{href}"><code title="{digest}">{short}</code></a></td><td class="tags">{tag_cells}</td><td>{kind}</td><td>{size}</td><td>{pushed}</td><td>{pulled}</td><td><button type="button" class="secondary small copy-digest" data-copy="{by_digest}" title="{by_digest}">Copy pull command</button></td></tr>"#,
        digest = esc(&artifact.digest),
        href = esc(&artifact_link(project, in_project, &artifact.digest)),
        short = esc(&short_digest(&artifact.digest)),
        kind = esc(&artifact.kind),
        size = esc(&html::human_size(artifact.size)),
        pushed = esc(&html::when(&artifact.push_time)),
        pulled = esc(&html::when(&artifact.pull_time)),
        by_digest = esc(&by_digest),
    )
}

/// The delete-tag form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct DeleteTagForm {
    #[serde(default)]
    csrf_token: String,
    project: String,
    repository: String,
    digest: String,
    tag: String,
}

/// `POST /harbor/tags/delete`: deleteTag's rules (tag delete permission).
async fn delete_tag(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<DeleteTagForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let at = ArtifactAt {
        project: &form.project,
        repository: &form.repository,
        reference: &form.digest,
    };
    artifacts::delete_tag(&state, &portal.principal(), at, &form.tag)
        .await
        .map_err(|err| PortalError::api(err, Some(session)))?;
    Ok(see_other(&format!(
        "/harbor/projects/{}/repositories/{}?deleted={}",
        url_part(&form.project),
        repository_path(&form.repository),
        url_part(&form.tag)
    )))
}
