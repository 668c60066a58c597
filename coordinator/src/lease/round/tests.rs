//! The lease round rules, table by table: each round's outcome and the time in, the view and
//! the next call out, with no store and no clock.

use std::time::Duration;

use super::*;

const TIMING: super::super::LeaseTiming = super::super::LeaseTiming {
    round_every: Duration::from_secs(1),
    round_timeout: Duration::from_secs(1),
    duration: Duration::from_secs(3),
};

/// A follower's read of `holder`'s record carrying renewal mark `mark`.
fn read(holder: &str, mark: Option<i64>) -> RoundResult {
    RoundResult::Observed(LeaseObservation {
        held_by_me: false,
        holder: Some(holder.to_owned()),
        fence: None,
        expiry_ms: None,
        renewal: mark,
        block: serde_json::Map::new(),
        valid_for: None,
    })
}

/// A round that read nothing (this node stood down) or a read without a renewal mark says
/// nothing about the holder: the next read of the same mark is no renewal, so it neither
/// confirms the holder alive after a firing nor restarts the silence clock.
#[tokio::test(start_paused = true)]
async fn a_round_without_evidence_credits_the_holder_with_no_renewal() {
    for gap in [
        RoundResult::StandDown("standing down: skew".into()),
        read("a", None),
    ] {
        let mut s = Rounds::new("b".into(), "filesystem", TIMING);
        let t0 = Instant::now();
        s.apply(t0, 0, TIMING.duration, read("a", Some(7)));
        s.apply(
            t0 + FOLLOWER_ROUND,
            500,
            TIMING.duration,
            read("a", Some(8)),
        );
        let renewed = s.gate_renewals().expect("a's renewals are tracked");
        assert_eq!(renewed.alive_after_ms, Some(0));
        s.apply(t0 + 2 * FOLLOWER_ROUND, 1_000, TIMING.duration, gap);
        // a renews no more: the same mark, read after the gap.
        s.apply(
            t0 + 3 * FOLLOWER_ROUND,
            1_500,
            TIMING.duration,
            read("a", Some(8)),
        );
        let after = s.gate_renewals().expect("a's renewals are tracked again");
        assert_eq!(
            after.alive_after_ms,
            Some(0),
            "the holder was credited with a renewal it never made"
        );
        let silent_at = t0 + FOLLOWER_ROUND + s.silence;
        s.apply(silent_at, 4_000, TIMING.duration, read("a", Some(8)));
        assert!(
            s.gate_renewals().is_some_and(|r| r.silent),
            "the silence clock restarted at the gap"
        );
    }
}

fn observed(
    held_by_me: bool,
    holder: &str,
    valid_for: Option<Duration>,
) -> Option<Result<LeaseObservation, LeaseError>> {
    Some(Ok(LeaseObservation {
        held_by_me,
        holder: Some(holder.to_owned()),
        fence: held_by_me.then(|| "41".to_owned()),
        expiry_ms: None,
        renewal: None,
        block: serde_json::Map::new(),
        valid_for,
    }))
}

fn round(
    start: Instant,
    call: Call,
    returned: Option<Result<LeaseObservation, LeaseError>>,
) -> Round {
    Round {
        start,
        start_ms: 0,
        call,
        returned,
        clock_skew_ms: None,
        store_verified: None,
        behind: None,
    }
}

fn managed(view: &ClusterView) -> &ManagedView {
    match &view.election {
        Election::Managed(m) => m,
        other => panic!("not a managed view: {other:?}"),
    }
}

/// One row of [`each_round_outcome_sets_the_deadlines_the_gate_reads`].
struct Case {
    what: &'static str,
    call: Call,
    returned: Option<Result<LeaseObservation, LeaseError>>,
    quorate_until: Instant,
    lead_until: Option<Instant>,
    leader: Option<&'static str>,
    fence: Option<&'static str>,
    /// The wait before the next round.
    cadence: Duration,
    /// The round shows an error on `/cluster`.
    error: bool,
}

/// Every kind of round, from a node that held the lease before it: the view's deadlines,
/// leader, fence, error and the next round's cadence.
#[test]
fn each_round_outcome_sets_the_deadlines_the_gate_reads() {
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_secs(1);
    let d = TIMING.duration;
    let held = |what, returned, lead_for: Duration| Case {
        what,
        call: Call::Campaign,
        returned,
        quorate_until: t1 + d,
        lead_until: Some(t1 + lead_for - SAFETY_MARGIN),
        leader: Some("me"),
        fence: Some("41"),
        cadence: TIMING.round_every,
        error: false,
    };
    let not_held = |what, call, returned, leader, error| Case {
        what,
        call,
        returned,
        quorate_until: t1 + d,
        lead_until: None,
        leader,
        fence: None,
        cadence: FOLLOWER_ROUND,
        error,
    };
    // No contact: the deadlines of the round at t0 stand, and the lease still counts as held.
    let no_contact = |what, returned| Case {
        what,
        call: Call::Campaign,
        returned,
        quorate_until: t0 + d,
        lead_until: Some(t0 + d - SAFETY_MARGIN),
        leader: Some("me"),
        fence: Some("41"),
        cadence: TIMING.round_every,
        error: true,
    };
    let granted = Duration::from_millis(2_500);
    let cases = [
        held("renewed", observed(true, "me", None), d),
        held("granted less", observed(true, "me", Some(granted)), granted),
        not_held(
            "lost",
            Call::Campaign,
            observed(false, "other", None),
            Some("other"),
            false,
        ),
        not_held(
            "held under this name by another process",
            Call::Campaign,
            observed(false, "me", None),
            Some("me (another instance)"),
            false,
        ),
        not_held(
            "a follow came back holding",
            Call::Follow,
            observed(true, "me", None),
            None,
            true,
        ),
        not_held(
            "stood down",
            Call::Campaign,
            Some(Err(LeaseError::StandDown("skew".into()))),
            None,
            true,
        ),
        no_contact("failed", Some(Err(LeaseError::Store("refused".into())))),
        no_contact("timed out", None),
    ];
    for c in cases {
        let what = c.what;
        let mut r = Rounds::new("me".into(), "memory", TIMING);
        r.on_round(round(t0, Call::Campaign, observed(true, "me", None)));
        r.on_round(round(t1, c.call, c.returned));
        let view = r.publish(t1);
        let m = managed(&view);
        assert_eq!(
            m.quorate_until,
            Some(c.quorate_until),
            "{what}: quorate until"
        );
        assert_eq!(m.lead_until, c.lead_until, "{what}: lead until");
        assert_eq!(m.leader.as_deref(), c.leader, "{what}: leader");
        assert_eq!(m.fence.as_deref(), c.fence, "{what}: fence");
        assert_eq!(
            r.plan(t1),
            (Call::Campaign, t1 + c.cadence),
            "{what}: next round"
        );
        assert_eq!(r.last_error.is_some(), c.error, "{what}: error shown");
    }
}

