//! The generic lease driver: runs a [`LeaseStore`]'s rounds and publishes the node's
//! [`ClusterView`] (LSE-01..09). What each round means is decided in `round.rs` ([`Rounds`]:
//! pure, time an argument, table-tested); this file only performs: it prepares the store
//! (retried with backoff while it cannot be used), runs each round's store call bounded by
//! `round_timeout`, publishes the view, and runs the `@reboot` records' calls in the time left
//! before the next round.
//!
//! On shutdown the driver stops leading, then releases the lease (bounded by `round_timeout`) so
//! a survivor takes over at once instead of waiting out the ttl (LSE-08). While an executor on
//! this node is overdue (it let a Leader firing pass unasked: wedged or gone, `crate::liveness`)
//! it releases the lease the same way and only follows ([`LeaseStore::follow`]) until the
//! executor keeps up again, so a node whose executor is live runs the Leader jobs.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::time::Instant;

use super::records_store::RecordsStore;
use super::round::{Call, Round, Rounds, log_transitions, roles};
pub use super::round::{FOLLOWER_ROUND, silence_bound};
use super::{LeaseError, LeaseStore, RebootRanStore};
use crate::cluster::{BackendContext, ClusterBackend, ClusterView, Election};
use crate::status::{ClusterStatus, LeaseStatus};

/// A [`ClusterBackend`] that elects through a [`LeaseStore`].
pub struct LeaseBackend<S: LeaseStore + RebootRanStore> {
    store: S,
    node_name: String,
    records_store: Option<Arc<RecordsStore>>,
    eligible: bool,
}

impl<S: LeaseStore + RebootRanStore> LeaseBackend<S> {
    /// A backend for the node `node_name` electing through `store`.
    pub fn new(store: S, node_name: impl Into<String>) -> Self {
        Self {
            store,
            node_name: node_name.into(),
            records_store: None,
            eligible: true,
        }
    }

    /// Whether this node may hold the lease (`cluster.leaderEligible`): one that may not
    /// never campaigns and only follows the holder.
    pub fn with_leader_eligible(mut self, eligible: bool) -> Self {
        self.eligible = eligible;
        self
    }

    /// Reads and writes the @reboot records through `records_store`, a client of their own,
    /// instead of the election's store client.
    pub fn with_records_store(mut self, records_store: Option<Arc<RecordsStore>>) -> Self {
        self.records_store = records_store;
        self
    }
}

impl<S: LeaseStore + RebootRanStore> ClusterBackend for LeaseBackend<S> {
    fn name(&self) -> &'static str {
        self.store.backend_name()
    }

    fn initial_view(&self) -> ClusterView {
        starting_view(&self.node_name, self.store.backend_name())
    }

    fn run(self: Box<Self>, ctx: BackendContext) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let who = (self.node_name, self.eligible);
        Box::pin(drive(self.store, self.records_store, who, ctx))
    }

    /// A round in flight, then the release, each bounded by the round timeout (ttl/3 on etcd
    /// and filesystem, renewDeadline on Kubernetes), and a second to spare.
    fn stop_bound(&self) -> std::time::Duration {
        let round = self.store.timing().round_timeout;
        (round * 2 + std::time::Duration::from_secs(1)).max(crate::cluster::DEFAULT_STOP_BOUND)
    }
}

/// The view before the first round: starting, with an empty lease block.
fn starting_view(me: &str, backend: &'static str) -> ClusterView {
    ClusterView::starting(
        me.to_owned(),
        ClusterStatus::Lease(Box::new(LeaseStatus::new(backend))),
    )
}

