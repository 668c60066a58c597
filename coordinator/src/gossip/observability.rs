//! The observability mesh of a lease backend (GSP-113): a second gossip mesh, beside the
//! etcd, Kubernetes or filesystem election, that only shares what `GET /fleet` shows.
//!
//! A lease backend has no node-to-node channel of its own, so without this mesh `/fleet`
//! lists this node alone. With `cluster.observability` (`listen`, `tls`, `peers`,
//! `interval`) every node serves `/peer` on its own mTLS listener and polls its peers once per
//! interval, with the gossip backend's transport as it is: the same certificate rules (the
//! peer's certificate chains to the mesh's CA and names the host it was dialled at), the same
//! bounds on strangers and bodies, kept-alive connections with ETags and 304s, and the same
//! `X-Cronstable-Node-Stats` header. Certificates rotate in place.
//!
//! **Election-inert.** Nothing here reaches the [`crate::cluster::ClusterView`] the gate
//! reads, `/cluster`, or the lease: the mesh task's only output is a [`MeshView`] that
//! `/fleet` and the dashboard display. From a peer's answer it keeps the node name, the
//! job-set ID, the per-job run summaries and the node stats, all display-only; every election
//! field of the body (quorum, leader, candidates) is ignored. What it serves is an
//! attestation-only report (`electLeader: false`, never quorate, leading nothing), so a gossip
//! node pointed at a mesh port by mistake elects nothing from it either. A malformed,
//! oversized or hostile answer is "no data for that node" (`jobs: null`, `node_stats: null`),
//! never an error anywhere else.
//!
//! A mesh that cannot start (unreadable certificates, a port in use) logs one ERROR per
//! change of reason, shows the reason on `/fleet` (`mesh_error`) and is retried every
//! interval; the election never waits for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cronstable_core::gossip::{Distribution, LocalNode, PollOutcome, fresh_report};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

use super::manager::Rotation;
use super::node_stats::PeerNodeStats;
use super::poller::{ClientTls, PollResult, Poller};
use super::server::Served;
use super::tls::{TlsError, TlsMaterial};
use super::wire::{JobSummary, ServedBody};
use crate::config::address::HostPort;
use crate::config::cluster::{ClusterConfig, ObservabilityConfig, TlsPaths};
use crate::jobs::JobSet;
use crate::ledger::Ledger;
use crate::observe::summary::RunSummaries;

/// The mesh's settings, from `cluster.observability` on a lease backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshSettings {
    /// The mesh's `/peer` listener.
    pub listen: HostPort,
    /// The mesh's TLS files.
    pub tls: TlsPaths,
    /// The other members.
    pub peers: Vec<HostPort>,
    /// One poll round.
    pub interval: Duration,
    /// One poll's deadline (`cluster.connectTimeout`, at most the interval).
    pub connect_timeout: Duration,
}

impl MeshSettings {
    /// The mesh a validated cluster section asks for: `Some` only for a lease backend with
    /// `cluster.observability`'s mesh keys (gossip carries its stats on the main mesh).
    pub fn from_cluster(c: &ClusterConfig) -> Option<Self> {
        match c.observability.as_ref()? {
            ObservabilityConfig::Marker => None,
            ObservabilityConfig::Mesh {
                listen,
                tls,
                peers,
                interval,
            } => Some(Self {
                listen: listen.clone(),
                tls: tls.clone(),
                peers: peers.iter().map(|p| p.host.clone()).collect(),
                interval: *interval,
                connect_timeout: c.connect_timeout.min(*interval),
            }),
        }
    }
}

/// How a mesh peer answered its last poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeshPeerStatus {
    /// Not polled yet.
    Pending,
    /// Answered with a body that decoded (its summary may still be "no data").
    Reachable,
    /// Did not answer in time, or answered with something unusable.
    Unreachable,
    /// Its certificate failed the mesh's checks.
    Untrusted,
}

impl MeshPeerStatus {
    /// The spelling on `/fleet`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Reachable => "reachable",
            Self::Unreachable => "unreachable",
            Self::Untrusted => "untrusted",
        }
    }
}

