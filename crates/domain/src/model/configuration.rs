//! Harbor's system configuration: the user-scope keys `/configurations` exposes,
//! their types and defaults (harbor-api.md §9).

use std::collections::BTreeMap;

/// The type of a configuration item on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// A JSON string.
    String,
    /// A JSON boolean.
    Bool,
    /// A JSON integer.
    Int,
    /// A JSON string that is accepted on write and never returned.
    Password,
    /// A JSON object, kept as its JSON text (Harbor's map-typed items).
    Object,
}

/// A configuration value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigValue {
    /// String, password or object items (an object as its JSON text).
    String(String),
    /// Boolean items.
    Bool(bool),
    /// Integer items.
    Int(i64),
}

impl ConfigValue {
    /// The string, if this is a string item.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is a boolean item.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The integer, if this is an integer item.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            _ => None,
        }
    }
}

/// One known key.
#[derive(Debug, Clone, Copy)]
pub struct ConfigKey {
    /// The wire name.
    pub name: &'static str,
    /// Its type.
    pub kind: ConfigType,
    /// Its default, as a string parsed by `kind`.
    pub default: &'static str,
}

const fn key(name: &'static str, kind: ConfigType, default: &'static str) -> ConfigKey {
    ConfigKey {
        name,
        kind,
        default,
    }
}

use ConfigType::{Bool, Int, Object, Password, String as Str};

/// Every user-scope key, in Harbor's order.
pub const KEYS: &[ConfigKey] = &[
    key("auth_mode", Str, "db_auth"),
    key("primary_auth_mode", Bool, "false"),
    key("project_creation_restriction", Str, "everyone"),
    key("self_registration", Bool, "false"),
    key("read_only", Bool, "false"),
    key("token_expiration", Int, "30"),
    key("robot_token_duration", Int, "30"),
    key("robot_name_prefix", Str, "robot$"),
    key("notification_enable", Bool, "true"),
    key("quota_per_project_enable", Bool, "true"),
    key("storage_per_project", Int, "-1"),
    key("session_timeout", Int, "60"),
    key("banner_message", Str, ""),
    key("audit_log_forward_endpoint", Str, ""),
    key("skip_audit_log_database", Bool, "false"),
    key("scanner_skip_update_pulltime", Bool, "false"),
    // Harbor's legacy scan-all schedule: `{"type": "none"|"daily", "parameter": {"daily_time": N}}`.
    key("scan_all_policy", Object, r#"{"type":"none"}"#),
    key("disabled_audit_log_event_types", Str, ""),
    key("ldap_url", Str, ""),
    key("ldap_search_dn", Str, ""),
    key("ldap_search_password", Password, ""),
    key("ldap_base_dn", Str, ""),
    key("ldap_filter", Str, ""),
    key("ldap_uid", Str, "cn"),
    key("ldap_scope", Int, "2"),
    key("ldap_timeout", Int, "5"),
    key("ldap_verify_cert", Bool, "true"),
    // Berth extension: upgrade plain ldap:// connections with StartTLS.
    key("ldap_starttls", Bool, "false"),
    key("ldap_group_base_dn", Str, ""),
    key("ldap_group_search_filter", Str, ""),
    key("ldap_group_attribute_name", Str, ""),
    key("ldap_group_search_scope", Int, "2"),
    key("ldap_group_admin_dn", Str, ""),
    key("ldap_group_membership_attribute", Str, "memberof"),
    key("ldap_group_attach_parallel", Bool, "false"),
    key("uaa_client_id", Str, ""),
    key("uaa_client_secret", Password, ""),
    key("uaa_endpoint", Str, ""),
    key("uaa_verify_cert", Bool, "false"),
    key("http_authproxy_endpoint", Str, ""),
    key("http_authproxy_tokenreview_endpoint", Str, ""),
    key("http_authproxy_admin_groups", Str, ""),
    key("http_authproxy_admin_usernames", Str, ""),
    key("http_authproxy_server_certificate", Str, ""),
    key("http_authproxy_verify_cert", Bool, "true"),
    key("http_authproxy_skip_search", Bool, "false"),
    key("oidc_name", Str, ""),
    key("oidc_endpoint", Str, ""),
    key("oidc_client_id", Str, ""),
    key("oidc_client_secret", Password, ""),
    key("oidc_groups_claim", Str, ""),
    key("oidc_admin_group", Str, ""),
    key("oidc_group_filter", Str, ""),
    key("oidc_scope", Str, ""),
    key("oidc_user_claim", Str, ""),
    key("oidc_verify_cert", Bool, "true"),
    key("oidc_auto_onboard", Bool, "false"),
    key("oidc_extra_redirect_parms", Str, "{}"),
    key("oidc_logout", Bool, "false"),
];

/// The key named `name`, if it is known.
pub fn find_key(name: &str) -> Option<&'static ConfigKey> {
    KEYS.iter().find(|k| k.name == name)
}

impl ConfigKey {
    /// This key's default value.
    pub fn default_value(&self) -> ConfigValue {
        match self.kind {
            Str | Password | Object => ConfigValue::String(self.default.to_string()),
            Bool => ConfigValue::Bool(self.default == "true"),
            Int => ConfigValue::Int(self.default.parse().expect("integer defaults parse")),
        }
    }
}

/// The configuration in effect: defaults overlaid by stored values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configuration(BTreeMap<&'static str, ConfigValue>);

impl Default for Configuration {
    fn default() -> Self {
        Self(KEYS.iter().map(|k| (k.name, k.default_value())).collect())
    }
}