async fn drive<S: LeaseStore + RebootRanStore>(
    mut store: S,
    records_store: Option<Arc<RecordsStore>>,
    (me, eligible): (String, bool),
    ctx: BackendContext,
) {
    let BackendContext {
        view: tx,
        shutdown: mut stop,
        reboot_ran: own_marks,
        job_set,
        mut overdue,
        ..
    } = ctx;
    let mut records = super::reboot_records::RebootRecords::new();
    let timing = store.timing();
    let backend = store.backend_name();
    let mut rounds = Rounds::new(me.clone(), backend, timing).with_eligibility(eligible);
    if !prepare(&mut store, &me, &tx, &mut stop).await {
        return;
    }
    // No view is published before the first round has completed: until then the node stays
    // Election::Starting and does not act.

    let mut next = Instant::now();
    loop {
        tokio::select! {
            biased;
            () = &mut stop => break,
            () = tokio::time::sleep_until(next) => {}
            // An executor fell behind: act now rather than at the next round.
            () = crate::cluster::changed(&mut overdue) => {}
        }
        let behind = overdue.borrow_and_update().clone();
        if let Some(view) = rounds.on_overdue(behind.as_ref(), Instant::now()) {
            tx.send_replace(view);
            release(&mut store, timing, backend).await;
        }
        // Anchored before the round: the round's own latency eats into leadership, never adds.
        let start = Instant::now();
        let start_ms = crate::clock::now_ms();
        let (call, due) = rounds.plan(start);
        next = due;
        let round = async {
            match call {
                Call::Follow => store.follow().await,
                Call::Campaign => store.campaign().await,
            }
        };
        let returned = tokio::select! {
            biased;
            () = &mut stop => break,
            r = tokio::time::timeout(timing.round_timeout, round) => r.ok(),
        };
        let now = Instant::now();
        let before = roles(&tx.borrow(), now);
        rounds.on_round(Round {
            start,
            start_ms,
            call,
            returned,
            clock_skew_ms: store.clock_skew_ms(),
            store_verified: store.store_verified(),
            behind: behind.map(|o| o.to_string()),
        });
        let set_id = job_set.borrow().id.as_str().to_owned();
        records.after_round(&set_id, rounds.leads(now));
        let quorate = rounds.quorate(now);
        rounds.set_reboot_ran(records.record(&set_id, &own_marks, quorate));
        let view = rounds.publish(now);
        log_transitions(before, roles(&view, now), &view, backend);
        tx.send_replace(view);
        // The @reboot records' store calls run after the round and only until the next round is
        // due, so they can never delay a renewal past the lease deadline; what does not finish
        // is retried next round (RBT-21, RBT-22).
        if quorate && next.saturating_duration_since(Instant::now()) > MIN_RECORDS_SLOT {
            let step = async {
                match &records_store {
                    Some(own) => records_step(&mut &**own, &mut records, &own_marks, &set_id).await,
                    None => {
                        records_step(&mut ViaLease(&mut store), &mut records, &own_marks, &set_id)
                            .await
                    }
                }
            };
            tokio::select! {
                biased;
                () = &mut stop => break,
                _ = tokio::time::timeout_at(next, step) => {}
            }
            let now = Instant::now();
            rounds.set_reboot_ran(records.record(&set_id, &own_marks, rounds.quorate(now)));
            tx.send_replace(rounds.publish(now));
        }
    }

    // Stop leading before giving the lease up, so no RUN is handed out after the release.
    tx.send_replace(rounds.shut_down(Instant::now()));
    release(&mut store, timing, backend).await;
}

/// Prepares the store, retried with backoff until it can be used. A store that cannot be
/// prepared (the filesystem lock-fidelity probe fails, the directory or the API is not there
/// yet, the probe times out) leaves the manager absent meanwhile, so Leader fails closed (its
/// retries and @reboot one-shots wait) and PreferLeader runs. One log line per change of
/// reason; recovery needs no restart. False when the coordinator stops first.
async fn prepare<S: LeaseStore>(
    store: &mut S,
    me: &str,
    tx: &tokio::sync::watch::Sender<ClusterView>,
    stop: &mut crate::cluster::ShutdownSignal,
) -> bool {
    let timing = store.timing();
    let backend = store.backend_name();
    let mut backoff = PREPARE_RETRY_MIN;
    let mut failing: Option<String> = None;
    loop {
        let prepared = tokio::select! {
            biased;
            () = &mut *stop => return false,
            r = tokio::time::timeout(timing.round_timeout, store.prepare()) => r,
        };
        let reason = match prepared {
            Ok(Ok(())) => break,
            Ok(Err(reason)) => reason,
            Err(_) => format!(
                "cluster.backend {backend}: the store did not answer within {:?} at start",
                timing.round_timeout
            ),
        };
        if failing.as_deref() != Some(reason.as_str()) {
            tracing::error!(
                "{reason}; Leader jobs skip and PreferLeader jobs run until the store can be \
                 used (retried with backoff up to {PREPARE_RETRY_MAX:?})"
            );
        }
        let mut status = LeaseStatus::new(backend);
        status.last_error = Some(reason.clone());
        tx.send_replace(ClusterView {
            node_name: me.to_owned(),
            election: Election::NoManager {
                reason: reason.clone(),
            },
            status: Arc::new(ClusterStatus::Lease(Box::new(status))),
        });
        failing = Some(reason);
        tokio::select! {
            biased;
            () = &mut *stop => return false,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(PREPARE_RETRY_MAX);
    }
    if failing.is_some() {
        tracing::info!("cluster: the {backend} store can be used now; electing");
        // Back to starting until the first round: the store works but nothing is known yet,
        // so PreferLeader is held again rather than run as under "no manager".
        tx.send_replace(starting_view(me, backend));
    }
    true
}

/// Releases the lease within the round timeout; a failure is logged, and the lease then
/// expires by itself.
async fn release<S: LeaseStore>(store: &mut S, timing: super::LeaseTiming, backend: &str) {
    match tokio::time::timeout(timing.round_timeout, store.release()).await {
        Ok(Ok(())) => tracing::info!("cluster: {backend} lease released"),
        Ok(Err(e)) => tracing::warn!("cluster: {backend} lease release failed: {e}"),
        Err(_) => tracing::warn!(
            "cluster: {backend} lease release timed out; the lease expires by itself"
        ),
    }
}

/// The first wait before preparing the store again after it failed; doubled per failure.
const PREPARE_RETRY_MIN: std::time::Duration = std::time::Duration::from_millis(500);
/// The longest wait between two attempts to prepare the store.
const PREPARE_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// The least time left before the next round worth starting the @reboot records' store calls in.
const MIN_RECORDS_SLOT: std::time::Duration = std::time::Duration::from_millis(20);

/// Where a round's @reboot record calls go: the records' own client, or the election's store
/// when the backend has none (Kubernetes, whose records live on the election Lease).
trait RecordsClient {
    fn read(
        &mut self,
        job_set_id: &str,
    ) -> impl Future<Output = Result<BTreeSet<String>, LeaseError>> + Send;
    fn record(
        &mut self,
        job_set_id: &str,
        jobs: &BTreeSet<String>,
    ) -> impl Future<Output = Result<(), LeaseError>> + Send;
}

/// The election's own store, for the records.
struct ViaLease<'a, S>(&'a mut S);

