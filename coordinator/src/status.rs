//! What `GET /cluster` shows (inventory §8.1): the backend's status block, published with every
//! [`crate::cluster::ClusterView`].
//!
//! The JSON field names are the seed's public interface and are kept exactly (snake_case here,
//! unlike the camelCase config keys). Each backend fills in its own variant; the HTTP layer only
//! serialises it, so `/cluster` never reads anything the decision path did not also see.

use cronstable_core::gossip::Distribution;
use serde::Serialize;
use serde_json::{Map, Value};

/// The backend's status block.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ClusterStatus {
    /// No cluster section: `{"enabled": false, "peers": []}`.
    #[default]
    Disabled,
    /// The gossip backend.
    Gossip(Box<GossipStatus>),
    /// A lease backend (kubernetes, etcd, filesystem).
    Lease(Box<LeaseStatus>),
}

impl ClusterStatus {
    /// The `GET /cluster` body.
    pub fn to_json(&self, node_name: &str) -> Value {
        match self {
            Self::Disabled => serde_json::json!({ "enabled": false, "peers": [] }),
            Self::Gossip(g) => {
                let mut v = serde_json::to_value(g).unwrap_or_default();
                insert_common(&mut v, "gossip", node_name);
                v
            }
            Self::Lease(l) => {
                let mut v = serde_json::to_value(l).unwrap_or_default();
                insert_common(&mut v, l.backend, node_name);
                v
            }
        }
    }
}

fn insert_common(v: &mut Value, backend: &str, node_name: &str) {
    if let Value::Object(map) = v {
        map.insert("enabled".into(), Value::Bool(true));
        map.insert("backend".into(), Value::String(backend.to_owned()));
        map.insert("node_name".into(), Value::String(node_name.to_owned()));
    }
}

/// The gossip shape of `GET /cluster`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GossipStatus {
    /// This node's job-set ID (`v1:…`).
    pub job_set_id: String,
    /// The effective cluster size N (after duplicate drop and runtime self-exclusion).
    pub cluster_size: usize,
    /// `⌊N/2⌋ + 1`.
    pub quorum: usize,
    /// `cluster.electLeader`.
    pub elect_leader: bool,
    /// `single-leader` or `spread`.
    pub distribution: Distribution,
    /// `cluster.observability` is on, so `GET /fleet` shows node stats. Not part of
    /// `GET /cluster`.
    #[serde(skip)]
    pub observability: bool,
    /// Any of the three conflicts is visible: Leader jobs stand down.
    pub conflict: bool,
    /// Names claimed by more than one instance.
    pub conflict_names: Vec<String>,
    /// A reachable peer declares a different N.
    pub size_conflict: bool,
    /// The distinct sizes declared (this node's included), ascending.
    pub conflicting_sizes: Vec<usize>,
    /// A reachable peer advertises a different distribution or electLeader.
    pub policy_conflict: bool,
    /// The differing descriptors, one per peer (`"<node>: distribution=…, elect_leader=…"`).
    pub conflicting_policies: Vec<String>,
    /// The full candidate count when the advertisement was truncated at 512 names, else 0.
    pub candidates_truncated: usize,
    /// This node sees a quorum of agreeing members.
    pub quorate: bool,
    /// `cluster.interval`: how old a peer's report can be when it is polled. Not part of
    /// `GET /cluster`.
    #[serde(skip)]
    pub interval: std::time::Duration,
    /// The quorum-gated leader; null when not quorate and always null under spread.
    pub leader: Option<String>,
    /// This node is the leader; always false under spread.
    pub is_leader: bool,
    /// A freshly built manager is still converging (PreferLeader held).
    pub converging: bool,
    /// Set when the manager is not running (listener or TLS failure): why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manager_error: Option<String>,
    /// Set while this node stands down from the election because an executor here let a
    /// Leader firing pass unasked: which executor, job and instant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standing_down: Option<String>,
    /// `cluster.leaderEligible`: false on a node that may never lead (it stands down from the
    /// election for good). Shown only when false.
    #[serde(skip_serializing_if = "is_true")]
    pub leader_eligible: bool,
    /// One row per configured peer.
    pub peers: Vec<PeerRow>,
}

