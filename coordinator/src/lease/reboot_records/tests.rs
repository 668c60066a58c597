//! Unit tests of the lease driver's "already ran" record rules, through the real gate and
//! decision table.

use super::*;
use crate::cluster::{ClusterView, Election, LeaseGate, ManagedView};
use cronstable_core::{ClusterPolicy, Decision, FiringKind, Gate, Reason, Verdict, decide};

/// Decides a `@reboot` one-shot of `job` as `CoordinatorState::should_run` does.
fn decide_reboot(
    policy: ClusterPolicy,
    quorate: bool,
    record: Arc<RebootRanRecord>,
    id: &str,
) -> Decision {
    let view = ClusterView {
        election: Election::Managed(ManagedView {
            quorate,
            lease: Some(LeaseGate::default()),
            reboot_ran: Some(record),
            ..ManagedView::default()
        }),
        ..ClusterView::election_off("n1")
    };
    let mut gate = view.gate_for("boot", Instant::now());
    if let (Gate::Manager(g), Election::Managed(m)) = (&mut gate, &view.election) {
        g.reboot_ran_unknown = m.reboot_ran.as_ref().is_some_and(|r| r.job_set_id != id);
    }
    decide(policy, FiringKind::Reboot, gate)
}

#[test]
fn rbt_22_no_not_ran_answer_before_a_read_back_then_already_ran() {
    let own = RebootRan::new();
    let mut rec = RebootRecords::new();
    rec.after_round("v1:a", true);
    let d = decide_reboot(
        ClusterPolicy::Leader,
        true,
        rec.record("v1:a", &own, true),
        "v1:a",
    );
    assert_eq!(
        (d.verdict, d.reason),
        (Verdict::Defer, Reason::ConvergenceHold)
    );
    let now = Instant::now();
    assert!(rec.read_due(now));
    rec.read_done("v1:a", ["boot".to_owned()].into(), now);
    assert!(!rec.read_due(now));
    let d = decide_reboot(
        ClusterPolicy::Leader,
        true,
        rec.record("v1:a", &own, true),
        "v1:a",
    );
    assert_eq!((d.verdict, d.reason), (Verdict::Skip, Reason::AlreadyRan));
    // Losing and regaining leadership forces a fresh read; so does a new job set.
    rec.after_round("v1:a", false);
    assert!(!rec.read_due(now));
    rec.after_round("v1:a", true);
    assert!(rec.read_due(now));
    rec.read_done("v1:a", BTreeSet::new(), now);
    rec.after_round("v1:b", true);
    assert!(rec.read_due(now));
    let d = decide_reboot(
        ClusterPolicy::Leader,
        true,
        rec.record("v1:b", &own, true),
        "v1:b",
    );
    assert_eq!(
        d.verdict,
        Verdict::Defer,
        "a record about another job set is not trusted"
    );
}

#[test]
fn rbt_20_prefer_leader_runs_while_the_store_is_unreachable_leader_does_not() {
    let own = RebootRan::new();
    let rec = RebootRecords::new();
    let record = rec.record("v1:a", &own, false);
    let d = decide_reboot(ClusterPolicy::PreferLeader, false, record.clone(), "v1:a");
    assert_eq!(d.verdict, Verdict::Run);
    let d = decide_reboot(ClusterPolicy::Leader, false, record, "v1:a");
    assert_eq!((d.verdict, d.reason), (Verdict::Defer, Reason::NoQuorum));
}

#[test]
fn rbt_21_own_marks_are_published_until_written_and_written_once() {
    let own = RebootRan::new();
    own.mark("v1:a", "boot");
    let mut rec = RebootRecords::new();
    rec.read_done("v1:a", BTreeSet::new(), Instant::now());
    assert!(rec.record("v1:a", &own, true).jobs.contains("boot"));
    let pending = rec.unwritten("v1:a", &own);
    assert_eq!(pending.len(), 1);
    rec.write_done("v1:a", &pending);
    assert!(rec.unwritten("v1:a", &own).is_empty());
}
