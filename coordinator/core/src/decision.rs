//! The decision for one node and one firing: seed 000's per-job policy table (inventory §3).
//!
//! [`decide`] is a pure function of the job's policy, the firing kind and a [`Gate`] snapshot of
//! what this node's cluster manager currently knows. The coordinator builds the gate from its
//! latest cluster view and answers `ShouldRun` with the result; the shim applies the same table
//! itself (as [`Gate::NoManager`]) when it cannot reach the coordinator.
//!
//! Rows, evaluated in order:
//!
//! | # | condition | outcome |
//! |---|---|---|
//! | −1 | scheduled firing asked after its start deadline ([`past_starting_deadline`]) | skip (`starting_deadline`), whatever the rest says |
//! | 0 | manual firing | run (never gated, POL-02) |
//! | 1 | election off | run (every node runs everything) |
//! | 2 | policy EveryNode | run, even without a manager |
//! | 3 | no manager | Leader skips; PreferLeader runs |
//! | 3' | the coordinator's manager failed to start, retried | as 3, but Leader retries and @reboot defer |
//! | 3'' | the manager has not published its first view (starting) | Leader and PreferLeader skip (retries and @reboot defer) |
//! | 3a | @reboot one-shot, ran-record not yet read for this job set | defer (RBT-22) |
//! | 3b | @reboot one-shot that already ran in the cluster | skip (RBT-06) |
//! | 4 | conflict visible | Leader skips (defers for retries and @reboot) |
//! | 5 | PreferLeader | run only on the availability owner; held during convergence; deferred while the owner is not yet confirmed alive for this firing (lease backends) |
//! | 6 | Leader | run only on the quorum-gated leader / per-job owner |
//!
//! Scheduled firings never defer: a firing that cannot run now is skipped, because the next due
//! instant is the next chance. The one exception is PreferLeader's never-skip rule on a lease
//! backend (`owner_unconfirmed`): a follower whose holder has not been seen renewing since the
//! instant waits, because skipping on the word of a holder that may have just died would lose
//! the firing; the wait ends within the lease driver's silence bound, in a skip or a late run. Retries and `@reboot` one-shots defer on transient denials (no
//! quorum, a conflict, the convergence hold) and skip only when ownership is confirmed elsewhere
//! (RTY-02, RTY-03, RBT-01).

use std::fmt;
use std::time::Duration;

use crate::job::ClusterPolicy;

/// One firing as every layer names it: the job, its nominal instant and its kind (a retry with
/// its attempt). Converted once from the wire; the gate, the ledger and the metrics take it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Firing {
    /// The job's name.
    pub job: String,
    /// The nominal instant (Unix ms); for a manual start, when it was requested.
    pub scheduled_at_ms: i64,
    /// Scheduled, `@reboot`, a retry with its attempt, manual, or a catch-up.
    pub kind: FiringKind,
}

/// What kind of firing is being decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FiringKind {
    /// A due instant of the job's schedule.
    Scheduled,
    /// The one-shot of an `@reboot` job.
    Reboot,
    /// A relaunch after a failed attempt; `attempt` is 2 for the first relaunch.
    Retry {
        /// The attempt number about to run.
        attempt: u32,
    },
    /// An operator's explicit start.
    Manual,
    /// A missed instant of a job with `catchUp`, offered by its owner's coordinator: decided
    /// and claimed like a scheduled firing, but judged against the job's `catchUpWindow`
    /// instead of its start deadline ([`crate::catch_up`]).
    CatchUp,
}

impl FiringKind {
    /// Whether a Leader firing of this kind is claimed before it is answered RUN (on the lease
    /// stores that keep claims): a nominal instant's first attempt, scheduled or caught up. So
    /// it is also the kind whose unlaunched RUN an executor hands back (`not_launched`).
    pub fn is_claimed(self) -> bool {
        matches!(self, Self::Scheduled | Self::CatchUp)
    }

    /// Stable snake_case code for JSON, ledger lines and metric labels.
    pub fn code(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Reboot => "reboot",
            Self::Retry { .. } => "retry",
            Self::Manual => "manual",
            Self::CatchUp => "catch_up",
        }
    }

    /// The attempt number: a retry's own, 1 for every other kind.
    pub fn attempt(self) -> u32 {
        match self {
            Self::Retry { attempt } => attempt,
            _ => 1,
        }
    }

    /// True for firings that wait out a transient denial instead of being dropped.
    pub fn defers(self) -> bool {
        matches!(self, Self::Reboot | Self::Retry { .. })
    }
}

