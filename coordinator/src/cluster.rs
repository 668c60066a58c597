//! The cluster view: the one piece of shared state every firing decision reads.
//!
//! Exactly one task, the node's backend, writes the [`ClusterView`] and publishes it on a
//! `tokio::sync::watch` channel; the gRPC handlers, the HTTP API and the dashboard only read
//! snapshots of it. A `ShouldRun` answer therefore never waits on the network: it is computed
//! from the latest snapshot with [`ClusterView::gate_for`] and the pure `decide` table.
//!
//! The backends that fill in [`Election::Managed`] (gossip, etcd, Kubernetes, filesystem) plug in
//! behind [`ClusterBackend`]. The election-off backend here is the one used when the config has
//! no cluster section.
//!
//! A view can go stale without its writer noticing (a wedged store call, a backend task starved
//! of CPU). So leadership and quorum in a [`ManagedView`] carry optional local deadlines
//! ([`ManagedView::lead_until`], [`ManagedView::quorate_until`]) that [`ClusterView::gate_for`]
//! checks against the caller's `now`: a lease holder demotes itself on time with no I/O at all.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use cronstable_core::rendezvous;
use cronstable_core::{ClusterPolicy, Gate, ManagerView};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::jobs::JobSet;
use crate::status::ClusterStatus;

/// What this node's cluster manager knows right now.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterView {
    /// This node's name (`cluster.nodeName`, else the host name).
    pub node_name: String,
    /// The election state.
    pub election: Election,
    /// What `GET /cluster` shows: the backend's own status block.
    pub status: Arc<ClusterStatus>,
}

/// The election state of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Election {
    /// No election: every node runs every job.
    Off,
    /// Election is configured and the backend has not published its first view yet (gossip:
    /// its first round has not completed; lease: its first store round has not). The node
    /// knows nothing, so it does not act: Leader firings skip, Leader and PreferLeader
    /// `@reboot` one-shots and retries defer, PreferLeader scheduled firings are held as in the
    /// convergence hold (GSP-100), EveryNode runs. Never answered from an election-off view.
    Starting,
    /// Election is configured, but the manager is not running (its listener or backend failed
    /// to start) and its start is being retried. Leader jobs skip (retries and `@reboot`
    /// one-shots wait for the manager), PreferLeader jobs run.
    NoManager {
        /// Why the manager is absent, for `/cluster` and logs.
        reason: String,
    },
    /// A running manager's view.
    Managed(ManagedView),
}

/// A running manager's view of the cluster, as its backend last derived it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManagedView {
    /// A duplicate nodeName, size or policy conflict is visible.
    pub conflict: bool,
    /// A quorum of agreeing members is visible (gossip), or the store was read recently (lease).
    ///
    /// Gossip publishes `RoundView::self_candidate` here rather than the bare quorum flag: a
    /// node counts itself as a candidate (and so may lead or own a spread job) only after it
    /// was quorate for `SELF_CANDIDATE_ROUNDS` rounds, which the core's simulator showed is
    /// what keeps a joint boot on a bridge from electing two leaders.
    pub quorate: bool,
    /// A fresh manager is still in its convergence hold.
    pub converging: bool,
    /// `distribution: spread` is on: ownership is per job.
    pub spread: bool,
    /// The quorum-gated leader (single-leader mode, when quorate).
    pub leader: Option<String>,
    /// Agreeing members seen by a quorate node, including this node: the ring for Leader jobs
    /// under spread.
    pub agreeing: Vec<String>,
    /// Reachable agreeing members, including this node: the ring for PreferLeader jobs.
    pub reachable_agreeing: Vec<String>,
    /// Spread only: peers a quorate neighbour vouches for but this node cannot confirm itself
    /// (DST-04). They join every Leader job's rendezvous, so this node defers to any that
    /// outranks it.
    pub vouched: Vec<String>,
    /// The fencing token a RUN carries on backends that have one.
    pub fence: Option<String>,
    /// Lease backends only: the PreferLeader rule becomes "run unless a fresh read of the store
    /// shows another node holding the lease" (inventory §3, lease translation).
    pub lease: Option<LeaseGate>,
    /// This node stops counting as leader at this instant unless the backend renews the view
    /// first (lease: renew time + duration − 1 s). `None`: no local deadline.
    pub lead_until: Option<Instant>,
    /// The view stops counting as quorate at this instant (lease: last store contact + one
    /// duration). `None`: no local deadline.
    pub quorate_until: Option<Instant>,
    /// Which deferred `@reboot` one-shots already ran in the cluster (RBT-06), on backends
    /// that keep the record (gossip, the lease stores); `None` where nothing is kept.
    pub reboot_ran: Option<Arc<RebootRanRecord>>,
}

