//! Harbor's tag retention policies: what they say (the `/retentions` API's
//! RetentionPolicy, checked before it is kept) and what they keep (the
//! evaluation of one repository's artifacts).
//!
//! A policy's rules are OR'ed: an artifact any rule retains stays, every
//! other artifact of a repository some rule covers goes, with all its tags.
//! A rule covers the repositories its repository selectors select; among
//! their artifacts it weighs those its tag selectors select (all of them,
//! AND'ed) and keeps what its template says: the K most recently pushed or
//! pulled, those pushed or pulled within N days, or all.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::DomainError;
use crate::glob::Glob;
use crate::model::immutable::{Selector, check_selector};

/// How many rules a policy may have (Harbor's limit).
pub const MAX_RULES: usize = 15;

/// The largest count a `latest...` template takes (Harbor's limit).
const MAX_COUNT: i64 = 32_766;
/// The largest number of days a `...Days...` template takes (Harbor's limit).
const MAX_DAYS: i64 = 20_190_904;

/// The templates a rule may use: Harbor's id, what its parameter counts
/// (`None` for a template without one) and the display text.
const TEMPLATES: [(&str, Option<&str>, &str); 7] = [
    (
        "latestPushedK",
        Some("COUNT"),
        "the most recently pushed # artifacts",
    ),
    (
        "latestPulledN",
        Some("COUNT"),
        "the most recently pulled # artifacts",
    ),
    (
        "nDaysSinceLastPush",
        Some("DAYS"),
        "pushed within the last # days",
    ),
    (
        "nDaysSinceLastPull",
        Some("DAYS"),
        "pulled within the last # days",
    ),
    ("always", None, "always"),
    // Registered in Harbor's job service though not in its metadata: kept
    // for policies written against it.
    (
        "latestActiveK",
        Some("COUNT"),
        "the most recently pushed or pulled # artifacts",
    ),
    ("lastXDays", Some("DAYS"), "pushed within the last # days"),
];

/// How many of `TEMPLATES` the metadata document advertises (as Harbor's).
const ADVERTISED: usize = 5;

/// Harbor's `GET /retentions/metadatas` document.
pub fn metadata() -> Value {
    let templates: Vec<Value> = TEMPLATES[..ADVERTISED]
        .iter()
        .map(|(id, unit, text)| {
            let mut template =
                json!({"rule_template": id, "display_text": text, "action": "retain"});
            if let Some(unit) = unit {
                template["params"] = json!([{"type": "int", "unit": unit, "required": true}]);
            }
            template
        })
        .collect();
    json!({
        "templates": templates,
        "scope_selectors": [{"display_text": "Repositories", "kind": "doublestar", "decorations": ["repoMatches", "repoExcludes"]}],
        "tag_selectors": [{"display_text": "Tags", "kind": "doublestar", "decorations": ["matches", "excludes"]}],
    })
}

/// Harbor's RetentionPolicy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetentionPolicy {
    /// Its id (ignored on create).
    #[serde(default)]
    pub id: i64,
    /// Always `or`.
    #[serde(default = "or")]
    pub algorithm: String,
    /// At most [`MAX_RULES`].
    #[serde(default)]
    pub rules: Vec<RetentionRule>,
    /// When it runs on its own.
    #[serde(default)]
    pub trigger: Trigger,
    /// What it is of: `{"level": "project", "ref": <project id>}`.
    #[serde(default)]
    pub scope: Scope,
}

fn or() -> String {
    "or".into()
}

fn retain() -> String {
    "retain".into()
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetentionRule {
    /// Its id within the policy, as given.
    #[serde(default)]
    pub id: i64,
    /// As given.
    #[serde(default)]
    pub priority: i64,
    /// A disabled rule keeps nothing and covers nothing.
    #[serde(default)]
    pub disabled: bool,
    /// Always `retain`.
    #[serde(default = "retain")]
    pub action: String,
    /// One of the templates of [`metadata`].
    #[serde(default)]
    pub template: String,
    /// `{<template>: <number>}` for a template with a parameter.
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    /// Which tags (AND'ed): `matches` or `excludes`, with Harbor's
    /// `{"untagged": bool}` extras.
    #[serde(default)]
    pub tag_selectors: Vec<Selector>,
    /// `{"repository": [...]}` (AND'ed): `repoMatches` or `repoExcludes`.
    #[serde(default)]
    pub scope_selectors: BTreeMap<String, Vec<Selector>>,
}

/// A policy's trigger: `{"kind": "Schedule", "settings": {"cron": "..."}}`;
/// an empty cron runs only when asked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trigger {
    /// `Schedule`.
    #[serde(default)]
    pub kind: String,
    /// `{"cron": "<six fields>"}`.
    #[serde(default)]
    pub settings: BTreeMap<String, Value>,
    /// Kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub references: Option<Value>,
}

