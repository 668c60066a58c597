//! Benchmark: how long Leader firings stop at the edges of a node's life on gossip, with the
//! real binaries over real mTLS on loopback (lifecycle issue, defect 3).
//!
//! Three coordinators (`interval: 1s`) and three shims; every shim has the same per-second
//! Leader job, which appends its node, its nominal instant and the wall time to one file. From
//! that file, never from the system under test:
//!
//! 1. **Cold start**: all six processes started together; time from the first start to the
//!    first Leader run, in intervals. Repeated with a fresh cluster each time.
//! 2. **Rolling restart**: as a deploy does it, each node in turn gets SIGTERM (coordinator and
//!    shim), is started again, and the next waits until every node shows it `agreed`. The
//!    longest gap between two Leader runs around each restart, in intervals (1 = none missed).
//! 3. **Leader SIGKILL**: the leading node's coordinator and shim are killed; the gap between
//!    the last Leader run before and the first after, in intervals.
//!
//! Double runs (one nominal instant run twice) are counted throughout.
//!
//! Run: `cargo run --release -p cronstable-tests --example lifecycle_gaps [-- COLD ROLLING KILLS]`
//! (samples of each; 0 skips that part; default 5 2 8).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster};
use cronstable_tests::{Coordinator, Proc, start_shim, wait_for};

/// One Leader run: node, nominal instant, wall-clock start (ms).
#[derive(Debug, Clone)]
struct Run {
    nominal: String,
    at_ms: i64,
}

fn now_ms() -> i64 {
    cronstable_coordinator::clock::now_ms()
}

fn runs(path: &Path) -> Vec<Run> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut v: Vec<Run> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let _node = f.next()?;
            let nominal = f.next()?.to_owned();
            let ns: i64 = f.next()?.parse().ok()?;
            Some(Run {
                nominal,
                at_ms: ns / 1_000_000,
            })
        })
        .collect();
    v.sort_by_key(|r| r.at_ms);
    v
}

fn doubles(path: &Path) -> usize {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for r in runs(path) {
        *seen.entry(r.nominal).or_default() += 1;
    }
    seen.values().filter(|&&n| n > 1).count()
}

/// The longest gap between consecutive runs that overlaps `[from, to]`, in seconds.
fn longest_gap(path: &Path, from: i64, to: i64) -> f64 {
    let r = runs(path);
    r.windows(2)
        .filter(|w| w[1].at_ms >= from && w[0].at_ms <= to)
        .map(|w| (w[1].at_ms - w[0].at_ms) as f64 / 1000.0)
        .fold(0.0, f64::max)
}

/// Firings missed in `[from, to]`: each gap of g seconds between consecutive runs lost g − 1
/// per-second firings.
fn missed(path: &Path, from: i64, to: i64) -> i64 {
    let r = runs(path);
    r.windows(2)
        .filter(|w| w[1].at_ms >= from && w[0].at_ms <= to)
        .map(|w| ((w[1].at_ms - w[0].at_ms) as f64 / 1000.0).round() as i64 - 1)
        .filter(|&m| m > 0)
        .sum()
}

struct Node {
    coordinator: Option<Coordinator>,
    shim: Option<Proc>,
}

struct Bench {
    files: ClusterFiles,
    crontab: PathBuf,
    out: PathBuf,
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl Bench {
    fn new(subnet: u8) -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, subnet));
        let (crontab, out) = cronstable_tests::per_second_leader_job(dir.path());
        Bench {
            files,
            crontab,
            out,
            nodes: Vec::new(),
            _dir: dir,
        }
    }

    fn start(&mut self, i: usize) {
        let c = self.files.start(i);
        let shim = start_shim(&self.crontab, &c.api, &[]);
        let node = Node {
            coordinator: Some(c),
            shim: Some(shim),
        };
        if i < self.nodes.len() {
            self.nodes[i] = node;
        } else {
            self.nodes.push(node);
        }
    }

    fn stop(&mut self, i: usize, sig: i32) {
        let n = &mut self.nodes[i];
        if let Some(mut s) = n.shim.take() {
            s.signal(sig);
            s.wait_exit();
        }
        if let Some(mut c) = n.coordinator.take() {
            c.proc.signal(sig);
            c.proc.wait_exit();
        }
    }

    fn all_agreed(&self) {
        for n in self.nodes.iter().filter_map(|n| n.coordinator.as_ref()) {
            wait_for("every peer agreed and a leader", || {
                cluster(n.web).filter(|v| {
                    v["leader"].is_string()
                        && v["peers"]
                            .as_array()
                            .is_some_and(|p| p.iter().all(|p| p["status"] == "agreed"))
                })
            });
        }
    }

    fn leader(&self) -> usize {
        wait_for("a leader", || {
            self.nodes.iter().position(|n| {
                n.coordinator
                    .as_ref()
                    .and_then(|c| cluster(c.web))
                    .is_some_and(|v| v["is_leader"] == true)
            })
        })
    }
}

