//! System configuration: getConfigurations, updateConfigurations, getInternalconfig
//! (administrators only; passwords are accepted and never returned).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use berth_domain::model::configuration::{ConfigType, KEYS, find_key, validate_item};
use berth_domain::model::{ConfigValue, Configuration};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::HarborJson;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/configurations", get_configurations)
        .put("/configurations", update_configurations)
        .get("/internalconfig", get_internalconfig)
}

fn wire_value(value: &ConfigValue) -> Value {
    match value {
        ConfigValue::String(s) => Value::String(s.clone()),
        ConfigValue::Bool(b) => Value::Bool(*b),
        ConfigValue::Int(i) => Value::from(*i),
    }
}

/// Whether `auth_mode` may still change: not once users besides the admin exist.
pub async fn auth_mode_editable(state: &AppState) -> Result<bool, ApiError> {
    Ok(state.store.users().count_besides_admin().await? == 0)
}

/// `{"key": {"value": ..., "editable": ...}}` for every non-password item.
/// Object items (`scan_all_policy`) are the object itself on `/configurations`,
/// as Harbor's ConfigurationsResponse types it, and `{"value": "<its JSON
/// text>", "editable": ...}` on `/internalconfig`, as Harbor gives map items there.
async fn response_map(state: &AppState, internal: bool) -> Result<Map<String, Value>, ApiError> {
    let config = state.store.configurations().load().await?;
    let auth_mode_editable = auth_mode_editable(state).await?;
    let mut map = Map::new();
    for key in KEYS.iter().filter(|k| k.kind != ConfigType::Password) {
        let value = config
            .get(key.name)
            .cloned()
            .unwrap_or_else(|| key.default_value());
        let editable = key.name != "auth_mode" || auth_mode_editable;
        let item = match (key.kind, &value) {
            (ConfigType::Object, ConfigValue::String(text)) if !internal => {
                serde_json::from_str(text).unwrap_or_else(|_| json!({}))
            }
            _ => json!({"value": wire_value(&value), "editable": editable}),
        };
        map.insert(key.name.to_string(), item);
    }
    Ok(map)
}

/// The configuration in effect (administrators).
pub async fn get_configurations(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Json<Map<String, Value>>> {
    principal.require_sysadmin()?;
    Ok(Json(response_map(&state, false).await?))
}

/// The same map for administrators (the user's spec opens it to them; Harbor
/// reserves it for internal services). Passwords are not included.
pub async fn get_internalconfig(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Json<Map<String, Value>>> {
    principal.require_sysadmin()?;
    Ok(Json(response_map(&state, true).await?))
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

/// Updates the given items (any subset), all or nothing.
pub async fn update_configurations(
    State(state): State<AppState>,
    principal: Principal,
    HarborJson(body): HarborJson<Map<String, Value>>,
) -> HarborResult<StatusCode> {
    update_configurations_as(&state, &principal, &body).await?;
    Ok(StatusCode::OK)
}

/// updateConfigurations' rules for `principal` (the API and the portal): typed
/// and validated items, the auth mode fixed once users exist, audited.
pub async fn update_configurations_as(
    state: &AppState,
    principal: &Principal,
    body: &Map<String, Value>,
) -> Result<(), ApiError> {
    principal.require_sysadmin()?;
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
    state.store.configurations().save(&items).await?;
    state.forget_configuration();
    let names: Vec<&str> = items.iter().map(|(name, _)| *name).collect();
    state.audit(crate::audit::Event {
        project_id: None,
        operation: "update",
        resource_type: "configuration",
        resource: &names.join(","),
        username: principal.audit_name(),
    });
    Ok(())
}
