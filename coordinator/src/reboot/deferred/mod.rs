//! Deferred `@reboot` one-shots this node's executors are waiting on, and ([`push`]) the task
//! that tells an executor over Watch when its one-shot may run (`RunDeferred`).
//!
//! A Leader or PreferLeader `@reboot` one-shot is answered DEFER until the cluster converges
//! (RBT-01..04). The executor would otherwise find out only by asking again; instead the
//! coordinator notes each deferred one-shot here, re-evaluates the gate whenever the cluster
//! view or the job set changes (and on a short tick, since leadership and quorum also lapse by
//! deadline), and sends `RunDeferred` once the answer would no longer be DEFER. The push is a
//! wake-up, not a permission: the executor asks ShouldRun again and acts on that answer, so a
//! push that races a view change can never run a one-shot the gate would refuse.

pub mod push;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cronstable_core::Verdict;

/// How often pending one-shots are re-evaluated without a view change: deadlines (a lease's
/// local expiry, a convergence hold) pass without the backend writing a new view.
pub const RECHECK: Duration = Duration::from_millis(500);

/// Most one-shots remembered; past it the oldest are forgotten (their executors still re-ask
/// on their own, just later).
const MAX_PENDING: usize = 4096;

/// The deferred one-shots, keyed by (job, scheduled instant), with the executor waiting on each.
#[derive(Debug, Clone, Default)]
pub struct DeferredOneShots {
    pending: Arc<Mutex<BTreeMap<(String, i64), String>>>,
}

impl DeferredOneShots {
    /// Nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes the answer given to a one-shot: DEFER makes it pending for `executor`, anything
    /// else settles it.
    pub fn answered(&self, job: &str, scheduled_at_ms: i64, executor: &str, verdict: Verdict) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (job.to_owned(), scheduled_at_ms);
        if verdict == Verdict::Defer {
            pending.insert(key, executor.to_owned());
            while pending.len() > MAX_PENDING {
                let oldest = pending
                    .iter()
                    .min_by_key(|((_, at), _)| *at)
                    .map(|(k, _)| k.clone());
                match oldest {
                    Some(k) => pending.remove(&k),
                    None => break,
                };
            }
        } else {
            pending.remove(&key);
        }
    }

    /// The pending one-shots: (job, scheduled instant, executor).
    pub fn pending(&self) -> Vec<(String, i64, String)> {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|((job, at), ex)| (job.clone(), *at, ex.clone()))
            .collect()
    }

    /// Forgets one one-shot (its push was delivered, or its job is gone).
    pub fn forget(&self, job: &str, scheduled_at_ms: i64) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(job.to_owned(), scheduled_at_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_other_than_defer_settles_the_one_shot() {
        let d = DeferredOneShots::new();
        d.answered("migrate", 1, "shim-1", Verdict::Defer);
        d.answered("other", 1, "shim-1", Verdict::Defer);
        d.answered("migrate", 1, "shim-1", Verdict::Skip);
        assert_eq!(d.pending(), vec![("other".into(), 1, "shim-1".into())]);
    }
}
