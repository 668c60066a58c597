//! Quorum math: how many agreeing members make a strict majority of a cluster of `n`.
//!
//! Every safety argument of the gossip backend rests on one fact: two strict majorities of the
//! same `n` always share a member, so under a clean partition at most one side is quorate
//! (seed 000, "Guarantees and trade-offs"; inventory GSP-120). The functions here are that fact
//! and nothing else, kept separate so they can be checked exhaustively (`tests/quorum.rs`).
//!
//! [`availability`] is the sizing appendix's formula (inventory SZ-01): the chance that a
//! Leader firing finds a quorum up, given independent per-node availability. It exists for docs,
//! config warnings and the tests that pin the appendix's numbers; no decision reads it.

/// The number of agreeing members that make a quorum of a cluster of `n`: `⌊n / 2⌋ + 1`.
///
/// `n` is the cluster size the node declares: itself plus its configured peers, with duplicate
/// entries and self-listings already excluded (inventory GSP-30, GSP-32).
///
/// `n = 0` is not a real cluster (a node always counts itself), but the formula is total and
/// gives 1 there. That keeps the one property that matters even for a degenerate input: an empty
/// set of members is never a quorum, whatever `n` is.
///
/// # Examples
///
/// ```
/// use cronstable_core::quorum::quorum_size;
/// assert_eq!(quorum_size(1), 1);
/// assert_eq!(quorum_size(3), 2);
/// assert_eq!(quorum_size(4), 3); // even sizes buy no extra tolerance
/// assert_eq!(quorum_size(10), 6);
/// ```
pub fn quorum_size(n: usize) -> usize {
    n / 2 + 1
}

/// True when `agreeing` members (this node included) are a quorum of a cluster of `n`.
///
/// Monotone by construction: if some count is a quorum, every larger count is too (a superset
/// of a quorum is a quorum). A count above `n` is still reported as a quorum; a node that sees
/// more agreeing members than it declares has a size disagreement, which the conflict gate
/// handles, not this function.
pub fn is_quorum(agreeing: usize, n: usize) -> bool {
    agreeing >= quorum_size(n)
}

/// How many members of a cluster of `n` can fail at once while a quorum stays up: `n − q`.
///
/// This is the appendix's "Tol." column: 1 for 3 nodes, 2 for 5, 3 for 7, and the same for an
/// even size as for the odd size just below it.
pub fn tolerated_failures(n: usize) -> usize {
    n.saturating_sub(quorum_size(n))
}

/// The probability that at least a quorum of `n` nodes is up, when each node is up
/// independently with probability `p`:
/// `Σ_{k=q}^{n} C(n, k) · p^k · (1 − p)^(n − k)` with `q = quorum_size(n)`.
///
/// This is the chance that a Leader firing finds a quorum (inventory SZ-01). Independence is the
/// formula's assumption, not the world's: correlated failures (one bad config push, a shared
/// host or zone) make real numbers worse, and adding nodes can then hurt (SZ-04).
///
/// `p` must lie in `[0, 1]`; anything else gives a meaningless number. `n = 0` gives 0: an
/// empty cluster never runs anything.
///
/// # Examples
///
/// ```
/// use cronstable_core::quorum::availability;
/// // The appendix: three nodes at 99% each beat one node at 99%, two nodes do worse.
/// assert!((availability(3, 0.99) - 0.999702).abs() < 5e-7);
/// assert!((availability(2, 0.99) - 0.9801).abs() < 1e-12);
/// ```
pub fn availability(n: usize, p: f64) -> f64 {
    debug_assert!(
        (0.0..=1.0).contains(&p),
        "availability: p = {p} is not a probability"
    );
    let q = quorum_size(n);
    // n is a cluster size (tens at most), so summing the terms directly is exact enough; the
    // binomial coefficient is built incrementally in f64 to avoid integer overflow for large n.
    let mut total = 0.0;
    let mut choose = 1.0_f64; // C(n, 0)
    for k in 0..=n {
        if k >= q {
            total += choose * p.powi(k as i32) * (1.0 - p).powi((n - k) as i32);
        }
        // C(n, k + 1) = C(n, k) · (n − k) / (k + 1)
        choose = choose * (n - k) as f64 / (k + 1) as f64;
    }
    total
}
