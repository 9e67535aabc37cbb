//! The audit log queue: operations are noted in memory and written in one
//! batch a moment later (and at a graceful stop), so a pull or push never
//! waits for its audit row. The batch writer also applies the audit
//! configuration: entries of a disabled event type are dropped, copies go to
//! the forward endpoint ([`forward`]), and rows are skipped when
//! `skip_audit_log_database` says so.

mod forward;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_domain::model::Configuration;
use berth_store::Store;
use berth_store::repo::audit_logs::NewAuditLog;
use berth_store::repo::events::Event as StoredEvent;

use forward::syslog_line;

use crate::state::AppState;

/// How long entries are gathered before one batched write.
const FLUSH_DELAY: Duration = Duration::from_secs(1);
/// How many entries are kept at most while the database does not take them.
const MAX_PENDING: usize = 100_000;
/// How long a flush at a stop (or in a test) waits for its copies to be sent.
const FORWARD_WAIT: Duration = Duration::from_secs(5);

/// The name audit logs give a caller without credentials.
pub const ANONYMOUS: &str = "anonymous";

/// Entries not yet written.
#[derive(Debug, Default, Clone)]
pub struct AuditQueue {
    pending: Arc<Mutex<Vec<Queued>>>,
    /// Whether a write is scheduled.
    scheduled: Arc<AtomicBool>,
    /// Sends copies to `audit_log_forward_endpoint`.
    forwarder: Arc<forward::Forwarder>,
}

/// An entry waiting for its batch.
#[derive(Debug)]
struct Queued {
    entry: NewAuditLog,
    /// Its copy was sent already: it waits for its row only (the database
    /// refused the batch), and is not sent again.
    forwarded: bool,
}

/// What happened, to whom, by whom.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// The project, if the resource belongs to one.
    pub project_id: Option<i64>,
    /// `create`, `delete`, `pull`, `update`.
    pub operation: &'a str,
    /// `artifact`, `tag`, `project`, `project_member`, `configuration`.
    pub resource_type: &'a str,
    /// The resource's name.
    pub resource: &'a str,
    /// Who (see [`ANONYMOUS`]).
    pub username: &'a str,
}

