//! The gate: one firing's answer from the cluster view and the job set at a moment, and the
//! list of what the caller must do about it.
//!
//! [`gate`] does no I/O and reads no clock: the view, the job set and the time are arguments.
//! It applies row −1 (a scheduled firing asked after its start deadline is no new firing,
//! whoever leads now; a catch-up firing past its job's `catchUpWindow`, or of a job without
//! `catchUp`, is not caught up), resolves the view into the decision table's [`Gate`] for this job
//! (`ClusterView::gate_for`, plus the two facts only the firing knows: whether a lease
//! holder was seen renewing since its instant, and whether the `@reboot` record is about this
//! job set), decides, and names the [`Effect`]s. `CoordinatorState::should_run` performs them
//! in order: mark the executor's pace, write a Leader one-shot's "already ran" record or a
//! scheduled Leader firing's claim first (either may change the answer), track a deferred one-shot for the `RunDeferred` push, record
//! the decision.

use cronstable_core::fingerprint::firing_id;
use cronstable_core::{ClusterPolicy, Decision, Firing, FiringKind, Gate, Reason, Verdict, decide};

use crate::clock::Now;
use crate::cluster::{ClusterView, Election};
use crate::jobs::JobSet;

/// A firing's answer, with everything ShouldRun returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The verdict and reason.
    pub decision: Decision,
    /// The node that owns the firing, when known.
    pub owner: Option<String>,
    /// The fencing token, on a RUN from a backend that has one.
    pub fence: Option<String>,
    /// The cluster-wide firing key.
    pub firing_id: String,
    /// The node that decided (this one).
    pub node: String,
    /// A readable sentence for the executor's log: the reason's description, or what went
    /// wrong when the answer had to change (a Leader one-shot's record that could not be
    /// written).
    pub message: String,
}

/// What the caller does about an answer, in the order [`gate`] lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// The executor asked about this instant: the liveness monitor's pace.
    MarkPace {
        /// The job's executor.
        executor_id: String,
    },
    /// A Leader `@reboot` one-shot answered RUN: write its "already ran" record to the store
    /// first (where the backend keeps one), then answer from the view as it is after the
    /// write; DEFER if the write fails. A holder that dies right after its executor starts the
    /// one-shot must leave a record its successor finds.
    RecordOneShotFirst,
    /// A scheduled or catch-up Leader firing answered RUN: claim it in the store first (where
    /// the backend keeps claims, [`crate::lease::claims`]), then answer from the view as it is
    /// after the write; SKIP (`already_ran`) if another claim holds it, DEFER if the write
    /// fails. On gossip, where nothing is claimed, this node's ledger stands in for the claim
    /// (a RUN of the other kind of the same instant here is SKIP `already_ran`); on a backend
    /// with neither (kubernetes) a catch-up is SKIP (`not_caught_up`): nothing could tell that
    /// nobody ran it.
    ClaimFirst,
    /// An `@reboot` one-shot: remember the final verdict for the `RunDeferred` push.
    TrackOneShot {
        /// The job's executor.
        executor_id: String,
    },
    /// Record the decision in the ledger and the log (a repeated DEFER once).
    RecordDecision,
}

/// An answer and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gated {
    /// What ShouldRun returns, unless an effect changes it.
    pub answer: Answer,
    /// The effects, in order.
    pub effects: Vec<Effect>,
}