/// The `@reboot` one-shots known to have run, and the job set the record is about.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RebootRanRecord {
    /// The job-set ID the record was made under. A one-shot decided under another job set
    /// waits for the next round rather than trust a record about a different set.
    pub job_set_id: String,
    /// The jobs: the gate skips their one-shot as `already_ran`.
    pub jobs: BTreeSet<String>,
}

/// The lease-backend part of a [`ManagedView`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaseGate {
    /// The lease holder's identity (token stripped) from the last successful store read.
    pub holder: Option<String>,
    /// Another node's renewals as this node's reads of its lease record show them; `None`
    /// when this node holds, nobody does, or the store shows no renewals.
    pub renewals: Option<HolderRenewals>,
}

/// What this node's reads show of another holder's renewals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HolderRenewals {
    /// The record did not change for the silence bound, up to the latest read: the holder's
    /// renewals stopped, so PreferLeader runs here rather than wait out the lease.
    pub silent: bool,
    /// The holder was seen renewing at some moment after this wall-clock instant (Unix ms):
    /// the start of the last read before the record's latest change. `None` until a change
    /// was seen.
    pub alive_after_ms: Option<i64>,
}

impl LeaseGate {
    /// Whether another node's hold has gone silent (its renewals stopped).
    pub fn holder_silent(&self) -> bool {
        self.renewals.is_some_and(|r| r.silent)
    }
}

impl ManagedView {
    /// Whether the view is quorate at `now`, after its local deadline.
    pub fn quorate_at(&self, now: Instant) -> bool {
        self.quorate && self.quorate_until.is_none_or(|t| now < t)
    }

    /// The leader at `now`: `None` once the view is not quorate or this node's lead deadline
    /// passed (the deadline is this node's own, so it only ever demotes this node).
    pub fn leader_at(&self, me: &str, now: Instant) -> Option<&str> {
        if !self.quorate_at(now) {
            return None;
        }
        let leader = self.leader.as_deref()?;
        if leader == me && self.lead_until.is_some_and(|t| now >= t) {
            return None;
        }
        Some(leader)
    }
}

