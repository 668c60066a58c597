//! Table tests for the gossip round (`cronstable_core::gossip`): per-peer statuses and the drift
//! streak (GSP-20..23), self-listings (GSP-32..34), duplicate names with the one-hop debounce and
//! "direct view wins" (GSP-70..73), size and policy conflicts (GSP-80..85, GSP-90), the
//! convergence hold (GSP-100..105) and the candidate cap (GSP-60..62).

use std::sync::Arc;

use cronstable_core::drift::PeerStatus;
use cronstable_core::gossip::{
    ConflictKind, Distribution, GossipState, LocalNode, MAX_CANDIDATES, MemberReport, PeerReport,
    PollOutcome, RoundEvent, fresh_report,
};

const JS: &str = "v1:aaaa";
const OTHER_JS: &str = "v1:bbbb";

fn local(name: &str, configured_size: usize) -> LocalNode {
    LocalNode {
        name: name.into(),
        instance_id: format!("{name}-i1"),
        job_set_id: JS.into(),
        configured_size,
        elect_leader: true,
        distribution: Distribution::SingleLeader,
        drift_after: 3,
        interval_ms: 1000,
    }
}

/// A report from `name` (instance `<name>-i1`) that attests `me` as agreed.
fn report(name: &str, me: &LocalNode, size: usize, quorate: bool) -> PeerReport {
    let mut r = fresh_report(&local(name, size));
    r.cluster_size = size;
    r.quorate = quorate;
    r.members.push(MemberReport {
        name: me.name.clone(),
        instance_id: me.instance_id.clone(),
        status: PeerStatus::Agreed,
    });
    r
}

fn rep(r: PeerReport) -> PollOutcome {
    PollOutcome::Report(Arc::new(r))
}

fn unreachable() -> PollOutcome {
    PollOutcome::Unreachable {
        error: "connection refused".into(),
    }
}

#[test]
fn gsp_20_to_23_status_and_streak_across_rounds() {
    let me = local("a", 2);
    let mut st = GossipState::new(1, 0);
    let mut mism = report("b", &me, 2, false);
    mism.job_set_id = OTHER_JS.into();
    // (outcome, expected status, expected streak)
    let table: Vec<(PollOutcome, PeerStatus, u32)> = vec![
        (rep(mism.clone()), PeerStatus::Syncing, 1),
        (unreachable(), PeerStatus::Unreachable, 1), // GSP-21: failed rounds keep the streak
        (
            PollOutcome::Untrusted {
                error: "bad cert".into(),
            },
            PeerStatus::Untrusted,
            1,
        ),
        (rep(mism.clone()), PeerStatus::Syncing, 2),
        (rep(mism.clone()), PeerStatus::Drifted, 3), // GSP-20: driftAfter = 3
        (unreachable(), PeerStatus::Unreachable, 3),
        (rep(mism.clone()), PeerStatus::Drifted, 4),
        (rep(report("b", &me, 2, false)), PeerStatus::Agreed, 0), // GSP-22
        (rep(mism), PeerStatus::Syncing, 1),
    ];
    for (round, (poll, status, streak)) in table.into_iter().enumerate() {
        let v = st.round(&me, &[poll], round as u64);
        assert_eq!(v.peers[0].status, Some(status), "round {round}");
        assert_eq!(v.peers[0].mismatch_streak, streak, "round {round}");
    }
}

#[test]
fn not_polled_has_no_status_and_errors_are_kept() {
    let me = local("a", 2);
    let mut st = GossipState::new(1, 0);
    let v = st.round(&me, &[PollOutcome::NotPolled], 0);
    assert_eq!(v.peers[0].status, None);
    assert!(v.events.is_empty());
    let v = st.round(&me, &[unreachable()], 1);
    assert_eq!(v.peers[0].last_error.as_deref(), Some("connection refused"));
    assert_eq!(
        v.events,
        vec![RoundEvent::PeerBecame {
            peer: 0,
            status: PeerStatus::Unreachable
        }]
    );
    // A missing entry in `polls` is NotPolled, not a panic.
    let v = st.round(&me, &[], 2);
    assert_eq!(v.peers[0].status, None);
}

