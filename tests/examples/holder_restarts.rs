//! Benchmark: per-second Leader firings missed and run twice while the lease holder's
//! coordinator is restarted again and again, with the real binaries on a filesystem store and
//! on a real etcd, without catch-up and with `catchUp: all` (a 10 s window, a 5 s start
//! deadline).
//!
//! Three coordinators (ttl 3 s), a shim beside each, all with one per-second Leader job that
//! appends its node and nominal instant to one file
//! ([`cronstable_tests::per_second_leader_job`]). Every 10 s the holder's coordinator gets
//! SIGTERM (a graceful handover) or SIGKILL, and is started again on the same config and ports;
//! its shim stays up and reconnects. From the job's file, never from the system under test:
//! the nominal instants of the measured window that no node ran (missed) and those run more
//! than once (doubled). The window runs from the first restart to 10 s after the last.
//!
//! Run: `cargo run --release -p cronstable-tests --example holder_restarts [-- RESTARTS
//! [catch-up|plain|both [SIGTERM|SIGKILL]]]` (5 of each signal on each store, both ways, by
//! default). Each missed instant is named on stderr, with its claim on a filesystem store.

use std::path::PathBuf;
use std::time::Duration;

use cronstable_tests::etcd::Etcd;
use cronstable_tests::lease::{Store, start_lease_node, wait_one_leader};
use cronstable_tests::{
    Coordinator, PATIENCE, Proc, now_ms, per_second_leader_job_with, per_second_runs, start_shim,
};

/// The job's catch-up annotation words, when measured with catch-up.
const CATCH_UP: &str = "catchUp=all catchUpWindow=10s startingDeadline=5s";

struct Cluster {
    nodes: Vec<Coordinator>,
    shims: Vec<Proc>,
    /// The logs of the coordinators stopped so far.
    gone: Vec<String>,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

fn cluster(store: &Store, annotations: &str) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let (crontab, out) = per_second_leader_job_with(dir.path(), annotations);
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
        shims,
        gone: Vec::new(),
        out,
        _dir: dir,
    }
}

/// What one measurement counted over its window of nominal instants.
struct Counted {
    instants: usize,
    missed: usize,
    doubled: usize,
    caught_up: usize,
}

/// `restarts` restarts of the holder with `signal`, 10 s apart.
fn measure(store: &Store, signal: i32, restarts: usize, annotations: &str) -> Counted {
    let mut c = cluster(store, annotations);
    let webs = |c: &Cluster| c.nodes.iter().map(|n| n.web).collect::<Vec<_>>();
    wait_one_leader(&webs(&c), PATIENCE).expect("a leader");
    std::thread::sleep(Duration::from_secs(5));
    let from = now_ms() / 1000 + 1;
    for _ in 0..restarts {
        let (holder, _) = wait_one_leader(&webs(&c), PATIENCE).expect("a leader");
        let mut old = c.nodes.remove(holder);
        old.proc.signal(signal);
        old.proc.wait_exit();
        c.gone.push(old.proc.log());
        let (config, api, web) = (old.config.clone(), old.api.clone(), old.web);
        drop(old);
        let again = Coordinator::start_with(config, api, web);
        c.nodes.insert(holder, again);
        std::thread::sleep(Duration::from_secs(10));
    }
    let to = now_ms() / 1000 - 2;
    // Let the last firings of the window finish and write their lines.
    std::thread::sleep(Duration::from_secs(2));
    let seen = per_second_runs(&c.out);
    let window = from..=to;
    // On stderr, for whoever wants to know why: each missed instant, and its claim where the
    // store is a directory.
    for t in window.clone().filter(|t| !seen.contains_key(t)) {
        let claim = match store {
            Store::Filesystem(path) => {
                let file = path.join(format!("default/cluster/claims/{}@tick.json", t * 1000));
                std::fs::read_to_string(&file).unwrap_or_else(|_| "no claim".to_owned())
            }
            Store::Etcd(_) => "(etcd: not read)".to_owned(),
        };
        eprintln!("missed {t} (+{} s): {claim}", t - from);
        let logs = c
            .gone
            .iter()
            .cloned()
            .chain(c.nodes.iter().map(|n| n.proc.log()));
        let logs = logs.chain(c.shims.iter().map(Proc::log));
        for (i, log) in logs.enumerate() {
            let about = |l: &&str| {
                l.contains(&(t * 1000).to_string())
                    || std::env::var_os("HOLDER_RESTARTS_LOGS").is_some()
                        && (l.contains("catch") || l.contains("lease") || l.contains("gave up"))
            };
            for line in log.lines().filter(about) {
                eprintln!("  log {i}: {line}");
            }
        }
    }
    let inside = || seen.iter().filter(|(t, _)| window.contains(t));
    Counted {
        instants: window.clone().count(),
        missed: window.clone().filter(|t| !seen.contains_key(t)).count(),
        doubled: inside().filter(|(_, (n, _))| *n > 1).count(),
        caught_up: inside().map(|(_, (_, c))| c).sum(),
    }
}

fn main() {
    let restarts: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let ways: &[(&str, &str)] = match std::env::args().nth(2).as_deref() {
        Some("catch-up") => &[("all, 10 s", CATCH_UP)],
        Some("plain") => &[("none", "")],
        _ => &[("none", ""), ("all, 10 s", CATCH_UP)],
    };
    let store_dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start();
    println!("| store | signal | catchUp | instants | missed | doubled | caught up |");
    println!("|---|---|---|---|---|---|---|");
    for (way, annotations) in ways {
        let signals = [("SIGTERM", 15), ("SIGKILL", 9)];
        let only = std::env::args().nth(3);
        for (name, signal) in signals
            .into_iter()
            .filter(|(n, _)| only.as_deref().is_none_or(|o| o == *n))
        {
            let path = store_dir
                .path()
                .join(format!("{name}-{}", annotations.len()));
            let stores = [
                ("filesystem", Store::Filesystem(path)),
                ("etcd", Store::Etcd(etcd.endpoint())),
            ];
            for (store_name, store) in stores {
                let c = measure(&store, signal, restarts, annotations);
                println!(
                    "| {store_name} | {name} | {way} | {} | {} | {} | {} |",
                    c.instants, c.missed, c.doubled, c.caught_up
                );
            }
        }
    }
}
