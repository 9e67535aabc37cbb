use serde_json::json;

use super::*;

const DAY: i64 = 86_400;
const NOW: i64 = 1_800_000_000;
/// Harbor's zero time, as a never-pulled artifact's pull time.
const NEVER: i64 = -62_135_596_800;

fn policy(rules: Value) -> RetentionPolicy {
    let mut policy: RetentionPolicy = serde_json::from_value(json!({
        "rules": rules,
        "trigger": {"kind": "Schedule", "settings": {"cron": ""}},
        "scope": {"level": "project", "ref": 1},
    }))
    .unwrap();
    policy.validate().unwrap();
    policy
}

fn rule(template: &str, n: Option<i64>, tags: (&str, &str, &str), repositories: &str) -> Value {
    let mut params = json!({});
    if let Some(n) = n {
        params[template] = json!(n);
    }
    json!({
        "template": template,
        "params": params,
        "tag_selectors": [{"kind": "doublestar", "decoration": tags.0, "pattern": tags.1, "extras": tags.2}],
        "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": repositories}]},
    })
}

fn artifact(tags: &[&str], pushed_days_ago: i64, pulled_days_ago: Option<i64>) -> Candidate {
    Candidate {
        tags: tags.iter().map(|t| t.to_string()).collect(),
        pushed: NOW - pushed_days_ago * DAY,
        pulled: pulled_days_ago.map_or(NEVER, |d| NOW - d * DAY),
    }
}

fn kept(policy: &RetentionPolicy, repository: &str, candidates: &[Candidate]) -> Vec<bool> {
    evaluate(&policy.rules_for(repository), candidates, NOW)
}

#[test]
fn latest_pushed_k_keeps_the_k_newest_of_what_its_tags_select() {
    let p = policy(json!([rule(
        "latestPushedK",
        Some(2),
        ("matches", "v*", ""),
        "**"
    )]));
    let candidates = [
        artifact(&["v1"], 30, None),
        artifact(&["v2"], 20, None),
        artifact(&["v3"], 10, None),
        // Not selected by `v*`: not counted among the K, and not kept.
        artifact(&["dev"], 1, None),
    ];
    assert_eq!(kept(&p, "app", &candidates), [false, true, true, false]);
    // K = 0 keeps nothing.
    let p = policy(json!([rule(
        "latestPushedK",
        Some(0),
        ("matches", "**", ""),
        "**"
    )]));
    assert_eq!(kept(&p, "app", &candidates), [false; 4]);
}

#[test]
fn latest_pulled_n_ranks_by_last_pull_and_never_pulled_last() {
    let p = policy(json!([rule(
        "latestPulledN",
        Some(1),
        ("matches", "**", ""),
        "**"
    )]));
    let candidates = [
        artifact(&["a"], 1, None),
        artifact(&["b"], 50, Some(3)),
        artifact(&["c"], 40, Some(9)),
    ];
    assert_eq!(kept(&p, "app", &candidates), [false, true, false]);
}

#[test]
fn days_since_last_push_and_pull_keep_what_is_recent_enough() {
    let push = policy(json!([rule(
        "nDaysSinceLastPush",
        Some(7),
        ("matches", "**", ""),
        "**"
    )]));
    let pull = policy(json!([rule(
        "nDaysSinceLastPull",
        Some(7),
        ("matches", "**", ""),
        "**"
    )]));
    let candidates = [
        artifact(&["old-pulled"], 30, Some(2)),
        artifact(&["new-unpulled"], 2, None),
        artifact(&["old-unpulled"], 30, None),
        artifact(&["edge"], 7, Some(7)),
    ];
    assert_eq!(kept(&push, "app", &candidates), [false, true, false, true]);
    assert_eq!(kept(&pull, "app", &candidates), [true, false, false, true]);
}