/// What this node's cluster manager knows at the moment of the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gate {
    /// No cluster section, or `electLeader: false`: every node runs every job.
    ElectionOff,
    /// Election is configured but there is no manager: its listener or backend failed to start,
    /// or (seen from the shim) the coordinator could not be reached in time.
    NoManager,
    /// Seen from the coordinator: election is configured and its own manager failed to start,
    /// but the start is being retried. The "no manager" row with one difference: a Leader retry
    /// or `@reboot` one-shot waits for the manager (defer) instead of being dropped, since the
    /// coordinator knows a decision will be possible once the start succeeds.
    ManagerRetrying,
    /// Seen from the coordinator: a manager is running (or has just recovered from a failed
    /// start) but has not published its first view. Nothing is known yet, so nothing gated
    /// runs: unlike "no manager", PreferLeader is held too, since an answer is moments away.
    Starting,
    /// A running manager's view, already resolved for the job being decided.
    Manager(ManagerView),
}

/// A cluster manager's view, resolved for one job.
///
/// The backend derives it: on gossip `quorate` means a quorum of agreeing members is visible and
/// `availability_owner` means "lowest reachable agreeing node" (or the spread owner among the
/// reachable); on a lease backend `quorate` means a fresh read of the store, `leader_owner` means
/// "holds the lease by the local deadline", and `availability_owner` means "holds the lease, or
/// cannot reach the store".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ManagerView {
    /// A duplicate nodeName, a cluster-size disagreement or a policy mismatch is visible.
    pub conflict: bool,
    /// This node sees a quorum (gossip) or has a fresh store read (lease backends).
    pub quorate: bool,
    /// A freshly built manager has not yet heard from every peer (gossip convergence hold).
    pub converging: bool,
    /// `distribution: spread`: ownership is per job, so reasons say owner rather than leader.
    pub spread: bool,
    /// This node is the quorum-gated leader, or under spread the quorum-gated owner of this job.
    pub leader_owner: bool,
    /// This node is the availability owner of this job (the PreferLeader rule).
    pub availability_owner: bool,
    /// Lease backends: the availability owner is another node (the lease holder) that this
    /// node has not yet seen renew since the firing's instant. PreferLeader must never be
    /// skipped, so rather than trust a holder that may have just died, a non-owner waits
    /// (defer): until the holder is seen renewing after the instant (it was alive to run the
    /// firing, so skip) or its renewals stop (the backend then makes this node the owner, so
    /// run, late by at most the silence bound).
    pub owner_unconfirmed: bool,
    /// The job is an `@reboot` job whose deferred one-shot already ran somewhere in the
    /// cluster under the current job set (gossip's `ran_reboot_jobs`, RBT-06).
    pub reboot_ran: bool,
    /// What ran is not known for the current job set yet (the backend's record was made under
    /// another one, e.g. in the round before a registration): a one-shot waits for it rather
    /// than risk a second run (the read-side closure of RBT-22).
    pub reboot_ran_unknown: bool,
}

/// The answer for one firing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Run it now.
    Run,
    /// Do not run this firing; it will not be offered again.
    Skip,
    /// Not now; ask again later.
    Defer,
}

impl Verdict {
    /// Lower-case name for logs and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Skip => "skip",
            Self::Defer => "defer",
        }
    }
}

/// Why. One enum for every verdict, mirrored one to one by the proto's `Reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Election is off; every node runs everything.
    ElectionOff,
    /// Manual runs are never gated.
    Manual,
    /// The job's policy is EveryNode.
    EveryNode,
    /// There is no cluster manager (Leader skips, PreferLeader runs).
    NoManager,
    /// A cluster conflict is visible.
    Conflict,
    /// This node does not see a quorum.
    NoQuorum,
    /// This node is the quorum-gated leader.
    Leader,
    /// Another node is the leader.
    NotLeader,
    /// This node owns the job.
    Owner,
    /// Another node owns the job.
    NotOwner,
    /// A fresh cluster manager is still converging.
    ConvergenceHold,
    /// The executor could not reach its coordinator in time (executor-side).
    CoordinatorUnreachable,
    /// The previous run was still going and the job forbids overlap (executor-side).
    ConcurrencyPolicy,
    /// The firing came later than the lateness bound (executor-side).
    TooLate,
    /// This firing already ran in the cluster, so it is not run again: a Leader or
    /// PreferLeader `@reboot` one-shot under the current job set (RBT-06, RBT-21), or a
    /// scheduled Leader firing that a lease holder claimed in the store (per-firing claims).
    AlreadyRan,
    /// The node's cluster manager has not published its first view yet (it is starting, or
    /// has just recovered from a failed start): nothing gated runs until it has.
    Starting,
    /// A scheduled firing asked about after its job's start deadline: a late question is no
    /// new firing (see [`past_starting_deadline`]).
    StartingDeadline,
    /// A catch-up firing this coordinator will not run: past the job's `catchUpWindow`, a job
    /// without `catchUp`, or a backend that keeps no claims (so it cannot know that nobody ran
    /// the instant).
    NotCaughtUp,
    /// The executor stopped (or was stopping) between a RUN answer and the launch, so nothing
    /// ran (executor-side). The coordinator that answered gives the firing's claim back, so
    /// the instant is not taken as run: a successor or catch-up may still run it.
    NotLaunched,
}

