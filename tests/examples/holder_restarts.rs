//! Benchmark: per-second Leader firings missed and run twice while the lease holder's
//! coordinator is restarted again and again, with the real binaries on a filesystem store and
//! on a real etcd (issue 45's measurement, the figures without catch-up).
//!
//! Three coordinators (ttl 3 s), a shim beside each, all with one per-second Leader job that
//! appends its node and nominal instant to one file
//! ([`cronstable_tests::per_second_leader_job`]). Every 10 s the holder's coordinator gets
//! SIGTERM (a graceful handover) or SIGKILL, and is started again on the same config and ports;
//! its shim stays up and reconnects. From the job's file, never from the system under test:
//! the nominal instants of the measured window that no node ran (missed) and those run more
//! than once (doubled). The window runs from the first restart to 10 s after the last.
//!
//! Run: `cargo run --release -p cronstable-tests --example holder_restarts [-- RESTARTS]`
//! (5 of each signal on each store by default).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cronstable_tests::etcd::Etcd;
use cronstable_tests::lease::{Store, start_lease_node, wait_one_leader};
use cronstable_tests::{Coordinator, PATIENCE, Proc, now_ms, per_second_leader_job, start_shim};

/// Every run the job recorded: nominal instant (RFC 3339, whole seconds) → how many runs.
fn runs(path: &Path) -> BTreeMap<i64, usize> {
    let mut seen = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let Some(nominal) = line.split_whitespace().nth(1) else {
            continue;
        };
        if let Ok(t) = chrono::DateTime::parse_from_rfc3339(nominal) {
            *seen.entry(t.timestamp()).or_default() += 1;
        }
    }
    seen
}

struct Cluster {
    nodes: Vec<Coordinator>,
    _shims: Vec<Proc>,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

fn cluster(store: &Store) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let (crontab, out) = per_second_leader_job(dir.path());
    let nodes: Vec<Coordinator> = ["a", "b", "c"]
        .iter()
        .map(|n| start_lease_node(dir.path(), n, store, 3))
        .collect();
    let shims = nodes
        .iter()
        .map(|c| start_shim(&crontab, &c.api, &[]))
        .collect();
    Cluster {
        nodes,
        _shims: shims,
        out,
        _dir: dir,
    }
}

/// `restarts` restarts of the holder with `signal`, 10 s apart: (instants in the window,
/// missed, doubled).
fn measure(store: &Store, signal: i32, restarts: usize) -> (usize, usize, usize) {
    let mut c = cluster(store);
    let webs = |c: &Cluster| c.nodes.iter().map(|n| n.web).collect::<Vec<_>>();
    wait_one_leader(&webs(&c), PATIENCE).expect("a leader");
    std::thread::sleep(Duration::from_secs(5));
    let from = now_ms() / 1000 + 1;
    for _ in 0..restarts {
        let (holder, _) = wait_one_leader(&webs(&c), PATIENCE).expect("a leader");
        let mut old = c.nodes.remove(holder);
        old.proc.signal(signal);
        old.proc.wait_exit();
        let (config, api, web) = (old.config.clone(), old.api.clone(), old.web);
        drop(old);
        let again = Coordinator::start_with(config, api, web);
        c.nodes.insert(holder, again);
        std::thread::sleep(Duration::from_secs(10));
    }
    let to = now_ms() / 1000 - 2;
    // Let the last firings of the window finish and write their lines.
    std::thread::sleep(Duration::from_secs(2));
    let seen = runs(&c.out);
    let window = from..=to;
    let missed = window.clone().filter(|t| !seen.contains_key(t)).count();
    let doubled = seen
        .iter()
        .filter(|(t, n)| window.contains(t) && **n > 1)
        .count();
    (window.count(), missed, doubled)
}

fn main() {
    let restarts: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let store_dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start();
    println!("| store | signal | instants | missed | doubled |");
    println!("|---|---|---|---|---|");
    for (name, signal) in [("SIGTERM", 15), ("SIGKILL", 9)] {
        let path = store_dir.path().join(name);
        let stores = [
            ("filesystem", Store::Filesystem(path)),
            ("etcd", Store::Etcd(etcd.endpoint())),
        ];
        for (store_name, store) in stores {
            let (n, missed, doubled) = measure(&store, signal, restarts);
            println!("| {store_name} | {name} | {n} | {missed} | {doubled} |");
        }
    }
}
