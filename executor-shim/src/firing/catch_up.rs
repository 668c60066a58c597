//! Running a missed instant the coordinator offers (`CatchUpRun` over Watch): a Leader job with
//! `catchUp` whose instant nobody ran. The shim runs it through the same loop as every firing
//! ([`crate::firing::fire`]) with the catch-up kind, so it asks ShouldRun first (the answer claims
//! the instant, and a claimed one is SKIP), reports every attempt, and the run sees
//! `CRONSTABLE_CATCH_UP=1` beside its nominal `CRONSTABLE_SCHEDULED_AT`.
//!
//! The coordinator offers an instant again while it stays unclaimed (the shim may not have been
//! watching). Claims are per node and term, so two offers of one instant asked on this node
//! would both be answered RUN: the shim starts each offered instant once ([`Offers`]), unless
//! its first try launched nothing (then nothing claimed it here, and a later offer may try).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use cronstable_core::FiringKind;
use cronstable_proto::v1 as pb;
use tokio::sync::watch;

use crate::firing::{FiringContext, fire_launched};
use crate::schedule::source::{LoadedJob, job_named};

/// How many offered instants the shim remembers: far more than any job's `catchUpLimit`
/// (at most 100) times the jobs that can miss together, and a few hundred KiB at most.
const REMEMBERED: usize = 4096;

/// One offered instant: the job and its instant (Unix ms).
type Offered = (String, i64);

/// The instants this shim has started as catch-ups, oldest forgotten first.
#[derive(Debug, Default)]
pub struct Offers {
    seen: Mutex<(HashSet<Offered>, VecDeque<Offered>)>,
}

impl Offers {
    /// Remembers `job`'s instant `at_ms`; true the first time only.
    pub fn first_time(&self, job: &str, at_ms: i64) -> bool {
        let mut guard = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let (set, order) = &mut *guard;
        let key = (job.to_owned(), at_ms);
        if !set.insert(key.clone()) {
            return false;
        }
        order.push_back(key);
        if order.len() > REMEMBERED
            && let Some(old) = order.pop_front()
        {
            set.remove(&old);
        }
        true
    }

    /// Forgets `job`'s instant `at_ms`: its catch-up did not run, and may be offered again.
    pub fn forget(&self, job: &str, at_ms: i64) {
        let mut guard = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let (set, order) = &mut *guard;
        let key = (job.to_owned(), at_ms);
        if set.remove(&key) {
            order.retain(|k| *k != key);
        }
    }
}

/// Starts the offered instant `c`, unless this shim started it already or does not have the job.
pub fn offered(
    ctx: &FiringContext,
    jobs: &watch::Receiver<Arc<Vec<LoadedJob>>>,
    c: pb::CatchUpRun,
) {
    let Some(job) = job_named(&jobs.borrow(), &c.job) else {
        tracing::warn!(
            job = c.job,
            "catch-up offered for a job this shim does not have"
        );
        return;
    };
    let Some(at) = chrono::DateTime::from_timestamp_millis(c.scheduled_at_ms) else {
        tracing::warn!(
            job = c.job,
            scheduled_at_ms = c.scheduled_at_ms,
            "catch-up offered for an instant out of range"
        );
        return;
    };
    if !ctx.catch_ups.first_time(&c.job, c.scheduled_at_ms) {
        tracing::debug!(job = c.job, scheduled_at = %at, "catch-up offered again; already started here");
        return;
    }
    tracing::info!(job = c.job, scheduled_at = %at, "catching up a missed instant");
    let (ctx, name, at_ms) = (ctx.clone(), c.job, c.scheduled_at_ms);
    crate::spawn(async move {
        // Not run (a transient SKIP, a DEFER given up, the coordinator away): nothing claimed
        // it here, so the coordinator's next offer may try again.
        if !fire_launched(ctx.clone(), job, at, FiringKind::CatchUp).await {
            ctx.catch_ups.forget(&name, at_ms);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_instant_starts_once_and_the_memory_is_bounded() {
        let offers = Offers::default();
        assert!(offers.first_time("a", 1_000));
        assert!(!offers.first_time("a", 1_000));
        assert!(offers.first_time("a", 2_000));
        assert!(offers.first_time("b", 1_000));
        for i in 0..REMEMBERED as i64 {
            offers.first_time("c", i);
        }
        assert!(
            offers.first_time("a", 1_000),
            "forgotten after {REMEMBERED} newer ones"
        );
        let (set, order) = &*offers.seen.lock().unwrap();
        assert_eq!(set.len(), REMEMBERED);
        assert_eq!(order.len(), REMEMBERED);
    }
}
