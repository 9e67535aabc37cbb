//! Trying LDAP settings before saving them: a connection and bind with the
//! settings given over the stored ones.

use berth_auth::ldap::{self, DirectoryError};
use berth_domain::rbac::{Action, SystemResource};
use serde::Deserialize;

use crate::directory;
use crate::error::ApiError;
use crate::extract::Principal;
use crate::state::AppState;

/// The settings a ping may try instead of the stored ones (Harbor's LdapConf).
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

/// pingLdap's rules (administrators): `conf`'s settings over the stored
/// ones; the stored search password only with the stored URL. Malformed
/// settings are an error; an unreachable directory or a refused bind is
/// `Ok(Err(why))`.
pub async fn ping(
    state: &AppState,
    principal: &Principal,
    conf: LdapConf,
) -> Result<Result<(), String>, ApiError> {
    principal.require_system(SystemResource::Configuration, Action::Read)?;
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
    match ldap::ping(&settings).await {
        Ok(()) => Ok(Ok(())),
        Err(DirectoryError::Invalid(message)) if message.starts_with("invalid DN") => {
            Err(ApiError::bad_request(message))
        }
        Err(err) => Ok(Err(format!("error: {err}"))),
    }
}
