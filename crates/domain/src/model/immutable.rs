//! Harbor's immutable tag rules: a rule names repositories and tags by
//! doublestar patterns; a tag it covers cannot be moved to another artifact or
//! deleted, nor can the artifact that carries it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::DomainError;
use crate::glob::Glob;

/// How many rules a project may have (Harbor's limit).
pub const MAX_RULES_PER_PROJECT: usize = 15;

/// One selector: a pattern and whether it matches or excludes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    /// `doublestar` (the only kind Harbor has).
    #[serde(default)]
    pub kind: String,
    /// Tags: `matches` or `excludes`; repositories: `repoMatches` or `repoExcludes`.
    #[serde(default)]
    pub decoration: String,
    /// The pattern: `**`, `v*`, `{a,b}`, `release-?` ...
    #[serde(default)]
    pub pattern: String,
    /// Harbor's free-form extras, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extras: Option<String>,
}

/// Harbor's ImmutableRule as the API reads and writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImmutableRule {
    /// The rule's id (ignored on create).
    #[serde(default)]
    pub id: i64,
    /// Ordering among the project's rules.
    #[serde(default)]
    pub priority: i64,
    /// A disabled rule protects nothing.
    #[serde(default)]
    pub disabled: bool,
    /// Always `immutable`.
    #[serde(default = "action")]
    pub action: String,
    /// Always `immutable_template`.
    #[serde(default = "template")]
    pub template: String,
    /// Unused by immutable rules; kept as given.
    #[serde(default)]
    pub params: Value,
    /// Exactly one tag selector.
    #[serde(default)]
    pub tag_selectors: Vec<Selector>,
    /// `{"repository": [one selector]}`.
    #[serde(default)]
    pub scope_selectors: std::collections::BTreeMap<String, Vec<Selector>>,
}

fn action() -> String {
    "immutable".into()
}

fn template() -> String {
    "immutable_template".into()
}

impl ImmutableRule {
    /// Checks the rule as Harbor does: one tag selector (`matches` or
    /// `excludes`), one repository selector (`repoMatches` or
    /// `repoExcludes`), doublestar patterns that are not empty.
    pub fn validate(&mut self) -> Result<(), DomainError> {
        if self.action.is_empty() {
            self.action = action();
        }
        if self.template.is_empty() {
            self.template = template();
        }
        if self.action != "immutable" {
            return Err(DomainError::bad_request(format!(
                "invalid action {:?}: an immutable tag rule's action is \"immutable\"",
                self.action
            )));
        }
        let [tag] = self.tag_selectors.as_mut_slice() else {
            return Err(DomainError::bad_request(
                "an immutable tag rule has exactly one tag selector",
            ));
        };
        check_selector(tag, &["matches", "excludes"])?;
        if self.scope_selectors.len() != 1 {
            return Err(DomainError::bad_request(
                "an immutable tag rule has exactly one scope selector, \"repository\"",
            ));
        }
        let Some([repository]) = self
            .scope_selectors
            .get_mut("repository")
            .map(Vec::as_mut_slice)
        else {
            return Err(DomainError::bad_request(
                "an immutable tag rule has exactly one repository selector",
            ));
        };
        check_selector(repository, &["repoMatches", "repoExcludes"])
    }

    /// Whether two rules select the same things (Harbor refuses a duplicate).
    pub fn same_selection(&self, other: &Self) -> bool {
        self.tag_selectors == other.tag_selectors && self.scope_selectors == other.scope_selectors
    }
}

/// Checks a selector: kind `doublestar` (filled when empty), one of
/// `decorations`, a pattern that compiles.
pub(crate) fn check_selector(
    selector: &mut Selector,
    decorations: &[&str],
) -> Result<(), DomainError> {
    if selector.kind.is_empty() {
        selector.kind = "doublestar".into();
    }
    if selector.kind != "doublestar" {
        return Err(DomainError::bad_request(format!(
            "unsupported selector kind {:?}: use \"doublestar\"",
            selector.kind
        )));
    }
    if !decorations.contains(&selector.decoration.as_str()) {
        return Err(DomainError::bad_request(format!(
            "invalid decoration {:?}: use one of {decorations:?}",
            selector.decoration
        )));
    }
    if selector.pattern.trim().is_empty() {
        return Err(DomainError::bad_request("a selector's pattern is required"));
    }
    Glob::new(&selector.pattern).map(drop).map_err(|e| {
        DomainError::bad_request(format!("invalid pattern {:?}: {e}", selector.pattern))
    })
}

