//! A project's summary tab (repository and member counts, storage quota) and
//! configuration tab (visibility and the policy metadata), with the rules of
//! getProjectSummary and updateProject.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use berth_domain::model::metadata;
use berth_domain::rbac::{Action, Resource, Role};
use serde::Deserialize;

use super::html::{self, esc};
use super::tabs::{Tab, header, tab_path};
use super::{PortalError, PortalForm, PortalUser, check_form_csrf, see_other};
use crate::error::ApiError;
use crate::state::AppState;

/// The yes/no settings of the configuration tab: metadata key and what it means.
const SWITCHES: [(&str, &str); 3] = [
    (
        "public",
        "Public: anyone may pull, and the project is listed for everyone",
    ),
    (
        "enable_content_trust_cosign",
        "Cosign: only artifacts signed with cosign may be pulled",
    ),
    (
        "enable_content_trust",
        "Notation: only artifacts signed with Notation may be pulled",
    ),
];

/// The scanner's settings: kept as Harbor's clients send them, shown but not
/// offered, since no scanner is configured to act on them.
const SCANNER_SWITCHES: [(&str, &str); 2] = [
    ("auto_scan", "Scan artifacts for vulnerabilities on push"),
    ("auto_sbom_generation", "Generate an SBOM on push"),
];

/// The vulnerability gate (a scanner setting too): a switch and the severity it starts at.
const PREVENT_VUL: (&str, &str) = (
    "prevent_vul",
    "Prevent vulnerable artifacts from being pulled, from severity",
);

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/harbor/projects/{project_name}/summary", get(show_summary))
        .route(
            "/harbor/projects/{project_name}/configuration",
            get(show_configuration).post(update_configuration),
        )
}

/// `GET /harbor/projects/{project_name}/summary`: what getProjectSummary
/// returns to the caller (member counts only to those who may list members,
/// the quota only when quotas are enabled).
async fn show_summary(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    let access = portal
        .require_project(&state, project_name, Resource::Project, Action::Read)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let project = &access.project;
    let counts = state
        .store
        .projects()
        .counts(project.id)
        .await
        .map_err(|e| failed(e.into()))?;
    let mut facts = format!(
        r#"<dt>Access level</dt><dd>{visibility}</dd><dt>Created</dt><dd>{created}</dd><dt>Repositories</dt><dd id="summary_repositories">{repos}</dd>"#,
        visibility = if project.public { "Public" } else { "Private" },
        created = esc(&html::when(&project.created_at)),
        repos = counts.repo_count,
    );
    if access.allows(Resource::Member, Action::List) {
        let total: i64 = counts.members_by_role.iter().map(|(_, n)| n).sum();
        let by_role: Vec<String> = counts
            .members_by_role
            .iter()
            .filter_map(|&(role, n)| Role::from_id(role).map(|r| format!("{n} {}", r.name())))
            .collect();
        let detail = if by_role.is_empty() {
            String::new()
        } else {
            format!(" ({})", by_role.join(", "))
        };
        facts.push_str(&format!(
            r#"<dt>Members</dt><dd id="summary_members">{total}{}</dd>"#,
            esc(&detail)
        ));
    }
    if access.allows(Resource::Quota, Action::Read) {
        let config = state
            .store
            .configurations()
            .load()
            .await
            .map_err(|e| failed(e.into()))?;
        if config.flag("quota_per_project_enable")
            && let Some((hard, used)) = counts.quota
        {
            let limit = if hard < 0 {
                "unlimited".to_string()
            } else {
                html::human_size(hard)
            };
            facts.push_str(&format!(
                r#"<dt>Storage used</dt><dd id="summary_quota">{} of {}</dd>"#,
                esc(&html::human_size(used)),
                esc(&limit)
            ));
        }
    }
    let main = format!(
        r#"{header}
<h2>Summary</h2><dl class="stats" id="summary">{facts}</dl>"#,
        header = header(&access, Tab::Summary),
    );
    let title = format!("{} · Summary", project.name);
    Ok(html::page(&title, Some(session), &main).into_response())
}

/// Whether the configuration was just saved.
#[derive(Debug, Default, Deserialize)]
pub(super) struct SavedQuery {
    #[serde(default)]
    saved: Option<String>,
}

