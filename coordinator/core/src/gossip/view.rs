//! What one gossip round produces: the [`RoundView`] the coordinator's gossip manager reads
//! (statuses, agreement, quorum, candidates, leader, conflicts, hold), the [`Advert`] this node
//! serves on its own `/peer`, and the edge-triggered [`RoundEvent`]s the manager logs.
//!
//! The rules that fill these types are in the parent module's docs ([`crate::gossip`]).

use std::collections::BTreeSet;

use crate::drift::PeerStatus;

use super::report::{Distribution, LocalNode, MAX_CANDIDATES, MemberReport, PeerReport};

/// This round's view of one configured peer (index = position in the configured peer list).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerView {
    /// The status this round; `None` when the peer had no outcome this round (never polled, or
    /// [`super::PollOutcome::NotPolled`]).
    pub status: Option<PeerStatus>,
    /// Consecutive reachable-but-mismatched rounds (`peers[].mismatch_streak`, GSP-23).
    pub mismatch_streak: u32,
    /// The name from the last report this peer sent (kept across failed rounds, for display).
    pub reported_name: Option<String>,
    /// The `instance_id` from the last report this peer sent.
    pub reported_instance_id: Option<String>,
    /// The job-set ID from the last report this peer sent.
    pub reported_job_set_id: Option<String>,
    /// Why this round's poll failed (unreachable, untrusted, malformed report); `None` otherwise.
    pub last_error: Option<String>,
}

/// Which of the three conflict gates (GSP-73, GSP-85, GSP-90).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConflictKind {
    /// A duplicate `nodeName` (GSP-70..72).
    Names,
    /// A peer declaring a different cluster size (GSP-80..85).
    Size,
    /// A peer advertising a different `distribution` or `elect_leader` (GSP-90).
    Policy,
}

impl ConflictKind {
    /// A short lowercase name for log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Names => "names",
            Self::Size => "size",
            Self::Policy => "policy",
        }
    }
}

/// The conflicts visible this round, with the values `GET /cluster` lists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Conflicts {
    /// Names claimed by more than one process (sorted, distinct); `conflict_names`.
    pub names: Vec<String>,
    /// Sorted distinct cluster sizes, this node's included, when a size conflict is visible;
    /// empty otherwise. `conflicting_sizes`.
    pub sizes: Vec<usize>,
    /// One `"<name>: distribution=<d>, elect_leader=<b>"` per differing peer, sorted;
    /// `conflicting_policies`.
    pub policies: Vec<String>,
}

impl Conflicts {
    /// True when a duplicate name is visible.
    pub fn names_conflict(&self) -> bool {
        !self.names.is_empty()
    }
    /// True when a size conflict is visible (`size_conflict`).
    pub fn size_conflict(&self) -> bool {
        !self.sizes.is_empty()
    }
    /// True when a policy conflict is visible (`policy_conflict`).
    pub fn policy_conflict(&self) -> bool {
        !self.policies.is_empty()
    }
    /// The umbrella `conflict` flag: any of the three (GSP-92). Leader jobs fail closed on it.
    pub fn any(&self) -> bool {
        self.names_conflict() || self.size_conflict() || self.policy_conflict()
    }
    /// Whether the given kind is visible.
    pub fn has(&self, kind: ConflictKind) -> bool {
        match kind {
            ConflictKind::Names => self.names_conflict(),
            ConflictKind::Size => self.size_conflict(),
            ConflictKind::Policy => self.policy_conflict(),
        }
    }
    /// A one-line description of one kind's values, for the onset log line.
    pub fn detail(&self, kind: ConflictKind) -> String {
        match kind {
            ConflictKind::Names => self.names.join(", "),
            ConflictKind::Size => {
                let sizes: Vec<String> = self.sizes.iter().map(usize::to_string).collect();
                sizes.join(", ")
            }
            ConflictKind::Policy => self.policies.join("; "),
        }
    }
}

/// Something that changed this round, for the manager to log. Each is edge-triggered: emitted
/// on the round the change happens, not on every round it persists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoundEvent {
    /// A conflict of this kind appeared (ERROR log, GSP-73/85/90).
    ConflictOnset {
        /// Which gate.
        kind: ConflictKind,
        /// [`Conflicts::detail`] at onset.
        detail: String,
    },
    /// A conflict of this kind cleared (INFO log, GSP-73).
    ConflictCleared {
        /// Which gate.
        kind: ConflictKind,
    },
    /// Configured peer `peer` turned out to be this process (INFO, once per peer; GSP-33).
    SelfListingRecognised {
        /// Index into the configured peer list.
        peer: usize,
    },
    /// Self-listings leave an `electLeader` cluster of effective size 2: quorum 2 of 2, so any
    /// single failure stops Leader jobs (WARNING, once; GSP-34).
    DegenerateTwoOfTwo,
    /// The `quorate_vouched` advert was truncated to [`MAX_CANDIDATES`] (WARNING, GSP-61).
    /// Emitted when truncation starts or the full count changes.
    CandidatesTruncated {
        /// The full count before truncation.
        count: usize,
    },
    /// Configured peer `peer` has a new status (including its first one).
    PeerBecame {
        /// Index into the configured peer list.
        peer: usize,
        /// The new status.
        status: PeerStatus,
    },
}