impl Reason {
    /// Every reason, in declaration order.
    pub const ALL: [Reason; 19] = [
        Self::ElectionOff,
        Self::Manual,
        Self::EveryNode,
        Self::NoManager,
        Self::Conflict,
        Self::NoQuorum,
        Self::Leader,
        Self::NotLeader,
        Self::Owner,
        Self::NotOwner,
        Self::ConvergenceHold,
        Self::CoordinatorUnreachable,
        Self::ConcurrencyPolicy,
        Self::TooLate,
        Self::AlreadyRan,
        Self::Starting,
        Self::StartingDeadline,
        Self::NotCaughtUp,
        Self::NotLaunched,
    ];

    /// Stable snake_case code for JSON, metrics labels and logs.
    pub fn code(self) -> &'static str {
        match self {
            Self::ElectionOff => "election_off",
            Self::Manual => "manual",
            Self::EveryNode => "every_node",
            Self::NoManager => "no_manager",
            Self::Conflict => "conflict",
            Self::NoQuorum => "no_quorum",
            Self::Leader => "leader",
            Self::NotLeader => "not_leader",
            Self::Owner => "owner",
            Self::NotOwner => "not_owner",
            Self::ConvergenceHold => "convergence_hold",
            Self::CoordinatorUnreachable => "coordinator_unreachable",
            Self::ConcurrencyPolicy => "concurrency_policy",
            Self::TooLate => "too_late",
            Self::AlreadyRan => "already_ran",
            Self::Starting => "starting",
            Self::StartingDeadline => "starting_deadline",
            Self::NotCaughtUp => "not_caught_up",
            Self::NotLaunched => "not_launched",
        }
    }

    /// A readable sentence for logs and API answers.
    pub fn describe(self) -> &'static str {
        match self {
            Self::ElectionOff => "leader election is off, so every node runs every job",
            Self::Manual => "manual runs are never gated",
            Self::EveryNode => "the job's clusterPolicy is EveryNode",
            Self::NoManager => "there is no cluster manager on this node",
            Self::Conflict => "a cluster conflict is visible (duplicate nodeName, size or policy)",
            Self::NoQuorum => "this node does not see a quorum",
            Self::Leader => "this node is the quorum-gated leader",
            Self::NotLeader => "another node is the leader",
            Self::Owner => "this node owns the job",
            Self::NotOwner => "another node owns the job",
            Self::ConvergenceHold => "the cluster manager is still converging after a start",
            Self::CoordinatorUnreachable => "the coordinator did not answer in time",
            Self::ConcurrencyPolicy => {
                "the previous run is still going and the job forbids overlap"
            }
            Self::TooLate => "the firing came later than the lateness bound",
            Self::AlreadyRan => {
                "this firing already ran in the cluster: an @reboot one-shot under the current \
                 job set, or a scheduled Leader firing that a lease holder claimed"
            }
            Self::Starting => "the cluster manager has not published its first view yet",
            Self::StartingDeadline => {
                "the question came after the firing's start deadline (startingDeadline), so it \
                 is no new firing"
            }
            Self::NotCaughtUp => {
                "this coordinator does not catch this instant up: it is past the job's \
                 catchUpWindow, the job has no catchUp, or no firing claims are kept here"
            }
            Self::NotLaunched => {
                "the executor stopped before it launched the run it was answered RUN for, so \
                 nothing ran and the firing's claim is given back"
            }
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A verdict with its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Run, skip or defer.
    pub verdict: Verdict,
    /// Why.
    pub reason: Reason,
}

