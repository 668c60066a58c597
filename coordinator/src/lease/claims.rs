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

use cronstable_core::JobSpec;
use serde::{Deserialize, Serialize};

use super::LeaseError;

/// How often a node prunes the store's old claims, at most.
pub const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The shortest time a claim is kept after its instant.
pub const MIN_RETENTION: Duration = Duration::from_secs(3600);

/// How long claims are kept after their instant, for a job set of `jobs`: an hour, or the
/// longest start deadline or `catchUpWindow` and ten minutes when longer. Catch-up judges an
/// instant by its claim, so a claim must outlive the window it may be looked for in.
pub fn retention<'a>(jobs: impl IntoIterator<Item = &'a JobSpec>) -> Duration {
    let longest = jobs
        .into_iter()
        .map(|j| {
            let window = j.catch_up.map_or(Duration::ZERO, |c| c.window);
            j.starting_deadline().max(window)
        })
        .max()
        .unwrap_or_default();
    MIN_RETENTION.max(longest + Duration::from_secs(600))
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
    /// Claimed by a catch-up of a missed instant. A node's claim wins again only for the same
    /// kind of question: the ordinary firing and a catch-up of one instant, both asked on this
    /// node in one term, must not both be answered RUN.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub catch_up: bool,
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

/// Whether `stored` is `mine` for [`FiringClaimStore::release_claim`]: the same node under the
/// same fence (the kind and the time written do not matter: it is this term's claim).
pub fn is_mine(stored: &FiringClaim, mine: &FiringClaim) -> bool {
    stored.node == mine.node && stored.fence == mine.fence
}

/// Judges what the store found against `mine`, the claim this node tried to create.
pub fn judge(mine: &FiringClaim, write: ClaimWrite) -> Claimed {
    match write {
        ClaimWrite::Created => Claimed::Won,
        ClaimWrite::Exists(Some(c))
            if c.node == mine.node && c.fence == mine.fence && c.catch_up == mine.catch_up =>
        {
            Claimed::Won
        }
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

    /// Gives `claim` back: removes the record of its (job, instant) if it is still this one,
    /// made by the same node under the same fence, and returns whether it did. A claim is given
    /// back only when its RUN was never launched (the executor said so, or the holder stopped
    /// leading while it wrote the claim), so the instant is not taken as run. Nobody else
    /// removes a live claim and nobody can create one while it exists, so a read, a check and
    /// a removal cannot lose a newer claim.
    async fn release_claim(&mut self, claim: &FiringClaim) -> Result<bool, LeaseError>;

    /// Removes the claims of instants before `before_ms`; returns how many.
    async fn prune_claims(&mut self, before_ms: i64) -> Result<usize, LeaseError>;

    /// The job and instant of every claim whose instant is in `from_ms..=to_ms`, in any order,
    /// read from the claims' names alone (so a record whose body cannot be decoded counts:
    /// something claimed it). What catch-up reads to tell a missed instant from one that ran.
    async fn claimed_between(
        &mut self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(String, i64)>, LeaseError>;

    /// The claims of `job` whose instant is in `from_ms..=to_ms`, bodies and all, in any
    /// order; a claim that cannot be decoded is left out. What the dashboard's timeline reads
    /// to name the node that ran a firing.
    async fn claims_of(
        &mut self,
        job: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<FiringClaim>, LeaseError>;
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
            catch_up: false,
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

    /// The ordinary firing and a catch-up of one instant, asked on one node in one term, meet
    /// on the claim: the second is not this node's own.
    #[test]
    fn a_claim_is_won_again_only_by_the_same_kind_of_question() {
        let mine = FiringClaim {
            catch_up: true,
            ..claim("b", "7")
        };
        let ordinary = ClaimWrite::Exists(Some(claim("b", "7")));
        assert!(matches!(judge(&mine, ordinary), Claimed::Taken(_)));
        let again = ClaimWrite::Exists(Some(mine.clone()));
        assert_eq!(judge(&mine, again), Claimed::Won);
    }

    #[test]
    fn claims_outlive_every_start_deadline_and_catch_up_window() {
        use cronstable_core::catch_up::{CatchUp, CatchUpPolicy};
        let job = |deadline_s: u64, window_s: Option<u64>| {
            let mut j = JobSpec::new("a", "* * * * *", "true");
            j.starting_deadline = Some(Duration::from_secs(deadline_s));
            j.catch_up = window_s.map(|w| CatchUpPolicy {
                mode: CatchUp::All,
                window: Duration::from_secs(w),
                limit: 100,
            });
            j
        };
        assert_eq!(retention(&[job(90, None)]), MIN_RETENTION);
        assert_eq!(retention(&[]), MIN_RETENTION);
        assert_eq!(
            retention(&[job(90, None), job(7200, None)]),
            Duration::from_secs(7800)
        );
        assert_eq!(retention(&[job(90, Some(5400))]), Duration::from_secs(6000));
    }
}
