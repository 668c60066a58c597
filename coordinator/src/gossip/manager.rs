//! The gossip cluster manager: the [`ClusterBackend`] that runs poll rounds and publishes the
//! node's view (inventory §2, §3, §4).
//!
//! One task owns everything: it binds the `/peer` listener, polls every configured peer
//! concurrently once per `interval`, folds the outcomes through the core's
//! [`GossipState::round`], logs what changed, and publishes three things: the
//! [`ClusterView`] the ShouldRun gate reads, the `/cluster` status block, and the body the
//! listener serves. Every poll is bounded by the smaller of `connectTimeout` and `interval`; a
//! peer that has not answered when the round closes counts as unreachable for that round
//! (never as its previous answer), so one slow peer never delays the others and no fold reads
//! news older than its round.
//!
//! Until its first round completes the node shows [`Election::Starting`] (it knows nothing yet,
//! so it does not act). A manager that cannot start (unreadable certificates, a port in use)
//! publishes [`Election::NoManager`]: Leader jobs skip (their retries and `@reboot` one-shots
//! wait), PreferLeader jobs run, the coordinator keeps serving, and the start is retried every
//! pass until it succeeds.
//!
//! Certificate rotation (ROT-01/02) swaps the TLS contexts in place: the gossip state is kept
//! (it is not blank, so no convergence hold is needed), the listener uses the new context for
//! new connections, and pollers drop connections made under the old one.

use std::sync::Arc;
use std::time::Duration;

use cronstable_core::ClusterPolicy;
use cronstable_core::drift::PeerStatus;
use cronstable_core::gossip::{
    ConflictKind, Distribution, GossipState, LocalNode, PollOutcome, RoundEvent, RoundView,
    fresh_report,
};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::node_stats::PeerNodeStats;
use super::poller::{ClientTls, PollResult, Poller};
use super::server::Served;
use super::tls::{TlsError, TlsFiles, TlsMaterial};
use super::wire::{JobSummary, MAX_LIST, ServedBody};
use crate::cluster::{
    BackendContext, ClusterBackend, ClusterView, Election, ManagedView, RebootRanRecord,
};
use crate::config::address::HostPort;
use crate::config::cluster::{ClusterConfig, ObservabilityConfig, TlsPaths};
use crate::observe::summary::RunSummaries;
use crate::reboot::ran::LearnedRebootRan;
use crate::status::{ClusterStatus, GossipStatus, PeerRow};

/// The longest gap between two checks of the TLS files (ROT-01: at least once a minute).
const ROTATION_CHECK_MAX: Duration = Duration::from_secs(60);

/// The gossip settings a manager runs with, taken from a validated `cluster:` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipSettings {
    /// The `/peer` listener (`cluster.listen`).
    pub listen: Option<HostPort>,
    /// The mesh's TLS files (`cluster.tls`).
    pub tls: Option<TlsPaths>,
    /// The other members, duplicates already dropped.
    pub peers: Vec<HostPort>,
    /// `cluster.interval`.
    pub interval: Duration,
    /// `cluster.driftAfter`.
    pub drift_after: u32,
    /// `cluster.connectTimeout`.
    pub connect_timeout: Duration,
    /// `cluster.electLeader`.
    pub elect_leader: bool,
    /// `cluster.leaderEligible`: false makes this node stand down from the election for good.
    pub leader_eligible: bool,
    /// `cluster.distribution`.
    pub distribution: Distribution,
    /// `cluster.observability` (the marker): gossip node CPU/memory in a header (GSP-112).
    pub observability: bool,
}

impl GossipSettings {
    /// The settings of a gossip `cluster:` section.
    pub fn from_config(c: &ClusterConfig) -> Self {
        Self {
            listen: c.listen.clone(),
            tls: c.tls.clone(),
            peers: c.peers.iter().map(|p| p.host.clone()).collect(),
            interval: c.interval,
            drift_after: c.drift_after,
            connect_timeout: c.connect_timeout,
            elect_leader: c.elect_leader,
            leader_eligible: c.leader_eligible,
            distribution: c.distribution,
            observability: matches!(c.observability, Some(ObservabilityConfig::Marker)),
        }
    }
}

/// Why a manager could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// `cluster.listen` or `cluster.tls` is not set, so there is no mesh to run.
    #[error(
        "no mesh: cluster.listen and cluster.tls are not both set, so peers are not polled \
         (attestation needs both)"
    )]
    NoMesh,
    /// The TLS files did not load.
    #[error("{0}")]
    Tls(#[from] TlsError),
    /// The listener could not bind.
    #[error("cluster.listen {addr}: cannot listen: {source}")]
    Bind {
        /// The configured address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The gossip backend.
#[derive(Debug, Clone)]
pub struct GossipBackend {
    settings: GossipSettings,
    node_name: String,
    instance_id: String,
}

impl GossipBackend {
    /// A backend for `node_name` with `settings`. The instance id is minted here, once per
    /// process, so a self-listing and a duplicate name can be told apart (GSP-32, GSP-70).
    pub fn new(settings: GossipSettings, node_name: impl Into<String>) -> Self {
        Self {
            settings,
            node_name: node_name.into(),
            instance_id: cronstable_proto::new_instance_id(),
        }
    }

    /// This process's instance id.
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }
}

impl ClusterBackend for GossipBackend {
    fn name(&self) -> &'static str {
        "gossip"
    }

    fn initial_view(&self) -> ClusterView {
        self.starting_view(crate::jobs::JobSet::default().id.to_string())
    }

    /// A round in flight (its polls end within `connectTimeout`), then up to 5 s for the
    /// `/peer` server to finish its connections, and a second to spare.
    fn stop_bound(&self) -> Duration {
        self.settings.connect_timeout + Duration::from_secs(6)
    }

    fn run(
        self: Box<Self>,
        ctx: BackendContext,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(self.drive(ctx))
    }
}

