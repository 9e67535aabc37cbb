//! Tag retention: a project's policy, its runs and what a run does.
//!
//! A run is a job execution (vendor type `RETENTION`, vendor id the
//! policy's). It starts with one planning task, which adds one task per
//! repository some enabled rule covers (a run started by the schedule
//! plans as a manual one does); each repository task weighs the
//! repository's artifacts against the rules (`berth_domain::model::retention`)
//! and deletes, in batches, what no rule keeps, as the one artifact delete
//! does (tags, accessories, quota, an `artifact.deleted` event each). A dry
//! run weighs the same and deletes nothing. Every task writes its table of
//! artifacts to its log.

use std::time::Duration;

use berth_domain::cron::Cron;
use berth_domain::model::retention::{self as rules, RetentionPolicy};
use berth_domain::model::{Project, ProjectRef};
use berth_domain::oci::within_project;
use berth_domain::query::Paging;
use berth_domain::rbac::{Action, Resource};
use berth_domain::time;
use berth_store::repo::jobs::{Execution, NewExecution, NewSchedule, NewTask, Schedule, Task};
use berth_store::repo::retention::{Candidate, Retired, StoredPolicy, VENDOR_TYPE};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::access::{ProjectAccess, require_found_project};
use crate::error::{ApiError, ErrorKind};
use crate::extract::Principal;
use crate::state::AppState;

pub use berth_store::repo::retention::VENDOR_TYPE as RETENTION;

/// Who the runs a schedule starts act as, in audit logs and events.
pub const SCHEDULER: &str = "berth-scheduler";

/// How many artifacts one transaction of a run deletes: pushes to the
/// repository wait for one batch at most (on SQLite, where every write
/// waits for the one before, 2.1 ms of work in the median at 25). Over
/// 100,000 artifacts during pushes (`scripts/bench retention`): 15 took 40 s,
/// the pushes' p99 1.2-1.4x idle; 25 took 30 s, 1.7-1.8x.
const BATCH: usize = 15;

/// The shortest pause between two batches. A run pauses at least as long as
/// its last batch took, so it holds the writer half the time at most, and
/// while SQLite's log is being copied back ([`berth_store::Store::yield_to_log`]).
/// The writers waiting meanwhile (pushes) go first on their own: SQLite's one
/// writer connection is handed over in the order asked, PostgreSQL's row locks queue.
const PAUSE: Duration = Duration::from_millis(2);

/// How many deleted artifacts a task names for the TAG_RETENTION webhook.
const MAX_NAMED: usize = 1000;

/// How many times a repository's task is tried (Harbor's retention job: 3).
const ATTEMPTS: i64 = 3;

/// A policy with its project, as the caller may act on it.
pub struct Reached {
    /// The stored policy.
    pub stored: StoredPolicy,
    /// The policy.
    pub policy: RetentionPolicy,
}

fn not_found(id: i64) -> ApiError {
    ApiError::not_found(format!("retention policy {id} not found"))
}

/// Policy `id`, if the caller may do `action` on its project's retention.
pub async fn reach(
    state: &AppState,
    principal: &Principal,
    id: i64,
    action: Action,
) -> Result<Reached, ApiError> {
    principal.require_authenticated()?;
    let stored = state
        .store
        .retentions()
        .get(id)
        .await?
        .ok_or_else(|| not_found(id))?;
    let mut policy: RetentionPolicy = serde_json::from_str(&stored.policy)
        .map_err(|e| ApiError::internal(format!("stored retention policy {id}: {e}")))?;
    policy.id = stored.id;
    policy.scope.reference = stored.project_id;
    let project = ProjectRef::Id(stored.project_id);
    let found = state.store.projects().find(&project).await?;
    require_found_project(
        state,
        principal.actor(),
        &project,
        found,
        Resource::TagRetention,
        action,
    )
    .await?;
    Ok(Reached { stored, policy })
}

/// The project `policy` is of, if the caller may do `action` on its
/// retention; a project that does not exist is a 400, as Harbor answers.
async fn policy_project(
    state: &AppState,
    principal: &Principal,
    policy: &RetentionPolicy,
    action: Action,
) -> Result<ProjectAccess, ApiError> {
    principal.require_authenticated()?;
    let invalid =
        || ApiError::bad_request(format!("invalid Project id {}", policy.scope.reference));
    if policy.scope.reference <= 0 {
        return Err(invalid());
    }
    let project = ProjectRef::Id(policy.scope.reference);
    let found = state.store.projects().find(&project).await?;
    if found.is_none() {
        return Err(invalid());
    }
    require_found_project(
        state,
        principal.actor(),
        &project,
        found,
        Resource::TagRetention,
        action,
    )
    .await
}