#[test]
fn gsp_32_33_self_listing_excluded_from_n_and_logged_once() {
    let me = local("a", 4); // peers: b, c, and my own routable address
    let mut st = GossipState::new(3, 0);
    let myself = fresh_report(&me);
    for round in 0..3u64 {
        let polls = [
            rep(report("b", &me, 3, true)),
            rep(report("c", &me, 3, true)),
            rep(myself.clone()),
        ];
        let v = st.round(&me, &polls, round);
        assert_eq!(v.peers[2].status, Some(PeerStatus::SelfListing));
        assert_eq!(v.effective_size, 3);
        assert_eq!(v.quorum, 2);
        assert_eq!(v.agreeing.len(), 3);
        assert!(!v.conflicts.any(), "a self-listing trips no size check");
        assert!(v.advert.members.iter().all(|m| m.name != "a"));
        let recognised = v
            .events
            .iter()
            .filter(|e| matches!(e, RoundEvent::SelfListingRecognised { peer: 2 }))
            .count();
        assert_eq!(recognised, usize::from(round == 0), "round {round}");
        assert!(!v.events.contains(&RoundEvent::DegenerateTwoOfTwo));
    }
}

#[test]
fn gsp_34_self_padded_three_is_a_degenerate_two_of_two_warned_once() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    for round in 0..3u64 {
        let polls = [rep(report("b", &me, 2, true)), rep(fresh_report(&me))];
        let v = st.round(&me, &polls, round);
        assert_eq!((v.effective_size, v.quorum), (2, 2));
        assert!(v.quorate);
        let warned = v.events.contains(&RoundEvent::DegenerateTwoOfTwo);
        assert_eq!(warned, round == 0, "round {round}");
    }
}

#[test]
fn gsp_40_42_mutual_agreement_gates_quorum_and_leader() {
    let me = local("b", 3);
    let mut st = GossipState::new(2, 0);
    // c agrees but does not list me: one-directional, so not mutual.
    let mut c = report("c", &me, 3, false);
    c.members.clear();
    let v = st.round(&me, &[unreachable(), rep(c.clone())], 0);
    assert!(v.agreeing.contains("c"));
    assert!(v.mutual_agreeing.is_empty());
    assert!(!v.quorate);
    assert_eq!(v.leader, None);
    // c lists an older incarnation of me: still not mutual (GSP-105).
    c.members.push(MemberReport {
        name: "b".into(),
        instance_id: "b-i0".into(),
        status: PeerStatus::Agreed,
    });
    let v = st.round(&me, &[unreachable(), rep(c.clone())], 1);
    assert!(!v.quorate);
    // Now it attests this incarnation.
    let v = st.round(&me, &[unreachable(), rep(report("c", &me, 3, false))], 2);
    assert!(v.quorate);
    // First quorate rounds: my flag has not travelled yet, so I do not count myself (rule 4's
    // delayed self-candidacy), though I already vouch for myself.
    assert_eq!(v.leader, None);
    assert!(!v.self_candidate);
    assert_eq!(v.advert.quorate_vouched, vec!["b".to_string()]);
    let v = st.round(&me, &[unreachable(), rep(report("c", &me, 3, false))], 2);
    assert_eq!(v.leader, None);
    let v = st.round(&me, &[unreachable(), rep(report("c", &me, 3, false))], 2);
    assert!(v.self_candidate);
    assert_eq!(v.leader.as_deref(), Some("b"));
    // Losing quorum stands down at once, and the count starts again.
    let v = st.round(&me, &[unreachable(), unreachable()], 2);
    assert_eq!((v.quorate, v.leader.as_deref()), (false, None));
    let v = st.round(&me, &[unreachable(), rep(report("c", &me, 3, false))], 2);
    assert_eq!((v.quorate, v.leader.as_deref()), (true, None));
    // a is vouched for by c (one hop): a is a candidate and, being lower, leads.
    let mut c = report("c", &me, 3, true);
    c.quorate_vouched = vec!["a".into(), "b".into(), "c".into()];
    let v = st.round(&me, &[unreachable(), rep(c)], 3);
    assert_eq!(v.leader.as_deref(), Some("a"));
    assert!(v.vouched_unconfirmed.contains("a"));
    assert!(!v.vouched_unconfirmed.contains("b"));
    // Vouching stays one hop: a is not re-advertised.
    assert_eq!(
        v.advert.quorate_vouched,
        vec!["b".to_string(), "c".to_string()]
    );
}

