//! Benchmark: a rolling restart that never ends, judged by the nominal instants that ran. Three
//! coordinators (ttl 3 s) with a shim beside each, on a filesystem store or a real etcd; two
//! Leader jobs, one per second and one per minute, each appending its name, node, nominal
//! instant and catch-up mark to one file. Every 30 s the next node in turn (a, b, c, a, …) is
//! stopped, coordinator and shim, alternately with SIGTERM and SIGKILL, and started again at
//! once on the same config and ports, as a deploy that goes wrong half of the time does. From
//! the file, never from the system under test: the nominal instants of the measured window that
//! no node ran (missed), those run more than once (doubled), and how many ran as catch-ups. The
//! same runs, logged in the harness format with the nominal instant each ran for, are judged
//! again by `cronstable verify`, whose table follows.
//!
//! Both jobs carry an expectation (`expect.completeWithin` 5 s for the per-second job, 20 s for
//! the per-minute one), and every coordinator posts its `job_expectation` events to a receiver
//! in this program: each `missed` report is compared with the run log (did some run of that
//! instant end within the window?), which gives the false alarms, the misses nobody reported,
//! and the detection latency (the report's `detected_at` after the instant's deadline).
//!
//! On gossip (three coordinators over mTLS on loopback, interval 1 s) nothing is claimed and
//! catch-up is best effort: what a stopped leader may have run in its last moments is taken as
//! run, so there the figures are close to those without.
//!
//! Run: `cargo run --release -p cronstable-tests --example rolling_restarts -- [MINUTES]
//! [filesystem|etcd|gossip] [catch-up|plain]` (30 minutes, filesystem, catch-up by default).

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cronstable_tests::etcd::Etcd;
use cronstable_tests::gossip::{ClusterFiles, ClusterPlan};
use cronstable_tests::lease::{Store, start_lease_node, wait_one_leader};
use cronstable_tests::{Coordinator, PATIENCE, Proc, now_ms, recorder, start_shim};

/// The jobs' `expect.completeWithin`, in seconds.
const TICK_WITHIN: i64 = 5;
const MINUTE_WITHIN: i64 = 20;

/// Nominal instant (Unix s) → (runs, of which catch-ups), per job.
type Seen = BTreeMap<String, BTreeMap<i64, (usize, usize)>>;