impl ClusterView {
    /// A view with election off.
    pub fn election_off(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
            election: Election::Off,
            status: Arc::new(ClusterStatus::Disabled),
        }
    }

    /// The view of a node whose configured backend has not published its first view:
    /// [`Election::Starting`], with `status` as `GET /cluster` shows it meanwhile.
    pub fn starting(node_name: impl Into<String>, status: ClusterStatus) -> Self {
        Self {
            node_name: node_name.into(),
            election: Election::Starting,
            status: Arc::new(status),
        }
    }

    /// The manager's state as `GET /cluster` shows it in `manager`: `starting` before the
    /// backend's first view, `retrying` while its start fails and is retried, `running` once it
    /// publishes views; `None` with election off (the seed's body stays as it is).
    pub fn manager_state(&self) -> Option<&'static str> {
        match &self.election {
            Election::Off => None,
            Election::Starting => Some("starting"),
            Election::NoManager { .. } => Some("retrying"),
            Election::Managed(_) => Some("running"),
        }
    }

    /// The decision gate for one job at `now`, resolved from this view.
    pub fn gate_for(&self, job: &str, now: Instant) -> Gate {
        match &self.election {
            Election::Off => Gate::ElectionOff,
            // The coordinator's own manager retries its start, so a deferrable firing waits.
            Election::NoManager { .. } => Gate::ManagerRetrying,
            // Nothing is known yet: the table's own starting row.
            Election::Starting => Gate::Starting,
            Election::Managed(view) => {
                let me = self.node_name.as_str();
                let quorate = view.quorate_at(now);
                let leader_owner = if view.spread {
                    quorate && self.spread_leader_owner(job, view) == Some(me)
                } else {
                    view.leader_at(me, now) == Some(me)
                };
                let availability_owner = if let Some(lease) = &view.lease {
                    // Defer only to a holder this node can see right now and that still
                    // renews; without a fresh read, with no holder or a silent one,
                    // PreferLeader runs here.
                    !quorate
                        || lease.holder.as_deref().is_none_or(|h| h == me)
                        || lease.holder_silent()
                } else if view.spread {
                    self.owner_in(job, &view.reachable_agreeing) == Some(me)
                } else {
                    // The lowest reachable agreeing node; an isolated node is its own owner.
                    view.reachable_agreeing
                        .iter()
                        .map(String::as_str)
                        .min()
                        .unwrap_or(me)
                        == me
                };
                Gate::Manager(ManagerView {
                    conflict: view.conflict,
                    quorate,
                    converging: view.converging,
                    spread: view.spread,
                    leader_owner,
                    availability_owner,
                    // Needs the firing's instant, which the caller knows (`should_run`).
                    owner_unconfirmed: false,
                    reboot_ran: view
                        .reboot_ran
                        .as_ref()
                        .is_some_and(|r| r.jobs.contains(job)),
                    // Needs the current job set, which the caller knows (`should_run`).
                    reboot_ran_unknown: false,
                })
            }
        }
    }

    /// Lease backends: whether the PreferLeader owner is another node, the holder, that this
    /// node has not yet seen renew since `firing_at_ms` (`ManagerView::owner_unconfirmed`).
    /// False where the store shows no renewals: then the holder's word stands, as before.
    pub fn owner_unconfirmed(&self, firing_at_ms: i64, now: Instant) -> bool {
        let Election::Managed(view) = &self.election else {
            return false;
        };
        let Some(lease) = &view.lease else {
            return false;
        };
        let other = lease.holder.as_deref().is_some_and(|h| h != self.node_name);
        view.quorate_at(now)
            && other
            && lease.renewals.is_some_and(|r| {
                !r.silent && r.alive_after_ms.is_none_or(|after| after < firing_at_ms)
            })
    }

    /// `quorate`, `is_leader` and `leader` as the gate computes them at `now`, for `GET /cluster`
    /// and the metrics; `None` with election off. `leader` is `None` (leave the backend's
    /// field alone) under spread, where there is no single leader.
    pub fn gate_signals(&self, now: Instant) -> Option<GateSignals> {
        match &self.election {
            Election::Off => None,
            Election::NoManager { .. } | Election::Starting => Some(GateSignals {
                quorate: false,
                is_leader: false,
                leader: Some(None),
            }),
            Election::Managed(view) => {
                let me = self.node_name.as_str();
                let leader = view.leader_at(me, now);
                Some(GateSignals {
                    quorate: view.quorate_at(now),
                    is_leader: !view.spread && leader == Some(me),
                    leader: (!view.spread).then(|| leader.map(str::to_owned)),
                })
            }
        }
    }

    /// True when election is configured (whether or not a manager runs): a Leader firing then
    /// runs on one node only.
    pub fn elects(&self) -> bool {
        !matches!(self.election, Election::Off)
    }

    /// The node that owns a firing of `job` with `policy` at `now`, when this view can name one.
    pub fn owner_of(&self, job: &str, policy: ClusterPolicy, now: Instant) -> Option<String> {
        match &self.election {
            Election::Off | Election::NoManager { .. } => Some(self.node_name.clone()),
            Election::Starting if policy == ClusterPolicy::EveryNode => {
                Some(self.node_name.clone())
            }
            Election::Starting => None,
            Election::Managed(_) if policy == ClusterPolicy::EveryNode => {
                Some(self.node_name.clone())
            }
            Election::Managed(view) if view.lease.is_some() => {
                let holder = view.leader_at(&self.node_name, now).map(str::to_owned);
                let silent = view.lease.as_ref().is_some_and(LeaseGate::holder_silent);
                match policy {
                    ClusterPolicy::PreferLeader if holder.is_none() || silent => {
                        Some(self.node_name.clone())
                    }
                    _ => holder,
                }
            }
            Election::Managed(view) => {
                if view.spread && policy == ClusterPolicy::PreferLeader {
                    self.owner_in(job, &view.reachable_agreeing)
                        .map(str::to_owned)
                } else if view.spread {
                    // As the gate: without a quorum nobody owns a Leader job, so an isolated
                    // node never names itself (the fleet-wide "one owner per job" check).
                    if view.quorate_at(now) {
                        self.spread_leader_owner(job, view).map(str::to_owned)
                    } else {
                        None
                    }
                } else if policy == ClusterPolicy::PreferLeader {
                    view.reachable_agreeing
                        .iter()
                        .min()
                        .cloned()
                        .or_else(|| Some(self.node_name.clone()))
                } else {
                    view.leader_at(&self.node_name, now).map(str::to_owned)
                }
            }
        }
    }

    /// The fencing token, on backends that have one.
    pub fn fence(&self) -> Option<&str> {
        match &self.election {
            Election::Managed(view) => view.fence.as_deref(),
            _ => None,
        }
    }

    /// The spread owner of a Leader job: the rendezvous winner over the agreeing members plus
    /// the vouched-for peers this node cannot confirm itself (DST-04).
    fn spread_leader_owner<'a>(&'a self, job: &str, view: &'a ManagedView) -> Option<&'a str> {
        if view.agreeing.is_empty() && view.vouched.is_empty() {
            return Some(self.node_name.as_str());
        }
        rendezvous::owner(
            job,
            view.agreeing
                .iter()
                .chain(view.vouched.iter())
                .map(String::as_str),
        )
    }

    fn owner_in<'a>(&'a self, job: &str, ring: &'a [String]) -> Option<&'a str> {
        if ring.is_empty() {
            return Some(self.node_name.as_str());
        }
        rendezvous::owner(job, ring.iter().map(String::as_str))
    }
}