#[test]
fn no_leader_under_spread_or_without_elect_leader() {
    for (distribution, elect) in [
        (Distribution::Spread, true),
        (Distribution::SingleLeader, false),
    ] {
        let mut me = local("a", 3);
        me.distribution = distribution;
        me.elect_leader = elect;
        let mut b = report("b", &me, 3, true);
        b.distribution = distribution;
        b.elect_leader = elect;
        let mut st = GossipState::new(2, 0);
        let v = st.round(&me, &[rep(b), unreachable()], 0);
        assert!(v.quorate);
        assert_eq!(v.leader, None);
        assert!(!v.conflicts.any());
    }
}

fn names_events(events: &[RoundEvent]) -> (bool, bool) {
    let onset = events.iter().any(|e| {
        matches!(
            e,
            RoundEvent::ConflictOnset {
                kind: ConflictKind::Names,
                ..
            }
        )
    });
    let cleared = events.contains(&RoundEvent::ConflictCleared {
        kind: ConflictKind::Names,
    });
    (onset, cleared)
}

#[test]
fn gsp_71_73_a_peer_with_my_name_is_a_conflict_with_onset_and_clear() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    let mut dup = report("a", &me, 3, true);
    dup.instance_id = "a-other".into();
    let v = st.round(&me, &[rep(report("b", &me, 3, true)), rep(dup.clone())], 0);
    assert_eq!(v.peers[1].status, Some(PeerStatus::Conflict));
    assert_eq!(v.conflicts.names, vec!["a".to_string()]);
    assert!(v.conflicts.any());
    assert_eq!(names_events(&v.events), (true, false));
    let v = st.round(&me, &[rep(report("b", &me, 3, true)), rep(dup)], 1);
    assert_eq!(names_events(&v.events), (false, false), "edge-triggered");
    let v = st.round(
        &me,
        &[
            rep(report("b", &me, 3, true)),
            rep(report("c", &me, 3, true)),
        ],
        2,
    );
    assert!(!v.conflicts.any());
    assert_eq!(names_events(&v.events), (false, true));
}

#[test]
fn gsp_71_two_direct_peers_with_one_name_conflict_at_once() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    let mut x2 = report("x", &me, 3, true);
    x2.instance_id = "x-i2".into();
    let v = st.round(&me, &[rep(report("x", &me, 3, true)), rep(x2)], 0);
    assert_eq!(v.conflicts.names, vec!["x".to_string()]);
    assert_eq!(v.agreeing.len(), 2, "a name counts once");
}

fn member(name: &str, id: &str) -> MemberReport {
    MemberReport {
        name: name.into(),
        instance_id: id.into(),
        status: PeerStatus::Agreed,
    }
}

#[test]
fn gsp_71_one_hop_duplicate_needs_three_rounds_and_direct_view_wins() {
    let me = local("a", 4);
    let mut st = GossipState::new(3, 0);
    // b and c both list x, with different instance ids; I cannot reach x myself.
    let mut b = report("b", &me, 4, true);
    b.members.push(member("x", "x-1"));
    let mut c = report("c", &me, 4, true);
    c.members.push(member("x", "x-2"));
    let polls = [rep(b.clone()), rep(c.clone()), unreachable()];
    for round in 0..5u64 {
        let v = st.round(&me, &polls, round);
        let expect = round >= 2;
        assert_eq!(v.conflicts.names_conflict(), expect, "round {round}");
        assert_eq!(names_events(&v.events).0, round == 2, "round {round}");
    }
    // Now I see x directly: my fresher view wins and the one-hop duplicate is ignored.
    let polls = [
        rep(b.clone()),
        rep(c.clone()),
        rep(report("x", &me, 4, true)),
    ];
    let v = st.round(&me, &polls, 5);
    assert!(!v.conflicts.names_conflict());
    assert_eq!(names_events(&v.events), (false, true));
    // A gap of one round restarts the debounce.
    let polls = [rep(b.clone()), rep(c.clone()), unreachable()];
    assert!(!st.round(&me, &polls, 6).conflicts.any());
    assert!(!st.round(&me, &polls, 7).conflicts.any());
    assert!(st.round(&me, &polls, 8).conflicts.any());
}

