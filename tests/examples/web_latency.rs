//! Benchmark: `GET /jobs` and `GET /metrics` latency with 1,000 registered jobs (issue 6
//! target: p99 <= 5 ms), and the dashboard's page weight (target <= 150 KB).
//!
//! A release coordinator and shim run 1,000 per-minute jobs; the benchmark waits until the
//! first minute's runs are in the ledger (so `/jobs` summarises real history and `/metrics`
//! carries a few thousand series), then times sequential requests, each on a new loopback
//! connection as a scraper or a dashboard poll makes them.
//!
//! Run: `cargo run --release -p cronstable-tests --example web_latency [-- REQUESTS]`

// Real processes on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::time::{Duration, Instant};

use cronstable_tests::{Coordinator, http, start_shim};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn measure(web: std::net::SocketAddr, path: &str, requests: usize) -> (usize, Vec<Duration>) {
    let mut times = Vec::with_capacity(requests);
    let mut bytes = 0;
    for _ in 0..requests {
        let t = Instant::now();
        let r = http(web, "GET", path).unwrap();
        times.push(t.elapsed());
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        bytes = r.body.len();
    }
    times.sort();
    (bytes, times)
}

fn main() {
    let requests: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().unwrap();
    let crontab = dir.path().join("crontab");
    let jobs: String = (0..1000)
        .map(|i| format!("# cronstable: name=job-{i:04}\n* * * * * true\n"))
        .collect();
    std::fs::write(&crontab, jobs).unwrap();
    let coordinator = Coordinator::start(dir.path());
    let _shim = start_shim(&crontab, &coordinator.api, &[]);
    // Every job gets a finished run within two minutes on a quiet machine; on a loaded one the
    // shim cannot start all 1,000 within its lateness bound, and the late ones are reported
    // missed. Either way the ledger holds a firing of every job by then.
    println!("waiting up to 150 s for a finished run of every one of the 1,000 jobs...");
    let deadline = Instant::now() + Duration::from_secs(150);
    let count = |body: &str, prefix: &str| body.lines().filter(|l| l.starts_with(prefix)).count();
    let (finished, missed) = loop {
        let body = http(coordinator.web, "GET", "/metrics").unwrap().body;
        let finished = count(&body, "cronstable_job_run_duration_seconds_count");
        let missed = count(&body, "cronstable_job_missed_firings_total{");
        if finished >= 1000 || (Instant::now() >= deadline && finished >= 500) {
            break (finished, missed);
        }
        assert!(
            Instant::now() < deadline,
            "only {finished} jobs had a finished run after 150 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    println!("{finished} jobs have a finished run, {missed} a missed firing");
    for path in ["/jobs", "/metrics", "/cluster"] {
        // Warm up: the first /jobs parses the schedules.
        let _ = measure(coordinator.web, path, 20);
        let (bytes, t) = measure(coordinator.web, path, requests);
        println!(
            "GET {path:<9} {requests} requests, body {bytes} B: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            percentile(&t, 0.50).as_secs_f64() * 1e3,
            percentile(&t, 0.99).as_secs_f64() * 1e3,
            t.last().unwrap().as_secs_f64() * 1e3,
        );
    }
    // Cold: the answer after something changed, which no cache can serve. A manual run of one
    // job appends ledger records; once `/jobs/{name}` (never cached) shows it finished, the next
    // `/jobs` and `/metrics` must be built afresh.
    let cold_runs = 50;
    let (mut jobs_cold, mut metrics_cold) = (Vec::new(), Vec::new());
    for i in 0..cold_runs {
        let name = format!("job-{i:04}");
        let manual_finished = || {
            let r = http(coordinator.web, "GET", &format!("/jobs/{name}")).unwrap();
            r.json()["history"].as_array().is_some_and(|h| {
                h.iter()
                    .any(|r| r["kind"] == "manual" && r["event"] == "finished")
            })
        };
        assert!(!manual_finished(), "{name} has a manual run already");
        let r = http(coordinator.web, "POST", &format!("/jobs/{name}/start")).unwrap();
        assert!(r.status < 300, "start {name}: {}", r.body);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !manual_finished() {
            assert!(
                Instant::now() < deadline,
                "the manual run of {name} did not finish"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        for (path, times) in [("/jobs", &mut jobs_cold), ("/metrics", &mut metrics_cold)] {
            let t = Instant::now();
            let r = http(coordinator.web, "GET", path).unwrap();
            times.push(t.elapsed());
            assert_eq!(r.status, 200);
        }
    }
    for (path, mut t) in [("/jobs", jobs_cold), ("/metrics", metrics_cold)] {
        t.sort();
        println!(
            "GET {path:<9} right after a change ({cold_runs} requests, rebuilt): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            percentile(&t, 0.50).as_secs_f64() * 1e3,
            percentile(&t, 0.99).as_secs_f64() * 1e3,
            t.last().unwrap().as_secs_f64() * 1e3,
        );
    }
    let page = ["/", "/assets/app.js", "/assets/app.css"]
        .iter()
        .map(|p| http(coordinator.web, "GET", p).unwrap().body.len())
        .sum::<usize>();
    println!(
        "dashboard page weight: {page} B ({:.1} KB) in 3 same-origin requests",
        page as f64 / 1024.0
    );
}