impl Configuration {
    /// Defaults overlaid by `stored` values; unknown or mistyped stored entries are ignored.
    pub fn from_stored(stored: impl IntoIterator<Item = (String, ConfigValue)>) -> Self {
        let mut config = Self::default();
        for (name, value) in stored {
            if let Some(key) = find_key(&name) {
                let fits = matches!(
                    (key.kind, &value),
                    (Str | Password | Object, ConfigValue::String(_))
                        | (Bool, ConfigValue::Bool(_))
                        | (Int, ConfigValue::Int(_))
                );
                if fits {
                    config.0.insert(key.name, value);
                }
            }
        }
        config
    }

    /// The value of `name` (every known key has one).
    pub fn get(&self, name: &str) -> Option<&ConfigValue> {
        self.0.get(name)
    }

    /// A string item, or `""` when unknown.
    pub fn string(&self, name: &str) -> &str {
        self.get(name).and_then(ConfigValue::as_str).unwrap_or("")
    }

    /// A boolean item, or `false` when unknown.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name)
            .and_then(ConfigValue::as_bool)
            .unwrap_or(false)
    }

    /// An integer item, or 0 when unknown.
    pub fn int(&self, name: &str) -> i64 {
        self.get(name).and_then(ConfigValue::as_int).unwrap_or(0)
    }

    /// Every item in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &ConfigValue)> {
        self.0.iter().map(|(k, v)| (*k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overlay() {
        let config = Configuration::from_stored([
            (
                "auth_mode".to_string(),
                ConfigValue::String("ldap_auth".into()),
            ),
            (
                "ldap_scope".to_string(),
                ConfigValue::String("wrong type".into()),
            ),
            ("unknown".to_string(), ConfigValue::Bool(true)),
        ]);
        assert_eq!(config.string("auth_mode"), "ldap_auth");
        assert_eq!(config.int("ldap_scope"), 2);
        assert!(config.flag("notification_enable"));
        assert!(config.get("unknown").is_none());
    }
}

/// The authentication modes `auth_mode` accepts.
pub const AUTH_MODES: &[&str] = &["db_auth", "ldap_auth", "uaa_auth", "http_auth", "oidc_auth"];

/// The authentication modes Berth signs people in with; the others of
/// [`AUTH_MODES`] are refused as not supported yet, rather than stored while
/// sign-in silently stays with local passwords.
pub const SUPPORTED_AUTH_MODES: &[&str] = &["db_auth", "ldap_auth", "oidc_auth"];

/// Checks the rules of one item beyond its type (harbor-api.md §7.3); every
/// failure is a `bad request: ...` 400.
pub fn validate_item(name: &str, value: &ConfigValue) -> Result<(), crate::DomainError> {
    let bad = |detail: String| {
        Err(crate::DomainError::invalid(
            name,
            format!("bad request: {detail}"),
        ))
    };
    match (name, value) {
        ("auth_mode", ConfigValue::String(mode)) if !AUTH_MODES.contains(&mode.as_str()) => bad(
            "invalid auth_mode, shoud be one of db_auth, ldap_auth, uaa_auth, http_auth, oidc_auth"
                .into(),
        ),
        ("auth_mode", ConfigValue::String(mode))
            if !SUPPORTED_AUTH_MODES.contains(&mode.as_str()) =>
        {
            bad(format!(
                "auth_mode {mode} is not supported yet: Berth signs in with db_auth, ldap_auth or oidc_auth"
            ))
        }
        ("project_creation_restriction", ConfigValue::String(r))
            if r != "adminonly" && r != "everyone" =>
        {
            bad("invalid project_creation_restriction, should be adminonly or everyone".into())
        }
        ("storage_per_project", ConfigValue::Int(q))
            if *q != -1 && !(1..=super::project::MAX_STORAGE_LIMIT).contains(q) =>
        {
            bad("quota value should be -1 or great than zero".into())
        }
        ("ldap_scope" | "ldap_group_search_scope", ConfigValue::Int(s)) if !(0..=2).contains(s) => {
            bad("invalid scope, should be 0, 1 or 2".into())
        }
        ("robot_name_prefix", ConfigValue::String(p)) if p.trim().is_empty() => {
            bad("robot_name_prefix cannot be empty or contain only spaces".into())
        }
        ("token_expiration" | "robot_token_duration" | "session_timeout", ConfigValue::Int(v))
            if *v <= 0 =>
        {
            bad(format!("the {name} value must be positive"))
        }
        ("ldap_timeout", ConfigValue::Int(v)) if *v < 0 => {
            bad(format!("the {name} value must be positive"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod validation_tests {
    use super::*;

    #[test]
    fn item_rules() {
        let s = |v: &str| ConfigValue::String(v.into());
        assert!(validate_item("auth_mode", &s("ldap_auth")).is_ok());
        assert!(validate_item("auth_mode", &s("nope")).is_err());
        assert!(validate_item("auth_mode", &s("oidc_auth")).is_ok());
        for unsupported in ["uaa_auth", "http_auth"] {
            let err = validate_item("auth_mode", &s(unsupported)).unwrap_err();
            assert!(err.to_string().contains("not supported yet"), "{err}");
        }
        assert!(validate_item("project_creation_restriction", &s("adminonly")).is_ok());
        assert!(validate_item("project_creation_restriction", &s("x")).is_err());
        assert!(validate_item("storage_per_project", &ConfigValue::Int(-1)).is_ok());
        assert!(validate_item("storage_per_project", &ConfigValue::Int(0)).is_err());
        assert!(validate_item("ldap_scope", &ConfigValue::Int(3)).is_err());
        assert!(validate_item("robot_name_prefix", &s("  ")).is_err());
        let err = validate_item("session_timeout", &ConfigValue::Int(0)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad request: the session_timeout value must be positive"
        );
    }
}
