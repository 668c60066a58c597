//! The task that tells an executor over Watch when its deferred `@reboot` one-shot may be
//! decided (`RunDeferred`); see [`super`] for why it is a wake-up, not a permission.

use cronstable_core::{FiringKind, Verdict};

use super::RECHECK;
use crate::state::{CoordinatorState, Instruction};

/// Re-evaluates pending one-shots on every view or job-set change and every [`RECHECK`], and
/// pushes `RunDeferred` to the waiting executor once the gate would answer anything but DEFER.
/// Returns when `shutdown` resolves.
pub async fn push_when_ready(
    state: CoordinatorState,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut changes = state.changes();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => return,
            more = changes.next(RECHECK) => if !more { return },
        }
        push_ready(&state);
    }
}

/// One pass over the pending one-shots.
pub fn push_ready(state: &CoordinatorState) {
    for (job, at, executor) in state.deferred.pending() {
        match state.peek_verdict(&job, FiringKind::Reboot, at) {
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
    use cronstable_core::{ClusterPolicy, Firing, JobSpec};
    use tokio::sync::watch;

    use super::*;
    use crate::clock::Now;
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
            .should_run(
                &Firing {
                    job: "migrate".into(),
                    scheduled_at_ms: 1_000,
                    kind: FiringKind::Reboot,
                },
                Now::with_unix_ms(1_000),
            )
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
}