/// One mesh peer as `/fleet` shows it.
#[derive(Debug, Clone)]
pub struct MeshPeer {
    /// The configured address.
    pub host: String,
    /// The name its last report gave (kept from an earlier answer while it is unreachable).
    pub node_name: Option<String>,
    /// Its last poll's outcome.
    pub status: MeshPeerStatus,
    /// Why its last poll failed.
    pub last_error: Option<String>,
    /// When it last answered, Unix ms.
    pub last_seen_ms: Option<i64>,
    /// The job-set ID its last report gave.
    pub job_set_id: Option<String>,
    /// Its per-job run summaries from the last poll; `None` is "no data for that node".
    pub jobs: Option<Arc<Vec<JobSummary>>>,
    /// Its node stats from the last poll; `None` is "no data for that node".
    pub node_stats: Option<PeerNodeStats>,
}

/// What the mesh last saw: the only thing it publishes.
#[derive(Debug, Clone, Default)]
pub struct MeshView {
    /// Why the mesh is not running, while it is not.
    pub error: Option<String>,
    /// One row per configured peer, in config order.
    pub peers: Vec<MeshPeer>,
}

impl MeshView {
    fn pending(settings: &MeshSettings, error: Option<String>) -> Self {
        Self {
            error,
            peers: settings
                .peers
                .iter()
                .map(|h| MeshPeer {
                    host: h.to_string(),
                    node_name: None,
                    status: MeshPeerStatus::Pending,
                    last_error: None,
                    last_seen_ms: None,
                    job_set_id: None,
                    jobs: None,
                    node_stats: None,
                })
                .collect(),
        }
    }

    /// Folds one poll of peer `i` in. Display data is as fresh as the poll: a failed one
    /// leaves none (the name it gave earlier is kept, so an operator knows who is gone).
    fn fold(&mut self, i: usize, result: PollResult) {
        let Some(peer) = self.peers.get_mut(i) else {
            return;
        };
        let (status, error) = match result.outcome {
            PollOutcome::Report(report) => {
                peer.status = MeshPeerStatus::Reachable;
                peer.last_error = None;
                peer.last_seen_ms = Some(crate::clock::now_ms());
                peer.node_name = Some(report.node_name.clone());
                peer.job_set_id = Some(report.job_set_id.clone());
                peer.jobs = result.jobs;
                peer.node_stats = result.node_stats;
                return;
            }
            PollOutcome::Untrusted { error } => (MeshPeerStatus::Untrusted, Some(error)),
            PollOutcome::Unreachable { error } => (MeshPeerStatus::Unreachable, Some(error)),
            PollOutcome::NotPolled => (MeshPeerStatus::Pending, None),
        };
        peer.status = status;
        peer.last_error = error;
        peer.job_set_id = None;
        peer.jobs = None;
        peer.node_stats = None;
    }
}