impl<S: RebootRanStore> RecordsClient for ViaLease<'_, S> {
    async fn read(&mut self, job_set_id: &str) -> Result<BTreeSet<String>, LeaseError> {
        self.0.read_reboot_ran(job_set_id).await
    }
    async fn record(
        &mut self,
        job_set_id: &str,
        jobs: &BTreeSet<String>,
    ) -> Result<(), LeaseError> {
        self.0.record_reboot_ran(job_set_id, jobs).await
    }
}

impl RecordsClient for &RecordsStore {
    fn read(
        &mut self,
        job_set_id: &str,
    ) -> impl Future<Output = Result<BTreeSet<String>, LeaseError>> + Send {
        RecordsStore::read(self, job_set_id)
    }
    fn record(
        &mut self,
        job_set_id: &str,
        jobs: &BTreeSet<String>,
    ) -> impl Future<Output = Result<(), LeaseError>> + Send {
        RecordsStore::record(self, job_set_id, jobs)
    }
}

/// One round's @reboot record work: write this node's unwritten marks, then read back the
/// store's records when a read is due. Failures are logged and retried next round.
async fn records_step(
    store: &mut impl RecordsClient,
    records: &mut super::reboot_records::RebootRecords,
    own: &crate::reboot::ran::RebootRan,
    set_id: &str,
) {
    let pending = records.unwritten(set_id, own);
    if !pending.is_empty() {
        match store.record(set_id, &pending).await {
            Ok(()) => records.write_done(set_id, &pending),
            Err(e) => tracing::warn!("cluster: recording @reboot runs {pending:?} failed: {e}"),
        }
    }
    if records.read_due(Instant::now()) {
        match store.read(set_id).await {
            Ok(jobs) => records.read_done(set_id, jobs, Instant::now()),
            Err(e) => tracing::warn!("cluster: reading the @reboot records failed: {e}"),
        }
    }
}

/// Drives a store directly: for the conformance suite and tests, which watch the view without a
/// whole coordinator around it.
pub fn spawn(
    store: impl LeaseStore + RebootRanStore,
    node_name: &str,
) -> (
    tokio::sync::watch::Receiver<ClusterView>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    spawn_with_overdue(store, node_name, tokio::sync::watch::channel(None).1)
}

/// As [`spawn`], with the overdue-executor signal the driver reads from `overdue`.
pub fn spawn_with_overdue(
    store: impl LeaseStore + RebootRanStore,
    node_name: &str,
    overdue: tokio::sync::watch::Receiver<Option<crate::liveness::Overdue>>,
) -> (
    tokio::sync::watch::Receiver<ClusterView>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = tokio::sync::watch::channel(ClusterView::election_off(node_name));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (job_tx, job_rx) = tokio::sync::watch::channel(Arc::default());
    let ctx = BackendContext {
        reboot_ran: crate::reboot::ran::RebootRan::new(),
        view: tx,
        job_set: job_rx,
        ledger: crate::ledger::Ledger::new(),
        overdue,
        shutdown: Box::pin(async move {
            let _ = stop_rx.await;
            drop(job_tx);
        }),
    };
    let task = crate::spawn(drive(store, None, (node_name.to_owned(), true), ctx));
    (rx, stop_tx, task)
}
