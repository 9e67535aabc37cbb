//! A project's labels tab: the project's labels, creating and deleting them
//! (maintainers and project admins), with the label API's rules.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use berth_domain::model::Label;
use berth_domain::model::artifact::validate_label_name;
use berth_domain::query::Paging;
use berth_domain::rbac::{Action, Resource};
use berth_store::repo::labels::NewLabel;
use serde::Deserialize;

use super::html::{self, esc, url_part};
use super::tabs::{Tab, header, tab_path};
use super::{PortalError, PortalForm, PortalUser, TokenForm, check_form_csrf, see_other};
use crate::access::ProjectAccess;
use crate::error::ApiError;
use crate::session::SessionUser;
use crate::state::AppState;

/// Labels shown on the tab.
const SHOWN: i64 = 100;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/harbor/projects/{project_name}/labels",
            get(list_labels).post(create_label),
        )
        .route(
            "/harbor/projects/{project_name}/labels/{label_id}/delete",
            post(delete_label),
        )
}

/// What the last form did.
#[derive(Debug, Default, Deserialize)]
pub(super) struct DoneQuery {
    #[serde(default)]
    created: Option<String>,
    #[serde(default)]
    deleted: Option<String>,
}

/// `GET /harbor/projects/{project_name}/labels`.
async fn list_labels(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    Query(done): Query<DoneQuery>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    let access = portal
        .require_project(&state, project_name, Resource::Label, Action::List)
        .await?;
    let (labels, total) = state
        .store
        .labels()
        .list(
            Some(access.project.id),
            None,
            &Default::default(),
            Paging {
                page: 1,
                page_size: SHOWN,
            },
        )
        .await
        .map_err(|e| PortalError::api(e.into(), Some(session)))?;
    let deleter = access
        .allows(Resource::Label, Action::Delete)
        .then_some(session);
    let mut rows: String = labels
        .iter()
        .map(|label| label_row(&access, deleter, label))
        .collect();
    if rows.is_empty() {
        rows = r#"<tr><td colspan="5" class="muted">No labels.</td></tr>"#.into();
    }
    let form = if access.allows(Resource::Label, Action::Create) {
        format!(
            r##"<form class="toolbar" method="post" action="{action}">{csrf}
<input type="text" name="name" id="label_name" placeholder="Label name" required maxlength="128" aria-label="Name of the new label">
<input type="text" name="description" id="label_description" placeholder="Description" aria-label="Description">
<input type="color" name="color" id="label_color" value="#0f6cbd" aria-label="Color">
<button type="submit" id="create_label">New label</button></form>"##,
            action = esc(&tab_path(&access.project.name, Tab::Labels)),
            csrf = html::csrf_field(session),
        )
    } else {
        String::new()
    };
    let notice = match (&done.created, &done.deleted) {
        (Some(name), _) => html::notice("ok", &format!("Label {name} was created.")),
        (_, Some(name)) => html::notice("ok", &format!("Label {name} was deleted.")),
        _ => String::new(),
    };
    let more = if total > SHOWN {
        format!(r#"<p class="muted">and {} more</p>"#, total - SHOWN)
    } else {
        String::new()
    };
    let main = format!(
        r#"{header}{notice}
<h2>Labels ({total})</h2>{form}
<table id="labels"><thead><tr><th>Name</th><th>Description</th><th>Color</th><th>Created</th><th></th></tr></thead><tbody>{rows}</tbody></table>{more}"#,
        header = header(&access, Tab::Labels),
    );
    let title = format!("{} · Labels", access.project.name);
    Ok(html::page(&title, Some(session), &main).into_response())
}

/// One label, with a delete button for `deleter`.
fn label_row(access: &ProjectAccess, deleter: Option<&SessionUser>, label: &Label) -> String {
    let delete = match deleter {
        Some(session) => format!(
            r#"<form class="inline" method="post" action="{action}" data-confirm="Delete label {name}? It is also taken off every artifact.">{csrf}<button type="submit" class="danger small delete-label">Delete</button></form>"#,
            action = esc(&format!(
                "{}/{}/delete",
                tab_path(&access.project.name, Tab::Labels),
                label.id
            )),
            name = esc(&label.name),
            csrf = html::csrf_field(session),
        ),
        None => String::new(),
    };
    format!(
        r#"<tr data-label="{name}"><td>{name}</td><td>{description}</td><td><code>{color}</code></td><td>{created}</td><td>{delete}</td></tr>"#,
        name = esc(&label.name),
        description = esc(&label.description),
        color = esc(&label.color),
        created = esc(&html::when(&label.created_at)),
    )
}

/// The new-label form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct LabelForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    color: String,
}

/// `POST /harbor/projects/{project_name}/labels`: createLabel of a project
/// label (`scope: p`), with its name rule; a taken name is a 409 page.
async fn create_label(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    PortalForm(form): PortalForm<LabelForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let access = portal
        .require_project(&state, project_name, Resource::Label, Action::Create)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let name = form.name.trim().to_string();
    validate_label_name(&name).map_err(|e| failed(e.into()))?;
    let label = state
        .store
        .labels()
        .create(&NewLabel {
            name,
            description: form.description.trim().to_string(),
            color: form.color.trim().to_string(),
            project_id: Some(access.project.id),
        })
        .await
        .map_err(|e| failed(e.into()))?;
    Ok(see_other(&format!(
        "{}?created={}",
        tab_path(&access.project.name, Tab::Labels),
        url_part(&label.name)
    )))
}

/// `POST /harbor/projects/{project_name}/labels/{label_id}/delete`: deleteLabel
/// of one of the project's labels (also taken off every artifact).
async fn delete_label(
    State(state): State<AppState>,
    portal: PortalUser,
    Path((project_name, label_id)): Path<(String, String)>,
    PortalForm(form): PortalForm<TokenForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let access = portal
        .require_project(&state, project_name, Resource::Label, Action::Delete)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let missing = || failed(ApiError::not_found("This project has no such label."));
    let id: i64 = label_id.parse().map_err(|_| missing())?;
    let label = state
        .store
        .labels()
        .find(id)
        .await
        .map_err(|e| failed(e.into()))?
        .filter(|l| l.project_id == Some(access.project.id))
        .ok_or_else(missing)?;
    state
        .store
        .labels()
        .delete(label.id)
        .await
        .map_err(|e| failed(e.into()))?;
    Ok(see_other(&format!(
        "{}?deleted={}",
        tab_path(&access.project.name, Tab::Labels),
        url_part(&label.name)
    )))
}
