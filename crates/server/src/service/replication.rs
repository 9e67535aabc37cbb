//! Replication (issue #30): policies that copy artifacts between this
//! registry and another one, their runs and what a run does.
//!
//! A run is a job execution (vendor type `REPLICATION`, vendor id the
//! policy's). It starts with one planning task, which lists what the policy
//! covers (this registry's repositories and tags for a push-based policy,
//! the other registry's catalog and tags for a pull-based one, or the one
//! artifact of the push or delete an event-based run is for) and adds one
//! task per repository. A repository's task copies its artifacts as a client
//! pushes them: the children of an index first, then each blob the
//! destination lacks (asked with `HEAD`, streamed without staging), then the
//! manifests' exact bytes, so digests stay the same. An artifact the
//! destination has under the same reference and digest is left as it is, so
//! a run that stopped halfway resumes without sending again what arrived.
//!
//! The other registry is not trusted: every request to it runs under the
//! peer deadlines (a silent peer fails its task with the reason in the
//! task's log), a blob is read no further than the size its manifest
//! declares and must hash to its digest, and the names it hands out
//! (repositories of its catalog, tags, referrers' digests) must pass the
//! rules a client's push and Harbor's project creation apply before a
//! task uses them: a task whose names fail them fails at once and creates
//! nothing. A pull-based run writes here, so it does not run in read-only
//! mode.

use berth_domain::rbac::{Action, SystemResource};
use std::collections::HashMap;

use berth_domain::cron::Cron;
use berth_domain::model::project::validate_project_name;
use berth_domain::model::registry::{Registry, RegistryType};
use berth_domain::model::replication::{self as model, Policy};
use berth_domain::model::{NewProject, ProjectRef};
use berth_domain::oci::manifest::Descriptor;
use berth_domain::oci::{Digest, Manifest, Reference, is_valid_name};
use berth_store::repo::events::{self, Event};
use berth_store::repo::jobs::{NewExecution, NewSchedule, NewTask, Schedule, Task};
use berth_store::repo::manifests::PutManifest;
pub use berth_store::repo::replication::VENDOR_TYPE as REPLICATION;
use futures_util::{StreamExt, TryStreamExt};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::extract::Principal;
use crate::state::AppState;
use crate::upstream::{Remote, Target};

/// How many blobs of one manifest are sent (or fetched) at once.
const PARALLEL_BLOBS: usize = 4;

/// How deep indexes may nest (an index of indexes of images is two).
const MAX_DEPTH: usize = 4;

/// What a copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Copied {
    /// Manifests pushed (the artifact, its children).
    pub manifests: usize,
    /// Manifests the destination had already.
    pub manifests_present: usize,
    /// Blobs pushed.
    pub blobs: usize,
    /// Blobs the destination had already.
    pub blobs_present: usize,
    /// Bytes of the blobs pushed.
    pub bytes: u64,
}

/// Pushes artifact `reference` (a tag or a digest) of local `repository` to
/// `remote` as `to` (a repository there) under the same reference.
pub async fn push_artifact(
    state: &AppState,
    remote: &Remote,
    repository: &str,
    reference: &str,
    to: &str,
) -> Result<Copied, String> {
    let mut transfer = Transfer {
        state,
        remote,
        pace: Pace {
            bytes_per_second: None,
        },
        copied: Copied::default(),
    };
    match transfer
        .push_manifest(repository, reference, to, 0, true)
        .await?
    {
        Landed::Gone => Err(format!("{repository}:{reference} is not here")),
        _ => Ok(transfer.copied),
    }
}

/// What became of one reference a task copies.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Landed {
    /// The destination has it now, with this digest (sent, or there already).
    Copied(String),
    /// The destination has the tag with this other digest, left as it is
    /// (`override` is off).
    Kept(String),
    /// The source no longer has it.
    Gone,
}

/// One task's copying: this registry, the other one, how fast, and what
/// was sent so far.
struct Transfer<'a> {
    state: &'a AppState,
    remote: &'a Remote,
    pace: Pace,
    copied: Copied,
}

/// How fast blobs go (Harbor's `speed`: KB/s per blob stream).
#[derive(Debug, Clone, Copy)]
struct Pace {
    bytes_per_second: Option<u64>,
}