/// Runs the mesh until `shutdown` resolves, publishing on `out`.
pub async fn run(
    settings: MeshSettings,
    node_name: String,
    mut job_set: watch::Receiver<Arc<JobSet>>,
    ledger: Ledger,
    out: watch::Sender<Arc<MeshView>>,
    shutdown: impl Future<Output = ()> + Send,
) {
    tokio::pin!(shutdown);
    let Some((listener, tls)) = start_retrying(&settings, &out, &mut shutdown).await else {
        return;
    };
    let mut view = MeshView::pending(&settings, None);
    out.send_replace(Arc::new(view.clone()));

    let mut local = attestation_node(node_name, &job_set.borrow(), &settings);
    let mut summary = RunSummaries::new();
    let body = |local: &LocalNode, summary: &mut RunSummaries, set: &JobSet| {
        summary.refresh(set, &ledger, crate::clock::now_ms());
        ServedBody::encode(&fresh_report(local), summary.jobs())
    };
    let first = body(&local, &mut summary, &job_set.borrow_and_update());
    let stats_header = PeerNodeStats::own_header();
    let served = Served::start(
        listener,
        tls.server.clone(),
        first,
        settings.interval * 2 + settings.connect_timeout,
        Some(stats_header()),
    );
    let mut client_tls = ClientTls {
        config: tls.client.clone(),
        generation: 0,
    };
    tracing::info!(
        listen = served.addr,
        peers = settings.peers.len(),
        "observability mesh: started (display only: /fleet and the dashboard)"
    );

    let mut rotation = Rotation::new(settings.tls.clone(), tls.fingerprint);
    // Each peer's poller between polls; `None` while its poll is out.
    let mut idle: Vec<Option<Poller>> = settings
        .peers
        .iter()
        .map(|h| Some(Poller::new(h.clone()).reading_node_stats(true)))
        .collect();
    let mut polls: JoinSet<(usize, Poller, PollResult)> = JoinSet::new();
    let mut polling: HashMap<tokio::task::Id, usize> = HashMap::new();
    let mut rounds = tokio::time::interval(settings.interval);
    rounds.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(done) = polls.join_next_with_id(), if !polls.is_empty() => {
                match done {
                    Ok((id, (i, poller, result))) => {
                        polling.remove(&id);
                        view.fold(i, result);
                        idle[i] = Some(poller);
                        out.send_replace(Arc::new(view.clone()));
                    }
                    // A poll task that panicked loses its poller: a new one takes over.
                    Err(e) => {
                        if let Some(i) = polling.remove(&e.id()) {
                            tracing::error!(peer = %settings.peers[i], "observability mesh: a poll failed: {e}");
                            idle[i] = Some(Poller::new(settings.peers[i].clone()).reading_node_stats(true));
                        }
                    }
                }
            }
            _ = rounds.tick() => {
                if let Some(m) = rotation.check().await {
                    served.tls.send_replace(m.server);
                    client_tls = client_tls.rotated(m.client);
                }
                let set = job_set.borrow_and_update().clone();
                local.job_set_id = set.id.to_string();
                served.replace_body(body(&local, &mut summary, &set));
                served.node_stats.send_replace(stats_header());
                let timeout = settings.connect_timeout;
                poll_idle(&mut idle, &mut polls, &mut polling, &client_tls, timeout);
            }
        }
    }
    polls.abort_all();
    served.stop().await;
    tracing::info!("observability mesh: stopped");
}

