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

use std::future::Future;
use std::pin::Pin;

use cronstable_core::rendezvous;
use cronstable_core::{ClusterPolicy, Gate, ManagerView};
use tokio::sync::watch;

/// What this node's cluster manager knows right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    /// This node's name (`cluster.nodeName`, else the host name).
    pub node_name: String,
    /// The election state.
    pub election: Election,
}

/// The election state of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Election {
    /// No election: every node runs every job.
    Off,
    /// Election is configured, but the manager is not running (its listener or backend failed
    /// to start). Leader jobs skip, PreferLeader jobs run.
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
    /// The fencing token a RUN carries on backends that have one.
    pub fence: Option<String>,
}

impl ClusterView {
    /// A view with election off.
    pub fn election_off(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
            election: Election::Off,
        }
    }

    /// The decision gate for one job, resolved from this view.
    pub fn gate_for(&self, job: &str) -> Gate {
        match &self.election {
            Election::Off => Gate::ElectionOff,
            Election::NoManager { .. } => Gate::NoManager,
            Election::Managed(view) => {
                let me = self.node_name.as_str();
                let leader_owner = if view.spread {
                    view.quorate && self.owner_in(job, &view.agreeing) == Some(me)
                } else {
                    view.quorate && view.leader.as_deref() == Some(me)
                };
                let availability_owner = if view.spread {
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
                    quorate: view.quorate,
                    converging: view.converging,
                    spread: view.spread,
                    leader_owner,
                    availability_owner,
                })
            }
        }
    }

    /// The node that owns a firing of `job` with `policy`, when this view can name one.
    pub fn owner_of(&self, job: &str, policy: ClusterPolicy) -> Option<String> {
        match &self.election {
            Election::Off | Election::NoManager { .. } => Some(self.node_name.clone()),
            Election::Managed(_) if policy == ClusterPolicy::EveryNode => {
                Some(self.node_name.clone())
            }
            Election::Managed(view) => {
                let ring = match policy {
                    ClusterPolicy::PreferLeader => &view.reachable_agreeing,
                    _ => &view.agreeing,
                };
                if view.spread {
                    self.owner_in(job, ring).map(str::to_owned)
                } else if policy == ClusterPolicy::PreferLeader {
                    ring.iter()
                        .min()
                        .cloned()
                        .or_else(|| Some(self.node_name.clone()))
                } else {
                    view.leader.clone()
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

    fn owner_in<'a>(&'a self, job: &str, ring: &'a [String]) -> Option<&'a str> {
        if ring.is_empty() {
            return Some(self.node_name.as_str());
        }
        rendezvous::owner(job, ring.iter().map(String::as_str))
    }
}

/// A future that resolves when the coordinator is shutting down.
pub type ShutdownSignal = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A cluster backend: the single writer of the node's [`ClusterView`].
///
/// `run` owns the `watch::Sender` for the whole life of the coordinator and returns when
/// `shutdown` resolves (after releasing whatever it holds, such as a lease).
pub trait ClusterBackend: Send + 'static {
    /// The backend's name as it appears on `GET /cluster` (`gossip`, `etcd`, …).
    fn name(&self) -> &'static str;

    /// Drives the backend until shutdown.
    fn run(
        self: Box<Self>,
        view: watch::Sender<ClusterView>,
        shutdown: ShutdownSignal,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

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

    fn run(
        self: Box<Self>,
        view: watch::Sender<ClusterView>,
        shutdown: ShutdownSignal,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            view.send_replace(ClusterView::election_off(self.node_name));
            shutdown.await;
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
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn election_off_and_no_manager_map_to_their_gates() {
        assert_eq!(
            ClusterView::election_off("a").gate_for("j"),
            Gate::ElectionOff
        );
        let v = ClusterView {
            node_name: "a".into(),
            election: Election::NoManager {
                reason: "bind failed".into(),
            },
        };
        assert_eq!(v.gate_for("j"), Gate::NoManager);
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
        let Gate::Manager(a) = managed("a", view.clone()).gate_for("j") else {
            panic!("expected a manager gate")
        };
        assert!(a.leader_owner && a.availability_owner);
        let Gate::Manager(b) = managed("b", view).gate_for("j") else {
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
        let Gate::Manager(c) = managed("c", view).gate_for("j") else {
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
            let Gate::Manager(g) = managed(me, view.clone()).gate_for("job-x") else {
                panic!("expected a manager gate")
            };
            assert_eq!(g.leader_owner, me == winner, "node {me}");
        }
    }
}