/// The jobs' command: a start event in the harness run log (with the nominal instant, so
/// `cronstable verify` judges a catch-up by the instant it caught up), the one-line record, and
/// the end event. Returns (the script, the one-line file, the run log).
fn job_script(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (recorder, out) = recorder(
        dir,
        "$CRONSTABLE_JOB $CRONSTABLE_NODE $CRONSTABLE_SCHEDULED_AT ${CRONSTABLE_CATCH_UP:-0}",
    );
    let log = dir.join("runlog.jsonl");
    let script = dir.join("job.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh
             at=$(date -d \"$CRONSTABLE_SCHEDULED_AT\" +%s%3N)
             id=\"$CRONSTABLE_FIRING_ID-$CRONSTABLE_NODE-$$\"
             ev() {{ echo \"{{\\\"ev\\\":\\\"$1\\\",\\\"job\\\":\\\"$CRONSTABLE_JOB\\\",\\\"node\\\":\\\"$CRONSTABLE_NODE\\\",\\\"runId\\\":\\\"$id\\\",\\\"t\\\":$(date +%s%3N),\\\"scheduledAt\\\":$at}}\" >> {log}; }}
             ev start
             {recorder}
             ev end
",
            log = log.display(),
            recorder = recorder.display(),
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    (script, out, log)
}

fn crontab(dir: &Path, catch_up: bool) -> (PathBuf, PathBuf, PathBuf) {
    let (script, out, log) = job_script(dir);
    let (second, minute) = if catch_up {
        (
            " catchUp=all catchUpWindow=10s startingDeadline=5s",
            " catchUp=all catchUpWindow=5m",
        )
    } else {
        ("", "")
    };
    let tab = dir.join("crontab");
    std::fs::write(
        &tab,
        format!(
            "# cronstable: name=tick clusterPolicy=Leader seconds=true{second}\n\
             # cronstable: expect.completeWithin={TICK_WITHIN}s\n\
             * * * * * * {r}\n\
             # cronstable: name=minute clusterPolicy=Leader{minute}\n\
             # cronstable: expect.completeWithin={MINUTE_WITHIN}s\n\
             * * * * * {r}\n",
            r = script.display()
        ),
    )
    .unwrap();
    (tab, out, log)
}

/// `cronstable verify` over the run log's runs of the instants `from..=to` (Unix s): the jobs
/// file names each job's instants, ε 1 s, and its catch-up window. Returns the report.
fn verify(dir: &Path, log: &Path, from: i64, to: i64, catch_up: bool) -> serde_json::Value {
    let jobs: Vec<serde_json::Value> = [("tick", 1, 10_000), ("minute", 60, 300_000)]
        .iter()
        .map(|&(name, step, window)| {
            let first = (from + step - 1) / step * step;
            serde_json::json!({
                "name": name,
                "start": first * 1000,
                "count": (to - first) / step + 1,
                "intervalMs": step * 1000,
                "epsilonMs": 1000,
                "durationMs": 100,
                "policy": "Leader",
                "ack": {"state": "acked", "at": 0},
                "catchUpWindowMs": if catch_up { window } else { 0 },
            })
        })
        .collect();
    let jobs_file = dir.join("jobs.json");
    std::fs::write(&jobs_file, serde_json::json!({ "jobs": jobs }).to_string()).unwrap();
    // Only the measured instants: a run of an instant before `from` would be a stray.
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let measured: String = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["scheduledAt"].as_i64())
                .is_some_and(|at| (from * 1000..=to * 1000).contains(&at))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let runs_file = dir.join("measured.jsonl");
    std::fs::write(&runs_file, measured).unwrap();
    let out = std::process::Command::new(cronstable_tests::binary("cronstable"))
        .arg("verify")
        .arg("--jobs")
        .arg(&jobs_file)
        .arg("--runs")
        .arg(&runs_file)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "cronstable verify: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn seen(path: &Path) -> Seen {
    let mut seen: Seen = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(job), Some(Ok(t))) = (
            f.first(),
            f.get(2).map(|s| chrono::DateTime::parse_from_rfc3339(s)),
        ) else {
            continue;
        };
        let e = seen
            .entry((*job).to_owned())
            .or_default()
            .entry(t.timestamp())
            .or_default();
        e.0 += 1;
        e.1 += usize::from(f.get(3) == Some(&"1"));
    }
    seen
}

/// (instants, missed, doubled, caught up) of `job` over `from..=to`, its instants every `step` s.
fn judge(seen: &Seen, job: &str, from: i64, to: i64, step: i64) -> (usize, usize, usize, usize) {
    let empty = BTreeMap::new();
    let runs = seen.get(job).unwrap_or(&empty);
    let first = (from + step - 1) / step * step;
    let instants: Vec<i64> = (first..=to).step_by(step as usize).collect();
    let missed_at: Vec<i64> = instants
        .iter()
        .copied()
        .filter(|t| !runs.contains_key(t))
        .collect();
    if !missed_at.is_empty() {
        // Unix seconds, to find in the coordinators' logs (which the run keeps in its dir).
        eprintln!("{job}: missed instants {missed_at:?}");
    }
    let missed = missed_at.len();
    let doubled = instants
        .iter()
        .filter(|t| runs.get(t).is_some_and(|r| r.0 > 1))
        .count();
    let caught: usize = instants
        .iter()
        .filter_map(|t| runs.get(t))
        .map(|r| r.1)
        .sum();
    (instants.len(), missed, doubled, caught)
}

/// Job → instant (Unix ms) → the earliest end of a run of it (Unix ms), from the run log.
fn ends(log: &Path) -> BTreeMap<String, BTreeMap<i64, i64>> {
    let mut out: BTreeMap<String, BTreeMap<i64, i64>> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(job), Some(at), Some(t)) = (
            v["job"].as_str(),
            v["scheduledAt"].as_i64(),
            v["t"].as_i64(),
        ) else {
            continue;
        };
        if v["ev"] == "end" {
            let e = out
                .entry(job.to_owned())
                .or_default()
                .entry(at)
                .or_insert(t);
            *e = (*e).min(t);
        }
    }
    out
}