/// The schedule `policy` asks for, checked: `None` for none.
fn schedule_of(policy: &RetentionPolicy, id: i64) -> Result<Option<NewSchedule>, ApiError> {
    let Some(cron) = policy.cron()? else {
        return Ok(None);
    };
    let invalid = |err: &dyn std::fmt::Display| {
        ApiError::bad_request(format!(
            "invalid cron string for scheduled tag retention: {cron}, error: {err}"
        ))
    };
    let parsed = Cron::schedule(cron).map_err(|e| invalid(&e))?;
    if parsed
        .next_after(::time::OffsetDateTime::now_utc())
        .is_none()
    {
        return Err(invalid(&"it never fires"));
    }
    Ok(Some(NewSchedule {
        vendor_type: VENDOR_TYPE.into(),
        vendor_id: id,
        schedule_type: "Custom".into(),
        cron: parsed,
        cron_text: cron.to_string(),
        parameters: json!({"dry_run": false, "operator": SCHEDULER}),
    }))
}

/// Sets or removes policy `id`'s schedule as `schedule` says.
async fn apply_schedule(
    state: &AppState,
    id: i64,
    schedule: Option<NewSchedule>,
) -> Result<(), ApiError> {
    let jobs = state.store.jobs();
    match schedule {
        Some(schedule) => {
            jobs.set_schedule(&schedule).await?;
        }
        None => {
            jobs.delete_schedule(VENDOR_TYPE, id).await?;
        }
    }
    Ok(())
}

/// The policy text kept: as checked, without its id (the row has it).
fn stored_text(policy: &RetentionPolicy) -> String {
    serde_json::to_string(&RetentionPolicy {
        id: 0,
        ..policy.clone()
    })
    .unwrap_or_default()
}

/// Creates `policy` for the project its scope names (one per project); its id.
pub async fn create(
    state: &AppState,
    principal: &Principal,
    mut policy: RetentionPolicy,
) -> Result<i64, ApiError> {
    if policy.rules.len() > rules::MAX_RULES {
        policy.validate()?;
    }
    let access = policy_project(state, principal, &policy, Action::Create).await?;
    policy.validate()?;
    install(state, &access.project, policy).await
}

/// Stores `policy` as `project`'s, with its schedule; its id.
async fn install(
    state: &AppState,
    project: &Project,
    policy: RetentionPolicy,
) -> Result<i64, ApiError> {
    schedule_of(&policy, 0)?;
    let retentions = state.store.retentions();
    let id = retentions
        .create(project.id, &stored_text(&policy))
        .await
        .map_err(|err| match ApiError::from(err) {
            e if e.kind == ErrorKind::Conflict => ApiError::bad_request(format!(
                "project {} already has retention policy",
                project.id
            )),
            e => e,
        })?;
    apply_schedule(state, id, schedule_of(&policy, id)?).await?;
    Ok(id)
}

/// Gives proxy-cache project `project` Harbor's default policy (keep what
/// was pulled within 7 days, looked at daily).
pub async fn create_proxy_cache_default(
    state: &AppState,
    project: &Project,
) -> Result<i64, ApiError> {
    install(
        state,
        project,
        RetentionPolicy::proxy_cache_default(project.id),
    )
    .await
}

/// Policy `id` with the next time its schedule fires in its trigger's
/// settings (`next_scheduled_time`), as Harbor shows it.
pub async fn get(
    state: &AppState,
    principal: &Principal,
    id: i64,
) -> Result<RetentionPolicy, ApiError> {
    let mut reached = reach(state, principal, id, Action::Read).await?;
    if let Some(schedule) = state.store.jobs().schedule(VENDOR_TYPE, id).await? {
        reached
            .policy
            .trigger
            .settings
            .insert("next_scheduled_time".into(), json!(schedule.next_fire_at));
    }
    Ok(reached.policy)
}

/// Replaces policy `id` by `policy` (of the same project) and its schedule.
pub async fn update(
    state: &AppState,
    principal: &Principal,
    id: i64,
    mut policy: RetentionPolicy,
) -> Result<(), ApiError> {
    let reached = reach(state, principal, id, Action::Update).await?;
    if policy.scope.reference == 0 {
        policy.scope = reached.policy.scope.clone();
    }
    if policy.scope.reference != reached.stored.project_id {
        return Err(ApiError::not_found(format!(
            "the retention policy id {id} does not match"
        )));
    }
    policy.trigger.settings.remove("next_scheduled_time");
    policy.validate()?;
    let schedule = schedule_of(&policy, id)?;
    if !state
        .store
        .retentions()
        .update(id, &stored_text(&policy))
        .await?
    {
        return Err(not_found(id));
    }
    apply_schedule(state, id, schedule).await
}

