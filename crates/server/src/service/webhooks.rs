//! Webhooks: what a project's policies are told, and the delivery jobs.
//!
//! The `webhook` subscriber of the domain events hands every event over
//! ([`hand_off`]): for each enabled policy of the event's project that names
//! its type, and each of the policy's targets, one execution (vendor type
//! `WEBHOOK` or `SLACK`, vendor id the policy's, trigger `EVENT`) with one
//! task, made in the transaction that takes the event, so a change that
//! rolled back is never announced and a committed one is handed over once.
//! With `notification_enable` off, events are taken and dropped, as Harbor
//! drops them. A task POSTs the payload ([`deliver`]) in Harbor's `Default`
//! or `CloudEvents` format, or Slack's blocks; a receiver that does not
//! answer 2xx is tried again with the jobs' backoff (10 s, doubling) up to
//! [`ATTEMPTS`] times: a receiver down for ten minutes still gets the event.
//! The payload is made at the first attempt from what the task recorded (the
//! event, the target, a CloudEvents id), so retries send the same bytes
//! except the repository's `date_created`/`repo_type`, read at sending.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::http::{HeaderName, header};
use berth_domain::model::ProjectRef;
use berth_domain::model::replication::Policy as ReplicationPolicy;
use berth_domain::model::webhook::{
    self, CLOUD_EVENTS, DELETE_ARTIFACT, PULL_ARTIFACT, PUSH_ARTIFACT, Policy, SLACK, Target,
};
use berth_store::repo::events::{self, Event, NewEvent};
use berth_store::repo::jobs::{NewExecution, NewTask, Task};
use berth_store::repo::manifests::NewManifest;
use berth_store::repo::webhooks::SYSTEM;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::state::AppState;

/// Deliveries to `http` targets.
pub const WEBHOOK: &str = "WEBHOOK";
/// Deliveries to Slack.
pub const SLACK_VENDOR: &str = "SLACK";
/// How many times a delivery is tried (Harbor: 3; here enough for a
/// receiver that is down for ten minutes: 10 + 20 + ... + 320 s of backoff).
pub const ATTEMPTS: i64 = 7;
/// How many events one hand-off takes.
const HAND_OFF: i64 = 200;

/// What a delivery task records: the event and where it goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub policy_id: i64,
    pub project_id: i64,
    /// Harbor's event type (`PUSH_ARTIFACT`).
    pub event_type: String,
    /// Unix seconds.
    pub occur_at: i64,
    pub operator: String,
    pub target: Target,
    /// The CloudEvents `id`, the same at every attempt.
    pub id: String,
    /// Whether the policy is the system's (every project's events).
    #[serde(default)]
    pub system: bool,
    /// What the event is about.
    #[serde(flatten)]
    pub subject: Subject,
}

/// What an event is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "subject", rename_all = "snake_case")]
pub enum Subject {
    /// An artifact pushed, pulled or deleted.
    Artifact {
        /// `library/app`.
        repository: String,
        digest: String,
        /// The tag, or the digest when the artifact was named by it (Harbor's `tag`).
        reference: String,
    },
    /// A tag retention run that ended (its execution).
    Retention { execution_id: i64 },
    /// A replication task that ended, as `status` (`Success`, `Error`).
    Replication { task_id: i64, status: String },
    /// A push refused by, or near, the project's quota.
    Quota {
        repository: String,
        digest: String,
        /// The tag pushed, if any.
        tag: Option<String>,
        /// Harbor's `custom_attributes.Details`.
        details: String,
    },
}

impl Subject {
    /// What the deliveries of one target keep the order of.
    fn sequence(&self) -> String {
        match self {
            Subject::Artifact { repository, .. } => format!("repository {repository}"),
            Subject::Retention { .. } => "retention".to_string(),
            Subject::Replication { .. } => "replication".to_string(),
            Subject::Quota { repository, .. } => format!("repository {repository}"),
        }
    }
}

