//! A project's policy tab: its tag retention rules (added and removed one at
//! a time), when they run on their own, a dry run or a run now, and the last
//! runs with each repository's task and log, through the same functions as
//! Harbor's `/retentions`.

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::HeaderValue;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use berth_domain::model::immutable::Selector;
use berth_domain::model::retention::{RetentionPolicy, RetentionRule, Scope, Trigger};
use berth_domain::query::Paging;
use berth_domain::rbac::{Action, Resource};
use serde::Deserialize;
use serde_json::{Value, json};

use super::html::{self, esc};
use super::tabs::{Tab, header, tab_path};
use super::{PortalError, PortalForm, PortalUser, TokenForm, check_form_csrf, see_other};
use crate::access::ProjectAccess;
use crate::error::ApiError;
use crate::extract::Principal;
use crate::service::retention;
use crate::state::AppState;

/// Runs shown.
const RUNS: i64 = 10;

/// The templates the add-rule form offers: id, what its number counts.
const TEMPLATES: [(&str, &str); 5] = [
    ("latestPushedK", "the most recently pushed # artifacts"),
    ("latestPulledN", "the most recently pulled # artifacts"),
    ("nDaysSinceLastPush", "pushed within the last # days"),
    ("nDaysSinceLastPull", "pulled within the last # days"),
    ("always", "always"),
];

pub(super) fn router() -> Router<AppState> {
    let base = "/harbor/projects/{project_name}/policy";
    Router::new()
        .route(base, get(show_policy))
        .route(&format!("{base}/rules"), post(add_rule))
        .route(&format!("{base}/rules/{{index}}/delete"), post(remove_rule))
        .route(&format!("{base}/schedule"), post(set_schedule))
        .route(&format!("{base}/run"), post(run_policy))
        .route(
            &format!("{base}/executions/{{eid}}/tasks/{{tid}}/log"),
            get(task_log),
        )
}

/// What the last form did.
#[derive(Debug, Default, Deserialize)]
pub(super) struct DoneQuery {
    #[serde(default)]
    done: Option<String>,
}

/// The project's policy id, if it has one.
async fn policy_id(state: &AppState, access: &ProjectAccess) -> Result<Option<i64>, ApiError> {
    Ok(state
        .store
        .metadata()
        .get(
            access.project.id,
            berth_store::repo::retention::METADATA_KEY,
        )
        .await?
        .and_then(|id| id.parse().ok()))
}

fn rule_text(rule: &RetentionRule) -> String {
    let text = TEMPLATES
        .iter()
        .find(|(id, _)| *id == rule.template)
        .map_or(rule.template.as_str(), |(_, text)| text);
    let n = rule
        .params
        .get(&rule.template)
        .map(Value::to_string)
        .unwrap_or_default();
    let patterns = |selectors: &[Selector]| {
        selectors
            .iter()
            .map(|s| format!("{} {}", s.decoration, s.pattern))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "retain {} · tags: {} · repositories: {}{}",
        text.replace('#', &n),
        patterns(&rule.tag_selectors),
        patterns(
            rule.scope_selectors
                .get("repository")
                .map_or(&[][..], Vec::as_slice)
        ),
        if rule.disabled { " (disabled)" } else { "" }
    )
}