/// Each configured peer's poll and what its latest poll said, in `settings.peers` order.
struct Peers {
    slots: Vec<Slot>,
    /// What each peer's latest finished poll said: the round's input.
    latest: Vec<PollOutcome>,
    last_seen_ms: Vec<Option<i64>>,
    jobs: Vec<Option<Arc<Vec<JobSummary>>>>,
    stats: Vec<Option<PeerNodeStats>>,
}

impl Peers {
    /// Every peer idle and not polled yet; a peer that closes a kept-alive connection
    /// notifies `closed`.
    fn new(s: &GossipSettings, closed: &Arc<tokio::sync::Notify>) -> Self {
        let n = s.peers.len();
        Self {
            slots: s
                .peers
                .iter()
                .map(|h| {
                    Slot::Idle(Box::new(
                        Poller::new(h.clone())
                            .reading_node_stats(s.observability)
                            .notify_on_close(closed.clone()),
                    ))
                })
                .collect(),
            latest: vec![PollOutcome::NotPolled; n],
            last_seen_ms: vec![None; n],
            jobs: vec![None; n],
            stats: vec![None; n],
        }
    }

    /// Starts a poll for every peer whose last one finished, for the round that started at
    /// `round_start`, and returns the deadline to collect them by. Each poll is bounded by the
    /// round (`connectTimeout`, at most an interval): an answer later than that is no news for
    /// this fold (see [`Slot::finish_by`]), so waiting for them is bounded.
    async fn start(
        &mut self,
        tls: &ClientTls,
        s: &GossipSettings,
        round_start: Instant,
    ) -> Instant {
        let timeout = s.connect_timeout.min(s.interval);
        for slot in &mut self.slots {
            slot.start(tls, timeout).await;
        }
        round_start + timeout + Duration::from_millis(50)
    }

    /// Takes in every poll that finishes by `deadline` (see [`Slot::finish_by`]).
    async fn collect(&mut self, deadline: Instant) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let Some(result) = slot.finish_by(deadline).await {
                if result.fresh {
                    self.last_seen_ms[i] = Some(crate::clock::now_ms());
                }
                // Display data is as fresh as the poll: a failed one leaves no data.
                self.jobs[i] = result.jobs.filter(|_| result.fresh);
                self.stats[i] = result.node_stats.filter(|_| result.fresh);
                self.latest[i] = result.outcome;
            }
        }
    }

    fn display(&self) -> PeerDisplay<'_> {
        PeerDisplay {
            last_seen_ms: &self.last_seen_ms,
            jobs: &self.jobs,
            stats: &self.stats,
        }
    }

    fn abort(self) {
        for slot in self.slots {
            slot.abort();
        }
    }
}

/// Rule 4b's extra rounds (refreshes): while the leader is known only through a witness's
/// report, while booting, and after this node's job set changed or a peer closed its
/// connection; at most [`REFRESHES_PER_ROUND`] between two rounds.
struct Refreshes {
    at: Option<Instant>,
    left: u32,
    last_fold: Instant,
}

impl Refreshes {
    fn new() -> Self {
        Self {
            at: None,
            left: 0,
            last_fold: Instant::now(),
        }
    }

    /// Resolves when the next refresh is due; never while none is.
    fn due(&self) -> impl Future<Output = ()> + use<> {
        let at = self.at;
        async move {
            match at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        }
    }

    /// A refresh a quarter interval after the last fold at the earliest, so a burst of
    /// registrations or a flapping peer costs at most four folds an interval.
    fn soon(&mut self, interval: Duration) {
        let at = (self.last_fold + interval / 4).max(Instant::now());
        self.at = Some(self.at.map_or(at, |r| r.min(at)));
    }

    /// A round (`refresh` false) or a refresh starts: nothing is due any more; a round
    /// renews the budget.
    fn starting(&mut self, refresh: bool) {
        self.at = None;
        if !refresh {
            self.left = REFRESHES_PER_ROUND;
        }
    }

    /// The fold is done; `wanted`: the round asks for another look. From the end of this
    /// round's polls: a slow poll (a silent peer holding it to `connectTimeout`) must not make
    /// refreshes run back to back.
    fn folded(&mut self, wanted: bool, interval: Duration) {
        self.last_fold = Instant::now();
        if wanted && self.left > 0 {
            self.left -= 1;
            self.at = Some(Instant::now() + interval / 4);
        }
    }
}