impl Transfer<'_> {
    /// Pushes manifest `reference` of `repository` and what it needs, unless
    /// the destination has it, or has the tag with another digest and
    /// `overwrite` is off.
    async fn push_manifest(
        &mut self,
        repository: &str,
        reference: &str,
        to: &str,
        depth: usize,
        overwrite: bool,
    ) -> Result<Landed, String> {
        let (state, remote) = (self.state, self.remote);
        if depth > MAX_DEPTH {
            return Err(format!("{repository}:{reference}: indexes nest too deep"));
        }
        let parsed = Reference::parse(reference)
            .map_err(|_| format!("{reference:?} is neither a tag nor a digest"))?;
        let (project, _) = repository
            .split_once('/')
            .ok_or_else(|| format!("{repository} has no project"))?;
        let Some(stored) = state
            .store
            .registry()
            .manifest_lookup(project, repository, &parsed)
            .await
            .map_err(|e| e.to_string())?
            .and_then(|lookup| lookup.manifest)
        else {
            return Ok(Landed::Gone);
        };
        let digest = stored.digest.to_string();
        match remote
            .manifest_digest_for_push(to, reference)
            .await
            .map_err(|e| e.to_string())?
        {
            Some(there) if there == digest => {
                self.copied.manifests_present += 1;
                self.push_accessories(repository, &digest, to, depth)
                    .await?;
                return Ok(Landed::Copied(digest));
            }
            Some(there) if !overwrite => return Ok(Landed::Kept(there)),
            _ => {}
        }
        let manifest = Manifest::parse(&stored.body, Some(&stored.media_type))
            .map_err(|e| format!("{repository}@{}: {e}", stored.digest))?;
        for child in manifest.children() {
            let child = child.digest.as_str();
            if Box::pin(self.push_manifest(repository, child, to, depth + 1, true)).await?
                == Landed::Gone
            {
                return Err(format!(
                    "{repository}@{child}: a child of {digest} is not here"
                ));
            }
        }
        let pushes: Vec<_> = manifest
            .blob_dependencies()
            .into_iter()
            .map(|blob| self.push_blob(to, blob))
            .collect();
        let sent: Vec<Option<u64>> = futures_util::stream::iter(pushes)
            .buffer_unordered(PARALLEL_BLOBS)
            .try_collect()
            .await?;
        self.count_blobs(&sent);
        remote
            .push_manifest(to, reference, &stored.media_type, stored.body.into())
            .await
            .map_err(|e| e.to_string())?;
        self.copied.manifests += 1;
        self.push_accessories(repository, &digest, to, depth)
            .await?;
        Ok(Landed::Copied(digest))
    }

    /// Pushes `blob` to `to` unless the registry there has it; its size when sent.
    async fn push_blob(&self, to: &str, blob: &Descriptor) -> Result<Option<u64>, String> {
        let digest = blob.digest.as_str();
        if self
            .remote
            .has_blob(to, digest)
            .await
            .map_err(|e| e.to_string())?
        {
            return Ok(None);
        }
        let size = u64::try_from(blob.size).map_err(|_| format!("{digest}: a negative size"))?;
        let stream = self
            .state
            .registry
            .blobs
            .read(&blob.digest, 0, size)
            .await
            .map_err(|e| format!("{digest}: {e}"))?
            .ok_or_else(|| format!("{digest}: its bytes are not stored here"))?;
        let paced = crate::registry::throttled(
            stream.map_err(|e| e.to_string()),
            self.pace.bytes_per_second,
        );
        let body = StreamBody::new(paced.map_ok(Frame::data).map_err(std::io::Error::other))
            .boxed_unsync();
        self.remote
            .push_blob(to, digest, size, body)
            .await
            .map_err(|e| format!("{digest}: {e}"))?;
        Ok(Some(size))
    }

    /// Counts blobs sent (with their sizes) and blobs that were there.
    fn count_blobs(&mut self, sent: &[Option<u64>]) {
        for blob in sent {
            match blob {
                Some(size) => {
                    self.copied.blobs += 1;
                    self.copied.bytes += size;
                }
                None => self.copied.blobs_present += 1,
            }
        }
    }

    /// Pushes the accessories (signatures, SBOMs: manifests whose subject
    /// is `digest`) of `repository` after their subject, by digest.
    async fn push_accessories(
        &mut self,
        repository: &str,
        digest: &str,
        to: &str,
        depth: usize,
    ) -> Result<(), String> {
        let accessories = self
            .state
            .store
            .replication()
            .accessories(repository, digest)
            .await
            .map_err(|e| e.to_string())?;
        for accessory in accessories {
            Box::pin(self.push_manifest(repository, &accessory, to, depth + 1, true)).await?;
        }
        Ok(())
    }
}

/// Who the runs a schedule or an event starts act as, in audit logs and
/// events: a name no user may take.
pub const REPLICATOR: &str = berth_domain::model::user::REPLICATION_ACTOR;

/// How many times a repository's task is tried (a destination outage fails
/// it with the reason; the retries come after the jobs' backoff).
const ATTEMPTS: i64 = 3;

/// How many events one hand-off takes.
const HAND_OFF: i64 = 500;

/// The project a pulled repository without one lands in.
const DEFAULT_PROJECT: &str = "library";

fn not_found(id: i64) -> ApiError {
    ApiError::not_found(format!("policy {id} not found"))
}

