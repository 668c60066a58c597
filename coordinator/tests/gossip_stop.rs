//! A gossip manager that is told to stop leaves no trace that peers or the gate could act on
//! (issue 29, item 5): its last view is demoted (not quorate, no leader) and its `/peer`
//! listener is closed when its task ends, even while a peer holds a connection open. Three
//! managers in one process over real mTLS on loopback addresses.

use std::sync::Arc;
use std::time::Duration;

use cronstable_coordinator::cluster::{BackendContext, ClusterBackend, ClusterView, Election};
use cronstable_coordinator::gossip::certgen::TestCa;
use cronstable_coordinator::gossip::{GossipBackend, GossipSettings};
use cronstable_coordinator::jobs::JobRegistry;
use cronstable_coordinator::ledger::Ledger;
use cronstable_coordinator::reboot::ran::RebootRan;
use tokio::sync::watch;

struct Node {
    view: watch::Receiver<ClusterView>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    peer_addr: String,
}

fn free_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(dir: &std::path::Path, ca: &TestCa, i: usize, addrs: &[(String, u16)]) -> Node {
    start_timed(dir, ca, i, addrs, "300ms")
}

/// [`start`] with `interval` and `connectTimeout` both set to `timing`.
fn start_timed(
    dir: &std::path::Path,
    ca: &TestCa,
    i: usize,
    addrs: &[(String, u16)],
    timing: &str,
) -> Node {
    let name = format!("n{}", i + 1);
    let (ip, port) = &addrs[i];
    let tls = ca.write_node(&dir.join(&name), &name, &[ip]).unwrap();
    let peers: String = addrs
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, (ip, port))| format!("    - host: \"{ip}:{port}\"\n"))
        .collect();
    let yaml = format!(
        "cluster:\n  nodeName: {name}\n  electLeader: true\n  interval: {timing}\n  \
         connectTimeout: {timing}\n  listen: \"{ip}:{port}\"\n  tls:\n    ca: {}\n    cert: {}\n    \
         key: {}\n  peers:\n{peers}",
        tls.ca.display(),
        tls.cert.display(),
        tls.key.display()
    );
    let config = cronstable_coordinator::config::parse(&yaml, "test.yaml")
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
    let backend = GossipBackend::new(
        GossipSettings::from_config(config.cluster.as_ref().unwrap()),
        &name,
    );
    let (view_tx, view) = watch::channel(backend.initial_view());
    let (stop, stop_rx) = watch::channel(false);
    let registry = JobRegistry::new();
    let task = tokio::spawn(Box::new(backend).run(BackendContext {
        reboot_ran: RebootRan::new(),
        view: view_tx,
        job_set: registry.subscribe(),
        ledger: Ledger::new(),
        overdue: watch::channel(None).1,
        shutdown: Box::pin(async move {
            let mut rx = stop_rx;
            let _ = rx.wait_for(|s| *s).await;
        }),
    }));
    Node {
        view,
        stop,
        task,
        peer_addr: format!("{ip}:{port}"),
    }
}

fn leads(view: &ClusterView) -> bool {
    match &view.election {
        Election::Managed(m) => m.quorate && m.leader.as_deref() == Some(view.node_name.as_str()),
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_manager_demotes_its_view_and_closes_its_peer_listener() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let addrs: Vec<(String, u16)> = (0..3)
        .map(|i| {
            let ip = format!("127.0.93.{}", 10 + i);
            let port = free_port(&ip);
            (ip, port)
        })
        .collect();
    let nodes: Vec<Node> = (0..3).map(|i| start(dir.path(), &ca, i, &addrs)).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !leads(&nodes[0].view.borrow()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "n1 never led: {:?}",
            nodes[0].view.borrow().election
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A peer that holds a connection open (the TLS handshake never finishes).
    let _held = tokio::net::TcpStream::connect(&nodes[0].peer_addr)
        .await
        .unwrap();

    let mut nodes = nodes.into_iter();
    let n1 = nodes.next().unwrap();
    let _ = n1.stop.send(true);
    tokio::time::timeout(Duration::from_secs(10), n1.task)
        .await
        .expect("the manager ends within its stop bound")
        .unwrap();
    let last = n1.view.borrow().clone();
    assert!(!leads(&last), "a stopped manager's last view still leads");
    assert!(
        !matches!(&last.election, Election::Managed(m) if m.quorate),
        "a stopped manager's last view is still quorate: {:?}",
        last.election
    );
    assert!(
        tokio::net::TcpStream::connect(&n1.peer_addr).await.is_err(),
        "the /peer listener still accepts after the manager ended"
    );
    for n in nodes {
        let _ = n.stop.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(10), n.task).await;
    }
    let _ = Arc::new(());
}

/// Issue 29, item 6: a stop does not wait for a round in flight. n1's two peers accept TCP and
/// never answer, so its first round waits for them up to `connectTimeout` (60 s here); told to
/// stop while that round is open, the manager ends at once (it failed, by this timeout, with
/// the round's wait not raced against the stop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_does_not_wait_for_a_round_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let ip = "127.0.93.20";
    let own = (ip.to_owned(), free_port(ip));
    let mut silent = Vec::new();
    let mut addrs = vec![own];
    for last in [21, 22] {
        let listener = tokio::net::TcpListener::bind(format!("127.0.93.{last}:0"))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        addrs.push((format!("127.0.93.{last}"), port));
        silent.push(listener);
    }
    let n1 = start_timed(dir.path(), &ca, 0, &addrs, "60s");
    // The round is in flight once both polls have connected (and are waiting for TLS).
    let mut held = Vec::new();
    for listener in &silent {
        let (conn, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
            .await
            .expect("n1 polls its peers in its first round")
            .unwrap();
        held.push(conn);
    }
    let _ = n1.stop.send(true);
    tokio::time::timeout(Duration::from_secs(5), n1.task)
        .await
        .expect("the manager ends without waiting for the round's silent peers")
        .unwrap();
    drop(held);
}