#[test]
fn gsp_71_one_hop_entry_for_my_name_with_another_id_debounced() {
    // A witness still listing my previous incarnation for two rounds (a restart) is no conflict;
    // a third round is.
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    let mut b = report("b", &me, 3, true);
    b.members = vec![member("a", "a-i0")];
    let polls = [rep(b), unreachable()];
    assert!(!st.round(&me, &polls, 0).conflicts.any());
    assert!(!st.round(&me, &polls, 1).conflicts.any());
    assert_eq!(
        st.round(&me, &polls, 2).conflicts.names,
        vec!["a".to_string()]
    );
}

#[test]
fn one_hop_ignores_unreachable_entries_and_non_live_reporters() {
    let me = local("a", 4);
    let mut st = GossipState::new(3, 0);
    let mut b = report("b", &me, 4, true);
    b.members.push(MemberReport {
        name: "x".into(),
        instance_id: "x-1".into(),
        status: PeerStatus::Unreachable,
    });
    let mut c = report("c", &me, 4, true);
    c.members.push(member("x", "x-2"));
    for round in 0..4u64 {
        let v = st.round(&me, &[rep(b.clone()), rep(c.clone()), unreachable()], round);
        assert!(!v.conflicts.any(), "round {round}");
    }
}

#[test]
fn gsp_80_85_size_conflict_whatever_the_job_set() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    let mut b = report("b", &me, 5, true);
    b.job_set_id = OTHER_JS.into(); // GSP-81: job-set agreement is ignored
    let v = st.round(&me, &[rep(b), rep(report("c", &me, 3, true))], 0);
    assert!(v.conflicts.size_conflict());
    assert_eq!(v.conflicts.sizes, vec![3, 5]);
    assert!(v.events.contains(&RoundEvent::ConflictOnset {
        kind: ConflictKind::Size,
        detail: "3, 5".into()
    }));
    // GSP-84: a pure job change at a fixed N is no conflict.
    let mut b = report("b", &me, 3, true);
    b.job_set_id = OTHER_JS.into();
    let v = st.round(&me, &[rep(b), rep(report("c", &me, 3, true))], 1);
    assert!(!v.conflicts.any());
    assert!(v.events.contains(&RoundEvent::ConflictCleared {
        kind: ConflictKind::Size
    }));
}

#[test]
fn gsp_90_policy_conflict_lists_each_differing_peer() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    let mut b = report("b", &me, 3, true);
    b.distribution = Distribution::Spread;
    let mut c = report("c", &me, 3, true);
    c.elect_leader = false;
    c.job_set_id = OTHER_JS.into();
    let v = st.round(&me, &[rep(c), rep(b)], 0);
    assert_eq!(
        v.conflicts.policies,
        vec![
            "b: distribution=spread, elect_leader=true".to_string(),
            "c: distribution=single-leader, elect_leader=false".to_string(),
        ]
    );
    assert!(v.conflicts.any() && !v.conflicts.size_conflict() && !v.conflicts.names_conflict());
}

#[test]
fn gsp_100_hold_ends_when_all_polled_and_attested() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 1_000);
    let mut b = report("b", &me, 3, true);
    b.members.clear();
    // Not every peer polled yet.
    assert!(
        st.round(&me, &[rep(b.clone()), PollOutcome::NotPolled], 1_010)
            .converging
    );
    // Every peer polled, but b has not re-attested this incarnation.
    assert!(st.round(&me, &[rep(b), unreachable()], 1_020).converging);
    let v = st.round(&me, &[rep(report("b", &me, 3, true)), unreachable()], 1_030);
    assert!(!v.converging);
    // Once ended, stays ended.
    let mut b = report("b", &me, 3, true);
    b.members.clear();
    assert!(
        !st.round(&me, &[rep(b), PollOutcome::NotPolled], 1_040)
            .converging
    );
}

#[test]
fn gsp_100_hold_times_out_after_two_intervals() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 1_000);
    let polls = [PollOutcome::NotPolled, PollOutcome::NotPolled];
    assert!(st.round(&me, &polls, 1_000).converging);
    assert!(st.round(&me, &polls, 2_999).converging);
    assert!(!st.round(&me, &polls, 3_000).converging);
    assert!(!st.round(&me, &polls, 3_001).converging);
}

