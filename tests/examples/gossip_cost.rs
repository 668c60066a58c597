//! Benchmark: what gossip costs per node, and how fast leadership fails over, with the real
//! coordinator binary over real mTLS on loopback.
//!
//! 1. Per-node CPU: N coordinators (N = 3, 5, 9, 25 by default), `interval: 1s`, converged
//!    with `n1` leading; then each process's CPU time (utime + stime from `/proc/<pid>/stat`)
//!    over a measurement window, as a share of one core, and the bytes each process moved
//!    through its sockets per round (`rchar + wchar`; a steady node logs nothing).
//! 2. Failover: SIGKILL the leader of a 3-node cluster and time until a survivor's `/cluster`
//!    names the new leader, as a multiple of the interval; repeated, each time restarting the
//!    killed node and waiting for it to lead again.
//!
//! Run: `cargo run --release -p cronstable-tests --example gossip_cost [-- WINDOW_SECS SIZES...]`

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::time::{Duration, Instant};

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster};
use cronstable_tests::usage::{clock_ticks_per_sec, cpu_ticks, io_bytes};
use cronstable_tests::{Coordinator, wait_for};

fn converged(nodes: &[Coordinator], leader: &str) {
    for n in nodes {
        wait_for(&format!("{leader} elected"), || {
            cluster(n.web).filter(|v| v["leader"] == leader && v["quorate"] == true)
        });
    }
}

fn per_node_cpu(size: usize, window: Duration) -> (f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(size, 80 + size as u8));
    let nodes: Vec<_> = (0..size).map(|i| files.start(i)).collect();
    converged(&nodes, "n1");
    // Let connections settle into the keep-alive 304 steady state.
    std::thread::sleep(Duration::from_secs(3));
    let before: Vec<u64> = nodes.iter().map(|n| cpu_ticks(n.proc.pid())).collect();
    let io_before: Vec<u64> = nodes.iter().map(|n| io_bytes(n.proc.pid())).collect();
    let start = Instant::now();
    std::thread::sleep(window);
    let elapsed = start.elapsed().as_secs_f64();
    let hz = clock_ticks_per_sec() as f64;
    let shares: Vec<f64> = nodes
        .iter()
        .zip(&before)
        .map(|(n, b)| (cpu_ticks(n.proc.pid()) - b) as f64 / hz / elapsed * 100.0)
        .collect();
    let mean = shares.iter().sum::<f64>() / shares.len() as f64;
    let max = shares.iter().cloned().fold(0.0, f64::max);
    // Rounds are 1 s, so bytes per second is bytes per round.
    let bytes: f64 = nodes
        .iter()
        .zip(&io_before)
        .map(|(n, b)| (io_bytes(n.proc.pid()) - b) as f64 / elapsed)
        .sum::<f64>()
        / nodes.len() as f64;
    (mean, max, bytes)
}

fn failover(rounds: usize) -> Vec<f64> {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 79));
    let mut nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    let mut out = Vec::new();
    for _ in 0..rounds {
        converged(&nodes, "n1");
        // Settle a little so the kill lands at a random point of the round.
        std::thread::sleep(Duration::from_millis(1_300 + 137 * out.len() as u64));
        let t0 = Instant::now();
        nodes[0].proc.signal(9);
        wait_for("n2 to lead", || {
            cluster(nodes[1].web).filter(|v| v["leader"] == "n2" && v["quorate"] == true)
        });
        out.push(t0.elapsed().as_secs_f64());
        nodes[0].proc.wait_exit();
        nodes[0] = files.start(0);
    }
    out
}

fn main() {
    let mut args = std::env::args().skip(1);
    let window = Duration::from_secs(args.next().and_then(|s| s.parse().ok()).unwrap_or(30));
    let sizes: Vec<usize> = args.filter_map(|s| s.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![3, 5, 9, 25]
    } else {
        sizes
    };

    println!(
        "| N | mean CPU per node | max CPU of any node | bytes per node per round | per peer |"
    );
    println!("|---|---|---|---|---|");
    for n in sizes {
        let (mean, max, bytes) = per_node_cpu(n, window);
        println!(
            "| {n} | {mean:.2} % | {max:.2} % | {bytes:.0} B | {:.0} B |",
            bytes / (n - 1) as f64
        );
    }

    let f = failover(8);
    let mut sorted = f.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "\nfailover after SIGKILL of the leader (interval 1 s), {} runs: min {:.2} s, median {:.2} s, max {:.2} s",
        f.len(),
        sorted[0],
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1]
    );
}
