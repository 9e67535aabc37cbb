//! Harbor's webhook policies: a project's receivers (`http` endpoints or
//! Slack) and the events they are told of, in Harbor's `Default` or
//! `CloudEvents` payload format.

use serde::{Deserialize, Serialize};

use crate::DomainError;

/// An artifact was pushed.
pub const PUSH_ARTIFACT: &str = "PUSH_ARTIFACT";
/// An artifact was pulled.
pub const PULL_ARTIFACT: &str = "PULL_ARTIFACT";
/// An artifact was deleted.
pub const DELETE_ARTIFACT: &str = "DELETE_ARTIFACT";
/// A push was refused for the project's quota.
pub const QUOTA_EXCEED: &str = "QUOTA_EXCEED";
/// The project's usage passed the warning threshold of its quota.
pub const QUOTA_WARNING: &str = "QUOTA_WARNING";
/// A replication ended.
pub const REPLICATION: &str = "REPLICATION";
/// A tag retention run ended.
pub const TAG_RETENTION: &str = "TAG_RETENTION";

/// A scan ended well (Berth has no scanner: accepted, never sent).
pub const SCANNING_COMPLETED: &str = "SCANNING_COMPLETED";
/// A scan failed (never sent).
pub const SCANNING_FAILED: &str = "SCANNING_FAILED";
/// A scan was stopped (never sent).
pub const SCANNING_STOPPED: &str = "SCANNING_STOPPED";

/// The event types a policy may name, in Harbor's order. The scanning ones
/// are accepted, so that policies made for Harbor keep working, and never
/// sent: Berth has no scanner.
pub const EVENT_TYPES: [&str; 10] = [
    PUSH_ARTIFACT,
    PULL_ARTIFACT,
    DELETE_ARTIFACT,
    QUOTA_EXCEED,
    QUOTA_WARNING,
    SCANNING_FAILED,
    SCANNING_STOPPED,
    SCANNING_COMPLETED,
    REPLICATION,
    TAG_RETENTION,
];

/// The CloudEvents `type` of a Harbor event type.
pub fn cloud_event_type(event_type: &str) -> Option<&'static str> {
    Some(match event_type {
        DELETE_ARTIFACT => "harbor.artifact.deleted",
        PULL_ARTIFACT => "harbor.artifact.pulled",
        PUSH_ARTIFACT => "harbor.artifact.pushed",
        QUOTA_EXCEED => "harbor.quota.exceeded",
        QUOTA_WARNING => "harbor.quota.warned",
        REPLICATION => "harbor.replication.status.changed",
        SCANNING_FAILED => "harbor.scan.failed",
        SCANNING_COMPLETED => "harbor.scan.completed",
        SCANNING_STOPPED => "harbor.scan.stopped",
        TAG_RETENTION => "harbor.tag_retention.finished",
        _ => return None,
    })
}

/// An HTTP endpoint receiving JSON.
pub const HTTP: &str = "http";
/// A Slack incoming webhook.
pub const SLACK: &str = "slack";
/// The notify types, in Harbor's order.
pub const NOTIFY_TYPES: [&str; 2] = [HTTP, SLACK];

/// Harbor's own payload.
pub const DEFAULT_FORMAT: &str = "Default";
/// CloudEvents 1.0, structured JSON.
pub const CLOUD_EVENTS: &str = "CloudEvents";

/// The payload formats a notify type offers.
pub fn payload_formats(notify_type: &str) -> &'static [&'static str] {
    match notify_type {
        HTTP => &[DEFAULT_FORMAT, CLOUD_EVENTS],
        _ => &[DEFAULT_FORMAT],
    }
}

/// The most targets a policy may have (Harbor has no bound): each event
/// makes a delivery per target, and a policy's deliveries share its
/// workers, so a policy of many receivers that never answer delays no one
/// else's but grows its own backlog.
pub const MAX_TARGETS: usize = 10;

/// Where a policy sends its events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// [`HTTP`] or [`SLACK`].
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The receiver's URL.
    #[serde(default)]
    pub address: String,
    /// Sent as the `Authorization` header, as given (http only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub auth_header: String,
    /// Accept any certificate from the receiver.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_cert_verify: bool,
    /// [`DEFAULT_FORMAT`] or [`CLOUD_EVENTS`] (http only; empty is the default).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub payload_format: String,
}

/// Harbor's WebhookPolicy as the API reads and writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Its id (ignored on create).
    #[serde(default)]
    pub id: i64,
    /// Unique in its project.
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The project (set from the path).
    #[serde(default)]
    pub project_id: i64,
    #[serde(default)]
    pub targets: Vec<Target>,
    #[serde(default)]
    pub event_types: Vec<String>,
    /// Who made it: the caller that created it (a `creator` in the request
    /// is ignored).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub creator: String,
    #[serde(default)]
    pub creation_time: String,
    #[serde(default)]
    pub update_time: String,
    /// A disabled policy sends nothing.
    #[serde(default)]
    pub enabled: bool,
}