/// Deletes policy `id`, its schedule and the project's `retention_id`.
/// Refused while one of its runs goes on (stop it first), as Harbor does.
pub async fn delete(state: &AppState, principal: &Principal, id: i64) -> Result<(), ApiError> {
    reach(state, principal, id, Action::Delete).await?;
    let (_, recent) = state
        .store
        .jobs()
        .executions(
            VENDOR_TYPE,
            id,
            Paging {
                page: 1,
                page_size: 1,
            },
        )
        .await?;
    if let Some(running) = recent.iter().find(|e| !ended(e)) {
        return Err(ApiError::new(
            ErrorKind::Precondition,
            format!(
                "the execution {} has tasks that aren't in final status, stop the tasks first",
                running.id
            ),
        ));
    }
    if !state.store.retentions().delete(id).await? {
        return Err(not_found(id));
    }
    Ok(())
}

fn ended(execution: &Execution) -> bool {
    execution.end_time.is_some()
}

/// Starts a run of policy `id` (a dry run deletes nothing); its execution's id.
pub async fn trigger(
    state: &AppState,
    principal: &Principal,
    id: i64,
    dry_run: bool,
) -> Result<i64, ApiError> {
    reach(state, principal, id, Action::Update).await?;
    if !dry_run && state.configuration().await?.flag("read_only") {
        return Err(crate::read_only::refusal());
    }
    let operator = principal.audit_name().to_string();
    let new = NewExecution {
        vendor_type: VENDOR_TYPE.into(),
        vendor_id: id,
        trigger: "MANUAL".into(),
        extra_attrs: json!({"dry_run": dry_run, "operator": operator}),
    };
    let plan = plan_task(id, dry_run, &operator);
    Ok(state.store.jobs().create(&new, &[plan]).await?)
}

/// What a run's planning task gets.
#[derive(Debug, Deserialize)]
struct Plan {
    policy_id: i64,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    operator: String,
}

/// What a repository's task gets.
#[derive(Debug, Deserialize)]
struct RepositoryRun {
    repository_id: i64,
    repository: String,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    operator: String,
    /// The policy as it was when the run was planned.
    policy: RetentionPolicy,
}

fn plan_task(policy_id: i64, dry_run: bool, operator: &str) -> NewTask {
    NewTask {
        parameters: json!({"plan": {"policy_id": policy_id, "dry_run": dry_run, "operator": operator}}),
        max_attempts: ATTEMPTS,
        sequence_key: None,
    }
}

/// The tasks a run its schedule starts begins with: its planning task.
pub fn tasks_of(schedule: &Schedule) -> Vec<NewTask> {
    vec![plan_task(schedule.vendor_id, false, SCHEDULER)]
}

/// Whether `task` is a run's planning task (which Harbor's task lists do not show).
fn is_plan(task: &Task) -> bool {
    serde_json::from_str::<Value>(&task.parameters)
        .ok()
        .is_some_and(|p| p.get("plan").is_some())
}

/// Execution `eid` of policy `id`.
async fn execution_of(state: &AppState, id: i64, eid: i64) -> Result<Execution, ApiError> {
    match state.store.jobs().execution(eid).await? {
        Some(e) if e.vendor_type == VENDOR_TYPE && e.vendor_id == id => Ok(e),
        _ => Err(ApiError::not_found(format!("execution {eid} not found"))),
    }
}

/// A page of policy `id`'s runs, newest first, and how many there are.
pub async fn executions(
    state: &AppState,
    principal: &Principal,
    id: i64,
    paging: Paging,
) -> Result<(i64, Vec<Execution>), ApiError> {
    reach(state, principal, id, Action::List).await?;
    Ok(state
        .store
        .jobs()
        .executions(VENDOR_TYPE, id, paging)
        .await?)
}

/// Stops run `eid` of policy `id`: what has not started does not, what runs
/// stops after its current batch.
pub async fn stop(
    state: &AppState,
    principal: &Principal,
    id: i64,
    eid: i64,
) -> Result<(), ApiError> {
    reach(state, principal, id, Action::Update).await?;
    execution_of(state, id, eid).await?;
    state.store.jobs().stop(eid).await?;
    Ok(())
}

