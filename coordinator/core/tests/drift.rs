//! The drift streak as a table of outcome sequences, plus the peer-status names.
//!
//! Each row feeds a sequence of round outcomes (`A` agreed, `S` self, `M` mismatched, `F`
//! failed) into a fresh streak and checks the streak and the mismatch status after every round,
//! with `driftAfter = 3` (the seed's default).

use cronstable_core::drift::{DriftStreak, PeerStatus, RoundOutcome};
use proptest::prelude::*;

const DRIFT_AFTER: u32 = 3;

fn outcome(c: char) -> RoundOutcome {
    match c {
        'A' => RoundOutcome::Agreed,
        'S' => RoundOutcome::SelfListing,
        'M' => RoundOutcome::Mismatched,
        'F' => RoundOutcome::Failed,
        other => panic!("unknown outcome {other:?}"),
    }
}

/// (what the row shows, outcomes, streak after each round, drifted after each round).
const TABLE: &[(&str, &str, &[u32], &str)] = &[
    ("a fresh peer is not drifted", "", &[], ""),
    ("mismatches accumulate", "MMM", &[1, 2, 3], "--D"),
    (
        "drifted after exactly driftAfter rounds",
        "MMMM",
        &[1, 2, 3, 4],
        "--DD",
    ),
    (
        "an agreement clears the streak",
        "MMAM",
        &[1, 2, 0, 1],
        "----",
    ),
    (
        "a self round clears it like an agreement",
        "MMSM",
        &[1, 2, 0, 1],
        "----",
    ),
    (
        "a failed round neither advances nor resets",
        "MFMFM",
        &[1, 1, 2, 2, 3],
        "----D",
    ),
    (
        "flapping out of reach cannot postpone the label",
        "MFFFMFFFM",
        &[1, 1, 1, 1, 2, 2, 2, 2, 3],
        "--------D",
    ),
    (
        "failures alone never drift a peer",
        "FFFFF",
        &[0, 0, 0, 0, 0],
        "-----",
    ),
    (
        "a drifted peer stays drifted while unreachable",
        "MMMFF",
        &[1, 2, 3, 3, 3],
        "--DDD",
    ),
    (
        "a drifted peer that agrees again is cleared",
        "MMMA",
        &[1, 2, 3, 0],
        "--D-",
    ),
    (
        "a rolling deploy: brief mismatch, then agreement",
        "AMMAA",
        &[0, 1, 2, 0, 0],
        "-----",
    ),
    (
        "agreements between failures keep it clear",
        "AFAFM",
        &[0, 0, 0, 0, 1],
        "-----",
    ),
];

#[test]
fn streak_table() {
    for (what, outcomes, streaks, drifted) in TABLE {
        assert_eq!(outcomes.len(), streaks.len(), "row {what:?} is malformed");
        assert_eq!(outcomes.len(), drifted.len(), "row {what:?} is malformed");
        let mut streak = DriftStreak::new();
        assert_eq!(streak.streak(), 0);
        for (round, ((o, want), d)) in outcomes
            .chars()
            .zip(*streaks)
            .zip(drifted.chars())
            .enumerate()
        {
            streak.observe(outcome(o));
            assert_eq!(
                streak.streak(),
                *want,
                "{what}: streak after round {}",
                round + 1
            );
            assert_eq!(
                streak.is_drifted(DRIFT_AFTER),
                d == 'D',
                "{what}: drifted after round {}",
                round + 1
            );
        }
    }
}

#[test]
fn mismatch_status_is_syncing_then_drifted() {
    let mut streak = DriftStreak::new();
    streak.observe(RoundOutcome::Mismatched);
    assert_eq!(streak.mismatch_status(DRIFT_AFTER), PeerStatus::Syncing);
    streak.observe(RoundOutcome::Mismatched);
    assert_eq!(streak.mismatch_status(DRIFT_AFTER), PeerStatus::Syncing);
    streak.observe(RoundOutcome::Mismatched);
    assert_eq!(streak.mismatch_status(DRIFT_AFTER), PeerStatus::Drifted);
}

#[test]
fn drift_after_one_labels_the_first_mismatch() {
    let mut streak = DriftStreak::new();
    assert!(!streak.is_drifted(1));
    streak.observe(RoundOutcome::Mismatched);
    assert!(streak.is_drifted(1));
}

#[test]
fn drift_after_zero_never_labels_an_agreeing_peer() {
    let mut streak = DriftStreak::new();
    assert!(!streak.is_drifted(0), "a fresh peer");
    streak.observe(RoundOutcome::Agreed);
    assert!(!streak.is_drifted(0), "an agreeing peer");
    streak.observe(RoundOutcome::Mismatched);
    assert!(streak.is_drifted(0), "behaves like driftAfter = 1");
}

#[test]
fn status_names_are_exact() {
    let names: Vec<&str> = PeerStatus::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        names,
        [
            "agreed",
            "syncing",
            "drifted",
            "unreachable",
            "untrusted",
            "self",
            "conflict"
        ]
    );
    for s in PeerStatus::ALL {
        assert_eq!(s.to_string(), s.as_str());
        // The JSON form on GET /cluster is the same string.
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, format!("\"{}\"", s.as_str()));
        assert_eq!(serde_json::from_str::<PeerStatus>(&json).unwrap(), s);
    }
}

#[test]
fn only_agreed_counts_toward_agreement() {
    for s in PeerStatus::ALL {
        assert_eq!(s.counts_toward_agreement(), s == PeerStatus::Agreed, "{s}");
    }
}

fn outcomes() -> impl Strategy<Value = Vec<RoundOutcome>> {
    proptest::collection::vec(
        prop_oneof![
            Just(RoundOutcome::Agreed),
            Just(RoundOutcome::SelfListing),
            Just(RoundOutcome::Mismatched),
            Just(RoundOutcome::Failed),
        ],
        0..40,
    )
}

proptest! {
    #[test]
    fn streak_is_the_mismatches_since_the_last_agreement(seq in outcomes()) {
        // The oracle: count Mismatched rounds after the last Agreed/SelfListing round.
        let last_clear = seq
            .iter()
            .rposition(|o| matches!(o, RoundOutcome::Agreed | RoundOutcome::SelfListing));
        let tail = last_clear.map_or(&seq[..], |i| &seq[i + 1..]);
        let want = tail.iter().filter(|o| **o == RoundOutcome::Mismatched).count() as u32;
        let mut streak = DriftStreak::new();
        for o in &seq {
            streak.observe(*o);
        }
        prop_assert_eq!(streak.streak(), want);
    }

    #[test]
    fn removing_failed_rounds_changes_nothing(seq in outcomes()) {
        let mut with = DriftStreak::new();
        let mut without = DriftStreak::new();
        for o in &seq {
            with.observe(*o);
            if *o != RoundOutcome::Failed {
                without.observe(*o);
            }
        }
        prop_assert_eq!(with, without);
    }
}
