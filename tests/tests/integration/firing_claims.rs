//! One firing, one run across a handover (issue 45, items 1 and 2), with real processes on a
//! filesystem store and on a real etcd. A Leader firing that the holder answers RUN is claimed
//! in the store before the answer; asked again on the successor inside the job's start deadline
//! (a gate that crond started late, a DEFER re-asked across the handover) it is answered SKIP
//! (`already_ran`), naming the claim. Other instants still run, and the holder that made a
//! claim answers RUN again when asked again (an executor's re-ask).
//!
//! The same with the project's own gate, as crond runs it: this minute's firing runs on the
//! holder, the holder stops gracefully, and the gate started again on the successor in the same
//! minute does not run it.
//!
//! Red before the claims (and with the gate's claim effect taken out): the successor answered
//! RUN about the instant its predecessor had already answered RUN for, and the gate ran the
//! minute on both nodes.
//!
//! A claim whose RUN was never launched goes back: an executor that stops between the answer
//! and the instant reports `not_launched`, and the holder removes its claim, even while it is
//! stopping itself. Red before that: the claim stood, and the successor answered both instants
//! SKIP `already_ran`, so they ran nowhere.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use cronstable_proto::v1 as pb;
use cronstable_tests::etcd::Etcd;
use cronstable_tests::lease::{Store, backend_yaml, wait_one_leader};
use cronstable_tests::{Coordinator, ask_scheduled, binary, now_ms, report_not_launched};

/// The cron.d file every node loads: one Leader job with the default start deadline (90 s).
const CRON_D: &str = "\
# cronstable: name=report clusterPolicy=Leader
* * * * * root cronstable-gate report -- /bin/true
";

fn node(dir: &Path, name: &str, store: &Store) -> Coordinator {
    let jobs = dir.join("app.cron");
    if !jobs.exists() {
        std::fs::write(&jobs, CRON_D).unwrap();
    }
    let backend = backend_yaml(store, 3);
    let node = Coordinator::start_named(
        dir,
        name,
        &format!(
            "jobs:\n  systemCrontab: {}\ncluster:\n  nodeName: {name}\n{backend}",
            jobs.display()
        ),
    );
    node.proc.wait_log("registered the config's job file");
    node
}

/// One `ShouldRun` of a scheduled firing of `job` at `at_ms`: (verdict, reason, message).
fn ask(api: &str, job: &str, at_ms: i64) -> (pb::Verdict, pb::Reason, String) {
    let r = ask_scheduled(api, job, at_ms);
    (r.verdict(), r.reason(), r.message)
}

fn one_run_across_a_handover(dir: &Path, store: &Store) {
    let mut a = node(dir, "a", store);
    assert_eq!(
        wait_one_leader(&[a.web], Duration::from_secs(15)).map(|(i, _)| i),
        Some(0)
    );
    let b = node(dir, "b", store);

    // This second's firing: the holder claims it and runs it.
    let instant = now_ms() / 1000 * 1000;
    let (verdict, reason, _) = ask(&a.api, "report", instant);
    assert_eq!((verdict, reason), (pb::Verdict::Run, pb::Reason::Leader));
    // A graceful handover: b holds the lease at once.
    a.proc.signal(15);
    assert_eq!(a.proc.wait_exit(), Some(0), "{}", a.proc.log());
    assert_eq!(
        wait_one_leader(&[b.web], Duration::from_secs(15)).map(|(i, _)| i),
        Some(0)
    );
    // The same instant asked on the new holder, well inside the 90 s deadline: no second run.
    let (verdict, reason, message) = ask(&b.api, "report", instant);
    assert_eq!(
        (verdict, reason),
        (pb::Verdict::Skip, pb::Reason::AlreadyRan),
        "{message}"
    );
    assert!(message.contains("claimed by node \"a\""), "{message}");
    // An instant nobody claimed runs on the holder, and asked again it still does: the claim
    // is this holder's own.
    let earlier = instant - 1_000;
    for _ in 0..2 {
        let (verdict, reason, message) = ask(&b.api, "report", earlier);
        assert_eq!(
            (verdict, reason),
            (pb::Verdict::Run, pb::Reason::Leader),
            "{message}"
        );
    }
}

#[test]
fn filesystem_a_claimed_firing_is_not_run_again_after_a_handover() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    one_run_across_a_handover(dir.path(), &Store::Filesystem(store.clone()));
    // One file per claimed firing, named by its instant and job.
    let claims = std::fs::read_dir(store.join("default/cluster/claims"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(claims, 2);
}

#[test]
fn etcd_a_claimed_firing_is_not_run_again_after_a_handover() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    one_run_across_a_handover(dir.path(), &Store::Etcd(etcd.endpoint()));
}