impl AuditQueue {
    /// Notes `event` now; an entry with no write scheduled schedules one.
    pub fn record(&self, state: &AppState, event: Event<'_>) {
        let entry = NewAuditLog {
            project_id: event.project_id,
            operation: event.operation.to_string(),
            resource_type: event.resource_type.to_string(),
            resource: event.resource.to_string(),
            username: event.username.to_string(),
            op_time: berth_domain::time::now(),
        };
        {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if pending.len() >= MAX_PENDING {
                tracing::warn!("the audit log queue is full; an entry is dropped");
                return;
            }
            pending.push(Queued {
                entry,
                forwarded: false,
            });
        }
        if !self.scheduled.swap(true, Ordering::AcqRel)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let state = state.clone();
            let queue = self.clone();
            runtime.spawn(async move {
                tokio::time::sleep(FLUSH_DELAY).await;
                queue.scheduled.store(false, Ordering::Release);
                match state.configuration().await {
                    // Copies are sent on their own: nothing waits for them here.
                    Ok(config) => drop(queue.write(&state.store, &config).await),
                    Err(err) => unread_configuration(&err),
                }
            });
        }
    }

    /// Writes what is pending now (tests and shutdown), the domain events
    /// not yet delivered included, under the stored configuration, and waits
    /// a moment for its copies to be sent; kept for the next try when the
    /// database refuses it.
    pub async fn flush(&self, store: &Store) {
        match store.configurations().load().await {
            Ok(config) => {
                if let Err(err) = self.deliver_events(store, &config).await {
                    tracing::warn!(error = %err, "delivering events to the audit log failed");
                }
                if let Some(sent) = self.write(store, &config).await {
                    let _ = tokio::time::timeout(FORWARD_WAIT, sent).await;
                }
            }
            Err(err) => unread_configuration(&err),
        }
    }

    /// The audit log as a subscriber of the store's domain events
    /// (`berth_store::repo::events`): each pending event becomes its entry,
    /// written in the transaction that marks it delivered (so exactly once,
    /// whatever crashes), under the same rules as queued entries; copies go
    /// to the forward endpoint once written. Returns how many events it took.
    pub async fn deliver_events(
        &self,
        store: &Store,
        config: &Configuration,
    ) -> Result<usize, berth_store::StoreError> {
        // Events per transaction. SQLite's writes wait for each other: at 500
        // a transaction took 5-6 ms, six a second under tag retention's
        // deletes, and pushes meanwhile waited for them: their p99 5.8-6.9 ms
        // in four runs, 4.6-4.9 with 100, whose transactions take 1 ms
        // (`scripts/bench retention`; docs/benchmarks.md, fifth pass).
        const BATCH: usize = 100;
        let rules = Rules::from_configuration(config);
        let mut taken = 0;
        loop {
            let mut kept = Vec::new();
            let events = store
                .events()
                .deliver_to_audit(BATCH as i64, |events| {
                    kept = events
                        .iter()
                        .filter_map(entry_of)
                        .filter(|entry| rules.records(entry))
                        .collect();
                    if rules.skip_database {
                        Vec::new()
                    } else {
                        kept.clone()
                    }
                })
                .await?;
            if let Some(endpoint) = rules.endpoint.as_deref()
                && !kept.is_empty()
            {
                drop(
                    self.forwarder
                        .send(endpoint, kept.iter().map(syslog_line).collect()),
                );
            }
            taken += events.len();
            if events.len() < BATCH {
                return Ok(taken);
            }
        }
    }

    /// One batch under `config`: disabled event types dropped, copies handed
    /// to the forwarder, rows written unless skipped. Returns what resolves
    /// once the copies are sent.
    async fn write(
        &self,
        store: &Store,
        config: &Configuration,
    ) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let rules = Rules::from_configuration(config);
        let mut batch: Vec<Queued> = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *pending)
        };
        batch.retain(|queued| queued.forwarded || rules.records(&queued.entry));
        if batch.is_empty() {
            return None;
        }
        let sent = rules.endpoint.as_deref().and_then(|endpoint| {
            let lines = batch
                .iter_mut()
                .filter(|queued| !queued.forwarded)
                .map(|queued| {
                    queued.forwarded = true;
                    syslog_line(&queued.entry)
                })
                .collect();
            self.forwarder.send(endpoint, lines)
        });
        if !rules.skip_database {
            self.write_rows(store, batch).await;
        }
        sent
    }

    /// Stores `batch`; kept for the next try when the database refuses it.
    async fn write_rows(&self, store: &Store, batch: Vec<Queued>) {
        let (rows, forwarded): (Vec<NewAuditLog>, Vec<bool>) = batch
            .into_iter()
            .map(|queued| (queued.entry, queued.forwarded))
            .unzip();
        if let Err(err) = store.audit_logs().record(&rows).await {
            tracing::warn!(error = %err, entries = rows.len(), "writing audit logs failed");
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let room = MAX_PENDING.saturating_sub(pending.len());
            let mut kept: Vec<Queued> = rows
                .into_iter()
                .zip(forwarded)
                .take(room)
                .map(|(entry, forwarded)| Queued { entry, forwarded })
                .collect();
            kept.append(&mut pending);
            *pending = kept;
        }
    }
}

