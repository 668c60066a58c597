//! The single-leader election rule: examples from the seed, edge cases of the name order, and
//! properties (the result is a member, `None` exactly without a quorum, order independence, and
//! at most one leader across a clean partition).

use std::collections::BTreeSet;

use cronstable_core::election::elect_leader;
use cronstable_core::quorum::{is_quorum, quorum_size};
use proptest::prelude::*;
use proptest::sample::subsequence;

#[test]
fn a_converged_three_node_cluster_elects_the_lowest_name() {
    let all = ["cronstable-c", "cronstable-a", "cronstable-b"];
    assert_eq!(elect_leader(all, 3), Some("cronstable-a"));
}

#[test]
fn the_majority_side_of_a_partition_elects_its_own_lowest() {
    // cronstable-a is cut off: b and c are 2 of 3 and elect b; a alone elects nobody.
    assert_eq!(
        elect_leader(["cronstable-b", "cronstable-c"], 3),
        Some("cronstable-b")
    );
    assert_eq!(elect_leader(["cronstable-a"], 3), None);
}

#[test]
fn a_single_node_cluster_elects_itself() {
    assert_eq!(elect_leader(["solo"], 1), Some("solo"));
}

#[test]
fn nobody_is_elected_from_nothing() {
    for n in 0..=9 {
        assert_eq!(elect_leader([], n), None, "cluster of {n}");
    }
}

#[test]
fn duplicates_count_once() {
    // Two sightings of one member are one vote: 1 of 3, not 2 of 3.
    assert_eq!(elect_leader(["node-b", "node-b"], 3), None);
    assert_eq!(
        elect_leader(["node-b", "node-b", "node-c"], 3),
        Some("node-b")
    );
}

#[test]
fn lowest_means_byte_wise_order() {
    // No natural-number ordering: "node-10" sorts before "node-9".
    assert_eq!(
        elect_leader(["node-9", "node-10", "node-11"], 3),
        Some("node-10")
    );
    // No case folding: ASCII uppercase sorts before lowercase.
    assert_eq!(elect_leader(["alpha", "Beta", "gamma"], 3), Some("Beta"));
    // A prefix sorts before its extensions.
    assert_eq!(elect_leader(["node-a1", "node-a"], 2), Some("node-a"));
    // Non-ASCII sorts by its UTF-8 bytes, after all of ASCII.
    assert_eq!(elect_leader(["zulu", "ärger"], 2), Some("zulu"));
}

#[test]
fn a_count_above_the_cluster_size_still_elects() {
    // Seeing more agreeing members than declared is a size conflict, which the conflict gate
    // handles; the rule itself stays monotone.
    assert_eq!(elect_leader(["a", "b", "c", "d"], 3), Some("a"));
}

/// Up to 12 distinct member names from a small alphabet, so collisions and shared prefixes
/// are common.
fn names() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec("[a-cA-C0-9é-]{0,4}", 0..12)
}

proptest! {
    #[test]
    fn the_leader_is_always_one_of_the_members(members in names(), n in 0usize..15) {
        if let Some(leader) = elect_leader(members.iter().map(String::as_str), n) {
            prop_assert!(members.iter().any(|m| m == leader));
        }
    }

    #[test]
    fn none_exactly_when_the_distinct_members_are_not_a_quorum(
        members in names(),
        n in 0usize..15,
    ) {
        let distinct: BTreeSet<&str> = members.iter().map(String::as_str).collect();
        let leader = elect_leader(members.iter().map(String::as_str), n);
        prop_assert_eq!(leader.is_some(), is_quorum(distinct.len(), n));
        if let Some(leader) = leader {
            // The oracle: the minimum by plain string comparison.
            prop_assert_eq!(Some(leader), distinct.iter().copied().min());
            prop_assert!(distinct.len() >= quorum_size(n));
        }
    }

    #[test]
    fn input_order_does_not_matter(
        (members, shuffled) in names().prop_flat_map(|m| {
            let shuffled = Just(m.clone()).prop_shuffle();
            (Just(m), shuffled)
        }),
        n in 0usize..15,
    ) {
        prop_assert_eq!(
            elect_leader(members.iter().map(String::as_str), n),
            elect_leader(shuffled.iter().map(String::as_str), n)
        );
    }

    #[test]
    fn a_clean_partition_has_at_most_one_leader(
        (cluster, side) in proptest::collection::btree_set("[a-z]{1,6}", 1..15)
            .prop_flat_map(|c| {
                let c: Vec<String> = c.into_iter().collect();
                let len = c.len();
                (Just(c.clone()), subsequence(c, 0..=len))
            }),
    ) {
        // Split the cluster into two sides that cannot see each other: each side elects from
        // its own members only. Both may elect nobody; both may never elect someone.
        let n = cluster.len();
        let other: Vec<&str> =
            cluster.iter().map(String::as_str).filter(|m| !side.iter().any(|s| s == m)).collect();
        let a = elect_leader(side.iter().map(String::as_str), n);
        let b = elect_leader(other, n);
        prop_assert!(a.is_none() || b.is_none(), "both sides elected: {a:?} and {b:?}");
    }
}