/// What a policy is of.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// `project`.
    #[serde(default)]
    pub level: String,
    /// The project's id.
    #[serde(default, rename = "ref")]
    pub reference: i64,
}

impl RetentionPolicy {
    /// The policy Harbor gives a proxy-cache project when it is made: keep
    /// what was pulled within the last 7 days, looked at every day at
    /// midnight.
    pub fn proxy_cache_default(project_id: i64) -> Self {
        let selector = |decoration: &str| Selector {
            kind: "doublestar".into(),
            decoration: decoration.into(),
            pattern: "**".into(),
            extras: Some(String::new()),
        };
        Self {
            id: 0,
            algorithm: or(),
            rules: vec![RetentionRule {
                id: 1,
                priority: 1,
                disabled: false,
                action: retain(),
                template: "nDaysSinceLastPull".into(),
                params: BTreeMap::from([("nDaysSinceLastPull".into(), json!(7))]),
                tag_selectors: vec![selector("matches")],
                scope_selectors: BTreeMap::from([(
                    "repository".into(),
                    vec![selector("repoMatches")],
                )]),
            }],
            trigger: Trigger {
                kind: "Schedule".into(),
                settings: BTreeMap::from([("cron".into(), json!("0 0 0 * * *"))]),
                references: None,
            },
            scope: Scope {
                level: "project".into(),
                reference: project_id,
            },
        }
    }

    /// The cron of a `Schedule` trigger, when it has one (an empty cron has none).
    pub fn cron(&self) -> Result<Option<&str>, DomainError> {
        if !self.trigger.kind.eq_ignore_ascii_case("schedule") {
            return Ok(None);
        }
        match self.trigger.settings.get("cron") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(cron)) if cron.trim().is_empty() => Ok(None),
            Some(Value::String(cron)) => Ok(Some(cron.trim())),
            Some(_) => Err(DomainError::bad_request(
                "invalid cron type for scheduled tag retention: must be a string",
            )),
        }
    }

    /// Checks the policy (Harbor's checks, and those its job service makes
    /// only when a run starts: a policy is refused now rather than failing
    /// every run). Fills Harbor's defaults (`or`, `retain`, `doublestar`).
    /// The cron is the caller's to check.
    pub fn validate(&mut self) -> Result<(), DomainError> {
        if self.rules.len() > MAX_RULES {
            return Err(DomainError::bad_request(format!(
                "only {MAX_RULES} rules are allowed at most"
            )));
        }
        if self.algorithm.is_empty() {
            self.algorithm = or();
        }
        if self.algorithm != "or" {
            return Err(DomainError::bad_request(format!(
                "no processor registered with algorithm: {}",
                self.algorithm
            )));
        }
        if self.scope.level != "project" {
            return Err(DomainError::bad_request(format!(
                "scope {} is not support",
                self.scope.level
            )));
        }
        if !self.trigger.kind.is_empty() && !self.trigger.kind.eq_ignore_ascii_case("schedule") {
            return Err(DomainError::bad_request(format!(
                "not support Trigger {}",
                self.trigger.kind
            )));
        }
        self.cron()?;
        for rule in &mut self.rules {
            rule.validate()?;
        }
        for (n, rule) in self.rules.iter().enumerate() {
            if let Some(old) = self.rules[..n].iter().position(|old| old.same_as(rule)) {
                return Err(DomainError::Conflict(format!(
                    "rule {n} is conflict with rule {old}"
                )));
            }
        }
        Ok(())
    }

    /// The enabled rules that cover repository `repository` (its name within
    /// the project), compiled.
    pub fn rules_for(&self, repository: &str) -> Vec<CompiledRule> {
        self.rules
            .iter()
            .filter(|rule| !rule.disabled)
            .filter_map(CompiledRule::new)
            .filter(|rule| rule.covers(repository))
            .collect()
    }
}

