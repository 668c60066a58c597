//! Durable retry handoff on the lease backends (RTY-04, RTY-07, MAP-02).
//!
//! When a retry learns that another node now owns its job, the old owner's coordinator writes a
//! [`HandoffRecord`] to the shared store and answers the shim's `Handoff` with
//! `transferred=true`. Whichever node holds the lease looks for records every
//! [`SCAN_EVERY`]; for a job one of its own executors registered and is watching, it claims the
//! record atomically and sends that executor a `ResumeRetry`, which runs the remaining attempts.
//!
//! A claim *marks* the record with a token unique to that claim instead of deleting it, and the
//! mark stays in the store until the executor has acted on the sequence; only then is the claimed
//! record removed. That makes a claim whose answer was lost (a timeout while the store did
//! complete it) recoverable: the claimer asks the store whether its token holds the record and
//! carries on either way, so no sequence disappears between "removed from the store" and "sent".
//! A claim whose claimer died before finishing stays visible in the store and is dropped like an
//! unclaimed record after [`RECORD_EXPIRY`], with a WARNING and a cancelled record, rather than
//! being offered again: the executor may already have run an attempt, and a retry that runs twice
//! is the harm a Leader job must not suffer.
//!
//! Each store implements [`HandoffStore`] in its folder under [`crate::store`]; [`Handoffs`]
//! bounds every call; `handoff::conformance` (tests) is the suite every store passes, and [`resume`]
//! is the lease holder's task that claims records and resumes their sequences. The handoff part
//! has its own store client ([`Handoffs`]) instead of going through the lease driver: the driver's rounds stay exactly as timed as before, a slow handoff write can never
//! delay a renewal, and the gRPC handler needs no channel into the driver task. The cost is one
//! more connection per coordinator (etcd) or a few more file operations (filesystem).
//!
//! Record names (see the store modules): etcd `<electionName>/handoff/<job>/<scheduledAtMs>`;
//! filesystem `<path>/<deploymentId>/cluster/handoff/<job>@<scheduledAtMs>.json`; Kubernetes
//! the entry `<job>@<scheduledAtMs>` of the annotation `cronstable.io/handoff-records` on the
//! Lease `<leaseName>-handoff`. A record older than [`RECORD_EXPIRY`] is dropped with a WARNING
//! and a cancelled ledger record, so records for jobs no node has any more do not accumulate.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[cfg(any(test, feature = "testkit"))]
pub mod conformance;
pub mod resume;
#[cfg(test)]
mod tests;

/// The bound on one handoff write (the shim's `Handoff` call waits for it).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(3);
/// The bound on one scan or claim.
pub const SCAN_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the lease holder looks for records.
pub const SCAN_EVERY: Duration = Duration::from_secs(1);
/// How long a record waits for a node that can resume it before it is dropped.
pub const RECORD_EXPIRY: Duration = Duration::from_secs(3600);

/// The remaining attempts of one retry sequence, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffRecord {
    /// The job's name.
    pub job: String,
    /// The job-set ID of the node that wrote it (for operators; resuming uses the current
    /// definition of the job on the new owner).
    pub job_set_id: String,
    /// The nominal instant of the firing the sequence belongs to (Unix ms).
    pub scheduled_at_ms: i64,
    /// The attempt number the new owner runs next.
    pub next_attempt: u32,
    /// How many attempts are left, `next_attempt` included.
    pub remaining_attempts: u32,
    /// Not before this instant (Unix ms): the backoff the old owner had still to wait.
    pub not_before_ms: i64,
    /// The node that handed it off.
    pub from_node: String,
    /// When it was written (Unix ms, the writer's clock).
    pub created_at_ms: i64,
    /// The token of the claim that holds it, if one does (etcd: stored in the value;
    /// filesystem: taken from the claimed file's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_by: Option<String>,
    /// When that claim was made (Unix ms, the claimer's clock); etcd only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_at_ms: Option<i64>,
}