/// Harbor's event type of a domain event, for those webhooks announce.
fn event_type(kind: &str) -> Option<&'static str> {
    match kind {
        events::ARTIFACT_PUSHED => Some(PUSH_ARTIFACT),
        events::ARTIFACT_DELETED => Some(DELETE_ARTIFACT),
        events::ARTIFACT_PULLED => Some(PULL_ARTIFACT),
        events::RETENTION_FINISHED => Some(webhook::TAG_RETENTION),
        events::REPLICATION_FINISHED => Some(webhook::REPLICATION),
        events::QUOTA_EXCEEDED => Some(webhook::QUOTA_EXCEED),
        events::QUOTA_WARNED => Some(webhook::QUOTA_WARNING),
        _ => None,
    }
}

/// What `event` is about: an artifact of its resource (`repo:tag` with the
/// digest beside it, or `repo@digest`), or a retention run (its execution id).
fn subject_of(event: &Event) -> Option<Subject> {
    if event.kind == events::REPLICATION_FINISHED {
        return Some(Subject::Replication {
            task_id: event.resource.parse().ok()?,
            status: event.detail.clone().unwrap_or_default(),
        });
    }
    if event.kind == events::RETENTION_FINISHED {
        return Some(Subject::Retention {
            execution_id: event.resource.parse().ok()?,
        });
    }
    if event.kind == events::QUOTA_EXCEEDED || event.kind == events::QUOTA_WARNED {
        let (repository, tag) = match event.resource.split_once('@') {
            Some((repository, _)) => (repository, None),
            None => {
                let (repository, tag) = event.resource.rsplit_once(':')?;
                (repository, Some(tag.to_string()))
            }
        };
        return Some(Subject::Quota {
            repository: repository.to_string(),
            digest: event.digest.clone().unwrap_or_default(),
            tag,
            details: event.detail.clone().unwrap_or_default(),
        });
    }
    if let Some((repository, digest)) = event.resource.split_once('@') {
        // A deleted artifact is named by the first tag it had, as Harbor names it.
        let reference = match (event.kind.as_str(), &event.detail) {
            (events::ARTIFACT_DELETED, Some(tag)) => tag.clone(),
            _ => digest.to_string(),
        };
        return Some(Subject::Artifact {
            repository: repository.into(),
            digest: digest.into(),
            reference,
        });
    }
    let (repository, tag) = event.resource.rsplit_once(':')?;
    Some(Subject::Artifact {
        repository: repository.into(),
        digest: event.digest.clone().unwrap_or_default(),
        reference: tag.into(),
    })
}

/// The delivery executions `events` make with `policies` (enabled, of
/// their projects): one per policy naming the event's type and target.
fn plan(events: &[Event], policies: &[Policy]) -> Vec<(NewExecution, Vec<NewTask>)> {
    let mut planned = Vec::new();
    for event in events {
        let (Some(kind), Some(project_id)) = (event_type(&event.kind), event.project_id) else {
            continue;
        };
        let Some(subject) = subject_of(event) else {
            continue;
        };
        let occur_at = berth_domain::time::parse_timestamp(&event.occurred_at)
            .map_or_else(berth_domain::time::unix_now, |t| t.unix_timestamp());
        // A policy hears of what happened after it was made, not of an
        // event that waited for its hand-off meanwhile.
        for policy in policies.iter().filter(|p| {
            (p.project_id == project_id || p.project_id == SYSTEM)
                && p.enabled
                && p.event_types.iter().any(|t| t == kind)
                && p.creation_time <= event.occurred_at
        }) {
            for target in &policy.targets {
                let delivery = Delivery {
                    policy_id: policy.id,
                    project_id,
                    event_type: kind.to_string(),
                    occur_at,
                    operator: event.actor.clone(),
                    target: target.clone(),
                    id: uuid::Uuid::new_v4().to_string(),
                    system: policy.project_id == SYSTEM,
                    subject: subject.clone(),
                };
                let vendor_type = if target.kind == SLACK {
                    SLACK_VENDOR
                } else {
                    WEBHOOK
                };
                planned.push((
                    NewExecution {
                        vendor_type: vendor_type.to_string(),
                        vendor_id: policy.id,
                        trigger: "EVENT".to_string(),
                        extra_attrs: json!({"event_type": kind}),
                    },
                    vec![NewTask {
                        parameters: serde_json::to_value(&delivery).unwrap_or(Value::Null),
                        max_attempts: ATTEMPTS,
                        // One target's deliveries of a repository arrive in order.
                        sequence_key: Some(format!(
                            "webhook {} {} {}",
                            policy.id,
                            target.address,
                            delivery.subject.sequence()
                        )),
                    }],
                ));
            }
        }
    }
    planned
}

