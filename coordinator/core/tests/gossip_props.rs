//! Property tests for the gossip round on arbitrary input (rule 9 of `cronstable_core::gossip`):
//! no report, however odd (duplicate names, this node's name, over-long fields, wrong sizes,
//! missing or extra poll entries, `configured_size` 0), makes `GossipState::round` panic, and
//! the view's structural invariants hold on every round (GSP-08, GSP-32, GSP-40..42, GSP-60).

use std::sync::Arc;

use cronstable_core::drift::PeerStatus;
use cronstable_core::gossip::{
    Distribution, GossipState, LocalNode, MAX_CANDIDATES, MemberReport, PeerReport, PollOutcome,
};
use cronstable_core::quorum::quorum_size;
use proptest::prelude::*;

/// Names from a small pool (so collisions are common), this node's name, or over-long ones.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-d]".prop_map(|s| format!("n-{s}")),
        1 => Just("me".to_string()),
        1 => Just("x".repeat(300)),
    ]
}

fn instance() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("i1".to_string()),
        Just("i2".to_string()),
        Just("me-i".to_string())
    ]
}

fn status() -> impl Strategy<Value = PeerStatus> {
    prop::sample::select(PeerStatus::ALL.to_vec())
}

fn member() -> impl Strategy<Value = MemberReport> {
    (name(), instance(), status()).prop_map(|(name, instance_id, status)| MemberReport {
        name,
        instance_id,
        status,
    })
}

fn report() -> impl Strategy<Value = PeerReport> {
    (
        (name(), instance(), prop::bool::ANY, 0usize..8),
        (
            prop::bool::ANY,
            prop::bool::ANY,
            prop::bool::ANY,
            prop::bool::ANY,
        ),
        prop::collection::vec(member(), 0..6),
        prop::collection::vec(name(), 0..6),
        prop::collection::vec(name(), 0..3),
    )
        .prop_map(
            |(
                (node_name, instance_id, same_js, cluster_size),
                (spread, elect, quorate, standing_down),
                members,
                vouched,
                vouched_leading,
            )| {
                PeerReport {
                    node_name,
                    job_set_id: if same_js {
                        "v1:me".into()
                    } else {
                        "v1:other".into()
                    },
                    instance_id,
                    cluster_size,
                    distribution: if spread {
                        Distribution::Spread
                    } else {
                        Distribution::SingleLeader
                    },
                    elect_leader: elect,
                    quorate,
                    members,
                    mutual_agreeing: Vec::new(),
                    quorate_vouched: vouched,
                    candidates_truncated: 0,
                    ran_reboot_jobs: Vec::new(),
                    standing_down,
                    // Any vote, hostile ones included: a name from the pool or none.
                    elects: vouched_leading.first().cloned(),
                    leading: if spread { None } else { Some(vouched_leading) },
                }
            },
        )
}

fn poll() -> impl Strategy<Value = PollOutcome> {
    prop_oneof![
        1 => Just(PollOutcome::NotPolled),
        1 => Just(PollOutcome::Unreachable { error: "e".into() }),
        1 => Just(PollOutcome::Untrusted { error: "t".into() }),
        5 => report().prop_map(|r| PollOutcome::Report(Arc::new(r))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn rounds_never_panic_and_keep_their_invariants(
        peer_count in 0usize..6,
        configured_size in 0usize..8,
        rounds in prop::collection::vec(prop::collection::vec(poll(), 0..8), 1..6),
    ) {
        let me = LocalNode {
            name: "me".into(),
            instance_id: "me-i".into(),
            job_set_id: "v1:me".into(),
            configured_size,
            elect_leader: true,
            distribution: Distribution::SingleLeader,
            drift_after: 2,
            interval_ms: 20,
        };
        let mut st = GossipState::new(peer_count, 0);
        let mut was_converging = true;
        for (t, polls) in rounds.iter().enumerate() {
            let v = st.round(&me, polls, t as u64 * 10);
            prop_assert_eq!(v.peers.len(), peer_count);
            prop_assert!(v.effective_size >= 1);
            prop_assert_eq!(v.quorum, quorum_size(v.effective_size));
            prop_assert!(v.agreeing.contains("me"));
            prop_assert_eq!(&v.reachable_agreeing, &v.agreeing);
            prop_assert!(!v.mutual_agreeing.contains("me"));
            prop_assert_eq!(v.quorate, 1 + v.mutual_agreeing.len() >= v.quorum);
            prop_assert!(v.vouched_unconfirmed.is_subset(&v.candidates));
            prop_assert!(v.candidates.iter().all(|c| c.len() <= 256));
            prop_assert_eq!(v.self_candidate, v.candidates.contains("me"));
            prop_assert!(!v.self_candidate || v.quorate);
            if let Some(l) = &v.leader {
                prop_assert!(v.quorate);
                prop_assert!(v.candidates.contains(l));
                // Rule 4a: the lowest incumbent, or with none the lowest candidate.
                prop_assert!(v.incumbents.is_subset(&v.candidates));
                let expected = v.incumbents.first().or(v.candidates.first());
                let legacy = expected != Some(l) && v.candidates.first() == Some(l);
                prop_assert!(expected == Some(l) || legacy, "leader {:?} incumbents {:?}", l, v.incumbents);
            }
            if !v.quorate {
                prop_assert!(!v.candidates.contains("me"));
                prop_assert_eq!(&v.leader, &None);
            }
            prop_assert!(v.advert.quorate_vouched.len() <= MAX_CANDIDATES);
            prop_assert!(v.advert.members.iter().all(|m| m.status != PeerStatus::SelfListing));
            prop_assert_eq!(v.conflicts.any(),
                v.conflicts.names_conflict() || v.conflicts.size_conflict() || v.conflicts.policy_conflict());
            if v.conflicts.size_conflict() {
                prop_assert!(v.conflicts.sizes.contains(&v.effective_size));
            }
            prop_assert!(was_converging || !v.converging, "the hold never restarts");
            was_converging = v.converging;
            if t as u64 * 10 >= 40 {
                prop_assert!(!v.converging, "the hold ends by 2 x interval");
            }
        }
    }
}