/// `GET /harbor/projects/{project_name}/policy`.
async fn show_policy(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    Query(done): Query<DoneQuery>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    let access = portal
        .require_project(&state, project_name, Resource::TagRetention, Action::List)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let principal = portal.principal();
    let base = policy_path(&access);
    let csrf = html::csrf_field(session);
    let policy = match policy_id(&state, &access).await.map_err(failed)? {
        Some(id) => Some(
            retention::get(&state, &principal, id)
                .await
                .map_err(failed)?,
        ),
        None => None,
    };
    let mut rules = String::new();
    for (i, rule) in policy.iter().flat_map(|p| p.rules.iter()).enumerate() {
        rules.push_str(&format!(
            r#"<tr data-rule="{i}"><td>{text}</td><td><form class="inline" method="post" action="{base}/rules/{i}/delete">{csrf}<button type="submit" class="danger small delete-rule">Remove</button></form></td></tr>"#,
            text = esc(&rule_text(rule)),
            base = esc(&base),
        ));
    }
    if rules.is_empty() {
        rules =
            r#"<tr><td colspan="2" class="muted">No rules: nothing is deleted.</td></tr>"#.into();
    }
    let options: String = TEMPLATES
        .iter()
        .map(|(id, text)| format!(r#"<option value="{id}">{}</option>"#, esc(text)))
        .collect();
    let cron = policy
        .as_ref()
        .and_then(|p| p.cron().ok().flatten().map(str::to_string))
        .unwrap_or_default();
    let next = policy
        .as_ref()
        .and_then(|p| p.trigger.settings.get("next_scheduled_time"))
        .and_then(Value::as_str)
        .map(|t| {
            format!(
                r#" <span class="muted">next: {}</span>"#,
                esc(&html::when(t))
            )
        })
        .unwrap_or_default();
    let runs = match &policy {
        Some(p) => runs_table(&state, &principal, p.id, &base)
            .await
            .map_err(failed)?,
        None => String::new(),
    };
    let run_forms = if policy.is_some() {
        format!(
            r#"<form class="toolbar" method="post" action="{base}/run">{csrf}<input type="hidden" name="dry_run" value="true"><button type="submit" id="dry_run">Dry run</button></form>
<form class="toolbar" method="post" action="{base}/run">{csrf}<input type="hidden" name="dry_run" value="false"><button type="submit" id="run_now" data-confirm="Delete now what no rule keeps?">Run now</button></form>"#,
            base = esc(&base),
        )
    } else {
        String::new()
    };
    let notice = match done.done.as_deref() {
        Some(what) => html::notice("ok", what),
        None => String::new(),
    };
    let main = format!(
        r#"{header}{notice}
<h2>Tag retention</h2>
<p class="muted">Every artifact of a repository a rule covers goes unless some rule retains it; an artifact with a retained tag keeps all its tags; immutable tags always stay.</p>
<table id="retention_rules"><thead><tr><th>Rule</th><th></th></tr></thead><tbody>{rules}</tbody></table>
<form class="toolbar" method="post" action="{base}/rules">{csrf}
<select name="template" id="rule_template" aria-label="Template">{options}</select>
<input type="number" name="count" id="rule_count" min="0" value="10" aria-label="Number (artifacts or days)">
<input type="text" name="tags" id="rule_tags" value="**" aria-label="Tags (doublestar pattern)">
<input type="text" name="repositories" id="rule_repositories" value="**" aria-label="Repositories (doublestar pattern)">
<button type="submit" id="add_rule">Add rule</button></form>
<form class="toolbar" method="post" action="{base}/schedule">{csrf}
<input type="text" name="cron" id="retention_cron" value="{cron}" placeholder="0 0 0 * * * (empty: only when run)" aria-label="Schedule (cron, seconds first)">
<button type="submit" id="set_schedule">Set schedule</button>{next}</form>
{run_forms}
{runs}"#,
        header = header(&access, Tab::Policy),
        base = esc(&base),
        cron = esc(&cron),
    );
    let title = format!("{} · Policy", access.project.name);
    Ok(html::page(&title, Some(session), &main).into_response())
}

/// The last runs of policy `id`, each with its repositories' tasks.
async fn runs_table(
    state: &AppState,
    principal: &Principal,
    id: i64,
    base: &str,
) -> Result<String, ApiError> {
    let paging = Paging {
        page: 1,
        page_size: RUNS,
    };
    let (_, executions) = retention::executions(state, principal, id, paging).await?;
    let mut rows = String::new();
    for execution in &executions {
        let dry = serde_json::from_str::<Value>(&execution.extra_attrs)
            .ok()
            .and_then(|a| a["dry_run"].as_bool())
            .unwrap_or(false);
        let (_, tasks) = retention::tasks(
            state,
            principal,
            id,
            execution.id,
            Paging {
                page: 1,
                page_size: 0,
            },
        )
        .await?;
        let tasks: String = tasks
            .iter()
            .map(|task| {
                let found: Value = serde_json::from_str(&task.extra_attrs).unwrap_or(Value::Null);
                let repository = serde_json::from_str::<Value>(&task.parameters)
                    .ok()
                    .and_then(|p| p["repository"].as_str().map(str::to_string))
                    .unwrap_or_default();
                format!(
                    r#"<li>{repository}: {status}, {retained} of {total} kept · <a href="{base}/executions/{eid}/tasks/{tid}/log">log</a></li>"#,
                    repository = esc(&repository),
                    status = esc(&task.status),
                    retained = found["retained"].as_i64().unwrap_or(0),
                    total = found["total"].as_i64().unwrap_or(0),
                    base = esc(base),
                    eid = execution.id,
                    tid = task.id,
                )
            })
            .collect();
        rows.push_str(&format!(
            r#"<tr data-execution="{id}"><td>{id}</td><td class="status">{status}</td><td>{trigger}{dry}</td><td>{started}</td><td>{ended}</td><td><ul class="tasks">{tasks}</ul></td></tr>"#,
            id = execution.id,
            status = esc(&execution.status),
            trigger = esc(&execution.trigger),
            dry = if dry { ", dry run" } else { "" },
            started = esc(&html::when(&execution.start_time)),
            ended = esc(&html::when(execution.end_time.as_deref().unwrap_or(""))),
        ));
    }
    if rows.is_empty() {
        rows = r#"<tr><td colspan="6" class="muted">No runs yet.</td></tr>"#.into();
    }
    Ok(format!(
        r#"<h2>Runs</h2><table id="retention_runs"><thead><tr><th>Run</th><th>Status</th><th>Trigger</th><th>Started</th><th>Ended</th><th>Repositories</th></tr></thead><tbody>{rows}</tbody></table>"#
    ))
}

/// The add-rule form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct RuleForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    template: String,
    #[serde(default)]
    count: String,
    #[serde(default)]
    tags: String,
    #[serde(default)]
    repositories: String,
}

/// The project's policy (a new, empty one when it has none yet), and its id.
async fn policy_of(
    state: &AppState,
    principal: &Principal,
    access: &ProjectAccess,
) -> Result<(Option<i64>, RetentionPolicy), ApiError> {
    Ok(match policy_id(state, access).await? {
        Some(id) => (Some(id), retention::get(state, principal, id).await?),
        None => (
            None,
            RetentionPolicy {
                id: 0,
                algorithm: "or".into(),
                rules: Vec::new(),
                trigger: Trigger {
                    kind: "Schedule".into(),
                    settings: BTreeMap::from([("cron".into(), json!(""))]),
                    references: None,
                },
                scope: Scope {
                    level: "project".into(),
                    reference: access.project.id,
                },
            },
        ),
    })
}

/// Stores `policy` as the project's: created when it had none.
async fn save(
    state: &AppState,
    principal: &Principal,
    id: Option<i64>,
    policy: RetentionPolicy,
) -> Result<(), ApiError> {
    match id {
        Some(id) => retention::update(state, principal, id, policy).await,
        None => retention::create(state, principal, policy).await.map(drop),
    }
}

fn done(base: &str, what: &str) -> Response {
    see_other(&format!("{base}?done={}", html::url_part(what)))
}

/// `POST .../policy/rules`: adds a rule.
async fn add_rule(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    PortalForm(form): PortalForm<RuleForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let access = portal
        .require_project(&state, project_name, Resource::TagRetention, Action::Update)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let principal = portal.principal();
    let (id, mut policy) = policy_of(&state, &principal, &access)
        .await
        .map_err(failed)?;
    let selector = |decoration: &str, pattern: &str| Selector {
        kind: "doublestar".into(),
        decoration: decoration.into(),
        pattern: pattern.trim().to_string(),
        extras: None,
    };
    let mut params = BTreeMap::new();
    if form.template != "always" {
        let n: i64 = form.count.trim().parse().map_err(|_| {
            failed(ApiError::bad_request(
                "The number of artifacts or days must be a whole number.",
            ))
        })?;
        params.insert(form.template.clone(), json!(n));
    }
    policy.rules.push(RetentionRule {
        id: i64::try_from(policy.rules.len()).unwrap_or(0) + 1,
        priority: 0,
        disabled: false,
        action: "retain".into(),
        template: form.template.clone(),
        params,
        tag_selectors: vec![selector("matches", &form.tags)],
        scope_selectors: BTreeMap::from([(
            "repository".into(),
            vec![selector("repoMatches", &form.repositories)],
        )]),
    });
    save(&state, &principal, id, policy).await.map_err(failed)?;
    Ok(done(&policy_path(&access), "The rule was added."))
}

fn policy_path(access: &ProjectAccess) -> String {
    tab_path(&access.project.name, Tab::Policy)
}

/// `POST .../policy/rules/{index}/delete`: removes a rule.
async fn remove_rule(
    State(state): State<AppState>,
    portal: PortalUser,
    Path((project_name, index)): Path<(String, String)>,
    PortalForm(form): PortalForm<TokenForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let access = portal
        .require_project(&state, project_name, Resource::TagRetention, Action::Update)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let principal = portal.principal();
    let (id, mut policy) = policy_of(&state, &principal, &access)
        .await
        .map_err(failed)?;
    let index: usize = index
        .parse()
        .ok()
        .filter(|i| *i < policy.rules.len())
        .ok_or_else(|| failed(ApiError::not_found("The policy has no such rule.")))?;
    policy.rules.remove(index);
    save(&state, &principal, id, policy).await.map_err(failed)?;
    Ok(done(&policy_path(&access), "The rule was removed."))
}

/// The schedule form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct ScheduleForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    cron: String,
}

