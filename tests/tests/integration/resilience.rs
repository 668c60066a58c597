//! The shim and coordinator survive each other: restarts, Unix sockets, overlap policies,
//! timeouts, and the CLI's config checks (MN-01, MN-02, MN-04, MN-16).

use std::process::Command;

use cronstable_tests::{Coordinator, Proc, binary, free_port, http, lines, start_shim, wait_for};

#[test]
fn a_restarted_coordinator_gets_the_job_set_back_and_gating_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=leader-tick clusterPolicy=Leader seconds=true\n\
             * * * * * * echo run >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&crontab, &coordinator.api, &["--ask-timeout", "300ms"]);
    wait_for("a first run", || lines(&out).first().cloned());
    let (config, api, web) = (
        coordinator.config.clone(),
        coordinator.api.clone(),
        coordinator.web,
    );
    drop(coordinator); // SIGKILL

    let restarted = Coordinator::start_with(config, api, web);
    wait_for("the shim to re-register", || {
        let id = http(web, "GET", "/job-set-id").ok()?.json();
        (id["jobs"] == 1).then_some(())
    });
    let before = lines(&out).len();
    wait_for("Leader runs after the restart", || {
        (lines(&out).len() >= before + 2).then_some(())
    });
    restarted.proc.wait_log("reason=\"election_off\"");
    drop(shim);
}

#[test]
fn the_api_can_listen_on_a_unix_socket_and_a_second_coordinator_cannot_steal_it() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("api.sock");
    let web = free_port();
    let config = dir.path().join("c.yaml");
    std::fs::write(
        &config,
        format!(
            "api:\n  listen: unix:{}\nweb:\n  listen: 127.0.0.1:{web}\n",
            sock.display()
        ),
    )
    .unwrap();
    let api = format!("unix:{}", sock.display());
    let _coordinator =
        Coordinator::start_with(config.clone(), api.clone(), ([127, 0, 0, 1], web).into());

    let out = dir.path().join("runs");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=over-uds seconds=true\n* * * * * * echo ok >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let shim = start_shim(&crontab, &api, &[]);
    wait_for("a run gated over the Unix socket", || {
        lines(&out).first().cloned()
    });
    shim.wait_log("registered with the coordinator");

    // A second coordinator on the same socket must fail, not take over (MN-02).
    let other = dir.path().join("c2.yaml");
    std::fs::write(
        &other,
        format!(
            "api:\n  listen: unix:{}\nweb:\n  listen: 127.0.0.1:{}\n",
            sock.display(),
            free_port()
        ),
    )
    .unwrap();
    let mut cmd = Command::new(binary("cronstable"));
    cmd.arg("coordinator").arg("--config").arg(&other);
    let mut second = Proc::spawn("second coordinator", cmd);
    assert_eq!(second.wait_exit(), Some(1));
    assert!(
        second
            .log()
            .contains("another process is already serving there"),
        "{}",
        second.log()
    );
}

#[test]
fn forbid_skips_a_firing_while_the_previous_run_is_alive() {
    let dir = tempfile::tempdir().unwrap();
    let (out, overlaps, lock) = (
        dir.path().join("starts"),
        dir.path().join("overlaps"),
        dir.path().join("lock"),
    );
    let crontab = dir.path().join("crontab");
    // mkdir is atomic: a second live run would fail to take the lock and say so.
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=slow clusterPolicy=EveryNode concurrencyPolicy=Forbid seconds=true\n\
             * * * * * * mkdir {l} || echo overlap >> {o}; echo start >> {s}; sleep 2.5; rmdir {l}\n",
            l = lock.display(),
            o = overlaps.display(),
            s = out.display()
        ),
    )
    .unwrap();
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&crontab, &coordinator.api, &[]);
    shim.wait_log("the previous run is still going");
    wait_for("three starts", || (lines(&out).len() >= 3).then_some(()));
    coordinator.proc.wait_log("reason=\"concurrency_policy\"");
    assert!(
        lines(&overlaps).is_empty(),
        "two runs overlapped: {:?}",
        lines(&overlaps)
    );
}

#[test]
fn a_timeout_kills_the_run_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let crontab = dir.path().join("crontab");
    let child_pid = dir.path().join("child.pid");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=hangs clusterPolicy=EveryNode timeout=1s\n\
             @reboot sleep 60 & echo $! > {}; wait\n",
            child_pid.display()
        ),
    )
    .unwrap();
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&crontab, &coordinator.api, &[]);
    shim.wait_log("run timed out");
    coordinator.proc.wait_log("timed_out=true");
    // The background `sleep` was in the job's process group, so it died too.
    let pid = wait_for("the child pid", || lines(&child_pid).first().cloned());
    wait_for("the grandchild to be gone", || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        (stat.is_empty() || stat.contains(") Z ")).then_some(())
    });
}

