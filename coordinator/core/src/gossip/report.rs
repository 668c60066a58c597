//! What one node tells a polling peer about itself: the election-relevant part of `/peer`
//! (inventory §2.2), as plain data.
//!
//! The coordinator's gossip transport parses and bounds the JSON body and hands the result here
//! as a [`PeerReport`]; a body that fails parsing or any bound never becomes a report at all (the
//! poll degrades to "no data for that node"). Display-only parts of `/peer` (the per-job run
//! summary, node stats) stay in the transport: no decision reads them (GSP-111).

use serde::{Deserialize, Serialize};

use crate::drift::PeerStatus;

/// The longest name, instance id or job-set ID a report may carry, in bytes (GSP-08).
pub const MAX_FIELD_BYTES: usize = 256;

/// The most names a node advertises in `quorate_vouched` (GSP-60). The highest-sorting names
/// are dropped first, so every node drops the same ones.
pub const MAX_CANDIDATES: usize = 512;

/// How a node places leader-gated jobs (`cluster.distribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Distribution {
    /// One quorum-gated leader runs every Leader job.
    #[default]
    SingleLeader,
    /// Each Leader job has its own quorum-gated owner (rendezvous hashing).
    Spread,
}

impl Distribution {
    /// The spelling on the wire and in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SingleLeader => "single-leader",
            Self::Spread => "spread",
        }
    }
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of a reporter's `members` view: what the reporter currently knows about one of
/// *its* configured peers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MemberReport {
    /// The member's name as it reported it to the reporter.
    pub name: String,
    /// The member's `instance_id` as it reported it to the reporter.
    pub instance_id: String,
    /// The reporter's status for that member.
    pub status: PeerStatus,
}

/// The election-relevant content of one `/peer` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerReport {
    /// The reporter's `nodeName`.
    pub node_name: String,
    /// The reporter's job-set ID (`v1:…`).
    pub job_set_id: String,
    /// A random id the reporter's process minted at start.
    pub instance_id: String,
    /// The reporter's effective N.
    pub cluster_size: usize,
    /// The reporter's `cluster.distribution`.
    pub distribution: Distribution,
    /// The reporter's `cluster.electLeader`.
    pub elect_leader: bool,
    /// The reporter sees a quorum of mutually agreeing members.
    pub quorate: bool,
    /// The reporter's view of each of its configured peers it has heard from.
    pub members: Vec<MemberReport>,
    /// Members the reporter and that member mutually see as agreeing.
    pub mutual_agreeing: Vec<String>,
    /// Nodes the reporter can confirm are quorate, itself included when it is (capped at
    /// [`MAX_CANDIDATES`]).
    pub quorate_vouched: Vec<String>,
    /// The full candidate count when `quorate_vouched` was truncated, else 0.
    pub candidates_truncated: usize,
    /// `@reboot` jobs the reporter has run for its current job set.
    pub ran_reboot_jobs: Vec<String>,
    /// Nodes the reporter saw lead (rule 4a): itself when it leads, and agreed peers whose own
    /// latest report listed themselves here (one hop, capped at [`MAX_CANDIDATES`]). Always
    /// sent, empty or not; `None` (the field absent) marks a peer from before leadership was
    /// sticky, and then this node elects the plain lowest candidate, as that peer does.
    #[serde(default)]
    pub leading: Option<Vec<String>>,
    /// The reporter's executor let a Leader firing pass unasked (wedged or gone): it still
    /// counts toward quorum, but it is nobody's candidate until it clears the flag (rule 4).
    /// Absent from the JSON when false, so older peers read it as false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standing_down: bool,
    /// Whom the reporter elects (its leader, itself when it leads; rule 4c), `None` when it
    /// has none. Absent from the JSON when `None`; a peer from before this field never votes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elects: Option<String>,
}

/// This node's own identity and cluster settings, as the gossip round and its
/// reports need them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalNode {
    /// `nodeName`.
    pub name: String,
    /// The random id this process minted at start.
    pub instance_id: String,
    /// This node's job-set ID.
    pub job_set_id: String,
    /// `len(peers) + 1` after load-time dedup (GSP-30).
    pub configured_size: usize,
    /// `cluster.electLeader`.
    pub elect_leader: bool,
    /// `cluster.distribution`.
    pub distribution: Distribution,
    /// `cluster.driftAfter`.
    pub drift_after: u32,
    /// The poll interval in milliseconds (bounds the convergence hold).
    pub interval_ms: u64,
}
