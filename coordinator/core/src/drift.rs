//! The per-peer drift streak behind `cluster.driftAfter`, and the peer statuses shown on
//! `GET /cluster` (seed 000, "Cluster peer attestation"; inventory GSP-12, GSP-20 to GSP-23).
//!
//! A reachable peer whose job-set ID differs is first `syncing` and is labelled `drifted` only
//! after `driftAfter` consecutive reachable-but-mismatched rounds, so a rolling deploy (a brief,
//! legitimate mismatch) raises no false alarm. The counting rule:
//!
//! | round outcome | streak |
//! |---|---|
//! | [`RoundOutcome::Mismatched`] | +1 |
//! | [`RoundOutcome::Failed`] (unreachable or untrusted) | unchanged |
//! | [`RoundOutcome::Agreed`] or [`RoundOutcome::SelfListing`] | reset to 0 |
//!
//! A failed round neither advances nor resets the streak, and only a confirmed agreement clears
//! it. That way a drifting peer cannot postpone its label by flapping in and out of reach, and a
//! flaky network cannot turn a healthy peer into a drifted one.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What one poll round established about one peer, as far as drift is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoundOutcome {
    /// Reachable, trusted, and the same job-set ID as this node. Clears the streak.
    Agreed,
    /// The entry turned out to be this very process (its name and `instance_id`). Benign, and
    /// clears the streak like an agreement.
    SelfListing,
    /// Reachable and trusted, but a different job-set ID. Advances the streak.
    Mismatched,
    /// The round learnt nothing about the peer's job set: connection failure, timeout, or a TLS
    /// or certificate failure. Leaves the streak as it was.
    Failed,
}

/// One peer's count of consecutive reachable-but-mismatched rounds (`peers[].mismatch_streak`).
///
/// Starts at 0 for a peer never polled, and for a manager rebuilt by a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DriftStreak {
    mismatches: u32,
}

impl DriftStreak {
    /// A streak of 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds in the outcome of one poll round (see the module table).
    pub fn observe(&mut self, outcome: RoundOutcome) {
        match outcome {
            RoundOutcome::Agreed | RoundOutcome::SelfListing => self.mismatches = 0,
            // Saturating: after ~136 years of 1 s rounds the label simply stays "drifted".
            RoundOutcome::Mismatched => self.mismatches = self.mismatches.saturating_add(1),
            RoundOutcome::Failed => {}
        }
    }

    /// Consecutive mismatched rounds since the last agreement, skipping failed rounds. This is
    /// the `mismatch_streak` shown on `GET /cluster`.
    pub fn streak(&self) -> u32 {
        self.mismatches
    }

    /// True once the streak has reached `drift_after` (`cluster.driftAfter`).
    ///
    /// A peer with no mismatch on record is never drifted: a `drift_after` of 0 (which config
    /// validation should reject) behaves like 1 rather than labelling agreeing peers drifted.
    pub fn is_drifted(&self, drift_after: u32) -> bool {
        self.mismatches >= drift_after.max(1)
    }

    /// The status of a peer whose latest round was [`RoundOutcome::Mismatched`]:
    /// [`PeerStatus::Drifted`] once the streak reaches `drift_after`, [`PeerStatus::Syncing`]
    /// before that. Every other status follows from the round itself, not from the streak.
    pub fn mismatch_status(&self, drift_after: u32) -> PeerStatus {
        if self.is_drifted(drift_after) {
            PeerStatus::Drifted
        } else {
            PeerStatus::Syncing
        }
    }
}

/// A peer's status on `GET /cluster` (`peers[].status`), on the dashboard and as the `status`
/// label of `cronstable_cluster_peers`. The serialized form is exactly [`PeerStatus::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerStatus {
    /// Reachable, trusted, same job-set ID. The only status that counts toward agreement, and so
    /// toward quorum and election.
    Agreed,
    /// Reachable and trusted with a different job-set ID, while the streak is still below
    /// `driftAfter`: typically a rolling deploy in progress.
    Syncing,
    /// Reachable and trusted with a different job-set ID for `driftAfter` consecutive reachable
    /// rounds: a real configuration disagreement an operator should look at.
    Drifted,
    /// The last poll failed to connect or timed out (`last_error` says how).
    Unreachable,
    /// The last poll failed TLS or certificate verification: the peer is outside the CA's
    /// membership boundary, or presented a certificate for another host.
    Untrusted,
    /// The entry is this very process (same name and `instance_id`), e.g. the node's own
    /// routable address in its peer list. Excluded from the cluster size and from agreement.
    #[serde(rename = "self")]
    SelfListing,
    /// The peer reports this node's name with a different `instance_id`: a duplicate
    /// `nodeName`. Stands this node's Leader jobs down until it is renamed.
    Conflict,
}

impl PeerStatus {
    /// Every status, in declaration order, e.g. to export a zero for each metric label value.
    pub const ALL: [PeerStatus; 7] = [
        Self::Agreed,
        Self::Syncing,
        Self::Drifted,
        Self::Unreachable,
        Self::Untrusted,
        Self::SelfListing,
        Self::Conflict,
    ];

    /// The exact lowercase name used on `GET /cluster`, the dashboard and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agreed => "agreed",
            Self::Syncing => "syncing",
            Self::Drifted => "drifted",
            Self::Unreachable => "unreachable",
            Self::Untrusted => "untrusted",
            Self::SelfListing => "self",
            Self::Conflict => "conflict",
        }
    }

    /// True only for [`PeerStatus::Agreed`]. A self-listing never counts: this node is counted
    /// once, as itself, by whoever builds the agreeing set (inventory GSP-32).
    pub fn counts_toward_agreement(self) -> bool {
        self == Self::Agreed
    }
}

impl fmt::Display for PeerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
