//! The JSON shapes of `GET /jobs`, `GET /jobs/{name}` and `/firings`, written straight into
//! the response by typed serialisers rather than through a `serde_json::Value` tree: with a
//! thousand jobs the tree's allocations were most of a rebuilt `/jobs`.
//!
//! Keys follow the seed's camelCase (`clusterPolicy`, `clusterOwner`, `nextFire`).

use chrono::{DateTime, SecondsFormat, Utc};
use cronstable_core::FiringKind;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use crate::jobs::RegisteredJob;
use crate::ledger::{Event, Record, RunStatus};

/// Unix ms as RFC 3339 in UTC, to the second.
pub(super) fn rfc3339(ms: i64) -> Option<String> {
    DateTime::<Utc>::from_timestamp_millis(ms).map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// Whether a record's output tail goes into its JSON: the detail view shows it, the list
/// leaves it out (a thousand tails would dominate the list's size and cost).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Output {
    Included,
    Omitted,
}

/// One ledger record: the common fields, then the event's own.
#[derive(Debug, Clone, Copy)]
pub(super) struct RecordJson<'a> {
    pub record: &'a Record,
    pub output: Output,
}

impl Serialize for RecordJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.record;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("scheduledAt", &rfc3339(r.scheduled_at_ms))?;
        m.serialize_entry("scheduledAtMs", &r.scheduled_at_ms)?;
        m.serialize_entry("kind", FiringKind::code(r.kind))?;
        m.serialize_entry("attempt", &r.attempt)?;
        m.serialize_entry("node", &r.node)?;
        m.serialize_entry("recordedAt", &rfc3339(r.recorded_at_ms))?;
        match &r.event {
            Event::Decided { verdict, reason } => {
                m.serialize_entry("event", "decided")?;
                m.serialize_entry("verdict", verdict.as_str())?;
                m.serialize_entry("reason", reason.code())?;
            }
            Event::Started { at_ms, pid } => {
                m.serialize_entry("event", "started")?;
                m.serialize_entry("startedAt", &rfc3339(*at_ms))?;
                m.serialize_entry("pid", pid)?;
            }
            Event::Finished(end) => {
                m.serialize_entry("event", "finished")?;
                m.serialize_entry("startedAt", &rfc3339(end.started_at_ms))?;
                m.serialize_entry("finishedAt", &rfc3339(end.finished_at_ms))?;
                m.serialize_entry("durationMs", &end.duration_ms)?;
                m.serialize_entry("exitCode", &end.exit_code)?;
                m.serialize_entry("signal", &end.signal)?;
                m.serialize_entry("timedOut", &end.timed_out)?;
                m.serialize_entry("succeeded", &end.succeeded())?;
                if self.output == Output::Included {
                    m.serialize_entry("outputTail", &end.output_tail)?;
                }
            }
            Event::Skipped { reason, message } => {
                m.serialize_entry("event", "skipped")?;
                m.serialize_entry("reason", reason.map_or("unknown", |r| r.code()))?;
                m.serialize_entry("message", message)?;
            }
            Event::HandedOff {
                remaining_attempts,
                transferred,
            } => {
                m.serialize_entry("event", "handed_off")?;
                m.serialize_entry("remainingAttempts", remaining_attempts)?;
                m.serialize_entry("transferred", transferred)?;
            }
        }
        m.end()
    }
}

/// A record with its output tail.
pub(super) fn record_json(record: &Record) -> serde_json::Value {
    serde_json::to_value(RecordJson {
        record,
        output: Output::Included,
    })
    .unwrap_or_default()
}

/// What the cluster adds to a job's row: its policy when election is on, its owner in spread
/// mode (inventory §8.2). `None` leaves the key out.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ClusterFields<'a> {
    pub policy: Option<&'static str>,
    /// `Some(None)` is an owner nobody holds (`"clusterOwner": null`).
    pub owner: Option<Option<&'a str>>,
}

