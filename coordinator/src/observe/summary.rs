//! The compact per-job run summary a node shows the fleet: policy, schedule, whether a run is
//! going, the next fire, the newest finished run (GSP-110, inventory §2.13), and the newest
//! instant it answered RUN for.
//!
//! The gossip manager piggybacks it on `/peer` and `GET /fleet` shows this node's own; both
//! come from [`RunSummaries`], so a node reports itself exactly as its peers see it. No
//! decision reads them, with one exception: catch-up on gossip ([`crate::catch_up`]) does not
//! offer an instant a peer says it ran.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::gossip::wire::{JobSummary, LastRun, MAX_RECENT_RUNS, RecentRun};
use crate::jobs::JobSet;
use crate::ledger::{Event, Ledger, RunStatus};
use crate::observe::next_fire::{NextFires, ScheduleCache};

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Builds summaries and knows when they went stale: a new job set, a run that started or
/// ended, or a next fire that passed.
#[derive(Debug, Default)]
pub struct RunSummaries {
    job_set_id: String,
    schedules: ScheduleCache,
    runs_generation: Option<u64>,
    next_change_ms: Option<i64>,
    next_fires: NextFires,
    jobs: Vec<JobSummary>,
}

impl RunSummaries {
    /// No summaries yet; the first [`Self::refresh`] builds them.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current summaries.
    pub fn jobs(&self) -> &[JobSummary] {
        &self.jobs
    }

    /// Rebuilds the summaries when something they show changed; returns whether it did.
    pub fn refresh(&mut self, set: &JobSet, ledger: &Ledger, now_ms: i64) -> bool {
        let id = set.id.to_string();
        let generation = ledger.runs_generation();
        let due = self.next_change_ms.is_some_and(|t| now_ms >= t);
        if id == self.job_set_id && self.runs_generation == Some(generation) && !due {
            return false;
        }
        self.job_set_id = id;
        let schedules = self.schedules.for_set(set);
        let mut next_change: Option<i64> = None;
        self.jobs = set
            .jobs
            .iter()
            .map(|(name, j)| {
                let schedule = schedules.get(name).and_then(Option::as_ref);
                let next = self
                    .next_fires
                    .next_after(&self.job_set_id, name, schedule, now_ms);
                if let Some(ms) = next {
                    next_change = Some(next_change.map_or(ms, |c| c.min(ms)));
                }
                let (running, last_run, last_run_scheduled_at_ms) = ledger.inspect(name, run_state);
                let recent_runs = match j.spec.expect {
                    Some(_) => recent_runs(ledger, &j.spec, now_ms),
                    None => Vec::new(),
                };
                JobSummary {
                    name: name.clone(),
                    cluster_policy: j.spec.cluster_policy.as_str().to_owned(),
                    schedule: j.spec.schedule.clone(),
                    running,
                    next_fire: next
                        .and_then(DateTime::<Utc>::from_timestamp_millis)
                        .map(rfc3339),
                    last_run,
                    last_run_scheduled_at_ms,
                    recent_runs,
                }
            })
            .collect();
        self.runs_generation = Some(generation);
        self.next_change_ms = next_change;
        true
    }
}

/// Whether a run is going, the newest finished run, and the newest instant that ran here (for
/// catch-up on gossip), from a job's records.
fn run_state(
    records: &std::collections::VecDeque<crate::ledger::Record>,
) -> (bool, Option<LastRun>, Option<i64>) {
    let status = RunStatus::of(records);
    let last = status.last_finished.and_then(|r| match &r.event {
        Event::Finished(end) => Some(LastRun {
            finished_at: DateTime::<Utc>::from_timestamp_millis(end.finished_at_ms)
                .map(rfc3339)
                .unwrap_or_default(),
            exit_code: end.exit_code,
            succeeded: end.succeeded(),
            duration_ms: end.duration_ms,
        }),
        _ => None,
    });
    (
        status.running,
        last,
        crate::ledger::ran::newest_run(records),
    )
}

/// This node's runs of the recent firings of a job with `expect:`, the newest
/// [`MAX_RECENT_RUNS`]: what the node that judges the job reads of this one.
fn recent_runs(ledger: &Ledger, spec: &cronstable_core::JobSpec, now_ms: i64) -> Vec<RecentRun> {
    let keep = spec.expectation_span().as_millis() as i64;
    let runs = ledger.inspect(&spec.name, |r| {
        crate::ledger::runs::runs_since(r, now_ms.saturating_sub(keep))
    });
    let skip = runs.len().saturating_sub(MAX_RECENT_RUNS);
    runs.into_iter()
        .skip(skip)
        .map(|r| RecentRun {
            scheduled_at_ms: r.scheduled_at_ms,
            attempt: r.run.attempt,
            started_at_ms: r.run.started_at_ms,
            ended_at_ms: r.run.ended.map(|e| e.at_ms),
            duration_ms: r.run.ended.map(|e| e.duration_ms),
            succeeded: r.run.ended.map(|e| e.succeeded),
        })
        .collect()
}

/// One summary as `GET /fleet` shows it (camelCase, like `GET /jobs`).
pub fn to_json(j: &JobSummary) -> Value {
    json!({
        "name": j.name,
        "clusterPolicy": j.cluster_policy,
        "schedule": j.schedule,
        "running": j.running,
        "nextFire": j.next_fire,
        "lastRun": j.last_run.as_ref().map(|r| json!({
            "finishedAt": r.finished_at,
            "exitCode": r.exit_code,
            "succeeded": r.succeeded,
            "durationMs": r.duration_ms,
        })),
        "lastRunScheduledAt": j
            .last_run_scheduled_at_ms
            .and_then(DateTime::<Utc>::from_timestamp_millis)
            .map(rfc3339),
    })
}
