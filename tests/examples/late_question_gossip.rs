//! Measurement: a late question on gossip, where no store keeps per-firing claims.
//!
//! Three gossip coordinators over mTLS on loopback, each with the same Leader job in its own
//! cron.d file (default start deadline, 90 s). Each trial asks the leader about this second's
//! instant (RUN), stops the leader with SIGTERM, waits until another node leads, and asks the
//! new leader about the same instant, as a gate that crond started late there would; then
//! starts the stopped node again. It prints each trial's second answer: RUN means the one
//! firing would run on both leaders.
//!
//! Run: `cargo run --release -p cronstable-tests --example late_question_gossip [-- TRIALS]`
//! (5 by default).

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::time::Instant;

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan};
use cronstable_tests::lease::wait_one_leader;
use cronstable_tests::{Coordinator, PATIENCE, ask_scheduled, now_ms};

fn main() {
    let trials: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("app.cron");
    std::fs::write(
        &jobs,
        "# cronstable: name=report clusterPolicy=Leader\n* * * * * root true\n",
    )
    .unwrap();
    let mut plan = ClusterPlan::new(3, 77);
    plan.extra = format!("jobs:\n  systemCrontab: {}\n", jobs.display());
    let files = ClusterFiles::write(dir.path(), &plan);
    let mut nodes: Vec<Option<Coordinator>> = (0..3).map(|i| Some(files.start(i))).collect();
    let webs = || files.nodes.iter().map(|n| n.web()).collect::<Vec<_>>();
    let mut twice = 0;
    for trial in 1..=trials {
        let (leader, _) = wait_one_leader(&webs(), PATIENCE).expect("a leader");
        let api = files.nodes[leader].api();
        let instant = now_ms() / 1000 * 1000;
        let first = ask_scheduled(&api, "report", instant);
        let mut old = nodes[leader].take().unwrap();
        old.proc.signal(15);
        old.proc.wait_exit();
        let stopped = Instant::now();
        let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
        let survivor_webs: Vec<_> = survivors.iter().map(|&i| files.nodes[i].web()).collect();
        let (k, _) = wait_one_leader(&survivor_webs, PATIENCE).expect("a new leader");
        let next = survivors[k];
        let second = ask_scheduled(&files.nodes[next].api(), "report", instant);
        println!(
            "trial {trial}: {} answered {:?} ({}); after SIGTERM {} led in {:.1} s and answered \
             {:?} ({}) for the same instant, {} ms after it",
            files.nodes[leader].name,
            first.verdict(),
            first.reason().as_str_name(),
            files.nodes[next].name,
            stopped.elapsed().as_secs_f64(),
            second.verdict(),
            second.reason().as_str_name(),
            now_ms() - instant
        );
        if second.verdict() == cronstable_proto::v1::Verdict::Run {
            twice += 1;
        }
        drop(old);
        nodes[leader] = Some(files.start(leader));
    }
    println!("{twice} of {trials} late questions answered RUN on the new leader");
}
