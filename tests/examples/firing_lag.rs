//! Benchmark: firing lag and idle memory, with the real binaries.
//!
//! 1. Firing lag: a per-second job records the time its own first instruction runs; the lag is
//!    that minus the job's nominal instant (`CRONSTABLE_SCHEDULED_AT`). Reports p50/p99/max.
//! 2. Idle resident memory of the coordinator and the shim with 1,000 jobs loaded.
//!
//! Run: `cargo run --release -p cronstable-tests --example firing_lag [-- FIRINGS]`

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::time::Duration;

use cronstable_tests::{Coordinator, lines, rss_kib, start_shim};

fn main() {
    let firings: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();

    // --- firing lag
    let out = dir.path().join("lag");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=lag clusterPolicy=Leader seconds=true\n\
             * * * * * * echo \"$(date +\\%s.\\%N) $CRONSTABLE_SCHEDULED_AT\" >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&crontab, &coordinator.api, &[]);
    eprintln!("collecting {firings} firings of a per-second job…");
    let runs = wait_for_long(|| Some(lines(&out)).filter(|l| l.len() > firings), firings);
    drop(shim);
    // The first firing may race the shim's registration; measure the steady state.
    let mut lags: Vec<f64> = runs[1..=firings]
        .iter()
        .map(|l| {
            let (ran, nominal) = l.split_once(' ').unwrap();
            let ran: f64 = ran.parse().unwrap();
            let nominal = chrono::DateTime::parse_from_rfc3339(nominal).unwrap();
            (ran - nominal.timestamp_millis() as f64 / 1000.0) * 1000.0
        })
        .collect();
    lags.sort_by(f64::total_cmp);
    let pct = |p: f64| lags[((lags.len() as f64 * p) as usize).min(lags.len() - 1)];
    println!(
        "firing lag over {} firings: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lags.len(),
        pct(0.5),
        pct(0.99),
        lags[lags.len() - 1]
    );

    // --- idle memory with 1,000 jobs
    let big = dir.path().join("crontab-1000");
    let mut text = String::new();
    for i in 0..1000 {
        text.push_str(&format!(
            "# cronstable: name=job-{i:04}\n{} {} 1 1 * /bin/true\n",
            i % 60,
            i % 24
        ));
    }
    std::fs::write(&big, text).unwrap();
    drop(coordinator);
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&big, &coordinator.api, &[]);
    shim.wait_log("registered with the coordinator");
    std::thread::sleep(Duration::from_secs(3));
    println!(
        "idle RSS with 1000 jobs: coordinator {:.1} MiB, shim {:.1} MiB",
        rss_kib(coordinator.proc.pid()) as f64 / 1024.0,
        rss_kib(shim.pid()) as f64 / 1024.0
    );
}

fn wait_for_long<T>(mut check: impl FnMut() -> Option<T>, firings: usize) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(firings as u64 * 2 + 30);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "not enough firings");
        std::thread::sleep(Duration::from_millis(200));
    }
}
