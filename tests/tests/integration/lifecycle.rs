//! The edges of a node's life, with real processes: a coordinator that has just started, a
//! backend whose start fails and is retried, and a shim whose coordinator is briefly gone.
//! A node that does not know yet does not act; a failed start heals without a restart.
//!
//! Each test here failed on the code before the lifecycle fixes (see the closing note of the
//! lifecycle issue): the first answered RUN from an election-off view for ten seconds, the
//! lease store that could not be prepared stayed "no manager" for good, the Leader `@reboot`
//! one-shot asked while the gossip manager could not start was skipped for good, and a shim
//! whose election-off coordinator restarted skipped its Leader jobs meanwhile.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use cronstable_tests::etcd::Etcd;
use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster};
use cronstable_tests::lease::{Store, start_lease_node};
use cronstable_tests::{Coordinator, http, lines, start_shim, wait_for, wait_for_state};
use serde_json::Value;

/// A crontab with a Leader `@reboot` one-shot, a per-second Leader job and a per-second
/// EveryNode job, each appending its name to `out`.
fn crontab(dir: &Path, out: &Path) -> std::path::PathBuf {
    let path = dir.join("crontab");
    let o = out.display();
    std::fs::write(
        &path,
        format!(
            "# cronstable: name=boot clusterPolicy=Leader\n@reboot echo boot >> {o}\n\
             # cronstable: name=tick clusterPolicy=Leader seconds=true\n* * * * * * echo tick >> {o}\n\
             # cronstable: name=every clusterPolicy=EveryNode seconds=true\n* * * * * * echo every >> {o}\n"
        ),
    )
    .unwrap();
    path
}

/// Waits until `web`'s `GET /cluster` satisfies `ok`; panics with the last body seen.
fn wait_cluster(web: SocketAddr, what: &str, ok: impl Fn(&Value) -> bool) {
    wait_for_state(what, || {
        let v = cluster(web).ok_or("no /cluster answer")?;
        if ok(&v) { Ok(()) } else { Err(v.to_string()) }
    });
}

fn count(out: &Path, what: &str) -> usize {
    lines(out).iter().filter(|l| l.as_str() == what).count()
}

/// Defect 1 of the lifecycle issue: until its backend's first view a node answered from an
/// election-off view. Here the node's peers accept TCP but never answer TLS and its first round
/// closes only after `connectTimeout` (30 s here), so every firing in those seconds is decided
/// before the node knows anything. EveryNode runs; the Leader tick and the Leader `@reboot`
/// one-shot must not.
#[test]
fn a_node_whose_peers_never_answer_tls_acts_on_nothing_but_every_node_jobs_while_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(3, 101);
    // The first round closes only after connectTimeout: 30 s of a node that knows nothing, far
    // more than the few seconds this test needs even on a loaded machine.
    plan.interval = "60s";
    plan.connect_timeout = "30s";
    let files = ClusterFiles::write(dir.path(), &plan);
    // The peers' sockets: the kernel completes the TCP handshake into the backlog, and nothing
    // ever answers the TLS ClientHello.
    let _silent: Vec<TcpListener> = files.nodes[1..]
        .iter()
        .map(|p| TcpListener::bind(p.peer_host()).unwrap())
        .collect();
    let coordinator = files.start(0);

    let out = dir.path().join("runs");
    let shim = start_shim(&crontab(dir.path(), &out), &coordinator.api, &[]);
    // Three EveryNode runs: the shim fires and the coordinator answers.
    wait_for("three EveryNode runs", || {
        (count(&out, "every") >= 3).then_some(())
    });
    let log = coordinator.proc.log();
    assert!(
        log.contains("job=\"tick\"") || log.contains("job=tick"),
        "the Leader tick was never decided:\n{log}"
    );
    assert!(
        log.contains("kind=Reboot"),
        "the @reboot one-shot was never asked:\n{log}"
    );
    assert_eq!(
        count(&out, "tick"),
        0,
        "a Leader tick ran before the node knew anything"
    );
    assert_eq!(count(&out, "boot"), 0, "the Leader @reboot one-shot ran");
    // Not dropped for good either: the one-shot was deferred (it waits for the first view),
    // and never skipped.
    let reboot: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("kind=Reboot") && l.contains("firing decided"))
        .collect();
    assert!(
        !reboot.is_empty()
            && reboot
                .iter()
                .all(|l| l.contains("verdict=\"defer\"") && l.contains("reason=\"starting\"")),
        "the @reboot one-shot must be deferred with reason starting while the node starts:\n{}",
        reboot.join("\n")
    );
    assert!(
        !log.contains("election_off"),
        "answered from an election-off view:\n{log}"
    );
    // What an operator sees meanwhile; and the first round is still pending, so the
    // assertions above were made in the window this test is about.
    let view = cluster(coordinator.web).unwrap();
    assert_eq!(view["manager"], "starting", "{view}");
    assert_eq!(view["quorate"], false, "{view}");
    drop(shim);
}

