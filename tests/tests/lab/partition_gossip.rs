//! Seed 003's partition test on the gossip, etcd and filesystem backends, short enough for CI
//! (7 to 9 minutes each; the three run concurrently in distinct labs): five hosts in
//! network namespaces, a seeded random workload with a Leader `@reboot` job, one cycle of every
//! nemesis, then the schedule checker over the hosts' run logs (issue 7).
//!
//! The cycle: majority/minority split, isolated leader, bridge, SIGKILL of the leader (on etcd
//! also every member stopped; on filesystem the store cut off from the holder, then from
//! everyone, and a follower restarted under libfaketime at +5 s (the long run also at +0.5 s);
//! on both lease backends the holder's coordinator frozen past the lease, then the holder's
//! shim); then the lifecycle nemeses: the leader and one follower each restarted while cut
//! off (only two of the five, to fit CI's time; the long run restarts every node), a follower
//! restarted while its peers (gossip) or the store (etcd, filesystem) answer nothing, and a
//! rolling restart of all five. On etcd (three members on n1..n3, the partitions cut etcd's own
//! traffic too) Leader gets no exemption at all: it is fenced.
//!
//! Every verdict is asserted, including the lifecycle ones: the `@reboot` one-shot ran exactly
//! once, Leader targets were met between faults (a heal plus five intervals on gossip, ttl + 2 s
//! on a lease backend), no node started cut off from a quorum ran a Leader job, and every
//! restarted node rejoined. The JSON result, the SVG timeline and every process's log are
//! written to `target/partition/`. Set `CRONSTABLE_PARTITION_SEED` to replay a run.

use std::time::Duration;

use cronstable_coordinator::clock::now_ms;
use cronstable_tests::partition::{HarnessBackend, RunPlan, artefact_dir, run};

#[test]
fn seed_003_gossip_no_double_runs_outside_documented_windows_and_no_wedge() {
    short_run(HarnessBackend::Gossip, 74);
}

#[test]
fn seed_003_etcd_leader_never_runs_twice_and_nothing_wedges() {
    short_run(HarnessBackend::Etcd, 76);
}

/// The filesystem store's own faults: the holder alone, then every node, cut off the lease
/// directory (LSE-FS-03, LSE-FS-07: the holder stops leading before its lease can be taken).
#[test]
fn seed_003_filesystem_leader_never_runs_twice_through_store_cuts() {
    short_run(HarnessBackend::Filesystem, 77);
}

/// One short run on `backend` in lab `lab`, with every verdict asserted.
fn short_run(backend: HarnessBackend, lab: u8) {
    #[allow(clippy::disallowed_methods)] // a test's own knob, not library code
    let seed = std::env::var("CRONSTABLE_PARTITION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| now_ms() as u64);
    println!("partition test seed {seed} (replay with CRONSTABLE_PARTITION_SEED={seed})");
    let title = format!("{backend:?}-{seed}").to_lowercase();
    let result = run(&RunPlan {
        backend,
        lab,
        seed,
        jobs: 10,
        cycles: 1,
        hold: Duration::from_secs(10),
        // Long enough that Leader liveness has targets to judge between faults even after a
        // lease backend's ttl + 2 s grace (a window needs ε = 5 s of health after its start).
        rest: Duration::from_secs(14),
        // Longer than the longest job interval (30 s) plus a target's window (ε + F + duration,
        // up to 13 s), so every run has targets after the final heal to judge no-wedge on.
        stabilise: Duration::from_secs(45),
        title: title.clone(),
        // Only the leader is restarted cut off, to fit CI's time; the long run restarts every
        // node.
        isolated_restarts: 1,
        isolated_hold: Duration::from_secs(15),
        slow_hold: Duration::from_secs(8),
        // The far offset only, to fit CI's time: the store's bound is what keeps a skewed node
        // from leading (the near one is covered by `integration::clock_skew`); the long run
        // takes both.
        skew_offsets: &["+5s"],
    });
    let report = &result.report;
    let out = artefact_dir();
    let s = report.summary;
    println!(
        "checked ({backend:?}, seed {seed}): {} required targets, {} met, {} missed ({} \
         exempt-missed); {} double runs outside exemptions, {} inside; {} stray; @reboot ran \
         {} times; Leader between faults: {} judged, {} missed; {} Leader runs on nodes cut \
         off; report in {}/{title}.json",
        s.targets_required,
        s.met,
        s.missed,
        s.exempt_missed,
        s.double_runs,
        s.exempt_double_runs,
        s.stray,
        s.reboot_runs,
        s.liveness_judged,
        s.liveness_missed,
        s.leader_runs_cut_off,
        out.display()
    );
    if backend != HarnessBackend::Gossip {
        println!(
            "one run per firing ({backend:?}): {} Leader firings judged, {} started twice",
            result.firings_judged,
            result.firings_twice.len()
        );
        assert!(
            result.firings_judged > 5,
            "too few Leader firings to judge the claims by: {}",
            result.firings_judged
        );
    }
    let failures = result.failures();
    for f in &failures {
        println!("FAILED {backend:?}: {f}");
    }
    assert!(s.targets_required > 20, "the run judged too little: {s:?}");
    assert!(
        failures.is_empty(),
        "{backend:?} seed {seed}: {} verdicts failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(
        report.valid,
        cronstable_core::checker::Validity::Valid,
        "{title}"
    );
}
