//! An in-memory lease store for testing the driver and everything above it (anchors habit 6).
//!
//! A [`MemoryServer`] is the shared "store" (an `Arc<Mutex<..>>`); each contender gets a
//! [`MemoryStore`] client from [`MemoryServer::client`]. Expiry runs on `tokio::time::Instant`,
//! so tests with a paused clock drive it deterministically. The server models a fenced store
//! with the filesystem's rules (fence counter bumped on every takeover, a challenger waits one
//! [`SAFETY_MARGIN`] past expiry) and offers fault injection: [`MemoryServer::set_down`] (every
//! call fails), [`MemoryServer::set_wedged`] (every call hangs forever, like an unresponsive
//! mount), [`MemoryServer::set_stand_down`] (the store answers but refuses leadership) and
//! [`MemoryServer::revoke`] (the lease vanishes out of band).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::time::Instant;

use super::claims::{ClaimWrite, FiringClaim, FiringClaimStore};
use super::run_records::{RunRecord, RunRecordStore};
use super::{LeaseError, LeaseObservation, LeaseStore, LeaseTiming, RebootRanStore, SAFETY_MARGIN};

/// The shared in-memory store.
#[derive(Debug, Clone, Default)]
pub struct MemoryServer {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    /// `<name>#<token>` and when the lease expires.
    holder: Option<(String, Instant)>,
    fence: u64,
    /// Bumped by every renewal or takeover: the record's change a follower reads.
    writes: i64,
    down: bool,
    wedged: bool,
    stand_down: Option<String>,
    /// Why `prepare` fails, while it does.
    unpreparable: Option<String>,
    next_token: u64,
    /// The "already ran" records: (job-set ID, job). Kept across holders, like a real store.
    reboot_ran: std::collections::BTreeSet<(String, String)>,
    /// The per-firing claims by (instant, job).
    claims: std::collections::BTreeMap<(i64, String), FiringClaim>,
    /// The run records of jobs with `expect:`, by instant and run.
    runs: std::collections::BTreeMap<(i64, (String, String, u32)), RunRecord>,
}

impl MemoryServer {
    /// A fresh store with no lease.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread must not hide the store from the others.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A contender for node `name` with `timing`. Each client has its own token, like a process.
    pub fn client(&self, name: &str, timing: LeaseTiming) -> MemoryStore {
        let token = {
            let mut inner = self.lock();
            inner.next_token += 1;
            format!("{:012x}", inner.next_token)
        };
        MemoryStore {
            server: self.clone(),
            name: name.to_owned(),
            token,
            timing,
        }
    }

    /// Makes `prepare` fail with `why` (`Some`) or succeed again (`None`).
    pub fn set_unpreparable(&self, why: Option<&str>) {
        self.lock().unpreparable = why.map(str::to_owned);
    }

    /// Makes every call fail (`true`) or work again (`false`).
    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
    }

    /// Makes every call hang forever (`true`), or answer again (`false`).
    pub fn set_wedged(&self, wedged: bool) {
        self.lock().wedged = wedged;
    }

    /// Makes every campaign answer [`LeaseError::StandDown`] with `why` (`None`: normal again),
    /// like a store that answers but must not be led through (an etcd TTL under the floor).
    pub fn set_stand_down(&self, why: Option<&str>) {
        self.lock().stand_down = why.map(str::to_owned);
    }

    /// Deletes the lease out of band (an operator, or a store that lost it).
    pub fn revoke(&self) {
        self.lock().holder = None;
    }

    /// The current holder's name (token stripped), expired or not.
    pub fn holder(&self) -> Option<String> {
        self.lock()
            .holder
            .as_ref()
            .map(|(h, _)| strip_token(h).to_owned())
    }

    /// The fence counter.
    pub fn fence(&self) -> u64 {
        self.lock().fence
    }
}

fn strip_token(holder: &str) -> &str {
    holder.rsplit_once('#').map_or(holder, |(name, _)| name)
}

/// One contender's client of a [`MemoryServer`].
#[derive(Debug)]
pub struct MemoryStore {
    server: MemoryServer,
    name: String,
    token: String,
    timing: LeaseTiming,
}

impl MemoryStore {
    fn me(&self) -> String {
        format!("{}#{}", self.name, self.token)
    }

