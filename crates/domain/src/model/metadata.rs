//! Project metadata: the known keys and their value rules (harbor-api.md §7.6).

use crate::DomainError;

/// Keys whose values are Go `ParseBool` booleans, stored as `"true"`/`"false"`.
pub const BOOL_KEYS: &[&str] = &[
    "public",
    "enable_content_trust",
    "enable_content_trust_cosign",
    "auto_scan",
    "auto_sbom_generation",
    "prevent_vul",
    "reuse_sys_cve_allowlist",
    "proxy_cache_local_on_not_found",
    "proxy_referrer_api",
];

/// The other keys a client may write: typed or free-form strings.
pub const OTHER_KEYS: &[&str] = &[
    "severity",
    "proxy_speed_kb",
    "max_upstream_conn",
    "proxy_cache_filter_pattern",
    "proxy_cache_filter_kind",
];

/// Whether a client may write `key` through the metadata API or a ProjectReq.
pub fn is_writable(key: &str) -> bool {
    BOOL_KEYS.contains(&key) || OTHER_KEYS.contains(&key)
}

/// The severities `severity` accepts.
pub const SEVERITIES: &[&str] = &["none", "low", "medium", "high", "critical"];

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Validates one metadata pair and returns the value to store (booleans and
/// severities normalized). Unknown keys give `invalid key: k`, bad values `invalid value: v`.
pub fn normalize(key: &str, value: &str) -> Result<String, DomainError> {
    if !is_writable(key) {
        return Err(DomainError::bad_request(format!("invalid key: {key}")));
    }
    let bad = || DomainError::bad_request(format!("invalid value: {value}"));
    if BOOL_KEYS.contains(&key) {
        return parse_go_bool(value).map(|b| b.to_string()).ok_or_else(bad);
    }
    match key {
        "severity" => {
            let lower = value.to_ascii_lowercase();
            SEVERITIES
                .contains(&lower.as_str())
                .then_some(lower)
                .ok_or_else(bad)
        }
        "proxy_speed_kb" => value
            .parse::<i32>()
            .ok()
            .filter(|v| *v >= -1)
            .map(|v| v.to_string())
            .ok_or_else(bad),
        "max_upstream_conn" => value
            .parse::<i32>()
            .ok()
            .filter(|v| *v > 0 || *v == -1)
            .map(|v| v.to_string())
            .ok_or_else(bad),
        "proxy_cache_filter_kind" => matches!(value, "doublestar" | "regex")
            .then(|| value.to_string())
            .ok_or_else(bad),
        _ => Ok(value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_validated_and_normalized() {
        assert_eq!(normalize("public", "1").unwrap(), "true");
        assert_eq!(normalize("auto_scan", "False").unwrap(), "false");
        assert_eq!(normalize("severity", "HIGH").unwrap(), "high");
        assert_eq!(normalize("max_upstream_conn", "-1").unwrap(), "-1");
        assert_eq!(
            normalize("public", "yes").unwrap_err(),
            DomainError::bad_request("invalid value: yes")
        );
        assert_eq!(
            normalize("retention_id", "3").unwrap_err(),
            DomainError::bad_request("invalid key: retention_id")
        );
        assert!(normalize("severity", "urgent").is_err());
        assert!(normalize("max_upstream_conn", "0").is_err());
        assert!(normalize("proxy_speed_kb", "x").is_err());
    }
}