/// The cluster signals an operator reads, as the gate computes them ([`ClusterView::gate_signals`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSignals {
    /// Whether the gate counts this node quorate now.
    pub quorate: bool,
    /// Whether the gate would answer this node's Leader firings RUN as the leader.
    pub is_leader: bool,
    /// The leader the gate acts on (`Some(None)`: none); `None` under spread.
    pub leader: Option<Option<String>>,
}

/// Resolves when `rx` changes; never, once its sender is gone (nothing can change any more).
/// For a backend's `select!` on [`BackendContext::overdue`].
pub(crate) async fn changed<T>(rx: &mut watch::Receiver<T>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// A future that resolves when the coordinator is shutting down.
pub type ShutdownSignal = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What a backend is handed when it starts.
pub struct BackendContext {
    /// Deferred `@reboot` one-shots this node's executors started (RBT-06).
    pub reboot_ran: crate::reboot::ran::RebootRan,
    /// The node's view: the backend is its only writer.
    pub view: watch::Sender<ClusterView>,
    /// The registered job set (its ID is what gossip attests).
    pub job_set: watch::Receiver<Arc<JobSet>>,
    /// The run ledger, read for the display-only run summaries gossip shares.
    pub ledger: crate::ledger::Ledger,
    /// The earliest Leader firing an executor on this node let pass unasked (`None`: every
    /// executor keeps up). A lease backend does not hold its lease while there is one.
    pub overdue: watch::Receiver<Option<crate::liveness::Overdue>>,
    /// Resolves when the coordinator shuts down.
    pub shutdown: ShutdownSignal,
}

/// A cluster backend: the single writer of the node's [`ClusterView`].
///
/// `run` owns the `watch::Sender` for the whole life of the coordinator and returns when
/// `shutdown` resolves (after releasing whatever it holds, such as a lease). A backend that
/// cannot start (a bad certificate, a port in use, an unreachable store) does not return an
/// error: it publishes [`Election::NoManager`] or a non-quorate view, logs why, and keeps trying
/// where trying makes sense, because the coordinator must keep answering ShouldRun.
pub trait ClusterBackend: Send + 'static {
    /// The backend's name as it appears on `GET /cluster` (`gossip`, `etcd`, …).
    fn name(&self) -> &'static str;

    /// What the node shows and answers from before `run` publishes its first view. A backend
    /// that elects returns [`ClusterView::starting`]: a node that does not know yet must not
    /// act, so this is never an election-off view unless election really is off.
    fn initial_view(&self) -> ClusterView;

    /// Drives the backend until shutdown.
    fn run(self: Box<Self>, ctx: BackendContext) -> Pin<Box<dyn Future<Output = ()> + Send>>;

    /// How long `run` may take to return once shutdown resolves: a round in flight plus what
    /// the backend does on the way out (a lease release, freeing a listener). The supervisor
    /// waits this long before it aborts the task.
    fn stop_bound(&self) -> std::time::Duration {
        DEFAULT_STOP_BOUND
    }
}

