//! A project's members tab: the list, adding a user, changing a member's role
//! and removing a member (project admins), with the member API's rules.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use berth_domain::model::{Member, MemberEntity};
use berth_domain::query::Paging;
use berth_domain::rbac::{Action, Resource, Role};
use serde::Deserialize;

use super::html::{self, esc, url_part};
use super::tabs::{Tab, header, tab_path};
use super::{PortalError, PortalForm, PortalUser, TokenForm, check_form_csrf, see_other};
use crate::access::ProjectAccess;
use crate::error::{ApiError, ErrorKind};
use crate::service::members::{self, ProjectMemberReq};
use crate::session::SessionUser;
use crate::state::AppState;

/// Members shown on the tab.
const SHOWN: i64 = 100;

/// The roles, highest first, as the forms offer them.
const ROLES: [Role; 5] = [
    Role::ProjectAdmin,
    Role::Maintainer,
    Role::Developer,
    Role::Guest,
    Role::LimitedGuest,
];

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/harbor/projects/{project_name}/members",
            get(list_members).post(create_member),
        )
        .route(
            "/harbor/projects/{project_name}/members/{mid}/role",
            post(update_member_role),
        )
        .route(
            "/harbor/projects/{project_name}/members/{mid}/delete",
            post(delete_member),
        )
}

/// What the last form did, for the notice at the top of the tab.
#[derive(Debug, Default, Deserialize)]
pub(super) struct DoneQuery {
    #[serde(default)]
    added: Option<String>,
    #[serde(default)]
    updated: Option<String>,
    #[serde(default)]
    removed: Option<String>,
}

/// `<option>`s of every role, `selected` marked.
fn role_options(selected: i64) -> String {
    ROLES
        .iter()
        .map(|r| {
            let mark = if r.id() == selected { " selected" } else { "" };
            format!(r#"<option value="{}"{mark}>{}</option>"#, r.id(), r.name())
        })
        .collect()
}

/// `GET /harbor/projects/{project_name}/members`: listProjectMembers' permission.
async fn list_members(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    Query(done): Query<DoneQuery>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let access = portal
        .require_project(&state, project_name, Resource::Member, Action::List)
        .await?;
    let project_id = access.project.id;
    let members = state.store.members();
    let total = members
        .count(project_id)
        .await
        .map_err(|e| failed(e.into()))?;
    let listed = members
        .list(
            project_id,
            None,
            Paging {
                page: 1,
                page_size: SHOWN,
            },
        )
        .await
        .map_err(|e| failed(e.into()))?;
    let manage = access.allows(Resource::Member, Action::Update)
        && access.allows(Resource::Member, Action::Delete);
    let rows: String = listed
        .iter()
        .map(|member| member_row(&access, manage.then_some(session), member))
        .collect();
    let more = if total > SHOWN {
        format!(r#"<p class="muted">and {} more</p>"#, total - SHOWN)
    } else {
        String::new()
    };
    let form = if access.allows(Resource::Member, Action::Create) {
        format!(
            r#"<form class="toolbar" method="post" action="{action}">{csrf}
<input type="text" name="username" id="member_username" placeholder="Username" required aria-label="Username of the new member">
<select name="role_id" id="member_role" aria-label="Role">{options}</select>
<button type="submit" id="add_member">Add member</button></form>"#,
            action = esc(&tab_path(&access.project.name, Tab::Members)),
            csrf = html::csrf_field(session),
            options = role_options(Role::Developer.id()),
        )
    } else {
        String::new()
    };
    let notice = match (&done.added, &done.updated, &done.removed) {
        (Some(name), _, _) => html::notice("ok", &format!("{name} was added to the project.")),
        (_, Some(name), _) => html::notice("ok", &format!("The role of {name} was changed.")),
        (_, _, Some(name)) => html::notice("ok", &format!("{name} was removed from the project.")),
        _ => String::new(),
    };
    let actions = if manage { "<th></th>" } else { "" };
    let main = format!(
        r#"{header}{notice}
<h2>Members ({total})</h2>{form}
<table id="members"><thead><tr><th>Name</th><th>Type</th><th>Role</th>{actions}</tr></thead><tbody>{rows}</tbody></table>{more}"#,
        header = header(&access, Tab::Members),
    );
    let title = format!("{} · Members", access.project.name);
    Ok(html::page(&title, Some(session), &main).into_response())
}

/// One member; with `manager` (a project admin's session), the role form and
/// the remove button, except on the manager's own row (as Harbor's UI: one
/// does not demote or remove oneself by a slip; the API still allows it).
fn member_row(access: &ProjectAccess, manager: Option<&SessionUser>, member: &Member) -> String {
    let controls = match manager {
        Some(session) if member.entity == MemberEntity::User(session.user.id) => {
            r#"<td class="actions muted">you</td>"#.to_string()
        }
        Some(session) => {
            let base = format!(
                "{}/{}",
                tab_path(&access.project.name, Tab::Members),
                member.id
            );
            format!(
                r#"<td class="actions"><form class="inline" method="post" action="{role_action}">{csrf}<select name="role_id" class="role-select" aria-label="New role of {name}">{options}</select> <button type="submit" class="secondary small change-role">Change role</button></form> <form class="inline" method="post" action="{delete_action}" data-confirm="Remove {name} from the project?">{csrf}<button type="submit" class="danger small remove-member">Remove</button></form></td>"#,
                role_action = esc(&format!("{base}/role")),
                delete_action = esc(&format!("{base}/delete")),
                csrf = html::csrf_field(session),
                name = esc(&member.entity_name),
                options = role_options(member.role_id),
            )
        }
        None => String::new(),
    };
    format!(
        r#"<tr data-member="{name}"><td>{name}</td><td>{kind}</td><td class="role">{role}</td>{controls}</tr>"#,
        name = esc(&member.entity_name),
        kind = if member.entity.kind() == "u" {
            "User"
        } else {
            "Group"
        },
        role = Role::from_id(member.role_id).map_or("", Role::name),
    )
}

/// The add-member form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct MemberForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    role_id: i64,
}

/// `POST /harbor/projects/{project_name}/members`: createProjectMember's rules
/// for a user named by username (onboarded from the directory in LDAP mode).
async fn create_member(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    PortalForm(form): PortalForm<MemberForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let access = portal
        .require_project(&state, project_name, Resource::Member, Action::Create)
        .await?;
    let username = form.username.trim().to_string();
    let request = ProjectMemberReq::user(username.clone(), form.role_id);
    members::add(&state, &portal.principal(), &access, &request)
        .await
        .map_err(|err| {
            failed(match err.kind {
                ErrorKind::Conflict => ApiError::new(
                    ErrorKind::Conflict,
                    format!("{username} is already a member of this project."),
                ),
                _ => err,
            })
        })?;
    Ok(see_other(&format!(
        "{}?added={}",
        tab_path(&access.project.name, Tab::Members),
        url_part(&username)
    )))
}

/// The change-role form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct RoleForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    role_id: i64,
}

