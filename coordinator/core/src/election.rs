//! The single-leader election rule of the gossip backend (seed 000, "Leader election";
//! inventory GSP-40).
//!
//! Each node elects, on its own and from its own view, the lowest `nodeName` among the members
//! it currently sees agreeing on the job-set ID, itself included, but only when those members
//! are a quorum of the cluster. No message is exchanged to agree on the result: two nodes with
//! the same view compute the same leader, and two disjoint views cannot both be quorate
//! ([`crate::quorum`]), so at most one side of a clean partition elects anyone.
//!
//! What "agreeing" means (same job-set ID, reachable, trusted, not a self-listing, and for
//! bridge-discovered members confirmed quorate) is the backend's business; this function only
//! applies the rule to the set it is given.

use std::collections::BTreeSet;

use crate::quorum::is_quorum;

/// The leader elected from `agreeing_members` in a cluster of `cluster_size`, or `None` when
/// those members are not a quorum.
///
/// - `agreeing_members` must include this node itself. Duplicates count once: a member seen
///   twice (say, once directly and once through a peer's report) is still one vote.
/// - "Lowest" is byte-wise lexicographic order of the UTF-8 names (Rust's `str` order), with no
///   case folding, locale or natural-number ordering: `"B" < "a"` and `"node-10" < "node-9"`.
///   Every node must rank names identically, and byte order is the one order every
///   implementation and language can reproduce exactly.
/// - The result is always one of the given names, so its lifetime is theirs.
///
/// # Examples
///
/// ```
/// use cronstable_core::election::elect_leader;
/// assert_eq!(elect_leader(["node-b", "node-a"], 3), Some("node-a"));
/// assert_eq!(elect_leader(["node-b"], 3), None); // 1 of 3 is not a quorum
/// assert_eq!(elect_leader(["node-b", "node-b"], 3), None); // one member, seen twice
/// ```
pub fn elect_leader<'a>(
    agreeing_members: impl IntoIterator<Item = &'a str>,
    cluster_size: usize,
) -> Option<&'a str> {
    // A BTreeSet both removes duplicates and orders by `str`'s byte-wise `Ord`.
    let members: BTreeSet<&'a str> = agreeing_members.into_iter().collect();
    if is_quorum(members.len(), cluster_size) {
        members.first().copied()
    } else {
        None
    }
}
