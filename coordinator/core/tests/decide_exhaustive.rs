//! `decide` over its whole input space (3 policies × 4 firing kinds × 66 gates = 792
//! combinations), checked against the safety rules of the seed's policy table on every one.
//!
//! The rows in `testdata/decide/` pin chosen examples; this file pins the rules, so a change to
//! `decide` that breaks a rule for some combination nobody wrote a row for still fails.

use crate::common;

use cronstable_core::{
    ClusterPolicy, Decision, FiringKind, Gate, ManagerView, Reason, Verdict, decide,
};

/// Reasons that may accompany a run.
const RUN_REASONS: [Reason; 6] = [
    Reason::ElectionOff,
    Reason::Manual,
    Reason::EveryNode,
    Reason::NoManager,
    Reason::Leader,
    Reason::Owner,
];

/// Reasons that may accompany a skip or a deferral (denials).
const DENIAL_REASONS: [Reason; 8] = [
    Reason::AlreadyRan,
    Reason::Starting,
    Reason::NoManager,
    Reason::Conflict,
    Reason::NoQuorum,
    Reason::NotLeader,
    Reason::NotOwner,
    Reason::ConvergenceHold,
];

/// Transient denials: the only reasons a deferral may give (RTY-02). A subset of the denials.
/// NoManager is transient only where the coordinator says its manager is being retried
/// (`Gate::ManagerRetrying`); the exhaustive rules pin that separately.
const TRANSIENT: [Reason; 5] = [
    Reason::NoQuorum,
    Reason::Conflict,
    Reason::ConvergenceHold,
    Reason::NoManager,
    Reason::Starting,
];

