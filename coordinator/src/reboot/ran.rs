//! Which deferred `@reboot` one-shots already ran, so the cluster runs each once (RBT-06).
//!
//! A Leader or PreferLeader `@reboot` job is deferred on every node until the cluster
//! converges, then runs on its owner. Without a record of that run, a node that boots later
//! (or a new leader whose own one-shot is still deferred) would run it again. This node's
//! coordinator notes every such one-shot its executors started, tagged with the job-set ID it
//! ran under; the gossip backend advertises the set as `ran_reboot_jobs` on `/peer`, merges
//! what peers under the same job-set ID advertise, and publishes the union in the cluster view, where the gate
//! reads it. A record counts only under the job-set ID it was made with.
//!
//! On gossip this memory lives in the processes: a whole-fleet restart forgets it and the
//! one-shot runs again on the next convergence (RBT-09), unlike the lease backends, which keep
//! it in the store (RBT-21, [`crate::lease::reboot_records`]).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

/// This node's own record of started one-shots. Cheap to clone; clones share the record.
#[derive(Debug, Clone, Default)]
pub struct RebootRan {
    /// (job-set ID, job name).
    started: Arc<Mutex<BTreeSet<(String, String)>>>,
}

impl RebootRan {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes that `job`'s one-shot started on this node under `job_set_id`.
    pub fn mark(&self, job_set_id: &str, job: &str) {
        self.started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((job_set_id.to_owned(), job.to_owned()));
    }

    /// The jobs whose one-shot started on this node under `job_set_id`.
    pub fn jobs_under(&self, job_set_id: &str) -> BTreeSet<String> {
        self.started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(id, _)| id == job_set_id)
            .map(|(_, job)| job.clone())
            .collect()
    }
}

/// Most remembered peer records; past it, records of other job sets are forgotten first.
const MAX_LEARNED: usize = 4096;

/// What the gossip backend learned from peers' `ran_reboot_jobs`, kept after the peer that
/// ran a one-shot goes away, so its record outlives it.
#[derive(Debug, Default)]
pub struct LearnedRebootRan {
    /// (job-set ID, job name).
    learned: BTreeSet<(String, String)>,
}

impl LearnedRebootRan {
    /// Nothing learned yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes in the `ran_reboot_jobs` of every peer report made under `job_set_id` (a
    /// drifted peer's records are about another job set and are ignored), and returns every job
    /// known to have run under it: this node's own and the peers'.
    ///
    /// Only names for which `deferrable` holds (a Leader or PreferLeader `@reboot` job of the
    /// current set) are kept or returned, so a faulty peer's list can neither grow this record
    /// past the job count nor push real names out of the bounded list this node advertises.
    pub fn merge<'a>(
        &mut self,
        job_set_id: &str,
        peers: impl IntoIterator<Item = (&'a str, &'a [String])>,
        own: &RebootRan,
        deferrable: impl Fn(&str) -> bool,
    ) -> BTreeSet<String> {
        for (peer_set, jobs) in peers {
            if peer_set == job_set_id {
                self.learned.extend(
                    jobs.iter()
                        .filter(|job| deferrable(job))
                        .map(|job| (job_set_id.to_owned(), job.clone())),
                );
            }
        }
        if self.learned.len() > MAX_LEARNED {
            self.learned.retain(|(id, _)| id == job_set_id);
        }
        let mut ran = own.jobs_under(job_set_id);
        ran.retain(|job| deferrable(job));
        ran.extend(
            self.learned
                .iter()
                .filter(|(id, _)| id == job_set_id)
                .map(|(_, job)| job.clone()),
        );
        ran
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_records_are_merged_per_job_set_and_outlive_the_peer() {
        let own = RebootRan::new();
        own.mark("v1:a", "mine");
        let mut learned = LearnedRebootRan::new();
        let theirs = vec!["theirs".to_owned(), "junk".to_owned()];
        let drifted = vec!["stale".to_owned()];
        let jobs = |j: &str| ["mine", "theirs", "stale"].contains(&j);
        let ran = learned.merge(
            "v1:a",
            [("v1:a", theirs.as_slice()), ("v1:b", drifted.as_slice())],
            &own,
            jobs,
        );
        // "junk" is no deferrable @reboot job of this set: neither kept nor returned.
        assert_eq!(ran.into_iter().collect::<Vec<_>>(), ["mine", "theirs"]);
        // The peer is gone (no report this round): its record stays.
        let ran = learned.merge("v1:a", [], &own, jobs);
        assert!(ran.contains("theirs"));
        // Under another job set none of it counts.
        assert!(learned.merge("v1:c", [], &own, jobs).is_empty());
    }

    #[test]
    fn a_record_counts_only_under_its_job_set() {
        let ran = RebootRan::new();
        ran.mark("v1:a", "migrate");
        ran.mark("v1:a", "warm");
        ran.mark("v1:b", "other");
        assert_eq!(
            ran.jobs_under("v1:a").into_iter().collect::<Vec<_>>(),
            ["migrate", "warm"]
        );
        assert!(ran.jobs_under("v1:c").is_empty());
        assert_eq!(ran.clone().jobs_under("v1:b").len(), 1, "clones share");
    }
}