/// Defect 5: a Leader `@reboot` one-shot asked while the gossip manager's start fails (its
/// `/peer` port is taken) waits, and runs once the manager is up, instead of being skipped for
/// good. One node, no peers: quorum 1, so it leads as soon as its manager runs.
#[test]
fn a_leader_reboot_asked_while_the_gossip_manager_cannot_start_waits_and_then_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(1, 102);
    plan.interval = "1s";
    let files = ClusterFiles::write(dir.path(), &plan);
    let n1 = &files.nodes[0];
    let taken = TcpListener::bind(n1.peer_host()).unwrap();
    let coordinator = files.start(0);
    wait_cluster(coordinator.web, "the manager to fail to start", |v| {
        v["manager_error"].is_string()
    });
    let out = dir.path().join("runs");
    let shim = start_shim(&crontab(dir.path(), &out), &coordinator.api, &[]);
    wait_for("the one-shot to be asked", || {
        let log = coordinator.proc.log();
        log.lines()
            .any(|l| l.contains("kind=Reboot") && l.contains("firing decided"))
            .then_some(())
    });
    assert_eq!(count(&out, "boot"), 0);
    let failing = cluster(coordinator.web).unwrap();
    drop(taken);
    wait_for(
        "the Leader @reboot one-shot to run once the manager is up",
        || (count(&out, "boot") == 1).then_some(()),
    );
    assert_eq!(failing["manager"], "retrying", "{failing}");
    let metrics = http(coordinator.web, "GET", "/metrics").unwrap().body;
    assert!(
        metrics.contains("cronstable_cluster_manager_up 1"),
        "{metrics}"
    );
    drop(shim);
}

/// Defect 2, filesystem: a store directory that cannot be used at start (here a plain file)
/// is retried with backoff, shown in `/cluster` meanwhile, and elects once it can be used: no
/// restart. (The coordinator never creates the directory; the lab's
/// `filesystem_mount` test does this with a real mount under `topology: auto`.)
#[test]
fn a_filesystem_store_that_appears_after_the_start_is_used_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("mnt");
    std::fs::write(&mount, "not a directory yet").unwrap();
    let store = Store::Filesystem(mount.clone());
    let a = start_lease_node(dir.path(), "a", &store, 3);
    wait_cluster(a.web, "the store preparation to fail visibly", |v| {
        v["last_error"].is_string()
    });
    std::fs::remove_file(&mount).unwrap();
    std::fs::create_dir(&mount).unwrap();
    wait_cluster(a.web, "the node to lead once the directory is there", |v| {
        v["is_leader"] == true
    });
    a.proc.wait_log("store can be used now");
    let v = http(a.web, "GET", "/cluster").unwrap().json();
    assert_eq!(v["manager"], "running", "{v}");
    let metrics = http(a.web, "GET", "/metrics").unwrap().body;
    assert!(
        metrics.contains("cronstable_cluster_manager_up 1"),
        "{metrics}"
    );
}