#[test]
fn rules_are_ored_and_one_kept_tag_keeps_the_artifact() {
    // Harbor's API test (test_retention.py): rule A keeps `latest*` in every
    // repository, rule B everything in `test3*`, both `always`.
    let p = policy(json!([
        rule(
            "always",
            None,
            ("matches", "latest*", "[\"untagged\":True]"),
            "**"
        ),
        rule(
            "always",
            None,
            ("matches", "**", "[\"untagged\":True]"),
            "test3*"
        ),
    ]));
    let test1 = [artifact(&[], 1, None), artifact(&["1.0"], 1, None)];
    assert_eq!(
        kept(&p, "test1", &test1),
        [true, false],
        "untagged is kept by a matches selector's default"
    );
    let test2 = [artifact(&["latest"], 1, None), artifact(&["1.0"], 1, None)];
    assert_eq!(kept(&p, "test2", &test2), [true, false]);
    let test3 = [
        artifact(&["1.0"], 1, None),
        artifact(&["2.0", "x"], 1, None),
    ];
    assert_eq!(kept(&p, "test3", &test3), [true, true]);
    // An artifact with a kept tag keeps its other tags.
    let mixed = [
        artifact(&["1.0", "latest"], 1, None),
        artifact(&["1.0-rc"], 1, None),
    ];
    assert_eq!(kept(&p, "test4", &mixed), [true, false]);
}

#[test]
fn excludes_selects_artifacts_with_a_tag_it_does_not_match_and_untagged_by_extras() {
    let p = policy(json!([rule(
        "always",
        None,
        ("excludes", "dev-*", ""),
        "**"
    )]));
    let candidates = [
        artifact(&["dev-1"], 1, None),
        artifact(&["dev-2", "v2"], 1, None),
        artifact(&[], 1, None),
    ];
    // Untagged: not selected by `excludes` by default.
    assert_eq!(kept(&p, "app", &candidates), [false, true, false]);
    // `{"untagged": true}` on `excludes` leaves untagged artifacts out, as Harbor's UI sends it.
    let p = policy(json!([rule(
        "always",
        None,
        ("excludes", "dev-*", "{\"untagged\":true}"),
        "**"
    )]));
    assert_eq!(kept(&p, "app", &candidates), [false, true, false]);
    let p = policy(json!([rule(
        "always",
        None,
        ("excludes", "dev-*", "{\"untagged\":false}"),
        "**"
    )]));
    assert_eq!(kept(&p, "app", &candidates), [false, true, true]);
    // `{"untagged": false}` on `matches` leaves them to go.
    let p = policy(json!([rule(
        "always",
        None,
        ("matches", "**", "{\"untagged\":false}"),
        "**"
    )]));
    assert_eq!(kept(&p, "app", &candidates), [true, true, false]);
}

#[test]
fn repository_selectors_decide_which_repositories_a_rule_covers() {
    let mut rules = json!([rule(
        "latestPushedK",
        Some(1),
        ("matches", "**", ""),
        "team/**"
    )]);
    rules[0]["scope_selectors"]["repository"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"kind": "doublestar", "decoration": "repoExcludes", "pattern": "team/keep-*"}),
        );
    let p = policy(rules);
    let candidates = [artifact(&["a"], 2, None), artifact(&["b"], 1, None)];
    assert_eq!(kept(&p, "team/app", &candidates), [false, true]);
    // Not covered: nothing goes.
    assert_eq!(kept(&p, "team/keep-me", &candidates), [true, true]);
    assert_eq!(kept(&p, "other", &candidates), [true, true]);
    // A disabled rule covers nothing.
    let mut rules = json!([rule("latestPushedK", Some(1), ("matches", "**", ""), "**")]);
    rules[0]["disabled"] = json!(true);
    assert!(policy(rules).rules_for("app").is_empty());
}

