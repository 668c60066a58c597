//! A question that arrives late is not a new firing (issue 43, item 7), with real processes on
//! a filesystem store: a scheduled firing asked about after its job's `startingDeadline` is
//! answered SKIP (`starting_deadline`) by whoever leads now, counted per job and logged once,
//! and `cronstable-gate` passes the skip on.
//!
//! Red on the code before the deadline: the holder's successor answered RUN about an instant
//! its predecessor had already answered RUN for (one firing, run on two nodes), and so did any
//! coordinator asked about an instant minutes past.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use cronstable_proto::v1 as pb;
use cronstable_tests::lease::wait_one_leader;
use cronstable_tests::{Coordinator, ask_scheduled, binary, http, now_ms, wait_for};

/// The cron.d file both nodes load: one job with a short deadline, one with the default.
const CRON_D: &str = "\
# cronstable: name=report clusterPolicy=Leader startingDeadline=4s
* * * * * root cronstable-gate report -- /bin/true
# cronstable: name=sweep clusterPolicy=Leader
* * * * * root cronstable-gate sweep -- /bin/true
";

fn node(dir: &Path, name: &str, store: &Path) -> Coordinator {
    let jobs = dir.join("app.cron");
    if !jobs.exists() {
        std::fs::write(&jobs, CRON_D).unwrap();
    }
    Coordinator::start_named(
        dir,
        name,
        &format!(
            "jobs:\n  systemCrontab: {}\ncluster:\n  nodeName: {name}\n  backend: filesystem\n  \
             filesystem:\n    path: {}\n    ttl: 3\n    topology: single-node\n",
            jobs.display(),
            store.display()
        ),
    )
}

/// One `ShouldRun` of a scheduled firing of `job` at `at_ms`: (verdict, reason).
fn ask(api: &str, job: &str, at_ms: i64) -> (pb::Verdict, pb::Reason) {
    let r = ask_scheduled(api, job, at_ms);
    (r.verdict(), r.reason())
}

fn skips(c: &Coordinator, job: &str) -> u64 {
    let series =
        format!("cronstable_job_skips_total{{job=\"{job}\",reason=\"starting_deadline\"}} ");
    http(c.web, "GET", "/metrics")
        .unwrap()
        .body
        .lines()
        .find_map(|l| l.strip_prefix(&series).map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0)
}

#[test]
fn a_question_after_the_start_deadline_is_skipped_by_whoever_leads_now() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let mut a = node(dir.path(), "a", &store);
    assert_eq!(
        wait_one_leader(&[a.web], Duration::from_secs(15)).map(|(i, _)| i),
        Some(0)
    );
    let b = node(dir.path(), "b", &store);
    b.proc.wait_log("registered the config's job file");

    // This second's firing: the holder runs it.
    let instant = now_ms() / 1000 * 1000;
    assert_eq!(
        ask(&a.api, "report", instant),
        (pb::Verdict::Run, pb::Reason::Leader)
    );
    // A graceful handover: b holds the lease at once.
    a.proc.signal(15);
    assert_eq!(a.proc.wait_exit(), Some(0), "{}", a.proc.log());
    assert_eq!(
        wait_one_leader(&[b.web], Duration::from_secs(15)).map(|(i, _)| i),
        Some(0)
    );
    // The same instant asked again on the new holder after the job's 4 s deadline (a gate that
    // crond started again, a re-ask across the handover): no new firing.
    let wait = (instant + 4_500 - now_ms()).max(0);
    std::thread::sleep(Duration::from_millis(wait as u64));
    assert_eq!(
        ask(&b.api, "report", instant),
        (pb::Verdict::Skip, pb::Reason::StartingDeadline)
    );
    assert_eq!(skips(&b, "report"), 1);
    // The default deadline, 90 s: 30 s late still runs on the holder, 100 s late does not.
    let now = now_ms();
    assert_eq!(
        ask(&b.api, "sweep", now - 30_000),
        (pb::Verdict::Run, pb::Reason::Leader)
    );
    assert_eq!(
        ask(&b.api, "sweep", now - 100_000),
        (pb::Verdict::Skip, pb::Reason::StartingDeadline)
    );
    // Logged once per question, with the reason. The process writes its line before it answers,
    // but this harness reads its output on another thread: wait until both lines are read.
    let count = |log: &str| {
        log.lines()
            .filter(|l| l.contains("firing decided") && l.contains("reason=\"starting_deadline\""))
            .count()
    };
    wait_for("both start-deadline decisions in b's log", || {
        (count(&b.proc.log()) >= 2).then_some(())
    });
    let log = b.proc.log();
    assert_eq!(count(&log), 2, "{log}");
}

#[test]
fn the_gate_skips_a_firing_named_after_its_start_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let a = node(dir.path(), "a", &store);
    wait_for("a to lead", || {
        wait_one_leader(&[a.web], Duration::from_secs(1)).map(|_| ())
    });
    // `--schedule` names the firing by its latest due instant: New Year's midnight, long past.
    let ran = dir.path().join("ran");
    let out = Command::new(binary("cronstable-gate"))
        .args([
            "--coordinator",
            &a.api,
            "--schedule",
            "0 0 1 1 *",
            "sweep",
            "--",
        ])
        .args(["/bin/sh", "-c", &format!("touch {}", ran.display())])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "a skip is no failure: {stderr}");
    assert!(stderr.contains("starting_deadline"), "{stderr}");
    assert!(!ran.exists(), "the gate ran the command");
}
