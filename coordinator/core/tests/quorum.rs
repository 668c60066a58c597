//! Quorum math, checked exhaustively for small clusters, by property for large ones, and
//! against the sizing appendix's numbers (`testdata/quorum/availability.txt`).

use cronstable_core::quorum::{availability, is_quorum, quorum_size, tolerated_failures};
use proptest::prelude::*;

/// The largest cluster size checked exhaustively.
const MAX_N: usize = 25;

#[test]
fn quorum_size_is_a_strict_majority_for_every_n_up_to_25() {
    for n in 1..=MAX_N {
        let q = quorum_size(n);
        assert_eq!(q, n / 2 + 1, "n = {n}");
        // A strict majority: more than half, and no smaller count is.
        assert!(2 * q > n, "n = {n}: {q} is not more than half");
        assert!(
            2 * (q - 1) <= n,
            "n = {n}: {} would already be a majority",
            q - 1
        );
        assert!(
            q <= n,
            "n = {n}: a quorum larger than the cluster can never form"
        );
    }
}

#[test]
fn quorum_sizes_match_the_seed() {
    // (n, quorum, tolerated failures): the seed's "3 tolerates 1, 5 tolerates 2, 7 tolerates 3",
    // "N=10 has quorum 6 and tolerates 4", and even sizes tolerating no more than the odd size
    // below them.
    let table = [
        (1, 1, 0),
        (2, 2, 0),
        (3, 2, 1),
        (4, 3, 1),
        (5, 3, 2),
        (6, 4, 2),
        (7, 4, 3),
        (8, 5, 3),
        (9, 5, 4),
        (10, 6, 4),
    ];
    for (n, q, tol) in table {
        assert_eq!(quorum_size(n), q, "quorum of {n}");
        assert_eq!(tolerated_failures(n), tol, "failures tolerated by {n}");
    }
}

#[test]
fn zero_is_a_defined_degenerate_case() {
    assert_eq!(quorum_size(0), 1);
    assert_eq!(tolerated_failures(0), 0);
    assert!(!is_quorum(0, 0), "no members can never be a quorum");
    assert_eq!(availability(0, 0.99), 0.0);
}

#[test]
fn no_members_are_never_a_quorum() {
    for n in 0..=MAX_N {
        assert!(!is_quorum(0, n), "n = {n}");
    }
}

#[test]
fn two_disjoint_sets_are_never_both_quorums() {
    // Disjoint subsets of an n-member cluster have sizes a and b with a + b <= n. This is the
    // fact that keeps the two sides of a clean partition from both electing a leader.
    for n in 0..=MAX_N {
        for a in 0..=n {
            for b in 0..=(n - a) {
                assert!(
                    !(is_quorum(a, n) && is_quorum(b, n)),
                    "n = {n}: disjoint sets of {a} and {b} are both quorums"
                );
            }
        }
    }
}

#[test]
fn a_superset_of_a_quorum_is_a_quorum() {
    for n in 0..=MAX_N {
        for a in 0..=n {
            for b in a..=n {
                if is_quorum(a, n) {
                    assert!(is_quorum(b, n), "n = {n}: {a} is a quorum but {b} is not");
                }
            }
        }
    }
}

#[test]
fn is_quorum_agrees_with_enumerated_subsets() {
    // Check the count-based rule against actual subsets of named members: for every pair of
    // subsets of a small cluster, if both are quorums they share a member.
    for n in 1..=10usize {
        let full = (1u32 << n) - 1;
        for x in 0..=full {
            if !is_quorum(x.count_ones() as usize, n) {
                continue;
            }
            // Every subset of the complement of x is disjoint from x; the largest one is the
            // complement itself, so checking it covers them all (by monotonicity).
            let complement = full & !x;
            assert!(
                !is_quorum(complement.count_ones() as usize, n),
                "n = {n}: subsets {x:#b} and {complement:#b} are disjoint quorums"
            );
        }
    }
}