/// Runs `check` on every combination and reports every violation at once, with its inputs.
fn for_all(rule: &str, check: impl Fn(ClusterPolicy, FiringKind, Gate, Decision) -> bool) {
    let mut violations = Vec::new();
    let mut count = 0;
    for (policy, kind, gate) in common::all_inputs() {
        count += 1;
        let d = decide(policy, kind, gate);
        if !check(policy, kind, gate, d) {
            violations.push(format!(
                "  {policy} {} {gate:?} -> {d:?}",
                common::kind_name(kind)
            ));
        }
    }
    assert_eq!(
        count,
        3 * 4 * (4 + 512),
        "the input space is not fully enumerated"
    );
    assert!(
        violations.is_empty(),
        "rule violated: {rule}\n{} of {count} combinations:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// A catch-up is a scheduled firing asked late on purpose: the table decides it exactly as it
/// decides the scheduled one, over every policy and gate (its window and its claim are the
/// coordinator's, around the table).
#[test]
fn a_catch_up_is_decided_as_a_scheduled_firing() {
    for_all(
        "a catch-up is decided as a scheduled firing",
        |policy, kind, gate, d| {
            kind != FiringKind::Scheduled || decide(policy, FiringKind::CatchUp, gate) == d
        },
    );
}

#[test]
fn manual_runs_always_run() {
    for_all("manual runs are never gated (POL-02)", |_, kind, _, d| {
        kind != FiringKind::Manual || d == Decision::run(Reason::Manual)
    });
}

#[test]
fn election_off_always_runs() {
    for_all(
        "with election off every node runs every job (OVR-01)",
        |_, kind, gate, d| {
            gate != Gate::ElectionOff
                || kind == FiringKind::Manual
                || d == Decision::run(Reason::ElectionOff)
        },
    );
}

#[test]
fn every_node_always_runs() {
    for_all(
        "EveryNode is never gated, even without a manager",
        |policy, _, _, d| policy != ClusterPolicy::EveryNode || d.verdict == Verdict::Run,
    );
}

#[test]
fn no_manager_fails_leader_closed_and_prefer_leader_open() {
    for_all(
        "no manager: Leader skips, PreferLeader runs",
        |policy, kind, gate, d| {
            if gate != Gate::NoManager || kind == FiringKind::Manual {
                return true;
            }
            match policy {
                ClusterPolicy::Leader => d == Decision::skip(Reason::NoManager),
                ClusterPolicy::PreferLeader => d == Decision::run(Reason::NoManager),
                ClusterPolicy::EveryNode => d == Decision::run(Reason::EveryNode),
            }
        },
    );
}

#[test]
fn a_retried_manager_fails_leader_closed_but_lets_deferrable_firings_wait() {
    for_all(
        "manager retrying: Leader skips scheduled, defers retries and @reboot; PreferLeader runs",
        |policy, kind, gate, d| {
            if gate != Gate::ManagerRetrying || kind == FiringKind::Manual {
                return true;
            }
            match policy {
                ClusterPolicy::Leader if kind.defers() => d == Decision::defer(Reason::NoManager),
                ClusterPolicy::Leader => d == Decision::skip(Reason::NoManager),
                ClusterPolicy::PreferLeader => d == Decision::run(Reason::NoManager),
                ClusterPolicy::EveryNode => d == Decision::run(Reason::EveryNode),
            }
        },
    );
}

#[test]
fn leader_runs_only_when_quorate_unconflicted_and_owner() {
    for_all(
        "under a manager, Leader runs iff quorate && !conflict && leader_owner",
        |policy, kind, gate, d| match (policy, kind, gate) {
            (ClusterPolicy::Leader, k, Gate::Manager(v)) if k != FiringKind::Manual => {
                let ran = k == FiringKind::Reboot && (v.reboot_ran || v.reboot_ran_unknown);
                (d.verdict == Verdict::Run) == (v.quorate && !v.conflict && v.leader_owner && !ran)
            }
            _ => true,
        },
    );
}

#[test]
fn prefer_leader_ignores_quorum_and_conflicts() {
    for_all(
        "under a manager, PreferLeader runs iff !converging && availability_owner",
        |policy, kind, gate, d| match (policy, kind, gate) {
            (ClusterPolicy::PreferLeader, k, Gate::Manager(v)) if k != FiringKind::Manual => {
                let ran = k == FiringKind::Reboot && (v.reboot_ran || v.reboot_ran_unknown);
                (d.verdict == Verdict::Run) == (!v.converging && v.availability_owner && !ran)
            }
            _ => true,
        },
    );
}

#[test]
fn prefer_leader_is_never_skipped_while_its_owner_is_unconfirmed() {
    for_all(
        "under a manager, PreferLeader skips only when the owner elsewhere is confirmed",
        |policy, kind, gate, d| match (policy, kind, gate) {
            (ClusterPolicy::PreferLeader, k, Gate::Manager(v))
                if k != FiringKind::Manual
                    && !v.converging
                    && !(k == FiringKind::Reboot && v.reboot_ran) =>
            {
                d.verdict != Verdict::Skip || (!v.owner_unconfirmed && !v.availability_owner)
            }
            (ClusterPolicy::Leader | ClusterPolicy::EveryNode, _, Gate::Manager(mut v)) => {
                v.owner_unconfirmed = !v.owner_unconfirmed;
                decide(policy, kind, Gate::Manager(v)) == d
            }
            _ => true,
        },
    );
}

#[test]
fn conflicts_never_gate_prefer_leader() {
    for_all(
        "flipping conflict never changes a PreferLeader decision",
        |policy, kind, gate, d| match (policy, gate) {
            (ClusterPolicy::PreferLeader, Gate::Manager(mut v)) => {
                v.conflict = !v.conflict;
                decide(policy, kind, Gate::Manager(v)) == d
            }
            _ => true,
        },
    );
}

/// The one deferral of a scheduled firing: PreferLeader on a lease backend whose holder is not
/// yet confirmed alive for the firing (a skip there could lose the firing; the wait ends in a
/// run here or a confirmed owner elsewhere).
fn unconfirmed_owner_wait(policy: ClusterPolicy, gate: Gate, d: Decision) -> bool {
    policy == ClusterPolicy::PreferLeader
        && d == Decision::defer(Reason::NotOwner)
        && matches!(gate, Gate::Manager(v) if v.owner_unconfirmed && !v.availability_owner)
}

#[test]
fn scheduled_firings_never_defer() {
    for_all(
        "a scheduled firing runs or skips; the next due instant is its retry (except PreferLeader \
         waiting for an unconfirmed owner)",
        |policy, kind, gate, d| {
            kind != FiringKind::Scheduled
                || d.verdict != Verdict::Defer
                || unconfirmed_owner_wait(policy, gate, d)
        },
    );
}

#[test]
fn only_retries_and_reboots_defer_and_only_on_transient_denials() {
    for_all(
        "Defer only for retries/@reboot, with NoQuorum/Conflict/ConvergenceHold, NoManager \
         while the manager is retried, or Starting while it has no first view",
        |policy, kind, gate, d| {
            d.verdict != Verdict::Defer
                || unconfirmed_owner_wait(policy, gate, d)
                || (kind.defers()
                    && TRANSIENT.contains(&d.reason)
                    && (d.reason != Reason::NoManager || gate == Gate::ManagerRetrying)
                    && (d.reason != Reason::Starting || gate == Gate::Starting))
        },
    );
}

#[test]
fn deferrable_firings_skip_only_on_a_confirmed_owner_elsewhere() {
    // RTY-03: a retry or @reboot one-shot is dropped only when another node is known to own
    // it (or, failing closed, when there is no manager at all).
    for_all(
        "retries/@reboot skip only with NotLeader, NotOwner or NoManager",
        |_, kind, _, d| {
            !kind.defers()
                || d.verdict != Verdict::Skip
                || matches!(
                    d.reason,
                    Reason::NotLeader | Reason::NotOwner | Reason::NoManager | Reason::AlreadyRan
                )
        },
    );
}

#[test]
fn reasons_match_verdicts() {
    for_all(
        "runs give run reasons; skips and deferrals give denial reasons",
        |_, _, _, d| match d.verdict {
            Verdict::Run => RUN_REASONS.contains(&d.reason),
            Verdict::Skip | Verdict::Defer => DENIAL_REASONS.contains(&d.reason),
        },
    );
}

#[test]
fn executor_side_reasons_never_come_from_decide() {
    for_all(
        "decide never answers with an executor-side reason, nor row -1's",
        |_, _, _, d| {
            !matches!(
                d.reason,
                Reason::CoordinatorUnreachable
                    | Reason::ConcurrencyPolicy
                    | Reason::TooLate
                    | Reason::StartingDeadline
            )
        },
    );
}

/// Row -1: only a scheduled firing has a start deadline, and it passes strictly after it.
#[test]
fn only_a_scheduled_firing_asked_after_its_deadline_is_past_it() {
    use cronstable_core::decision::past_starting_deadline;
    use std::time::Duration;
    let d = Duration::from_secs(90);
    let at = 1_800_000_000_000_i64;
    for (kind, asked_after_ms, past) in [
        (FiringKind::Scheduled, -20, false),
        (FiringKind::Scheduled, 0, false),
        (FiringKind::Scheduled, 90_000, false),
        (FiringKind::Scheduled, 90_001, true),
        (FiringKind::Scheduled, 3_600_000, true),
        (FiringKind::Retry { attempt: 2 }, 3_600_000, false),
        (FiringKind::Reboot, 3_600_000, false),
        (FiringKind::Manual, 3_600_000, false),
    ] {
        assert_eq!(
            past_starting_deadline(kind, at, at + asked_after_ms, d),
            past,
            "{kind:?} asked {asked_after_ms} ms after its instant"
        );
    }
    // No overflow at the edges of the wire's range.
    assert!(past_starting_deadline(
        FiringKind::Scheduled,
        i64::MIN,
        i64::MAX,
        d
    ));
    assert!(!past_starting_deadline(
        FiringKind::Scheduled,
        i64::MAX,
        i64::MIN,
        d
    ));
    assert!(!past_starting_deadline(
        FiringKind::Scheduled,
        0,
        i64::MAX,
        Duration::MAX
    ));
}

#[test]
fn spread_changes_only_reason_names() {
    for_all(
        "flipping spread keeps the verdict and maps Leader/NotLeader to Owner/NotOwner",
        |policy, kind, gate, d| {
            let Gate::Manager(mut v) = gate else {
                return true;
            };
            v.spread = !v.spread;
            let other = decide(policy, kind, Gate::Manager(v));
            if other.verdict != d.verdict {
                return false;
            }
            let as_spread = |r| match r {
                Reason::Leader => Reason::Owner,
                Reason::NotLeader => Reason::NotOwner,
                r => r,
            };
            // Same reason up to the Leader/Owner renaming, and the renaming goes the right way.
            let renamed_ok = if v.spread {
                !matches!(other.reason, Reason::Leader | Reason::NotLeader)
            } else {
                policy != ClusterPolicy::Leader
                    || !matches!(other.reason, Reason::Owner | Reason::NotOwner)
            };
            as_spread(other.reason) == as_spread(d.reason) && renamed_ok
        },
    );
}

#[test]
fn the_retry_attempt_number_never_matters() {
    for_all(
        "a retry's decision does not depend on its attempt number",
        |policy, kind, gate, d| {
            kind != FiringKind::Retry { attempt: 2 }
                || [3, 10, u32::MAX]
                    .into_iter()
                    .all(|attempt| decide(policy, FiringKind::Retry { attempt }, gate) == d)
        },
    );
}

#[test]
fn a_deferral_is_the_same_denial_a_scheduled_firing_skips_on() {
    // Deferral changes the verdict, never the reason: the scheduled firing of the same job in
    // the same state is skipped for the same transient reason (or, for a Leader job that only
    // an unconverged view keeps from confirming another owner, skipped as not-leader/owner).
    for_all(
        "Defer(r) for a retry/@reboot pairs with Skip(r) for a scheduled firing",
        |policy, kind, gate, d| {
            if d.verdict != Verdict::Defer {
                return true;
            }
            let scheduled = decide(policy, FiringKind::Scheduled, gate);
            scheduled == Decision::skip(d.reason)
                // The wait for an unconfirmed PreferLeader owner is the same for every kind.
                || (unconfirmed_owner_wait(policy, gate, d) && scheduled == d)
                || (d.reason == Reason::ConvergenceHold
                    && policy == ClusterPolicy::Leader
                    && matches!(scheduled.reason, Reason::NotLeader | Reason::NotOwner)
                    && scheduled.verdict == Verdict::Skip
                    && kind.defers())
                // A one-shot's own wait for the ran-record has no scheduled counterpart.
                || (kind == FiringKind::Reboot
                    && matches!(gate, Gate::Manager(v) if v.reboot_ran_unknown))
        },
    );
}

#[test]
fn rbt_06_a_reboot_that_already_ran_is_skipped_and_the_flag_touches_nothing_else() {
    for_all(
        "reboot_ran skips a managed Leader/PreferLeader @reboot and changes no other decision",
        |policy, kind, gate, d| match gate {
            Gate::Manager(v) if v.reboot_ran && !v.reboot_ran_unknown => {
                let without = decide(
                    policy,
                    kind,
                    Gate::Manager(ManagerView {
                        reboot_ran: false,
                        ..v
                    }),
                );
                if kind == FiringKind::Reboot && policy != ClusterPolicy::EveryNode {
                    d == Decision::skip(Reason::AlreadyRan)
                } else {
                    d == without
                }
            }
            _ => d.reason != Reason::AlreadyRan,
        },
    );
}

#[test]
fn rbt_22_a_reboot_waits_while_what_ran_is_unknown_and_the_flag_touches_nothing_else() {
    for_all(
        "reboot_ran_unknown defers a managed Leader/PreferLeader @reboot, nothing else",
        |policy, kind, gate, d| match gate {
            Gate::Manager(v) if v.reboot_ran_unknown => {
                if kind == FiringKind::Reboot && policy != ClusterPolicy::EveryNode {
                    d == Decision::defer(Reason::ConvergenceHold)
                } else {
                    let known = ManagerView {
                        reboot_ran_unknown: false,
                        ..v
                    };
                    d == decide(policy, kind, Gate::Manager(known))
                }
            }
            _ => true,
        },
    );
}