/// The election fields this node serves on its own `/peer` after this round.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Advert {
    /// One entry per configured peer that sent a report this round, self-listings excluded.
    pub members: Vec<MemberReport>,
    /// Names of the mutually agreeing peers, sorted.
    pub mutual_agreeing: Vec<String>,
    /// This node is quorate.
    pub quorate: bool,
    /// Directly confirmed candidates, sorted, capped at [`MAX_CANDIDATES`] (highest dropped).
    pub quorate_vouched: Vec<String>,
    /// The full count when `quorate_vouched` was truncated, else 0 (GSP-61).
    pub candidates_truncated: usize,
    /// This node's effective N.
    pub cluster_size: usize,
    /// This node's `cluster.distribution`.
    pub distribution: Distribution,
    /// This node's `cluster.electLeader`.
    pub elect_leader: bool,
    /// This node stands down: its executor is overdue (rule 4).
    pub standing_down: bool,
    /// Nodes seen leading, itself included when it leads (rule 4a), sorted and capped.
    pub leading: Vec<String>,
    /// Whom this node elects (rule 4c).
    pub elects: Option<String>,
}

impl Advert {
    /// The sorted, capped `quorate_vouched` list and its `candidates_truncated` value for a set
    /// of directly confirmed names (GSP-60..62): the highest-sorting names are dropped, so every
    /// node drops the same ones and the lowest name (the single leader) always survives.
    pub fn cap_vouched(confirmed: &BTreeSet<String>) -> (Vec<String>, usize) {
        let vouched: Vec<String> = confirmed.iter().take(MAX_CANDIDATES).cloned().collect();
        let truncated = if confirmed.len() > MAX_CANDIDATES {
            confirmed.len()
        } else {
            0
        };
        (vouched, truncated)
    }
}

/// Everything one node derives from one poll round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundView {
    /// Per configured peer, in configured order.
    pub peers: Vec<PeerView>,
    /// N: configured size minus recognised self-listings (GSP-32).
    pub effective_size: usize,
    /// ⌊N/2⌋ + 1.
    pub quorum: usize,
    /// This node plus the names of directly agreed peers.
    pub agreeing: BTreeSet<String>,
    /// Agreed peers whose report lists this incarnation as agreed (this node not included).
    pub mutual_agreeing: BTreeSet<String>,
    /// |{me} ∪ mutual_agreeing| ≥ quorum.
    pub quorate: bool,
    /// Confirmed-quorate nodes: me once quorate for `SELF_CANDIDATE_ROUNDS` rounds running, agreed peers
    /// reporting quorate, and names vouched for by agreed peers (one hop).
    pub candidates: BTreeSet<String>,
    /// This node is its own candidate: quorate for `SELF_CANDIDATE_ROUNDS` rounds running.
    /// Under spread, the coordinator must require this (not merely `quorate`) before this node
    /// owns a Leader job, for the same reason the single leader does (rule 4).
    pub self_candidate: bool,
    /// The candidates known only through a neighbour's vouching.
    pub vouched_unconfirmed: BTreeSet<String>,
    /// Candidates seen leading (rule 4a): the leader is the lowest of them while there is one.
    pub incumbents: BTreeSet<String>,
    /// The leader this node followed is not directly confirmed any more: take a
    /// [`super::GossipState::refresh`] soon rather than wait a whole interval (rule 4b).
    pub recheck: bool,
    /// The single leader (rules 4 and 4a: the lowest claimant, or with none the lowest
    /// candidate), only with single-leader distribution, electLeader and a quorate view.
    pub leader: Option<String>,
    /// The PreferLeader ring (GSP-43): this node plus the peers that answered this round with my
    /// job set, i.e. the same set as `agreeing` (an agreed peer is reachable by definition).
    pub reachable_agreeing: BTreeSet<String>,
    /// Nodes that stand down (their executor is overdue): this node when it does, and agreed
    /// peers whose report says so. They count toward quorum and stay in `agreeing`, but are
    /// no candidates; the coordinator also leaves them out of its spread and PreferLeader rings.
    pub standing_down: BTreeSet<String>,
    /// The conflicts visible this round.
    pub conflicts: Conflicts,
    /// The convergence hold is on (GSP-100).
    pub converging: bool,
    /// What this node serves on `/peer`.
    pub advert: Advert,
    /// What changed this round.
    pub events: Vec<RoundEvent>,
}

impl RoundView {
    /// This node's `/peer` report after this round.
    pub fn report(&self, local: &LocalNode, ran_reboot_jobs: Vec<String>) -> PeerReport {
        let a = &self.advert;
        PeerReport {
            node_name: local.name.clone(),
            job_set_id: local.job_set_id.clone(),
            instance_id: local.instance_id.clone(),
            cluster_size: a.cluster_size,
            distribution: a.distribution,
            elect_leader: a.elect_leader,
            quorate: a.quorate,
            members: a.members.clone(),
            mutual_agreeing: a.mutual_agreeing.clone(),
            quorate_vouched: a.quorate_vouched.clone(),
            candidates_truncated: a.candidates_truncated,
            ran_reboot_jobs,
            standing_down: a.standing_down,
            leading: Some(a.leading.clone()),
            elects: a.elects.clone(),
        }
    }
}

/// The report a node serves before its first round: it knows no peers and is not quorate. Its
/// cluster size is the configured size (no self-listing has been recognised yet).
pub fn fresh_report(local: &LocalNode) -> PeerReport {
    PeerReport {
        node_name: local.name.clone(),
        job_set_id: local.job_set_id.clone(),
        instance_id: local.instance_id.clone(),
        cluster_size: local.configured_size,
        distribution: local.distribution,
        elect_leader: local.elect_leader,
        quorate: false,
        members: Vec::new(),
        mutual_agreeing: Vec::new(),
        quorate_vouched: Vec::new(),
        candidates_truncated: 0,
        ran_reboot_jobs: Vec::new(),
        standing_down: false,
        leading: Some(Vec::new()),
        elects: None,
    }
}