/// The gate's answer to `firing` on a node whose view is `view` and whose job set is `set`, at
/// `now`; `None` when the job is not registered.
pub fn gate(view: &ClusterView, set: &JobSet, firing: &Firing, now: Now) -> Option<Gated> {
    let job = firing.job.as_str();
    let kind = firing.kind;
    let registered = set.get(job)?;
    let policy = registered.spec.cluster_policy;
    let late = cronstable_core::decision::past_starting_deadline(
        kind,
        firing.scheduled_at_ms,
        now.unix_ms,
        registered.spec.starting_deadline(),
    );
    let answer = if late {
        without_gate(
            view,
            job,
            policy,
            now,
            Decision::skip(Reason::StartingDeadline),
        )
    } else if let Some(why) = not_caught_up(&registered.spec, firing, now) {
        Answer {
            message: why,
            ..without_gate(view, job, policy, now, Decision::skip(Reason::NotCaughtUp))
        }
    } else {
        decide_at(view, set, job, policy, kind, firing.scheduled_at_ms, now.at)
    };
    let answer = Answer {
        firing_id: firing_id(&set.id, job, firing.scheduled_at_ms),
        ..answer
    };
    let executor_id = registered.executor_id.clone();
    let mut effects = vec![Effect::MarkPace {
        executor_id: executor_id.clone(),
    }];
    if answer.decision.verdict == Verdict::Run
        && kind == FiringKind::Reboot
        && policy == ClusterPolicy::Leader
    {
        effects.push(Effect::RecordOneShotFirst);
    }
    if answer.decision.verdict == Verdict::Run
        && kind.is_claimed()
        && policy == ClusterPolicy::Leader
    {
        effects.push(Effect::ClaimFirst);
    }
    if kind == FiringKind::Reboot {
        effects.push(Effect::TrackOneShot { executor_id });
    }
    effects.push(Effect::RecordDecision);
    Some(Gated { answer, effects })
}

/// The table's answer for `job` with `policy` at `now`, with the owner, fence, node name and
/// message, from one read of `view` (the firing id is the caller's).
pub fn decide_at(
    view: &ClusterView,
    set: &JobSet,
    job: &str,
    policy: ClusterPolicy,
    kind: FiringKind,
    firing_at_ms: i64,
    now: tokio::time::Instant,
) -> Answer {
    let mut gate = view.gate_for(job, now);
    if let (Gate::Manager(g), Election::Managed(m)) = (&mut gate, &view.election) {
        g.reboot_ran_unknown = m
            .reboot_ran
            .as_ref()
            .is_some_and(|r| r.job_set_id != set.id.as_str());
        // Not for @reboot one-shots: a PreferLeader one-shot runs once per cluster, settled
        // by the store's "already ran" records, and the holder runs its own. Holding a
        // follower's copy would only let it run a second time if the holder died while the
        // follower's read of the records lagged.
        g.owner_unconfirmed =
            kind != FiringKind::Reboot && view.owner_unconfirmed(firing_at_ms, now);
    }
    let decision = decide(policy, kind, gate);
    let run = decision.verdict == Verdict::Run;
    let mut message = decision.reason.describe().to_owned();
    if decision == Decision::defer(Reason::NotOwner) {
        message = format!(
            "{message}, but the lease holder has not been seen renewing since this firing's \
             instant: asked again until it renews (it runs the firing) or its renewals stop \
             (this node runs it)"
        );
    }
    Answer {
        decision,
        owner: view.owner_of(job, policy, now),
        fence: run.then(|| view.fence().map(str::to_owned)).flatten(),
        firing_id: String::new(),
        node: view.node_name.clone(),
        message,
    }
}

/// Why a catch-up firing is not decided at all: its job has no `catchUp` (a job redefined
/// since the offer, or a client that sent the kind on its own), or the instant is past the
/// job's `catchUpWindow` (which plays the start deadline's part for a catch-up). `None` for
/// every other kind.
fn not_caught_up(spec: &cronstable_core::JobSpec, firing: &Firing, now: Now) -> Option<String> {
    if firing.kind != FiringKind::CatchUp {
        return None;
    }
    let Some(policy) = spec.catch_up else {
        return Some(format!(
            "job {:?} has no catchUp, so none of its instants is caught up",
            spec.name
        ));
    };
    let window_ms = i64::try_from(policy.window.as_millis()).unwrap_or(i64::MAX);
    let late_ms = now.unix_ms.saturating_sub(firing.scheduled_at_ms);
    (late_ms > window_ms).then(|| {
        format!(
            "the instant is {late_ms} ms old, past the job's catchUpWindow ({} ms): given up",
            window_ms
        )
    })
}

/// `decision`, taken before the table (row −1), with the owner and node name the answer
/// reports; no fence, as nothing runs.
fn without_gate(
    view: &ClusterView,
    job: &str,
    policy: ClusterPolicy,
    now: Now,
    decision: Decision,
) -> Answer {
    Answer {
        decision,
        owner: view.owner_of(job, policy, now.at),
        fence: None,
        firing_id: String::new(),
        node: view.node_name.clone(),
        message: decision.reason.describe().to_owned(),
    }
}

#[cfg(test)]
mod tests;
