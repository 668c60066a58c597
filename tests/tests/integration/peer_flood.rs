//! The `/peer` listener under a flood of idle TCP connections from one address (the
//! untrusted-callers issue): 300 sockets that never start a TLS handshake, opened again as soon
//! as the listener closes them. Established peers keep gossiping, and a peer that starts during
//! the flood still joins.
//!
//! Red before the fix: the 256-connection cap was taken before the handshake, so the flood
//! held every slot and the late node never reached n1 (it saw n1 unreachable throughout).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster};
use cronstable_tests::{wait_for, wait_for_state};
use serde_json::Value;

/// How many idle connections the flood keeps open.
const FLOOD: usize = 300;

/// Keeps `FLOOD` idle TCP connections from `source` to `target` open until `stop` is set:
/// each one is opened again when the listener closes it. Returns the thread and the count of
/// connections opened so far.
fn flood(
    source: &str,
    target: SocketAddr,
    stop: Arc<AtomicBool>,
) -> (std::thread::JoinHandle<()>, Arc<AtomicUsize>) {
    let source: SocketAddr = format!("{source}:0").parse().unwrap();
    let opened = Arc::new(AtomicUsize::new(0));
    let counter = opened.clone();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut tasks = Vec::new();
            for _ in 0..FLOOD {
                let (stop, opened) = (stop.clone(), opened.clone());
                tasks.push(tokio::spawn(async move {
                    use tokio::io::AsyncReadExt;
                    while !stop.load(Ordering::Relaxed) {
                        let socket = tokio::net::TcpSocket::new_v4().unwrap();
                        socket.bind(source).unwrap();
                        let Ok(mut conn) = socket.connect(target).await else {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            continue;
                        };
                        opened.fetch_add(1, Ordering::Relaxed);
                        let held_from = tokio::time::Instant::now();
                        // Idle: send nothing; wait for the listener to close it, or the end.
                        let mut buf = [0u8; 16];
                        while !stop.load(Ordering::Relaxed) {
                            let read = tokio::time::timeout(
                                Duration::from_millis(200),
                                conn.read(&mut buf),
                            );
                            if read.await.is_ok() {
                                break;
                            }
                        }
                        // A socket the listener held until its handshake timeout is replaced at
                        // once, so the slot it held never comes free for a peer; one closed on
                        // arrival is tried again a second later.
                        if held_from.elapsed() < Duration::from_secs(1) {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
        })
    });
    (thread, counter)
}

/// Whether a `/cluster` view shows peer `name` answering, with the same job set.
fn sees(v: &Value, name: &str) -> bool {
    v["peers"].as_array().is_some_and(|ps| {
        ps.iter()
            .any(|p| p["node_name"] == name && p["status"] == "agreed")
    })
}

#[test]
fn idle_sockets_from_one_address_crowd_out_no_peer() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 113));
    let n1 = files.start(0);
    let n2 = files.start(1);
    let converged = |what: &str, node: &cronstable_tests::Coordinator, peer: &str| {
        wait_for_state(what, || {
            let v = cluster(node.web).ok_or("no /cluster answer")?;
            sees(&v, peer).then_some(()).ok_or(format!("/cluster {v}"))
        })
    };
    converged("n2 sees n1", &n2, "n1");

    let stop = Arc::new(AtomicBool::new(false));
    let target: SocketAddr = files.nodes[0].peer_host().parse().unwrap();
    let (flooder, opened) = flood("127.0.113.99", target, stop.clone());
    wait_for("the flood to open all its connections", || {
        (opened.load(Ordering::Relaxed) >= FLOOD).then_some(())
    });

    // A peer that starts now still joins: it reaches n1 through the flood.
    let n3 = files.start(2);
    converged("n3 sees n1 during the flood", &n3, "n1");
    // And an established peer keeps gossiping with n1.
    converged("n2 still sees n1 during the flood", &n2, "n1");
    converged("n1 sees n3", &n1, "n3");

    stop.store(true, Ordering::Relaxed);
    flooder.join().unwrap();
    assert!(
        n1.proc
            .log()
            .contains("cluster: refusing /peer connections"),
        "the refusals are visible: {}",
        n1.proc.log()
    );
    drop((n1, n2, n3));
}
