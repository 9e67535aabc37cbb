//! Jobs: executions and the tasks workers take, each once at a time, under a
//! lease; retries, abandoned tasks, stops and logs.

use std::collections::HashSet;
use std::time::Duration;

use berth_store::repo::jobs::{self, Lease, NewExecution, NewTask, Outcome};
use serde_json::json;

use crate::backend_test;

const GC: &str = "GARBAGE_COLLECTION";
const LEASE: Duration = Duration::from_secs(60);

fn execution(kind: &str) -> NewExecution {
    NewExecution {
        vendor_type: kind.into(),
        vendor_id: 0,
        trigger: "MANUAL".into(),
        extra_attrs: json!({"dry_run": false}),
    }
}

fn tasks(count: usize, max_attempts: i64) -> Vec<NewTask> {
    (0..count)
        .map(|i| NewTask {
            parameters: json!({"n": i}),
            max_attempts,
        })
        .collect()
}

backend_test!(
    /// Each task goes to one worker; the execution is running while a task
    /// is, and ends as its tasks did: a success, or an error with the reason
    /// of the task that failed its last attempt.
    async fn an_execution_follows_its_tasks(app) {
        let jobs = app.store().jobs();
        let id = jobs.create(&execution(GC), &tasks(2, 1)).await.unwrap();
        let exec = jobs.execution(id).await.unwrap().unwrap();
        assert_eq!((exec.status.as_str(), exec.trigger.as_str()), (jobs::PENDING, "MANUAL"));
        assert_eq!(jobs.claim("a", &["RETENTION"], LEASE).await.unwrap(), None, "another kind");
        let first = jobs.claim("a", &[GC], LEASE).await.unwrap().unwrap();
        let second = jobs.claim("b", &[GC], LEASE).await.unwrap().unwrap();
        assert_ne!(first.id, second.id);
        assert_eq!((first.attempts, first.owner.as_deref()), (1, Some("a")));
        assert_eq!(jobs.claim("c", &[GC], LEASE).await.unwrap(), None, "every task is taken");
        assert_eq!(jobs.execution(id).await.unwrap().unwrap().status, jobs::RUNNING);
        assert_eq!(jobs.renew(first.id, "a", LEASE).await.unwrap(), Lease::Held);
        assert_eq!(jobs.renew(first.id, "b", LEASE).await.unwrap(), Lease::Lost, "not b's");

        assert!(jobs.finish(first.id, "a", &Outcome::Success(json!({"freed": 10}))).await.unwrap());
        assert_eq!(jobs.execution(id).await.unwrap().unwrap().status, jobs::RUNNING);
        assert!(!jobs.finish(first.id, "a", &Outcome::Success(json!({}))).await.unwrap(), "ended already");
        assert!(jobs.finish(second.id, "b", &Outcome::Failed("disk on fire".into())).await.unwrap());
        let exec = jobs.execution(id).await.unwrap().unwrap();
        assert_eq!((exec.status.as_str(), exec.status_message.as_str()), (jobs::ERROR, "disk on fire"));
        assert!(exec.end_time.is_some());
        let listed = jobs.tasks(id).await.unwrap();
        let statuses: Vec<_> = listed.iter().map(|t| (t.status.as_str(), t.extra_attrs.as_str())).collect();
        assert_eq!(statuses, vec![(jobs::SUCCESS, r#"{"freed":10}"#), (jobs::ERROR, "{}")]);
        assert_eq!(jobs.executions(GC, 0, 10).await.unwrap().len(), 1);
        assert_eq!(jobs.executions("RETENTION", 0, 10).await.unwrap(), vec![]);

        let empty = jobs.create(&execution(GC), &[]).await.unwrap();
        assert_eq!(jobs.execution(empty).await.unwrap().unwrap().status, jobs::SUCCESS);
    }
);

backend_test!(
    /// A failed attempt waits before the next; a task whose worker stopped
    /// answering is taken again once its lease ends (the first worker can
    /// then neither renew nor finish it), and marked failed when that was its
    /// last attempt.
    async fn failed_and_abandoned_tasks_are_retried_then_failed(app) {
        let jobs = app.store().jobs();
        let id = jobs.create(&execution(GC), &tasks(1, 3)).await.unwrap();
        let task = jobs.claim("a", &[GC], LEASE).await.unwrap().unwrap();
        assert!(jobs.finish(task.id, "a", &Outcome::Failed("upstream down".into())).await.unwrap());
        let listed = jobs.tasks(id).await.unwrap();
        assert_eq!((listed[0].status.as_str(), listed[0].status_message.as_str()), (jobs::PENDING, "upstream down"));
        assert_eq!(jobs.claim("a", &[GC], LEASE).await.unwrap(), None, "backing off");

        // The backoff over (as the next attempt's time): a worker that dies.
        let other = jobs.create(&execution(GC), &tasks(1, 2)).await.unwrap();
        let dying = jobs.claim("a", &[GC], Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(dying.execution_id, other);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let again = jobs.claim("b", &[GC], Duration::ZERO).await.unwrap().unwrap();
        assert_eq!((again.id, again.attempts, again.owner.as_deref()), (dying.id, 2, Some("b")));
        assert_eq!(jobs.renew(dying.id, "a", LEASE).await.unwrap(), Lease::Lost);
        assert!(!jobs.finish(dying.id, "a", &Outcome::Success(json!({}))).await.unwrap());
        tokio::time::sleep(Duration::from_millis(5)).await;
        // b dies too, on the last attempt: the next look for work fails it.
        assert_eq!(jobs.claim("c", &[GC], LEASE).await.unwrap(), None);
        let exec = jobs.execution(other).await.unwrap().unwrap();
        assert_eq!(exec.status, jobs::ERROR);
        assert!(exec.status_message.contains("stopped answering"), "{}", exec.status_message);
    }
);

backend_test!(
    /// Stopping an execution stops its pending tasks at once and its running
    /// ones at their next renewal.
    async fn an_execution_stops_on_request(app) {
        let jobs = app.store().jobs();
        let id = jobs.create(&execution(GC), &tasks(2, 1)).await.unwrap();
        let running = jobs.claim("a", &[GC], LEASE).await.unwrap().unwrap();
        assert!(jobs.stop(id).await.unwrap());
        assert!(!jobs.stop(99_999).await.unwrap());
        assert_eq!(jobs.claim("b", &[GC], LEASE).await.unwrap(), None, "the pending task stopped");
        assert_eq!(jobs.execution(id).await.unwrap().unwrap().status, jobs::RUNNING);
        assert_eq!(jobs.renew(running.id, "a", LEASE).await.unwrap(), Lease::StopAsked);
        jobs.log(running.id, "stopping after 3 of 7 repositories").await.unwrap();
        assert!(jobs.finish(running.id, "a", &Outcome::Stopped).await.unwrap());
        let exec = jobs.execution(id).await.unwrap().unwrap();
        assert_eq!(exec.status, jobs::STOPPED);
        jobs.log(running.id, "second line").await.unwrap();
        let log = jobs.log_text(running.id).await.unwrap();
        let lines: Vec<_> = log.lines().map(|l| l.split_once(' ').unwrap().1).collect();
        assert_eq!(lines, vec!["stopping after 3 of 7 repositories", "second line"]);
    }
);

backend_test!(
    /// Workers racing for tasks take each exactly once.
    async fn racing_workers_take_each_task_once(app) {
        let id = app.store().jobs().create(&execution(GC), &tasks(40, 1)).await.unwrap();
        let workers = (0..8).map(|w| {
            let store = app.store().clone();
            tokio::spawn(async move {
                let owner = format!("worker-{w}");
                let mut taken = Vec::new();
                while let Some(task) = store.jobs().claim(&owner, &[GC], LEASE).await.unwrap() {
                    taken.push(task.id);
                    assert!(store.jobs().finish(task.id, &owner, &Outcome::Success(json!({}))).await.unwrap());
                }
                taken
            })
        });
        let mut all = Vec::new();
        for worker in futures_util::future::join_all(workers).await {
            all.extend(worker.unwrap());
        }
        let distinct: HashSet<_> = all.iter().collect();
        assert_eq!((all.len(), distinct.len()), (40, 40), "{all:?}");
        assert_eq!(app.store().jobs().execution(id).await.unwrap().unwrap().status, jobs::SUCCESS);
    }
);