#[test]
fn gsp_60_62_candidate_cap_drops_the_highest_names() {
    // 600 directly confirmed candidates: me (n0000) and 599 agreed, quorate peers.
    let me = local("n0000", 600);
    let reports: Vec<PollOutcome> = (1..600)
        .map(|i| rep(report(&format!("n{i:04}"), &me, 600, true)))
        .collect();
    let mut st = GossipState::new(599, 0);
    let v = st.round(&me, &reports, 0);
    assert!(v.quorate);
    assert_eq!(
        v.candidates.len(),
        599,
        "first quorate rounds: not yet my own candidate"
    );
    assert_eq!(v.advert.quorate_vouched.len(), MAX_CANDIDATES);
    assert_eq!(v.advert.candidates_truncated, 600);
    assert_eq!(
        v.advert.quorate_vouched.first().map(String::as_str),
        Some("n0000")
    );
    assert_eq!(
        v.advert.quorate_vouched.last().map(String::as_str),
        Some("n0511")
    );
    assert!(
        v.events
            .contains(&RoundEvent::CandidatesTruncated { count: 600 })
    );
    // Same count next round: no repeat warning.
    let v = st.round(&me, &reports, 1);
    assert_eq!(v.candidates.len(), 599);
    let v = st.round(&me, &reports, 2);
    assert_eq!(v.candidates.len(), 600);
    assert!(
        !v.events
            .iter()
            .any(|e| matches!(e, RoundEvent::CandidatesTruncated { .. }))
    );
    let r = v.report(&me, vec!["boot".into()]);
    assert_eq!(r.quorate_vouched.len(), 512);
    assert_eq!(r.candidates_truncated, 600);
    assert_eq!(r.cluster_size, 600);
    assert_eq!(r.ran_reboot_jobs, vec!["boot".to_string()]);
}

#[test]
fn oversize_names_are_ignored_not_fatal() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    let long = "x".repeat(300);
    let mut b = report("b", &me, 3, true);
    b.quorate_vouched = vec![long.clone()];
    b.members.push(member(&long, "1"));
    b.members.push(member(&long, "2"));
    let mut c = report(&long, &me, 3, true);
    c.node_name = long.clone();
    for round in 0..4u64 {
        let v = st.round(&me, &[rep(b.clone()), rep(c.clone())], round);
        assert!(!v.candidates.contains(&long));
        assert!(!v.conflicts.any(), "round {round}");
        assert_eq!(v.peers[1].status, Some(PeerStatus::Unreachable));
    }
}

/// Standing down (rule 4): a node whose executor is overdue keeps its quorum and its `quorate`
/// flag but is not its own candidate, does not vouch for itself, and says so in its advert.
/// Once it stops, it counts itself only after `SELF_CANDIDATE_ROUNDS` rounds, as after a boot.
#[test]
fn a_node_standing_down_is_no_candidate_and_waits_three_rounds_to_return() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    let polls = || {
        [
            rep(report("b", &me, 3, true)),
            rep(report("c", &me, 3, true)),
        ]
    };
    for round in 0..3u64 {
        st.round(&me, &polls(), round);
    }
    let v = st.round(&me, &polls(), 3);
    assert_eq!(
        v.leader.as_deref(),
        Some("a"),
        "a leads before it stands down"
    );

    st.set_standing_down(true);
    let v = st.round(&me, &polls(), 4);
    assert!(v.quorate, "standing down keeps the quorum");
    assert!(
        !v.advert.quorate,
        "but says it is not quorate, so no peer, old or new, counts it as a candidate"
    );
    assert!(!v.self_candidate);
    assert_eq!(
        v.leader.as_deref(),
        Some("b"),
        "the next lowest candidate leads"
    );
    assert!(v.advert.standing_down);
    assert_eq!(
        v.advert.quorate_vouched,
        vec!["b", "c"],
        "a vouches for others only"
    );
    assert!(v.standing_down.contains("a"));
    assert!(v.report(&me, Vec::new()).standing_down);

    st.set_standing_down(false);
    for round in 5..7u64 {
        let v = st.round(&me, &polls(), round);
        assert!(!v.advert.standing_down);
        assert!(
            v.advert.quorate_vouched.contains(&"a".to_string()),
            "round {round}"
        );
        assert_eq!(v.leader.as_deref(), Some("b"), "round {round}: a waits");
    }
    let v = st.round(&me, &polls(), 7);
    assert_eq!(
        v.leader.as_deref(),
        Some("a"),
        "a counts itself on the third round"
    );
}

