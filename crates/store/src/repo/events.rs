//! Domain events: the outbox (`events`) a change writes its event to in its
//! own transaction, and the deliveries each subscriber has still to receive
//! (`event_deliveries`, one per subscriber of `event_subscribers`, made by a
//! trigger; migration 0020).
//!
//! A subscriber's dispatcher takes its deliveries oldest first, handles them
//! and removes them; an event goes once nothing is left to deliver. On
//! PostgreSQL the deliveries taken are locked with `SKIP LOCKED`, so two
//! instances never take the same one; on SQLite one process writes.

use berth_domain::time;

use crate::Store;
use crate::db::Locking;
use crate::error::StoreResult;
use crate::repo::audit_logs::{self, NewAuditLog};
use crate::repo::jobs::{NewExecution, NewTask};
use crate::repo::registry::placeholders;

/// The audit log's name among the subscribers.
pub const AUDIT: &str = "audit";
/// The webhooks' name among the subscribers (migration 0024).
pub const WEBHOOK: &str = "webhook";
/// Event-based replication's name among the subscribers (migration 0025).
pub const REPLICATION: &str = "replication";

/// An artifact was pushed (its manifest stored by a client's PUT).
pub const ARTIFACT_PUSHED: &str = "artifact.pushed";
/// An artifact was deleted, with its tags and accessories (`repo@digest`;
/// the detail is the first tag it had, if any).
pub const ARTIFACT_DELETED: &str = "artifact.deleted";
/// A tag was deleted (`repo:tag`).
pub const TAG_DELETED: &str = "tag.deleted";
/// A repository was deleted with everything in it (`project/repo`).
pub const REPOSITORY_DELETED: &str = "repository.deleted";
/// A project was created (its name).
pub const PROJECT_CREATED: &str = "project.created";
/// A project was deleted (its name).
pub const PROJECT_DELETED: &str = "project.deleted";
/// A member was added to a project (`<project>/members/<id>`).
pub const MEMBER_ADDED: &str = "member.added";
/// A member's role changed.
pub const MEMBER_CHANGED: &str = "member.changed";
/// A member was removed.
pub const MEMBER_REMOVED: &str = "member.removed";
/// A robot account was created (its full name, `robot$...`).
pub const ROBOT_CREATED: &str = "robot.created";
/// A robot account was changed.
pub const ROBOT_UPDATED: &str = "robot.updated";
/// A robot account was deleted.
pub const ROBOT_DELETED: &str = "robot.deleted";
/// System configuration items changed (their names, comma-separated).
pub const CONFIGURATION_CHANGED: &str = "configuration.changed";
/// A registry endpoint was created (its name).
pub const REGISTRY_CREATED: &str = "registry.created";
/// A registry endpoint was changed.
pub const REGISTRY_UPDATED: &str = "registry.updated";
/// A registry endpoint was deleted.
pub const REGISTRY_DELETED: &str = "registry.deleted";
/// An artifact was pulled (`repo:tag` or `repo@digest`, with its digest):
/// written only for projects whose webhooks ask for pulls, a second after
/// the pull, by [`Events::record`] (pulls are audited on their own).
pub const ARTIFACT_PULLED: &str = "artifact.pulled";
/// A tag retention run that deleted something ended (its execution's id;
/// not for dry runs): what webhooks announce as `TAG_RETENTION`.
pub const RETENTION_FINISHED: &str = "retention.finished";
/// A replication task ended (its resource the task's id, its detail the
/// task's status), in the project of the side that is this registry.
pub const REPLICATION_FINISHED: &str = "replication.finished";
/// A push was refused for the project's storage quota (`repo:tag` or
/// `repo@digest`; the details say by how much): written on its own, as the
/// push's transaction rolled back.
pub const QUOTA_EXCEEDED: &str = "quota.exceeded";
/// A push took the project's usage past the warning threshold of its quota.
pub const QUOTA_WARNED: &str = "quota.warned";