fn ms_of(v: &serde_json::Value) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(v.as_str()?)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// Prints, per job, the `missed` reports against the run log over `from..=to` (Unix s).
fn judge_expectations(events: &[serde_json::Value], log: &Path, from: i64, to: i64) {
    let ends = ends(log);
    println!("expectations (missed), judged against the run log:");
    println!(
        "| job | instants | missed by the log | reported | false alarms | not reported | \
         detection after the deadline (median / max) | duplicated reports |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (job, step, within) in [("tick", 1, TICK_WITHIN), ("minute", 60, MINUTE_WITHIN)] {
        let first = (from + step - 1) / step * step;
        let instants: Vec<i64> = (first..=to)
            .step_by(step as usize)
            .map(|s| s * 1000)
            .collect();
        let empty = BTreeMap::new();
        let job_ends = ends.get(job).unwrap_or(&empty);
        let truly_missed: Vec<i64> = instants
            .iter()
            .copied()
            .filter(|at| job_ends.get(at).is_none_or(|end| *end > at + within * 1000))
            .collect();
        let mut reported: BTreeMap<i64, i64> = BTreeMap::new();
        let mut duplicated = 0;
        for e in events.iter().filter(|e| e["job"] == job) {
            let (Some(at), Some(found)) = (ms_of(&e["scheduled_at"]), ms_of(&e["detected_at"]))
            else {
                continue;
            };
            if !instants.contains(&at) {
                continue;
            }
            match e["breach"].as_str() {
                Some("missed") => {
                    reported.entry(at).or_insert(found);
                }
                Some("duplicated") => duplicated += 1,
                _ => {}
            }
        }
        let false_alarms: Vec<i64> = reported
            .keys()
            .copied()
            .filter(|at| !truly_missed.contains(at))
            .collect();
        let unreported = truly_missed
            .iter()
            .filter(|at| !reported.contains_key(at))
            .count();
        let mut latency: Vec<i64> = reported
            .iter()
            .filter(|(at, _)| truly_missed.contains(at))
            .map(|(at, found)| found - (at + within * 1000))
            .collect();
        latency.sort_unstable();
        let lat = match (latency.get(latency.len() / 2), latency.last()) {
            (Some(m), Some(x)) => format!("{:.1} s / {:.1} s", *m as f64 / 1e3, *x as f64 / 1e3),
            _ => "-".to_owned(),
        };
        if !false_alarms.is_empty() {
            eprintln!("{job}: false alarms at (Unix ms) {false_alarms:?}");
        }
        println!(
            "| {job} | {} | {} | {} | {} | {unreported} | {lat} | {duplicated} |",
            instants.len(),
            truly_missed.len(),
            reported.len(),
            false_alarms.len(),
        );
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let minutes: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(30);
    let backend = args.next().unwrap_or_else(|| "filesystem".to_owned());
    let catch_up = args.next().as_deref() != Some("plain");
    // Kept after the run: the job's files and every coordinator's log.
    let dir = tempfile::Builder::new()
        .prefix("rolling-restarts-")
        .tempdir()
        .unwrap();
    eprintln!("run directory: {}", dir.path().display());
    let (tab, out, log) = crontab(dir.path(), catch_up);
    let etcd = (backend == "etcd").then(Etcd::start);
    let mut nodes: Vec<Coordinator> = if backend == "gossip" {
        let plan = ClusterPlan::new(3, 79);
        let files = ClusterFiles::write(dir.path(), &plan);
        (0..3).map(|i| files.start(i)).collect()
    } else {
        let store = match &etcd {
            Some(e) => Store::Etcd(e.endpoint()),
            None => Store::Filesystem(dir.path().join("store")),
        };
        ["a", "b", "c"]
            .iter()
            .map(|n| start_lease_node(dir.path(), n, &store, 3))
            .collect()
    };
    let mut shims: Vec<Proc> = nodes
        .iter()
        .map(|c| start_shim(&tab, &c.api, &[]))
        .collect();
    let webs: Vec<_> = nodes.iter().map(|n| n.web).collect();
    wait_one_leader(&webs, PATIENCE).expect("a leader");
    // Every node posts its expectation events here; the config stays so for its restarts.
    let (url, rx) = cronstable_tests::webhook_receiver(0);
    for node in &nodes {
        let mut config = std::fs::read_to_string(&node.config).unwrap();
        config.push_str(&format!(
            "notify:\n  webhook:\n    url: {url}\n    events: [job_expectation]\n"
        ));
        std::fs::write(&node.config, config).unwrap();
        node.reload();
    }
    std::thread::sleep(Duration::from_secs(5));
    let from = now_ms() / 1000 + 1;
    let end = Instant::now() + Duration::from_secs(minutes * 60);
    let mut k = 0usize;
    while Instant::now() < end {
        let i = k % 3;
        let signal = if k.is_multiple_of(2) { 15 } else { 9 };
        shims[i].signal(signal);
        nodes[i].proc.signal(signal);
        shims[i].wait_exit();
        nodes[i].proc.wait_exit();
        // Every process's log stays in the run's directory, to explain a miss afterwards.
        let log = dir.path().join(format!("coordinator-{i}-{k:03}.log"));
        std::fs::write(log, nodes[i].proc.log()).unwrap();
        let (config, api, web) = (nodes[i].config.clone(), nodes[i].api.clone(), nodes[i].web);
        nodes[i] = Coordinator::start_with(config, api, web);
        shims[i] = start_shim(&tab, &nodes[i].api, &[]);
        k += 1;
        std::thread::sleep(Duration::from_secs(30));
    }
    // The last instants of the window: past every catch-up window, so nothing can still run
    // them (the per-minute job's window is 5 minutes).
    let to = now_ms() / 1000 - 2;
    let wait = if catch_up { 5 * 60 + 10 } else { 10 };
    std::thread::sleep(Duration::from_secs(wait));
    for (i, node) in nodes.iter().enumerate() {
        let log = dir.path().join(format!("coordinator-{i}-last.log"));
        std::fs::write(log, node.proc.log()).unwrap();
    }
    let seen = seen(&out);
    let mode = if catch_up { "all" } else { "none" };
    println!(
        "rolling restarts: {minutes} min, {k} restarts (alternating SIGTERM and SIGKILL), {backend}, catchUp {mode}"
    );
    println!("| job | instants | missed | doubled | caught up |");
    println!("|---|---|---|---|---|");
    for (job, step) in [("tick", 1), ("minute", 60)] {
        let (n, missed, doubled, caught) = judge(&seen, job, from, to, step);
        println!("| {job} | {n} | {missed} | {doubled} | {caught} |");
    }
    let report = verify(dir.path(), &log, from, to, catch_up);
    println!("cronstable verify, runs judged by the nominal instant each names:");
    println!("| job | targets | met | missed | double runs | stray |");
    println!("|---|---|---|---|---|---|");
    for job in ["tick", "minute"] {
        let r = &report["jobs"][job];
        let targets = r["targets"].as_array().map_or(0, Vec::len);
        let met = r["targets"]
            .as_array()
            .map_or(0, |t| t.iter().filter(|t| t["status"] == "met").count());
        println!(
            "| {job} | {targets} | {met} | {} | {} | {} |",
            r["missed"].as_array().map_or(0, Vec::len),
            r["doubleRuns"],
            r["stray"].as_array().map_or(0, Vec::len),
        );
    }
    println!(
        "verdicts: {}; valid: {}",
        report["verdicts"], report["valid"]
    );
    let events: Vec<serde_json::Value> = rx.try_iter().collect();
    judge_expectations(&events, &log, from, to);
    drop(nodes);
    drop(etcd);
    let kept = dir.keep();
    eprintln!("kept {}", kept.display());
}
