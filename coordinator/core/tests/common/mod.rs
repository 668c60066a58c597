//! Helpers shared by the decision-table tests: the whole input space of `decide`.

use cronstable_core::{ClusterPolicy, FiringKind, Gate, ManagerView};

/// The firing kinds checked, one per variant (retries at the first relaunch).
const KINDS: [FiringKind; 4] = [
    FiringKind::Scheduled,
    FiringKind::Reboot,
    FiringKind::Retry { attempt: 2 },
    FiringKind::Manual,
];

/// Every manager view: all 2^9 combinations of its nine flags.
fn all_views() -> impl Iterator<Item = ManagerView> {
    (0u16..512).map(|bits| ManagerView {
        conflict: bits & 1 != 0,
        quorate: bits & 2 != 0,
        converging: bits & 4 != 0,
        spread: bits & 8 != 0,
        leader_owner: bits & 16 != 0,
        availability_owner: bits & 32 != 0,
        reboot_ran: bits & 64 != 0,
        reboot_ran_unknown: bits & 128 != 0,
        owner_unconfirmed: bits & 256 != 0,
    })
}

/// Every gate: election off, no manager, a manager being retried, and a manager with each view.
fn all_gates() -> impl Iterator<Item = Gate> {
    [
        Gate::ElectionOff,
        Gate::NoManager,
        Gate::ManagerRetrying,
        Gate::Starting,
    ]
    .into_iter()
    .chain(all_views().map(Gate::Manager))
}

/// The whole input space: 3 policies × 4 kinds × 516 gates.
pub(crate) fn all_inputs() -> impl Iterator<Item = (ClusterPolicy, FiringKind, Gate)> {
    ClusterPolicy::ALL.into_iter().flat_map(|policy| {
        KINDS
            .into_iter()
            .flat_map(move |kind| all_gates().map(move |gate| (policy, kind, gate)))
    })
}

/// The kind's spelling in the table files, without the attempt number.
pub(crate) fn kind_name(kind: FiringKind) -> &'static str {
    match kind {
        FiringKind::Scheduled => "scheduled",
        FiringKind::Reboot => "reboot",
        FiringKind::Retry { .. } => "retry",
        FiringKind::Manual => "manual",
        FiringKind::CatchUp => "catch_up",
    }
}
