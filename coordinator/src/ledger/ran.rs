//! Which instants of a job ran here, and what this node learned ran elsewhere: the ledger's
//! part of catch-up on gossip, where no store holds per-firing claims.
//!
//! [`RanHere`] is read from a job's records: every instant this node answered RUN for or whose
//! run started here ([`newest_run`] and [`Ledger::ran_kind_at`] answer the two narrower
//! questions of the run summary and the gate without copying the records). The records are a bounded ring, so it also says from when on they are
//! complete; an instant before that is unknown and a caller must treat it as settled (a node
//! that does not know does not run it again).

use std::collections::{BTreeSet, VecDeque};

use cronstable_core::{FiringKind, Verdict};

use super::{Event, Ledger, Record};

/// Whether `record` says this node answered RUN for its firing or started its run.
fn ran(record: &Record) -> bool {
    matches!(
        record.event,
        Event::Decided {
            verdict: Verdict::Run,
            ..
        } | Event::Started { .. }
    )
}

/// The newest instant of a job's records (oldest first) that ran here, without copying them:
/// what the gossip run summary reports.
pub fn newest_run(records: &VecDeque<Record>) -> Option<i64> {
    records
        .iter()
        .filter(|r| ran(r))
        .map(|r| r.scheduled_at_ms)
        .max()
}

/// The instants of one job this node answered RUN for or started (Unix ms).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RanHere {
    runs: BTreeSet<i64>,
    /// The ring was full: records of instants before this one were dropped.
    complete_from_ms: Option<i64>,
}

impl RanHere {
    /// Reads a job's records (oldest first), as [`Ledger::inspect`] hands them out.
    pub fn of(records: &VecDeque<Record>) -> Self {
        let runs = records
            .iter()
            .filter(|r| ran(r))
            .map(|r| r.scheduled_at_ms)
            .collect();
        let complete_from_ms = (records.len() == Ledger::PER_JOB)
            .then(|| records.iter().map(|r| r.scheduled_at_ms).min())
            .flatten();
        Self {
            runs,
            complete_from_ms,
        }
    }

    /// Whether `at_ms` is settled here: it ran (or was answered RUN), or it lies before what
    /// the records still remember.
    pub fn settled(&self, at_ms: i64) -> bool {
        self.runs.contains(&at_ms) || self.complete_from_ms.is_some_and(|from| at_ms < from)
    }
}

impl Ledger {
    /// What ran here of `job` ([`RanHere`]).
    pub fn ran_here(&self, job: &str) -> RanHere {
        self.inspect(job, RanHere::of)
    }

    /// The kind of the first firing of `job` at `at_ms` this node answered RUN for or started,
    /// if any: one scan of the job's records, no copy (it is on gossip's ShouldRun path).
    pub fn ran_kind_at(&self, job: &str, at_ms: i64) -> Option<FiringKind> {
        self.inspect(job, |records| {
            records
                .iter()
                .find(|r| r.scheduled_at_ms == at_ms && ran(r))
                .map(|r| r.kind)
        })
    }

    /// Notes that every instant of `job` at or before `at_ms` is settled on other nodes (a
    /// peer reported running it, or a peer that may have run it could not tell: see
    /// `crate::catch_up`). Only ever moves forward; returns whether it did.
    pub fn settle_elsewhere(&self, job: &str, at_ms: i64) -> bool {
        let mut settled = self
            .settled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = settled.entry(job.to_owned()).or_insert(i64::MIN);
        if at_ms <= *entry {
            return false;
        }
        *entry = at_ms;
        true
    }

    /// Through when `job` is settled on other nodes, as far as this node learned
    /// ([`Self::settle_elsewhere`]).
    pub fn settled_elsewhere(&self, job: &str) -> Option<i64> {
        self.settled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(job)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use cronstable_core::{Decision, Firing, Reason};

    use super::*;

    fn decided(at: i64, kind: FiringKind, verdict: Verdict) -> Record {
        let firing = Firing {
            job: "tick".into(),
            scheduled_at_ms: at,
            kind,
        };
        let decision = match verdict {
            Verdict::Run => Decision::run(Reason::Leader),
            _ => Decision::skip(Reason::NotLeader),
        };
        Record::decided(&firing, decision, "a", at)
    }

    #[test]
    fn runs_and_run_answers_are_settled_skips_are_not() {
        let ledger = Ledger::new();
        ledger.append(decided(1_000, FiringKind::Scheduled, Verdict::Run));
        ledger.append(decided(2_000, FiringKind::Scheduled, Verdict::Skip));
        ledger.append(decided(3_000, FiringKind::CatchUp, Verdict::Run));
        let ran = ledger.ran_here("tick");
        assert!(ran.settled(1_000) && ran.settled(3_000));
        assert!(!ran.settled(2_000) && !ran.settled(500));
        assert_eq!(ledger.ran_kind_at("tick", 3_000), Some(FiringKind::CatchUp));
        assert_eq!(ledger.ran_kind_at("tick", 2_000), None);
        assert_eq!(ledger.inspect("tick", newest_run), Some(3_000));
    }

    #[test]
    fn what_the_full_ring_forgot_is_settled() {
        let ledger = Ledger::new();
        for k in 0..Ledger::PER_JOB as i64 + 5 {
            ledger.append(decided(k * 1_000, FiringKind::Scheduled, Verdict::Skip));
        }
        let ran = ledger.ran_here("tick");
        assert!(
            ran.settled(4_000),
            "dropped from the ring: unknown, so settled"
        );
        assert!(!ran.settled(5_000), "still remembered as a skip");
    }

    #[test]
    fn settled_elsewhere_only_moves_forward() {
        let ledger = Ledger::new();
        assert!(ledger.settle_elsewhere("tick", 5_000));
        assert!(!ledger.settle_elsewhere("tick", 4_000));
        assert_eq!(ledger.settled_elsewhere("tick"), Some(5_000));
        assert_eq!(ledger.settled_elsewhere("other"), None);
    }
}