impl Policy {
    /// Checks what Harbor checks, in its order and with its messages, and
    /// fills the default payload format of http targets.
    pub fn validate(&mut self) -> Result<(), DomainError> {
        if self.event_types.is_empty() {
            return Err(DomainError::bad_request("empty event type"));
        }
        if let Some(unknown) = self
            .event_types
            .iter()
            .find(|kind| !EVENT_TYPES.contains(&kind.as_str()))
        {
            return Err(DomainError::bad_request(format!(
                "unsupported event type {unknown}"
            )));
        }
        if self.targets.is_empty() {
            return Err(DomainError::bad_request(format!(
                "empty notification target with policy {}",
                self.name
            )));
        }
        if self.targets.len() > MAX_TARGETS {
            return Err(DomainError::bad_request(format!(
                "too many notification targets with policy {}: at most {MAX_TARGETS}",
                self.name
            )));
        }
        for target in &mut self.targets {
            check_address(&target.address)?;
            if !NOTIFY_TYPES.contains(&target.kind.as_str()) {
                return Err(DomainError::bad_request(format!(
                    "unsupported target type {} with policy {}",
                    target.kind, self.name
                )));
            }
            if !target.payload_format.is_empty() {
                if target.kind == SLACK {
                    return Err(DomainError::bad_request(
                        "set payload format is not allowed for slack",
                    ));
                }
                if !payload_formats(HTTP).contains(&target.payload_format.as_str()) {
                    return Err(DomainError::bad_request(format!(
                        "unsupported payload format type: {}",
                        target.payload_format
                    )));
                }
            } else if target.kind == HTTP {
                target.payload_format = DEFAULT_FORMAT.to_string();
            }
        }
        // Harbor delivers a type named twice twice; once is what was meant.
        let mut seen = Vec::new();
        self.event_types.retain(|kind| {
            let first = !seen.contains(kind);
            seen.push(kind.clone());
            first
        });
        Ok(())
    }
}

/// A target address as Harbor parses it: trimmed, `http://` assumed without
/// a scheme, then only `http` and `https`, with a host.
fn check_address(address: &str) -> Result<(), DomainError> {
    let trimmed = address.trim();
    if trimmed.trim_end_matches('/').is_empty() {
        return Err(DomainError::bad_request("empty URL"));
    }
    let (scheme, rest) = trimmed.split_once("://").unwrap_or(("http", trimmed));
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(DomainError::bad_request(format!(
            "invalid scheme: {scheme}"
        )));
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(DomainError::bad_request(format!(
            "parse \"{trimmed}\": invalid URI for request"
        )));
    }
    Ok(())
}

/// The URL a target's address names: as given, `http://` prefixed when it has no scheme.
pub fn target_url(address: &str) -> String {
    let trimmed = address.trim();
    if trimmed.contains("://") {
        trimmed.to_string()
    } else {
        format!("http://{trimmed}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        serde_json::from_value(serde_json::json!({
            "name": " deploy ",
            "targets": [{"type": "http", "address": "https://hooks.example/x"}],
            "event_types": ["PUSH_ARTIFACT", "PUSH_ARTIFACT", "DELETE_ARTIFACT"],
            "enabled": true
        }))
        .unwrap()
    }

    #[test]
    fn validation_follows_harbor() {
        let mut ok = policy();
        ok.validate().unwrap();
        assert_eq!(ok.name, " deploy ", "kept as given");
        assert_eq!(ok.targets[0].payload_format, DEFAULT_FORMAT);
        assert_eq!(ok.event_types, ["PUSH_ARTIFACT", "DELETE_ARTIFACT"]);
        let refused = |change: fn(&mut Policy)| {
            let mut p = policy();
            change(&mut p);
            p.validate().unwrap_err().to_string()
        };
        assert_eq!(refused(|p| p.event_types.clear()), "empty event type");
        assert_eq!(
            refused(|p| p.event_types = vec!["FOO".into()]),
            "unsupported event type FOO"
        );
        assert!(refused(|p| p.targets.clear()).starts_with("empty notification target"));
        assert_eq!(refused(|p| p.targets[0].address = " ".into()), "empty URL");
        assert_eq!(
            refused(|p| p.targets[0].address = "ftp://x".into()),
            "invalid scheme: ftp"
        );
        assert!(refused(|p| p.targets[0].address = "http://".into()).contains("invalid URI"));
        assert!(
            refused(|p| p.targets[0].kind = "email".into())
                .contains("unsupported target type email")
        );
        assert_eq!(
            refused(|p| {
                p.targets[0].kind = SLACK.into();
                p.targets[0].payload_format = CLOUD_EVENTS.into();
            }),
            "set payload format is not allowed for slack"
        );
        assert_eq!(
            refused(|p| p.targets[0].payload_format = "Xml".into()),
            "unsupported payload format type: Xml"
        );
        let mut scanning = policy();
        scanning.event_types = vec![SCANNING_FAILED.into()];
        assert!(
            scanning.validate().is_ok(),
            "accepted for Harbor's policies"
        );
        let mut bare = policy();
        bare.targets[0].address = "hooks.example:8080/x".into();
        assert!(bare.validate().is_ok());
        assert_eq!(
            target_url(&bare.targets[0].address),
            "http://hooks.example:8080/x"
        );
    }
}