impl HandoffRecord {
    /// The same record without a claim, as the old owner wrote it.
    pub fn unclaimed(&self) -> Self {
        Self {
            claimed_by: None,
            claimed_at_ms: None,
            ..self.clone()
        }
    }

    /// The same record claimed by `token` at `now_ms` (a store that keeps the claim in the
    /// record itself: etcd, Kubernetes).
    pub fn claimed(&self, token: &str, now_ms: i64) -> Self {
        Self {
            claimed_by: Some(token.to_owned()),
            claimed_at_ms: Some(now_ms),
            ..self.unclaimed()
        }
    }
}

/// Makes claim tokens unique within this process.
static CLAIMS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A token for one claim by `node` at `now_ms`: unique across nodes, processes and claims, and
/// safe as part of a file name (anything but letters, digits, `.`, `_` and `-` becomes `_`).
pub fn claim_token(node: &str, now_ms: i64) -> String {
    let n = CLAIMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let node: String = node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{node}-{}-{now_ms}-{n}", std::process::id())
}

/// Why a handoff store operation failed; the message names the store object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandoffError {
    /// The store refused or could not be reached.
    #[error("{0}")]
    Store(String),
    /// The store did not answer in time.
    #[error("the {what} did not finish within {limit:?}")]
    Timeout {
        /// What was being done.
        what: &'static str,
        /// The bound.
        limit: Duration,
    },
}

/// One record found by a scan (or held by a claim), with what its store needs to act on
/// exactly that version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The record.
    pub record: HandoffRecord,
    /// The etcd key or the file path (a claimed file has its own name).
    pub name: String,
    /// The etcd mod revision (0 on the filesystem).
    pub revision: i64,
}

/// One store's handoff records: what every store implements (each in its folder under
/// [`crate::store`]). The calls are bounded by [`Handoffs`], not here.
#[tonic::async_trait]
pub trait HandoffStore: Send + Sync + 'static {
    /// The store's name, for logs (`etcd`, `filesystem`, `kubernetes`).
    fn store_name(&self) -> &'static str;
    /// Writes `record` durably, replacing any record of the same firing.
    async fn write(&self, record: &HandoffRecord) -> Result<(), HandoffError>;
    /// Every record in the store; unreadable ones are skipped with a WARNING.
    async fn pending(&self) -> Result<Vec<Pending>, HandoffError>;
    /// Claims exactly the version `p` of an unclaimed record for `token` (see
    /// [`Handoffs::claim`]).
    async fn claim(
        &self,
        p: &Pending,
        token: &str,
        now_ms: i64,
    ) -> Result<Option<Pending>, HandoffError>;
    /// The record `p` as claimed by `token`, if that claim holds it now.
    async fn find_claim(&self, p: &Pending, token: &str) -> Result<Option<Pending>, HandoffError>;
    /// Removes exactly the version `p` of a record (see [`Handoffs::remove`]).
    async fn remove(&self, p: &Pending) -> Result<bool, HandoffError>;
    /// Gives up the claim `claimed`.
    async fn release(&self, claimed: &Pending) -> Result<(), HandoffError>;
}

