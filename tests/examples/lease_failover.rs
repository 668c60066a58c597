//! Benchmark: lease failover with the real binaries. Three coordinators contend on one store;
//! each trial SIGKILLs the holder and times how long until `GET /cluster` on a survivor says
//! `is_leader`, then SIGTERMs the new holder (a graceful stop releases the lease) and times the
//! next takeover. Polls every 20 ms, so figures are ±20 ms. Before each signal it waits a
//! part of a round (ttl/3) that differs per signal, so the signal lands at a random phase of the
//! survivors' round cadence instead of right after the round that found the leader.
//!
//! Run: `cargo run --release -p cronstable-tests --example lease_failover [-- TRIALS]`

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cronstable_tests::PATIENCE;
use cronstable_tests::etcd::Etcd;
use cronstable_tests::lease::{Store, start_lease_node, wait_one_leader};

/// A part of one round (ttl/3) that spreads successive calls over the whole round (the
/// golden-ratio sequence), so the trials sample every phase.
fn next_phase(ttl: u64) -> Duration {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let frac = (f64::from(n) * 0.618_033_988_75).fract();
    Duration::from_secs(ttl).div_f64(3.0).mul_f64(frac)
}

fn trial(store: &Store, ttl: u64) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|n| start_lease_node(dir.path(), n, store, ttl))
        .collect();
    let webs =
        |n: &[cronstable_tests::Coordinator]| n.iter().map(|c| c.web).collect::<Vec<SocketAddr>>();
    let (first, _) = wait_one_leader(&webs(&nodes), PATIENCE).expect("a leader");
    let killed = nodes.remove(first);
    std::thread::sleep(next_phase(ttl));
    let t = Instant::now();
    killed.proc.signal(9);
    let (second, _) = wait_one_leader(&webs(&nodes), PATIENCE).expect("a leader after SIGKILL");
    let after_kill = t.elapsed();
    drop(killed);
    let stopped = nodes.remove(second);
    std::thread::sleep(next_phase(ttl));
    let t = Instant::now();
    stopped.proc.signal(15);
    wait_one_leader(&webs(&nodes), PATIENCE).expect("a leader after SIGTERM");
    let after_stop = t.elapsed();
    drop(stopped);
    (after_kill, after_stop)
}

fn summary(label: &str, ttl: u64, mut v: Vec<Duration>) {
    v.sort();
    let s = |d: Duration| d.as_secs_f64();
    println!(
        "| {label} | {} | {:.2} s | {:.2} s | {:.2} s | {:.2}×ttl |",
        v.len(),
        s(v[0]),
        s(v[v.len() / 2]),
        s(v[v.len() - 1]),
        s(v[v.len() - 1]) / ttl as f64
    );
}

fn main() {
    let trials: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let store_dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start();
    println!("| store, ttl, event | trials | min | median | max | max / ttl |");
    println!("|---|---|---|---|---|---|");
    for (name, store, ttl) in [
        (
            "filesystem",
            Store::Filesystem(store_dir.path().to_owned()),
            3,
        ),
        (
            "filesystem",
            Store::Filesystem(store_dir.path().join("t6")),
            6,
        ),
        ("etcd", Store::Etcd(etcd.endpoint()), 3),
        ("etcd", Store::Etcd(etcd.endpoint()), 6),
    ] {
        let (mut kills, mut stops) = (Vec::new(), Vec::new());
        for _ in 0..trials {
            let (k, s) = trial(&store, ttl);
            kills.push(k);
            stops.push(s);
        }
        summary(&format!("{name}, ttl {ttl} s, SIGKILL"), ttl, kills);
        summary(&format!("{name}, ttl {ttl} s, graceful stop"), ttl, stops);
    }
}