/// A peer's own report that it stands down takes it out of the candidates at once, even while
/// a witness still vouches for it from an older round; it stays in `agreeing` and the quorum.
#[test]
fn a_peer_reporting_standing_down_is_passed_over_whatever_a_witness_vouches() {
    let me = local("c", 3);
    let mut st = GossipState::new(2, 0);
    let mut a = report("a", &me, 3, true);
    let mut b = report("b", &me, 3, true);
    b.quorate_vouched = vec!["a".into(), "b".into()];
    for round in 0..3u64 {
        st.round(&me, &[rep(a.clone()), rep(b.clone())], round);
    }
    let v = st.round(&me, &[rep(a.clone()), rep(b.clone())], 3);
    assert_eq!(v.leader.as_deref(), Some("a"));

    a.standing_down = true;
    let v = st.round(&me, &[rep(a.clone()), rep(b.clone())], 4);
    assert!(!v.candidates.contains("a"), "candidates {:?}", v.candidates);
    assert!(v.agreeing.contains("a") && v.quorate);
    assert_eq!(v.leader.as_deref(), Some("b"));
    assert_eq!(v.standing_down.iter().collect::<Vec<_>>(), vec!["a"]);
    assert!(!v.advert.quorate_vouched.contains(&"a".to_string()));

    // Unreachable: only the witness speaks for it, and its vouching counts again.
    let v = st.round(&me, &[unreachable(), rep(b.clone())], 5);
    assert!(v.candidates.contains("a"));
}

/// A report from `name` that attests `me` and lists `leading` as the nodes it saw lead.
fn leading_report(name: &str, me: &LocalNode, leading: &[&str]) -> PeerReport {
    let mut r = report(name, me, 3, true);
    r.leading = Some(leading.iter().map(|s| (*s).to_owned()).collect());
    r
}

/// Rounds 0..5 of `me` (named "a") in a cluster where b leads and c saw it: `me` follows b.
fn follow_b_for_five_rounds(st: &mut GossipState, me: &LocalNode) {
    for round in 0..5u64 {
        let polls = [
            rep(leading_report("b", me, &["b"])),
            rep(leading_report("c", me, &["b"])),
        ];
        let v = st.round(me, &polls, round);
        assert_eq!(v.leader.as_deref(), Some("b"), "round {round}");
        assert!(!v.advert.leading.contains(&"a".to_string()));
    }
}

/// Rule 4a: a node that returns to a cluster with a leader follows it, although its name is
/// lower, whether it sees the claim directly or through a witness; a peer that predates the
/// field (no `leading` at all) brings back the plain lowest-name rule.
#[test]
fn a_returning_lower_node_follows_the_leader_it_finds() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    follow_b_for_five_rounds(&mut st, &me);
    // b unreachable this round: c's witness still shows b leading, and b is vouched.
    let mut c = leading_report("c", &me, &["b"]);
    c.quorate_vouched = vec!["b".into(), "c".into()];
    let v = st.round(&me, &[unreachable(), rep(c)], 5);
    assert_eq!(v.leader.as_deref(), Some("b"));

    let mut legacy = GossipState::new(2, 0);
    for round in 0..4u64 {
        let mut old = report("b", &me, 3, true);
        old.leading = None;
        let v = legacy.round(&me, &[rep(old), rep(leading_report("c", &me, &[]))], round);
        if round == 3 {
            assert_eq!(
                v.leader.as_deref(),
                Some("a"),
                "the plain rule with an old peer"
            );
        }
    }
}