/// Which deferred `@reboot` one-shots are known to have run under this job set: this node's
/// own and what the peers report (RBT-06), with one log line per change.
#[derive(Default)]
struct RebootKnown {
    learned: LearnedRebootRan,
    known: std::collections::BTreeSet<String>,
}

impl RebootKnown {
    fn update(
        &mut self,
        job_set: &crate::jobs::JobSet,
        latest: &[PollOutcome],
        own: &crate::reboot::ran::RebootRan,
    ) -> std::collections::BTreeSet<String> {
        let peer_ran = latest.iter().filter_map(|o| match o {
            PollOutcome::Report(r) => Some((r.job_set_id.as_str(), r.ran_reboot_jobs.as_slice())),
            _ => None,
        });
        let deferrable = |name: &str| {
            job_set.get(name).is_some_and(|j| {
                j.spec.is_reboot() && j.spec.cluster_policy != ClusterPolicy::EveryNode
            })
        };
        let ran = self
            .learned
            .merge(job_set.id.as_str(), peer_ran, own, deferrable);
        if ran != self.known {
            tracing::info!(jobs = ?ran, "cluster: @reboot one-shots known to have run under this job set");
            self.known.clone_from(&ran);
        }
        ran
    }
}

/// One fold of the gossip state: a round, or a refresh (which counts as no round), over
/// the peers' latest outcomes, at the time since the manager `started`.
fn fold(
    state: &mut GossipState,
    refresh: bool,
    local: &LocalNode,
    latest: &[PollOutcome],
    started: Instant,
) -> RoundView {
    let now_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if refresh {
        state.refresh(local, latest, now_ms)
    } else {
        state.round(local, latest, now_ms)
    }
}

/// The round timer (every interval) and the certificate-rotation check (at most every
/// [`ROTATION_CHECK_MAX`]), both delaying rather than bursting after a stall; the rotation
/// check's immediate first tick is taken.
async fn timers(s: &GossipSettings) -> (tokio::time::Interval, tokio::time::Interval) {
    let mut rounds = tokio::time::interval(s.interval);
    rounds.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut rotation = tokio::time::interval(s.interval.min(ROTATION_CHECK_MAX));
    rotation.set_missed_tick_behavior(MissedTickBehavior::Delay);
    rotation.tick().await;
    (rounds, rotation)
}

/// One log line when this node starts or stops standing down for an overdue executor; returns
/// whether it does. (A node that may not lead, `leaderEligible: false`, stands down for good
/// besides: nobody's candidate, its own report saying so first-hand, still in every quorum.)
fn note_standing_down(
    standing_down: &mut bool,
    overdue: Option<&crate::liveness::Overdue>,
) -> bool {
    if overdue.is_some() != *standing_down {
        *standing_down = overdue.is_some();
        match overdue {
            Some(o) => tracing::warn!(
                "cluster: gossip: {o}; this node stands down from the election, so a node whose \
                 executor keeps up leads"
            ),
            None => tracing::info!(
                "cluster: gossip: this node's executors keep up again; standing for election"
            ),
        }
    }
    *standing_down
}

/// The display-only data of each configured peer, in `settings.peers` order (GSP-110..112):
/// none of it reaches a decision.
struct PeerDisplay<'a> {
    /// When each peer last answered a poll (Unix ms).
    last_seen_ms: &'a [Option<i64>],
    /// Each peer's run summaries from its latest fresh poll.
    jobs: &'a [Option<Arc<Vec<JobSummary>>>],
    /// Each peer's node stats from its latest fresh poll (with `cluster.observability`).
    stats: &'a [Option<PeerNodeStats>],
}

struct Mesh {
    listener: TcpListener,
    tls: TlsMaterial,
    tls_paths: TlsPaths,
}

impl GossipBackend {
    async fn drive(self, mut ctx: BackendContext) {
        let retry_every = self.settings.interval.min(ROTATION_CHECK_MAX);
        let mut last_reason = String::new();
        let mesh = loop {
            match self.start().await {
                Ok(mesh) => break mesh,
                Err(e) => {
                    let reason = e.to_string();
                    if reason != last_reason {
                        if matches!(e, StartError::NoMesh) {
                            tracing::info!("cluster: {reason}");
                        } else {
                            tracing::error!(
                                "cluster: the gossip manager could not start: {reason}; Leader \
                                 jobs skip (their retries and @reboot one-shots wait) and \
                                 PreferLeader jobs run until it does"
                            );
                        }
                        last_reason = reason.clone();
                    }
                    self.publish_no_manager(&ctx, &e, &reason);
                    tokio::select! {
                        () = &mut ctx.shutdown => return,
                        () = tokio::time::sleep(retry_every) => {}
                    }
                }
            }
        };
        if !last_reason.is_empty() {
            tracing::info!("cluster: the gossip manager started after an earlier failure");
            // Back to the starting view until the first round (as at a start), not the
            // "no manager" view of the failed attempts.
            let job_set_id = ctx.job_set.borrow().id.to_string();
            ctx.view.send_replace(self.starting_view(job_set_id));
        }
        self.run_mesh(mesh, ctx).await;
    }