    /// One round; `take`: acquire a free lease and renew a held one (false: only look).
    fn round(&self, take: bool) -> Option<Result<LeaseObservation, LeaseError>> {
        let mut inner = self.server.lock();
        if inner.wedged {
            return None;
        }
        if inner.down {
            return Some(Err(LeaseError::Store("memory store is down".into())));
        }
        if let Some(why) = &inner.stand_down {
            return Some(Err(LeaseError::StandDown(why.clone())));
        }
        let now = Instant::now();
        let me = self.me();
        let expires = now + self.timing.duration;
        let held_by_me = match &inner.holder {
            Some((h, _)) if *h == me && take => {
                inner.holder = Some((me.clone(), expires));
                inner.writes += 1;
                true
            }
            Some((h, _)) if *h == me => false,
            Some((_, until)) if now < *until + SAFETY_MARGIN => false,
            _ if !take => false,
            _ => {
                inner.fence += 1;
                inner.holder = Some((me.clone(), expires));
                inner.writes += 1;
                true
            }
        };
        let (holder, until) = inner.holder.clone().unzip();
        let holder = holder.map(|h| strip_token(&h).to_owned());
        let renewal = holder.as_ref().map(|_| inner.writes);
        let mut block = Map::new();
        block.insert("identity".into(), Value::String(self.name.clone()));
        block.insert(
            "holder".into(),
            holder.clone().map_or(Value::Null, Value::String),
        );
        block.insert("fence".into(), Value::from(inner.fence));
        let remaining = until.map(|u| u.saturating_duration_since(now));
        Some(Ok(LeaseObservation {
            held_by_me,
            holder,
            fence: held_by_me.then(|| format!("fence:{}", inner.fence)),
            expiry_ms: remaining.map(|r| crate::clock::now_ms() + millis(r)),
            renewal,
            block,
            valid_for: None,
        }))
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl LeaseStore for MemoryStore {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    fn timing(&self) -> LeaseTiming {
        self.timing
    }

    async fn prepare(&mut self) -> Result<(), String> {
        match self.server.lock().unpreparable.clone() {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    async fn campaign(&mut self) -> Result<LeaseObservation, LeaseError> {
        match self.round(true) {
            Some(r) => r,
            None => std::future::pending().await,
        }
    }

    async fn follow(&mut self) -> Result<LeaseObservation, LeaseError> {
        match self.round(false) {
            Some(r) => r,
            None => std::future::pending().await,
        }
    }

    async fn release(&mut self) -> Result<(), LeaseError> {
        // The guard is dropped before any await: the future must stay Send.
        let answer = {
            let me = self.me();
            let mut inner = self.server.lock();
            if inner.wedged {
                None
            } else if inner.down {
                Some(Err(LeaseError::Store("memory store is down".into())))
            } else {
                if inner.holder.as_ref().is_some_and(|(h, _)| *h == me) {
                    inner.holder = None;
                }
                Some(Ok(()))
            }
        };
        match answer {
            Some(r) => r,
            None => std::future::pending().await,
        }
    }
}

#[tonic::async_trait]
impl RebootRanStore for MemoryStore {
    async fn read_reboot_ran(
        &mut self,
        job_set_id: &str,
    ) -> Result<std::collections::BTreeSet<String>, LeaseError> {
        self.on_store(|inner| {
            inner
                .reboot_ran
                .iter()
                .filter(|(id, _)| id == job_set_id)
                .map(|(_, job)| job.clone())
                .collect()
        })
        .await
    }

    async fn record_reboot_ran(
        &mut self,
        job_set_id: &str,
        jobs: &std::collections::BTreeSet<String>,
    ) -> Result<(), LeaseError> {
        self.on_store(|inner| {
            inner
                .reboot_ran
                .extend(jobs.iter().map(|job| (job_set_id.to_owned(), job.clone())));
        })
        .await
    }
}

impl MemoryStore {
    /// `op` on the shared store, unless it is down (an error) or wedged (never answers).
    async fn on_store<T>(&self, op: impl FnOnce(&mut Inner) -> T) -> Result<T, LeaseError> {
        let answer = {
            let mut inner = self.server.lock();
            if inner.wedged {
                None
            } else if inner.down {
                Some(Err(LeaseError::Store("memory store is down".into())))
            } else {
                Some(Ok(op(&mut inner)))
            }
        };
        match answer {
            Some(r) => r,
            None => std::future::pending().await,
        }
    }
}

#[tonic::async_trait]
impl FiringClaimStore for MemoryStore {
    async fn create_claim(&mut self, claim: &FiringClaim) -> Result<ClaimWrite, LeaseError> {
        self.on_store(|inner| {
            let key = (claim.scheduled_at_ms, claim.job.clone());
            match inner.claims.get(&key) {
                Some(c) => ClaimWrite::Exists(Some(c.clone())),
                None => {
                    inner.claims.insert(key, claim.clone());
                    ClaimWrite::Created
                }
            }
        })
        .await
    }

    async fn release_claim(&mut self, claim: &FiringClaim) -> Result<bool, LeaseError> {
        self.on_store(|inner| {
            let key = (claim.scheduled_at_ms, claim.job.clone());
            let mine = inner
                .claims
                .get(&key)
                .is_some_and(|c| crate::lease::claims::is_mine(c, claim));
            if mine {
                inner.claims.remove(&key);
            }
            mine
        })
        .await
    }

    async fn claims_of(
        &mut self,
        job: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<FiringClaim>, LeaseError> {
        self.on_store(|inner| {
            inner
                .claims
                .iter()
                .filter(|((at, j), _)| j == job && (from_ms..=to_ms).contains(at))
                .map(|(_, c)| c.clone())
                .collect()
        })
        .await
    }

    async fn prune_claims(&mut self, before_ms: i64) -> Result<usize, LeaseError> {
        self.on_store(|inner| {
            let before = inner.claims.len();
            inner.claims.retain(|(at, _), _| *at >= before_ms);
            before - inner.claims.len()
        })
        .await
    }

    async fn claimed_between(
        &mut self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(String, i64)>, LeaseError> {
        self.on_store(|inner| {
            inner
                .claims
                .keys()
                .filter(|(at, _)| (from_ms..=to_ms).contains(at))
                .map(|(at, job)| (job.clone(), *at))
                .collect()
        })
        .await
    }
}

#[tonic::async_trait]
impl RunRecordStore for MemoryStore {
    async fn put_run(&mut self, run: &RunRecord) -> Result<(), LeaseError> {
        self.on_store(|inner| {
            inner
                .runs
                .insert((run.scheduled_at_ms, run.run_key()), run.clone());
        })
        .await
    }

    async fn runs_between(
        &mut self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<RunRecord>, LeaseError> {
        self.on_store(|inner| {
            inner
                .runs
                .iter()
                .filter(|((at, _), _)| (from_ms..=to_ms).contains(at))
                .map(|(_, r)| r.clone())
                .collect()
        })
        .await
    }

    async fn prune_runs(&mut self, before_ms: i64) -> Result<usize, LeaseError> {
        self.on_store(|inner| {
            let before = inner.runs.len();
            inner.runs.retain(|(at, _), _| *at >= before_ms);
            before - inner.runs.len()
        })
        .await
    }
}