/// `POST .../policy/schedule`: when the policy runs on its own (empty: never).
async fn set_schedule(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    PortalForm(form): PortalForm<ScheduleForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let access = portal
        .require_project(&state, project_name, Resource::TagRetention, Action::Update)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let principal = portal.principal();
    let (id, mut policy) = policy_of(&state, &principal, &access)
        .await
        .map_err(failed)?;
    policy.trigger.kind = "Schedule".into();
    policy.trigger.settings = BTreeMap::from([("cron".into(), json!(form.cron.trim()))]);
    save(&state, &principal, id, policy).await.map_err(failed)?;
    Ok(done(&policy_path(&access), "The schedule was set."))
}

/// The run form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct RunForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    dry_run: String,
}

/// `POST .../policy/run`: a dry run, or a run now.
async fn run_policy(
    State(state): State<AppState>,
    portal: PortalUser,
    Path(project_name): Path<String>,
    PortalForm(form): PortalForm<RunForm>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let access = portal
        .require_project(&state, project_name, Resource::TagRetention, Action::Update)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let id = policy_id(&state, &access)
        .await
        .map_err(failed)?
        .ok_or_else(|| {
            failed(ApiError::not_found(
                "The project has no retention policy yet.",
            ))
        })?;
    let dry_run = form.dry_run == "true";
    let eid = retention::trigger(&state, &portal.principal(), id, dry_run)
        .await
        .map_err(failed)?;
    let what = if dry_run { "Dry run" } else { "Run" };
    Ok(done(
        &policy_path(&access),
        &format!("{what} {eid} started; reload to follow it."),
    ))
}

/// `GET .../policy/executions/{eid}/tasks/{tid}/log`: a task's log, as text.
async fn task_log(
    State(state): State<AppState>,
    portal: PortalUser,
    Path((project_name, eid, tid)): Path<(String, String, String)>,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    let access = portal
        .require_project(&state, project_name, Resource::TagRetention, Action::Read)
        .await?;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let missing = || failed(ApiError::not_found("There is no such log."));
    let id = policy_id(&state, &access)
        .await
        .map_err(failed)?
        .ok_or_else(missing)?;
    let (eid, tid) = match (eid.parse(), tid.parse()) {
        (Ok(eid), Ok(tid)) => (eid, tid),
        _ => return Err(missing()),
    };
    let log = retention::task_log(&state, &portal.principal(), id, eid, tid)
        .await
        .map_err(failed)?;
    Ok((
        [(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        log,
    )
        .into_response())
}
