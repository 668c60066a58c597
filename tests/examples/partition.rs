//! The long partition run (issue 7): the same harness as `tests/partition_gossip.rs`, with more
//! jobs and as many nemesis cycles as fit in the given minutes. Each cycle restarts every node
//! while cut off (the leader first), one node (a different one each cycle) while its peers or
//! the store answer nothing, and all five in a rolling restart. Needs root (network
//! namespaces).
//!
//! Run: `cargo run --release -p cronstable-tests --example partition -- [MINUTES] [SEED] [gossip|etcd|filesystem]`
//! (default 30 minutes, seed from the clock, gossip). Writes `target/partition/gossip-long-<seed>.json`
//! and `.svg`, prints the summary, and exits 1 when a verdict failed.

use std::time::Duration;

use cronstable_coordinator::clock::now_ms;
use cronstable_tests::partition::{HarnessBackend, RunPlan, artefact_dir, run};

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let minutes: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(30);
    let seed: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| now_ms() as u64);
    println!("long partition run: {minutes} min, seed {seed}");
    let backend = match std::env::args().nth(3).as_deref() {
        Some("etcd") => HarnessBackend::Etcd,
        Some("filesystem") => HarnessBackend::Filesystem,
        _ => HarnessBackend::Gossip,
    };
    let (hold, rest) = (Duration::from_secs(30), Duration::from_secs(20));
    let (isolated_hold, slow_hold) = (Duration::from_secs(30), Duration::from_secs(15));
    // One cycle: four rests, three partitions and a kill of half a hold; the store faults
    // (a rest and a hold each: one on etcd, two on filesystem); five isolated restarts, a slow
    // start and a rolling restart (about 40 s), each after a rest.
    let store_faults = match backend {
        HarnessBackend::Gossip => 0,
        HarnessBackend::Etcd => 1,
        HarnessBackend::Filesystem => 2,
    };
    let cycle = rest * 4
        + hold * 3
        + hold / 2
        + (rest + hold) * store_faults
        + (rest + isolated_hold) * 5
        + rest
        + slow_hold
        + rest
        + Duration::from_secs(40);
    let cycles = ((minutes * 60 / cycle.as_secs()).max(1)) as usize;
    let title = format!("{backend:?}-long-{seed}").to_lowercase();
    let result = run(&RunPlan {
        backend,
        // A lab of its own per backend, so the three long runs can go at once.
        lab: match backend {
            HarnessBackend::Gossip => 75,
            HarnessBackend::Etcd => 73,
            HarnessBackend::Filesystem => 78,
        },
        seed,
        jobs: 20,
        cycles,
        hold,
        rest,
        stabilise: Duration::from_secs(60),
        title: title.clone(),
        isolated_restarts: 5,
        isolated_hold,
        slow_hold,
        skew_offsets: &["+0.5s", "+5s"],
    });
    let report = &result.report;
    let out = artefact_dir();
    println!("{}", serde_json::to_string_pretty(&report.summary).unwrap());
    println!(
        "{}",
        serde_json::to_string_pretty(&report.verdicts).unwrap()
    );
    for (policy, name) in [
        (cronstable_core::ClusterPolicy::Leader, "Leader"),
        (cronstable_core::ClusterPolicy::PreferLeader, "PreferLeader"),
        (cronstable_core::ClusterPolicy::EveryNode, "EveryNode"),
    ] {
        let jobs: Vec<_> = report
            .jobs
            .values()
            .filter(|j| j.job.policy == policy)
            .collect();
        let required: usize = jobs
            .iter()
            .map(|j| j.targets.iter().filter(|t| t.required).count())
            .sum();
        let missed: usize = jobs.iter().map(|j| j.missed.len()).sum();
        let double: usize = jobs.iter().map(|j| j.double_runs).sum();
        let exempt_double: usize = jobs.iter().map(|j| j.exempt_double_runs).sum();
        let dups: usize = jobs.iter().map(|j| j.duplicates.len()).sum();
        println!(
            "{name}: {} jobs, {required} required targets, {missed} missed, {double} double runs \
             outside exemptions, {exempt_double} inside, {dups} duplicate runs",
            jobs.len()
        );
    }
    let failures = result.failures();
    for f in &failures {
        println!("FAILED: {f}");
    }
    println!(
        "report: {}/{title}.json and .svg, process logs in {title}-logs/",
        out.display()
    );
    if failures.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