/// [`ClusterBackend::stop_bound`] of a backend that has nothing slow to do when it stops.
pub const DEFAULT_STOP_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

/// The backend of a node without election: it publishes [`Election::Off`] once and idles.
#[derive(Debug, Clone)]
pub struct ElectionOffBackend {
    node_name: String,
}

impl ElectionOffBackend {
    /// A backend for the node `node_name`.
    pub fn new(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
        }
    }
}

impl ClusterBackend for ElectionOffBackend {
    fn name(&self) -> &'static str {
        "none"
    }

    fn initial_view(&self) -> ClusterView {
        ClusterView::election_off(self.node_name.clone())
    }

    fn run(self: Box<Self>, ctx: BackendContext) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            ctx.view
                .send_replace(ClusterView::election_off(self.node_name));
            ctx.shutdown.await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn managed(me: &str, view: ManagedView) -> ClusterView {
        ClusterView {
            node_name: me.into(),
            election: Election::Managed(view),
            status: Arc::default(),
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A lease follower `b` whose reads show holder `a` with `renewals`.
    fn lease_follower(renewals: Option<HolderRenewals>) -> ClusterView {
        managed(
            "b",
            ManagedView {
                quorate: true,
                leader: Some("a".into()),
                lease: Some(LeaseGate {
                    holder: Some("a".into()),
                    renewals,
                }),
                ..ManagedView::default()
            },
        )
    }

    /// The PreferLeader decision for a scheduled firing at `at_ms`, as `should_run` makes it.
    fn prefer_leader(v: &ClusterView, at_ms: i64) -> cronstable_core::Decision {
        let now = Instant::now();
        let mut gate = v.gate_for("j", now);
        if let Gate::Manager(g) = &mut gate {
            g.owner_unconfirmed = v.owner_unconfirmed(at_ms, now);
        }
        cronstable_core::decide(
            ClusterPolicy::PreferLeader,
            cronstable_core::FiringKind::Scheduled,
            gate,
        )
    }

    #[test]
    fn a_lease_follower_never_skips_prefer_leader_on_an_unconfirmed_holder() {
        use cronstable_core::{Decision, Reason};
        let alive_after = |ms| {
            Some(HolderRenewals {
                silent: false,
                alive_after_ms: ms,
            })
        };
        // Seen renewing after the instant: the holder ran it.
        let v = lease_follower(alive_after(Some(1_000)));
        assert_eq!(prefer_leader(&v, 999), Decision::skip(Reason::NotOwner));
        // Not seen renewing since the instant (or not at all yet): wait and ask again.
        assert_eq!(prefer_leader(&v, 1_001), Decision::defer(Reason::NotOwner));
        let v = lease_follower(alive_after(None));
        assert_eq!(prefer_leader(&v, 1), Decision::defer(Reason::NotOwner));
        // Its renewals stopped: this node owns the firing, late or not.
        let v = lease_follower(Some(HolderRenewals {
            silent: true,
            alive_after_ms: Some(1_000),
        }));
        assert_eq!(prefer_leader(&v, 999), Decision::run(Reason::Owner));
        assert_eq!(
            v.owner_of("j", ClusterPolicy::PreferLeader, Instant::now()),
            Some("b".to_owned())
        );
        // A store that shows no renewals: the holder's word stands, as before.
        let v = lease_follower(None);
        assert_eq!(prefer_leader(&v, 5_000), Decision::skip(Reason::NotOwner));
        // Leader jobs never look at any of it.
        let v = lease_follower(alive_after(None));
        let gate = v.gate_for("j", Instant::now());
        let d = cronstable_core::decide(
            ClusterPolicy::Leader,
            cronstable_core::FiringKind::Scheduled,
            gate,
        );
        assert_eq!(d, Decision::skip(Reason::NotLeader));
    }

    #[test]
    fn election_off_and_no_manager_map_to_their_gates() {
        assert_eq!(
            ClusterView::election_off("a").gate_for("j", Instant::now()),
            Gate::ElectionOff
        );
        let v = ClusterView {
            node_name: "a".into(),
            election: Election::NoManager {
                reason: "bind failed".into(),
            },
            status: Arc::default(),
        };
        assert_eq!(v.gate_for("j", Instant::now()), Gate::ManagerRetrying);
    }

    #[test]
    fn a_starting_node_acts_on_nothing_but_every_node_jobs() {
        use cronstable_core::{FiringKind, Reason, Verdict, decide};
        let v = ClusterView::starting("a", ClusterStatus::Disabled);
        let gate = v.gate_for("j", Instant::now());
        let d = |policy, kind| decide(policy, kind, gate);
        use ClusterPolicy::{EveryNode, Leader, PreferLeader};
        let retry = FiringKind::Retry { attempt: 2 };
        assert_eq!(d(Leader, FiringKind::Scheduled).verdict, Verdict::Skip);
        assert_eq!(d(Leader, FiringKind::Reboot).verdict, Verdict::Defer);
        assert_eq!(d(Leader, retry).verdict, Verdict::Defer);
        assert_eq!(gate, Gate::Starting);
        assert_eq!(d(Leader, FiringKind::Scheduled).reason, Reason::Starting);
        assert_eq!(
            d(PreferLeader, FiringKind::Scheduled).reason,
            Reason::Starting
        );
        assert_eq!(
            d(PreferLeader, FiringKind::Scheduled).verdict,
            Verdict::Skip
        );
        assert_eq!(d(PreferLeader, FiringKind::Reboot).verdict, Verdict::Defer);
        assert_eq!(d(PreferLeader, retry).verdict, Verdict::Defer);
        assert_eq!(d(EveryNode, FiringKind::Scheduled).verdict, Verdict::Run);
        assert_eq!(d(EveryNode, FiringKind::Reboot).verdict, Verdict::Run);
        assert_eq!(v.owner_of("j", Leader, Instant::now()), None);
        assert_eq!(v.fence(), None);
    }

    #[test]
    fn single_leader_gate_marks_only_the_quorate_leader_as_owner() {
        let view = ManagedView {
            quorate: true,
            leader: Some("a".into()),
            agreeing: names(&["a", "b", "c"]),
            reachable_agreeing: names(&["a", "b", "c"]),
            ..Default::default()
        };
        let Gate::Manager(a) = managed("a", view.clone()).gate_for("j", Instant::now()) else {
            panic!("expected a manager gate")
        };
        assert!(a.leader_owner && a.availability_owner);
        let Gate::Manager(b) = managed("b", view).gate_for("j", Instant::now()) else {
            panic!("expected a manager gate")
        };
        assert!(!b.leader_owner && !b.availability_owner);
    }

    #[test]
    fn an_isolated_node_owns_its_prefer_leader_jobs_but_leads_nothing() {
        let view = ManagedView {
            quorate: false,
            reachable_agreeing: names(&["c"]),
            ..Default::default()
        };
        let Gate::Manager(c) = managed("c", view).gate_for("j", Instant::now()) else {
            panic!("expected a manager gate")
        };
        assert!(c.availability_owner);
        assert!(!c.leader_owner);
    }

    #[test]
    fn spread_owner_is_the_rendezvous_winner_among_agreeing_members() {
        let ring = names(&["a", "b", "c"]);
        let view = ManagedView {
            quorate: true,
            spread: true,
            agreeing: ring.clone(),
            reachable_agreeing: ring.clone(),
            ..Default::default()
        };
        let winner = rendezvous::owner("job-x", ring.iter().map(String::as_str)).unwrap();
        for me in ["a", "b", "c"] {
            let Gate::Manager(g) = managed(me, view.clone()).gate_for("job-x", Instant::now())
            else {
                panic!("expected a manager gate")
            };
            assert_eq!(g.leader_owner, me == winner, "node {me}");
        }
    }
}
