//! Harbor's replication policies: what is copied between this registry and
//! another one (pushed there, or pulled from there), which repositories and
//! tags (filters), where it lands (destination namespace and flattening) and
//! when (manually, on a schedule, or on each push and delete).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::DomainError;
use crate::glob::Glob;
use crate::oci::is_valid_name;

/// Started by hand (or by the API).
pub const MANUAL: &str = "manual";
/// Started by a schedule.
pub const SCHEDULED: &str = "scheduled";
/// Started by pushes and deletes.
pub const EVENT_BASED: &str = "event_based";

/// A filter on the repository name.
pub const FILTER_NAME: &str = "name";
/// A filter on tags.
pub const FILTER_TAG: &str = "tag";
/// A filter on labels.
pub const FILTER_LABEL: &str = "label";
/// A filter on the resource type (`image` or `artifact`).
pub const FILTER_RESOURCE: &str = "resource";

/// A filter keeps what it matches (the default).
pub const MATCHES: &str = "matches";
/// A filter drops what it matches.
pub const EXCLUDES: &str = "excludes";

/// The resource types a `resource` filter may name.
pub const RESOURCE_TYPES: [&str; 2] = ["image", "artifact"];

/// One of a policy's filters, as Harbor's API carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Filter {
    /// [`FILTER_NAME`], [`FILTER_TAG`], [`FILTER_LABEL`] or [`FILTER_RESOURCE`].
    #[serde(rename = "type", default)]
    pub kind: String,
    /// A pattern (a string), or label names (an array).
    #[serde(default)]
    pub value: Value,
    /// [`MATCHES`], [`EXCLUDES`], or empty (matches).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub decoration: String,
}

impl Filter {
    /// Checks what Harbor checks, with its messages.
    pub fn validate(&self) -> Result<(), DomainError> {
        match self.kind.as_str() {
            FILTER_NAME | FILTER_TAG | FILTER_RESOURCE => {
                let Some(value) = self.value.as_str() else {
                    return Err(DomainError::bad_request(
                        "the type of filter value isn't string",
                    ));
                };
                if self.kind == FILTER_RESOURCE && !RESOURCE_TYPES.contains(&value) {
                    return Err(DomainError::bad_request(format!(
                        "invalid resource filter: {value}"
                    )));
                }
                if self.kind != FILTER_TAG && !self.decoration.is_empty() {
                    return Err(DomainError::bad_request(
                        "only tag and label filter support decoration",
                    ));
                }
                if self.kind != FILTER_RESOURCE {
                    Glob::new(value).map_err(|e| {
                        DomainError::bad_request(format!("invalid filter pattern {value:?}: {e}"))
                    })?;
                }
            }
            FILTER_LABEL => {
                let strings = self
                    .value
                    .as_array()
                    .is_some_and(|labels| labels.iter().all(Value::is_string));
                if !strings {
                    return Err(DomainError::bad_request(
                        "the type of label filter value isn't string slice",
                    ));
                }
            }
            _ => return Err(DomainError::bad_request("invalid filter type")),
        }
        if !self.decoration.is_empty() && self.decoration != MATCHES && self.decoration != EXCLUDES
        {
            return Err(DomainError::bad_request(format!(
                "invalid filter decoration, :{}",
                self.decoration
            )));
        }
        Ok(())
    }

    fn excludes(&self) -> bool {
        self.decoration == EXCLUDES
    }

    fn pattern(&self) -> Option<Glob> {
        self.value
            .as_str()
            .filter(|p| !p.is_empty())
            .and_then(|p| Glob::new(p).ok())
    }
}

/// When a policy runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Trigger {
    /// [`MANUAL`], [`SCHEDULED`] or [`EVENT_BASED`].
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The schedule of a scheduled trigger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_settings: Option<TriggerSettings>,
}

/// A scheduled trigger's settings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TriggerSettings {
    /// Six fields, seconds first.
    #[serde(default)]
    pub cron: String,
}

/// A replication policy. Exactly one of the two registries is another one
/// (a stored `/registries` id); the other side, `None`, is this registry.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub id: i64,
    /// Unique.
    pub name: String,
    pub description: String,
    /// Pulled from this registry (pull-based), or `None`: pushed from here.
    pub src_registry: Option<i64>,
    /// Pushed to this registry (push-based), or `None`: pulled to here.
    pub dest_registry: Option<i64>,
    /// Where copies land; empty keeps the source's names.
    pub dest_namespace: String,
    /// How many leading path components the namespace replaces (-1: all but the last).
    pub dest_namespace_replace_count: i8,
    pub trigger: Trigger,
    pub filters: Vec<Filter>,
    /// Deletes here are deleted there too (event-based push policies).
    pub replicate_deletion: bool,
    /// A tag there that points elsewhere is overwritten.
    pub overwrite: bool,
    pub enabled: bool,
    /// KB/s per blob stream; 0 for no limit.
    pub speed: i32,
    pub copy_by_chunk: bool,
    /// A run is skipped while another of the same policy goes on.
    pub single_active_replication: bool,
    pub creator: String,
    pub creation_time: String,
    pub update_time: String,
}