/// A page of the repository tasks of run `eid` of policy `id`, and how many there are.
pub async fn tasks(
    state: &AppState,
    principal: &Principal,
    id: i64,
    eid: i64,
    paging: Paging,
) -> Result<(i64, Vec<Task>), ApiError> {
    reach(state, principal, id, Action::List).await?;
    execution_of(state, id, eid).await?;
    let tasks: Vec<Task> = state
        .store
        .jobs()
        .tasks(eid)
        .await?
        .into_iter()
        .filter(|task| !is_plan(task))
        .collect();
    Ok(paging.page_of(tasks))
}

/// The log of task `tid` of run `eid` of policy `id`.
pub async fn task_log(
    state: &AppState,
    principal: &Principal,
    id: i64,
    eid: i64,
    tid: i64,
) -> Result<String, ApiError> {
    reach(state, principal, id, Action::Read).await?;
    execution_of(state, id, eid).await?;
    let jobs = state.store.jobs();
    match jobs.task(tid).await? {
        Some(task) if task.execution_id == eid && !is_plan(&task) => Ok(jobs.log_text(tid).await?),
        _ => Err(ApiError::not_found(format!("task {tid} not found"))),
    }
}

/// Runs `task` of a retention run here and now: plans the run, or weighs
/// and prunes one repository; what it found.
pub async fn run_task(state: &AppState, task: &Task) -> Result<Value, String> {
    let parameters: Value = serde_json::from_str(&task.parameters).map_err(|e| e.to_string())?;
    if let Some(plan) = parameters.get("plan") {
        let plan: Plan = serde_json::from_value(plan.clone()).map_err(|e| e.to_string())?;
        return plan_run(state, task, &plan).await.map_err(|e| e.message);
    }
    let run: RepositoryRun = serde_json::from_value(parameters).map_err(|e| e.to_string())?;
    prune(state, task, &run).await.map_err(|e| e.message)
}

/// Adds one task per repository an enabled rule of the policy covers.
async fn plan_run(state: &AppState, task: &Task, plan: &Plan) -> Result<Value, ApiError> {
    let retentions = state.store.retentions();
    let Some(stored) = retentions.get(plan.policy_id).await? else {
        return Ok(json!({"repositories": 0, "note": "the policy is gone"}));
    };
    let policy: RetentionPolicy =
        serde_json::from_str(&stored.policy).map_err(ApiError::internal)?;
    let policy_json = serde_json::to_value(&policy).map_err(ApiError::internal)?;
    let tasks: Vec<NewTask> = retentions
        .repositories(stored.project_id)
        .await?
        .into_iter()
        .filter(|(_, name)| !policy.rules_for(within_project(name)).is_empty())
        .map(|(repository_id, repository)| NewTask {
            parameters: json!({
                "repository_id": repository_id,
                "repository": repository,
                "dry_run": plan.dry_run,
                "operator": plan.operator,
                "policy": policy_json,
            }),
            max_attempts: ATTEMPTS,
            sequence_key: None,
        })
        .collect();
    let jobs = state.store.jobs();
    jobs.log(task.id, &format!("{} repositories to look at", tasks.len()))
        .await?;
    jobs.add_tasks(task.execution_id, &tasks).await?;
    Ok(json!({"repositories": tasks.len()}))
}

/// What a run does with one artifact, as its log's last column says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Retain,
    Delete,
    Immutable,
    Error,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Self::Retain => "RETAIN",
            Self::Delete => "DEL",
            Self::Immutable => "IMMUTABLE",
            Self::Error => "ERR",
        }
    }
}

fn unix(stamp: &str) -> i64 {
    time::parse_timestamp(stamp).map_or(i64::MIN, |t| t.unix_timestamp())
}