/// Rule 4a: a peer's own report this round outranks a witness's relay of its claim. The leader
/// b is restarted at once (a deploy): its new instance's report does not list itself in
/// `leading`, while the witness c, not yet past its next round, still relays b's old claim
/// and vouches for it. Following that claim would leave nobody leading until c's next round
/// (the timed simulator lost three firings that way); the lowest candidate, me, leads instead.
#[test]
fn a_witness_relaying_a_claim_its_claimant_no_longer_makes_is_not_followed() {
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    follow_b_for_five_rounds(&mut st, &me);
    let mut restarted = leading_report("b", &me, &[]);
    restarted.instance_id = "b-i2".into();
    restarted.quorate = false;
    let mut c = leading_report("c", &me, &["b"]);
    c.quorate_vouched = vec!["b".into(), "c".into()];
    let v = st.round(&me, &[rep(restarted), rep(c)], 5);
    assert!(!v.incumbents.contains("b"), "claims: {:?}", v.incumbents);
    assert_eq!(v.leader.as_deref(), Some("a"));
}

/// Rule 4c: the lowest node, which every other configured node agrees with, attests and
/// elects, counts itself at once instead of after rule 4's three quorate rounds, but only
/// once its own advert has made it their candidate. A node that is not the lowest, or lacks
/// one vote, waits the three rounds.
#[test]
fn the_lowest_node_elected_by_every_peer_counts_itself_without_waiting() {
    // A first-hand vote: the voter saw `me` quorate itself (`quorate_vouched`).
    let voting = |name: &str, me: &LocalNode, vote: Option<&str>| {
        let mut r = leading_report(name, me, &[]);
        r.elects = vote.map(str::to_owned);
        r.quorate_vouched = vec![me.name.clone(), name.to_owned()];
        rep(r)
    };
    // Round 0: quorate (its advert is not out yet); round 1: elected by both, it leads.
    let me = local("a", 3);
    let mut st = GossipState::new(2, 0);
    let polls = [voting("b", &me, Some("a")), voting("c", &me, Some("a"))];
    assert_eq!(st.round(&me, &polls, 0).leader.as_deref(), Some("b"));
    let v = st.round(&me, &polls, 1);
    assert_eq!(
        v.leader.as_deref(),
        Some("a"),
        "elected by all on its second round"
    );
    assert_eq!(v.advert.elects.as_deref(), Some("a"));

    // One vote missing: rule 4's three rounds.
    let mut st = GossipState::new(2, 0);
    let split = [voting("b", &me, Some("a")), voting("c", &me, Some("b"))];
    let led: Vec<Option<String>> = (0..3).map(|r| st.round(&me, &split, r).leader).collect();
    assert_eq!(led, [Some("b".into()), Some("b".into()), Some("a".into())]);

    // Not the lowest: b, elected by a and c, still waits (a could count itself first).
    let b = local("b", 3);
    let mut st = GossipState::new(2, 0);
    let votes = [voting("a", &b, Some("b")), voting("c", &b, Some("b"))];
    for round in 0..2 {
        assert_ne!(st.round(&b, &votes, round).leader.as_deref(), Some("b"));
    }
}

/// Rule 4a from the leader's side: a lower candidate that appears once this node has led for
/// two rounds joined a cluster that had a leader, and does not take the lead; one that appears
/// within two rounds of the first lead may not have seen the claim in time, so the plain rule
/// applies and the lower name wins.
#[test]
fn a_leader_keeps_the_lead_unless_a_lower_node_appeared_before_its_claim_was_known() {
    for (joins_at, keeps) in [(2u64, true), (1, false)] {
        let me = local("b", 3);
        let mut st = GossipState::new(2, 0);
        let silent_a = || {
            let mut r = report("a", &me, 3, false);
            r.leading = Some(Vec::new());
            r
        };
        let mut led_at = None;
        for round in 0..20u64 {
            let a_quorate = led_at.is_some_and(|l| round >= l + joins_at);
            let mut a = silent_a();
            a.quorate = a_quorate;
            let v = st.round(&me, &[rep(a), rep(leading_report("c", &me, &[]))], round);
            if led_at.is_none() && v.leader.as_deref() == Some("b") {
                led_at = Some(round);
            }
            if a_quorate && round >= led_at.unwrap() + joins_at + 2 {
                let expected = if keeps { "b" } else { "a" };
                assert_eq!(
                    v.leader.as_deref(),
                    Some(expected),
                    "a joins {joins_at} rounds after b's first lead, round {round}"
                );
            }
        }
        assert!(led_at.is_some(), "b led");
    }
}