/// Hands every pending event over to the webhook policies (or drops them
/// while `notification_enable` is off).
pub async fn hand_off(
    state: &AppState,
    notifications: bool,
) -> Result<(), berth_store::StoreError> {
    loop {
        let taken = state
            .store
            .webhooks()
            .hand_off(HAND_OFF, |events, policies| {
                if notifications {
                    plan(events, policies)
                } else {
                    Vec::new()
                }
            })
            .await?;
        if taken < usize::try_from(HAND_OFF).unwrap_or(usize::MAX) {
            return Ok(());
        }
    }
}

/// How long the projects whose webhooks ask for pulls are used before they
/// are read again: a policy made on another instance acts within this time.
const WATCH_TIMES: Duration = Duration::from_secs(5);
/// How long pulls are gathered before their events are written (pulls stay
/// free of writes; a crash loses at most this much of their notices).
const PULL_GATHER: Duration = Duration::from_secs(1);
/// At most this many pull notices wait; past it, more are dropped.
const MAX_PULLS: usize = 10_000;

/// Pulls to announce: which projects' webhooks ask for pulls (and for quota
/// warnings, which cost a quota read per push), as last read, and the pulls
/// gathered for the next write.
#[derive(Debug, Default)]
pub struct PullNotices {
    watching: RwLock<Option<(Instant, Arc<Watching>)>>,
    reading: AtomicBool,
    gathered: Mutex<Vec<NewEvent>>,
}

/// The projects whose webhooks ask for what the hot paths would otherwise
/// do for nothing ([`SYSTEM`] among them: every project).
#[derive(Debug, Default)]
struct Watching {
    pulls: Vec<i64>,
    quota_warnings: Vec<i64>,
}

impl PullNotices {
    /// Whether project `project_id`'s webhooks ask for what `of` picks, as
    /// last read; a stale answer starts a read in the background.
    fn watches(&self, state: &AppState, project_id: i64, of: fn(&Watching) -> &Vec<i64>) -> bool {
        let current = self
            .watching
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let stale = current
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() > WATCH_TIMES);
        if stale
            && !self.reading.swap(true, Ordering::AcqRel)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let state = state.clone();
            runtime.spawn(async move {
                refresh_watching(&state).await;
            });
        }
        current.is_some_and(|(_, watching)| {
            let projects = of(&watching);
            projects.contains(&project_id) || projects.contains(&SYSTEM)
        })
    }
}

/// Reads again which projects' webhooks ask for pulls and quota warnings
/// (after a policy changes on this instance, and when the last read is stale).
pub async fn refresh_watching(state: &AppState) {
    let notices = &state.pull_notices;
    let webhooks = state.store.webhooks();
    let read = async {
        Ok::<_, berth_store::StoreError>(Watching {
            pulls: webhooks.projects_watching(PULL_ARTIFACT).await?,
            quota_warnings: webhooks.projects_watching(webhook::QUOTA_WARNING).await?,
        })
    };
    match read.await {
        Ok(watching) => {
            *notices.watching.write().unwrap_or_else(|e| e.into_inner()) =
                Some((Instant::now(), Arc::new(watching)));
        }
        Err(err) => tracing::warn!(error = %err, "reading the webhook policies failed"),
    }
    notices.reading.store(false, Ordering::Release);
}

