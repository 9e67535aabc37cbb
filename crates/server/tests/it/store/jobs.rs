//! Jobs: executions and the tasks workers take, each once at a time, under a
//! lease; retries, abandoned tasks, stops and logs.

use std::collections::HashSet;
use std::time::Duration;

use berth_domain::cron::Cron;
use berth_domain::query::Paging;
use berth_store::repo::jobs::{self, Lease, NewExecution, NewSchedule, NewTask, Outcome};
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
            sequence_key: None,
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
        assert_eq!(jobs.executions(GC, 0, Paging::default()).await.unwrap().1.len(), 1);
        assert_eq!(jobs.executions("RETENTION", 0, Paging::default()).await.unwrap(), (0, vec![]));

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

fn every_second(kind: &str) -> NewSchedule {
    NewSchedule {
        vendor_type: kind.into(),
        vendor_id: 0,
        schedule_type: "Custom".into(),
        cron: "* * * * * *".parse::<Cron>().unwrap(),
        cron_text: "* * * * * *".into(),
        parameters: json!({"delete_untagged": true}),
    }
}

backend_test!(
    /// A due schedule starts one execution per tick with its parameters,
    /// however many instances look at once; a paused job type's schedules
    /// move on without firing; a schedule is replaced and removed.
    async fn a_schedule_fires_once_per_tick_across_instances(app) {
        let jobs = app.store().jobs();
        let set = jobs.set_schedule(&every_second(GC)).await.unwrap().unwrap();
        assert_eq!((set.schedule_type.as_str(), set.cron.as_str()), ("Custom", "* * * * * *"));
        let due = berth_domain::time::parse_timestamp(&set.next_fire_at).unwrap();
        // Eight lookers at the same tick, as eight instances would be.
        let lookers = (0..8).map(|_| {
            let store = app.store().clone();
            tokio::spawn(async move { store.jobs().fire_due(due, |_| tasks(1, 1)).await.unwrap() })
        });
        let mut started = Vec::new();
        for looker in futures_util::future::join_all(lookers).await {
            started.extend(looker.unwrap());
        }
        assert_eq!(started.len(), 1, "{started:?}");
        let exec = jobs.execution(started[0]).await.unwrap().unwrap();
        assert_eq!((exec.trigger.as_str(), exec.extra_attrs.as_str()), ("SCHEDULE", r#"{"delete_untagged":true}"#));
        let moved = jobs.schedule(GC, 0).await.unwrap().unwrap();
        assert!(moved.next_fire_at > set.next_fire_at, "{} after {}", moved.next_fire_at, set.next_fire_at);
        assert_eq!(jobs.fire_due(due, |_| tasks(1, 1)).await.unwrap(), Vec::<i64>::new(), "that tick is gone");

        jobs.set_paused(jobs::SCHEDULER, true).await.unwrap();
        assert!(jobs.paused(jobs::SCHEDULER).await.unwrap());
        let next = berth_domain::time::parse_timestamp(&moved.next_fire_at).unwrap();
        assert_eq!(jobs.fire_due(next, |_| tasks(1, 1)).await.unwrap(), Vec::<i64>::new(), "paused");
        assert!(jobs.schedule(GC, 0).await.unwrap().unwrap().next_fire_at > moved.next_fire_at);
        jobs.set_paused(jobs::SCHEDULER, false).await.unwrap();
        assert!(!jobs.paused(jobs::SCHEDULER).await.unwrap());

        let daily = NewSchedule {
            schedule_type: "Daily".into(),
            cron: "0 0 0 * * *".parse().unwrap(),
            cron_text: "0 0 0 * * *".into(),
            ..every_second(GC)
        };
        let replaced = jobs.set_schedule(&daily).await.unwrap().unwrap();
        assert_eq!((replaced.id, replaced.cron.as_str()), (set.id, "0 0 0 * * *"));
        assert!(replaced.next_fire_at.ends_with("T00:00:00.000Z"), "{}", replaced.next_fire_at);
        assert_eq!(jobs.schedules().await.unwrap().len(), 1);
        assert!(jobs.delete_schedule(GC, 0).await.unwrap());
        assert!(!jobs.delete_schedule(GC, 0).await.unwrap());
        let never = NewSchedule {
            cron: "0 0 0 30 2 *".parse().unwrap(),
            ..every_second(GC)
        };
        assert_eq!(jobs.set_schedule(&never).await.unwrap(), None);
    }
);

backend_test!(
    /// Tasks of one sequence key run one after the other, in the order they
    /// were made: a later one waits while an earlier one runs or waits for
    /// its retry; tasks of other keys (or none) do not wait.
    async fn tasks_of_one_sequence_key_run_in_order(app) {
        let jobs = app.store().jobs();
        let keyed = |n: i64, key: Option<&str>| NewTask {
            parameters: json!({"n": n}),
            max_attempts: 3,
            sequence_key: key.map(str::to_string),
        };
        for (n, key) in [(1, Some("a")), (2, Some("a")), (3, Some("b")), (4, None)] {
            jobs.create(&execution(GC), &[keyed(n, key)]).await.unwrap();
        }
        let n_of = |task: &jobs::Task| serde_json::from_str::<serde_json::Value>(&task.parameters).unwrap()["n"].as_i64().unwrap();
        let first = jobs.claim("w", &[GC], LEASE).await.unwrap().unwrap();
        assert_eq!(n_of(&first), 1);
        let next = jobs.claim("w", &[GC], LEASE).await.unwrap().unwrap();
        assert_eq!(n_of(&next), 3, "a's second waits while its first runs");
        let next = jobs.claim("w", &[GC], LEASE).await.unwrap().unwrap();
        assert_eq!(n_of(&next), 4);
        assert_eq!(jobs.claim("w", &[GC], LEASE).await.unwrap(), None);
        // The first fails and waits for its retry: the second still waits.
        assert!(jobs.finish(first.id, "w", &Outcome::Failed("receiver down".into())).await.unwrap());
        app.execute_sql("UPDATE job_tasks SET run_after = '2000-01-01T00:00:00.000Z'").await;
        let again = jobs.claim("w", &[GC], LEASE).await.unwrap().unwrap();
        assert_eq!((n_of(&again), again.attempts), (1, 2), "the retry comes before the second");
        assert_eq!(jobs.claim("w", &[GC], LEASE).await.unwrap(), None);
        assert!(jobs.finish(again.id, "w", &Outcome::Success(json!({}))).await.unwrap());
        let second = jobs.claim("w", &[GC], LEASE).await.unwrap().unwrap();
        assert_eq!(n_of(&second), 2);
    }
);

backend_test!(
    /// Old executions go: each vendor keeps its newest ended ones; running
    /// or waiting ones and other vendors' stay.
    async fn old_executions_are_swept_per_vendor(app) {
        let jobs = app.store().jobs();
        let of = |vendor_id: i64| NewExecution { vendor_id, ..execution("RETENTION") };
        let mut ended = Vec::new();
        for _ in 0..4 {
            ended.push(jobs.create(&of(7), &[]).await.unwrap());
        }
        let waiting = jobs.create(&of(7), &tasks(1, 1)).await.unwrap();
        let other = jobs.create(&of(8), &[]).await.unwrap();
        let gc = jobs.create(&execution(GC), &[]).await.unwrap();
        assert_eq!(jobs.sweep(&["RETENTION"], 2).await.unwrap(), 2);
        for (id, kept) in [(ended[0], false), (ended[1], false), (ended[2], true), (ended[3], true), (waiting, true), (other, true), (gc, true)] {
            assert_eq!(jobs.execution(id).await.unwrap().is_some(), kept, "execution {id}");
        }
        assert_eq!(jobs.sweep(&["RETENTION"], 2).await.unwrap(), 0);
    }
);

/// A webhook delivery of policy `vendor_id`: an execution of one task.
async fn delivery(jobs: &jobs::Jobs<'_>, vendor_id: i64) -> i64 {
    let new = NewExecution {
        vendor_id,
        ..execution("WEBHOOK")
    };
    let id = jobs.create(&new, &tasks(1, 3)).await.unwrap();
    jobs.tasks(id).await.unwrap()[0].id
}

backend_test!(
    /// Shared claims: a vendor (policy) with `share` tasks running is passed
    /// over, and a vendor with none running goes before older tasks of a
    /// vendor that has some; a share of 1 takes only vendors with none.
    async fn a_vendor_holds_at_most_its_share_and_newcomers_go_first(app) {
        let jobs = app.store().jobs();
        let mut slow = Vec::new();
        for _ in 0..4 {
            slow.push(delivery(&jobs, 1).await);
        }
        let other = delivery(&jobs, 2).await;
        let kinds = ["WEBHOOK"];
        let take = |share: i64| {
            let jobs = app.store().jobs();
            async move { jobs.claim_shared("w", &kinds, LEASE, share).await.unwrap().map(|t| t.id) }
        };
        assert_eq!(take(2).await, Some(slow[0]));
        assert_eq!(take(2).await, Some(other), "policy 2 has none running: before policy 1's older tasks");
        assert_eq!(take(1).await, None, "a share of 1: only policies with none running");
        assert_eq!(take(2).await, Some(slow[1]));
        assert_eq!(take(2).await, None, "policy 1 holds its share");
        assert!(jobs.finish(slow[0], "w", &Outcome::Success(json!({}))).await.unwrap());
        assert_eq!(take(2).await, Some(slow[2]), "a place of policy 1 is free again");
        // A running task whose lease ended counts for nothing, and is taken again.
        app.execute_sql("UPDATE job_tasks SET lease_until = '2000-01-01T00:00:00.000Z' WHERE status = 'Running'").await;
        let third = delivery(&jobs, 3).await;
        assert_eq!(take(2).await, Some(slow[1]), "nothing running anywhere: the oldest");
        assert_eq!(take(2).await, Some(other));
        assert_eq!(take(2).await, Some(third));
        assert_eq!(take(2).await, Some(slow[2]));
        assert_eq!(take(2).await, None, "policy 1 holds its share again");
        let unshared = jobs.claim("w", &kinds, LEASE).await.unwrap().map(|t| t.id);
        assert_eq!(unshared, Some(slow[3]), "an unshared claim takes any vendor's");
    }
);

backend_test!(
    /// Two instances (pools of their own), four claimers each, sharing 60
    /// tasks of three vendors at a share of 2: every task is taken exactly
    /// once, and every execution ends.
    async fn racing_instances_share_out_each_task_once(app) {
        let second = app.second_instance().await;
        let mut executions = Vec::new();
        for n in 0..60 {
            let new = NewExecution { vendor_id: n % 3, ..execution("WEBHOOK") };
            executions.push(app.store().jobs().create(&new, &tasks(1, 1)).await.unwrap());
        }
        let stores = [app.store().clone(), second.store().clone()];
        let workers = (0..8).map(|w| {
            let store = stores[w % 2].clone();
            tokio::spawn(async move {
                let owner = format!("instance-{}-worker-{w}", w % 2);
                let mut taken = Vec::new();
                while let Some(task) = store.jobs().claim_shared(&owner, &["WEBHOOK"], LEASE, 2).await.unwrap() {
                    taken.push(task.id);
                    tokio::task::yield_now().await;
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
        assert_eq!((all.len(), distinct.len()), (60, 60), "{all:?}");
        for id in executions {
            assert_eq!(app.store().jobs().execution(id).await.unwrap().unwrap().status, jobs::SUCCESS);
        }
    }
);