impl Policy {
    /// Whether copies go from here to the other registry.
    pub fn push_based(&self) -> bool {
        self.dest_registry.is_some()
    }

    /// The other registry's id.
    pub fn remote(&self) -> i64 {
        self.dest_registry.or(self.src_registry).unwrap_or_default()
    }

    /// The schedule of a scheduled trigger.
    pub fn cron(&self) -> Option<&str> {
        (self.trigger.kind == SCHEDULED)
            .then_some(self.trigger.trigger_settings.as_ref())
            .flatten()
            .map(|s| s.cron.as_str())
    }

    /// Checks what Harbor checks, in its order and with its messages (the
    /// cron expression is the caller's: it parses it).
    pub fn validate(&self) -> Result<(), DomainError> {
        if self.name.is_empty() {
            return Err(DomainError::bad_request("empty name"));
        }
        if self.src_registry.is_some() == self.dest_registry.is_some() {
            return Err(DomainError::bad_request(
                "either src_registry or dest_registry should be empty and the other one shouldn't be empty",
            ));
        }
        for filter in &self.filters {
            filter.validate()?;
        }
        if !self.dest_namespace.is_empty() && !is_valid_name(&self.dest_namespace) {
            return Err(DomainError::bad_request(format!(
                "invalid destination namespace: {}",
                self.dest_namespace
            )));
        }
        if self.dest_namespace_replace_count < -1 {
            return Err(DomainError::bad_request(format!(
                "invalid dest_namespace_replace_count: {}",
                self.dest_namespace_replace_count
            )));
        }
        match self.trigger.kind.as_str() {
            MANUAL | EVENT_BASED => {}
            SCHEDULED => {
                if self.cron().is_none_or(str::is_empty) {
                    return Err(DomainError::bad_request(format!(
                        "the cron string cannot be empty when the trigger type is {SCHEDULED}"
                    )));
                }
            }
            _ => return Err(DomainError::bad_request("invalid trigger type")),
        }
        Ok(())
    }

    /// Whether the name filters keep `repository` (the source's full name).
    pub fn keeps_repository(&self, repository: &str) -> bool {
        self.filters
            .iter()
            .filter(|f| f.kind == FILTER_NAME)
            .all(|f| f.pattern().is_none_or(|g| g.matches(repository)))
    }

    /// Whether the tag filters keep an artifact with `tags` (an untagged one
    /// has none): with a tag filter, some tag must match it (or, excluding,
    /// not match it).
    pub fn keeps_tags<'a>(&self, tags: &'a [String]) -> Vec<&'a String> {
        let filters: Vec<(Glob, bool)> = self
            .filters
            .iter()
            .filter(|f| f.kind == FILTER_TAG)
            .filter_map(|f| f.pattern().map(|g| (g, f.excludes())))
            .collect();
        tags.iter()
            .filter(|tag| {
                filters
                    .iter()
                    .all(|(glob, excludes)| glob.matches(tag) != *excludes)
            })
            .collect()
    }

    /// Whether an artifact with any tag is kept when it has no tag: only
    /// without a tag filter (Harbor's untagged artifacts go with no tag filter).
    pub fn keeps_untagged(&self) -> bool {
        !self
            .filters
            .iter()
            .any(|f| f.kind == FILTER_TAG && f.pattern().is_some())
    }

    /// Whether the label filters keep an artifact labelled `labels`: it
    /// must carry every label a matching filter names, and none an excluding one names.
    pub fn keeps_labels(&self, labels: &[String]) -> bool {
        self.filters
            .iter()
            .filter(|f| f.kind == FILTER_LABEL)
            .all(|f| {
                let names: Vec<&str> = f
                    .value
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if f.excludes() {
                    !names.iter().any(|n| labels.iter().any(|l| l == n))
                } else {
                    names.iter().all(|n| labels.iter().any(|l| l == n))
                }
            })
    }

    /// Whether the policy's label filters need the artifacts' labels.
    pub fn has_label_filter(&self) -> bool {
        self.filters.iter().any(|f| f.kind == FILTER_LABEL)
    }

    /// Where `repository` lands: see [`destination_repository`].
    pub fn destination(&self, repository: &str) -> Result<String, String> {
        destination_repository(
            repository,
            &self.dest_namespace,
            self.dest_namespace_replace_count,
        )
    }
}