/// Starts the mesh's listener, retried every interval until it can (publishing why meanwhile,
/// one log line per change of reason); `None` when `shutdown` resolves first.
async fn start_retrying(
    settings: &MeshSettings,
    out: &watch::Sender<Arc<MeshView>>,
    shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Option<(TcpListener, TlsMaterial)> {
    let mut last_reason = String::new();
    loop {
        match start(settings).await {
            Ok(started) => {
                if !last_reason.is_empty() {
                    tracing::info!("observability mesh: started after an earlier failure");
                }
                return Some(started);
            }
            Err(reason) => {
                if reason != last_reason {
                    tracing::error!(
                        "observability mesh: cannot start: {reason}; /fleet shows this node \
                         alone until it does (the lease election does not depend on it)"
                    );
                    last_reason.clone_from(&reason);
                }
                out.send_replace(Arc::new(MeshView::pending(settings, Some(reason))));
                tokio::select! {
                    () = shutdown.as_mut() => return None,
                    () = tokio::time::sleep(settings.interval) => {}
                }
            }
        }
    }
}

/// This node's report on the mesh: attestation only, never electing, never quorate, leading
/// nothing.
fn attestation_node(name: String, set: &JobSet, settings: &MeshSettings) -> LocalNode {
    LocalNode {
        name,
        instance_id: String::new(),
        job_set_id: set.id.to_string(),
        configured_size: settings.peers.len() + 1,
        elect_leader: false,
        distribution: Distribution::SingleLeader,
        drift_after: 1,
        interval_ms: u64::try_from(settings.interval.as_millis()).unwrap_or(u64::MAX),
    }
}

/// Polls every peer whose poller is idle; a peer whose last poll is still out (bounded by its
/// own deadline) is skipped this round.
fn poll_idle(
    idle: &mut [Option<Poller>],
    polls: &mut JoinSet<(usize, Poller, PollResult)>,
    polling: &mut HashMap<tokio::task::Id, usize>,
    tls: &ClientTls,
    timeout: std::time::Duration,
) {
    for (i, slot) in idle.iter_mut().enumerate() {
        let Some(mut poller) = slot.take() else {
            continue;
        };
        let tls = tls.clone();
        let task = polls.spawn(async move {
            let result = poller.poll(&tls, timeout).await;
            (i, poller, result)
        });
        polling.insert(task.id(), i);
    }
}

async fn start(settings: &MeshSettings) -> Result<(TcpListener, TlsMaterial), String> {
    let paths = settings.tls.clone();
    let tls = tokio::task::spawn_blocking(move || TlsMaterial::load(&paths))
        .await
        .map_err(|e| TlsError::Build(format!("loading the TLS files panicked: {e}")))
        .and_then(|r| r)
        .map_err(|e| format!("cluster.observability.tls: {e}"))?;
    let listener = TcpListener::bind(settings.listen.to_socket_addr_string())
        .await
        .map_err(|e| format!("cluster.observability.listen {}: {e}", settings.listen))?;
    Ok((listener, tls))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> MeshSettings {
        MeshSettings {
            listen: HostPort::new("127.0.0.1", 9443),
            tls: TlsPaths {
                ca: "/ca.pem".into(),
                cert: "/c.pem".into(),
                key: "/c.key".into(),
            },
            peers: vec![HostPort::new("127.0.0.2", 9443)],
            interval: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
        }
    }

    fn report_from(name: &str) -> PollResult {
        let local = LocalNode {
            name: name.into(),
            instance_id: "i".into(),
            job_set_id: "v1:abc".into(),
            configured_size: 3,
            elect_leader: true,
            distribution: Distribution::SingleLeader,
            drift_after: 1,
            interval_ms: 1000,
        };
        PollResult {
            outcome: PollOutcome::Report(Arc::new(fresh_report(&local))),
            jobs: Some(Arc::new(Vec::new())),
            fresh: true,
            node_stats: None,
        }
    }

    #[test]
    fn a_failed_poll_is_no_data_but_keeps_the_name() {
        let mut view = MeshView::pending(&settings(), None);
        assert_eq!(view.peers[0].status, MeshPeerStatus::Pending);
        view.fold(0, report_from("b"));
        let b = &view.peers[0];
        assert_eq!(b.status, MeshPeerStatus::Reachable);
        assert_eq!(b.node_name.as_deref(), Some("b"));
        assert_eq!(b.job_set_id.as_deref(), Some("v1:abc"));
        assert!(b.jobs.is_some() && b.last_seen_ms.is_some());

        view.fold(
            0,
            PollResult {
                outcome: PollOutcome::Untrusted {
                    error: "bad certificate".into(),
                },
                jobs: None,
                fresh: false,
                node_stats: None,
            },
        );
        let b = &view.peers[0];
        assert_eq!(b.status, MeshPeerStatus::Untrusted);
        assert_eq!(b.last_error.as_deref(), Some("bad certificate"));
        assert!(b.jobs.is_none() && b.job_set_id.is_none() && b.node_stats.is_none());
        assert_eq!(b.node_name.as_deref(), Some("b"), "who is gone stays named");
        // A poll for a peer that is not configured changes nothing.
        view.fold(7, report_from("x"));
        assert_eq!(view.peers.len(), 1);
    }

    #[test]
    fn only_a_lease_backends_mesh_keys_make_a_mesh() {
        let mut c = ClusterConfig {
            observability: Some(ObservabilityConfig::Marker),
            ..ClusterConfig::default()
        };
        assert_eq!(MeshSettings::from_cluster(&c), None);
        let s = settings();
        c.observability = Some(ObservabilityConfig::Mesh {
            listen: s.listen.clone(),
            tls: s.tls.clone(),
            peers: vec![crate::config::cluster::PeerConfig {
                host: s.peers[0].clone(),
            }],
            interval: Duration::from_millis(500),
        });
        let m = MeshSettings::from_cluster(&c).unwrap();
        assert_eq!(m.peers, s.peers);
        assert!(
            m.connect_timeout <= m.interval,
            "a poll ends within its round"
        );
    }
}