/// Checks `policy` as Harbor does, and that its registry and its schedule
/// are good; the schedule it asks for.
async fn check(state: &AppState, policy: &Policy) -> Result<Option<NewSchedule>, ApiError> {
    policy.validate()?;
    let remote = policy.remote();
    let Some(registry) = state.store.registries().get(remote).await? else {
        return Err(ApiError::bad_request(format!(
            "registry {remote} not found"
        )));
    };
    if policy.push_based()
        && RegistryType::parse(&registry.settings.kind) == Some(RegistryType::DockerHub)
    {
        return Err(ApiError::bad_request(
            "a docker-hub registry can only be the source of a replication",
        ));
    }
    let Some(cron) = policy.cron() else {
        return Ok(None);
    };
    let invalid =
        || ApiError::bad_request(format!("invalid cron string for scheduled trigger: {cron}"));
    let parsed = Cron::schedule(cron).map_err(|_| invalid())?;
    if parsed
        .next_after(::time::OffsetDateTime::now_utc())
        .is_none()
    {
        return Err(invalid());
    }
    Ok(Some(NewSchedule {
        vendor_type: REPLICATION.into(),
        vendor_id: policy.id,
        schedule_type: "Custom".into(),
        cron: parsed,
        cron_text: cron.to_string(),
        parameters: json!({}),
    }))
}

/// Sets or removes policy `id`'s schedule: only an enabled scheduled policy has one.
async fn apply_schedule(
    state: &AppState,
    id: i64,
    enabled: bool,
    schedule: Option<NewSchedule>,
) -> Result<(), ApiError> {
    let jobs = state.store.jobs();
    match schedule.filter(|_| enabled) {
        Some(mut schedule) => {
            schedule.vendor_id = id;
            jobs.set_schedule(&schedule).await?;
        }
        None => {
            jobs.delete_schedule(REPLICATION, id).await?;
        }
    }
    Ok(())
}

/// Creates `policy` (administrators only); its id.
pub async fn create(
    state: &AppState,
    principal: &Principal,
    mut policy: Policy,
) -> Result<i64, ApiError> {
    principal.require_system(SystemResource::ReplicationPolicy, Action::Create)?;
    let schedule = check(state, &policy).await?;
    policy.creator = principal.audit_name().to_string();
    let id = state.store.replication().create(&policy).await?;
    apply_schedule(state, id, policy.enabled, schedule).await?;
    Ok(id)
}

/// Replaces policy `id` with `policy` (administrators only).
pub async fn update(
    state: &AppState,
    principal: &Principal,
    id: i64,
    policy: Policy,
) -> Result<(), ApiError> {
    principal.require_system(SystemResource::ReplicationPolicy, Action::Update)?;
    if state.store.replication().get(id).await?.is_none() {
        return Err(not_found(id));
    }
    let schedule = check(state, &policy).await?;
    if !state.store.replication().update(id, &policy).await? {
        return Err(not_found(id));
    }
    apply_schedule(state, id, policy.enabled, schedule).await
}

/// Deletes policy `id` with its runs (administrators only); 412 while a run goes on.
pub async fn delete(state: &AppState, principal: &Principal, id: i64) -> Result<(), ApiError> {
    principal.require_system(SystemResource::ReplicationPolicy, Action::Delete)?;
    if !state.store.replication().delete(id).await? {
        return Err(not_found(id));
    }
    Ok(())
}

/// Policy `id` (administrators only).
pub async fn get(state: &AppState, principal: &Principal, id: i64) -> Result<Policy, ApiError> {
    principal.require_system(SystemResource::ReplicationPolicy, Action::Read)?;
    state
        .store
        .replication()
        .get(id)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Policy `id`, for a run the caller starts (replication `create`, as
/// Harbor's startReplication asks: reading the policy is not needed).
pub async fn get_to_start(
    state: &AppState,
    principal: &Principal,
    id: i64,
) -> Result<Policy, ApiError> {
    principal.require_system(SystemResource::Replication, Action::Create)?;
    state
        .store
        .replication()
        .get(id)
        .await?
        .ok_or_else(|| not_found(id))
}

/// What a run's planning task gets.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Plan {
    policy_id: i64,
    /// The one artifact an event-based run is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    event: Option<Happened>,
}

/// A push or a delete an event-based run replicates.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Happened {
    deletion: bool,
    repository: String,
    /// The tag (or the digest when pushed by digest, or deleted).
    reference: String,
    digest: String,
}

/// Copy or delete.
const COPY: &str = "copy";
const DELETION: &str = "deletion";

/// What one repository's task does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Work {
    /// [`COPY`] or [`DELETION`].
    pub operation: String,
    /// `image` (Harbor's resource type of artifacts).
    pub resource_type: String,
    /// The repository where the artifacts are.
    pub repository: String,
    /// Where they go.
    pub destination: String,
    /// Tags, or digests for untagged artifacts (and deletions).
    pub references: Vec<String>,
}

