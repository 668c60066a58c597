//! The pure gate, table by table: what it answers and which effects it names, from a view, a
//! job set and a time alone.

use std::sync::Arc;

use cronstable_core::{ClusterPolicy, Firing, FiringKind, JobSpec, Reason, Verdict};

use super::*;
use crate::cluster::{HolderRenewals, LeaseGate, ManagedView};
use crate::jobs::JobRegistry;
use crate::status::ClusterStatus;

const T0_MS: i64 = 1_780_000_000_000;

fn set(policy: ClusterPolicy) -> Arc<JobSet> {
    let mut spec = JobSpec::new("job", "* * * * *", "true");
    spec.cluster_policy = policy;
    let registry = JobRegistry::new();
    registry.register("shim", vec![spec]).unwrap()
}

fn firing(kind: FiringKind) -> Firing {
    Firing {
        job: "job".into(),
        scheduled_at_ms: T0_MS,
        kind,
    }
}

fn now(after_instant_ms: i64) -> Now {
    Now {
        at: tokio::time::Instant::now(),
        unix_ms: T0_MS + after_instant_ms,
    }
}

fn managed(view: ManagedView) -> ClusterView {
    ClusterView {
        node_name: "n1".into(),
        election: Election::Managed(view),
        status: Arc::new(ClusterStatus::Disabled),
    }
}

fn leading() -> ClusterView {
    managed(ManagedView {
        quorate: true,
        leader: Some("n1".into()),
        fence: Some("42".into()),
        ..ManagedView::default()
    })
}

fn following() -> ClusterView {
    managed(ManagedView {
        quorate: true,
        leader: Some("a0".into()),
        reachable_agreeing: vec!["a0".into(), "n1".into()],
        ..ManagedView::default()
    })
}

fn pace() -> Effect {
    Effect::MarkPace {
        executor_id: "shim".into(),
    }
}

fn track() -> Effect {
    Effect::TrackOneShot {
        executor_id: "shim".into(),
    }
}

#[test]
fn an_unregistered_job_has_no_answer() {
    let f = Firing {
        job: "other".into(),
        ..firing(FiringKind::Scheduled)
    };
    assert_eq!(
        gate(&leading(), &set(ClusterPolicy::Leader), &f, now(0)),
        None
    );
}

#[test]
fn the_answer_and_its_effects_by_kind_and_view() {
    use ClusterPolicy::*;
    use FiringKind::*;
    let cases = [
        // view, policy, kind, verdict, reason, fence, effects between pace and record
        // A scheduled Leader RUN is claimed first; retries and PreferLeader are not.
        (
            leading(),
            Leader,
            Scheduled,
            Verdict::Run,
            Reason::Leader,
            Some("42"),
            vec![Effect::ClaimFirst],
        ),
        (
            leading(),
            Leader,
            Retry { attempt: 2 },
            Verdict::Run,
            Reason::Leader,
            Some("42"),
            vec![],
        ),
        (
            leading(),
            PreferLeader,
            Scheduled,
            Verdict::Run,
            Reason::Owner,
            Some("42"),
            vec![],
        ),
        (
            following(),
            Leader,
            Scheduled,
            Verdict::Skip,
            Reason::NotLeader,
            None,
            vec![],
        ),
        (
            leading(),
            Leader,
            Reboot,
            Verdict::Run,
            Reason::Leader,
            Some("42"),
            vec![Effect::RecordOneShotFirst, track()],
        ),
        (
            following(),
            Leader,
            Reboot,
            Verdict::Skip,
            Reason::NotLeader,
            None,
            vec![track()],
        ),
        // A PreferLeader one-shot is not held up by the record (RBT-20).
        (
            leading(),
            PreferLeader,
            Reboot,
            Verdict::Run,
            Reason::Owner,
            Some("42"),
            vec![track()],
        ),
        (
            ClusterView::election_off("n1"),
            Leader,
            Reboot,
            Verdict::Run,
            Reason::ElectionOff,
            None,
            vec![Effect::RecordOneShotFirst, track()],
        ),
        (
            following(),
            EveryNode,
            Scheduled,
            Verdict::Run,
            Reason::EveryNode,
            None,
            vec![],
        ),
    ];
    for (i, (view, policy, kind, verdict, reason, fence, middle)) in cases.into_iter().enumerate() {
        let got = gate(&view, &set(policy), &firing(kind), now(0)).unwrap();
        assert_eq!(got.answer.decision.verdict, verdict, "case {i}");
        assert_eq!(got.answer.decision.reason, reason, "case {i}");
        assert_eq!(got.answer.fence.as_deref(), fence, "case {i}");
        assert_eq!(got.answer.node, "n1");
        let mut effects = vec![pace()];
        effects.extend(middle);
        effects.push(Effect::RecordDecision);
        assert_eq!(got.effects, effects, "case {i}");
    }
}

