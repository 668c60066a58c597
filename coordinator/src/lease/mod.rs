//! The fenced lease backends (etcd, Kubernetes Lease, shared filesystem) behind one seam.
//!
//! A [`LeaseStore`] knows how to talk to one kind of store: one [`LeaseStore::campaign`] call is
//! one election round (read the lease; take it when it is free or expired; renew it when this
//! node holds it), and [`LeaseStore::release`] gives it up. Everything that is the same for every
//! store lives in the generic driver ([`driver`]), which turns rounds into the
//! [`crate::cluster::ClusterView`]:
//!
//! - `quorate` means a round succeeded within one lease duration (a fresh read of the store);
//! - a holder stops leading at its local deadline, renew-round start + duration − 1 s, checked by
//!   the decision path itself, so a wedged store call cannot extend leadership;
//! - a store outage makes Leader jobs fail closed and PreferLeader jobs run;
//! - a RUN carries the store's fencing token.
//!
//! Stores never read the wall clock themselves except where the algorithm is defined on it (the
//! Kubernetes `renewTime`, the filesystem expiry); they take it from [`crate::clock`].

pub mod claims;
#[cfg(any(test, feature = "testkit"))]
pub mod conformance;
pub mod driver;
pub mod launches;
#[cfg(any(test, feature = "testkit"))]
pub mod memory;
pub mod reboot_records;
pub mod records_store;
mod round;
pub mod run_records;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use serde_json::{Map, Value};

/// How one lease backend is timed. The driver runs a round every `round_every`, gives each round
/// at most `round_timeout`, and treats a won lease as valid for `duration` from the start of the
/// round that won or renewed it (minus the 1 s margin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    /// Cadence of campaign rounds (etcd ttl/3, Kubernetes retryPeriodSeconds, filesystem
    /// max(1 s, ttl/3)).
    pub round_every: Duration,
    /// The upper bound on one campaign round (a round that takes longer counts as failed).
    pub round_timeout: Duration,
    /// The lease duration (etcd and filesystem ttl, Kubernetes leaseDurationSeconds).
    pub duration: Duration,
}

/// The margin a holder keeps below its lease's expiry: it stops leading 1 s early, and a
/// challenger waits until the expiry is 1 s in the past on its own clock.
pub const SAFETY_MARGIN: Duration = Duration::from_secs(1);

/// What one successful campaign round saw.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseObservation {
    /// This node holds the lease after the round (won or renewed).
    pub held_by_me: bool,
    /// The holder's identity with any token stripped; `None` when the lease is free.
    pub holder: Option<String>,
    /// The fencing token a RUN carries while this node holds the lease (etcd `lease:<id>@<rev>`,
    /// filesystem `fence:<n>`, Kubernetes `<token>@<resourceVersion>`); `None` when not held.
    pub fence: Option<String>,
    /// When the lease expires, if known (Unix ms).
    pub expiry_ms: Option<i64>,
    /// A value that changes at every renewal by the holder, as this round read it (the
    /// filesystem lease file's expiry, the Kubernetes `renewTime`, the etcd key's
    /// `mod_revision`, which the holder bumps every round). A follower that sees it unchanged
    /// for the driver's silence bound treats the holder as silent, so PreferLeader runs on the follower
    /// rather than wait out the ttl. `None` when nobody holds the lease.
    pub renewal: Option<i64>,
    /// The backend's `lease` block for `GET /cluster`, with the backend's own keys.
    pub block: Map<String, Value>,
    /// The lease duration the store actually granted, when it may differ from the configured
    /// one (etcd may grant less, LSE-E-05): leadership is bounded by the smaller of the two.
    pub valid_for: Option<Duration>,
}

/// Why a round or a release failed. The message is shown on `/cluster` and logged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// The store could not be reached, or answered with an error.
    #[error("{0}")]
    Store(String),
    /// The store answered, but this node must not lead this round (a lost compare-and-swap, a
    /// granted TTL under the floor): not an outage, so the view stays quorate.
    #[error("standing down this round: {0}")]
    StandDown(String),
}

/// One kind of lease store.
///
/// Implementations keep whatever they need between rounds (a lease id, a resourceVersion, an
/// open file). `campaign` and `release` must not hang: the driver bounds them with
/// [`LeaseTiming::round_timeout`], but a store should also set its own request timeouts so a
/// cancelled round leaves no request in flight.
pub trait LeaseStore: Send + 'static {
    /// `kubernetes`, `etcd` or `filesystem`.
    fn backend_name(&self) -> &'static str;

    /// The timing this store was configured with.
    fn timing(&self) -> LeaseTiming;

    /// Checks, before the first round, that the store can elect at all (the filesystem
    /// lock-fidelity probe). An `Err` is the operator-facing reason, logged at ERROR and published
    /// as [`crate::cluster::Election::NoManager`]; the driver calls it again with backoff until
    /// it succeeds, so it must be safe to repeat.
    fn prepare(&mut self) -> impl Future<Output = Result<(), String>> + Send {
        async { Ok(()) }
    }

    /// One election round: read the lease; acquire it when free or expired, renew it when held
    /// by this node; report what was seen.
    fn campaign(&mut self) -> impl Future<Output = Result<LeaseObservation, LeaseError>> + Send;

    /// How far this node's clock was from the store's at the last round that measured it
    /// (this node minus the store, ms): the filesystem store's clock-skew check. `None` for a
    /// store that does not measure it.
    fn clock_skew_ms(&self) -> Option<i64> {
        None
    }

    /// Whether the store proved at its last check that it is the one this node is configured
    /// for (the filesystem store's operator-written marker); `None` for a store that has no
    /// such check.
    fn store_verified(&self) -> Option<bool> {
        None
    }

    /// A round that reads the lease and neither takes nor renews it, whoever holds it: what the
    /// driver runs while this node must not hold (its executor is overdue, `crate::liveness`),
    /// so the view stays fresh for the PreferLeader rule and `GET /cluster`. Never reports the
    /// lease as held by this node.
    fn follow(&mut self) -> impl Future<Output = Result<LeaseObservation, LeaseError>> + Send;

    /// Gives up the lease if this node holds it, so another node can take over at once.
    fn release(&mut self) -> impl Future<Output = Result<(), LeaseError>> + Send;
}

/// The `@reboot` "already ran" records a store keeps beside its lease (RBT-21): the aspect's
/// narrow seam, apart from the election. The lease driver reads and writes them after its
/// rounds ([`reboot_records`]); etcd and filesystem also get a second client of their own for
/// the gate's write-before-RUN ([`records_store`]). Every store passes the records checks of
/// the lease conformance suite (`lease::conformance`, built for tests).
#[tonic::async_trait]
pub trait RebootRanStore: Send + 'static {
    /// The deferred `@reboot` one-shots recorded in the store as already ran under
    /// `job_set_id`. Records of other job sets are not returned.
    async fn read_reboot_ran(&mut self, job_set_id: &str) -> Result<BTreeSet<String>, LeaseError>;

    /// Adds `jobs` to the store's "already ran" record under `job_set_id`, keeping what other
    /// nodes recorded. The records carry no lease: they outlive the holder.
    async fn record_reboot_ran(
        &mut self,
        job_set_id: &str,
        jobs: &BTreeSet<String>,
    ) -> Result<(), LeaseError>;
}