/// The domain events written to the audit log, as (event kind, operation,
/// resource type): the one list both the writer and
/// `GET /auditlog-exts/events` ([`event_types`]) read.
const AUDITED: &[(&str, &str, &str)] = {
    use berth_store::repo::events as e;
    &[
        (e::ARTIFACT_PUSHED, "create", "artifact"),
        (e::ARTIFACT_DELETED, "delete", "artifact"),
        (e::TAG_DELETED, "delete", "tag"),
        (e::REPOSITORY_DELETED, "delete", "repository"),
        (e::PROJECT_CREATED, "create", "project"),
        (e::PROJECT_DELETED, "delete", "project"),
        (e::MEMBER_ADDED, "create", "project_member"),
        (e::MEMBER_CHANGED, "update", "project_member"),
        (e::MEMBER_REMOVED, "delete", "project_member"),
        (e::ROBOT_CREATED, "create", "robot"),
        (e::ROBOT_UPDATED, "update", "robot"),
        (e::ROBOT_DELETED, "delete", "robot"),
        (e::CONFIGURATION_CHANGED, "update", "configuration"),
        (e::REGISTRY_CREATED, "create", "registry"),
        (e::REGISTRY_UPDATED, "update", "registry"),
        (e::REGISTRY_DELETED, "delete", "registry"),
    ]
};

/// Harbor's names (see [`event_type`]) of the event types Berth records:
/// those of [`AUDITED`] and pulls (noted through the queue), in that order.
pub fn event_types() -> Vec<String> {
    let mut types = vec![event_type("pull", "artifact")];
    types.extend(
        AUDITED
            .iter()
            .map(|(_, operation, resource_type)| event_type(operation, resource_type)),
    );
    types
}

/// The audit entry of a domain event; `None` for what is audited otherwise
/// (pulls, through the queue) or not at all.
fn entry_of(event: &StoredEvent) -> Option<NewAuditLog> {
    let (operation, resource_type) = match AUDITED.iter().find(|(kind, ..)| *kind == event.kind) {
        Some(&(_, operation, resource_type)) => (operation, resource_type),
        None => match event.kind.as_str() {
            berth_store::repo::events::ARTIFACT_PULLED
            | berth_store::repo::events::RETENTION_FINISHED
            | berth_store::repo::events::REPLICATION_FINISHED => return None,
            other => (other, "event"),
        },
    };
    Some(NewAuditLog {
        project_id: event.project_id,
        operation: operation.to_string(),
        resource_type: resource_type.to_string(),
        resource: event.resource.clone(),
        username: event.actor.clone(),
        op_time: event.occurred_at.clone(),
    })
}

/// A batch waits for the next entry when the configuration cannot be read.
fn unread_configuration(err: &berth_store::StoreError) {
    tracing::warn!(error = %err, "reading the configuration failed; audit logs wait for the next try");
}

/// What the configuration says about audit entries, read once per batch.
#[derive(Debug, Default)]
struct Rules {
    /// `audit_log_forward_endpoint`, when set.
    endpoint: Option<String>,
    /// `skip_audit_log_database`, which acts only with an endpoint: an entry
    /// always goes somewhere.
    skip_database: bool,
    /// `disabled_audit_log_event_types`, lowercased.
    disabled: HashSet<String>,
}

impl Rules {
    fn from_configuration(config: &Configuration) -> Self {
        let endpoint = config.string("audit_log_forward_endpoint").trim();
        let endpoint = (!endpoint.is_empty()).then(|| endpoint.to_string());
        Self {
            skip_database: endpoint.is_some() && config.flag("skip_audit_log_database"),
            endpoint,
            disabled: config
                .string("disabled_audit_log_event_types")
                .split(',')
                .map(|name| name.trim().to_ascii_lowercase())
                .filter(|name| !name.is_empty())
                .collect(),
        }
    }

    /// Whether `entry` is recorded at all: its event type is not disabled,
    /// named Harbor's way or Berth's (`create_member` or `create_project_member`).
    fn records(&self, entry: &NewAuditLog) -> bool {
        if self.disabled.is_empty() {
            return true;
        }
        let harbor = event_type(&entry.operation, &entry.resource_type).to_ascii_lowercase();
        let own = format!("{}_{}", entry.operation, entry.resource_type).to_ascii_lowercase();
        !self.disabled.contains(&harbor) && !self.disabled.contains(&own)
    }
}

