//! The system configuration, changed the same way from every surface.

use berth_domain::model::configuration::{ConfigType, find_key, validate_item};
use berth_domain::model::{ConfigValue, Configuration};
use berth_domain::rbac::{Action, SystemResource};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::extract::Principal;
use crate::state::AppState;

/// Whether `auth_mode` may still change: not once users besides the admin exist.
pub async fn auth_mode_editable(state: &AppState) -> Result<bool, ApiError> {
    Ok(state.store.users().count_besides_admin().await? == 0)
}

/// The `oidc_*` items' rules beyond their type: an endpoint Berth may call
/// (https, or http to a loopback address), extra parameters that are a JSON
/// object, a group filter that is a regular expression.
fn check_oidc_item(name: &str, text: &str) -> Result<(), ApiError> {
    let bad = |detail: String| Err(ApiError::bad_request(format!("bad request: {detail}")));
    match name {
        "oidc_endpoint" if !text.trim().is_empty() => {
            crate::oidc::check_endpoint(text).or_else(bad)
        }
        "oidc_extra_redirect_parms" if !text.trim().is_empty() => {
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(_)) => Ok(()),
                _ => bad(format!("{name} must be a JSON object")),
            }
        }
        "oidc_group_filter" if !text.trim().is_empty() => regex::Regex::new(text.trim())
            .map(|_| ())
            .or_else(|e| bad(format!("invalid oidc_group_filter: {e}"))),
        _ => Ok(()),
    }
}

/// Converts one JSON item to its typed value; unknown keys and wrong types are
/// 400s. `null` is no value: the item stays as it is (`None`), as Harbor's
/// binding drops it.
fn typed_item(name: &str, value: &Value) -> Result<Option<(&'static str, ConfigValue)>, ApiError> {
    let key = find_key(name).ok_or_else(|| {
        ApiError::bad_request(format!("bad request: unknown configuration item: {name}"))
    })?;
    if value.is_null() {
        return Ok(None);
    }
    let wrong = |expected: &str| {
        ApiError::bad_request(format!(
            "bad request: the value of {name} must be of type {expected}"
        ))
    };
    let typed = match (key.kind, value) {
        (ConfigType::String | ConfigType::Password, Value::String(s)) => {
            ConfigValue::String(s.clone())
        }
        (ConfigType::String | ConfigType::Password, _) => return Err(wrong("string")),
        (ConfigType::Bool, Value::Bool(b)) => ConfigValue::Bool(*b),
        (ConfigType::Bool, _) => return Err(wrong("boolean")),
        (ConfigType::Int, Value::Number(n)) => {
            ConfigValue::Int(n.as_i64().ok_or_else(|| wrong("integer"))?)
        }
        (ConfigType::Int, _) => return Err(wrong("integer")),
        (ConfigType::Object, Value::Object(_)) => ConfigValue::String(value.to_string()),
        (ConfigType::Object, _) => return Err(wrong("object")),
    };
    validate_item(key.name, &typed)?;
    Ok(Some((key.name, typed)))
}

/// updateConfigurations' rules (administrators): typed and validated items,
/// all or nothing, the auth mode fixed once users exist; records
/// `configuration.changed` naming the items.
pub async fn update(
    state: &AppState,
    principal: &Principal,
    body: &Map<String, Value>,
) -> Result<(), ApiError> {
    principal.require_system(SystemResource::Configuration, Action::Update)?;
    if body.is_empty() {
        return Err(ApiError::bad_request("Missing configure item"));
    }
    let items = body
        .iter()
        .filter_map(|(name, value)| typed_item(name, value).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    if items.is_empty() {
        // Only nulls: nothing changes.
        return Ok(());
    }
    let current = state.store.configurations().load().await?;
    if let Some((_, ConfigValue::String(mode))) = items.iter().find(|(k, _)| *k == "auth_mode")
        && mode != current.string("auth_mode")
        && !auth_mode_editable(state).await?
    {
        return Err(ApiError::bad_request(
            "the auth mode cannot be modified as new users have been inserted into database",
        ));
    }
    let merged = Configuration::from_stored(
        current
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .chain(items.iter().map(|(k, v)| (k.to_string(), v.clone()))),
    );
    if merged.flag("skip_audit_log_database")
        && merged.string("audit_log_forward_endpoint").is_empty()
    {
        return Err(ApiError::bad_request(
            "bad request: skip_audit_log_database can only be enabled when audit_log_forward_endpoint is set",
        ));
    }
    for (name, value) in &items {
        if let ConfigValue::String(text) = value {
            check_oidc_item(name, text)?;
        }
    }
    state
        .store
        .configurations()
        .change(&items, principal.audit_name())
        .await?;
    state.forget_configuration();
    state.deliver_events();
    Ok(())
}