impl RetentionRule {
    fn validate(&mut self) -> Result<(), DomainError> {
        if self.action.is_empty() {
            self.action = retain();
        }
        if self.action != "retain" {
            return Err(DomainError::bad_request(format!(
                "action {} is not registered",
                self.action
            )));
        }
        if self.template.is_empty() {
            return Err(DomainError::bad_request("empty rule template ID"));
        }
        let Some((_, unit, _)) = TEMPLATES.iter().find(|(id, ..)| *id == self.template) else {
            return Err(DomainError::bad_request(format!(
                "rule evaluator {} is not registered",
                self.template
            )));
        };
        if let Some(unit) = unit {
            let max = if *unit == "COUNT" {
                MAX_COUNT
            } else {
                MAX_DAYS
            };
            let name = &self.template;
            match self.params.get(name) {
                None | Some(Value::Null) => {
                    return Err(DomainError::bad_request(format!(
                        "missing required parameter {name} for rule {name}"
                    )));
                }
                Some(value) => match parameter(value) {
                    Some(n) if n < 0 => {
                        return Err(DomainError::bad_request(format!(
                            "{name} is less than zero"
                        )));
                    }
                    Some(n) if n > max => {
                        return Err(DomainError::bad_request(format!("{name} is too large")));
                    }
                    Some(n) => {
                        self.params.insert(name.clone(), json!(n));
                    }
                    None => return Err(DomainError::bad_request(format!("{name} type error"))),
                },
            }
        }
        if self.tag_selectors.is_empty() {
            return Err(DomainError::bad_request(
                "a retention rule needs a tag selector",
            ));
        }
        for selector in &mut self.tag_selectors {
            check_selector(selector, &["matches", "excludes"])?;
        }
        if let Some(kind) = self.scope_selectors.keys().find(|k| *k != "repository") {
            return Err(DomainError::bad_request(format!(
                "scope selector {kind} is not supported: use \"repository\""
            )));
        }
        match self.scope_selectors.get_mut("repository") {
            Some(selectors) if !selectors.is_empty() => {
                for selector in selectors {
                    check_selector(selector, &["repoMatches", "repoExcludes"])?;
                }
                Ok(())
            }
            _ => Err(DomainError::bad_request(
                "a retention rule needs a repository selector",
            )),
        }
    }

    /// Whether two rules say the same (Harbor refuses a policy with both).
    fn same_as(&self, other: &Self) -> bool {
        Self {
            id: 0,
            ..self.clone()
        } == Self {
            id: 0,
            ..other.clone()
        }
    }
}

/// A template's parameter: an integer, as a number or a numeric string.
fn parameter(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Whether a tag selector selects untagged artifacts: Harbor's extras
/// `{"untagged": bool}`, by default yes for `matches` and no for `excludes`
/// (where `{"untagged": true}` leaves them out). Extras that are not such
/// an object keep the default, as Harbor reads them.
fn untagged(selector: &Selector) -> bool {
    let matching = selector.decoration == "matches";
    let extras = selector.extras.as_deref().unwrap_or("").trim();
    let said = serde_json::from_str::<Value>(extras)
        .ok()
        .filter(Value::is_object)
        .map(|extras| {
            extras
                .get("untagged")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        });
    match said {
        None => matching,
        Some(untagged) if matching => untagged,
        Some(untagged) => !untagged,
    }
}

/// One artifact as a run weighs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its tags.
    pub tags: Vec<String>,
    /// When it or one of its tags was last pushed (Unix seconds).
    pub pushed: i64,
    /// When it or one of its tags was last pulled (Unix seconds; far in the
    /// past when never).
    pub pulled: i64,
}

/// What a rule keeps of what its tag selectors select.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    LatestPushed(usize),
    LatestPulled(usize),
    LatestActive(usize),
    PushedWithin(i64),
    PulledWithin(i64),
    All,
}

/// A tag selector, compiled: its pattern, whether it matches (or excludes)
/// and whether it selects untagged artifacts.
#[derive(Debug, Clone)]
struct TagSelector {
    glob: Glob,
    matching: bool,
    untagged: bool,
}

