//! Lease backends across real processes (LSE-08, LSE-09, LSE-E-08, LSE-FS-10): three
//! coordinators contend on one filesystem store, and on one real etcd; exactly one says
//! `is_leader` on `GET /cluster`; after a SIGKILL of the holder another leads within ttl + 2 s;
//! after a graceful stop (SIGTERM, which releases the lease) another leads within about a round.

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cronstable_tests::etcd::Etcd;
use cronstable_tests::lease::{Store, start_lease_node, wait_one_leader};
use cronstable_tests::{Coordinator, PATIENCE, http};

const TTL: u64 = 3;

fn failover(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes: Vec<Coordinator> = ["a", "b", "c"]
        .iter()
        .map(|n| start_lease_node(dir.path(), n, &store, TTL))
        .collect();
    let webs = |nodes: &[Coordinator]| nodes.iter().map(|c| c.web).collect::<Vec<SocketAddr>>();
    let (first, _) = wait_one_leader(&webs(&nodes), PATIENCE).expect("one leader");
    let body = http(nodes[first].web, "GET", "/cluster").unwrap().json();
    assert_eq!(body["quorate"], true);
    assert_eq!(body["cluster_size"], 1);
    assert_eq!(body["peers"], serde_json::json!([]));

    // SIGKILL: no release, the lease must run out.
    let killed = nodes.remove(first);
    let t = Instant::now();
    killed.proc.signal(9);
    let limit = Duration::from_secs(TTL + 2) + Duration::from_millis(300);
    let (second, took) = wait_one_leader(&webs(&nodes), PATIENCE).expect("a new leader");
    assert!(
        t.elapsed() <= limit + Duration::from_millis(100),
        "failover after SIGKILL took {took:?}, over ttl + 2 s"
    );
    drop(killed);

    // SIGTERM: the holder releases, the survivor takes over on its next round (followers run
    // one every 500 ms).
    let mut stopped = nodes.remove(second);
    stopped.proc.signal(15);
    let (_, took) = wait_one_leader(&webs(&nodes), PATIENCE).expect("a leader after the stop");
    assert!(
        took <= Duration::from_secs(1),
        "failover after a graceful stop took {took:?}"
    );
    assert_eq!(stopped.proc.wait_exit(), Some(0));
    stopped.proc.wait_log("lease released");
}

#[test]
fn filesystem_failover_across_processes() {
    let store = tempfile::tempdir().unwrap();
    failover(Store::Filesystem(store.path().to_owned()));
}

#[test]
fn etcd_failover_across_processes() {
    let etcd = Etcd::start();
    failover(Store::Etcd(etcd.endpoint()));
}

#[test]
fn a_filesystem_node_refusing_its_store_fails_leader_closed() {
    // The store path is a file: the start-time check refuses it and the node keeps serving.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let node = start_lease_node(dir.path(), "a", &Store::Filesystem(file.clone()), TTL);
    node.proc.wait_log(&format!(
        "cluster.backend filesystem: refusing to elect over {}",
        file.display()
    ));
    let body = http(node.web, "GET", "/cluster").unwrap().json();
    assert_eq!(body["is_leader"], false);
    assert!(
        body["last_error"]
            .as_str()
            .unwrap()
            .contains("refusing to elect")
    );
}
