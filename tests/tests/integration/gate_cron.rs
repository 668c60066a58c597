//! `cronstable-gate` under Debian's real cron daemon (issue 8): a cron.d file with two gated
//! lines, one against an election-off coordinator (RUN) and one against a gossip node alone in
//! a 3-node cluster (no quorum, so a Leader job is skipped). Both coordinators load that same
//! cron.d file as their job set (`jobs.systemCrontab`).
//!
//! cron fires on minute boundaries, so this test waits up to about 70 s for one firing. It
//! needs `/usr/sbin/cron` (Debian package `cron`) and root, because cron only reads
//! `/etc/cron.d` files owned by root.

// Waiting on a real daemon's minute needs the real clock; the file guards need nothing else.
#![allow(clippy::disallowed_types)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan};
use cronstable_tests::{Coordinator, Proc, binary, free_port};

const CRON: &str = "/usr/sbin/cron";

/// How long to wait for cron's next minute, its firing and the gate's round trip.
const MINUTE_AND_SLACK: Duration = Duration::from_secs(90);

/// Removes the cron.d file when dropped, also when the test panics, so no stray job keeps
/// firing on this machine.
struct CronDFile(PathBuf);

impl Drop for CronDFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Polls `check` every 200 ms until it holds or `limit` passes; panics with `what` and `state()`.
fn wait_long(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> bool,
    state: impl Fn() -> String,
) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}\n{}",
            state()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn gate_under_debian_cron_runs_on_an_election_off_node_and_skips_without_quorum() {
    assert!(
        Path::new(CRON).exists(),
        "{CRON} is missing: this test needs Debian's cron daemon (apt-get install -y cron; \
         tests/run.sh installs it)"
    );
    assert!(
        Path::new("/etc/cron.d").is_dir(),
        "/etc/cron.d does not exist: is the cron package installed completely?"
    );
    // Debian's cron refuses to start while another one holds its pid file; say so plainly
    // rather than failing later with a confusing log.
    if let Some(pid) = read(Path::new("/run/crond.pid")).split_whitespace().next()
        && read(&Path::new("/proc").join(pid).join("comm")).trim() == "cron"
    {
        panic!("another cron daemon (pid {pid}) is running; stop it before this test");
    }
    let dir = tempfile::tempdir().unwrap();
    let gate = binary("cronstable-gate");
    let (ran, skipped, gate_log) = (
        dir.path().join("ran"),
        dir.path().join("skipped-but-ran"),
        dir.path().join("gate.log"),
    );

    // The coordinators: one with election off, one gossip node whose two peers never start.
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 91));
    let lonely = &files.nodes[0];
    let off_api = free_port();
    // cron.d names may only hold letters, digits, `_` and `-` (run-parts rules), or cron
    // ignores the file.
    let name = format!("cronstable-gate-test-{}", std::process::id());
    let cron_d = CronDFile(Path::new("/etc/cron.d").join(&name));
    let text = format!(
        "# Written by cronstable's gate_cron test; removed when it ends.\n\
         MAILTO=\"\"\n\
         CRONSTABLE_COORDINATOR=http://127.0.0.1:{off_api}\n\
         # cronstable: name=gated-run clusterPolicy=Leader\n\
         * * * * * root {gate} -v gated-run -- /bin/sh -c 'echo ran >> {ran}' >> {log} 2>&1\n\
         # cronstable: name=gated-skip clusterPolicy=Leader\n\
         * * * * * root {gate} -v --coordinator {lonely_api} gated-skip -- /bin/sh -c 'echo ran >> {skipped}' >> {log} 2>&1\n",
        gate = gate.display(),
        ran = ran.display(),
        skipped = skipped.display(),
        log = gate_log.display(),
        lonely_api = lonely.api(),
    );
    std::fs::write(&cron_d.0, text).unwrap();
    let jobs = format!("jobs:\n  systemCrontab: {}\n", cron_d.0.display());

    let off_config = dir.path().join("off.yaml");
    let off_web = free_port();
    std::fs::write(
        &off_config,
        format!("api:\n  listen: 127.0.0.1:{off_api}\nweb:\n  listen: 127.0.0.1:{off_web}\n{jobs}"),
    )
    .unwrap();
    let off = Coordinator::start_with(
        off_config,
        format!("http://127.0.0.1:{off_api}"),
        ([127, 0, 0, 1], off_web).into(),
    );
    let mut lonely_config = read(&lonely.config);
    lonely_config.push_str(&jobs);
    std::fs::write(&lonely.config, lonely_config).unwrap();
    let alone = files.start(0);
    for c in [&off, &alone] {
        c.proc.wait_log("registered the config's job file");
    }

    // The daemon, in the foreground so it is our child and dies with the test (Proc's Drop).
    let mut cmd = Command::new(CRON);
    cmd.arg("-f");
    let mut cron = Proc::spawn("cron", cmd);
    let started = Instant::now();

    let state = || {
        format!(
            "gate log:\n{}\nelection-off coordinator:\n{}\nlonely gossip coordinator:\n{}\ncron:\n{}",
            read(&gate_log),
            off.proc.log(),
            alone.proc.log(),
            cron.log()
        )
    };
    wait_long(
        "cron to fire both gated lines",
        MINUTE_AND_SLACK,
        || read(&ran).contains("ran") && read(&gate_log).contains("gated-skip skipped"),
        state,
    );
    eprintln!("cron fired after {:?}", started.elapsed());

    // RUN: the command ran, and the coordinator recorded its start and finish.
    off.proc.wait_log("exit_code=Some(0)");
    let off_log = off.proc.log();
    assert!(
        off_log.contains("job=\"gated-run\"") && off_log.contains("run started"),
        "{off_log}"
    );
    // SKIP: the lonely node decided no_quorum and the command never ran.
    let gate_text = read(&gate_log);
    assert!(
        gate_text.contains("gated-skip skipped (no_quorum)"),
        "{gate_text}"
    );
    let alone_log = alone.proc.log();
    assert!(
        alone_log.contains("reason=\"no_quorum\"") || alone_log.contains("reason=no_quorum"),
        "{alone_log}"
    );
    assert!(
        !skipped.exists(),
        "a Leader job ran on a node without quorum"
    );
    // cron is still ours and still running: it did not exit early (e.g. "already running").
    assert!(
        Command::new("kill")
            .args(["-0", &cron.pid().to_string()])
            .status()
            .is_ok_and(|s| s.success()),
        "cron exited early:\n{}",
        cron.log()
    );
    cron.signal(15);
    let _ = cron.wait_exit();
}