impl TagSelector {
    fn selects(&self, candidate: &Candidate) -> bool {
        if candidate.tags.is_empty() {
            return self.untagged;
        }
        // `matches`: any tag matches; `excludes`: any tag does not.
        candidate
            .tags
            .iter()
            .any(|tag| self.glob.matches(tag) == self.matching)
    }
}

/// An enabled rule, compiled for a run.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    keep: Keep,
    tags: Vec<TagSelector>,
    repositories: Vec<(Glob, bool)>,
}

fn glob(selector: &Selector) -> Glob {
    Glob::new(&selector.pattern).unwrap_or_else(|_| Glob::literal(&selector.pattern))
}

impl CompiledRule {
    /// `rule` compiled; `None` for one that cannot run (a policy checked by
    /// [`RetentionPolicy::validate`] has none).
    fn new(rule: &RetentionRule) -> Option<Self> {
        let days = |days: i64| days.saturating_mul(86_400);
        let n = rule.params.get(&rule.template).and_then(parameter);
        let count = || n.and_then(|n| usize::try_from(n).ok());
        let keep = match rule.template.as_str() {
            "latestPushedK" => Keep::LatestPushed(count()?),
            "latestPulledN" => Keep::LatestPulled(count()?),
            "latestActiveK" => Keep::LatestActive(count()?),
            "nDaysSinceLastPush" | "lastXDays" => Keep::PushedWithin(days(n?)),
            "nDaysSinceLastPull" => Keep::PulledWithin(days(n?)),
            "always" => Keep::All,
            _ => return None,
        };
        let tags = rule
            .tag_selectors
            .iter()
            .map(|selector| TagSelector {
                glob: glob(selector),
                matching: selector.decoration == "matches",
                untagged: untagged(selector),
            })
            .collect::<Vec<_>>();
        if tags.is_empty() {
            return None;
        }
        let repositories = rule
            .scope_selectors
            .get("repository")
            .map(|selectors| {
                selectors
                    .iter()
                    .map(|s| (glob(s), s.decoration == "repoMatches"))
                    .collect()
            })
            .unwrap_or_default();
        Some(Self {
            keep,
            tags,
            repositories,
        })
    }

    /// Whether the rule covers repository `name` (within the project): each
    /// of its repository selectors selects it.
    fn covers(&self, name: &str) -> bool {
        self.repositories
            .iter()
            .all(|(glob, matching)| glob.matches(name) == *matching)
    }

    /// Marks in `kept` the candidates this rule keeps, at `now` (Unix seconds).
    fn keep(&self, candidates: &[Candidate], now: i64, kept: &mut [bool]) {
        let mut selected: Vec<usize> = (0..candidates.len())
            .filter(|&i| self.tags.iter().all(|s| s.selects(&candidates[i])))
            .collect();
        // Newest first; of two at the same time, the later (higher) index.
        let mut latest = |k: usize, when: &dyn Fn(&Candidate) -> i64| {
            selected.sort_by_key(|&i| Reverse((when(&candidates[i]), i)));
            for &i in selected.iter().take(k) {
                kept[i] = true;
            }
        };
        match self.keep {
            Keep::LatestPushed(k) => latest(k, &|c| c.pushed),
            Keep::LatestPulled(k) => latest(k, &|c| c.pulled),
            Keep::LatestActive(k) => latest(k, &|c| c.pushed.max(c.pulled)),
            Keep::PushedWithin(span) => {
                for &i in &selected {
                    kept[i] |= candidates[i].pushed >= now.saturating_sub(span);
                }
            }
            Keep::PulledWithin(span) => {
                for &i in &selected {
                    kept[i] |= candidates[i].pulled >= now.saturating_sub(span);
                }
            }
            Keep::All => {
                for &i in &selected {
                    kept[i] = true;
                }
            }
        }
    }
}

/// Which of `candidates` (one repository's artifacts) `rules` keep at `now`
/// (Unix seconds): those any rule keeps. With no rule, every one (a
/// repository no rule covers is left alone).
pub fn evaluate(rules: &[CompiledRule], candidates: &[Candidate], now: i64) -> Vec<bool> {
    if rules.is_empty() {
        return vec![true; candidates.len()];
    }
    let mut kept = vec![false; candidates.len()];
    for rule in rules {
        rule.keep(candidates, now, &mut kept);
    }
    kept
}

#[cfg(test)]
mod tests;