impl Work {
    /// Checks the names the task would use, as a client's push and Harbor's
    /// project creation check them: the repository at the source and the
    /// one it lands in (the OCI name grammar; a destination is
    /// `<project>/<repository>`, and its project, when it `lands_here`, a
    /// valid project name), and each reference (a tag, or a digest). Why
    /// not, when one fails.
    pub fn check(&self, lands_here: bool) -> Result<(), String> {
        if !is_valid_name(&self.repository) {
            return Err(format!(
                "the repository name {:?} is not a valid repository name: nothing was replicated",
                self.repository
            ));
        }
        let project = project_of(&self.destination);
        if !is_valid_name(&self.destination) || !self.destination.contains('/') {
            return Err(format!(
                "the destination {:?} is not a valid <project>/<repository> name: nothing was replicated",
                self.destination
            ));
        }
        if lands_here && let Err(why) = validate_project_name(project) {
            return Err(format!(
                "the destination project {project:?} is not a valid project name ({why}): nothing was replicated"
            ));
        }
        for reference in &self.references {
            let valid = match Reference::parse(reference) {
                Ok(Reference::Tag(_)) => self.operation == COPY,
                Ok(Reference::Digest(_)) => true,
                Err(_) => false,
            };
            if !valid {
                return Err(format!(
                    "{}: {reference:?} is not a valid {}: nothing was replicated",
                    self.repository,
                    if self.operation == COPY {
                        "tag or digest"
                    } else {
                        "digest"
                    }
                ));
            }
        }
        Ok(())
    }

    /// Harbor's `repo:[ref,ref]` names of the task's source and destination.
    pub fn resources(&self) -> (String, String) {
        let refs = self.references.join(",");
        (
            format!("{}:[{refs}]", self.repository),
            format!("{}:[{refs}]", self.destination),
        )
    }
}

fn plan_task(plan: &Plan) -> NewTask {
    NewTask {
        parameters: json!({"plan": plan}),
        max_attempts: 1,
        sequence_key: None,
    }
}

/// Starts a run of `policy` (`MANUAL`, `SCHEDULE` or `EVENT`); its execution id.
/// A disabled policy does not run; with `single_active_replication`, nor
/// does one whose previous run has not ended.
pub async fn start(state: &AppState, policy: &Policy, trigger: &str) -> Result<i64, ApiError> {
    if !policy.enabled {
        return Err(berth_domain::DomainError::Precondition(format!(
            "the policy {} is disabled",
            policy.id
        ))
        .into());
    }
    if policy.single_active_replication && state.store.replication().active(policy.id).await? {
        return Err(berth_domain::DomainError::Precondition(format!(
            "the policy {} has a run that has not ended",
            policy.id
        ))
        .into());
    }
    let plan = Plan {
        policy_id: policy.id,
        event: None,
    };
    let new = NewExecution {
        vendor_type: REPLICATION.into(),
        vendor_id: policy.id,
        trigger: trigger.into(),
        extra_attrs: json!({}),
    };
    Ok(state.store.jobs().create(&new, &[plan_task(&plan)]).await?)
}

/// The tasks a run its schedule starts begins with: its planning task.
pub fn tasks_of(schedule: &Schedule) -> Vec<NewTask> {
    vec![plan_task(&Plan {
        policy_id: schedule.vendor_id,
        event: None,
    })]
}

/// The push or delete `event` tells of, for event-based runs.
fn happened(event: &Event) -> Option<Happened> {
    let deletion = match event.kind.as_str() {
        events::ARTIFACT_PUSHED => false,
        events::ARTIFACT_DELETED => true,
        _ => return None,
    };
    if let Some((repository, digest)) = event.resource.split_once('@') {
        return Some(Happened {
            deletion,
            repository: repository.into(),
            reference: digest.into(),
            digest: digest.into(),
        });
    }
    let (repository, tag) = event.resource.rsplit_once(':')?;
    Some(Happened {
        deletion,
        repository: repository.into(),
        reference: tag.into(),
        digest: event.digest.clone().unwrap_or_default(),
    })
}

/// The runs `events` start with the enabled event-based `policies`: one per
/// push-based policy whose filters keep the artifact (a delete only for a
/// policy that replicates deletions). Pushes made by replication itself
/// start nothing (no loops between two registries).
fn plan_events(events: &[Event], policies: &[Policy]) -> Vec<(NewExecution, Vec<NewTask>)> {
    let mut planned = Vec::new();
    for event in events {
        if event.actor == REPLICATOR {
            continue;
        }
        let Some(happened) = happened(event) else {
            continue;
        };
        for policy in policies.iter().filter(|p| {
            p.push_based()
                && p.creation_time <= event.occurred_at
                && p.keeps_repository(&happened.repository)
                && if happened.deletion {
                    p.replicate_deletion
                } else {
                    keeps_pushed(p, &happened)
                }
        }) {
            let plan = Plan {
                policy_id: policy.id,
                event: Some(happened.clone()),
            };
            planned.push((
                NewExecution {
                    vendor_type: REPLICATION.into(),
                    vendor_id: policy.id,
                    trigger: "EVENT".into(),
                    extra_attrs: json!({}),
                },
                vec![plan_task(&plan)],
            ));
        }
    }
    planned
}

