//! The lease driver's side of the persisted "already ran" records for deferred `@reboot`
//! one-shots (RBT-20..23): what the driver publishes as [`RebootRanRecord`], and when it reads
//! and writes the store.
//!
//! - **Read-back before "not ran" (RBT-22).** The record is trusted only after a read of the
//!   store for the live job-set ID. Gaining leadership, or the job-set ID changing, forgets that
//!   read: until the next one completes, the driver publishes a record about no job set, which
//!   the gate answers with a convergence hold, so a one-shot waits instead of running twice.
//!   A failed read leaves it that way while the store is otherwise reachable. The store is
//!   re-read every [`REREAD_EVERY`] as well, so followers see what a holder recorded.
//! - **Outage (RBT-20).** While the view is not quorate the store cannot be asked at all, and
//!   PreferLeader `@reboot` must still run here (a possible boot-time double run the spec
//!   accepts); Leader fails closed on the missing quorum anyway. So a non-quorate view publishes
//!   what is known under the live ID (this node's own marks, plus the last read if it was about
//!   the same job set) instead of the "unknown" record.
//! - **Writes (RBT-21).** This node's own marks under the live ID that the store does not have
//!   yet are written each round until a write succeeds; meanwhile they are in the published set
//!   already, so this node never reruns its own one-shot.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::cluster::RebootRanRecord;
use crate::reboot::ran::RebootRan;

/// How often the store's records are read again without a leadership change (LSE-FS-09).
pub const REREAD_EVERY: Duration = Duration::from_secs(60);

/// What the driver knows about the store's records.
#[derive(Debug, Default)]
pub struct RebootRecords {
    /// The last successful read: the job-set ID and the jobs recorded under it.
    known: Option<(String, BTreeSet<String>)>,
    /// When `known` was read; `None` once a leadership gain or job-set change invalidated it.
    read_at: Option<Instant>,
    /// (job-set ID, job) pairs this node has written to the store.
    written: BTreeSet<(String, String)>,
    /// Whether this node led after the previous round.
    led: bool,
}

impl RebootRecords {
    /// Nothing read, nothing written.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes in one round's outcome: a leadership gain, or a job set other than the one last
    /// read, requires a fresh read-back before the record is trusted again (RBT-22).
    pub fn after_round(&mut self, job_set_id: &str, leads: bool) {
        let gained = leads && !self.led;
        let other_set = self.known.as_ref().is_some_and(|(id, _)| id != job_set_id);
        if gained || other_set {
            self.read_at = None;
        }
        self.led = leads;
    }

    /// Whether the store should be read now.
    pub fn read_due(&self, now: Instant) -> bool {
        self.read_at
            .is_none_or(|at| now.saturating_duration_since(at) >= REREAD_EVERY)
    }

    /// Notes a completed read of `jobs` under `job_set_id`.
    pub fn read_done(&mut self, job_set_id: &str, jobs: BTreeSet<String>, now: Instant) {
        self.known = Some((job_set_id.to_owned(), jobs));
        self.read_at = Some(now);
    }

    /// This node's marks under `job_set_id` not yet written to the store.
    pub fn unwritten(&self, job_set_id: &str, own: &RebootRan) -> BTreeSet<String> {
        own.jobs_under(job_set_id)
            .into_iter()
            .filter(|j| !self.written.contains(&(job_set_id.to_owned(), j.clone())))
            .collect()
    }

    /// Notes that `jobs` were written under `job_set_id`.
    pub fn write_done(&mut self, job_set_id: &str, jobs: &BTreeSet<String>) {
        self.written
            .extend(jobs.iter().map(|j| (job_set_id.to_owned(), j.clone())));
    }

    /// The record to publish for the live `job_set_id`, given whether the view is quorate.
    pub fn record(&self, job_set_id: &str, own: &RebootRan, quorate: bool) -> Arc<RebootRanRecord> {
        let same_set = self.known.as_ref().filter(|(id, _)| id == job_set_id);
        if quorate && (self.read_at.is_none() || same_set.is_none()) {
            // Not read back yet: a record about no job set makes the gate hold the one-shot.
            return Arc::new(RebootRanRecord::default());
        }
        let mut jobs = own.jobs_under(job_set_id);
        if let Some((_, read)) = same_set {
            jobs.extend(read.iter().cloned());
        }
        Arc::new(RebootRanRecord {
            job_set_id: job_set_id.to_owned(),
            jobs,
        })
    }
}

#[cfg(test)]
mod tests;
