//! The audit log queue: operations are noted in memory and written in one
//! batch a moment later (and at a graceful stop), so a pull or push never
//! waits for its audit row.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_store::Store;
use berth_store::repo::audit_logs::NewAuditLog;

/// How long entries are gathered before one batched write.
const FLUSH_DELAY: Duration = Duration::from_secs(1);
/// How many entries are kept at most while the database does not take them.
const MAX_PENDING: usize = 100_000;

/// The name audit logs give a caller without credentials.
pub const ANONYMOUS: &str = "anonymous";

/// Entries not yet written.
#[derive(Debug, Default, Clone)]
pub struct AuditQueue {
    pending: Arc<Mutex<Vec<NewAuditLog>>>,
    /// Whether a write is scheduled.
    scheduled: Arc<AtomicBool>,
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
    pub fn record(&self, store: &Store, event: Event<'_>) {
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
            pending.push(entry);
        }
        if !self.scheduled.swap(true, Ordering::AcqRel)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let store = store.clone();
            let queue = self.clone();
            runtime.spawn(async move {
                tokio::time::sleep(FLUSH_DELAY).await;
                queue.scheduled.store(false, Ordering::Release);
                queue.flush(&store).await;
            });
        }
    }

    /// Writes what is pending now (tests and shutdown); kept for the next
    /// try when the database refuses it.
    pub async fn flush(&self, store: &Store) {
        let batch: Vec<NewAuditLog> = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *pending)
        };
        if batch.is_empty() {
            return;
        }
        if let Err(err) = store.audit_logs().record(&batch).await {
            tracing::warn!(error = %err, entries = batch.len(), "writing audit logs failed");
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let room = MAX_PENDING.saturating_sub(pending.len());
            let mut kept: Vec<NewAuditLog> = batch.into_iter().take(room).collect();
            kept.append(&mut pending);
            *pending = kept;
        }
    }
}