#[test]
fn a_scheduled_firing_past_its_start_deadline_is_skipped_whoever_leads() {
    let s = set(ClusterPolicy::Leader);
    let deadline = 90_000;
    let on_time = gate(
        &leading(),
        &s,
        &firing(FiringKind::Scheduled),
        now(deadline),
    )
    .unwrap();
    assert_eq!(on_time.answer.decision.verdict, Verdict::Run);
    let late = gate(
        &leading(),
        &s,
        &firing(FiringKind::Scheduled),
        now(deadline + 1),
    )
    .unwrap();
    assert_eq!(late.answer.decision.reason, Reason::StartingDeadline);
    assert_eq!(late.answer.fence, None, "nothing runs, so no fence");
    assert_eq!(
        late.answer.owner.as_deref(),
        Some("n1"),
        "the owner is still named"
    );
    // Retries and one-shots have no start deadline.
    let retry = FiringKind::Retry { attempt: 2 };
    let late_retry = gate(&leading(), &s, &firing(retry), now(deadline * 10)).unwrap();
    assert_eq!(late_retry.answer.decision.verdict, Verdict::Run);
}

#[test]
fn every_answer_to_one_firing_carries_the_same_firing_id() {
    let s = set(ClusterPolicy::Leader);
    let a = gate(&leading(), &s, &firing(FiringKind::Scheduled), now(0)).unwrap();
    let b = gate(
        &following(),
        &s,
        &firing(FiringKind::Scheduled),
        now(100_000),
    )
    .unwrap();
    assert_eq!(a.answer.firing_id, b.answer.firing_id);
    assert_eq!(
        a.answer.firing_id,
        firing_id(&s.id, "job", T0_MS),
        "the key the shim computes alone"
    );
}

#[test]
fn a_lease_holder_not_yet_seen_renewing_defers_a_prefer_leader_firing_and_says_why() {
    let view = managed(ManagedView {
        quorate: true,
        leader: Some("a0".into()),
        lease: Some(LeaseGate {
            holder: Some("a0".into()),
            renewals: Some(HolderRenewals {
                silent: false,
                alive_after_ms: Some(T0_MS - 1),
            }),
        }),
        ..ManagedView::default()
    });
    let s = set(ClusterPolicy::PreferLeader);
    let got = gate(&view, &s, &firing(FiringKind::Scheduled), now(0)).unwrap();
    assert_eq!(got.answer.decision, Decision::defer(Reason::NotOwner));
    assert!(
        got.answer.message.contains("has not been seen renewing"),
        "{}",
        got.answer.message
    );
    // Seen renewing after the instant: the holder runs it, this node skips.
    let renewed = managed(ManagedView {
        lease: Some(LeaseGate {
            holder: Some("a0".into()),
            renewals: Some(HolderRenewals {
                silent: false,
                alive_after_ms: Some(T0_MS + 1),
            }),
        }),
        ..match view.election {
            Election::Managed(m) => m,
            _ => unreachable!(),
        }
    });
    let got = gate(&renewed, &s, &firing(FiringKind::Scheduled), now(0)).unwrap();
    assert_eq!(got.answer.decision.verdict, Verdict::Skip);
}
