//! The generic lease driver: turns a [`LeaseStore`]'s campaign rounds into the node's
//! [`ClusterView`] (LSE-01..09).
//!
//! One [`LeaseBackend`] runs per coordinator. Every `round_every` it runs one campaign round,
//! bounded by `round_timeout`, and publishes what the round means:
//!
//! - a round that returned a lease (held or not) is store contact: the view is quorate until
//!   round start + duration, with no margin (LSE-05; filesystem LSE-FS-07: only a returned lease
//!   counts);
//! - a round that won or renewed the lease makes this node leader until round start + duration −
//!   [`SAFETY_MARGIN`] (LSE-04, LSE-FS-03). The `Instant` is taken *before* the round, so time
//!   spent in the store only shortens leadership;
//! - a [`LeaseError::StandDown`] round is contact but not leadership;
//! - a failed or timed-out round changes nothing but the error: quorum and leadership lapse at
//!   their deadlines, which [`ClusterView::gate_for`] checks at decision time, so a wedged store
//!   call demotes this node on time with no I/O at all.
//!
//! The holder runs a round every `round_every`; a follower every [`FOLLOWER_ROUND`] at most, so
//! a released lease changes hands within half a second.
//!
//! On shutdown the driver releases the lease (bounded by `round_timeout`) so a survivor takes
//! over at once instead of waiting out the ttl (LSE-08).
//!
//! While an executor on this node is overdue (it let a Leader firing pass unasked: wedged or
//! gone, `crate::liveness`) the node must not hold: the driver stops leading at once, releases
//! the lease the same way, and from then on only follows ([`LeaseStore::follow`]) until the
//! executor keeps up again, so a node whose executor is live runs the Leader jobs. It campaigns
//! again after that, and takes the lease back only when it is free or expired.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::time::Instant;

use super::reboot_store::RebootStore;
use super::{LeaseError, LeaseObservation, LeaseStore, RebootRanStore, SAFETY_MARGIN};
use crate::cluster::{
    BackendContext, ClusterBackend, ClusterView, Election, LeaseGate, ManagedView,
};
use crate::status::{ClusterStatus, LeaseStatus};

/// How often a node that does not hold the lease runs a round (at most; the store's own cadence
/// when that is shorter). One small store read per follower per half second.
pub const FOLLOWER_ROUND: std::time::Duration = std::time::Duration::from_millis(500);

/// A [`ClusterBackend`] that elects through a [`LeaseStore`].
pub struct LeaseBackend<S: LeaseStore + RebootRanStore> {
    store: S,
    node_name: String,
    reboot_store: Option<Arc<RebootStore>>,
}

impl<S: LeaseStore + RebootRanStore> LeaseBackend<S> {
    /// A backend for the node `node_name` electing through `store`.
    pub fn new(store: S, node_name: impl Into<String>) -> Self {
        Self {
            store,
            node_name: node_name.into(),
            reboot_store: None,
        }
    }

