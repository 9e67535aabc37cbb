//! Hands the store's domain events (`berth_store::repo::events`) to their
//! subscribers: the audit log ([`crate::audit::AuditQueue::deliver_events`])
//! the webhooks ([`crate::service::webhooks::hand_off`]) and event-based
//! replication ([`crate::service::replication::hand_off`]).
//!
//! A change's own transaction writes its event, so an acknowledged change
//! always has one, a crash right after it included. The dispatcher delivers
//! it at once when this instance made the change ([`AppState::deliver_events`]),
//! and a sweep every [`SWEEP`] delivers what other instances wrote or what a
//! crash left undelivered (the first sweep runs at start).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::state::AppState;

/// How often pending events are looked for, whoever wrote them.
pub const SWEEP: Duration = Duration::from_secs(2);
/// How long a delivery waits for more events to take with it: concurrent
/// pushes share one delivery (one write transaction) instead of one each.
/// As long as the audit queue waited before; at 200 ms, manifest PUTs on
/// SQLite lost about a tenth of their rate to the deliveries' transactions
/// (`scripts/bench puts`, interleaved with the build before events).
const GATHER: Duration = Duration::from_secs(1);

/// Whether a delivery is scheduled on this instance.
#[derive(Debug, Default, Clone)]
pub struct Dispatcher {
    scheduled: Arc<AtomicBool>,
}

impl AppState {
    /// Delivers the events written so far, soon and once: a call while a
    /// delivery is scheduled adds nothing.
    pub fn deliver_events(&self) {
        if self.events.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.events.scheduled.store(false, Ordering::Release);
            return;
        };
        let state = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(GATHER).await;
            // Taken before delivering: an event written during the delivery
            // schedules the next one.
            state.events.scheduled.store(false, Ordering::Release);
            deliver(&state).await;
        });
    }
}

/// Delivers every pending event to every subscriber (what the dispatcher
/// and the sweep run; tests call it to deliver at once).
pub async fn deliver(state: &AppState) {
    let config = match state.configuration().await {
        Ok(config) => config,
        Err(err) => {
            tracing::warn!(error = %err, "reading the configuration failed; events wait for the next try");
            return;
        }
    };
    if let Err(err) = state
        .audit_queue
        .deliver_events(&state.store, &config)
        .await
    {
        tracing::warn!(error = %err, "delivering events to the audit log failed; they wait for the next try");
    }
    let notifications = config.flag("notification_enable");
    if let Err(err) = crate::service::webhooks::hand_off(state, notifications).await {
        tracing::warn!(error = %err, "handing events to the webhooks failed; they wait for the next try");
    }
    if let Err(err) = crate::service::replication::hand_off(state).await {
        tracing::warn!(error = %err, "handing events to replication failed; they wait for the next try");
    }
    // The deliveries and runs just made start now, not at the lanes' next tick.
    crate::workers::wake();
}

/// Delivers pending events every [`SWEEP`], from now until the process ends.
pub async fn sweep(state: AppState) {
    let mut ticks = tokio::time::interval(SWEEP);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        deliver(&state).await;
    }
}
