//! Benchmark: what the observability mesh (GSP-113) costs a lease node, with the real
//! coordinator binary, a real etcd and real mTLS on loopback.
//!
//! N coordinators (5 by default) elect through one etcd (ttl 3 s). First without
//! `cluster.observability`, then with the mesh at `interval: 1s`: each process's CPU time (as a
//! share of one core) and the bytes it moved through syscalls per second over a window, once
//! the mesh shows every node on n1's `/fleet`. The difference is the mesh's cost per node per
//! round (its rounds are 1 s). Every node runs a shim with one per-second EveryNode job, so the
//! summaries change every round (the worst case for the body: no 304s); with `quiet` no shim
//! runs, so a steady round is a conditional request and a bodyless 304 per peer.
//!
//! Run: `cargo run --release -p cronstable-tests --example mesh_cost [-- WINDOW_SECS N [quiet]]`

use std::path::Path;
use std::time::Duration;

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, fleet};
use cronstable_tests::lease::{Store, lease_mesh, start_lease_node};
use cronstable_tests::usage::measure;
use cronstable_tests::{Coordinator, Proc, start_shim, wait_for};

fn shim(dir: &Path, node: &Coordinator, i: usize) -> Proc {
    let tab = dir.join(format!("beat-{i}.crontab"));
    std::fs::write(
        &tab,
        "# cronstable: name=beat clusterPolicy=EveryNode seconds=true\n* * * * * * true\n",
    )
    .unwrap();
    start_shim(&tab, &node.api, &[])
}

/// One [`shim`] per node, or none when `quiet`.
fn shims(dir: &Path, nodes: &[Coordinator], quiet: bool) -> Vec<Proc> {
    if quiet {
        return Vec::new();
    }
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| shim(dir, n, i))
        .collect()
}

fn report(label: &str, numbers: &[(f64, f64)]) -> (f64, f64) {
    let n = numbers.len() as f64;
    let cpu = numbers.iter().map(|x| x.0).sum::<f64>() / n;
    let max = numbers.iter().map(|x| x.0).fold(0.0, f64::max);
    let bytes = numbers.iter().map(|x| x.1).sum::<f64>() / n;
    println!("| {label} | {cpu:.2} % | {max:.2} % | {bytes:.0} B |");
    (cpu, bytes)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let window = Duration::from_secs(args.next().and_then(|s| s.parse().ok()).unwrap_or(20));
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let quiet = args.next().as_deref() == Some("quiet");
    let etcd = cronstable_tests::etcd::Etcd::start();
    let backend = format!(
        "  backend: etcd\n  etcd:\n    endpoints: [\"{}\"]\n    ttl: 3\n",
        etcd.endpoint()
    );
    println!(
        "| {size} etcd nodes, interval 1 s | mean CPU per node | max CPU | bytes per node per second |"
    );
    println!("|---|---|---|---|");

    let plain = {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::Etcd(etcd.endpoint());
        let nodes: Vec<Coordinator> = (0..size)
            .map(|i| start_lease_node(dir.path(), &format!("n{}", i + 1), &store, 3))
            .collect();
        let _shims = shims(dir.path(), &nodes, quiet);
        std::thread::sleep(Duration::from_secs(5));
        let pids: Vec<u32> = nodes.iter().map(|n| n.proc.pid()).collect();
        report("without the mesh", &measure(&pids, window))
    };

    let meshed = {
        let dir = tempfile::tempdir().unwrap();
        let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(size, 140));
        lease_mesh(&files, &backend, &[]);
        let nodes: Vec<Coordinator> = (0..size).map(|i| files.start(i)).collect();
        let _shims = shims(dir.path(), &nodes, quiet);
        wait_for("every node on n1's /fleet", || {
            let v = fleet(nodes[0].web).ok()?;
            let all = v["nodes"].as_array()?;
            (all.len() == size
                && all
                    .iter()
                    .all(|n| n["self"] == true || n["status"] == "reachable"))
            .then_some(())
        });
        // Connections settle into kept-alive polls.
        std::thread::sleep(Duration::from_secs(3));
        let pids: Vec<u32> = nodes.iter().map(|n| n.proc.pid()).collect();
        report("with the mesh", &measure(&pids, window))
    };
    println!(
        "| the mesh's cost | {:.2} % | | {:.0} B per round ({:.0} B per peer) |",
        meshed.0 - plain.0,
        meshed.1 - plain.1,
        (meshed.1 - plain.1) / (size - 1) as f64
    );
}