/// Quorum and leadership lapse at their deadlines with no round at all: the gate reads them
/// at decision time, so a wedged store call demotes the holder on time.
#[test]
fn leadership_and_quorum_lapse_at_their_deadlines_without_a_round() {
    let t0 = Instant::now();
    let mut r = Rounds::new("me".into(), "memory", TIMING);
    r.on_round(round(t0, Call::Campaign, observed(true, "me", None)));
    let lead_until = t0 + TIMING.duration - SAFETY_MARGIN;
    assert!(r.leads(lead_until - Duration::from_millis(1)));
    assert!(!r.leads(lead_until));
    assert!(r.quorate(t0 + TIMING.duration - Duration::from_millis(1)));
    assert!(!r.quorate(t0 + TIMING.duration));
    assert!(!r.leads(t0 + TIMING.duration), "no leader without quorum");
}

/// An overdue executor: the holder stops leading before the release (one view to publish),
/// only follows while it lasts, and campaigns again once the executor keeps up.
#[test]
fn an_overdue_executor_stops_the_holder_at_once_and_it_only_follows_until_it_keeps_up() {
    let t0 = Instant::now();
    let mut r = Rounds::new("me".into(), "memory", TIMING);
    r.on_round(round(t0, Call::Campaign, observed(true, "me", None)));
    assert!(r.leads(t0));
    let o = Overdue {
        executor: "shim".into(),
        job: "backup".into(),
        due_ms: 0,
    };
    let before_release = r
        .on_overdue(Some(&o), t0)
        .expect("a view to publish before the release");
    let m = managed(&before_release);
    assert_eq!(
        (m.lead_until, m.fence.as_deref()),
        (None, None),
        "not leading, no fence"
    );
    assert!(!r.leads(t0));
    assert_eq!(r.plan(t0).0, Call::Follow);
    // Still overdue: nothing more to publish or release.
    assert_eq!(r.on_overdue(Some(&o), t0), None);
    let mut follow = round(
        t0 + FOLLOWER_ROUND,
        Call::Follow,
        observed(false, "other", None),
    );
    follow.behind = Some(o.to_string());
    r.on_round(follow);
    assert!(
        r.last_error
            .as_deref()
            .is_some_and(|e| e.starts_with("standing down"))
    );
    // Keeps up again: campaign, nothing to release.
    assert_eq!(r.on_overdue(None, t0), None);
    assert_eq!(r.plan(t0).0, Call::Campaign);
    // A follower that falls behind has nothing to give up.
    let mut f = Rounds::new("me".into(), "memory", TIMING);
    f.on_round(round(t0, Call::Campaign, observed(false, "other", None)));
    assert_eq!(f.on_overdue(Some(&o), t0), None);
    assert_eq!(f.plan(t0).0, Call::Follow);
}

#[test]
fn shutting_down_publishes_neither_a_leader_nor_a_quorum() {
    let t0 = Instant::now();
    let mut r = Rounds::new("me".into(), "memory", TIMING);
    r.on_round(round(t0, Call::Campaign, observed(true, "me", None)));
    let view = r.shut_down(t0);
    let m = managed(&view);
    assert!(!m.quorate && m.lead_until.is_none() && m.fence.is_none());
    assert_eq!(
        view.gate_signals(t0).map(|s| (s.quorate, s.is_leader)),
        Some((false, false))
    );
}

/// `cluster.leaderEligible: false`: the node never campaigns, whatever happens, reads the
/// holder like any follower, and says so in its lease block.
#[test]
fn a_node_that_may_not_lead_only_ever_follows() {
    let t0 = Instant::now();
    let mut r = Rounds::new("me".into(), "memory", TIMING).with_eligibility(false);
    assert_eq!(r.plan(t0).0, Call::Follow);
    r.on_round(round(t0, Call::Follow, observed(false, "other", None)));
    assert!(!r.leads(t0));
    let o = Overdue {
        executor: "shim".into(),
        job: "backup".into(),
        due_ms: 0,
    };
    assert_eq!(r.on_overdue(Some(&o), t0), None);
    assert_eq!(r.on_overdue(None, t0), None);
    assert_eq!(
        r.plan(t0).0,
        Call::Follow,
        "keeping up again is no reason to campaign"
    );
    let view = r.publish(t0);
    let ClusterStatus::Lease(status) = view.status.as_ref() else {
        panic!("a lease status");
    };
    assert_eq!(status.lease["leaderEligible"], false);
    let eligible = Rounds::new("me".into(), "memory", TIMING);
    assert_eq!(eligible.plan(t0).0, Call::Campaign);
}