/// Harbor's name of an entry's event type, what `disabled_audit_log_event_types`
/// lists: `<operation>_<resource type>` (`create_artifact`, `pull_artifact`,
/// `delete_project`, `update_configuration`, ...), with Harbor's `member` for
/// Berth's `project_member`.
pub fn event_type(operation: &str, resource_type: &str) -> String {
    let resource_type = match resource_type {
        "project_member" => "member",
        other => other,
    };
    format!("{operation}_{resource_type}")
}

/// What Harbor 2.13's entries say they did (`operation_description`), worded
/// as its event handlers word it: `create project: library`, `push artifact:
/// library/app:v1`, `update configuration with name: token_expiration`.
pub fn operation_description(operation: &str, resource_type: &str, resource: &str) -> String {
    match (operation, resource_type) {
        ("create", "artifact") => format!("push artifact: {resource}"),
        (operation, kind @ ("artifact" | "project" | "repository" | "tag" | "robot")) => {
            format!("{operation} {kind}: {resource}")
        }
        (operation, kind) => format!("{operation} {kind} with name: {resource}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_domain::model::ConfigValue;

    fn config(items: &[(&str, ConfigValue)]) -> Configuration {
        Configuration::from_stored(items.iter().map(|(k, v)| (k.to_string(), v.clone())))
    }

    fn entry(operation: &str, resource_type: &str) -> NewAuditLog {
        NewAuditLog {
            project_id: None,
            operation: operation.into(),
            resource_type: resource_type.into(),
            resource: "r".into(),
            username: "u".into(),
            op_time: berth_domain::time::now(),
        }
    }

    #[test]
    fn event_types_are_harbors_names_of_what_is_recorded() {
        let types = event_types();
        assert_eq!(
            types[..3],
            ["pull_artifact", "create_artifact", "delete_artifact"]
        );
        assert!(types.contains(&"create_member".to_string()), "{types:?}");
        assert!(
            types.contains(&"update_configuration".to_string()),
            "{types:?}"
        );
        let mut distinct = types.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), types.len(), "{types:?}");
    }

    #[test]
    fn event_types_are_harbors_names() {
        assert_eq!(event_type("create", "artifact"), "create_artifact");
        assert_eq!(event_type("pull", "artifact"), "pull_artifact");
        assert_eq!(
            event_type("update", "configuration"),
            "update_configuration"
        );
        assert_eq!(event_type("delete", "project_member"), "delete_member");
    }

    #[test]
    fn disabled_types_are_trimmed_case_blind_and_named_either_way() {
        let rules = Rules::from_configuration(&config(&[(
            "disabled_audit_log_event_types",
            ConfigValue::String(" Pull_Artifact ,create_project_member,, delete_member".into()),
        )]));
        assert!(!rules.records(&entry("pull", "artifact")));
        assert!(!rules.records(&entry("create", "project_member")));
        assert!(!rules.records(&entry("delete", "project_member")));
        assert!(rules.records(&entry("create", "artifact")));
        assert!(rules.records(&entry("update", "project_member")));
    }

    #[test]
    fn the_database_is_skipped_only_with_an_endpoint() {
        let skip = ("skip_audit_log_database", ConfigValue::Bool(true));
        let rules = Rules::from_configuration(&config(std::slice::from_ref(&skip)));
        assert_eq!((rules.endpoint, rules.skip_database), (None, false));
        let endpoint = (
            "audit_log_forward_endpoint",
            ConfigValue::String("h:514".into()),
        );
        let rules = Rules::from_configuration(&config(&[skip, endpoint]));
        assert_eq!(
            (rules.endpoint.as_deref(), rules.skip_database),
            (Some("h:514"), true)
        );
    }
}