/// Where `repository` lands under `namespace` (Harbor's flattening): an
/// empty namespace keeps the name; -1 (the legacy mode) puts the last
/// component under the namespace; `n` replaces the first `n` components
/// with the namespace (0 puts the whole name under it). A count that would
/// leave no component is an error.
pub fn destination_repository(
    repository: &str,
    namespace: &str,
    replace_count: i8,
) -> Result<String, String> {
    if namespace.is_empty() {
        return Ok(repository.to_string());
    }
    let parts: Vec<&str> = repository.split('/').collect();
    let Ok(count) = usize::try_from(replace_count) else {
        let last = parts.last().copied().unwrap_or(repository);
        return Ok(format!("{namespace}/{last}"));
    };
    if count >= parts.len() {
        return Err(format!(
            "the repository {repository} has {} path components: {count} cannot be replaced \
             by the destination namespace {namespace}",
            parts.len()
        ));
    }
    Ok(format!("{namespace}/{}", parts[count..].join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy() -> Policy {
        Policy {
            id: 0,
            name: "p".into(),
            description: String::new(),
            src_registry: None,
            dest_registry: Some(1),
            dest_namespace: String::new(),
            dest_namespace_replace_count: -1,
            trigger: Trigger {
                kind: MANUAL.into(),
                trigger_settings: None,
            },
            filters: Vec::new(),
            replicate_deletion: false,
            overwrite: false,
            enabled: true,
            speed: 0,
            copy_by_chunk: false,
            single_active_replication: false,
            creator: String::new(),
            creation_time: String::new(),
            update_time: String::new(),
        }
    }

    fn filter(kind: &str, value: Value, decoration: &str) -> Filter {
        Filter {
            kind: kind.into(),
            value,
            decoration: decoration.into(),
        }
    }

    #[test]
    fn flattening_as_harbor_documents_it() {
        let d = destination_repository;
        assert_eq!(d("a/b/c/d", "", -1).unwrap(), "a/b/c/d");
        assert_eq!(d("a/b/c/d", "ns", -1).unwrap(), "ns/d");
        assert_eq!(d("a/b/c/d", "ns", 0).unwrap(), "ns/a/b/c/d");
        assert_eq!(d("a/b/c/d", "ns", 1).unwrap(), "ns/b/c/d");
        assert_eq!(d("a/b/c/d", "ns", 3).unwrap(), "ns/d");
        assert!(d("a/b/c/d", "ns", 4).is_err());
        assert_eq!(d("library/hello", "ns/deep", 1).unwrap(), "ns/deep/hello");
    }

    #[test]
    fn one_side_must_be_this_registry() {
        let mut both = policy();
        both.src_registry = Some(2);
        let err = both.validate().unwrap_err().to_string();
        assert!(
            err.contains("either src_registry or dest_registry"),
            "{err}"
        );
        let mut neither = policy();
        neither.dest_registry = None;
        assert!(neither.validate().is_err());
        assert!(policy().validate().is_ok());
    }

    #[test]
    fn harbor_messages_for_bad_filters_and_triggers() {
        let cases = [
            (
                filter("name", json!(1), ""),
                "the type of filter value isn't string",
            ),
            (
                filter("resource", json!("chart"), ""),
                "invalid resource filter: chart",
            ),
            (
                filter("name", json!("a/**"), "excludes"),
                "only tag and label filter support decoration",
            ),
            (
                filter("label", json!("x"), ""),
                "the type of label filter value isn't string slice",
            ),
            (filter("size", json!("x"), ""), "invalid filter type"),
            (
                filter("tag", json!("v*"), "maybe"),
                "invalid filter decoration, :maybe",
            ),
        ];
        for (f, message) in cases {
            let mut p = policy();
            p.filters = vec![f];
            assert_eq!(p.validate().unwrap_err().to_string(), message);
        }
        let mut p = policy();
        p.trigger.kind = SCHEDULED.into();
        assert_eq!(
            p.validate().unwrap_err().to_string(),
            "the cron string cannot be empty when the trigger type is scheduled"
        );
        p.trigger.kind = "sometimes".into();
        assert_eq!(
            p.validate().unwrap_err().to_string(),
            "invalid trigger type"
        );
        let mut p = policy();
        p.dest_namespace = "Bad Name".into();
        assert!(p.validate().is_err());
    }

    #[test]
    fn filters_select_repositories_tags_and_labels() {
        let mut p = policy();
        p.filters = vec![
            filter("name", json!("library/**"), ""),
            filter("tag", json!("v*"), ""),
            filter("tag", json!("*-rc"), "excludes"),
            filter("label", json!(["prod"]), ""),
        ];
        assert!(p.keeps_repository("library/a/b"));
        assert!(!p.keeps_repository("other/a"));
        let tags = vec!["v1".to_string(), "v2-rc".to_string(), "latest".to_string()];
        assert_eq!(p.keeps_tags(&tags), vec!["v1"]);
        assert!(!p.keeps_untagged());
        assert!(p.keeps_labels(&["prod".into(), "x".into()]));
        assert!(!p.keeps_labels(&["x".into()]));
        let none = policy();
        assert!(none.keeps_untagged());
        assert_eq!(none.keeps_tags(&tags).len(), 3);
    }
}