/// Rule 4c counts first-hand votes only (issue 43, item 5): the seven steps by which a vote
/// for `a`'s previous life elected its restarted self beside `b`. a leads as `a-i1`; it
/// restarts as `a-i2`; c folds the new a with b's report from before the restart (a stale,
/// in-flight poll), so c elects "a" only on b's relay; b does the same with c's old report;
/// a-i2 folds both votes, becomes a candidate, and on its next fold counts itself elected by
/// all; b, reading a-i2's report from before that fold, leads too. Red on the rule that read
/// `elects == me` alone: steps 6 and 7 had a and b both quorate and self-elected.
#[test]
fn a_vote_relayed_from_a_previous_life_does_not_elect_the_restarted_node() {
    let (a, b, c) = (local("a", 3), local("b", 3), local("c", 3));
    let (mut sa, mut sb, mut sc) = (
        GossipState::new(2, 0),
        GossipState::new(2, 0),
        GossipState::new(2, 0),
    );
    // Step 1: a leads, in lockstep.
    let mut served = [fresh_report(&a), fresh_report(&b), fresh_report(&c)].map(Arc::new);
    let polls = |served: &[Arc<PeerReport>; 3], i: usize| -> Vec<PollOutcome> {
        (0..3)
            .filter(|&j| j != i)
            .map(|j| PollOutcome::Report(Arc::clone(&served[j])))
            .collect()
    };
    for t in 0..6 {
        let now = t * 1000;
        let va = sa.round(&a, &polls(&served, 0), now);
        let vb = sb.round(&b, &polls(&served, 1), now);
        let vc = sc.round(&c, &polls(&served, 2), now);
        served = [
            Arc::new(va.report(&a, Vec::new())),
            Arc::new(vb.report(&b, Vec::new())),
            Arc::new(vc.report(&c, Vec::new())),
        ];
        if t == 5 {
            assert_eq!(va.leader.as_deref(), Some("a"));
            assert_eq!(vb.leader.as_deref(), Some("a"));
        }
    }
    let [_, b0, c0] = served.clone();
    // Step 2: a restarts as a-i2 and serves its fresh report.
    let mut a1 = a.clone();
    a1.instance_id = "a-i2".into();
    let mut sa1 = GossipState::new(2, 6_000);
    let a1f = Arc::new(fresh_report(&a1));
    let r = |x: &Arc<PeerReport>| PollOutcome::Report(Arc::clone(x));
    // Step 3: c folds the new a with b's report from before the restart.
    let v3 = sc.round(&c, &[r(&a1f), r(&b0)], 6_100);
    assert_eq!(v3.leader.as_deref(), Some("a"), "c elects a on b's relay");
    let c1 = Arc::new(v3.report(&c, Vec::new()));
    // Step 4: b folds the new a with c's report from before step 3.
    let v4 = sb.round(&b, &[r(&a1f), r(&c0)], 6_110);
    assert_eq!(v4.leader.as_deref(), Some("a"), "b elects a on c's relay");
    let b1 = Arc::new(v4.report(&b, Vec::new()));
    // Step 5: a-i2 folds both votes: quorate, a candidate from now on, b leads in its view.
    let v5 = sa1.round(&a1, &[r(&b1), r(&c1)], 6_200);
    assert!(v5.quorate);
    // Step 6: its next fold, before b or c fold again.
    let v6 = sa1.refresh(&a1, &[r(&b1), r(&c1)], 6_450);
    // Step 7: b folds with a-i2's report from before step 5 (in flight) and c's new one.
    let v7 = sb.refresh(&b, &[r(&a1f), r(&c1)], 6_500);
    let self_elected: Vec<&str> = [("a", &v6), ("b", &v7)]
        .into_iter()
        .filter(|(name, v)| v.quorate && v.leader.as_deref() == Some(*name))
        .map(|(name, _)| name)
        .collect();
    assert!(
        self_elected.len() <= 1,
        "two leaders at once: {self_elected:?} (a: {:?}, b: {:?})",
        v6.leader,
        v7.leader
    );
}
