//! Per-firing claims on the lease stores: before a lease holder answers RUN for a scheduled
//! Leader firing, it records a claim for (job, nominal instant) in the store, and a claim that
//! is already there is never answered RUN again, by any node.
//!
//! The lease alone fences *who leads now*; it says nothing about an instant that an earlier
//! holder already answered. A question that arrives after a handover (a gate that crond started
//! a second late on the successor, a DEFER re-asked across the handover, a client retrying)
//! would otherwise be answered RUN by whoever leads by then, and the one firing would run on two
//! nodes. With claims the guarantee is: **at most one RUN per job and nominal instant, across
//! handovers, while the store is reachable**. The store's create-if-absent is the whole
//! mechanism (an etcd transaction on the key's create revision; a hard link onto the claim's
//! name on the filesystem), so of two holders exactly one creates the claim, whatever their
//! clocks and views say; the holder then answers from its view as it is after the write.
//!
//! - A claim is keyed by job name and instant only, not by the job set, so two nodes whose job
//!   sets differ during a rollout still meet on the same claim.
//! - A claim already held by this node under the same fence is this holder's own: a re-ask gets
//!   the same RUN, as it would without claims. A new term (a restart, a lost and regained lease)
//!   has a new fence, so its own earlier claims count as taken.
//! - A claim the store cannot decode counts as another node's: something made it.
//! - A claim that cannot be written (the store unreachable, slow past the records' bound) turns
//!   the answer into DEFER; the executor asks again, and past the start deadline the firing is
//!   skipped, never run unclaimed.
//! - Claims are pruned once their instant is older than [`retention`], at most once a
//!   [`PRUNE_EVERY`] per node: long after any node may still answer RUN for them (the start
//!   deadline bounds that).
//!
//! Kubernetes keeps no claims: its store is one Lease object, whose annotations are rewritten by
//! every renewal, and a claim per firing would make each a write of the whole object racing the
//! holder's own renewals (README, "Per-firing claims").

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::LeaseError;

/// How often a node prunes the store's old claims, at most.
pub const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The shortest time a claim is kept after its instant.
pub const MIN_RETENTION: Duration = Duration::from_secs(3600);

/// How long claims are kept after their instant, for a job set whose longest start deadline is
/// `longest_deadline`: an hour, or that deadline and ten minutes when longer.
pub fn retention(longest_deadline: Duration) -> Duration {
    MIN_RETENTION.max(longest_deadline + Duration::from_secs(600))
}

/// One firing's claim, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FiringClaim {
    /// The job.
    pub job: String,
    /// The nominal instant of the firing (Unix ms).
    pub scheduled_at_ms: i64,
    /// The node that claimed it.
    pub node: String,
    /// The lease fence the node held when it claimed it.
    pub fence: String,
    /// When it was claimed, on the claimer's clock (Unix ms), for people reading the store.
    pub claimed_at_ms: i64,
}

/// What a create-if-absent of a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimWrite {
    /// No claim of this firing existed; this one is stored now.
    Created,
    /// A claim existed and stays; `None` when it cannot be decoded.
    Exists(Option<FiringClaim>),
}

/// Whether a claim attempt lets this node answer RUN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The claim is this node's (created now, or its own from this term).
    Won,
    /// Another claim holds the firing; the sentence says whose.
    Taken(String),
}

/// Judges what the store found against `mine`, the claim this node tried to create.
pub fn judge(mine: &FiringClaim, write: ClaimWrite) -> Claimed {
    match write {
        ClaimWrite::Created => Claimed::Won,
        ClaimWrite::Exists(Some(c)) if c.node == mine.node && c.fence == mine.fence => Claimed::Won,
        ClaimWrite::Exists(Some(c)) => Claimed::Taken(format!(
            "claimed by node {:?} under fence {:?} at {} ms",
            c.node, c.fence, c.claimed_at_ms
        )),
        ClaimWrite::Exists(None) => {
            Claimed::Taken("claimed by a record the store holds but cannot be read".to_owned())
        }
    }
}

/// The claims a lease store keeps, behind the seam every store implements the same way (see
/// the module docs); checked by the lease conformance suite.
#[tonic::async_trait]
pub trait FiringClaimStore: Send + 'static {
    /// Creates `claim`'s record unless one of its (job, instant) exists; atomic in the store.
    async fn create_claim(&mut self, claim: &FiringClaim) -> Result<ClaimWrite, LeaseError>;

    /// Removes the claims of instants before `before_ms`; returns how many.
    async fn prune_claims(&mut self, before_ms: i64) -> Result<usize, LeaseError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(node: &str, fence: &str) -> FiringClaim {
        FiringClaim {
            job: "report".into(),
            scheduled_at_ms: 60_000,
            node: node.into(),
            fence: fence.into(),
            claimed_at_ms: 60_120,
        }
    }

    #[test]
    fn only_a_new_claim_or_this_terms_own_wins() {
        let mine = claim("b", "7");
        let cases = [
            (ClaimWrite::Created, true),
            (ClaimWrite::Exists(Some(claim("b", "7"))), true),
            // This node in an earlier term (it restarted, or lost and regained the lease).
            (ClaimWrite::Exists(Some(claim("b", "6"))), false),
            (ClaimWrite::Exists(Some(claim("a", "7"))), false),
            (ClaimWrite::Exists(None), false),
        ];
        for (write, won) in cases {
            let judged = judge(&mine, write.clone());
            assert_eq!(judged == Claimed::Won, won, "{write:?}: {judged:?}");
        }
        let Claimed::Taken(why) = judge(&mine, ClaimWrite::Exists(Some(claim("a", "3")))) else {
            panic!("taken");
        };
        assert!(
            why.contains("node \"a\"") && why.contains("fence \"3\""),
            "{why}"
        );
    }

    #[test]
    fn claims_outlive_every_start_deadline() {
        assert_eq!(retention(Duration::from_secs(90)), MIN_RETENTION);
        assert_eq!(
            retention(Duration::from_secs(7200)),
            Duration::from_secs(7800)
        );
    }
}
