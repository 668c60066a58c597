//! Seed 003's partition test on the gossip, etcd and filesystem backends, short enough for CI (about 4
//! minutes each):
//! five hosts in network namespaces, a seeded random workload, one cycle of every nemesis
//! (majority/minority split, isolated leader, bridge, SIGKILL of the leader), then the
//! schedule checker over the hosts' run logs (issue 7). On etcd (three members on n1..n3, the
//! partitions cut etcd's own traffic too) Leader gets no exemption at all: it is fenced. On filesystem the store itself is cut off, from the lease holder alone and
//! then from every node. The JSON result and the SVG timeline
//! are written to `target/partition/`. Set `CRONSTABLE_PARTITION_SEED` to replay a run.

use std::time::Duration;

use cronstable_coordinator::clock::now_ms;
use cronstable_core::checker::Validity;
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
    let report = run(&RunPlan {
        backend,
        lab,
        seed,
        jobs: 8,
        cycles: 1,
        hold: Duration::from_secs(24),
        rest: Duration::from_secs(15),
        stabilise: Duration::from_secs(40),
        title: title.clone(),
    });
    let out = artefact_dir();
    let s = report.summary;
    println!(
        "checked: {} required targets, {} met, {} missed ({} exempt-missed); {} double runs \
         outside exemptions, {} inside; {} stray; report in {}/{title}.json",
        s.targets_required,
        s.met,
        s.missed,
        s.exempt_missed,
        s.double_runs,
        s.exempt_double_runs,
        s.stray,
        out.display()
    );
    let v = report.verdicts;
    let failed: Vec<_> = report
        .jobs
        .iter()
        .filter(|(_, j)| !j.valid)
        .map(|(n, j)| {
            format!(
                "{n} ({:?}): missed {:?}, {} double, {} stray",
                j.job.policy,
                j.missed,
                j.double_runs,
                j.stray.len()
            )
        })
        .collect();
    assert_eq!(
        v.at_least_once,
        Validity::Valid,
        "PreferLeader/EveryNode missed: {failed:?}"
    );
    assert_eq!(
        v.at_most_once,
        Validity::Valid,
        "Leader double-ran outside the documented windows ({backend:?}): {failed:?}"
    );
    assert_eq!(v.no_concurrency, Validity::Valid, "{failed:?}");
    assert_eq!(v.no_stray, Validity::Valid, "{failed:?}");
    assert_eq!(
        v.no_wedge,
        Validity::Valid,
        "targets after the final heal: {failed:?}"
    );
    assert_eq!(report.valid, Validity::Valid, "{failed:?}");
    assert!(s.targets_required > 20, "the run judged too little: {s:?}");
}