/// Notes a pull of `repository` by `reference` (its manifest `digest`) by
/// `by`, for the projects whose webhooks ask for pulls: gathered, and
/// written as events a second later, together.
pub fn pulled(
    state: &AppState,
    project_id: i64,
    repository: &str,
    reference: &str,
    digest: &str,
    by: &str,
) {
    let notices = &state.pull_notices;
    if !notices.watches(state, project_id, |w| &w.pulls) {
        return;
    }
    let separator = if reference.contains(':') { '@' } else { ':' };
    let event = NewEvent {
        kind: events::ARTIFACT_PULLED,
        project_id: Some(project_id),
        resource: format!("{repository}{separator}{reference}"),
        actor: by.to_string(),
        digest: Some(digest.to_string()),
        detail: None,
    };
    let first = {
        let mut gathered = notices.gathered.lock().unwrap_or_else(|e| e.into_inner());
        if gathered.len() >= MAX_PULLS {
            tracing::warn!("too many pull notices wait; one is dropped");
            return;
        }
        gathered.push(event);
        gathered.len() == 1
    };
    if first && let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let state = state.clone();
        runtime.spawn(async move {
            tokio::time::sleep(PULL_GATHER).await;
            write_pulls(&state).await;
        });
    }
}

/// Writes the pull notices gathered so far (tests call it to write at once).
pub async fn write_pulls(state: &AppState) {
    let gathered: Vec<NewEvent> = std::mem::take(
        &mut *state
            .pull_notices
            .gathered
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
    );
    if gathered.is_empty() {
        return;
    }
    match state.store.events().record(&gathered).await {
        Ok(()) => state.deliver_events(),
        Err(err) => {
            tracing::warn!(error = %err, pulls = gathered.len(), "writing pull notices failed; they are dropped")
        }
    }
}

/// The usage past which a push is announced as `QUOTA_WARNING` (Harbor's
/// default threshold), in percent of the hard limit.
const QUOTA_WARNING_PERCENT: i64 = 85;

/// Announces a push the project's storage quota refused (`QUOTA_EXCEED`),
/// in a transaction of its own: the push's rolled back.
pub async fn quota_exceeded(
    state: &AppState,
    new: &NewManifest,
    adding: i64,
    used: i64,
    hard: i64,
) {
    let detail = format!(
        "adding {} of storage resource, which when updated to current usage of {} will exceed \
         the configured upper limit of {}.",
        display_size(adding),
        display_size(used),
        display_size(hard)
    );
    record_quota(state, new, events::QUOTA_EXCEEDED, detail).await;
}

/// Announces a push that took the project's usage to the warning threshold
/// of its storage quota or past it (`QUOTA_WARNING`).
/// Reads the quota only for projects whose webhooks ask for warnings.
pub async fn quota_checked(state: &AppState, new: &NewManifest) {
    if !state
        .pull_notices
        .watches(state, new.project_id, |w| &w.quota_warnings)
    {
        return;
    }
    let Ok(Some(quota)) = state.store.quotas().get(new.project_id).await else {
        return;
    };
    if quota.hard <= 0
        || quota.used.saturating_mul(100) < quota.hard.saturating_mul(QUOTA_WARNING_PERCENT)
    {
        return;
    }
    let detail = format!(
        "quota usage reach {QUOTA_WARNING_PERCENT}%: resource storage used {} of {}",
        display_size(quota.used),
        display_size(quota.hard)
    );
    record_quota(state, new, events::QUOTA_WARNED, detail).await;
}

async fn record_quota(state: &AppState, new: &NewManifest, kind: &'static str, detail: String) {
    let event = NewEvent {
        kind,
        project_id: Some(new.project_id),
        resource: match &new.tag {
            Some(tag) => format!("{}:{tag}", new.repository),
            None => format!("{}@{}", new.repository, new.digest),
        },
        actor: new.pushed_by.clone().unwrap_or_default(),
        digest: Some(new.digest.clone()),
        detail: Some(detail),
    };
    match state.store.events().record(&[event]).await {
        Ok(()) => state.deliver_events(),
        Err(err) => tracing::warn!(error = %err, "recording a quota event failed"),
    }
}

/// Harbor's size for people: `512 B`, `8.6 MiB`.
fn display_size(bytes: i64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < 6 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}iB", ['B', 'K', 'M', 'G', 'T', 'P', 'E'][unit])
}

