//! The runs of jobs with `expect:` on the lease stores with per-firing claims (etcd,
//! filesystem), so the node that judges a job's firings ([`crate::observe::expectations`]) sees
//! a run on any node: the previous holder's run of a firing just before a handover, a retry
//! handed to another node, a second run of one firing anywhere.
//!
//! Each node writes one record per run of its own when the run starts and again when it ends
//! (the same key, replaced), through one writer task per process, so a run's end never lands
//! before its start. Writes never hold up a decision: they go on a bounded queue, and a full
//! queue or a failed write costs that record (one WARNING per change of error), never a
//! firing. Records are kept for the longest [expectation span](cronstable_core::JobSpec::expectation_span)
//! written by this process, at least an hour, and pruned by the nodes that write them.
//!
//! Kubernetes keeps no records (its store is one Lease object, see [`super::claims`]), and
//! gossip has no store: there the judge reads the peers' own reports instead.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::LeaseError;

/// The shortest time a run record is kept after its instant.
pub const MIN_KEPT: Duration = Duration::from_secs(3600);

/// One run, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// The job.
    pub job: String,
    /// The firing's nominal instant (Unix ms).
    pub scheduled_at_ms: i64,
    /// The node it ran on.
    pub node: String,
    /// Its attempt number (1 for the first).
    pub attempt: u32,
    /// When it started (Unix ms, on the node that ran it).
    pub started_at_ms: i64,
    /// When it ended; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<i64>,
    /// How long it ran; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Exit 0 within its timeout; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<bool>,
}

impl RunRecord {
    /// The store key's part below the instant: one record per job, node and attempt, so a
    /// run's end replaces its start whatever start time each report carried.
    pub fn run_key(&self) -> (String, String, u32) {
        (self.job.clone(), self.node.clone(), self.attempt)
    }
}

impl RunRecord {
    /// The record of a run's start or end in a ledger record; `None` for anything else, and
    /// for the kinds that are no firing of the schedule (`@reboot`, manual).
    pub fn of(record: &crate::ledger::Record) -> Option<Self> {
        use crate::ledger::Event;
        use cronstable_core::FiringKind;
        if !matches!(
            record.kind,
            FiringKind::Scheduled | FiringKind::CatchUp | FiringKind::Retry { .. }
        ) {
            return None;
        }
        let base = |started_at_ms| RunRecord {
            job: record.job.clone(),
            scheduled_at_ms: record.scheduled_at_ms,
            node: record.node.clone(),
            attempt: record.attempt,
            started_at_ms,
            ended_at_ms: None,
            duration_ms: None,
            succeeded: None,
        };
        match &record.event {
            Event::Started { at_ms, .. } => Some(base(*at_ms)),
            Event::Finished(end) => Some(RunRecord {
                ended_at_ms: Some(end.finished_at_ms),
                duration_ms: Some(end.duration_ms),
                succeeded: Some(end.succeeded()),
                ..base(end.started_at_ms)
            }),
            _ => None,
        }
    }
}

/// What a store does with run records.
#[tonic::async_trait]
pub trait RunRecordStore: Send + 'static {
    /// Writes `run`'s record, replacing an earlier one of the same run (its start, when this
    /// is its end).
    async fn put_run(&mut self, run: &RunRecord) -> Result<(), LeaseError>;

    /// Every run record of an instant in `from_ms..=to_ms`, in any order. A record that cannot
    /// be decoded is left out: no data, not an error.
    async fn runs_between(
        &mut self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<RunRecord>, LeaseError>;

    /// Removes the records of instants before `before_ms`; returns how many.
    async fn prune_runs(&mut self, before_ms: i64) -> Result<usize, LeaseError>;
}