/// Defect 2, etcd: coordinators started before their etcd elect once it is up, without a
/// restart, and never two leaders.
#[test]
fn coordinators_started_before_etcd_elect_once_it_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::planned();
    let store = Store::Etcd(etcd.endpoint());
    let nodes: Vec<Coordinator> = ["a", "b"]
        .iter()
        .map(|n| start_lease_node(dir.path(), n, &store, 3))
        .collect();
    for n in &nodes {
        let v = http(n.web, "GET", "/cluster").unwrap().json();
        assert_eq!(v["is_leader"], false, "{v}");
        assert_eq!(v["quorate"], false, "{v}");
    }
    // What an operator sees while etcd is down: not quorate, with the store's error.
    wait_cluster(nodes[0].web, "the store error on /cluster", |v| {
        v["last_error"].is_string()
    });
    etcd.launch();
    let webs: Vec<_> = nodes.iter().map(|n| n.web).collect();
    let elected =
        cronstable_tests::lease::wait_one_leader(&webs, std::time::Duration::from_secs(30));
    assert!(elected.is_some(), "no leader within 30 s of etcd starting");
}

/// A crontab in `dir` with one per-second Leader job, `tick`, appending its name to the
/// returned output file.
fn leader_tick(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (crontab, out) = (dir.join("crontab"), dir.join("runs"));
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=tick clusterPolicy=Leader seconds=true\n\
             * * * * * * echo tick >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    (crontab, out)
}

/// Defect 4: with election off the coordinator answers RUN for every job; when the shim cannot
/// reach it (a sidecar restart) the shim used the no-manager row and skipped Leader jobs. It
/// remembers the election mode the coordinator stated and keeps running them (killed, the
/// coordinator says no goodbye: the memory's 30-second bound applies).
#[test]
fn a_shim_keeps_running_leader_jobs_while_its_election_off_coordinator_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let (crontab, out) = leader_tick(dir.path());
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&crontab, &coordinator.api, &["--ask-timeout", "300ms"]);
    wait_for("a first run", || (count(&out, "tick") >= 1).then_some(()));
    shim.wait_log("registered with the coordinator");
    drop(coordinator); // SIGKILL
    // Runs decided by the shim alone: the coordinator is gone.
    let before = count(&out, "tick");
    wait_for("two Leader runs with the coordinator down", || {
        (count(&out, "tick") >= before + 2).then_some(())
    });
    shim.wait_log("it last said election is off");
    drop(shim);
}

/// A coordinator started on `config` as it is (no wait for it to listen): one that may fail.
fn start_on(config: &Path) -> cronstable_tests::Proc {
    let mut cmd = std::process::Command::new(cronstable_tests::binary("cronstable"));
    cmd.arg("coordinator").arg("--config").arg(config);
    cronstable_tests::Proc::spawn("coordinator (crash loop)", cmd)
}

