//! Benchmark: one shim registering a large job set with its coordinator, with the real
//! binaries: how long from the shim's start until the coordinator has the set, and both
//! processes' resident memory once idle.
//!
//! Run: `cargo run --release -p cronstable-tests --example job_set_memory [-- JOBS]` (10,000 by
//! default). Every job is yearly, so nothing fires while it is measured.

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::time::{Duration, Instant};

use cronstable_tests::{Coordinator, rss_kib, start_shim, status_kib};

fn rss_mib(pid: u32) -> f64 {
    rss_kib(pid) as f64 / 1024.0
}

/// Resident memory split into the heap and stacks (anonymous) and the mapped binary (file).
fn split(pid: u32) -> String {
    let mib = |key| status_kib(pid, key) as f64 / 1024.0;
    format!(
        "anonymous {:.1} MiB, file {:.1} MiB",
        mib("RssAnon"),
        mib("RssFile")
    )
}

fn main() {
    let jobs: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let crontab = dir.path().join("crontab");
    let mut text = String::new();
    for i in 0..jobs {
        text.push_str(&format!(
            "# cronstable: name=job-{i:05}\n{} {} {} {} * /bin/true\n",
            i % 60,
            (i / 60) % 24,
            1 + i % 28,
            1 + i % 12
        ));
    }
    std::fs::write(&crontab, text).unwrap();
    let coordinator = Coordinator::start(dir.path());
    std::thread::sleep(Duration::from_secs(1));
    let empty = rss_mib(coordinator.proc.pid());
    let empty_split = split(coordinator.proc.pid());
    let started = Instant::now();
    let shim = start_shim(&crontab, &coordinator.api, &[]);
    shim.wait_log("registered with the coordinator");
    let registered = started.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    // The shim's own timestamps: the job file read and parsed, then the registration answered.
    for line in shim.log().lines() {
        if line.contains("shim started") || line.contains("registered with the coordinator") {
            println!("  shim: {}", line.chars().take(160).collect::<String>());
        }
    }
    println!(
        "{jobs} jobs: registered {:.0} ms after the shim started; idle RSS: coordinator {:.1} MiB \
         ({empty:.1} MiB before), shim {:.1} MiB",
        registered.as_secs_f64() * 1000.0,
        rss_mib(coordinator.proc.pid()),
        rss_mib(shim.pid())
    );
    println!(
        "  coordinator before: {empty_split}; after: {}; shim: {}",
        split(coordinator.proc.pid()),
        split(shim.pid())
    );
}
