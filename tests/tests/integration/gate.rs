//! `cronstable-gate` against a real coordinator that loaded its job set from the file named in
//! its config (`jobs:`), without crond: the gate is started by hand here, so these cases take
//! seconds. `gate_cron.rs` runs it under Debian's real cron.

use std::path::Path;
use std::process::{Command, Output};

use cronstable_tests::{Coordinator, Proc, binary, free_port, http};

/// The cron.d file the coordinators load: two gated jobs, cron.d format (a user field).
const CRON_D: &str = "\
# cronstable: name=report clusterPolicy=Leader
* * * * * root cronstable-gate report -- /bin/sh -c 'echo ran'
# cronstable: name=cleanup clusterPolicy=EveryNode
*/5 * * * * root cronstable-gate cleanup -- /bin/true
";

fn jobs_section(dir: &Path) -> String {
    let file = dir.join("app.cron");
    std::fs::write(&file, CRON_D).unwrap();
    format!("jobs:\n  systemCrontab: {}\n", file.display())
}

fn gate(coordinator: &str, args: &[&str]) -> Output {
    Command::new(binary("cronstable-gate"))
        .arg("--coordinator")
        .arg(coordinator)
        .args(args)
        .output()
        .expect("running cronstable-gate")
}

fn job_set_id(c: &Coordinator) -> serde_json::Value {
    http(c.web, "GET", "/job-set-id").unwrap().json()
}

#[test]
fn gate_runs_a_job_from_the_config_job_file_and_passes_its_status_through() {
    let dir = tempfile::tempdir().unwrap();
    let c = Coordinator::start_named(dir.path(), "c1", &jobs_section(dir.path()));
    c.proc.wait_log("registered the config's job file");
    let out = dir.path().join("out");
    let script = format!(
        "echo \"$CRONSTABLE_JOB $CRONSTABLE_SCHEDULED_AT $CRONSTABLE_NODE\" > {}; exit 7",
        out.display()
    );
    let r = gate(&c.api, &["report", "--", "/bin/sh", "-c", &script]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(7), "stderr: {stderr}");
    let line = std::fs::read_to_string(&out).expect("the command ran");
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.len(), 3, "{line:?}");
    assert_eq!(fields[0], "report");
    // The current minute, in the shim's RFC 3339 form.
    assert!(fields[1].ends_with(":00Z"), "{line:?}");
    assert!(!fields[2].is_empty());
    // The coordinator's ledger got the start and the finish with the exit code.
    c.proc.wait_log("run started");
    c.proc.wait_log("exit_code=Some(7)");
    assert!(c.proc.log().contains("job=\"report\""), "{}", c.proc.log());
}

#[test]
fn gate_exit_codes_for_an_unknown_job_a_signal_and_a_missing_command() {
    let dir = tempfile::tempdir().unwrap();
    let c = Coordinator::start_named(dir.path(), "c1", &jobs_section(dir.path()));
    let r = gate(&c.api, &["no-such-job", "--", "/bin/true"]);
    assert_eq!(r.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("no job named \"no-such-job\""), "{stderr}");

    let r = gate(&c.api, &["report", "--", "/bin/sh", "-c", "kill -TERM $$"]);
    assert_eq!(r.status.code(), Some(128 + 15));
    let r = gate(&c.api, &["report", "--", "/nonexistent/program"]);
    assert_eq!(r.status.code(), Some(127));
    let r = gate(&c.api, &["report"]);
    assert_eq!(
        r.status.code(),
        Some(64),
        "a missing COMMAND is a usage error"
    );
}

#[test]
fn gate_without_a_coordinator_applies_the_no_manager_rule_map_05() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Nothing listens on this port.
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let touch = format!("echo ran >> {}", out.display());
    let leader = gate(&nobody, &["report", "--", "/bin/sh", "-c", &touch]);
    assert_eq!(leader.status.code(), Some(69), "Leader fails closed");
    assert!(
        !out.exists(),
        "a Leader job must not run without a coordinator"
    );
    let stderr = String::from_utf8_lossy(&leader.stderr);
    assert!(stderr.contains("no-manager rule"), "{stderr}");
    for policy in ["PreferLeader", "EveryNode"] {
        let r = gate(
            &nobody,
            &["--policy", policy, "report", "--", "/bin/sh", "-c", &touch],
        );
        assert_eq!(r.status.code(), Some(0), "{policy}");
    }
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "ran\nran\n");
}

#[test]
fn two_coordinators_with_the_same_job_file_attest_the_same_job_set() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = jobs_section(dir.path());
    let a = Coordinator::start_named(dir.path(), "a", &jobs);
    let b = Coordinator::start_named(dir.path(), "b", &jobs);
    let empty = Coordinator::start_named(dir.path(), "empty", "");
    let (ia, ib, ie) = (job_set_id(&a), job_set_id(&b), job_set_id(&empty));
    assert_eq!(ia["jobs"], 2, "{ia}");
    assert_eq!(ia, ib);
    assert_ne!(ia["job_set_id"], ie["job_set_id"]);
}

#[test]
fn a_coordinator_whose_job_file_does_not_parse_exits_64() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.cron");
    std::fs::write(&file, "* * * * * root /bin/true\n* * * * *\n").unwrap();
    let config = dir.path().join("c.yaml");
    std::fs::write(
        &config,
        format!("jobs:\n  systemCrontab: {}\n", file.display()),
    )
    .unwrap();
    let mut cmd = Command::new(binary("cronstable"));
    cmd.arg("coordinator").arg("--config").arg(&config);
    let mut p = Proc::spawn("coordinator", cmd);
    assert_eq!(p.wait_exit(), Some(64), "{}", p.log());
    assert!(p.log().contains("jobs.systemCrontab"), "{}", p.log());
}