/// Runs a delivery task: the payload POSTed to the target, a line in the
/// task's log for the request and one for the answer.
pub async fn deliver(state: &AppState, task: &Task) -> Result<Value, String> {
    let delivery: Delivery = serde_json::from_str(&task.parameters)
        .map_err(|e| format!("the task's parameters do not parse: {e}"))?;
    let event_data = event_data(state, &delivery).await;
    let target = &delivery.target;
    let (body, content_type) = if target.kind == SLACK {
        (slack_body(&delivery, &event_data), "application/json")
    } else if target.payload_format == CLOUD_EVENTS {
        (
            cloud_event(&delivery, &event_data),
            "application/cloudevents+json",
        )
    } else {
        (default_payload(&delivery, &event_data), "application/json")
    };
    let mut headers: Vec<(HeaderName, String)> =
        vec![(header::CONTENT_TYPE, content_type.to_string())];
    if target.kind != SLACK && !target.auth_header.is_empty() {
        headers.push((header::AUTHORIZATION, target.auth_header.clone()));
    }
    let jobs = state.store.jobs();
    let _ = jobs
        .log(
            task.id,
            &format!("send request to remote endpoint, body: {body}"),
        )
        .await;
    let url = webhook::target_url(&target.address);
    let status = state
        .webhooks
        .post(&url, &headers, body.into(), target.skip_cert_verify)
        .await?;
    Ok(json!({"status_code": status}))
}

/// Harbor's `event_data` (field order as Harbor writes it).
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum EventData {
    Artifact {
        resources: Vec<Resource>,
        repository: RepositoryData,
    },
    Retention {
        retention: RetentionData,
    },
    Replication {
        replication: Box<ReplicationData>,
    },
    Quota {
        resources: Vec<Resource>,
        repository: RepositoryData,
        custom_attributes: QuotaAttributes,
    },
}

/// A quota event's `custom_attributes` (Harbor's key is `Details`).
#[derive(Debug, Serialize)]
struct QuotaAttributes {
    #[serde(rename = "Details")]
    details: String,
}

/// A retention run's `event_data.retention`.
#[derive(Debug, Serialize)]
struct RetentionData {
    total: i64,
    retained: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    harbor_hostname: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    project_name: String,
    #[serde(skip_serializing_if = "is_zero")]
    retention_policy_id: i64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    retention_rule: Vec<RuleData>,
    result: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deleted_artifact: Vec<DeletedArtifact>,
}

/// A replication task's `event_data.replication`.
#[derive(Debug, Default, Serialize)]
struct ReplicationData {
    #[serde(skip_serializing_if = "String::is_empty")]
    harbor_hostname: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    job_status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    artifact_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    authentication_type: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    override_mode: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    trigger_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    policy_creator: String,
    #[serde(skip_serializing_if = "is_zero")]
    execution_timestamp: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    src_resource: Option<ReplicationResource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dest_resource: Option<ReplicationResource>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    successful_artifact: Vec<DeletedArtifact>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    failed_artifact: Vec<DeletedArtifact>,
    #[serde(skip_serializing_if = "is_zero")]
    execution_id: i64,
    #[serde(skip_serializing_if = "is_zero")]
    task_id: i64,
}

/// One side of a replication in its event.
#[derive(Debug, Serialize)]
struct ReplicationResource {
    #[serde(skip_serializing_if = "String::is_empty")]
    registry_name: String,
    registry_type: String,
    endpoint: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    namespace: String,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

#[derive(Debug, Serialize)]
struct RuleData {
    #[serde(skip_serializing_if = "String::is_empty")]
    template: String,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    params: std::collections::BTreeMap<String, Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tag_selectors: Vec<berth_domain::model::immutable::Selector>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    scope_selectors:
        std::collections::BTreeMap<String, Vec<berth_domain::model::immutable::Selector>>,
}

#[derive(Debug, Serialize)]
struct DeletedArtifact {
    #[serde(rename = "type")]
    kind: &'static str,
    status: &'static str,
    name_tag: String,
    references: Option<Vec<String>>,
}

#[derive(Debug, Serialize)]
struct Resource {
    #[serde(skip_serializing_if = "String::is_empty")]
    digest: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    tag: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    resource_url: String,
}

#[derive(Debug, Serialize)]
struct RepositoryData {
    #[serde(skip_serializing_if = "Option::is_none")]
    date_created: Option<i64>,
    name: String,
    namespace: String,
    repo_full_name: String,
    repo_type: &'static str,
}

/// Harbor's `Default` payload.
#[derive(Debug, Serialize)]
struct Payload<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    occur_at: i64,
    operator: &'a str,
    event_data: &'a EventData,
}