/// Weighs repository `run.repository`'s artifacts and deletes (unless a dry
/// run) those no rule keeps; `{"total", "retained", "deleted"}`.
async fn prune(state: &AppState, task: &Task, run: &RepositoryRun) -> Result<Value, ApiError> {
    let jobs = state.store.jobs();
    if !run.dry_run && state.configuration().await?.flag("read_only") {
        return Err(ApiError::bad_request("the registry is in read-only mode"));
    }
    jobs.log(
        task.id,
        &format!(
            "Run retention process. Repository: {} Rule Algorithm: or Dry Run: {}",
            run.repository, run.dry_run
        ),
    )
    .await?;
    let looked_at = time::now();
    let retentions = state.store.retentions();
    let candidates = retentions.candidates(run.repository_id).await?;
    jobs.log(
        task.id,
        &format!(
            "Load {} candidates from repository {}",
            candidates.len(),
            run.repository
        ),
    )
    .await?;
    let within = within_project(&run.repository);
    let weighed: Vec<rules::Candidate> = candidates
        .iter()
        .map(|c| rules::Candidate {
            tags: c.tags.clone(),
            pushed: unix(&c.pushed),
            pulled: unix(&c.pulled),
        })
        .collect();
    let kept = rules::evaluate(&run.policy.rules_for(within), &weighed, time::unix_now());
    let project_id = run.policy.scope.reference;
    let protection = state.store.immutable_rules().protection(project_id).await?;
    let mut verdicts: Vec<Verdict> = candidates
        .iter()
        .zip(&kept)
        .map(|(candidate, &kept)| match () {
            _ if kept => Verdict::Retain,
            _ if candidate
                .tags
                .iter()
                .any(|t| protection.protects(within, t)) =>
            {
                Verdict::Immutable
            }
            _ if candidate.referenced => Verdict::Error,
            _ => Verdict::Delete,
        })
        .collect();
    if !run.dry_run {
        let doomed: Vec<usize> = (0..candidates.len())
            .filter(|&i| verdicts[i] == Verdict::Delete)
            .collect();
        for batch in doomed.chunks(BATCH) {
            let began = std::time::Instant::now();
            let ids: Vec<i64> = batch.iter().map(|&i| candidates[i].id).collect();
            let outcomes = retentions
                .retire(&run.repository, &ids, &looked_at, &run.operator)
                .await?;
            for (&i, outcome) in batch.iter().zip(outcomes) {
                verdicts[i] = match outcome {
                    Retired::Deleted => Verdict::Delete,
                    Retired::Immutable => Verdict::Immutable,
                    Retired::Referenced => Verdict::Error,
                    Retired::Changed => Verdict::Retain,
                };
            }
            state.deliver_events();
            tokio::time::sleep(PAUSE.max(began.elapsed())).await;
            state.store.yield_to_log().await;
        }
    }
    let deleted = verdicts.iter().filter(|v| **v == Verdict::Delete).count();
    // A thousand rows per entry: one write of a 100,000-row table held
    // SQLite's write lock long enough to stall pushes.
    let table = table(&run.repository, &candidates, &verdicts);
    for part in table.lines().collect::<Vec<_>>().chunks(1000) {
        jobs.log(task.id, &part.join("\n")).await?;
    }
    for (candidate, verdict) in candidates.iter().zip(&verdicts) {
        let why = match verdict {
            Verdict::Immutable => "Immutable tag",
            Verdict::Error => "an index refers to it",
            _ => continue,
        };
        jobs.log(
            task.id,
            &format!(
                "Retention error for artifact image:{}:{} : {why}",
                run.repository, candidate.digest
            ),
        )
        .await?;
    }
    // What a TAG_RETENTION webhook names (Harbor's `name_tag`), up to a bound.
    let deleted_artifacts: Vec<String> = candidates
        .iter()
        .zip(&verdicts)
        .filter(|(_, verdict)| !run.dry_run && **verdict == Verdict::Delete)
        .take(MAX_NAMED)
        .map(|(candidate, _)| match candidate.tags.first() {
            Some(tag) => format!("{within}:{tag}"),
            None => format!("{within}@{}", candidate.digest),
        })
        .collect();
    Ok(json!({
        "total": candidates.len(),
        "retained": candidates.len() - deleted,
        "deleted": deleted,
        "dry_run": run.dry_run,
        "deleted_artifacts": deleted_artifacts,
    }))
}

/// The table a task's log shows: one row per artifact, Harbor's columns.
fn table(repository: &str, candidates: &[Candidate], verdicts: &[Verdict]) -> String {
    let shown = |stamp: &str| {
        time::parse_timestamp(stamp)
            .filter(|t| t.year() > 1)
            .map(|t| {
                format!(
                    "{:04}/{:02}/{:02} {:02}:{:02}:{:02}",
                    t.year(),
                    u8::from(t.month()),
                    t.day(),
                    t.hour(),
                    t.minute(),
                    t.second()
                )
            })
            .unwrap_or_default()
    };
    let mut text = format!(
        "Repository {repository}\n| Digest | Tag | Kind | Labels | PushedTime | PulledTime | CreatedTime | Retention |\n"
    );
    for (candidate, verdict) in candidates.iter().zip(verdicts) {
        text.push_str(&format!(
            "| {} | {} | image | | {} | {} | {} | {} |\n",
            candidate.digest,
            candidate.tags.join(","),
            shown(&candidate.pushed),
            shown(&candidate.pulled),
            shown(&candidate.pushed),
            verdict.label()
        ));
    }
    text
}