impl Decision {
    const fn new(verdict: Verdict, reason: Reason) -> Self {
        Self { verdict, reason }
    }

    /// Shorthand for a run.
    pub const fn run(reason: Reason) -> Self {
        Self::new(Verdict::Run, reason)
    }

    /// Shorthand for a skip.
    pub const fn skip(reason: Reason) -> Self {
        Self::new(Verdict::Skip, reason)
    }

    /// Shorthand for a deferral.
    pub const fn defer(reason: Reason) -> Self {
        Self::new(Verdict::Defer, reason)
    }
}

/// Row −1, applied before the table: whether a question about a firing of `kind` due at
/// `scheduled_at_ms`, asked at `now_ms`, comes after the job's start `deadline`. Only scheduled
/// firings have one: a retry, an `@reboot` one-shot and a manual start are asked about long
/// after their nominal instant by design. A late question is no new firing: whoever leads now
/// did not lead then, and may be asked about an instant another node already ran (a gate that
/// crond starts again, a re-ask across a handover).
pub fn past_starting_deadline(
    kind: FiringKind,
    scheduled_at_ms: i64,
    now_ms: i64,
    deadline: Duration,
) -> bool {
    let deadline_ms = i64::try_from(deadline.as_millis()).unwrap_or(i64::MAX);
    kind == FiringKind::Scheduled && now_ms.saturating_sub(scheduled_at_ms) > deadline_ms
}

/// Decides one firing of a job with `policy` on this node. See the module docs for the table.
pub fn decide(policy: ClusterPolicy, kind: FiringKind, gate: Gate) -> Decision {
    if kind == FiringKind::Manual {
        return Decision::run(Reason::Manual);
    }
    let view = match gate {
        Gate::ElectionOff => return Decision::run(Reason::ElectionOff),
        _ if policy == ClusterPolicy::EveryNode => return Decision::run(Reason::EveryNode),
        Gate::NoManager => {
            return match policy {
                ClusterPolicy::PreferLeader => Decision::run(Reason::NoManager),
                _ => Decision::skip(Reason::NoManager),
            };
        }
        Gate::ManagerRetrying => {
            return match policy {
                ClusterPolicy::PreferLeader => Decision::run(Reason::NoManager),
                _ if kind.defers() => Decision::defer(Reason::NoManager),
                _ => Decision::skip(Reason::NoManager),
            };
        }
        Gate::Starting if kind.defers() => return Decision::defer(Reason::Starting),
        Gate::Starting => return Decision::skip(Reason::Starting),
        Gate::Manager(view) => view,
    };
    // A transient denial: retries and @reboot one-shots wait it out, scheduled firings are gone.
    let denied = |reason| {
        if kind.defers() {
            Decision::defer(reason)
        } else {
            Decision::skip(reason)
        }
    };
    // A deferred one-shot runs once per cluster, not once per node or per leader (RBT-06).
    if kind == FiringKind::Reboot && view.reboot_ran_unknown {
        return Decision::defer(Reason::ConvergenceHold);
    }
    if kind == FiringKind::Reboot && view.reboot_ran {
        return Decision::skip(Reason::AlreadyRan);
    }
    match policy {
        ClusterPolicy::EveryNode => Decision::run(Reason::EveryNode),
        ClusterPolicy::PreferLeader => {
            if view.converging {
                denied(Reason::ConvergenceHold)
            } else if view.availability_owner {
                Decision::run(Reason::Owner)
            } else if view.owner_unconfirmed {
                // Even a scheduled firing waits here: skipping it would lose it if the owner
                // died just before the instant.
                Decision::defer(Reason::NotOwner)
            } else {
                Decision::skip(Reason::NotOwner)
            }
        }
        ClusterPolicy::Leader => {
            let (owner, not_owner) = if view.spread {
                (Reason::Owner, Reason::NotOwner)
            } else {
                (Reason::Leader, Reason::NotLeader)
            };
            if view.conflict {
                denied(Reason::Conflict)
            } else if !view.quorate {
                denied(Reason::NoQuorum)
            } else if view.leader_owner {
                Decision::run(owner)
            } else if view.converging && kind.defers() {
                // An unconverged view cannot confirm that another node owns the job.
                Decision::defer(Reason::ConvergenceHold)
            } else {
                Decision::skip(not_owner)
            }
        }
    }
}