    async fn start(&self) -> Result<Mesh, StartError> {
        let (Some(listen), Some(paths)) = (&self.settings.listen, &self.settings.tls) else {
            return Err(StartError::NoMesh);
        };
        let load = paths.clone();
        let tls = tokio::task::spawn_blocking(move || TlsMaterial::load(&load))
            .await
            .map_err(|e| TlsError::Build(format!("loading the TLS files panicked: {e}")))??;
        let listener = TcpListener::bind(listen.to_socket_addr_string())
            .await
            .map_err(|source| StartError::Bind {
                addr: listen.to_string(),
                source,
            })?;
        Ok(Mesh {
            listener,
            tls,
            tls_paths: paths.clone(),
        })
    }

    fn publish_no_manager(&self, ctx: &BackendContext, e: &StartError, reason: &str) {
        let election = if !self.settings.elect_leader {
            Election::Off
        } else {
            Election::NoManager {
                reason: reason.to_owned(),
            }
        };
        let error = (!matches!(e, StartError::NoMesh) || !self.settings.peers.is_empty())
            .then(|| reason.to_owned());
        let job_set_id = ctx.job_set.borrow().id.to_string();
        ctx.view
            .send_replace(self.pending_view(election, job_set_id, error));
    }

    /// The view before the first round: starting, or election off with electLeader off (then
    /// there is nothing to wait for: every node runs every job).
    fn starting_view(&self, job_set_id: String) -> ClusterView {
        let election = if self.settings.elect_leader {
            Election::Starting
        } else {
            Election::Off
        };
        self.pending_view(election, job_set_id, None)
    }