/// The member `mid` of the project, after checking `action` on members there.
async fn load_member(
    state: &AppState,
    portal: &PortalUser,
    project_name: String,
    mid: &str,
    action: Action,
) -> Result<(ProjectAccess, Member), PortalError> {
    let access = portal
        .require_project(state, project_name, Resource::Member, action)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(&portal.0));
    let missing = || {
        failed(ApiError::not_found(
            "There is no such member in this project.",
        ))
    };
    let mid: i64 = mid.parse().map_err(|_| missing())?;
    let member = state
        .store
        .members()
        .find(access.project.id, mid)
        .await
        .map_err(|e| failed(e.into()))?
        .ok_or_else(missing)?;
    Ok((access, member))
}

/// `POST /harbor/projects/{project_name}/members/{mid}/role`: updateProjectMember's rules.
async fn update_member_role(
    State(state): State<AppState>,
    portal: PortalUser,
    Path((project_name, mid)): Path<(String, String)>,
    PortalForm(form): PortalForm<RoleForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let (access, member) = load_member(&state, &portal, project_name, &mid, Action::Update).await?;
    members::change_role(
        &state,
        &portal.principal(),
        &access,
        member.id,
        form.role_id,
    )
    .await
    .map_err(failed)?;
    Ok(see_other(&format!(
        "{}?updated={}",
        tab_path(&access.project.name, Tab::Members),
        url_part(&member.entity_name)
    )))
}

/// `POST /harbor/projects/{project_name}/members/{mid}/delete`: deleteProjectMember's rules.
async fn delete_member(
    State(state): State<AppState>,
    portal: PortalUser,
    Path((project_name, mid)): Path<(String, String)>,
    PortalForm(form): PortalForm<TokenForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let (access, member) = load_member(&state, &portal, project_name, &mid, Action::Delete).await?;
    members::remove(&state, &portal.principal(), &access, member.id)
        .await
        .map_err(failed)?;
    Ok(see_other(&format!(
        "{}?removed={}",
        tab_path(&access.project.name, Tab::Members),
        url_part(&member.entity_name)
    )))
}
