//! The peer-side harness both transport test modules use: a real `/peer` listener
//! (`gossip::server`) over real mTLS on a loopback address, serving a body and a node-stats
//! header the test can change, and a poller's client TLS.

use std::sync::Arc;
use std::time::Duration;

use cronstable_coordinator::config::address::HostPort;
use cronstable_coordinator::config::cluster::TlsPaths;
use cronstable_coordinator::gossip::poller::ClientTls;
use cronstable_coordinator::gossip::server::{self, PeerEndpoint};
use cronstable_coordinator::gossip::tls::TlsMaterial;
use cronstable_coordinator::gossip::wire::ServedBody;
use cronstable_core::gossip::{Distribution, PeerReport};
use http::HeaderValue;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

/// How long a test poll may take.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

/// A peer report from node `name` of a 3-node cluster, with nothing else to say.
pub(crate) fn report(name: &str) -> PeerReport {
    PeerReport {
        node_name: name.into(),
        job_set_id: "v1:abc".into(),
        instance_id: format!("inst-{name}"),
        cluster_size: 3,
        distribution: Distribution::SingleLeader,
        elect_leader: true,
        quorate: false,
        members: vec![],
        mutual_agreeing: vec![],
        quorate_vouched: vec![],
        candidates_truncated: 0,
        ran_reboot_jobs: vec![],
        standing_down: false,
        leading: Some(vec![]),
        elects: None,
    }
}

/// A running `/peer` listener; dropping it stops the server.
pub(crate) struct Served {
    pub(crate) host: HostPort,
    /// The body it serves.
    pub(crate) body: watch::Sender<Arc<ServedBody>>,
    /// The `X-Cronstable-Node-Stats` value it sends, when it was started with node stats.
    pub(crate) stats: watch::Sender<Option<HeaderValue>>,
    _stop: oneshot::Sender<()>,
}

/// Serves `body` on `ip` (port 0) with the identity in `paths`; with `node_stats`, also the
/// header value [`Served::stats`] holds (none at first).
pub(crate) async fn serve(
    ip: &str,
    paths: &TlsPaths,
    body: ServedBody,
    node_stats: bool,
) -> Served {
    let tls = TlsMaterial::load(paths).unwrap();
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tls_tx, tls_rx) = watch::channel(tls.server.clone());
    let (body_tx, body_rx) = watch::channel(Arc::new(body));
    let (stats_tx, stats_rx) = watch::channel(None);
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let _keep = tls_tx;
        server::serve(
            listener,
            PeerEndpoint {
                tls: tls_rx,
                body: body_rx,
                idle_timeout: Duration::from_secs(30),
                node_stats: node_stats.then_some(stats_rx),
            },
            async move {
                let _ = stopped.await;
            },
        )
        .await;
    });
    Served {
        host: HostPort::new(ip, port),
        body: body_tx,
        stats: stats_tx,
        _stop: stop,
    }
}

/// The client side of the identity in `paths`.
pub(crate) fn client(paths: &TlsPaths) -> ClientTls {
    ClientTls {
        config: TlsMaterial::load(paths).unwrap().client,
        generation: 0,
    }
}
