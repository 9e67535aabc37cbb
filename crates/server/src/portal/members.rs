//! A project's members on its page, and adding one.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use berth_domain::model::ProjectRef;
use berth_domain::query::Paging;
use berth_domain::rbac::{Action, Resource, Role};
use serde::Deserialize;

use super::html::{self, esc, url_part};
use super::{PortalError, PortalForm, PortalUser, check_form_csrf, see_other};
use crate::access::{Actor, ProjectAccess, require_project};
use crate::error::{ApiError, ErrorKind};
use crate::harbor::members::{ProjectMemberReq, add_member};
use crate::session::SessionUser;
use crate::state::AppState;

/// Members shown on a project page.
const SHOWN: i64 = 100;

pub(super) fn router() -> Router<AppState> {
    Router::new().route(
        "/harbor/projects/{project_name}/members",
        post(create_member),
    )
}

/// The members section of a project page: the list when the caller may list
/// members, the add form when the caller may add them; empty otherwise.
pub(super) async fn section(
    state: &AppState,
    access: &ProjectAccess,
    session: &SessionUser,
) -> Result<String, ApiError> {
    if !access.allows(Resource::Member, Action::List) {
        return Ok(String::new());
    }
    let project_id = access.project.id;
    let members = state.store.members();
    let total = members.count(project_id).await?;
    let listed = members
        .list(
            project_id,
            None,
            Paging {
                page: 1,
                page_size: SHOWN,
            },
        )
        .await?;
    let mut rows = String::new();
    for member in &listed {
        rows.push_str(&format!(
            r#"<tr data-member="{name}"><td>{name}</td><td>{kind}</td><td class="role">{role}</td></tr>"#,
            name = esc(&member.entity_name),
            kind = if member.entity.kind() == "u" { "User" } else { "Group" },
            role = Role::from_id(member.role_id).map_or("", Role::name),
        ));
    }
    let more = if total > SHOWN {
        format!(r#"<p class="muted">and {} more</p>"#, total - SHOWN)
    } else {
        String::new()
    };
    let form = if access.allows(Resource::Member, Action::Create) {
        let options: String = [
            Role::ProjectAdmin,
            Role::Maintainer,
            Role::Developer,
            Role::Guest,
            Role::LimitedGuest,
        ]
        .iter()
        .map(|r| {
            let selected = if *r == Role::Developer {
                " selected"
            } else {
                ""
            };
            format!(
                r#"<option value="{}"{selected}>{}</option>"#,
                r.id(),
                r.name()
            )
        })
        .collect();
        format!(
            r#"<form class="toolbar" method="post" action="/harbor/projects/{path}/members">{csrf}
<input type="text" name="username" id="member_username" placeholder="Username" required aria-label="Username of the new member">
<select name="role_id" id="member_role" aria-label="Role">{options}</select>
<button type="submit" id="add_member">Add member</button></form>"#,
            path = url_part(&access.project.name),
            csrf = html::csrf_field(session),
        )
    } else {
        String::new()
    };
    Ok(format!(
        r#"<h2>Members ({total})</h2>{form}
<table id="members"><thead><tr><th>Name</th><th>Type</th><th>Role</th></tr></thead><tbody>{rows}</tbody></table>{more}"#
    ))
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
    let access = require_project(
        &state,
        Actor::User(&session.user),
        &ProjectRef::Name(project_name),
        Resource::Member,
        Action::Create,
    )
    .await
    .map_err(failed)?;
    let username = form.username.trim().to_string();
    let request = ProjectMemberReq::user(username.clone(), form.role_id);
    add_member(&state, &access.project, &request, &session.user.username)
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
        "/harbor/projects/{}?added={}",
        url_part(&access.project.name),
        url_part(&username)
    )))
}