    /// Reads and writes the @reboot records through `reboot_store`, a client of their own,
    /// instead of the election's store client.
    pub fn with_reboot_store(mut self, reboot_store: Option<Arc<RebootStore>>) -> Self {
        self.reboot_store = reboot_store;
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
        Box::pin(drive(self.store, self.reboot_store, self.node_name, ctx))
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

/// What the driver remembers between rounds.
struct State {
    me: String,
    backend: &'static str,
    view: ManagedView,
    /// The last observation's lease block and holder, kept through failed rounds so `/cluster`
    /// still shows what was last seen.
    block: serde_json::Map<String, serde_json::Value>,
    holder: Option<String>,
    held: bool,
    last_error: Option<String>,
    /// Another holder's record as this node last read it, to tell renewals from silence.
    renewals: Option<Renewals>,
    /// The wall-clock start (Unix ms) of the last round that read the lease.
    last_read_ms: Option<i64>,
    /// [`silence_bound`]: a record unchanged for longer is silent.
    silence: std::time::Duration,
    /// The store's measure of this node's clock against its own, when it takes one.
    clock_skew_ms: Option<i64>,
    /// Whether the store proved it is this node's at its last check, when it has one.
    store_verified: Option<bool>,
}

/// Another holder's lease record as this node's reads saw it change.
#[derive(Debug, Clone)]
struct Renewals {
    holder: String,
    mark: i64,
    /// The start of the first read that saw `mark`.
    changed_at: Instant,
    /// The start (Unix ms) of the last read before the change: the holder was alive after it.
    alive_after_ms: Option<i64>,
    /// Whether the latest read saw `mark` still, the silence bound after `changed_at`.
    silent: bool,
    /// The start (Unix ms) of the latest read that saw `mark`.
    seen_ms: i64,
    /// The latest round read no mark (this node stood down, or the record carried none): no
    /// evidence either way, so the gate shows none. Kept rather than forgotten, so the next
    /// read of the same mark is not taken for a renewal nor restarts the silence clock.
    unread: bool,
}

impl State {
    fn new(me: String, backend: &'static str, timing: super::LeaseTiming) -> Self {
        Self {
            me,
            backend,
            renewals: None,
            last_read_ms: None,
            silence: silence_bound(timing),
            clock_skew_ms: None,
            store_verified: None,
            view: ManagedView {
                lease: Some(LeaseGate::default()),
                ..ManagedView::default()
            },
            block: serde_json::Map::new(),
            holder: None,
            held: false,
            last_error: None,
        }
    }

    /// Follows another holder's renewals through one read that started at `start`
    /// (`start_ms` on the wall clock). A change of holder counts as a change: the new holder
    /// wrote the record after the previous read.
    fn track_renewals(&mut self, obs: &LeaseObservation, start: Instant, start_ms: i64) {
        let previous_read = self.last_read_ms.replace(start_ms);
        let (Some(holder), false) = (&obs.holder, obs.held_by_me) else {
            self.renewals = None;
            return;
        };
        let Some(mark) = obs.renewal else {
            match &mut self.renewals {
                Some(r) if r.holder == *holder => r.unread = true,
                _ => self.renewals = None,
            }
            return;
        };
        match &mut self.renewals {
            Some(r) if r.holder == *holder && r.mark == mark => {
                r.unread = false;
                r.seen_ms = start_ms;
                let silent = start.saturating_duration_since(r.changed_at) >= self.silence;
                if silent && !r.silent {
                    tracing::warn!(
                        "cluster: {} lease holder {holder} has not renewed for {:?}: \
                         PreferLeader jobs run on this node until it renews or the lease changes \
                         hands",
                        self.backend,
                        self.silence
                    );
                }
                r.silent = silent;
            }
            Some(r) if r.holder == *holder => {
                if r.silent {
                    tracing::info!(
                        "cluster: {} lease holder {holder} renews again: PreferLeader jobs are \
                         its again",
                        self.backend
                    );
                }
                // It renewed after the last read that saw the old mark, whatever came between.
                let after = Some(r.seen_ms);
                self.track_renewals_from(holder, mark, start, start_ms, after);
            }
            _ => self.track_renewals_from(holder, mark, start, start_ms, previous_read),
        }
    }

    fn track_renewals_from(
        &mut self,
        holder: &str,
        mark: i64,
        start: Instant,
        start_ms: i64,
        alive_after_ms: Option<i64>,
    ) {
        self.renewals = Some(Renewals {
            holder: holder.to_owned(),
            mark,
            changed_at: start,
            alive_after_ms,
            silent: false,
            seen_ms: start_ms,
            unread: false,
        });
    }

    /// The renewals part of the gate, for the holder the gate names.
    fn gate_renewals(&self) -> Option<crate::cluster::HolderRenewals> {
        let r = self.renewals.as_ref().filter(|r| !r.unread)?;
        (!self.held && self.holder.as_deref() == Some(r.holder.as_str())).then_some(
            crate::cluster::HolderRenewals {
                silent: r.silent,
                alive_after_ms: r.alive_after_ms,
            },
        )
    }

    /// Applies one round that started at `start` (`start_ms` on the wall clock) and returned
    /// `result`.
    fn apply(
        &mut self,
        start: Instant,
        start_ms: i64,
        duration: std::time::Duration,
        result: RoundResult,
    ) {
        match result {
            RoundResult::Observed(obs) => {
                self.last_error = None;
                self.track_renewals(&obs, start, start_ms);
                self.contact(start, duration);
                self.held = obs.held_by_me;
                self.holder = obs.holder.clone();
                self.block = obs.block;
                if obs.held_by_me {
                    let granted = obs.valid_for.map_or(duration, |v| v.min(duration));
                    self.view.lead_until = Some(start + granted.saturating_sub(SAFETY_MARGIN));
                    self.view.fence = obs.fence;
                } else {
                    self.view.lead_until = None;
                    self.view.fence = None;
                }
            }
            RoundResult::StandDown(why) => {
                self.last_error = Some(why);
                self.contact(start, duration);
                self.held = false;
                self.view.lead_until = None;
                self.view.fence = None;
                // Whoever holds it, it is not this node this round.
                if self.holder.as_deref() == Some(self.me.as_str()) {
                    self.holder = None;
                }
                // The lease was not read: no evidence of renewals either way. A PreferLeader
                // firing defers to the last holder seen, as before, rather than wait for a
                // confirmation no round will bring while this node stands down.
                if let Some(r) = &mut self.renewals {
                    r.unread = true;
                }
            }
            RoundResult::Failed(why) => {
                // No contact: quorum and leadership lapse at the deadlines already set.
                tracing::warn!("cluster: {} election round failed: {why}", self.backend);
                self.last_error = Some(why);
            }
        }
        let (leader, gate_holder) = self.names();
        self.view.leader = leader;
        self.view.lease = Some(LeaseGate {
            holder: gate_holder,
            renewals: self.gate_renewals(),
        });
    }

    fn contact(&mut self, start: Instant, duration: std::time::Duration) {
        self.view.quorate = true;
        self.view.quorate_until = Some(start + duration);
    }

    /// The `leader` and the PreferLeader holder the gates read. A holder with this node's name
    /// that is not this process (a duplicate nodeName, or this node's previous incarnation) must
    /// not read as "me": the gates compare names, so it is published under a name that cannot
    /// match (LSE-03, the lease is the fence, not the name).
    fn names(&self) -> (Option<String>, Option<String>) {
        match self.holder.as_deref() {
            None => (None, None),
            Some(_) if self.held => (Some(self.me.clone()), Some(self.me.clone())),
            Some(h) if h == self.me => {
                let other = format!("{h} (another instance)");
                (Some(other.clone()), Some(other))
            }
            Some(h) => (Some(h.to_owned()), Some(h.to_owned())),
        }
    }

    /// The view and status to publish at `now`.
    fn publish(&self, now: Instant) -> ClusterView {
        let mut status = LeaseStatus::new(self.backend);
        let quorate = self.view.quorate_at(now);
        status.quorate = quorate;
        status.leader = if quorate { self.holder.clone() } else { None };
        status.is_leader = self.view.leader_at(&self.me, now) == Some(self.me.as_str());
        status.lease = self.block.clone();
        if let Some(skew) = self.clock_skew_ms {
            // This node's clock minus the store's (filesystem): the skew check's measure.
            status
                .lease
                .insert("clockSkewMs".into(), serde_json::Value::from(skew));
        }
        if let Some(verified) = self.store_verified {
            // The filesystem store's marker: false while this is not the node's store.
            status
                .lease
                .insert("storeVerified".into(), serde_json::Value::Bool(verified));
        }
        if let Some(r) = self.gate_renewals() {
            // Whether PreferLeader runs here because the holder stopped renewing.
            status
                .lease
                .insert("holderSilent".into(), serde_json::Value::Bool(r.silent));
        }
        status.last_error = self.last_error.clone();
        let mut view = self.view.clone();
        // Keep the flag in step with its deadline, so readers of the bare flag agree too.
        view.quorate = quorate;
        ClusterView {
            node_name: self.me.clone(),
            election: Election::Managed(view),
            status: Arc::new(ClusterStatus::Lease(Box::new(status))),
        }
    }
}

/// A round's outcome, with a timeout folded into `Failed`.
enum RoundResult {
    Observed(LeaseObservation),
    StandDown(String),
    Failed(String),
}

/// Whether `view` leads and is quorate at `now`.
fn roles(view: &ClusterView, now: Instant) -> (bool, bool) {
    match &view.election {
        Election::Managed(v) => (
            v.leader_at(&view.node_name, now) == Some(view.node_name.as_str()),
            v.quorate_at(now),
        ),
        _ => (false, false),
    }
}

/// Logs leadership and quorum changes at INFO.
fn log_transitions(before: (bool, bool), after: (bool, bool), view: &ClusterView, backend: &str) {
    if before.1 != after.1 {
        if after.1 {
            tracing::info!("cluster: {backend} store reachable: quorate");
        } else {
            tracing::info!(
                "cluster: {backend} store not read within one lease duration: not quorate"
            );
        }
    }
    if before.0 != after.0 {
        if after.0 {
            tracing::info!(
                fence = view.fence().unwrap_or_default(),
                "cluster: {backend} leadership acquired by {}",
                view.node_name
            );
        } else {
            tracing::info!("cluster: {backend} leadership lost by {}", view.node_name);
        }
    }
}

async fn drive<S: LeaseStore + RebootRanStore>(
    mut store: S,
    reboot_store: Option<Arc<RebootStore>>,
    me: String,
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
    // Whether the driver stood down for an overdue executor, for one log line per change.
    let mut standing_down = false;
    let mut records = super::reboot_records::RebootRecords::new();
    let timing = store.timing();
    let backend = store.backend_name();
    let mut state = State::new(me.clone(), backend, timing);
    // A store that cannot be prepared (the filesystem lock-fidelity probe fails, the directory
    // or the API is not there yet, the probe times out) is retried with backoff until it can:
    // meanwhile the manager is absent, so Leader fails closed (its retries and @reboot
    // one-shots wait) and PreferLeader runs. One log line per change of reason; recovery needs
    // no restart.
    let mut backoff = PREPARE_RETRY_MIN;
    let mut failing: Option<String> = None;
    loop {
        let prepared = tokio::select! {
            biased;
            () = &mut stop => return,
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
            node_name: me.clone(),
            election: Election::NoManager {
                reason: reason.clone(),
            },
            status: Arc::new(ClusterStatus::Lease(Box::new(status))),
        });
        failing = Some(reason);
        tokio::select! {
            biased;
            () = &mut stop => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(PREPARE_RETRY_MAX);
    }
    if failing.is_some() {
        tracing::info!("cluster: the {backend} store can be used now; electing");
        // Back to starting until the first round: the store works but nothing is known yet,
        // so PreferLeader is held again rather than run as under "no manager".
        tx.send_replace(starting_view(&me, backend));
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
        match (&behind, standing_down) {
            (Some(o), false) => {
                standing_down = true;
                tracing::warn!(
                    "cluster: {backend}: {o}; this node stops leading and gives its lease up, \
                     so a node whose executor keeps up runs the Leader jobs"
                );
                if state.held {
                    stop_leading(&mut state, format!("standing down: {o}"));
                    tx.send_replace(state.publish(Instant::now()));
                    release(&mut store, timing, backend).await;
                }
            }
            (None, true) => {
                standing_down = false;
                tracing::info!(
                    "cluster: {backend}: this node's executors keep up again; campaigning for \
                     the lease"
                );
            }
            _ => {}
        }
        // Anchored before the round: the round's own latency eats into leadership, never adds.
        let start = Instant::now();
        let start_ms = crate::clock::now_ms();
        // The holder renews at the store's cadence; a follower looks more often, so a released
        // lease is taken within FOLLOWER_ROUND rather than a whole ttl/3 (LSE-08).
        let cadence = if state.held {
            timing.round_every
        } else {
            timing.round_every.min(FOLLOWER_ROUND)
        };
        next = start + cadence;
        let round = async {
            if behind.is_some() {
                store.follow().await
            } else {
                store.campaign().await
            }
        };
        let round = tokio::time::timeout(timing.round_timeout, round);
        let result = tokio::select! {
            biased;
            () = &mut stop => break,
            r = round => match r {
                // A store that took the lease anyway (a follow must not) is not led on.
                Ok(Ok(obs)) if behind.is_some() && obs.held_by_me => RoundResult::StandDown(
                    "the store reported the lease held while this node only followed".into(),
                ),
                Ok(Ok(obs)) => RoundResult::Observed(obs),
                Ok(Err(e @ LeaseError::StandDown(_))) => RoundResult::StandDown(e.to_string()),
                Ok(Err(LeaseError::Store(why))) => RoundResult::Failed(why),
                Err(_) => RoundResult::Failed(format!(
                    "no answer within the round timeout of {:?}",
                    timing.round_timeout
                )),
            },
        };
        let now = Instant::now();
        let before = roles(&tx.borrow(), now);
        state.apply(start, start_ms, timing.duration, result);
        state.clock_skew_ms = store.clock_skew_ms();
        state.store_verified = store.store_verified();
        if let Some(o) = &behind
            && state.last_error.is_none()
        {
            state.last_error = Some(format!("standing down: {o}"));
        }
        let set_id = job_set.borrow().id.as_str().to_owned();
        let leads = state.view.leader_at(&me, now) == Some(me.as_str());
        records.after_round(&set_id, leads);
        let quorate = state.view.quorate_at(now);
        state.view.reboot_ran = Some(records.record(&set_id, &own_marks, quorate));
        let view = state.publish(now);
        log_transitions(before, roles(&view, now), &view, backend);
        tx.send_replace(view);
        // The @reboot records' store calls run after the round and only until the next round is
        // due, so they can never delay a renewal past the lease deadline; what does not finish
        // is retried next round (RBT-21, RBT-22).
        if quorate && next.saturating_duration_since(Instant::now()) > MIN_RECORDS_SLOT {
            let step = async {
                match &reboot_store {
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
            let quorate = state.view.quorate_at(now);
            state.view.reboot_ran = Some(records.record(&set_id, &own_marks, quorate));
            tx.send_replace(state.publish(now));
        }
    }

    // Stop leading before giving the lease up, so no RUN is handed out after the release.
    stop_leading(&mut state, "the coordinator is shutting down".into());
    state.view.quorate = false;
    tx.send_replace(state.publish(Instant::now()));
    release(&mut store, timing, backend).await;
}

/// Stops leading now, before the lease is given up: no RUN is handed out after the release.
fn stop_leading(state: &mut State, why: String) {
    state.held = false;
    state.view.lead_until = None;
    state.view.fence = None;
    state.last_error = Some(why);
    let (leader, holder) = state.names();
    state.view.leader = leader;
    state.view.lease = Some(LeaseGate {
        holder,
        renewals: state.gate_renewals(),
    });
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

/// How long another holder's record may stay unchanged before this node calls the holder
/// silent: a live holder renews every `round_every`, a renewal round may take up to
/// `round_timeout`, and this node reads every [`FOLLOWER_ROUND`]; only a record unchanged past
/// all three means the renewals stopped (two renew periods and half a second on etcd and
/// filesystem, where the round timeout is the renew period).
pub fn silence_bound(timing: super::LeaseTiming) -> std::time::Duration {
    timing.round_every + timing.round_timeout + FOLLOWER_ROUND
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

impl RecordsClient for &RebootStore {
    fn read(
        &mut self,
        job_set_id: &str,
    ) -> impl Future<Output = Result<BTreeSet<String>, LeaseError>> + Send {
        RebootStore::read(self, job_set_id)
    }
    fn record(
        &mut self,
        job_set_id: &str,
        jobs: &BTreeSet<String>,
    ) -> impl Future<Output = Result<(), LeaseError>> + Send {
        RebootStore::record(self, job_set_id, jobs)
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
    let task = crate::spawn(drive(store, None, node_name.to_owned(), ctx));
    (rx, stop_tx, task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const TIMING: super::super::LeaseTiming = super::super::LeaseTiming {
        round_every: Duration::from_secs(1),
        round_timeout: Duration::from_secs(1),
        duration: Duration::from_secs(3),
    };

    /// A follower's read of `holder`'s record carrying renewal mark `mark`.
    fn read(holder: &str, mark: Option<i64>) -> RoundResult {
        RoundResult::Observed(LeaseObservation {
            held_by_me: false,
            holder: Some(holder.to_owned()),
            fence: None,
            expiry_ms: None,
            renewal: mark,
            block: serde_json::Map::new(),
            valid_for: None,
        })
    }

    /// A round that read nothing (this node stood down) or a read without a renewal mark says
    /// nothing about the holder: the next read of the same mark is no renewal, so it neither
    /// confirms the holder alive after a firing nor restarts the silence clock.
    #[tokio::test(start_paused = true)]
    async fn a_round_without_evidence_credits_the_holder_with_no_renewal() {
        for gap in [
            RoundResult::StandDown("standing down: skew".into()),
            read("a", None),
        ] {
            let mut s = State::new("b".into(), "filesystem", TIMING);
            let t0 = Instant::now();
            s.apply(t0, 0, TIMING.duration, read("a", Some(7)));
            s.apply(
                t0 + FOLLOWER_ROUND,
                500,
                TIMING.duration,
                read("a", Some(8)),
            );
            let renewed = s.gate_renewals().expect("a's renewals are tracked");
            assert_eq!(renewed.alive_after_ms, Some(0));
            s.apply(t0 + 2 * FOLLOWER_ROUND, 1_000, TIMING.duration, gap);
            // a renews no more: the same mark, read after the gap.
            s.apply(
                t0 + 3 * FOLLOWER_ROUND,
                1_500,
                TIMING.duration,
                read("a", Some(8)),
            );
            let after = s.gate_renewals().expect("a's renewals are tracked again");
            assert_eq!(
                after.alive_after_ms,
                Some(0),
                "the holder was credited with a renewal it never made"
            );
            let silent_at = t0 + FOLLOWER_ROUND + s.silence;
            s.apply(silent_at, 4_000, TIMING.duration, read("a", Some(8)));
            assert!(
                s.gate_renewals().is_some_and(|r| r.silent),
                "the silence clock restarted at the gap"
            );
        }
    }
}