/// Implements [`HandoffStore`] for `tokio::sync::Mutex<$client>`, named `$name`: for a store
/// client whose calls take `&mut self` (it holds per-call state: a connection, a resource
/// version), so calls on it are serialised. `$client` has the trait's methods as inherent
/// `&mut self` methods.
macro_rules! serialised_handoff_store {
    ($client:ty, $name:literal) => {
        #[tonic::async_trait]
        impl HandoffStore for tokio::sync::Mutex<$client> {
            fn store_name(&self) -> &'static str {
                $name
            }
            async fn write(&self, record: &HandoffRecord) -> Result<(), HandoffError> {
                self.lock().await.write(record).await
            }
            async fn pending(&self) -> Result<Vec<Pending>, HandoffError> {
                self.lock().await.pending().await
            }
            async fn claim(
                &self,
                p: &Pending,
                token: &str,
                now_ms: i64,
            ) -> Result<Option<Pending>, HandoffError> {
                self.lock().await.claim(p, token, now_ms).await
            }
            async fn find_claim(
                &self,
                p: &Pending,
                token: &str,
            ) -> Result<Option<Pending>, HandoffError> {
                self.lock().await.find_claim(p, token).await
            }
            async fn remove(&self, p: &Pending) -> Result<bool, HandoffError> {
                self.lock().await.remove(p).await
            }
            async fn release(&self, claimed: &Pending) -> Result<(), HandoffError> {
                self.lock().await.release(claimed).await
            }
        }
    };
}
pub(crate) use serialised_handoff_store;

/// The handoff records of one deployment's shared store, every call bounded. Cheap to clone.
#[derive(Clone)]
pub struct Handoffs {
    inner: Arc<dyn HandoffStore>,
}

impl std::fmt::Debug for Handoffs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Handoffs({})", self.inner.store_name())
    }
}

async fn bounded<T>(
    what: &'static str,
    limit: Duration,
    fut: impl Future<Output = Result<T, HandoffError>>,
) -> Result<T, HandoffError> {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or(Err(HandoffError::Timeout { what, limit }))
}

impl Handoffs {
    /// Handoffs over `store`.
    pub fn new(store: impl HandoffStore) -> Self {
        Self {
            inner: Arc::new(store),
        }
    }

    /// Writes `record` durably, replacing any record of the same firing; bounded by
    /// [`WRITE_TIMEOUT`].
    pub async fn write(&self, record: &HandoffRecord) -> Result<(), HandoffError> {
        bounded("handoff record write", WRITE_TIMEOUT, async {
            self.inner.write(record).await
        })
        .await
    }

    /// Every record in the store. Unreadable records are skipped with a WARNING by the store.
    pub async fn pending(&self) -> Result<Vec<Pending>, HandoffError> {
        bounded("handoff record scan", SCAN_TIMEOUT, async {
            self.inner.pending().await
        })
        .await
    }

    /// Claims exactly the version `p` of an unclaimed record for `token`: `Ok(Some(claimed))`
    /// with the claimed version when this call won, `Ok(None)` when another node claimed it (or
    /// it was replaced) first. After an error the claim may still have happened: ask
    /// [`Self::find_claim`] before treating the record as free.
    pub async fn claim(
        &self,
        p: &Pending,
        token: &str,
        now_ms: i64,
    ) -> Result<Option<Pending>, HandoffError> {
        bounded("handoff record claim", SCAN_TIMEOUT, async {
            self.inner.claim(p, token, now_ms).await
        })
        .await
    }

    /// The record `p` as claimed by `token`, if that claim holds it now.
    pub async fn find_claim(
        &self,
        p: &Pending,
        token: &str,
    ) -> Result<Option<Pending>, HandoffError> {
        bounded("handoff claim check", SCAN_TIMEOUT, async {
            self.inner.find_claim(p, token).await
        })
        .await
    }

    /// Removes exactly the version `p` of a record, claimed or not: `Ok(true)` when this call
    /// removed it, `Ok(false)` when it was gone or had changed.
    pub async fn remove(&self, p: &Pending) -> Result<bool, HandoffError> {
        bounded("handoff record removal", SCAN_TIMEOUT, async {
            self.inner.remove(p).await
        })
        .await
    }

    /// Gives up the claim `claimed` (its executor went away before acting): the record becomes
    /// unclaimed again for the next scan. Nothing happens when the claimed version has changed.
    pub async fn release(&self, claimed: &Pending) -> Result<(), HandoffError> {
        bounded("handoff claim release", WRITE_TIMEOUT, async {
            self.inner.release(claimed).await
        })
        .await
    }
}
