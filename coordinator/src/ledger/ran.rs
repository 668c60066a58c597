//! Which instants of a job ran here, and what this node learned ran elsewhere: the ledger's
//! part of catch-up on gossip, where no store holds per-firing claims.
//!
//! [`RanHere`] is read from a job's records: every instant this node answered RUN for or whose
//! run started here. The records are a bounded ring, so it also says from when on they are
//! complete; an instant before that is unknown and a caller must treat it as settled (a node
//! that does not know does not run it again).

use std::collections::{BTreeMap, VecDeque};

use cronstable_core::{FiringKind, Verdict};

use super::{Event, Ledger, Record};

/// The instants of one job this node answered RUN for or started, by nominal instant (Unix ms),
/// each with the kind of the first such firing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RanHere {
    runs: BTreeMap<i64, FiringKind>,
    /// The ring was full: records of instants before this one were dropped.
    complete_from_ms: Option<i64>,
}

impl RanHere {
    /// Reads a job's records (oldest first), as [`Ledger::inspect`] hands them out.
    pub fn of(records: &VecDeque<Record>) -> Self {
        let mut runs = BTreeMap::new();
        for r in records {
            let ran = matches!(
                r.event,
                Event::Decided {
                    verdict: Verdict::Run,
                    ..
                } | Event::Started { .. }
            );
            if ran {
                runs.entry(r.scheduled_at_ms).or_insert(r.kind);
            }
        }
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
        self.runs.contains_key(&at_ms) || self.complete_from_ms.is_some_and(|from| at_ms < from)
    }

    /// The kind of the firing this node answered RUN for at `at_ms`, if any.
    pub fn kind_at(&self, at_ms: i64) -> Option<FiringKind> {
        self.runs.get(&at_ms).copied()
    }

    /// The newest instant that ran here before `before_ms`.
    pub fn newest_before(&self, before_ms: i64) -> Option<i64> {
        self.runs.range(..before_ms).next_back().map(|(&t, _)| t)
    }

    /// The newest instant that ran here.
    pub fn newest(&self) -> Option<i64> {
        self.runs.keys().next_back().copied()
    }
}

impl Ledger {
    /// What ran here of `job` ([`RanHere`]).
    pub fn ran_here(&self, job: &str) -> RanHere {
        self.inspect(job, RanHere::of)
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
        assert_eq!(ran.kind_at(3_000), Some(FiringKind::CatchUp));
        assert_eq!(ran.newest_before(3_000), Some(1_000));
        assert_eq!(ran.newest(), Some(3_000));
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
