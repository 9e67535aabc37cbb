//! Harbor's user groups (`/usergroups`, the `usergroup` tag): LDAP groups
//! (checked against the directory), HTTP and OIDC groups, which projects
//! take as members. System administrators manage them; any signed-in user
//! may search them by name (to add one as a member).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::UserGroup;
use berth_domain::model::group::{GROUP_TYPE_HTTP, GROUP_TYPE_LDAP, GROUP_TYPE_OIDC};
use berth_domain::rbac::{Action, SystemResource};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, LaterJson, paged, path_int};
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/usergroups", list_user_groups)
        .post("/usergroups", create_user_group)
        .get("/usergroups/search", search_user_groups)
        .get("/usergroups/{group_id}", get_user_group)
        .put("/usergroups/{group_id}", update_user_group)
        .delete("/usergroups/{group_id}", delete_user_group)
}

/// Harbor's `UserGroup` as a request carries it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct UserGroupReq {
    group_name: String,
    group_type: i64,
    ldap_group_dn: String,
}

/// Harbor's `UserGroup`: the DN left out when there is none.
fn group_json(group: &UserGroup) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(group.id));
    out.insert("group_name".into(), json!(group.group_name));
    out.insert("group_type".into(), json!(group.group_type));
    if let Some(dn) = group.ldap_group_dn.as_deref().filter(|dn| !dn.is_empty()) {
        out.insert("ldap_group_dn".into(), json!(dn));
    }
    Value::Object(out)
}

/// A group id of the path: a positive integer.
fn group_id(text: &str) -> Result<i64, ApiError> {
    let id = path_int("group_id", text)?;
    if id <= 0 {
        return Err(ApiError::bad_request("the group id should be provided"));
    }
    Ok(id)
}

fn not_found(id: i64) -> ApiError {
    ApiError::not_found(format!("the user group with id {id} is not found"))
}

fn duplicate(req: &UserGroupReq) -> ApiError {
    berth_domain::DomainError::Conflict(format!(
        "duplicate user group, group name:{}, group type: {}, ldap group DN: {}",
        req.group_name, req.group_type, req.ldap_group_dn
    ))
    .into()
}

/// `GET /usergroups?group_name&ldap_group_dn&page&page_size`: in LDAP mode
/// the LDAP groups (by DN when given), in HTTP mode the HTTP ones, else all.
pub async fn list_user_groups(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::UserGroup, Action::List)?;
    let paging = query.paging()?;
    let config = state.store.configurations().load().await?;
    let mode = config.string("auth_mode");
    let group_type = match mode {
        crate::directory::LDAP_AUTH => Some(GROUP_TYPE_LDAP),
        "http_auth" => Some(GROUP_TYPE_HTTP),
        _ => None,
    };
    let name = query.get("group_name").filter(|n| !n.is_empty());
    let dn = query
        .get("ldap_group_dn")
        .filter(|dn| !dn.is_empty() && group_type == Some(GROUP_TYPE_LDAP))
        .map(berth_auth::ldap::normalize_dn);
    let (total, groups) = state
        .store
        .groups()
        .list(group_type, name, dn.as_deref(), paging)
        .await?;
    let items: Vec<Value> = groups.iter().map(group_json).collect();
    Ok(paged(&items, total, query.link(paging, total)))
}

/// `POST /usergroups`: 201 with the group's `Location`. An LDAP group's DN
/// must be in the directory.
pub async fn create_user_group(
    State(state): State<AppState>,
    principal: Principal,
    body: LaterJson<UserGroupReq>,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::UserGroup, Action::Create)?;
    let req = body.parse()?;
    if req.group_name.is_empty() {
        return Err(ApiError::bad_request("the group name should be provided").into());
    }
    let groups = state.store.groups();
    let created = match req.group_type {
        GROUP_TYPE_LDAP => {
            if req.ldap_group_dn.is_empty() {
                return Err(ApiError::bad_request("the LDAP group DN should be provided").into());
            }
            let normalized = berth_auth::ldap::normalize_dn(&req.ldap_group_dn);
            if groups.find_by_ldap_dn(&normalized).await?.is_some() {
                return Err(duplicate(&req).into());
            }
            let config = state.store.configurations().load().await?;
            let found = berth_auth::ldap::search_groups(
                &crate::directory::settings(&config),
                None,
                Some(&req.ldap_group_dn),
            )
            .await
            .map_err(crate::directory::error)?;
            if found.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "LDAP Group DN is not found: DN:{}",
                    req.ldap_group_dn
                ))
                .into());
            }
            groups
                .create(&req.group_name, GROUP_TYPE_LDAP, Some(&normalized))
                .await
        }
        GROUP_TYPE_HTTP | GROUP_TYPE_OIDC => {
            groups.create(&req.group_name, req.group_type, None).await
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "invalid group type {other}: 1 (LDAP), 2 (HTTP) or 3 (OIDC)"
            ))
            .into());
        }
    };
    let created = match created {
        Err(berth_store::StoreError::Domain(berth_domain::DomainError::Conflict(_))) => {
            return Err(duplicate(&req).into());
        }
        other => other?,
    };
    Ok((
        StatusCode::CREATED,
        [(
            header::LOCATION,
            format!("/api/v2.0/usergroups/{}", created.id),
        )],
    )
        .into_response())
}

/// `GET /usergroups/search?groupname&page&page_size`: any signed-in user.
pub async fn search_user_groups(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_authenticated()?;
    let paging = query.paging()?;
    let Some(name) = query.get("groupname").filter(|n| !n.is_empty()) else {
        return Err(ApiError::bad_request("need to provide groupname to search user group").into());
    };
    let (total, groups) = state
        .store
        .groups()
        .list(None, Some(name), None, paging)
        .await?;
    let items: Vec<Value> = groups
        .iter()
        .map(|g| json!({"id": g.id, "group_name": g.group_name, "group_type": g.group_type}))
        .collect();
    Ok(paged(&items, total, query.link(paging, total)))
}

/// `GET /usergroups/{group_id}`.
pub async fn get_user_group(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<Json<Value>> {
    principal.require_system(SystemResource::UserGroup, Action::Read)?;
    let id = group_id(&id)?;
    let group = state
        .store
        .groups()
        .find_by_id(id)
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok(Json(group_json(&group)))
}

/// `PUT /usergroups/{group_id}`: renames the group (its type and DN stay).
pub async fn update_user_group(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: LaterJson<UserGroupReq>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::UserGroup, Action::Update)?;
    let id = group_id(&id)?;
    let req = body.parse()?;
    if req.group_name.is_empty() {
        return Err(ApiError::bad_request("the group name should be provided").into());
    }
    if !state.store.groups().rename(id, &req.group_name).await? {
        return Err(not_found(id).into());
    }
    Ok(StatusCode::OK)
}

/// `DELETE /usergroups/{group_id}`: the group, its members and its project
/// memberships go; 404 when there is no such group.
pub async fn delete_user_group(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::UserGroup, Action::Delete)?;
    let id = group_id(&id)?;
    if !state.store.groups().delete(id).await? {
        return Err(not_found(id).into());
    }
    Ok(StatusCode::OK)
}