/// A CloudEvents 1.0 event in structured mode, keys in the Go SDK's order.
#[derive(Debug, Serialize)]
struct CloudEvent<'a> {
    specversion: &'static str,
    id: &'a str,
    source: String,
    #[serde(rename = "type")]
    kind: &'static str,
    datacontenttype: &'static str,
    time: String,
    data: &'a EventData,
    operator: &'a str,
    requestid: &'static str,
}

/// A section of a Slack message.
#[derive(Debug, Serialize)]
struct Block {
    #[serde(rename = "type")]
    kind: &'static str,
    text: Text,
}

#[derive(Debug, Serialize)]
struct Text {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
}

/// `ext_endpoint` without its scheme (`harbor.dev:8443`).
fn external_host(state: &AppState) -> &str {
    state
        .external_url
        .split_once("://")
        .map_or(state.external_url.as_str(), |(_, host)| host)
        .trim_end_matches('/')
}

/// The event data of `delivery`, as things are now.
async fn event_data(state: &AppState, delivery: &Delivery) -> EventData {
    match &delivery.subject {
        Subject::Artifact {
            repository,
            digest,
            reference,
        } => artifact_data(state, delivery.project_id, repository, digest, reference).await,
        Subject::Retention { execution_id } => EventData::Retention {
            retention: retention_data(state, delivery.project_id, *execution_id).await,
        },
        Subject::Replication { task_id, status } => EventData::Replication {
            replication: Box::new(replication_data(state, *task_id, status).await),
        },
        Subject::Quota {
            repository,
            digest,
            tag,
            details,
        } => {
            // Harbor's quota payload: no `resource_url`, no `date_created`.
            let mut data = repository_data(state, delivery.project_id, repository).await;
            data.date_created = None;
            EventData::Quota {
                resources: vec![Resource {
                    digest: digest.clone(),
                    tag: tag.clone().unwrap_or_default(),
                    resource_url: String::new(),
                }],
                repository: data,
                custom_attributes: QuotaAttributes {
                    details: details.clone(),
                },
            }
        }
    }
}

/// An artifact event's data: the artifact and its repository.
async fn artifact_data(
    state: &AppState,
    project_id: i64,
    repository: &str,
    digest: &str,
    reference: &str,
) -> EventData {
    let host = external_host(state);
    let separator = if reference.contains(':') { '@' } else { ':' };
    EventData::Artifact {
        resources: vec![Resource {
            digest: digest.to_string(),
            tag: reference.to_string(),
            resource_url: format!("{host}/{repository}{separator}{reference}"),
        }],
        repository: repository_data(state, project_id, repository).await,
    }
}

/// Project `id` as stored now (`None` when gone or unreadable: payloads say less).
async fn project_of(state: &AppState, id: i64) -> Option<berth_domain::model::Project> {
    state
        .store
        .projects()
        .find(&ProjectRef::Id(id))
        .await
        .ok()
        .flatten()
}

/// Harbor's `repository` of an event: names, type, and creation as stored now.
async fn repository_data(state: &AppState, project_id: i64, repository: &str) -> RepositoryData {
    let (namespace, name) = repository.split_once('/').unwrap_or(("", repository));
    let public = project_of(state, project_id)
        .await
        .is_some_and(|p| p.public);
    let date_created = state
        .store
        .repositories()
        .find(repository)
        .await
        .ok()
        .flatten()
        .and_then(|r| berth_domain::time::parse_timestamp(&r.created_at))
        .map(|t| t.unix_timestamp());
    RepositoryData {
        date_created,
        name: name.to_string(),
        namespace: namespace.to_string(),
        repo_full_name: repository.to_string(),
        repo_type: if public { "public" } else { "private" },
    }
}

