//! The "already ran" records of deferred `@reboot` one-shots (RBT-21, RBT-22) and the
//! per-firing claims ([`super::claims`]) on a store client of their own, for the etcd and
//! filesystem backends.
//!
//! Three users share it: the lease driver's per-round reads and writes
//! ([`super::reboot_records`]); the gate's claim before it answers RUN for a scheduled Leader
//! firing; and the gate's write for a Leader `@reboot` one-shot, which records it *before* it
//! answers RUN (see [`crate::state::CoordinatorState::should_run`]). Written
//! only after the run started, a holder that died in between left a successor that ran the
//! one-shot again; written first, the successor's read-back finds it.
//!
//! It is a second instance of the backend's store, so its calls never share a client with the
//! election: on etcd a failed request resets only this connection, never the one the lease
//! renews on; on the filesystem its file operations run on their own blocking slot, so a
//! record write waiting on the stream's lock never holds up a renewal. Every call is bounded by
//! [`CALL_TIMEOUT`].
//!
//! Kubernetes keeps its records in an annotation of the election Lease itself, so a second
//! writer there would make the holder's next renewal meet a 409; it stays on the driver's
//! rounds ([`crate::store::for_cluster`] builds none).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::claims::{ClaimWrite, FiringClaim, FiringClaimStore, PRUNE_EVERY};
use super::{LeaseError, RebootRanStore};

/// What the records' own client keeps: the `@reboot` records and the per-firing claims.
pub trait SharedRecords: RebootRanStore + FiringClaimStore {}

impl<T: RebootRanStore + FiringClaimStore> SharedRecords for T {}

/// The bound on one read or write of the records.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// The records' own store client. Calls are serialised: they are rare (a round's write, a
/// read-back, one write per Leader one-shot) and a store client holds per-call state.
pub struct RecordsStore {
    client: Mutex<Box<dyn SharedRecords>>,
    /// When this node last started pruning the store's old claims.
    pruned: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// The run records of jobs with `expect:` on a client of their own, when the store keeps
    /// them ([`super::run_records`]): their writes never wait behind a claim, nor a claim
    /// behind them.
    runs: Option<runs::RunWriter>,
}

impl std::fmt::Debug for RecordsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordsStore").finish_non_exhaustive()
    }
}

impl RecordsStore {
    /// The records over `store`, a client of their own (see the module docs).
    pub fn over(store: impl SharedRecords) -> Arc<Self> {
        Arc::new(Self {
            client: Mutex::new(Box::new(store)),
            pruned: std::sync::Mutex::new(None),
            runs: None,
        })
    }

    /// The records over `store`, and the run records over `runs`, a client of their own.
    pub fn with_runs(
        store: impl SharedRecords,
        runs: impl super::run_records::RunRecordStore,
    ) -> Arc<Self> {
        Arc::new(Self {
            client: Mutex::new(Box::new(store)),
            pruned: std::sync::Mutex::new(None),
            runs: Some(runs::RunWriter::new(runs)),
        })
    }

    /// Whether this store keeps run records.
    pub fn keeps_runs(&self) -> bool {
        self.runs.is_some()
    }

    /// Queues `run`'s record for writing, to be kept at least `keep` after its instant (see
    /// [`super::run_records`]); nothing without run records.
    pub fn record_run(&self, run: super::run_records::RunRecord, keep: Duration) {
        if let Some(w) = &self.runs {
            w.send(run, keep);
        }
    }

    /// Every run record of an instant in `from_ms..=to_ms`; none without run records.
    pub async fn runs_between(
        &self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<super::run_records::RunRecord>, LeaseError> {
        match &self.runs {
            Some(w) => w.between(from_ms, to_ms).await,
            None => Ok(Vec::new()),
        }
    }

    /// Creates `claim` unless its firing is claimed already (see [`super::claims`]). At most
    /// once a [`PRUNE_EVERY`], it then prunes, in the background, the claims of instants more
    /// than `retention()` before the claim was made (a function: it looks at every job, so it
    /// is asked only when a prune is due).
    pub async fn claim(
        self: &Arc<Self>,
        claim: &FiringClaim,
        retention: impl FnOnce() -> Duration,
    ) -> Result<ClaimWrite, LeaseError> {
        let write = bounded("claiming a firing", async {
            self.client.lock().await.create_claim(claim).await
        })
        .await?;
        let now = tokio::time::Instant::now();
        let due = {
            let mut pruned = self.pruned.lock().unwrap_or_else(|p| p.into_inner());
            let due = pruned.is_none_or(|at| now >= at + PRUNE_EVERY);
            if due {
                *pruned = Some(now);
            }
            due
        };
        if due {
            let before_ms = claim.claimed_at_ms - retention().as_millis() as i64;
            let this = self.clone();
            tokio::spawn(async move { this.prune(before_ms).await });
        }
        Ok(write)
    }

    async fn prune(&self, before_ms: i64) {
        let pruned = bounded("pruning old claims", async {
            self.client.lock().await.prune_claims(before_ms).await
        })
        .await;
        match pruned {
            Ok(0) => {}
            Ok(n) => tracing::debug!(removed = n, "pruned old firing claims"),
            Err(e) => tracing::warn!("could not prune old firing claims ({e}); tried again later"),
        }
    }

    /// Gives `claim` back if the store still holds it as this node's under its fence (see
    /// [`FiringClaimStore::release_claim`]).
    pub async fn release_claim(&self, claim: &FiringClaim) -> Result<bool, LeaseError> {
        bounded("giving a claim back", async {
            self.client.lock().await.release_claim(claim).await
        })
        .await
    }

    /// The (job, instant) of every claim of an instant in `from_ms..=to_ms` (for catch-up).
    pub async fn claimed_between(
        &self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(String, i64)>, LeaseError> {
        bounded("reading the claims", async {
            self.client
                .lock()
                .await
                .claimed_between(from_ms, to_ms)
                .await
        })
        .await
    }

    /// The claims of `job` of an instant in `from_ms..=to_ms`, with their bodies (for the
    /// dashboard's timeline).
    pub async fn claims_of(
        &self,
        job: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<FiringClaim>, LeaseError> {
        bounded("reading the claims", async {
            self.client
                .lock()
                .await
                .claims_of(job, from_ms, to_ms)
                .await
        })
        .await
    }

    /// The jobs recorded under `job_set_id`.
    pub async fn read(&self, job_set_id: &str) -> Result<BTreeSet<String>, LeaseError> {
        bounded("reading the @reboot records", async {
            self.client.lock().await.read_reboot_ran(job_set_id).await
        })
        .await
    }

    /// Adds `jobs` under `job_set_id`, keeping what other nodes recorded.
    pub async fn record(
        &self,
        job_set_id: &str,
        jobs: &BTreeSet<String>,
    ) -> Result<(), LeaseError> {
        bounded("recording @reboot runs", async {
            self.client
                .lock()
                .await
                .record_reboot_ran(job_set_id, jobs)
                .await
        })
        .await
    }
}

/// `call` within [`CALL_TIMEOUT`], waiting for the client included.
async fn bounded<T>(
    what: &str,
    call: impl Future<Output = Result<T, LeaseError>>,
) -> Result<T, LeaseError> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| {
            Err(LeaseError::Store(format!(
                "{what}: no answer from the store within {CALL_TIMEOUT:?}"
            )))
        })
}

mod runs;
#[cfg(test)]
mod tests;