/// Whether `policy`'s tag and label filters keep the artifact a push
/// stored (a new artifact has no labels yet).
fn keeps_pushed(policy: &Policy, happened: &Happened) -> bool {
    let kept = if happened.reference != happened.digest {
        !policy
            .keeps_tags(std::slice::from_ref(&happened.reference))
            .is_empty()
    } else {
        policy.keeps_untagged()
    };
    kept && policy.keeps_labels(&[])
}

/// Hands every pending event over to the event-based policies.
pub async fn hand_off(state: &AppState) -> Result<(), berth_store::StoreError> {
    loop {
        let taken = state
            .store
            .replication()
            .hand_off(HAND_OFF, plan_events)
            .await?;
        if taken < usize::try_from(HAND_OFF).unwrap_or(usize::MAX) {
            return Ok(());
        }
    }
}

/// Runs `task` of a replication run here and now: plans the run, or copies
/// (or deletes) one repository's artifacts. What it did, for the task's record.
pub async fn run_task(state: &AppState, task: &Task) -> Result<Value, String> {
    let parameters: Value = serde_json::from_str(&task.parameters).map_err(|e| e.to_string())?;
    let jobs = state.store.jobs();
    let execution = jobs
        .execution(task.execution_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the run is gone")?;
    let policy = state
        .store
        .replication()
        .get(execution.vendor_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("policy {} is gone", execution.vendor_id))?;
    if let Some(plan) = parameters.get("plan") {
        let plan: Plan = serde_json::from_value(plan.clone()).map_err(|e| e.to_string())?;
        return plan_run(state, task, &policy, plan).await;
    }
    let work: Work =
        serde_json::from_value(parameters["work"].clone()).map_err(|e| e.to_string())?;
    work.check(!policy.push_based())?;
    if !policy.push_based() && work.operation == COPY {
        refuse_in_read_only(state).await?;
    }
    let other = Other::of(state, &policy).await?;
    let jobs = &jobs;
    let log = |line: String| async move {
        let _ = jobs.log(task.id, &line).await;
    };
    let pace = Pace {
        bytes_per_second: u64::try_from(policy.speed)
            .ok()
            .filter(|&kb| kb > 0)
            .map(|kb| kb * 1024),
    };
    let mut transfer = Transfer {
        state,
        remote: &other.remote,
        pace,
        copied: Copied::default(),
    };
    let mut skipped = 0;
    if work.operation == DELETION {
        for digest in &work.references {
            let deleted = other
                .remote
                .delete_manifest(&work.destination, digest)
                .await
                .map_err(|e| e.to_string())?;
            log(format!(
                "{}@{digest}: {}",
                work.destination,
                if deleted { "deleted" } else { "not there" }
            ))
            .await;
        }
        return Ok(json!({"deleted": work.references.len()}));
    }
    if policy.push_based() {
        if other.harbor {
            let project = project_of(&work.destination);
            other
                .remote
                .ensure_harbor_project(project)
                .await
                .map_err(|e| e.to_string())?;
        }
        for reference in &work.references {
            let before = transfer.copied.clone();
            let landed = transfer
                .push_manifest(
                    &work.repository,
                    reference,
                    &work.destination,
                    0,
                    policy.overwrite,
                )
                .await?;
            skipped += log_landed(&work, reference, &landed, &before, &transfer.copied, log).await;
        }
    } else {
        let project = ensure_local_project(state, project_of(&work.destination)).await?;
        for reference in &work.references {
            let before = transfer.copied.clone();
            let landed = transfer
                .pull_manifest(
                    &work.repository,
                    reference,
                    &work.destination,
                    project,
                    policy.overwrite,
                    0,
                )
                .await?;
            skipped += log_landed(&work, reference, &landed, &before, &transfer.copied, log).await;
        }
    }
    let copied = transfer.copied;
    Ok(json!({
        "manifests": copied.manifests,
        "manifests_present": copied.manifests_present,
        "blobs": copied.blobs,
        "blobs_present": copied.blobs_present,
        "bytes": copied.bytes,
        "skipped": skipped,
    }))
}

/// Logs what became of `reference` of a task's `work` (`before` and `after`
/// are the task's tallies around it); 1 when it was skipped, else 0.
async fn log_landed<F: Future<Output = ()>>(
    work: &Work,
    reference: &str,
    landed: &Landed,
    before: &Copied,
    after: &Copied,
    log: impl Fn(String) -> F,
) -> usize {
    let to = &work.destination;
    let (line, skipped) = match landed {
        Landed::Copied(digest) => (
            format!(
                "{to}:{reference} ({digest}): {} manifests and {} blobs ({} bytes) sent, \
                 {} manifests and {} blobs already there",
                after.manifests - before.manifests,
                after.blobs - before.blobs,
                after.bytes - before.bytes,
                after.manifests_present - before.manifests_present,
                after.blobs_present - before.blobs_present,
            ),
            0,
        ),
        Landed::Kept(there) => (
            format!(
                "{to}:{reference}: the destination has {there}; not overwritten (override is off)"
            ),
            1,
        ),
        Landed::Gone => (
            format!(
                "{}:{reference}: no longer at the source, skipped",
                work.repository
            ),
            1,
        ),
    };
    log(line).await;
    skipped
}

/// The project part of a repository name.
fn project_of(repository: &str) -> &str {
    repository.split_once('/').map_or(repository, |(p, _)| p)
}

/// Fails a step that would write here while the registry is in read-only
/// mode (what a pull-based run does), saying so.
async fn refuse_in_read_only(state: &AppState) -> Result<(), String> {
    let config = state.configuration().await.map_err(|e| e.to_string())?;
    if config.flag("read_only") {
        return Err(
            "the registry is in read-only mode: a pull-based replication writes here, so nothing was pulled"
                .into(),
        );
    }
    Ok(())
}

/// The digest of `reference` of local `repository`, if it has one.
async fn local_digest(
    state: &AppState,
    repository: &str,
    reference: &str,
) -> Result<Option<String>, String> {
    let parsed = Reference::parse(reference)
        .map_err(|_| format!("{reference:?} is neither a tag nor a digest"))?;
    let lookup = state
        .store
        .registry()
        .manifest_lookup(project_of(repository), repository, &parsed)
        .await
        .map_err(|e| e.to_string())?;
    Ok(lookup
        .and_then(|l| l.manifest)
        .map(|m| m.digest.to_string()))
}

/// The other registry of a policy, as a client.
struct Other {
    remote: Remote,
    kind: RegistryType,
    /// A Harbor (or Berth): projects are made there as needed.
    harbor: bool,
}

impl Other {
    async fn of(state: &AppState, policy: &Policy) -> Result<Self, String> {
        let id = policy.remote();
        let registries = state.store.registries();
        let registry: Registry = registries
            .get(id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("registry {id} is gone"))?;
        let secret = registries
            .access_secret(id)
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        let kind =
            RegistryType::parse(&registry.settings.kind).unwrap_or(RegistryType::DockerRegistry);
        let settings = &registry.settings;
        let target = Target {
            base: kind.api_base(&settings.url),
            insecure: settings.insecure,
            ca_certificate: &settings.ca_certificate,
            credential: (!settings.access_key.is_empty())
                .then_some((settings.access_key.as_str(), secret.as_str())),
            deadlines: state.registry.proxy.settings().deadlines,
        };
        Ok(Self {
            remote: Remote::new(&target).map_err(|e| e.0)?,
            kind,
            harbor: kind == RegistryType::Harbor,
        })
    }
}

/// Plans a run: adds one task per repository the policy covers (for an
/// event, the one artifact's); what it planned.
async fn plan_run(
    state: &AppState,
    task: &Task,
    policy: &Policy,
    plan: Plan,
) -> Result<Value, String> {
    let jobs = state.store.jobs();
    let pulled = !policy.push_based();
    if pulled {
        refuse_in_read_only(state).await?;
    }
    let mut works = Vec::new();
    if let Some(happened) = plan.event {
        let destination = policy.destination(&happened.repository)?;
        if happened.deletion {
            if !happened.digest.is_empty() {
                works.push(Work {
                    operation: DELETION.into(),
                    resource_type: "image".into(),
                    repository: happened.repository,
                    destination,
                    references: vec![happened.digest],
                });
            }
        } else if keeps_pushed(policy, &happened) {
            works.push(Work {
                operation: COPY.into(),
                resource_type: "image".into(),
                repository: happened.repository,
                destination,
                references: vec![happened.reference],
            });
        }
    } else if policy.push_based() {
        works = local_works(state, policy).await?;
    } else {
        works = remote_works(state, policy).await?;
    }
    let tasks: Vec<NewTask> = works
        .iter()
        .map(|work| NewTask {
            parameters: json!({"work": work}),
            // A task whose names are not valid fails the same way every time.
            max_attempts: if work.check(pulled).is_ok() {
                ATTEMPTS
            } else {
                1
            },
            sequence_key: Some(format!("replication {} {}", policy.id, work.destination)),
        })
        .collect();
    for work in &works {
        let (from, to) = work.resources();
        let line = match work.check(pulled) {
            Ok(()) => format!("{} {from} to {to}", work.operation),
            Err(why) => format!("{} {from} to {to}: {why}", work.operation),
        };
        let _ = jobs.log(task.id, &line).await;
    }
    jobs.add_tasks(task.execution_id, &tasks)
        .await
        .map_err(|e| e.to_string())?;
    Ok(json!({"tasks": tasks.len()}))
}

/// This registry's repositories and artifacts a push-based policy covers.
async fn local_works(state: &AppState, policy: &Policy) -> Result<Vec<Work>, String> {
    let store = state.store.replication();
    let repositories = store.repositories().await.map_err(|e| e.to_string())?;
    let mut works = Vec::new();
    for (repository_id, name) in repositories {
        if !policy.keeps_repository(&name) {
            continue;
        }
        let candidates = state
            .store
            .retentions()
            .candidates(repository_id)
            .await
            .map_err(|e| e.to_string())?;
        let labels = if policy.has_label_filter() {
            store
                .labels_of(repository_id)
                .await
                .map_err(|e| e.to_string())?
        } else {
            HashMap::new()
        };
        let mut references = Vec::new();
        for candidate in candidates {
            let own = labels.get(&candidate.id).cloned().unwrap_or_default();
            if !policy.keeps_labels(&own) {
                continue;
            }
            if candidate.tags.is_empty() {
                if policy.keeps_untagged() {
                    references.push(candidate.digest);
                }
                continue;
            }
            references.extend(policy.keeps_tags(&candidate.tags).into_iter().cloned());
        }
        if references.is_empty() {
            continue;
        }
        works.push(Work {
            operation: COPY.into(),
            resource_type: "image".into(),
            destination: policy.destination(&name)?,
            repository: name,
            references,
        });
    }
    Ok(works)
}

/// Whether `pattern` names one repository (no pattern characters).
fn literal(pattern: &str) -> bool {
    !pattern.contains(['*', '?', '[', '{', '\\'])
}

/// The other registry's repositories and tags a pull-based policy covers:
/// a name filter without pattern characters names its repository (no
/// catalog needed: Docker Hub has none); otherwise the catalog is listed.
async fn remote_works(state: &AppState, policy: &Policy) -> Result<Vec<Work>, String> {
    let other = Other::of(state, policy).await?;
    let names: Vec<&str> = policy
        .filters
        .iter()
        .filter(|f| f.kind == model::FILTER_NAME)
        .filter_map(|f| f.value.as_str())
        .filter(|p| !p.is_empty())
        .collect();
    let repositories = match names.as_slice() {
        [one] if literal(one) => vec![other.kind.upstream_repository(one)],
        _ => other.remote.catalog().await.map_err(|e| e.to_string())?,
    };
    let mut works = Vec::new();
    for repository in repositories {
        if !policy.keeps_repository(&repository) {
            continue;
        }
        // A name that is not one is not asked about (it would go into a
        // URL): its task fails, saying why.
        let references: Vec<String> = if is_valid_name(&repository) {
            let tags = other
                .remote
                .tags(&repository)
                .await
                .map_err(|e| e.to_string())?;
            let references: Vec<String> = policy.keeps_tags(&tags).into_iter().cloned().collect();
            if references.is_empty() {
                continue;
            }
            references
        } else {
            Vec::new()
        };
        let mut destination = policy.destination(&repository)?;
        if !destination.contains('/') {
            destination = format!("{DEFAULT_PROJECT}/{destination}");
        }
        works.push(Work {
            operation: COPY.into(),
            resource_type: "image".into(),
            repository,
            destination,
            references,
        });
    }
    Ok(works)
}

/// The id of local project `name`, made (private, owned by the
/// administrator) when there is none, as a pull-based run needs it.
async fn ensure_local_project(state: &AppState, name: &str) -> Result<i64, String> {
    let projects = state.store.projects();
    let reference = ProjectRef::Name(name.to_string());
    if let Some(project) = projects.find(&reference).await.map_err(|e| e.to_string())? {
        return Ok(project.id);
    }
    let config = state
        .store
        .configurations()
        .load()
        .await
        .map_err(|e| e.to_string())?;
    let storage_limit = if config.flag("quota_per_project_enable") {
        config.int("storage_per_project")
    } else {
        -1
    };
    let new = NewProject {
        name: name.to_string(),
        owner_id: berth_domain::model::ADMIN_USER_ID,
        metadata: vec![("public".into(), "false".into())],
        storage_limit,
        registry_id: None,
    };
    match projects.create(&new, REPLICATOR).await {
        Ok(project) => {
            state.deliver_events();
            Ok(project.id)
        }
        Err(_) => projects
            .find(&reference)
            .await
            .map_err(|e| e.to_string())?
            .map(|p| p.id)
            .ok_or_else(|| format!("project {name} could not be made here")),
    }
}

impl Transfer<'_> {
    /// Pulls manifest `reference` of `repository` there into local `to` (of
    /// project `project_id`), with what it needs; its digest, or `None` when
    /// `to` has the tag with another digest and `overwrite` is off.
    async fn pull_manifest(
        &mut self,
        repository: &str,
        reference: &str,
        to: &str,
        project_id: i64,
        overwrite: bool,
        depth: usize,
    ) -> Result<Landed, String> {
        let (state, remote) = (self.state, self.remote);
        if depth > MAX_DEPTH {
            return Err(format!("{repository}:{reference}: indexes nest too deep"));
        }
        let parsed = Reference::parse(reference)
            .map_err(|_| format!("{reference:?} is neither a tag nor a digest"))?;
        let Some(fetched) = remote
            .manifest(repository, reference, crate::registry::MAX_MANIFEST_BYTES)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(Landed::Gone);
        };
        let digest = crate::registry::manifest_digest(&fetched.body, &parsed);
        if let Reference::Digest(given) = &parsed
            && *given != digest
        {
            return Err(format!(
                "{repository}@{given}: the manifest sent has digest {digest}"
            ));
        }
        let here = local_digest(state, to, reference).await?;
        if here.as_deref() == Some(digest.as_str()) {
            self.copied.manifests_present += 1;
            self.pull_accessories(repository, &digest, to, project_id, depth)
                .await?;
            return Ok(Landed::Copied(digest.to_string()));
        }
        if let Some(here) = here.filter(|_| !overwrite) {
            return Ok(Landed::Kept(here));
        }
        let manifest = Manifest::parse(&fetched.body, Some(&fetched.media_type))
            .map_err(|e| format!("{repository}@{digest}: {e}"))?;
        for child in manifest.children() {
            let child = child.digest.as_str();
            if Box::pin(self.pull_manifest(repository, child, to, project_id, true, depth + 1))
                .await?
                == Landed::Gone
            {
                return Err(format!(
                    "{repository}@{child}: a child of {digest} is not there"
                ));
            }
        }
        let pulls: Vec<_> = manifest
            .blob_dependencies()
            .into_iter()
            .map(|blob| self.pull_blob(repository, blob, to, project_id))
            .collect();
        let pulled: Vec<Option<u64>> = futures_util::stream::iter(pulls)
            .buffer_unordered(PARALLEL_BLOBS)
            .try_collect()
            .await?;
        self.count_blobs(&pulled);
        let tag = match parsed {
            Reference::Tag(tag) => Some(tag),
            Reference::Digest(_) => None,
        };
        let mut new = super::content::manifest_record(
            state,
            &manifest,
            project_id,
            to,
            &digest,
            &fetched.body,
            tag,
        )
        .await;
        new.pushed_by = Some(REPLICATOR.to_string());
        match super::content::put_manifest(state, &new)
            .await
            .map_err(|e| e.message)?
        {
            PutManifest::Stored(_) => {}
            PutManifest::MissingBlob(missing) | PutManifest::MissingChild(missing) => {
                return Err(format!("{to}@{digest}: {missing} did not arrive"));
            }
        }
        self.copied.manifests += 1;
        self.pull_accessories(repository, &digest, to, project_id, depth)
            .await?;
        Ok(Landed::Copied(digest.to_string()))
    }

    /// Pulls the accessories the registry there lists as referrers of
    /// `digest` (none from a registry without the referrers API).
    async fn pull_accessories(
        &mut self,
        repository: &str,
        digest: &Digest,
        to: &str,
        project_id: i64,
        depth: usize,
    ) -> Result<(), String> {
        let referrers = self
            .remote
            .referrers(repository, digest.as_str())
            .await
            .map_err(|e| e.to_string())?;
        for referrer in referrers {
            let referrer = referrer.as_str();
            Box::pin(self.pull_manifest(repository, referrer, to, project_id, true, depth + 1))
                .await?;
        }
        Ok(())
    }

    /// Pulls `blob` of `repository` there into local `to`, unless `to` has
    /// it: no more than the size its manifest declares is read, and the
    /// bytes must hash to its digest. Its size when fetched.
    async fn pull_blob(
        &self,
        repository: &str,
        blob: &Descriptor,
        to: &str,
        project_id: i64,
    ) -> Result<Option<u64>, String> {
        let (state, remote, pace) = (self.state, self.remote, self.pace);
        let digest = &blob.digest;
        let declared = u64::try_from(blob.size)
            .map_err(|_| format!("{repository}@{digest}: a negative size in its manifest"))?;
        let registry = state.store.registry();
        if registry
            .repository_blob(to, digest.as_str())
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Ok(None);
        }
        let stream = remote
            .blob(repository, digest.as_str(), declared)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{repository}@{digest}: the blob is not there"))?;
        if let Some(length) = stream.length.filter(|&length| length > declared) {
            return Err(format!(
                "{repository}@{digest}: the source announces {length} bytes of a blob its manifest declares as {declared}"
            ));
        }
        let counted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = counted.clone();
        let body = crate::registry::throttled(
            stream.body.inspect_ok(move |bytes| {
                counter.fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
            }),
            pace.bytes_per_second,
        );
        state
            .store
            .content(&state.registry.blobs)
            .put(project_id, to, digest, body)
            .await
            .map_err(|e| format!("{digest}: {e}"))?;
        Ok(Some(counted.load(std::sync::atomic::Ordering::Relaxed)))
    }
}