fn cold_start(times: usize) -> Vec<f64> {
    (0..times)
        .map(|k| {
            let mut b = Bench::new(110 + k as u8);
            let t0 = now_ms();
            for i in 0..3 {
                b.start(i);
            }
            wait_for("the first Leader run", || runs(&b.out).first().cloned());
            let first = runs(&b.out)[0].at_ms;
            (first - t0) as f64 / 1000.0
        })
        .collect()
}

fn rolling(rounds: usize) -> (Vec<f64>, Vec<i64>, usize) {
    let mut b = Bench::new(120);
    for i in 0..3 {
        b.start(i);
    }
    b.all_agreed();
    std::thread::sleep(Duration::from_secs(3));
    let mut gaps = Vec::new();
    let mut lost = Vec::new();
    for _ in 0..rounds {
        for i in 0..3 {
            let from = now_ms();
            b.stop(i, 15);
            b.start(i);
            b.all_agreed();
            // Past the restart: the gaps it causes have closed by then.
            std::thread::sleep(Duration::from_secs(4));
            gaps.push(longest_gap(&b.out, from, now_ms()));
            lost.push(missed(&b.out, from, now_ms()));
        }
    }
    (gaps, lost, doubles(&b.out))
}

fn leader_kill(times: usize) -> (Vec<f64>, usize) {
    let mut b = Bench::new(121);
    for i in 0..3 {
        b.start(i);
    }
    let mut gaps = Vec::new();
    for k in 0..times {
        b.all_agreed();
        // The restarted node rejoins as a follower (leadership is sticky), so each sample is
        // one failover of whichever node leads now.
        // Land the kill at a different point of the round each time.
        std::thread::sleep(Duration::from_millis(2_300 + 137 * k as u64));
        let l = b.leader();
        let from = now_ms();
        b.stop(l, 9);
        wait_for("a run after the kill", || {
            runs(&b.out).iter().any(|r| r.at_ms > from).then_some(())
        });
        std::thread::sleep(Duration::from_secs(1));
        gaps.push(longest_gap(&b.out, from, now_ms()));
        b.start(l);
    }
    (gaps, doubles(&b.out))
}

fn summary(name: &str, v: &[f64]) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    println!(
        "{name}: {} samples (interval 1 s): min {:.2}, median {:.2}, max {:.2} intervals; all {:?}",
        s.len(),
        s[0],
        s[s.len() / 2],
        s[s.len() - 1],
        v.iter()
            .map(|x| (x * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    );
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse::<usize>().ok());
    let cold = args.next().unwrap_or(5);
    let roll = args.next().unwrap_or(2);
    let kills = args.next().unwrap_or(8);
    if cold > 0 {
        summary("cold start to the first Leader run", &cold_start(cold));
    }
    if roll > 0 {
        let (gaps, lost, d) = rolling(roll);
        summary("rolling restart, longest Leader-run gap per restart", &gaps);
        println!("  per-second Leader firings missed per restart (n1, n2, n3, ...): {lost:?}");
        println!("  double runs during the rolling restarts: {d}");
    }
    if kills > 0 {
        let (gaps, d) = leader_kill(kills);
        summary("leader SIGKILL, Leader-run gap", &gaps);
        println!("  double runs during the kills: {d}");
    }
}