/// A project's enabled rules, compiled once for the tags of one change.
#[derive(Debug, Clone)]
pub struct Protection {
    rules: Vec<[(Glob, bool); 2]>,
}

impl Protection {
    /// Compiles the enabled rules of `rules`. A stored pattern that no longer
    /// compiles (longer than today's limit) is matched as plain text.
    pub fn new<'a>(rules: impl IntoIterator<Item = &'a ImmutableRule>) -> Self {
        let compiled = |selector: &Selector, matching: &str| {
            let glob =
                Glob::new(&selector.pattern).unwrap_or_else(|_| Glob::literal(&selector.pattern));
            (glob, selector.decoration == matching)
        };
        let rules = rules
            .into_iter()
            .filter(|rule| !rule.disabled)
            .filter_map(|rule| {
                let repository = rule.scope_selectors.get("repository")?.first()?;
                let tag = rule.tag_selectors.first()?;
                Some([
                    compiled(repository, "repoMatches"),
                    compiled(tag, "matches"),
                ])
            })
            .collect();
        Self { rules }
    }

    /// Whether a rule protects `tag` of `repository` (its name within the
    /// project, without the project's): its repository selector and its tag
    /// selector both select (a `matches` pattern that matches, or an
    /// `excludes` one that does not).
    pub fn protects(&self, repository: &str, tag: &str) -> bool {
        self.rules
            .iter()
            .any(|[(repo, repo_matching), (tags, tag_matching)]| {
                repo.matches(repository) == *repo_matching && tags.matches(tag) == *tag_matching
            })
    }

    /// Whether no rule is enabled.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(tag: (&str, &str), repository: (&str, &str)) -> ImmutableRule {
        serde_json::from_value(serde_json::json!({
            "tag_selectors": [{"kind": "doublestar", "decoration": tag.0, "pattern": tag.1}],
            "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": repository.0, "pattern": repository.1}]},
        }))
        .unwrap()
    }

    #[test]
    fn rules_protect_what_they_select() {
        let r = Protection::new([&rule(("matches", "v*"), ("repoMatches", "**"))]);
        assert!(r.protects("app", "v1"));
        assert!(!r.protects("app", "latest"));
        let r = Protection::new([&rule(("excludes", "dev-*"), ("repoExcludes", "scratch/**"))]);
        assert!(r.protects("app", "v1"));
        assert!(!r.protects("app", "dev-1"));
        assert!(!r.protects("scratch/tmp", "v1"));
        let mut disabled = rule(("matches", "**"), ("repoMatches", "**"));
        disabled.disabled = true;
        assert!(!Protection::new([&disabled]).protects("app", "v1"));
        assert!(Protection::new([&disabled]).is_empty());
        // Either of two rules protects.
        let two = [
            rule(("matches", "v*"), ("repoMatches", "app")),
            rule(("matches", "{stable,lts}"), ("repoMatches", "**")),
        ];
        let r = Protection::new(&two);
        assert!(r.protects("app", "v2") && r.protects("other", "lts"));
        assert!(!r.protects("other", "v2"));
    }

    #[test]
    fn rules_are_validated() {
        let mut good = rule(("matches", "v*"), ("repoMatches", "**"));
        good.validate().unwrap();
        assert_eq!(good.action, "immutable");
        for mut bad in [
            rule(("matching", "v*"), ("repoMatches", "**")),
            rule(("matches", ""), ("repoMatches", "**")),
            rule(("matches", "v*"), ("matches", "**")),
            rule(("matches", "v[0-"), ("repoMatches", "**")),
            rule(("matches", &"*a".repeat(200)), ("repoMatches", "**")),
            ImmutableRule {
                tag_selectors: Vec::new(),
                ..rule(("matches", "v*"), ("repoMatches", "**"))
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
