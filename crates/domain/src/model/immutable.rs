//! Harbor's immutable tag rules: a rule names repositories and tags by
//! doublestar patterns; a tag it covers cannot be moved to another artifact or
//! deleted, nor can the artifact that carries it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::DomainError;

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

    /// Whether the rule protects `tag` of `repository` (its name within the
    /// project, without the project's).
    pub fn protects(&self, repository: &str, tag: &str) -> bool {
        if self.disabled {
            return false;
        }
        let Some(repository_selector) = self
            .scope_selectors
            .get("repository")
            .and_then(|s| s.first())
        else {
            return false;
        };
        let Some(tag_selector) = self.tag_selectors.first() else {
            return false;
        };
        selects(repository_selector, "repoMatches", repository)
            && selects(tag_selector, "matches", tag)
    }

    /// Whether two rules select the same things (Harbor refuses a duplicate).
    pub fn same_selection(&self, other: &Self) -> bool {
        self.tag_selectors == other.tag_selectors && self.scope_selectors == other.scope_selectors
    }
}

fn check_selector(selector: &mut Selector, decorations: &[&str]) -> Result<(), DomainError> {
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
    Ok(())
}

/// Whether `selector` selects `value`: its pattern matches and the decoration
/// is `matching`, or it does not and the decoration excludes.
fn selects(selector: &Selector, matching: &str, value: &str) -> bool {
    doublestar(selector.pattern.as_bytes(), value.as_bytes()) == (selector.decoration == matching)
}

/// Doublestar matching: `**` matches anything, `*` anything but `/`, `?` one
/// character but `/`, `{a,b}` one of the alternatives; the rest literally.
pub fn doublestar(pattern: &[u8], value: &[u8]) -> bool {
    match pattern {
        [] => value.is_empty(),
        [b'*', b'*', rest @ ..] => (0..=value.len()).any(|i| doublestar(rest, &value[i..])),
        [b'*', rest @ ..] => {
            let segment = value.iter().position(|&c| c == b'/').unwrap_or(value.len());
            (0..=segment).any(|i| doublestar(rest, &value[i..]))
        }
        [b'?', rest @ ..] => match value {
            [c, tail @ ..] if *c != b'/' => doublestar(rest, tail),
            _ => false,
        },
        [b'{', rest @ ..] => match rest.iter().position(|&c| c == b'}') {
            Some(close) => {
                let after = &rest[close + 1..];
                rest[..close].split(|&c| c == b',').any(|choice| {
                    let mut joined = choice.to_vec();
                    joined.extend_from_slice(after);
                    doublestar(&joined, value)
                })
            }
            None => value.first() == Some(&b'{') && doublestar(rest, &value[1..]),
        },
        [c, rest @ ..] => value.first() == Some(c) && doublestar(rest, &value[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doublestar_patterns() {
        let m = |p: &str, v: &str| doublestar(p.as_bytes(), v.as_bytes());
        assert!(m("**", "a/b/c"));
        assert!(m("v*", "v1.2"));
        assert!(!m("v*", "release"));
        assert!(!m("*", "a/b"));
        assert!(m("team/*", "team/app"));
        assert!(m("{v1,v2}", "v2"));
        assert!(!m("{v1,v2}", "v3"));
        assert!(m("release-?", "release-1"));
        assert!(!m("release-?", "release-10"));
        assert!(m("a**z", "a/b/z"));
    }

    fn rule(tag: (&str, &str), repository: (&str, &str)) -> ImmutableRule {
        serde_json::from_value(serde_json::json!({
            "tag_selectors": [{"kind": "doublestar", "decoration": tag.0, "pattern": tag.1}],
            "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": repository.0, "pattern": repository.1}]},
        }))
        .unwrap()
    }

    #[test]
    fn rules_protect_what_they_select() {
        let r = rule(("matches", "v*"), ("repoMatches", "**"));
        assert!(r.protects("app", "v1"));
        assert!(!r.protects("app", "latest"));
        let r = rule(("excludes", "dev-*"), ("repoExcludes", "scratch/**"));
        assert!(r.protects("app", "v1"));
        assert!(!r.protects("app", "dev-1"));
        assert!(!r.protects("scratch/tmp", "v1"));
        let mut disabled = rule(("matches", "**"), ("repoMatches", "**"));
        disabled.disabled = true;
        assert!(!disabled.protects("app", "v1"));
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
            ImmutableRule {
                tag_selectors: Vec::new(),
                ..rule(("matches", "v*"), ("repoMatches", "**"))
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