/// Issue 29, item 4: the shim's memory of "election off" is what the coordinator said, and a
/// coordinator that stops says what still holds. Stopped gracefully with its config unchanged,
/// an election-off coordinator's shim keeps running Leader jobs while it is away. Stopped after
/// its config was rewritten for a cluster (a node being moved into one) whose new config then
/// fails to start, the shim applies the no-manager row: it must not run Leader jobs beside the
/// cluster's elected leader for the 30 seconds its memory would otherwise be trusted.
#[test]
fn a_coordinator_stopped_into_a_cluster_config_leaves_its_shim_running_no_leader_job() {
    let dir = tempfile::tempdir().unwrap();
    let (crontab, out) = leader_tick(dir.path());
    let first = Coordinator::start(dir.path());
    let (config, api, web) = (first.config.clone(), first.api.clone(), first.web);
    let shim = start_shim(&crontab, &api, &["--ask-timeout", "300ms"]);
    wait_for("a first run", || (count(&out, "tick") >= 1).then_some(()));
    shim.wait_log("registered with the coordinator");

    // A restart with the same config: the farewell keeps "off", so the Leader job runs on.
    let mut first = first;
    first.proc.signal(15);
    assert_eq!(first.proc.wait_exit(), Some(0), "{}", first.proc.log());
    let before = count(&out, "tick");
    wait_for("two Leader runs while the coordinator is away", || {
        (count(&out, "tick") >= before + 2).then_some(())
    });
    shim.wait_log("it last said election is off");
    drop(first);

    // Back, then stopped after its config was rewritten for a cluster that cannot start.
    let second = Coordinator::start_with(config.clone(), api.clone(), web);
    wait_for("Leader runs after the restart", || {
        (count(&out, "tick") >= before + 4).then_some(())
    });
    let original = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{original}cluster:\n  backend: etcd\n  electionName: moved-into-a-cluster\n"),
    )
    .unwrap();
    let mut second = second;
    second.proc.signal(15);
    assert_eq!(second.proc.wait_exit(), Some(0), "{}", second.proc.log());
    // Its next start fails on that config, as it would in a crash loop.
    let mut restart = start_on(&config);
    assert_ne!(restart.wait_exit(), Some(0), "{}", restart.log());

    // The shim decides alone now: it must skip the Leader job under the no-manager rule.
    let skipped = "applying the no-manager rule";
    wait_for("a Leader firing skipped with the coordinator away", || {
        shim.log().contains(skipped).then_some(())
    });
    let runs = count(&out, "tick");
    let seen = shim.log().matches(skipped).count();
    wait_for("two more Leader firings decided by the shim alone", || {
        (shim.log().matches(skipped).count() >= seen + 2).then_some(())
    });
    assert_eq!(
        count(&out, "tick"),
        runs,
        "the shim ran a Leader job after its coordinator left for a cluster; shim log:\n{}",
        shim.log()
    );
    drop(shim);
}

/// Issue 43, item 4: the config is edited *after* the graceful stop (the farewell said "off",
/// truthfully at the time) into a cluster config with an error, and the coordinator's next
/// start fails. Nothing can tell the shim; its memory of "off" must end within 30 s of the
/// farewell, after which Leader firings fall to the no-manager rule (they skip).
///
/// Red on the code before the bound: "off" was trusted for 5 minutes, so the shim ran every
/// Leader firing beside the cluster's leader for that long.
#[test]
fn a_config_edited_after_the_farewell_ends_leader_runs_within_thirty_seconds() {
    const BOUND: Duration = Duration::from_secs(30);
    let dir = tempfile::tempdir().unwrap();
    let (crontab, out) = leader_tick(dir.path());
    let mut first = Coordinator::start(dir.path());
    let config = first.config.clone();
    let shim = start_shim(&crontab, &first.api, &["--ask-timeout", "300ms"]);
    wait_for("a first run", || (count(&out, "tick") >= 1).then_some(()));
    shim.wait_log("registered with the coordinator");

    first.proc.signal(15);
    assert_eq!(first.proc.wait_exit(), Some(0), "{}", first.proc.log());
    let farewell = tokio::time::Instant::now();
    // Edited after the farewell: a cluster section this build refuses (no endpoints).
    let original = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{original}cluster:\n  backend: etcd\n  electionName: moved-into-a-cluster\n"),
    )
    .unwrap();
    let mut restart = start_on(&config);
    assert_eq!(restart.wait_exit(), Some(64), "{}", restart.log());

    // The memory's bound, plus one firing and the ask timeout.
    let skipped = "applying the no-manager rule";
    let deadline = BOUND + Duration::from_secs(3);
    while !shim.log().contains(skipped) {
        assert!(
            farewell.elapsed() < deadline,
            "the shim still trusts \"election off\" {:?} after the farewell; shim log:\n{}",
            farewell.elapsed(),
            shim.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let runs = count(&out, "tick");
    let seen = shim.log().matches(skipped).count();
    wait_for("two more Leader firings skipped by the shim alone", || {
        (shim.log().matches(skipped).count() >= seen + 2).then_some(())
    });
    assert_eq!(count(&out, "tick"), runs, "a Leader run after the bound");
    drop(shim);
}
