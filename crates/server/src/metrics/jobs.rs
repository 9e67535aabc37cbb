//! Harbor's job service figures: `harbor_jobservice_*`, counted in this
//! process as its workers start and its tasks end, and the exporter's
//! `harbor_task_*`, read from the job rows with the other database figures
//! (indexed aggregates, kept for [`super::EXPORTER_TTL`]).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use berth_store::repo::jobs::{ERROR, Outcome, STOPPED, SUCCESS, Task};
use prometheus_client::encoding::EncodeLabelSet;

use super::exporter::Text;
use crate::service::jobservice::Queue;

/// The labels of `harbor_jobservice_info`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InfoLabels {
    /// The host.
    pub node: String,
    /// The worker pool: this instance (`host:pid`), as the job service's pools name it.
    pub pool: String,
    /// How many workers its lanes have together.
    pub workers: String,
}

/// The labels of a finished task.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct TaskLabels {
    /// Harbor's job type (the vendor type).
    pub r#type: String,
    /// How the attempt ended: `Success`, `Error` or `Stopped`.
    pub status: &'static str,
}

/// The status label of an attempt that ended as `outcome` (Harbor's job
/// statuses; a failed attempt to be tried again is an `Error` too).
pub fn status_of(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Success(_) => SUCCESS,
        Outcome::Failed(_) => ERROR,
        Outcome::Stopped => STOPPED,
    }
}

/// `harbor_jobservice_task_process_time_seconds`: Harbor's summary, without
/// its quantiles (a sum and a count per type and status).
#[derive(Debug, Default)]
pub struct ProcessTimes(Mutex<BTreeMap<TaskLabels, (u64, f64)>>);

impl ProcessTimes {
    /// Notes an attempt that took `took`.
    pub fn observe(&self, labels: TaskLabels, took: Duration) {
        let mut times = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (count, sum) = times.entry(labels).or_default();
        *count += 1;
        *sum += took.as_secs_f64();
    }

    /// Appends the summary.
    pub fn render(&self, text: &mut Text<'_>) {
        const NAME: &str = "harbor_jobservice_task_process_time_seconds";
        text.family(
            NAME,
            "The time duration of the task processing time",
            "summary",
        );
        let times = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (labels, (count, sum)) in times.iter() {
            let labels = [("type", labels.r#type.as_str()), ("status", labels.status)];
            text.sample(&format!("{NAME}_sum"), &labels, sum);
            text.sample(&format!("{NAME}_count"), &labels, count);
        }
    }
}

/// What the job rows say at one reading.
#[derive(Debug)]
pub struct JobFigures {
    /// Every job type's queue.
    pub queues: Vec<Queue>,
    /// The tasks running now, on any instance.
    pub running: Vec<Task>,
    /// How many schedules there are.
    pub scheduled: i64,
}

/// Harbor's exporter's `harbor_task_*` families.
pub fn render(text: &mut Text<'_>, figures: &JobFigures) {
    text.family("harbor_task_queue_size", "Total number of tasks", "gauge");
    for queue in &figures.queues {
        text.sample(
            "harbor_task_queue_size",
            &[("type", &queue.job_type)],
            queue.count,
        );
    }
    text.family(
        "harbor_task_queue_latency",
        "how much time last task waited to run, in seconds",
        "gauge",
    );
    for queue in &figures.queues {
        text.sample(
            "harbor_task_queue_latency",
            &[("type", &queue.job_type)],
            queue.latency,
        );
    }
    text.family(
        "harbor_task_scheduled_total",
        "total number of scheduled job",
        "gauge",
    );
    text.sample("harbor_task_scheduled_total", &[], figures.scheduled);
    let mut running: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for task in &figures.running {
        let pool = task.owner.as_deref().unwrap_or_default();
        *running.entry((&task.vendor_type, pool)).or_default() += 1;
    }
    text.family(
        "harbor_task_concurrency",
        "Total number of concurrency on a pool",
        "gauge",
    );
    for ((kind, pool), count) in running {
        text.sample(
            "harbor_task_concurrency",
            &[("type", kind), ("pool", pool)],
            count,
        );
    }
}