proptest! {
    #[test]
    fn laws_hold_for_large_clusters(n in 1usize..100_000, a in 0usize..100_000, b in 0usize..100_000) {
        let (a, b) = (a % (n + 1), b % (n + 1));
        if a + b <= n {
            prop_assert!(!(is_quorum(a, n) && is_quorum(b, n)));
        }
        if is_quorum(a.min(b), n) {
            prop_assert!(is_quorum(a.max(b), n));
        }
        prop_assert!(is_quorum(n, n), "the whole cluster is always a quorum");
    }

    #[test]
    fn an_even_size_is_never_more_available_than_the_odd_size_below(
        k in 1usize..20,
        p in 0.0f64..=1.0,
    ) {
        // A(2k) = A(2k-1) - (1-p) * P(exactly k of 2k-1 up), so adding a node to an odd
        // cluster never helps (SZ-02: "even sizes are equal or worse, never better").
        prop_assert!(availability(2 * k, p) <= availability(2 * k - 1, p) + 1e-12);
    }

    #[test]
    fn availability_is_a_probability(n in 0usize..60, p in 0.0f64..=1.0) {
        let a = availability(n, p);
        prop_assert!((-1e-12..=1.0 + 1e-12).contains(&a), "A({n}, {p}) = {a}");
    }
}

#[test]
fn availability_at_the_extremes() {
    for n in 1..=MAX_N {
        assert!(
            (availability(n, 1.0) - 1.0).abs() < 1e-12,
            "n = {n}, all nodes up"
        );
        assert_eq!(availability(n, 0.0), 0.0, "n = {n}, all nodes down");
    }
}

/// The tolerance implied by how many decimals `text` is written with: half a unit in the last
/// place, so `0.999702` must be matched within `0.0000005`.
fn written_precision(text: &str) -> f64 {
    let decimals = text.split_once('.').map_or(0, |(_, frac)| frac.len());
    0.5 * 10f64.powi(-(decimals as i32)) + 1e-12
}

#[test]
fn availability_matches_the_sizing_appendix() {
    let table = include_str!("../testdata/quorum/availability.txt");
    let mut rows = 0;
    for (lineno, line) in table.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [p, n, "----", q, tol, prob, nines, skips] = fields[..] else {
            panic!("availability.txt:{lineno}: expected `p N ---- q tol P nines skips`: {line}");
        };
        let p: f64 = p.parse().unwrap();
        let n: usize = n.parse().unwrap();
        let at = format!("availability.txt:{lineno} (p = {p}, N = {n})");

        assert_eq!(quorum_size(n), q.parse::<usize>().unwrap(), "{at}: quorum");
        assert_eq!(
            tolerated_failures(n),
            tol.parse::<usize>().unwrap(),
            "{at}: tolerance"
        );

        let got = availability(n, p);
        let want: f64 = prob.parse().unwrap();
        assert!(
            (got - want).abs() <= written_precision(prob),
            "{at}: P = {got}, table {want}"
        );

        let got_nines = -(1.0 - got).log10();
        let want_nines: f64 = nines.parse().unwrap();
        assert!(
            (got_nines - want_nines).abs() <= written_precision(nines),
            "{at}: nines = {got_nines}, table {want_nines}"
        );

        let got_skips = (1.0 - got) * 8760.0;
        let want_skips: f64 = skips.parse().unwrap();
        assert!(
            (got_skips - want_skips).abs() <= written_precision(skips),
            "{at}: skips/yr = {got_skips}, table {want_skips}"
        );
        rows += 1;
    }
    assert!(
        rows >= 10,
        "availability.txt has only {rows} rows; the appendix has at least 10"
    );
}

#[test]
fn the_seed_quotes_hold() {
    // SZ-02 verbatim: "N=4 gives 0.99941 and N=3 gives 0.99970 at p = 0.99", "N=2: P = p² =
    // 0.9801", below a single node's 0.99.
    assert!((availability(4, 0.99) - 0.99941).abs() < 5e-6);
    assert!((availability(3, 0.99) - 0.99970).abs() < 5e-6);
    assert!((availability(2, 0.99) - 0.99 * 0.99).abs() < 1e-12);
    assert!(availability(2, 0.99) < availability(1, 0.99));
}
