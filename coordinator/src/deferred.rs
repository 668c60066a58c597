//! Deferred `@reboot` one-shots this node's executors are waiting on, and the task that tells
//! an executor over Watch when its one-shot may run (`RunDeferred`).
//!
//! A Leader or PreferLeader `@reboot` one-shot is answered DEFER until the cluster converges
//! (RBT-01..04). The executor would otherwise find out only by asking again; instead the
//! coordinator notes each deferred one-shot here, re-evaluates the gate whenever the cluster
//! view or the job set changes (and on a short tick, since leadership and quorum also lapse by
//! deadline), and sends `RunDeferred` once the answer would no longer be DEFER. The push is a
//! wake-up, not a permission: the executor asks ShouldRun again and acts on that answer, so a
//! push that races a view change can never run a one-shot the gate would refuse.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cronstable_core::{FiringKind, Verdict};

use crate::state::{CoordinatorState, Instruction};

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

/// Re-evaluates pending one-shots on every view or job-set change and every [`RECHECK`], and
/// pushes `RunDeferred` to the waiting executor once the gate would answer anything but DEFER.
/// Returns when `shutdown` resolves.
pub async fn push_when_ready(
    state: CoordinatorState,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut view = state.view.clone();
    let mut job_sets = state.registry.subscribe();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => return,
            changed = view.changed() => if changed.is_err() { return },
            changed = job_sets.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(RECHECK) => {}
        }
        push_ready(&state);
    }
}

/// One pass over the pending one-shots.
pub fn push_ready(state: &CoordinatorState) {
    for (job, at, executor) in state.deferred.pending() {
        match state.peek_verdict(&job, FiringKind::Reboot) {
            // The job left the set: its executor keeps the one-shot pending and re-asks when
            // the name returns (RBT-07), so there is nothing to push.
            None => state.deferred.forget(&job, at),
            Some(Verdict::Defer) => {}
            Some(_) => {
                let sent = state.send_to(
                    &executor,
                    Instruction::RunDeferred {
                        job: job.clone(),
                        scheduled_at_ms: at,
                    },
                );
                if sent {
                    tracing::info!(
                        job,
                        scheduled_at_ms = at,
                        "deferred @reboot one-shot may be decided now: told its executor"
                    );
                }
                // Not watching: the executor re-asks on its own fallback cadence, and its next
                // DEFER (if any) makes the one-shot pending again.
                state.deferred.forget(&job, at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use cronstable_core::{ClusterPolicy, JobSpec};
    use tokio::sync::watch;

    use super::*;
    use crate::cluster::{ClusterView, Election, ManagedView};

    fn view(quorate: bool, leader: &str) -> ClusterView {
        let mut v = ClusterView::election_off("a");
        v.election = Election::Managed(ManagedView {
            quorate,
            leader: Some(leader.to_owned()),
            ..ManagedView::default()
        });
        v
    }

    /// RBT-01..04 over Watch: a deferred one-shot is pushed exactly when the gate would stop
    /// deferring it, to the executor that registered it, and only once.
    #[tokio::test]
    async fn a_deferred_one_shot_is_pushed_once_the_gate_would_decide_it() {
        let (tx, rx) = watch::channel(view(false, "a"));
        let state = CoordinatorState::new(rx);
        let mut job = JobSpec::new("migrate", "@reboot", "true");
        job.cluster_policy = ClusterPolicy::Leader;
        state.registry.register("shim-1", vec![job]).unwrap();
        let mut instructions = state.open_watch("shim-1");

        let first = state
            .should_run("migrate", 1_000, FiringKind::Reboot, 1, 1_000)
            .await
            .unwrap();
        assert_eq!(first.decision.verdict, Verdict::Defer, "{first:?}");
        push_ready(&state);
        assert!(instructions.try_recv().is_err(), "no quorum yet: no push");

        tx.send_replace(view(true, "a"));
        push_ready(&state);
        assert_eq!(
            instructions.try_recv().unwrap(),
            Instruction::RunDeferred {
                job: "migrate".into(),
                scheduled_at_ms: 1_000
            }
        );
        push_ready(&state);
        assert!(instructions.try_recv().is_err(), "pushed once");
        assert!(state.deferred.pending().is_empty());
    }

    #[test]
    fn an_answer_other_than_defer_settles_the_one_shot() {
        let d = DeferredOneShots::new();
        d.answered("migrate", 1, "shim-1", Verdict::Defer);
        d.answered("other", 1, "shim-1", Verdict::Defer);
        d.answered("migrate", 1, "shim-1", Verdict::Skip);
        assert_eq!(d.pending(), vec![("other".into(), 1, "shim-1".into())]);
    }
}