#[test]
fn validate_config_lists_every_error_and_exits_64() {
    let dir = tempfile::tempdir().unwrap();
    let validate = |args: &[&str], file: &std::path::Path| {
        let out = Command::new(binary("cronstable"))
            .args(args)
            .arg(file)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    // A mistyped key names the key path, the file and the line.
    let typo = dir.path().join("typo.yaml");
    std::fs::write(
        &typo,
        "api:\n  listen: 127.0.0.1:7400\nweb:\n  lisen: 127.0.0.1:8080\n",
    )
    .unwrap();
    for args in [&["validate-config"][..], &["--validate-config"][..]] {
        let (code, text) = validate(args, &typo);
        assert_eq!(code, Some(64), "{text}");
        assert!(text.contains("typo.yaml:4:"), "names file and line: {text}");
        assert!(text.contains("web.lisen"), "names the key path: {text}");
    }
    // Every semantic error is listed, not just the first.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "api:\n  listen: \"::1:7400\"\nweb:\n  listen: 127.0.0.1:0\n",
    )
    .unwrap();
    let (code, text) = validate(&["validate-config"], &bad);
    assert_eq!(code, Some(64), "{text}");
    assert!(
        text.contains("api.listen") && text.contains("web.listen"),
        "both errors: {text}"
    );

    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "api:\n  listen: 127.0.0.1:7400\n").unwrap();
    let (code, text) = validate(&["validate-config"], &good);
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn the_demo_shows_firings_decisions_and_runs() {
    let mut cmd = Command::new(binary("cronstable"));
    cmd.args([
        "demo",
        "--nodes",
        "1",
        "--duration",
        "8",
        "--web-listen",
        "127.0.0.1:0",
    ]);
    let mut demo = Proc::spawn("demo", cmd);
    assert_eq!(demo.wait_exit(), Some(0), "{}", demo.log());
    let log = demo.log();
    for needle in [
        "firing decided",
        "run started",
        "run finished",
        "tick-leader-only",
        "hello-at-boot",
    ] {
        assert!(log.contains(needle), "demo log lacks {needle:?}:\n{log}");
    }
}

#[test]
fn the_default_demo_is_a_three_node_gossip_cluster_that_elects_and_runs() {
    let mut cmd = Command::new(binary("cronstable"));
    cmd.args(["demo", "--duration", "25", "--web-listen", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null());
    let mut demo = Proc::spawn("demo", cmd);
    // One of the three in-process coordinators becomes leader; Leader jobs then run.
    demo.wait_log("this node is now the leader");
    demo.wait_log("cluster: quorum gained");
    assert_eq!(demo.wait_exit(), Some(0), "{}", demo.log());
    let log = demo.log();
    assert!(log.contains("gossip manager started"), "{log}");
    assert_eq!(
        log.matches("this node is now the leader").count(),
        1,
        "exactly one leader in a healthy demo cluster:\n{log}"
    );
    assert!(!log.contains("ERROR"), "{log}");
}

/// `cronstable demo --spread` (the spread grand tour): the leader-gated jobs fan out over the
/// three nodes, a stopped node's jobs move to the others, and they come back when it returns.
#[test]
fn the_spread_demo_fans_jobs_out_and_moves_a_stopped_nodes_jobs() {
    use std::io::Write;
    let mut cmd = Command::new(binary("cronstable"));
    cmd.args([
        "demo",
        "--spread",
        "--duration",
        "90",
        "--web-listen",
        "127.0.0.1:0",
    ]);
    let mut demo = Proc::spawn_interactive("demo", cmd);
    let mut stdin = demo.take_stdin().unwrap();
    // The latest "jobs owned" line of the demo's report: node -> count.
    let owned = |log: &str| -> Option<Vec<(String, usize)>> {
        let line = log.lines().rev().find(|l| l.contains("jobs owned:"))?;
        let counts = line.split_once("jobs owned:")?.1;
        counts
            .split(',')
            .map(|c| {
                let (node, n) = c.trim().rsplit_once(' ')?;
                Some((node.to_owned(), n.parse().ok()?))
            })
            .collect()
    };
    let fanned = wait_for("the jobs to fan out over all three nodes", || {
        let counts = owned(&demo.log())?;
        (counts.len() == 3 && counts.iter().all(|(_, n)| *n >= 1)).then_some(counts)
    });
    assert_eq!(
        fanned.iter().map(|(_, n)| n).sum::<usize>(),
        8,
        "{fanned:?}"
    );
    assert!(demo.log().contains("owner cronstable-"), "{}", demo.log());

    writeln!(stdin, "stop cronstable-b").unwrap();
    demo.wait_log("stopped cronstable-b");
    wait_for("b's jobs to move to a and c", || {
        let log = demo.log();
        let after = &log[log.rfind("stopped cronstable-b")?..];
        let counts = owned(after)?;
        let b = counts.iter().find(|(n, _)| n == "cronstable-b")?.1;
        (b == 0 && counts.iter().map(|(_, n)| n).sum::<usize>() == 8).then_some(())
    });
    writeln!(stdin, "start cronstable-b").unwrap();
    demo.wait_log("started cronstable-b");
    wait_for("b to own jobs again", || {
        let log = demo.log();
        let after = &log[log.rfind("started cronstable-b")?..];
        let counts = owned(after)?;
        (counts.iter().find(|(n, _)| n == "cronstable-b")?.1 >= 1).then_some(())
    });
    demo.signal(2);
    demo.wait_exit();
    assert!(!demo.log().contains("ERROR"), "{}", demo.log());
}