/// A RUN that was never launched is not taken as run: the executor says so and the holder
/// gives the claim back, whether the holder stays up or is stopping itself (a node restarted
/// as a whole: its coordinator waits a moment for that report before it stops serving and
/// hands its lease over). The successor then answers both instants RUN.
fn a_run_never_launched_is_given_back(dir: &Path, store: &Store) {
    let mut a = node(dir, "a", store);
    assert_eq!(
        wait_one_leader(&[a.web], Duration::from_secs(15)).map(|(i, _)| i),
        Some(0)
    );
    let b = node(dir, "b", store);
    // Asked a moment early, as a shim asks; the executor stops before the instant.
    let first = (now_ms() / 1000 + 2) * 1000;
    let (verdict, reason, message) = ask(&a.api, "report", first);
    assert_eq!(
        (verdict, reason),
        (pb::Verdict::Run, pb::Reason::Leader),
        "{message}"
    );
    report_not_launched(&a.api, "report", first).unwrap();
    a.proc.wait_log("gave the firing's claim back");
    // The whole node stops: the shim's report arrives after the coordinator's SIGTERM.
    let second = first + 1_000;
    let (verdict, reason, message) = ask(&a.api, "report", second);
    assert_eq!(
        (verdict, reason),
        (pb::Verdict::Run, pb::Reason::Leader),
        "{message}"
    );
    a.proc.signal(15);
    a.proc
        .wait_log("waiting for executors to launch or hand back the firings answered RUN");
    // A question that reaches the stopping holder now is not answered RUN: a RUN it handed
    // out this late could not be handed back before it stops.
    let third = second + 1_000;
    let (verdict, _, message) = ask(&a.api, "report", third);
    assert_eq!(verdict, pb::Verdict::Defer, "{message}");
    report_not_launched(&a.api, "report", second).unwrap();
    assert_eq!(a.proc.wait_exit(), Some(0), "{}", a.proc.log());
    assert_eq!(
        a.proc.log().matches("gave the firing's claim back").count(),
        2,
        "{}",
        a.proc.log()
    );
    assert_eq!(
        wait_one_leader(&[b.web], Duration::from_secs(15)).map(|(i, _)| i),
        Some(0)
    );
    for at in [first, second, third] {
        let (verdict, reason, message) = ask(&b.api, "report", at);
        assert_eq!(
            (verdict, reason),
            (pb::Verdict::Run, pb::Reason::Leader),
            "the instant {at} was never launched, so the successor runs it: {message}"
        );
    }
}

#[test]
fn filesystem_a_run_never_launched_is_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    a_run_never_launched_is_given_back(dir.path(), &Store::Filesystem(store));
}

#[test]
fn etcd_a_run_never_launched_is_given_back() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    a_run_never_launched_is_given_back(dir.path(), &Store::Etcd(etcd.endpoint()));
}

/// `cronstable-gate --verbose --schedule "* * * * *" report -- touch <dir>/ran-<tag>` against
/// `api`, as crond runs it: whether the command ran, and the gate's stderr (`--verbose`: a
/// skip is said).
fn gate(api: &str, dir: &Path, tag: &str) -> (bool, String) {
    let ran = dir.join(format!("ran-{tag}"));
    let out = Command::new(binary("cronstable-gate"))
        .args([
            "--coordinator",
            api,
            "--verbose",
            "--schedule",
            "* * * * *",
            "report",
            "--",
        ])
        .args(["/bin/sh", "-c", &format!("touch {}", ran.display())])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    (ran.exists(), stderr)
}

/// The recipe of the issue with the project's own gate: this minute's firing runs on the holder;
/// the holder stops gracefully; the gate started again on the successor in the same minute (a
/// crond that started it late there) does not run it a second time.
fn the_gate_runs_a_minute_once_across_a_handover(dir: &Path, store: &Store) {
    // Both gates must name the same minute: start well inside one.
    let into_minute = now_ms() % 60_000;
    if into_minute > 40_000 {
        std::thread::sleep(Duration::from_millis((61_000 - into_minute) as u64));
    }
    let mut a = node(dir, "a", store);
    assert_eq!(
        wait_one_leader(&[a.web], Duration::from_secs(15)).map(|(i, _)| i),
        Some(0)
    );
    let b = node(dir, "b", store);
    let (ran, stderr) = gate(&a.api, dir, "a");
    assert!(ran, "the holder runs this minute's firing: {stderr}");
    a.proc.signal(15);
    assert_eq!(a.proc.wait_exit(), Some(0), "{}", a.proc.log());
    assert_eq!(
        wait_one_leader(&[b.web], Duration::from_secs(15)).map(|(i, _)| i),
        Some(0)
    );
    let (ran, stderr) = gate(&b.api, dir, "b");
    assert!(!ran, "the successor ran the same minute again: {stderr}");
    assert!(stderr.contains("already_ran"), "{stderr}");
}

#[test]
fn filesystem_the_gate_runs_a_minute_once_across_a_handover() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    the_gate_runs_a_minute_once_across_a_handover(dir.path(), &Store::Filesystem(store));
}

#[test]
fn etcd_the_gate_runs_a_minute_once_across_a_handover() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    the_gate_runs_a_minute_once_across_a_handover(dir.path(), &Store::Etcd(etcd.endpoint()));
}
