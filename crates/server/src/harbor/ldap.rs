//! LDAP directory operations (system administrators only).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use berth_auth::ldap::{self, DirectoryError};
use berth_domain::rbac::{Action, SystemResource};
use serde::{Deserialize, Serialize};

use crate::directory;
use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::HarborBytes;
use crate::operations::{Routes, Surface};
use crate::service::ldap_ping::{self, LdapConf};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .post("/ldap/ping", ping_ldap)
        .get("/ldap/users/search", search_ldap_user)
        .post("/ldap/users/import", import_ldap_user)
        .get("/ldap/groups/search", search_ldap_group)
}

/// Harbor's LdapPingResult.
#[derive(Debug, Serialize)]
pub struct LdapPingResult {
    /// Whether the connection and bind worked.
    pub success: bool,
    /// Why not.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Harbor's LdapUser.
#[derive(Debug, Serialize)]
pub struct LdapUser {
    username: String,
    realname: String,
    email: String,
}

/// Harbor's LdapImportUsers.
#[derive(Debug, Deserialize)]
pub struct LdapImportUsers {
    #[serde(default)]
    ldap_uid_list: Vec<String>,
}

/// Harbor's LdapFailedImportUser.
#[derive(Debug, Serialize)]
pub struct LdapFailedImportUser {
    uid: String,
    error: String,
}

/// Harbor's UserGroup, as group search returns it (name and DN only).
#[derive(Debug, Serialize)]
pub struct UserGroup {
    group_name: String,
    ldap_group_dn: String,
}

/// Parses an optional JSON body; an empty body is `None`, malformed JSON is a 400.
fn optional_json<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<Option<T>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|err| ApiError::bad_request(format!("invalid request body: {err}")))
}

/// Tests a connection and bind with the given settings, else the stored ones.
/// Malformed settings are a 400; an unreachable directory or refused bind is
/// `200 {"success": false, "message": ...}`.
pub async fn ping_ldap(
    State(state): State<AppState>,
    principal: Principal,
    HarborBytes(body): HarborBytes,
) -> HarborResult<Json<LdapPingResult>> {
    principal.require_system(SystemResource::Configuration, Action::Read)?;
    let conf: LdapConf = optional_json(&body)?.unwrap_or_default();
    let result = match ldap_ping::ping(&state, &principal, conf).await? {
        Ok(()) => LdapPingResult {
            success: true,
            message: String::new(),
        },
        Err(message) => LdapPingResult {
            success: false,
            message,
        },
    };
    Ok(Json(result))
}

/// Query of searchLdapUser.
#[derive(Debug, Deserialize)]
pub struct UserSearch {
    username: Option<String>,
}

/// Searches the directory for users by uid (all users without a name).
pub async fn search_ldap_user(
    State(state): State<AppState>,
    principal: Principal,
    Query(query): Query<UserSearch>,
) -> HarborResult<Json<Vec<LdapUser>>> {
    principal.require_system(SystemResource::LdapUser, Action::List)?;
    let config = state.store.configurations().load().await?;
    let users = ldap::search_users(&directory::settings(&config), query.username.as_deref())
        .await
        .map_err(directory::error)?;
    Ok(Json(
        users
            .into_iter()
            .map(|u| LdapUser {
                username: u.username,
                realname: u.realname,
                email: u.email,
            })
            .collect(),
    ))
}

/// Onboards directory users by uid; 404 with the failures when any uid fails.
pub async fn import_ldap_user(
    State(state): State<AppState>,
    principal: Principal,
    HarborBytes(body): HarborBytes,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::LdapUser, Action::Create)?;
    let request: LdapImportUsers =
        optional_json(&body)?.ok_or_else(|| ApiError::bad_request("the uid list is required"))?;
    let config = state.store.configurations().load().await?;
    let settings = directory::settings(&config);
    let mut failed = Vec::new();
    for uid in request.ldap_uid_list {
        let error = if uid.trim().is_empty() {
            Some("empty_uid".to_string())
        } else {
            match ldap::find_user(&settings, &uid).await {
                Err(DirectoryError::Invalid(message)) => {
                    return Err(ApiError::bad_request(message).into());
                }
                Err(_) => Some("failed_search_user".to_string()),
                Ok(None) => Some("unknown_user".to_string()),
                Ok(Some(found)) => match directory::onboard_user(&state, &found).await {
                    Ok(_) => None,
                    Err(_) => Some(format!("failed to import user: {uid}")),
                },
            }
        };
        if let Some(error) = error {
            failed.push(LdapFailedImportUser { uid, error });
        }
    }
    Ok(if failed.is_empty() {
        StatusCode::OK.into_response()
    } else {
        (StatusCode::NOT_FOUND, Json(failed)).into_response()
    })
}

/// Query of searchLdapGroup.
#[derive(Debug, Deserialize)]
pub struct GroupSearch {
    groupname: Option<String>,
    groupdn: Option<String>,
}

/// Searches directory groups by name (under the group base DN) or by DN.
pub async fn search_ldap_group(
    State(state): State<AppState>,
    principal: Principal,
    Query(query): Query<GroupSearch>,
) -> HarborResult<Json<Vec<UserGroup>>> {
    principal.require_system(SystemResource::LdapUser, Action::List)?;
    let config = state.store.configurations().load().await?;
    let groups = ldap::search_groups(
        &directory::settings(&config),
        query.groupname.as_deref(),
        query.groupdn.as_deref(),
    )
    .await
    .map_err(directory::error)?;
    if groups.is_empty() {
        return Err(ApiError::not_found(format!(
            "resource not found: group name:{}, group DN:{}",
            query.groupname.unwrap_or_default(),
            query.groupdn.unwrap_or_default()
        ))
        .into());
    }
    Ok(Json(
        groups
            .into_iter()
            .map(|g| UserGroup {
                group_name: g.name,
                ldap_group_dn: g.dn,
            })
            .collect(),
    ))
}