/// One configured peer on `GET /cluster`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PeerRow {
    /// The configured `host:port`.
    pub host: String,
    /// `agreed`, `syncing`, `drifted`, `unreachable`, `untrusted`, `self`, `conflict`, or
    /// `pending` before the first poll.
    pub status: String,
    /// The name the peer reported; null while unreachable.
    pub node_name: Option<String>,
    /// The job-set ID the peer reported; null while unreachable.
    pub job_set_id: Option<String>,
    /// The last successful poll (ISO-8601 with offset); null while unreachable.
    pub last_seen: Option<String>,
    /// The last failure, such as `Cannot connect to host …`.
    pub last_error: Option<String>,
    /// Consecutive reachable-but-mismatched rounds.
    pub mismatch_streak: u32,
    /// The peer said in its last report that it stands down from the election (its executor
    /// is overdue, or it may not lead): it counts toward quorum but leads nothing. Absent
    /// when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub standing_down: bool,
    /// The process instance the peer reported at its last successful poll; null while
    /// unreachable. Not part of `GET /cluster` (catch-up on gossip notices a restarted peer by
    /// it).
    #[serde(skip)]
    pub instance_id: Option<String>,
    /// The peer's display-only run summary from its last successful poll, for `GET /fleet`;
    /// `None` is "no data for that node". Not part of `GET /cluster`.
    #[serde(skip)]
    pub jobs: Option<std::sync::Arc<Vec<crate::gossip::wire::JobSummary>>>,
    /// The peer's CPU/memory from its last successful poll, with `cluster.observability`;
    /// `None` is "no data for that node". Display-only, for `GET /fleet` (GSP-111/112).
    #[serde(skip)]
    pub node_stats: Option<crate::gossip::node_stats::PeerNodeStats>,
}

/// The lease shape of `GET /cluster`: size and quorum 1, no peers, never a conflict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaseStatus {
    /// `kubernetes`, `etcd` or `filesystem` (emitted as `backend`).
    #[serde(skip)]
    pub backend: &'static str,
    /// Always 1.
    pub cluster_size: usize,
    /// Always 1.
    pub quorum: usize,
    /// Always true on a lease backend.
    pub elect_leader: bool,
    /// Always `single-leader`.
    pub distribution: Distribution,
    /// Always false.
    pub conflict: bool,
    /// Always false.
    pub size_conflict: bool,
    /// Always false.
    pub policy_conflict: bool,
    /// A fresh read of the store within one lease duration.
    pub quorate: bool,
    /// The holder's identity (token stripped), when quorate.
    pub leader: Option<String>,
    /// This node holds the lease and its local deadline has not passed.
    pub is_leader: bool,
    /// The backend's lease block, with its own keys (inventory §8.1): kubernetes `{name,
    /// namespace, identity, holder, expiry}`, etcd `{electionName, identity, holder, leaseId,
    /// expiry}`, filesystem `{path, electionName, identity, holder, fence, expiry}`.
    pub lease: Map<String, Value>,
    /// The last store error, if the last round failed.
    pub last_error: Option<String>,
    /// Always empty.
    pub peers: Vec<PeerRow>,
}

impl LeaseStatus {
    /// A lease status with the constant fields filled in.
    pub fn new(backend: &'static str) -> Self {
        Self {
            backend,
            cluster_size: 1,
            quorum: 1,
            elect_leader: true,
            distribution: Distribution::SingleLeader,
            conflict: false,
            size_conflict: false,
            policy_conflict: false,
            quorate: false,
            leader: None,
            is_leader: false,
            lease: Map::new(),
            last_error: None,
            peers: Vec::new(),
        }
    }
}

/// For `skip_serializing_if`: a flag shown only when it is false.
fn is_true(b: &bool) -> bool {
    *b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_is_the_seed_body() {
        assert_eq!(
            ClusterStatus::Disabled.to_json("a").to_string(),
            r#"{"enabled":false,"peers":[]}"#
        );
    }

    #[test]
    fn lease_shape_carries_backend_and_constant_fields() {
        let v = ClusterStatus::Lease(Box::new(LeaseStatus::new("etcd"))).to_json("n1");
        assert_eq!(v["backend"], "etcd");
        assert_eq!(v["enabled"], true);
        assert_eq!(v["node_name"], "n1");
        assert_eq!(v["cluster_size"], 1);
        assert_eq!(v["peers"], serde_json::json!([]));
    }
}
