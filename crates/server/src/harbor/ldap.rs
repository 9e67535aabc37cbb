//! LDAP directory operations (system administrators only).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use berth_auth::ldap::{self, DirectoryError};
use serde::{Deserialize, Serialize};

use crate::directory;
use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::HarborBytes;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .post("/ldap/ping", ping_ldap)
        .get("/ldap/users/search", search_ldap_user)
        .post("/ldap/users/import", import_ldap_user)
        .get("/ldap/groups/search", search_ldap_group)
}

/// Harbor's LdapConf: the settings a ping may try instead of the stored ones.
#[derive(Debug, Default, Deserialize)]
pub struct LdapConf {
    /// `ldap_url`.
    pub ldap_url: Option<String>,
    /// `ldap_search_dn`.
    pub ldap_search_dn: Option<String>,
    /// `ldap_search_password` (empty: the stored one).
    pub ldap_search_password: Option<String>,
    /// `ldap_base_dn`.
    pub ldap_base_dn: Option<String>,
    /// `ldap_filter`.
    pub ldap_filter: Option<String>,
    /// `ldap_uid`.
    pub ldap_uid: Option<String>,
    /// `ldap_scope`.
    pub ldap_scope: Option<i64>,
    /// `ldap_connection_timeout`.
    pub ldap_connection_timeout: Option<i64>,
    /// `ldap_verify_cert`.
    pub ldap_verify_cert: Option<bool>,
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
    principal.require_sysadmin()?;
    let conf: LdapConf = optional_json(&body)?.unwrap_or_default();
    Ok(Json(ping_ldap_as(&state, &principal, conf).await?))
}

/// Whether two directory URLs name the same host (whatever the scheme or
/// port: `ldap://dir` and `ldaps://dir:636` are one directory).
fn same_directory(a: &str, b: &str) -> bool {
    let host = |url: &str| {
        let url = ldap::normalize_url(url).ok()?;
        let authority = url
            .split_once("://")?
            .1
            .split('/')
            .next()?
            .to_ascii_lowercase();
        Some(match authority.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host.to_string(),
            _ => authority,
        })
    };
    matches!((host(a), host(b)), (Some(a), Some(b)) if a == b)
}

/// pingLdap for `principal` (the API and the portal): `conf`'s settings over
/// the stored ones; the stored search password only with the stored URL.
pub async fn ping_ldap_as(
    state: &AppState,
    principal: &Principal,
    conf: LdapConf,
) -> Result<LdapPingResult, ApiError> {
    principal.require_sysadmin()?;
    let config = state.store.configurations().load().await?;
    let mut settings = directory::settings(&config);
    let stored_url = settings.url.clone();
    let overrides = [
        (&mut settings.url, conf.ldap_url),
        (&mut settings.search_dn, conf.ldap_search_dn),
        (&mut settings.base_dn, conf.ldap_base_dn),
        (&mut settings.filter, conf.ldap_filter),
        (&mut settings.uid_attribute, conf.ldap_uid),
    ];
    for (field, value) in overrides {
        if let Some(value) = value {
            *field = value;
        }
    }
    match conf.ldap_search_password.filter(|p| !p.is_empty()) {
        Some(password) => settings.search_password = password,
        // The stored password goes only to the stored directory's host: a
        // ping of another would send it to whatever host the caller names.
        None if !same_directory(&settings.url, &stored_url) => settings.search_password.clear(),
        None => {}
    }
    if let Some(scope) = conf.ldap_scope {
        settings.scope = scope;
    }
    if let Some(seconds) = conf.ldap_connection_timeout.filter(|s| *s > 0) {
        settings.timeout = std::time::Duration::from_secs(seconds.min(300) as u64);
    }
    if let Some(verify) = conf.ldap_verify_cert {
        settings.verify_cert = verify;
    }
    ldap::normalize_url(&settings.url).map_err(directory::error)?;
    if !settings.base_dn.is_empty() {
        ldap::validate_dn(&settings.base_dn).map_err(directory::error)?;
    }
    ldap::normalize_filter(&settings.filter).map_err(directory::error)?;
    if !(0..=2).contains(&settings.scope) {
        return Err(ApiError::bad_request("invalid scope, should be 0, 1 or 2"));
    }
    let result = match ldap::ping(&settings).await {
        Ok(()) => LdapPingResult {
            success: true,
            message: String::new(),
        },
        Err(DirectoryError::Invalid(message)) if message.starts_with("invalid DN") => {
            return Err(ApiError::bad_request(message));
        }
        Err(err) => LdapPingResult {
            success: false,
            message: format!("error: {err}"),
        },
    };
    Ok(result)
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
    principal.require_sysadmin()?;
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
    principal.require_sysadmin()?;
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
    principal.require_sysadmin()?;
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