#[test]
fn policies_are_checked_before_they_are_kept() {
    let check = |rules: Value| {
        let mut p: RetentionPolicy = serde_json::from_value(json!({
            "rules": rules, "trigger": {"kind": "Schedule", "settings": {"cron": ""}},
            "scope": {"level": "project", "ref": 1},
        }))
        .unwrap();
        p.validate().map(|_| p).map_err(|e| e.to_string())
    };
    let ok = rule("latestPushedK", Some(3), ("matches", "**", ""), "**");
    let p = check(json!([ok.clone()])).unwrap();
    assert_eq!(p.rules[0].action, "retain");
    assert_eq!(p.algorithm, "or");
    // A numeric string is taken as the number it says.
    let mut text = ok.clone();
    text["params"]["latestPushedK"] = json!("5");
    assert_eq!(
        check(json!([text])).unwrap().rules[0].params["latestPushedK"],
        json!(5)
    );
    for (rules, message) in [
        (
            json!([rule("nothing", None, ("matches", "**", ""), "**")]),
            "rule evaluator nothing is not registered",
        ),
        (
            json!([rule("latestPushedK", None, ("matches", "**", ""), "**")]),
            "missing required parameter latestPushedK",
        ),
        (
            json!([rule("latestPushedK", Some(-1), ("matches", "**", ""), "**")]),
            "latestPushedK is less than zero",
        ),
        (
            json!([rule(
                "latestPushedK",
                Some(40_000),
                ("matches", "**", ""),
                "**"
            )]),
            "latestPushedK is too large",
        ),
        (
            json!([rule("always", None, ("matching", "**", ""), "**")]),
            "invalid decoration",
        ),
        (
            json!([rule("always", None, ("matches", "v[", ""), "**")]),
            "invalid pattern",
        ),
        (
            json!([ok.clone(), ok.clone()]),
            "rule 1 is conflict with rule 0",
        ),
        (
            json!(vec![ok.clone(); 16]),
            "only 15 rules are allowed at most",
        ),
    ] {
        let err = check(rules).unwrap_err();
        assert!(err.contains(message), "{err} should say {message}");
    }
    let mut no_tags = ok.clone();
    no_tags["tag_selectors"] = json!([]);
    assert!(
        check(json!([no_tags]))
            .unwrap_err()
            .contains("tag selector")
    );
    let mut no_repos = ok.clone();
    no_repos["scope_selectors"] = json!({});
    assert!(
        check(json!([no_repos]))
            .unwrap_err()
            .contains("repository selector")
    );
    let mut system: RetentionPolicy =
        serde_json::from_value(json!({"rules": [], "scope": {"level": "system", "ref": 0}}))
            .unwrap();
    assert!(
        system
            .validate()
            .unwrap_err()
            .to_string()
            .contains("scope system is not support")
    );
    let mut bad_cron: RetentionPolicy = serde_json::from_value(json!({
        "rules": [], "trigger": {"kind": "Schedule", "settings": {"cron": 5}}, "scope": {"level": "project", "ref": 1},
    }))
    .unwrap();
    assert!(
        bad_cron
            .validate()
            .unwrap_err()
            .to_string()
            .contains("must be a string")
    );
}

#[test]
fn the_proxy_cache_default_keeps_a_week_of_pulls_every_day() {
    let mut p = RetentionPolicy::proxy_cache_default(7);
    p.validate().unwrap();
    assert_eq!(p.cron().unwrap(), Some("0 0 0 * * *"));
    let candidates = [
        artifact(&["pulled"], 30, Some(6)),
        artifact(&["stale"], 30, Some(8)),
        artifact(&[], 30, Some(1)),
    ];
    assert_eq!(kept(&p, "library/nginx", &candidates), [true, false, true]);
}

#[test]
fn the_metadata_document_lists_harbors_five_templates() {
    let doc = metadata();
    let ids: Vec<&str> = doc["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["rule_template"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "latestPushedK",
            "latestPulledN",
            "nDaysSinceLastPush",
            "nDaysSinceLastPull",
            "always"
        ]
    );
    assert_eq!(doc["templates"][0]["params"][0]["unit"], "COUNT");
    assert!(doc["templates"][4].get("params").is_none());
    assert_eq!(
        doc["tag_selectors"][0]["decorations"],
        json!(["matches", "excludes"])
    );
}