/// A change to announce, as the change's transaction writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// What happened: [`ARTIFACT_PUSHED`], ...
    pub kind: &'static str,
    /// The project it happened in, if any.
    pub project_id: Option<i64>,
    /// What changed, by name (`library/app:v1`, `library/app@sha256:...`).
    pub resource: String,
    /// Who changed it.
    pub actor: String,
    /// The digest of the artifact it is about (a push's), if any.
    pub digest: Option<String>,
    /// What else its announcement says (a quota event's details).
    pub detail: Option<String>,
}

/// A stored event.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Event {
    /// Its place in the order of events.
    pub id: i64,
    /// What happened.
    pub kind: String,
    /// The project it happened in, if any.
    pub project_id: Option<i64>,
    /// What changed, by name.
    pub resource: String,
    /// Who changed it.
    pub actor: String,
    /// When (store timestamp).
    pub occurred_at: String,
    /// The digest of the artifact it is about (a push's), if any.
    pub digest: Option<String>,
    /// What else its announcement says.
    pub detail: Option<String>,
}

/// Access to events.
pub struct Events<'a>(&'a Store);

impl Store {
    /// The events repository.
    pub fn events(&self) -> Events<'_> {
        Events(self)
    }
}

/// Writes `event` on `conn`, inside the transaction of the change it tells of.
pub(crate) async fn record(conn: &mut sqlx::AnyConnection, event: &NewEvent) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO events (kind, project_id, resource, actor, occurred_at, digest, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(event.kind)
    .bind(event.project_id)
    .bind(&event.resource)
    .bind(&event.actor)
    .bind(time::now())
    .bind(&event.digest)
    .bind(&event.detail)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Records `events` inside the caller's transaction, one statement per 100.
pub(crate) async fn record_all(
    conn: &mut sqlx::AnyConnection,
    events: &[NewEvent],
) -> StoreResult<()> {
    let now = time::now();
    for chunk in events.chunks(100) {
        let values = (0..chunk.len())
            .map(|i| {
                format!(
                    "(${}, ${}, ${}, ${}, $1, ${}, ${})",
                    i * 6 + 2,
                    i * 6 + 3,
                    i * 6 + 4,
                    i * 6 + 5,
                    i * 6 + 6,
                    i * 6 + 7
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO events (kind, project_id, resource, actor, occurred_at, digest, detail) VALUES {values}"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(&now);
        for event in chunk {
            query = query
                .bind(event.kind)
                .bind(event.project_id)
                .bind(&event.resource)
                .bind(&event.actor)
                .bind(&event.digest)
                .bind(&event.detail);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Takes up to `limit` of `subscriber`'s pending events, oldest first, in
/// `tx` (on PostgreSQL locked with `SKIP LOCKED`: another instance takes others).
pub(crate) async fn take(
    store: &Store,
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    subscriber: &str,
    limit: i64,
) -> StoreResult<Vec<Event>> {
    let locking = match store.locking(Locking::Update) {
        "" => "",
        _ => " FOR UPDATE OF d SKIP LOCKED",
    };
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT e.id, e.kind, e.project_id, e.resource, e.actor, e.occurred_at, e.digest, e.detail \
         FROM event_deliveries d JOIN events e ON e.id = d.event_id \
         WHERE d.subscriber = $1 ORDER BY d.event_id LIMIT $2{locking}"
    )))
    .bind(subscriber)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?)
}

/// Removes `subscriber`'s deliveries of `events` in `tx`, and the events no
/// other subscriber has still to receive.
pub(crate) async fn delivered(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    subscriber: &str,
    events: &[Event],
) -> StoreResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let ids = placeholders(2, events.len());
    let delivered =
        format!("DELETE FROM event_deliveries WHERE subscriber = $1 AND event_id IN ({ids})");
    let mut query = sqlx::query(sqlx::AssertSqlSafe(delivered)).bind(subscriber);
    for event in events {
        query = query.bind(event.id);
    }
    query.execute(&mut **tx).await?;
    let done = format!(
        "DELETE FROM events WHERE id IN ({}) AND NOT EXISTS \
         (SELECT 1 FROM event_deliveries d WHERE d.event_id = events.id)",
        placeholders(1, events.len())
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(done));
    for event in events {
        query = query.bind(event.id);
    }
    query.execute(&mut **tx).await?;
    Ok(())
}

/// Begins a hand-off of up to `limit` of `subscriber`'s pending events to
/// job runs: the write transaction and the events it took, oldest first;
/// `None` when none was pending. The caller reads what the events may start
/// inside the transaction and ends it with [`finish_hand_off`].
pub(crate) async fn start_hand_off(
    store: &Store,
    subscriber: &str,
    limit: i64,
) -> StoreResult<Option<(sqlx::Transaction<'static, sqlx::Any>, Vec<Event>)>> {
    let mut tx = store.begin_write().await?;
    let taken = take(store, &mut tx, subscriber, limit).await?;
    if taken.is_empty() {
        tx.rollback().await?;
        return Ok(None);
    }
    Ok(Some((tx, taken)))
}

/// Ends a hand-off begun by [`start_hand_off`]: creates `runs` and marks
/// `taken` delivered to `subscriber`, in its transaction; how many events
/// were taken.
pub(crate) async fn finish_hand_off(
    mut tx: sqlx::Transaction<'static, sqlx::Any>,
    subscriber: &str,
    taken: &[Event],
    runs: Vec<(NewExecution, Vec<NewTask>)>,
) -> StoreResult<usize> {
    let now = time::now();
    for (execution, tasks) in runs {
        crate::repo::jobs::create_in(&mut tx, &execution, &tasks, &now).await?;
    }
    delivered(&mut tx, subscriber, taken).await?;
    tx.commit().await?;
    Ok(taken.len())
}

/// The [`ARTIFACT_DELETED`] event of artifact `digest` of `repository`,
/// which had `tag` first among its tags, if any (its detail: webhooks name it).
pub(crate) fn artifact_deleted(
    project_id: i64,
    repository: &str,
    digest: &str,
    tag: Option<&str>,
    by: &str,
) -> NewEvent {
    NewEvent {
        kind: ARTIFACT_DELETED,
        project_id: Some(project_id),
        resource: format!("{repository}@{digest}"),
        actor: by.to_string(),
        digest: Some(digest.to_string()),
        detail: tag.map(str::to_string),
    }
}

impl Events<'_> {
    /// Records `events` in a transaction of their own (what is not a change
    /// of the store's: pulls).
    pub async fn record(&self, events: &[NewEvent]) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut tx = self.0.begin_write().await?;
        record_all(&mut tx, events).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The audit log's deliveries: takes up to `limit` of its pending events,
    /// oldest first, writes the entries `entries` makes of them (those it
    /// keeps) and removes the deliveries, all in one transaction, so each
    /// event's entry is written exactly once. Returns the events handled.
    pub async fn deliver_to_audit(
        &self,
        limit: i64,
        entries: impl FnOnce(&[Event]) -> Vec<NewAuditLog>,
    ) -> StoreResult<Vec<Event>> {
        let mut tx = self.0.begin_write().await?;
        let events = take(self.0, &mut tx, AUDIT, limit).await?;
        if events.is_empty() {
            tx.rollback().await?;
            return Ok(events);
        }
        audit_logs::insert(&mut tx, self.0.backend(), &entries(&events)).await?;
        delivered(&mut tx, AUDIT, &events).await?;
        tx.commit().await?;
        Ok(events)
    }

    /// How many deliveries `subscriber` has still to receive.
    pub async fn pending(&self, subscriber: &str) -> StoreResult<i64> {
        let (count,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM event_deliveries WHERE subscriber = $1")
                .bind(subscriber)
                .fetch_one(&self.0.pool)
                .await?;
        Ok(count)
    }
}
