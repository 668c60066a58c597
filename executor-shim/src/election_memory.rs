//! What the coordinator last said about election, for the moments it cannot be reached.
//!
//! Without a `cluster` section a coordinator answers RUN for every job, and its registration
//! answer makes every job EveryNode. When such a coordinator restarts (the single-replica
//! sidecar), the shim would otherwise fall back to the "no manager" row and skip every Leader
//! job until it is back. So the shim remembers which jobs the coordinator had made EveryNode,
//! and runs them while it is away, for a bounded time.
//!
//! The memory must never outlive the mode it describes, or a shim would run Leader jobs on every
//! node beside the elected leader:
//! - any answer that comes from the table with election on (any reason but `election_off` or
//!   `manual`) forgets the whole memory at once, whichever job it was about, since election is
//!   a property of the coordinator, not of a job;
//! - it is trusted for [`MEMORY_TTL`] after the coordinator last said election is off, so a
//!   coordinator that crash-loops on a new config does not leave the node running Leader jobs
//!   indefinitely;
//! - it applies only when the coordinator cannot be reached: an answer that refuses the
//!   question is no reason to assume anything.
//!
//! Pure: the clock is an argument.

use std::collections::BTreeSet;
use std::time::Duration;

use cronstable_core::{ClusterPolicy, Gate, JobSpec, Reason};
use tokio::time::Instant;

/// How long "election is off" is trusted after the coordinator last said so.
pub const MEMORY_TTL: Duration = Duration::from_secs(300);

/// The remembered election mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ElectionMemory {
    /// Jobs the coordinator made EveryNode although they ask for more: election was off.
    off_for: BTreeSet<String>,
    /// When the coordinator last said so.
    said_at: Option<Instant>,
}

impl ElectionMemory {
    /// The memory after a registration answered at `now`: each job's requested policy in
    /// `specs` against its effective policy in the answer.
    pub fn registered<'a>(
        specs: impl IntoIterator<Item = &'a JobSpec>,
        effective: &std::collections::BTreeMap<String, ClusterPolicy>,
        now: Instant,
    ) -> Self {
        let off_for: BTreeSet<String> = specs
            .into_iter()
            .filter(|s| {
                s.cluster_policy != ClusterPolicy::EveryNode
                    && effective.get(&s.name) == Some(&ClusterPolicy::EveryNode)
            })
            .map(|s| s.name.clone())
            .collect();
        let said_at = (!off_for.is_empty()).then_some(now);
        Self { off_for, said_at }
    }

    /// Whether the coordinator had election off when it last said anything.
    pub fn election_off(&self) -> bool {
        !self.off_for.is_empty()
    }

    /// Takes in the coordinator's answer about `job` at `now`. Returns whether the memory
    /// changed.
    pub fn answered(&mut self, job: &JobSpec, reason: Option<Reason>, now: Instant) -> bool {
        if job.cluster_policy == ClusterPolicy::EveryNode {
            return false;
        }
        match reason {
            Some(Reason::ElectionOff) => {
                let added = self.off_for.insert(job.name.clone());
                self.said_at = Some(now);
                added
            }
            // A manual start says nothing about election.
            Some(Reason::Manual) | None => false,
            // Anything else comes from the table with election on.
            Some(_) => {
                let changed = !self.off_for.is_empty();
                *self = Self::default();
                changed
            }
        }
    }

    /// The gate the shim applies by itself for `job` at `now` when the coordinator cannot be
    /// reached: election off while the memory holds and is fresh, else the "no manager" row.
    pub fn gate(&self, job: &JobSpec, now: Instant) -> Gate {
        let fresh = self
            .said_at
            .is_some_and(|t| now.saturating_duration_since(t) <= MEMORY_TTL);
        if fresh && self.off_for.contains(&job.name) {
            Gate::ElectionOff
        } else {
            Gate::NoManager
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn job(name: &str, policy: ClusterPolicy) -> JobSpec {
        let mut j = JobSpec::new(name, "* * * * *", "true");
        j.cluster_policy = policy;
        j
    }

    #[test]
    fn a_registration_with_election_off_is_remembered_for_a_bounded_time() {
        let t0 = Instant::now();
        let charge = job("charge", ClusterPolicy::Leader);
        let every = job("every", ClusterPolicy::EveryNode);
        let effective = BTreeMap::from([
            ("charge".to_owned(), ClusterPolicy::EveryNode),
            ("every".to_owned(), ClusterPolicy::EveryNode),
        ]);
        let m = ElectionMemory::registered([&charge, &every], &effective, t0);
        assert!(m.election_off());
        assert_eq!(m.gate(&charge, t0 + MEMORY_TTL), Gate::ElectionOff);
        assert_eq!(
            m.gate(&charge, t0 + MEMORY_TTL + Duration::from_millis(1)),
            Gate::NoManager
        );
        // A job that is EveryNode itself needs no memory.
        assert_eq!(m.gate(&every, t0), Gate::NoManager);
    }

    #[test]
    fn never_registered_or_election_on_fails_closed() {
        let t0 = Instant::now();
        let charge = job("charge", ClusterPolicy::Leader);
        assert_eq!(ElectionMemory::default().gate(&charge, t0), Gate::NoManager);
        let on = BTreeMap::from([("charge".to_owned(), ClusterPolicy::Leader)]);
        let m = ElectionMemory::registered([&charge], &on, t0);
        assert!(!m.election_off());
        assert_eq!(m.gate(&charge, t0), Gate::NoManager);
    }

    #[test]
    fn any_election_answer_forgets_every_job_and_election_off_answers_refresh_it() {
        let t0 = Instant::now();
        let daily = job("daily", ClusterPolicy::Leader);
        let tick = job("tick", ClusterPolicy::PreferLeader);
        let off = BTreeMap::from([
            ("daily".to_owned(), ClusterPolicy::EveryNode),
            ("tick".to_owned(), ClusterPolicy::EveryNode),
        ]);
        let mut m = ElectionMemory::registered([&daily, &tick], &off, t0);
        // A manual start says nothing.
        assert!(!m.answered(&tick, Some(Reason::Manual), t0));
        assert_eq!(m.gate(&daily, t0), Gate::ElectionOff);
        // The coordinator was reloaded into a cluster: an answer about `tick` forgets `daily`
        // too, which may not fire again for a day.
        assert!(m.answered(&tick, Some(Reason::NotOwner), t0));
        assert_eq!(m.gate(&daily, t0), Gate::NoManager);
        // Off again: refreshed per job, with a new deadline.
        let t1 = t0 + Duration::from_secs(600);
        assert!(m.answered(&daily, Some(Reason::ElectionOff), t1));
        assert_eq!(m.gate(&daily, t1 + MEMORY_TTL), Gate::ElectionOff);
        assert_eq!(m.gate(&tick, t1), Gate::NoManager);
    }
}