/// A retention run's data: its counts, its policy's rules, what it deleted
/// (each task names up to a thousand).
async fn retention_data(state: &AppState, project_id: i64, execution_id: i64) -> RetentionData {
    let jobs = state.store.jobs();
    let execution = jobs.execution(execution_id).await.ok().flatten();
    let tasks = jobs.tasks(execution_id).await.unwrap_or_default();
    let (mut total, mut retained, mut deleted_artifact) = (0, 0, Vec::new());
    for task in &tasks {
        let found: Value = serde_json::from_str(&task.extra_attrs).unwrap_or_default();
        total += found["total"].as_i64().unwrap_or(0);
        retained += found["retained"].as_i64().unwrap_or(0);
        for name in found["deleted_artifacts"].as_array().into_iter().flatten() {
            deleted_artifact.push(DeletedArtifact {
                kind: "image",
                status: "SUCCESS",
                name_tag: name.as_str().unwrap_or_default().to_string(),
                references: None,
            });
        }
    }
    let policy_id = execution.as_ref().map_or(0, |e| e.vendor_id);
    let rules = match state.store.retentions().get(policy_id).await {
        Ok(Some(stored)) => {
            serde_json::from_str::<berth_domain::model::retention::RetentionPolicy>(&stored.policy)
                .map(|p| p.rules)
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let project_name = project_of(state, project_id)
        .await
        .map(|p| p.name)
        .unwrap_or_default();
    let host = external_host(state);
    let hostname = host.rsplit_once(':').map_or(host, |(name, _)| name);
    RetentionData {
        total,
        retained,
        harbor_hostname: hostname.to_string(),
        project_name,
        retention_policy_id: policy_id,
        retention_rule: rules
            .into_iter()
            .map(|rule| RuleData {
                template: rule.template,
                params: rule.params,
                tag_selectors: rule.tag_selectors,
                scope_selectors: rule.scope_selectors,
            })
            .collect(),
        result: "SUCCESS",
        deleted_artifact,
    }
}

/// A replication task's data: its policy, both sides (namespaces as the
/// task's resources name them) and the artifact, as things are now.
async fn replication_data(state: &AppState, task_id: i64, status: &str) -> ReplicationData {
    let jobs = state.store.jobs();
    let Some(task) = jobs.task(task_id).await.ok().flatten() else {
        return ReplicationData::default();
    };
    let execution = jobs.execution(task.execution_id).await.ok().flatten();
    let policy_id = execution.as_ref().map_or(0, |e| e.vendor_id);
    let policy = state
        .store
        .replication()
        .get(policy_id)
        .await
        .ok()
        .flatten();
    let remote = match &policy {
        Some(policy) => state
            .store
            .registries()
            .get(policy.remote())
            .await
            .ok()
            .flatten(),
        None => None,
    };
    let parameters: Value = serde_json::from_str(&task.parameters).unwrap_or_default();
    let work: Option<crate::service::replication::Work> =
        serde_json::from_value(parameters["work"].clone()).ok();
    let (from, to) = work.as_ref().map(|w| w.resources()).unwrap_or_default();
    let split = |resource: &str| -> (String, String) {
        match resource.split_once('/') {
            Some((namespace, rest)) => (namespace.to_string(), rest.to_string()),
            None => (String::new(), resource.to_string()),
        }
    };
    let ((src_namespace, src_name), (dest_namespace, dest_name)) = (split(&from), split(&to));
    let host = external_host(state);
    let hostname = host.rsplit_once(':').map_or(host, |(name, _)| name);
    let local = |namespace: String| ReplicationResource {
        registry_name: String::new(),
        registry_type: "harbor".into(),
        endpoint: state.external_url.clone(),
        namespace,
    };
    let other = |namespace: String| ReplicationResource {
        registry_name: remote
            .as_ref()
            .map(|r| r.settings.name.clone())
            .unwrap_or_default(),
        registry_type: remote
            .as_ref()
            .map(|r| r.settings.kind.clone())
            .unwrap_or_default(),
        endpoint: remote
            .as_ref()
            .map(|r| r.settings.url.clone())
            .unwrap_or_default(),
        namespace,
    };
    let push = policy.as_ref().is_none_or(ReplicationPolicy::push_based);
    let (src_resource, dest_resource, name_tag) = if push {
        (local(src_namespace), other(dest_namespace), src_name)
    } else {
        (other(src_namespace), local(dest_namespace), dest_name)
    };
    let kind = work
        .as_ref()
        .map(|w| w.resource_type.clone())
        .unwrap_or_default();
    let artifact = || {
        vec![DeletedArtifact {
            kind: "image",
            status: if status == "Success" {
                "Success"
            } else {
                "Error"
            },
            name_tag: name_tag.clone(),
            references: None,
        }]
    };
    ReplicationData {
        harbor_hostname: hostname.to_string(),
        job_status: status.to_string(),
        description: policy
            .as_ref()
            .map(|p| p.description.clone())
            .unwrap_or_default(),
        artifact_type: kind,
        authentication_type: remote
            .as_ref()
            .map(|r| r.settings.credential_type.clone())
            .unwrap_or_default(),
        override_mode: policy.as_ref().is_some_and(|p| p.overwrite),
        trigger_type: execution
            .as_ref()
            .map(|e| e.trigger.clone())
            .unwrap_or_default(),
        policy_creator: policy
            .as_ref()
            .map(|p| p.creator.clone())
            .unwrap_or_default(),
        execution_timestamp: execution
            .as_ref()
            .and_then(|e| berth_domain::time::parse_timestamp(&e.start_time))
            .map_or(0, |t| t.unix_timestamp()),
        src_resource: Some(src_resource),
        dest_resource: Some(dest_resource),
        successful_artifact: if status == "Success" {
            artifact()
        } else {
            Vec::new()
        },
        failed_artifact: if status == "Success" {
            Vec::new()
        } else {
            artifact()
        },
        execution_id: task.execution_id,
        task_id,
    }
}

/// Harbor's `Default` payload.
fn default_payload(delivery: &Delivery, event_data: &EventData) -> String {
    go_json(&Payload {
        kind: &delivery.event_type,
        occur_at: delivery.occur_at,
        operator: &delivery.operator,
        event_data,
    })
}

/// The CloudEvents event of `delivery` (its `time` in whole UTC seconds).
fn cloud_event(delivery: &Delivery, event_data: &EventData) -> String {
    let time = time::OffsetDateTime::from_unix_timestamp(delivery.occur_at)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    go_json(&CloudEvent {
        specversion: "1.0",
        id: &delivery.id,
        source: if delivery.system {
            format!("/system/webhook/policies/{}", delivery.policy_id)
        } else {
            format!(
                "/projects/{}/webhook/policies/{}",
                delivery.project_id, delivery.policy_id
            )
        },
        kind: webhook::cloud_event_type(&delivery.event_type).unwrap_or_default(),
        datacontenttype: "application/json",
        time,
        data: event_data,
        operator: &delivery.operator,
        requestid: "",
    })
}

/// Harbor's Slack message: its six sections, the event data indented with
/// tabs in a code block. (Harbor writes the indented data's line breaks raw
/// inside the JSON string; here they are escaped, which is valid JSON and
/// reads the same in Slack.)
fn slack_body(delivery: &Delivery, event_data: &EventData) -> String {
    let mut data = Vec::new();
    let mut writer = serde_json::Serializer::with_formatter(
        &mut data,
        serde_json::ser::PrettyFormatter::with_indent(b"\t"),
    );
    let _ = event_data.serialize(&mut writer);
    let section = |text: String| Block {
        kind: "section",
        text: Text {
            kind: "mrkdwn",
            text,
        },
    };
    let blocks = vec![
        section("*Harbor webhook events*".into()),
        section(format!("*event_type:* {}", delivery.event_type)),
        section(format!(
            "*occur_at:* <!date^{}^{{date}} at {{time}}|February 18th, 2014 at 6:39 AM PST>",
            delivery.occur_at
        )),
        section(format!("*operator:* {}", delivery.operator)),
        section("*event_data:*".into()),
        section(format!("```{}```", String::from_utf8_lossy(&data))),
    ];
    serde_json::to_string(&json!({ "blocks": blocks })).unwrap_or_default()
}

/// Compact JSON as Go's `encoding/json` writes it: `<`, `>` and `&` escaped.
fn go_json(value: &impl Serialize) -> String {
    serde_json::to_string(value)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}