/// `GET /harbor/projects/{project_name}/configuration`: the project's settings,
/// editable by those who may update the project (project admins).
async fn show_configuration(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    Query(query): Query<SavedQuery>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    let access = portal
        .require_project(&state, project_name, Resource::Project, Action::Read)
        .await?;
    let project = &access.project;
    let stored: HashMap<String, String> = state
        .store
        .metadata()
        .list(project.id)
        .await
        .map_err(|e| PortalError::api(e.into(), Some(session)))?
        .into_iter()
        .collect();
    let on = |key: &str| stored.get(key).is_some_and(|v| v == "true");
    let editable = access.allows(Resource::Project, Action::Update);
    let disabled = if editable { "" } else { " disabled" };
    let checkbox_of = |key: &str, text: &str, disabled: &str| {
        format!(
            r#"<label class="check"><input type="checkbox" name="{key}" id="setting_{key}" value="true"{checked}{disabled}> {text}</label>"#,
            checked = if on(key) { " checked" } else { "" },
            text = esc(text),
        )
    };
    let checkbox = |key: &str, text: &str| checkbox_of(key, text, disabled);
    let switches: String = SWITCHES
        .iter()
        .map(|(key, text)| checkbox(key, text))
        .collect();
    let scanner: String = SCANNER_SWITCHES
        .iter()
        .map(|(key, text)| checkbox_of(key, text, " disabled"))
        .collect();
    let current = stored.get("severity").map_or("low", String::as_str);
    let severities: String = metadata::SEVERITIES
        .iter()
        .filter(|s| **s != "none")
        .map(|s| {
            let selected = if *s == current { " selected" } else { "" };
            format!(r#"<option value="{s}"{selected}>{s}</option>"#)
        })
        .collect();
    let (save, csrf) = if editable {
        (
            r#"<div class="actions"><button type="submit" id="save_project_configuration">Save</button></div>"#,
            html::csrf_field(session),
        )
    } else {
        (
            r#"<p class="muted">Only project administrators change these.</p>"#,
            String::new(),
        )
    };
    let notice = if query.saved.is_some() {
        html::notice("ok", "The configuration was saved.")
    } else {
        String::new()
    };
    let main = format!(
        r#"{header}{notice}
<h2>Configuration</h2>
<form class="settings" method="post" action="{action}">{csrf}{switches}
<fieldset class="scanner" disabled><legend>Vulnerability scanning</legend>
<p class="muted" id="no_scanner">No scanner is configured: these settings are kept as Harbor's clients set them, and nothing acts on them.</p>
{scanner}
{prevent_vul} <select name="severity" id="setting_severity" aria-label="Severity" disabled>{severities}</select>
</fieldset>
{save}</form>"#,
        header = header(&access, Tab::Configuration),
        action = esc(&tab_path(&project.name, Tab::Configuration)),
        prevent_vul = checkbox_of(PREVENT_VUL.0, PREVENT_VUL.1, " disabled"),
    );
    let title = format!("{} · Configuration", project.name);
    Ok(html::page(&title, Some(session), &main).into_response())
}

/// `POST /harbor/projects/{project_name}/configuration`: updateProject's
/// permission and metadata rules; an unchecked box is `false`.
async fn update_configuration(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    PortalForm(form): PortalForm<HashMap<String, String>>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, form.get("csrf_token").map_or("", String::as_str))?;
    let access = portal
        .require_project(&state, project_name, Resource::Project, Action::Update)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    // The scanner's settings are not offered (no scanner): left as stored.
    let pairs: Vec<(String, String)> = SWITCHES
        .iter()
        .map(|(key, _)| {
            let given = form.get(*key).map_or("false", String::as_str);
            (key.to_string(), given.to_string())
        })
        .collect();
    let validated = pairs
        .into_iter()
        .map(|(key, value)| metadata::normalize(&key, &value).map(|v| (key, v)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(e.into()))?;
    state
        .store
        .projects()
        .update(access.project.id, &validated, None)
        .await
        .map_err(|e| failed(e.into()))?;
    Ok(see_other(&format!(
        "{}?saved=1",
        tab_path(&access.project.name, Tab::Configuration)
    )))
}