    /// A view of this node with no round behind it: every peer `pending`, not quorate;
    /// `converging` while it is starting; `manager_error` says why the manager is not running,
    /// when it is not.
    fn pending_view(
        &self,
        election: Election,
        job_set_id: String,
        manager_error: Option<String>,
    ) -> ClusterView {
        let status = GossipStatus {
            job_set_id,
            cluster_size: self.settings.peers.len() + 1,
            quorum: cronstable_core::quorum::quorum_size(self.settings.peers.len() + 1),
            elect_leader: self.settings.elect_leader,
            distribution: self.settings.distribution,
            observability: self.settings.observability,
            converging: election == Election::Starting,
            manager_error,
            leader_eligible: self.settings.leader_eligible,
            interval: self.settings.interval,
            peers: self
                .settings
                .peers
                .iter()
                .map(|h| PeerRow {
                    host: h.to_string(),
                    status: "pending".into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        ClusterView {
            node_name: self.node_name.clone(),
            election,
            status: Arc::new(ClusterStatus::Gossip(Box::new(status))),
        }
    }

    async fn run_mesh(self, mesh: Mesh, mut ctx: BackendContext) {
        let s = &self.settings;
        let mut local = self.local_node(&ctx.job_set.borrow());
        let mut summary = RunSummaries::new();
        summary.refresh(&ctx.job_set.borrow(), &ctx.ledger, crate::clock::now_ms());
        // This node's CPU/memory for the `/peer` header, refreshed once per round; the rate
        // is taken between rounds, so the first round has memory but no CPU figure yet.
        let stats_header = PeerNodeStats::own_header();
        let served = Served::start(
            mesh.listener,
            mesh.tls.server.clone(),
            ServedBody::encode(&fresh_report(&local), summary.jobs()),
            s.interval * 2 + s.connect_timeout,
            s.observability.then(&stats_header),
        );
        let mut client_tls = ClientTls::new(mesh.tls.client.clone());
        self.log_started(&served.addr);

        let mut rotation = Rotation::new(mesh.tls_paths, mesh.tls.fingerprint);
        // A peer closed a kept-alive connection: its process likely exited (a crashed leader
        // closes its sockets at once), so look again now instead of at the next round.
        let peer_closed = Arc::new(tokio::sync::Notify::new());
        let mut peers = Peers::new(s, &peer_closed);
        let mut state = GossipState::new(s.peers.len(), 0);
        let started = Instant::now();
        let mut edges = Edges::default();
        let mut reboot_known = RebootKnown::default();
        // Whether this node stands down for an overdue executor, for one log line per change.
        let mut standing_down = false;

        let (mut rounds, mut rotation_timer) = timers(s).await;

        let mut refreshes = Refreshes::new();
        loop {
            let refresh_due = refreshes.due();
            let refresh;
            tokio::select! {
                // A due round goes before a refresh: refreshes must never push rounds back.
                biased;
                () = &mut ctx.shutdown => break,
                _ = rounds.tick() => refresh = false,
                _ = rotation_timer.tick() => {
                    if let Some(m) = rotation.check().await {
                        served.tls.send_replace(m.server);
                        client_tls = client_tls.rotated(m.client);
                    }
                    continue;
                }
                // An executor fell behind or caught up: tell the peers now, not an interval on.
                // As a refresh, which counts as no round: an executor flapping around its
                // deadline must not speed up the round-counted rules (drift, the one-hop
                // duplicate debounce).
                () = crate::cluster::changed(&mut ctx.overdue) => refresh = true,
                // A shim registered (or a reload changed the jobs): publish the new job set in
                // a refresh, so the peers need not wait for this node's next round to agree
                // with it. A peer closed its connection (it exited): look again now. Either
                // is a refresh a quarter interval after the last fold at the earliest, so a
                // burst of registrations or a flapping peer costs at most four folds an
                // interval.
                () = async {
                    tokio::select! {
                        () = crate::cluster::changed(&mut ctx.job_set) => {}
                        () = peer_closed.notified() => {}
                    }
                } => {
                    refreshes.soon(s.interval);
                    continue;
                }
                () = refresh_due => refresh = true,
            }
            refreshes.starting(refresh);
            let overdue = ctx.overdue.borrow_and_update().clone();
            let stands_down = note_standing_down(&mut standing_down, overdue.as_ref());
            state.set_standing_down(stands_down || !s.leader_eligible);
            let round_start = Instant::now();
            let deadline = peers.start(&client_tls, s, round_start).await;
            // A round can wait up to connectTimeout for a silent peer: a stop (shutdown, or a
            // reload rebuilding the manager) must not wait for it, so the listener is freed in
            // time for the next manager to bind.
            tokio::select! {
                biased;
                () = &mut ctx.shutdown => break,
                () = peers.collect(deadline) => {}
            }

            // Marked seen: a change this fold already carries needs no refresh of its own.
            let job_set = ctx.job_set.borrow_and_update().clone();
            local.job_set_id = job_set.id.to_string();
            summary.refresh(&job_set, &ctx.ledger, crate::clock::now_ms());
            let rv = fold(&mut state, refresh, &local, &peers.latest, started);
            let booting = started.elapsed() < s.interval * BOOT_REFRESH_INTERVALS
                && s.elect_leader
                && !rv.self_candidate;
            refreshes.folded(rv.recheck || booting, s.interval);
            log_events(&rv, s);
            edges.log(&rv, &local);

            if s.observability {
                served.node_stats.send_replace(stats_header());
            }
            let reboot_ran = reboot_known.update(&job_set, &peers.latest, &ctx.reboot_ran);
            let advertised: Vec<String> = reboot_ran.iter().take(MAX_LIST).cloned().collect();
            served.replace_body(ServedBody::encode(
                &rv.report(&local, advertised),
                summary.jobs(),
            ));
            ctx.view.send_replace(self.view_of(
                &rv,
                &local,
                &peers.display(),
                round_start,
                reboot_ran,
                overdue.as_ref(),
            ));
        }

        peers.abort();
        let job_set_id = ctx.job_set.borrow().id.to_string();
        self.stopped(&ctx.view, job_set_id, served).await;
    }

    /// After the last round: a stopped manager knows nothing any more, so the gate must not
    /// keep acting on its last quorate round (the supervisor publishes the next backend's view
    /// after this); then the `/peer` server stops.
    async fn stopped(&self, view: &watch::Sender<ClusterView>, job_set_id: String, served: Served) {
        view.send_replace(self.pending_view(Election::Starting, job_set_id, None));
        served.stop().await;
        tracing::info!("cluster: gossip manager stopped");
    }

    fn log_started(&self, addr: &str) {
        let s = &self.settings;
        tracing::info!(
            listen = addr,
            peers = s.peers.len(),
            elect_leader = s.elect_leader,
            distribution = %s.distribution,
            instance_id = self.instance_id,
            "cluster: gossip manager started"
        );
    }

    /// This node as its gossip round sees it, with the job set `set`.
    fn local_node(&self, set: &crate::jobs::JobSet) -> LocalNode {
        let s = &self.settings;
        LocalNode {
            name: self.node_name.clone(),
            instance_id: self.instance_id.clone(),
            job_set_id: set.id.to_string(),
            configured_size: s.peers.len() + 1,
            elect_leader: s.elect_leader,
            distribution: s.distribution,
            drift_after: s.drift_after,
            interval_ms: u64::try_from(s.interval.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// The cluster view of one round.
    fn view_of(
        &self,
        rv: &RoundView,
        local: &LocalNode,
        display: &PeerDisplay<'_>,
        round_start: Instant,
        reboot_ran: std::collections::BTreeSet<String>,
        overdue: Option<&crate::liveness::Overdue>,
    ) -> ClusterView {
        let s = &self.settings;
        // Nodes that stand down are in no ring: a spread job or a PreferLeader firing placed on
        // one would find nobody to run it. They still count toward the quorum (`rv.quorate`).
        let acting = |names: &std::collections::BTreeSet<String>| -> Vec<String> {
            names
                .iter()
                .filter(|n| !rv.standing_down.contains(*n))
                .cloned()
                .collect()
        };
        let me_standing = rv.standing_down.contains(&local.name);
        let spread = s.distribution == Distribution::Spread;
        // A wedged manager must not leave a leader acting on a view it stopped refreshing:
        // past two intervals plus one poll timeout, the gate treats this view as not quorate.
        let stale_at = round_start + s.interval * 2 + s.connect_timeout;
        let election = if s.elect_leader {
            Election::Managed(ManagedView {
                conflict: rv.conflicts.any(),
                // Standing down is not losing quorum: the node knows who leads and defers to
                // it (a retry there is settled elsewhere, not held for a quorum).
                quorate: rv.quorate && (rv.self_candidate || me_standing),
                converging: rv.converging,
                spread,
                leader: if spread { None } else { rv.leader.clone() },
                agreeing: acting(&rv.agreeing),
                reachable_agreeing: acting(&rv.reachable_agreeing),
                vouched: acting(&rv.vouched_unconfirmed),
                fence: None,
                lease: None,
                lead_until: Some(stale_at),
                quorate_until: Some(stale_at),
                reboot_ran: Some(Arc::new(RebootRanRecord {
                    job_set_id: local.job_set_id.clone(),
                    jobs: reboot_ran,
                })),
            })
        } else {
            Election::Off
        };
        let leader = if spread { None } else { rv.leader.clone() };
        let peers = rv
            .peers
            .iter()
            .zip(&s.peers)
            .zip(display.last_seen_ms)
            .zip(display.jobs)
            .zip(display.stats)
            .map(|((((p, host), seen), jobs), stats)| {
                let reachable = !matches!(
                    p.status,
                    None | Some(PeerStatus::Unreachable | PeerStatus::Untrusted)
                );
                PeerRow {
                    host: host.to_string(),
                    status: p.status.map_or("pending", PeerStatus::as_str).to_owned(),
                    node_name: p.reported_name.clone().filter(|_| reachable),
                    job_set_id: p.reported_job_set_id.clone().filter(|_| reachable),
                    instance_id: p.reported_instance_id.clone().filter(|_| reachable),
                    last_seen: seen.filter(|_| reachable).and_then(iso8601),
                    last_error: p.last_error.clone(),
                    mismatch_streak: p.mismatch_streak,
                    standing_down: reachable
                        && p.reported_name
                            .as_ref()
                            .is_some_and(|n| rv.standing_down.contains(n)),
                    jobs: jobs.clone().filter(|_| reachable),
                    node_stats: stats.clone().filter(|_| reachable),
                }
            })
            .collect();
        let status = GossipStatus {
            job_set_id: local.job_set_id.clone(),
            cluster_size: rv.effective_size,
            quorum: rv.quorum,
            elect_leader: s.elect_leader,
            distribution: s.distribution,
            observability: s.observability,
            conflict: rv.conflicts.any(),
            conflict_names: rv.conflicts.names.clone(),
            size_conflict: rv.conflicts.size_conflict(),
            conflicting_sizes: rv.conflicts.sizes.clone(),
            policy_conflict: rv.conflicts.policy_conflict(),
            conflicting_policies: rv.conflicts.policies.clone(),
            candidates_truncated: rv.advert.candidates_truncated,
            quorate: rv.quorate,
            interval: s.interval,
            is_leader: leader.as_deref() == Some(local.name.as_str()),
            leader,
            converging: rv.converging,
            manager_error: None,
            standing_down: overdue.filter(|_| me_standing).map(ToString::to_string),
            leader_eligible: s.leader_eligible,
            peers,
        };
        ClusterView {
            node_name: self.node_name.clone(),
            election,
            status: Arc::new(ClusterStatus::Gossip(Box::new(status))),
        }
    }
}

/// `2026-06-23T19:00:00+00:00`, the seed's `last_seen` format.
fn iso8601(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, false))
}

/// The extra rounds (`GossipState::refresh`) the manager takes between two rounds while the
/// leader it follows is known only through a witness (rule 4b of the gossip core): a quarter
/// interval apart, so the survivors of a dead leader learn of it within about an interval.
const REFRESHES_PER_ROUND: u32 = 3;

/// For how many intervals after its start a node that does not count itself a candidate yet
/// takes refreshes between its rounds (same budget): a joint boot's mutual attestation then
/// completes in quarter intervals instead of whole ones.
const BOOT_REFRESH_INTERVALS: u32 = 5;

/// One peer's poller: idle between polls, or out on a poll task.
enum Slot {
    Idle(Box<Poller>),
    Busy {
        host: HostPort,
        task: JoinHandle<(Box<Poller>, PollResult)>,
    },
    /// Only while moving between the two states.
    Empty,
}

impl Slot {
    /// Starts a poll unless one is still out. A poll that outlived its round (see
    /// [`Self::finish_by`]) and has finished since is collected here and its answer dropped:
    /// it describes the peer as it was a round or more ago, possibly a previous life of it.
    async fn start(&mut self, tls: &ClientTls, timeout: Duration) {
        if let Slot::Busy { host, task } = self
            && task.is_finished()
        {
            let poller = match (&mut *task).await {
                Ok((poller, _stale)) => poller,
                Err(_) => Box::new(Poller::new(host.clone())),
            };
            *self = Slot::Idle(poller);
        }
        if !matches!(self, Slot::Idle(_)) {
            return;
        }
        let Slot::Idle(mut poller) = std::mem::replace(self, Slot::Empty) else {
            return;
        };
        let host = poller.host().clone();
        let tls = tls.clone();
        let task = crate::spawn(async move {
            let result = poller.poll(&tls, timeout).await;
            (poller, result)
        });
        *self = Slot::Busy { host, task };
    }

    /// This round's outcome for the peer: the poll's result if it finishes by `deadline`,
    /// else unreachable, never an earlier round's outcome. The gossip core reads every
    /// outcome as this round's news: a reused one let a node begin to lead on a report older
    /// than a round, from before a restart or before another node's claim, while the peer
    /// itself was up and leading (the timed simulator found it once polls could be slow). A
    /// poll still out is left to finish on its own bound and is collected at the next start.
    async fn finish_by(&mut self, deadline: Instant) -> Option<PollResult> {
        let Slot::Busy { host, task } = self else {
            return None;
        };
        match tokio::time::timeout_at(deadline, &mut *task).await {
            Err(_) => Some(PollResult {
                outcome: PollOutcome::Unreachable {
                    error: format!("Cannot connect to host {host}: no answer within the round"),
                },
                jobs: None,
                fresh: false,
                node_stats: None,
            }),
            Ok(Ok((poller, result))) => {
                *self = Slot::Idle(poller);
                Some(result)
            }
            Ok(Err(e)) => {
                let host = host.clone();
                *self = Slot::Idle(Box::new(Poller::new(host.clone())));
                Some(PollResult {
                    outcome: PollOutcome::Unreachable {
                        error: format!("polling {host} failed: {e}"),
                    },
                    jobs: None,
                    fresh: false,
                    node_stats: None,
                })
            }
        }
    }

    fn abort(self) {
        if let Slot::Busy { task, .. } = self {
            task.abort();
        }
    }
}

/// Watches the TLS files and loads a changed set only when all three parse (ROT-01/02).
pub(super) struct Rotation {
    paths: TlsPaths,
    loaded: [u8; 32],
    last_bad: Option<[u8; 32]>,
}

impl Rotation {
    pub(super) fn new(paths: TlsPaths, loaded: [u8; 32]) -> Self {
        Self {
            paths,
            loaded,
            last_bad: None,
        }
    }

    pub(super) async fn check(&mut self) -> Option<TlsMaterial> {
        let paths = self.paths.clone();
        let read = tokio::task::spawn_blocking(move || {
            let files = TlsFiles::read(&paths)?;
            Ok::<_, TlsError>(files)
        })
        .await
        .ok()?;
        let files = match read {
            Ok(f) => f,
            Err(e) => {
                // A file briefly missing mid-rotation is the same as a half-written one.
                tracing::warn!("cluster: TLS files unreadable, keeping the loaded ones: {e}");
                return None;
            }
        };
        if files.fingerprint == self.loaded || Some(files.fingerprint) == self.last_bad {
            return None;
        }
        match TlsMaterial::from_files(&self.paths, &files) {
            Ok(m) => {
                tracing::info!(
                    "cluster: TLS files changed on disk; new certificates loaded without a restart"
                );
                self.loaded = m.fingerprint;
                self.last_bad = None;
                Some(m)
            }
            Err(e) => {
                tracing::warn!(
                    "cluster: TLS files changed but do not load yet ({e}); keeping the current \
                     certificates and retrying on the next check"
                );
                self.last_bad = Some(files.fingerprint);
                None
            }
        }
    }
}

/// How a conflict kind reads in a log line.
fn conflict_phrase(kind: ConflictKind) -> &'static str {
    match kind {
        ConflictKind::Names => "duplicate nodeName",
        ConflictKind::Size => "cluster size",
        ConflictKind::Policy => "coordination policy",
    }
}

fn log_events(rv: &RoundView, s: &GossipSettings) {
    let host = |i: usize| s.peers.get(i).map(ToString::to_string).unwrap_or_default();
    for event in &rv.events {
        match event {
            RoundEvent::ConflictOnset { kind, detail } => tracing::error!(
                kind = kind.as_str(),
                "cluster: {} conflict: {detail}; Leader jobs stand down until it clears",
                conflict_phrase(*kind)
            ),
            RoundEvent::ConflictCleared { kind } => tracing::info!(
                kind = kind.as_str(),
                "cluster: {} conflict cleared",
                conflict_phrase(*kind)
            ),
            RoundEvent::SelfListingRecognised { peer } => tracing::info!(
                peer = host(*peer),
                "cluster: peer {} is this node itself; it is excluded from the cluster size",
                host(*peer)
            ),
            RoundEvent::DegenerateTwoOfTwo => tracing::warn!(
                "cluster: WARNING: after excluding self-listings this is a 2-node cluster \
                 with quorum 2 of 2: any single failure stops every Leader job; remove this \
                 node's own entry from cluster.peers"
            ),
            RoundEvent::CandidatesTruncated { count } => tracing::warn!(
                count,
                "cluster: {count} quorate candidates; advertising only the lowest 512"
            ),
            RoundEvent::PeerBecame { peer, status } => {
                let p = &rv.peers[*peer];
                let error = p.last_error.as_deref().unwrap_or("");
                match status {
                    PeerStatus::Unreachable => tracing::warn!(
                        peer = host(*peer),
                        "cluster: peer {} is unreachable: {error}",
                        host(*peer)
                    ),
                    PeerStatus::Untrusted => tracing::warn!(
                        peer = host(*peer),
                        "cluster: peer {} is untrusted: {error}",
                        host(*peer)
                    ),
                    PeerStatus::Drifted => tracing::warn!(
                        peer = host(*peer),
                        job_set_id = p.reported_job_set_id.as_deref().unwrap_or(""),
                        "cluster: peer {} has drifted: a different job set for {} rounds",
                        host(*peer),
                        p.mismatch_streak
                    ),
                    other => tracing::info!(
                        peer = host(*peer),
                        node = p.reported_name.as_deref().unwrap_or(""),
                        "cluster: peer {} is {}",
                        host(*peer),
                        other.as_str()
                    ),
                }
            }
        }
    }
}

/// Quorum and leadership edges, logged at INFO (inventory §8.5).
#[derive(Default)]
struct Edges {
    quorate: Option<bool>,
    leader: Option<Option<String>>,
}

impl Edges {
    fn log(&mut self, rv: &RoundView, local: &LocalNode) {
        if self.quorate != Some(rv.quorate) {
            if rv.quorate {
                tracing::info!(
                    agreeing = rv.mutual_agreeing.len() + 1,
                    quorum = rv.quorum,
                    "cluster: quorum gained ({} of {} members agree)",
                    rv.mutual_agreeing.len() + 1,
                    rv.effective_size
                );
            } else if self.quorate.is_some() {
                tracing::info!(
                    quorum = rv.quorum,
                    "cluster: quorum lost; Leader jobs stand down"
                );
            }
            self.quorate = Some(rv.quorate);
        }
        if self.leader.as_ref() != Some(&rv.leader) {
            let me = local.name.as_str();
            let was_me = self
                .leader
                .as_ref()
                .is_some_and(|l| l.as_deref() == Some(me));
            match rv.leader.as_deref() {
                Some(l) if l == me => tracing::info!("cluster: this node is now the leader"),
                Some(l) if was_me => {
                    tracing::info!(leader = l, "cluster: this node is no longer the leader")
                }
                Some(l) => tracing::info!(leader = l, "cluster: leader is {l}"),
                None if was_me => {
                    tracing::info!("cluster: this node is no longer the leader (no leader)")
                }
                None if self.leader.is_some() => tracing::info!("cluster: no leader"),
                None => {}
            }
            self.leader = Some(rv.leader.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot_on(host: &HostPort, task: JoinHandle<(Box<Poller>, PollResult)>) -> Slot {
        Slot::Busy {
            host: host.clone(),
            task,
        }
    }

    fn answered(report: Arc<cronstable_core::gossip::PeerReport>) -> PollResult {
        PollResult {
            outcome: PollOutcome::Report(report),
            jobs: None,
            fresh: true,
            node_stats: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_poll_that_outlives_its_round_is_unreachable_and_its_late_answer_is_dropped() {
        let host: HostPort = "127.0.0.1:9".parse().unwrap();
        let local = LocalNode {
            name: "b".into(),
            instance_id: "b-1".into(),
            job_set_id: "jobs".into(),
            configured_size: 3,
            elect_leader: true,
            distribution: Distribution::SingleLeader,
            drift_after: 3,
            interval_ms: 1_000,
        };
        let late = Arc::new(fresh_report(&local));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let poller = Box::new(Poller::new(host.clone()));
        let report = Arc::clone(&late);
        let mut slot = slot_on(
            &host,
            tokio::spawn(async move {
                let _ = released.await;
                (poller, answered(report))
            }),
        );

        // The round closes before the peer answers: no news this round, not an old answer.
        let round = slot
            .finish_by(Instant::now() + Duration::from_millis(100))
            .await
            .expect("every busy slot gives this round an outcome");
        assert!(
            matches!(&round.outcome, PollOutcome::Unreachable { error } if error.contains("within the round")),
            "{:?}",
            round.outcome
        );
        assert!(!round.fresh);

        // The answer arrives between rounds: the next start drops it and polls again, so the
        // next round reads a poll started in that round.
        release.send(()).unwrap();
        tokio::task::yield_now().await;
        let Slot::Busy { task, .. } = &slot else {
            panic!("the late poll is still out");
        };
        while !task.is_finished() {
            tokio::task::yield_now().await;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let tls = ClientTls {
            config: Arc::new(config),
            generation: 0,
        };
        slot.start(&tls, Duration::from_millis(10)).await;
        let Slot::Busy { task, .. } = &mut slot else {
            panic!("a new poll is out");
        };
        let (_, next) = task.await.unwrap();
        assert!(
            !matches!(&next.outcome, PollOutcome::Report(r) if Arc::ptr_eq(r, &late)),
            "the late answer was read as this round's"
        );
    }
}