/// A job's next fire as `GET /jobs` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NextFire {
    /// The next instant (Unix ms).
    At(i64),
    /// No instant by schedule: `@reboot`, or a schedule that could not be read.
    NotTimed,
    /// A schedule with no instant to come (`0 0 31 2 *`, or none before the year 5000).
    Never,
}

impl NextFire {
    /// From `schedule` and its next instant after now.
    pub(super) fn of(
        schedule: Option<&cronstable_core::schedule::Schedule>,
        next_ms: Option<i64>,
    ) -> Self {
        match (schedule, next_ms) {
            (_, Some(ms)) => Self::At(ms),
            (Some(s), None) if !s.is_reboot() => Self::Never,
            _ => Self::NotTimed,
        }
    }
}

/// One row of `GET /jobs`: the definition, the next fire and the run status.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JobRow<'a> {
    name: &'a str,
    schedule: &'a str,
    timezone: Option<&'a str>,
    command: &'a str,
    executor: &'a str,
    concurrency_policy: &'static str,
    retries: u32,
    next_fire: Option<String>,
    /// The schedule names no instant that can come (`0 0 31 2 *`): the dashboard says "never".
    never_fires: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_policy: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_owner: Option<Option<&'a str>>,
    running: bool,
    last_run: Option<RecordJson<'a>>,
    last_decision: Option<RecordJson<'a>>,
    /// The job's `expect:`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    expect: Option<ExpectJson>,
    /// The newest breaches of its expectation this node found, newest first (`GET /jobs`: the
    /// newest only; `GET /jobs/{name}`: all it keeps). Absent without any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    breaches: Vec<BreachJson>,
}

/// A job's `expect:` on `GET /jobs`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ExpectJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    complete_within_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_duration_ms: Option<u64>,
}

/// One breach of a job's expectation on `GET /jobs`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct BreachJson {
    breach: &'static str,
    scheduled_at: Option<String>,
    firing_id: String,
    found_at: Option<String>,
    why: String,
}

impl<'a> JobRow<'a> {
    /// The row of `job` (named `name`), with `status` from its records. The last run carries
    /// its output tail only with [`Output::Included`].
    pub(super) fn new(
        name: &'a str,
        job: &'a RegisteredJob,
        next_fire: NextFire,
        cluster: ClusterFields<'a>,
        status: RunStatus<'a>,
        output: Output,
    ) -> Self {
        let spec = &job.spec;
        JobRow {
            name,
            schedule: &spec.schedule,
            timezone: spec.timezone.as_deref(),
            command: &spec.command,
            executor: &job.executor_id,
            concurrency_policy: spec.concurrency_policy.as_str(),
            retries: spec.retry.retries,
            next_fire: match next_fire {
                NextFire::At(ms) => rfc3339(ms),
                NextFire::NotTimed | NextFire::Never => None,
            },
            never_fires: next_fire == NextFire::Never,
            cluster_policy: cluster.policy,
            cluster_owner: cluster.owner,
            running: status.running,
            last_run: status
                .last_finished
                .map(|record| RecordJson { record, output }),
            last_decision: status.last_decision.map(|record| RecordJson {
                record,
                output: Output::Omitted,
            }),
            expect: spec.expect.map(|e| ExpectJson {
                complete_within_ms: e.complete_within.map(|d| d.as_millis() as u64),
                max_duration_ms: e.max_duration.map(|d| d.as_millis() as u64),
            }),
            breaches: Vec::new(),
        }
    }

    /// The newest `most` of `notes` (oldest first, as the judge keeps them), newest first.
    pub(super) fn with_breaches(
        mut self,
        notes: &[crate::observe::expectations::BreachNote],
        most: usize,
    ) -> Self {
        self.breaches = notes
            .iter()
            .rev()
            .take(most)
            .map(|n| BreachJson {
                breach: n.breach.as_str(),
                scheduled_at: rfc3339(n.scheduled_at_ms),
                firing_id: n.firing_id.clone(),
                found_at: rfc3339(n.found_at_ms),
                why: n.why.clone(),
            })
            .collect();
        self
    }
}
