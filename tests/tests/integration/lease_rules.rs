//! Issue 5's rules on the fenced lease backends, each on a real etcd and on a filesystem
//! store, with real coordinators and shims:
//!
//! - a manual run (`POST /jobs/{name}/start`) is never gated: a follower runs a Leader job
//!   when asked, and an unknown job is a 404 with a readable JSON reason (inventory §6);
//! - a retry re-asks the gate before its relaunch (RTY-01), and a transient denial, the store
//!   gone so the holder is no longer quorate, defers it until the store is back rather than
//!   dropping it (RTY-02).

use std::path::{Path, PathBuf};
use std::time::Duration;

use cronstable_tests::etcd::Etcd;
use cronstable_tests::lease::{Store, start_lease_node, wait_one_leader};
use cronstable_tests::{
    Coordinator, PATIENCE, Proc, binary, http, start_job, wait_for, wait_for_state,
};
use serde_json::Value;

const TTL: u64 = 3;

/// A shim for `jobs` (a YAML job file) against `coordinator`, named `node` in its runs.
fn shim(jobs: &Path, coordinator: &Coordinator) -> Proc {
    let mut cmd = std::process::Command::new(binary("cronstable-shim"));
    cmd.arg("--jobs")
        .arg(jobs)
        .arg("--coordinator")
        .arg(&coordinator.api);
    Proc::spawn("shim", cmd)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn history(node: &Coordinator, job: &str) -> Vec<Value> {
    http(node.web, "GET", &format!("/jobs/{job}"))
        .ok()
        .filter(|r| r.status == 200)
        .and_then(|r| r.json()["history"].as_array().cloned())
        .unwrap_or_default()
}

/// `count` nodes on `store`, each with a shim for the same job file; returns them leader first.
fn nodes_on(dir: &Path, store: &Store, jobs: &Path, count: usize) -> (Vec<Coordinator>, Vec<Proc>) {
    let mut nodes: Vec<Coordinator> = ["a", "b", "c"][..count]
        .iter()
        .map(|n| start_lease_node(dir, n, store, TTL))
        .collect();
    let webs: Vec<_> = nodes.iter().map(|c| c.web).collect();
    let (leader, _) = wait_one_leader(&webs, PATIENCE).expect("one leader");
    nodes.swap(0, leader);
    let shims = nodes.iter().map(|c| shim(jobs, c)).collect();
    for n in &nodes {
        wait_for("the shim registered", || {
            let id = http(n.web, "GET", "/job-set-id").ok()?.json();
            (id["jobs"] == 1).then_some(())
        });
    }
    (nodes, shims)
}

fn manual_runs_are_never_gated(store: Store, dir: &Path) {
    let out = dir.join("runs");
    let jobs = dir.join("jobs.yaml");
    std::fs::write(
        &jobs,
        format!(
            "jobs:\n  - name: migrate\n    schedule: \"0 0 1 1 *\"\n    clusterPolicy: Leader\n    \
             command: echo \"$CRONSTABLE_NODE\" >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let (nodes, _shims) = nodes_on(dir, &store, &jobs, 2);
    let follower = &nodes[1];
    let r = start_job(follower.web, "migrate");
    assert_eq!(r.status, 202, "{}", r.body);
    let ran = wait_for("the follower's manual run", || {
        let l = lines(&out);
        (!l.is_empty()).then_some(l)
    });
    assert_eq!(ran, vec!["b".to_owned()], "ran on the follower only");
    let decided = wait_for("the manual decision in b's ledger", || {
        history(follower, "migrate")
            .into_iter()
            .find(|r| r["event"] == "decided" && r["kind"] == "manual")
    });
    assert_eq!(decided["verdict"], "run");
    assert_eq!(decided["reason"], "manual");

    let r = http(follower.web, "POST", "/jobs/no-such-job/start").unwrap();
    assert_eq!(r.status, 404, "{}", r.body);
    let reason = r.json()["error"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("no-such-job"), "{}", r.body);
}

/// A retry on the holder while the store is gone: `cut` takes the store away, `heal` brings it
/// back.
fn a_retry_defers_through_a_store_outage(
    store: Store,
    dir: &Path,
    cut: impl FnOnce(),
    heal: impl FnOnce(),
) {
    let (out, failed, healed) = (dir.join("ok"), dir.join("failed"), dir.join("healed"));
    let jobs = dir.join("jobs.yaml");
    std::fs::write(
        &jobs,
        format!(
            "jobs:\n  - name: flaky\n    schedule: \"0 0 1 1 *\"\n    clusterPolicy: Leader\n    \
             retries: 2\n    retryBackoff: 15s\n    command: \"if [ -e {h} ]; then echo \
             $CRONSTABLE_ATTEMPT >> {o}; else echo $CRONSTABLE_ATTEMPT >> {f}; exit 1; fi\"\n",
            h = healed.display(),
            o = out.display(),
            f = failed.display()
        ),
    )
    .unwrap();
    // One node: when the store comes back it leads again, so the retry stays its own. (With a
    // rival, the lease can change hands across the outage: then the retry is a confirmed
    // ownership change, RTY-03, which the handoff tests cover.)
    let (nodes, _shims) = nodes_on(dir, &store, &jobs, 1);
    let leader = &nodes[0];
    // Attempt 1 is a manual run (ungated) that fails; its retry is gated.
    let r = start_job(leader.web, "flaky");
    assert_eq!(r.status, 202, "{}", r.body);
    wait_for("the first attempt's failure", || {
        (lines(&failed) == ["1"]).then_some(())
    });
    cut();
    wait_for_state("the holder loses its quorum", || {
        let v = http(leader.web, "GET", "/cluster")
            .map_err(|e| e.to_string())?
            .json();
        (v["quorate"] == false).then_some(()).ok_or(v.to_string())
    });
    std::fs::write(&healed, "").unwrap();
    let deferred = wait_for("the retry deferred for lack of quorum", || {
        history(leader, "flaky")
            .into_iter()
            .find(|r| r["event"] == "decided" && r["kind"] == "retry" && r["verdict"] == "defer")
    });
    assert_eq!(deferred["reason"], "no_quorum", "{deferred}");
    assert_eq!(deferred["attempt"], 2);
    assert!(
        lines(&out).is_empty(),
        "nothing ran while the store was gone"
    );
    heal();
    let ran = wait_for_state("the retry once the store is back", || {
        let l = lines(&out);
        if l.is_empty() {
            let cluster = nodes
                .iter()
                .map(|n| {
                    http(n.web, "GET", "/cluster")
                        .map(|r| r.body)
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>();
            let tail: Vec<Value> = history(leader, "flaky").into_iter().rev().take(3).collect();
            Err(format!("cluster {cluster:?}; newest records {tail:?}"))
        } else {
            Ok(l)
        }
    });
    assert_eq!(ran, vec!["2".to_owned()], "attempt 2 ran, once");
    assert_eq!(lines(&failed), vec!["1".to_owned()]);
}

#[test]
fn etcd_manual_runs_are_never_gated() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    manual_runs_are_never_gated(Store::Etcd(etcd.endpoint()), dir.path());
}

#[test]
fn filesystem_manual_runs_are_never_gated() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    manual_runs_are_never_gated(Store::Filesystem(store), dir.path());
}

#[test]
fn etcd_rty_01_02_a_retry_defers_while_etcd_is_frozen() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    a_retry_defers_through_a_store_outage(
        Store::Etcd(etcd.endpoint()),
        dir.path(),
        || etcd.freeze(),
        || etcd.thaw(),
    );
}

#[test]
fn filesystem_rty_01_02_a_retry_defers_while_the_store_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store: PathBuf = dir.path().join("store");
    let away = dir.path().join("store-away");
    let (s1, a1) = (store.clone(), away.clone());
    a_retry_defers_through_a_store_outage(
        Store::Filesystem(store.clone()),
        dir.path(),
        // Renamed away, the lease directory is simply not there: every round fails.
        move || std::fs::rename(&s1, &a1).unwrap(),
        move || std::fs::rename(&away, &store).unwrap(),
    );
}

/// `cluster.leaderEligible: false` (issue 46, item 6, on the lease backends): such a node never
/// takes the lease, not while another node holds it and not after that node stepped down and
/// left it free; it says so in its lease block; a node that may lead takes it.
fn a_node_that_may_not_lead_never_holds_the_lease(dir: &Path, store: &Store) {
    let backend = cronstable_tests::lease::backend_yaml(store, TTL);
    if let Store::Filesystem(path) = store {
        std::fs::create_dir_all(path).unwrap();
    }
    let node = |name: &str, eligible: bool| {
        Coordinator::start_named(
            dir,
            name,
            &format!("cluster:\n  nodeName: {name}\n  leaderEligible: {eligible}\n{backend}"),
        )
    };
    let witness = node("a", false);
    let mut holder = node("b", true);
    assert_eq!(
        wait_one_leader(&[witness.web, holder.web], PATIENCE).map(|(i, _)| i),
        Some(1),
        "only the eligible node leads"
    );
    let block = cronstable_tests::gossip::cluster(witness.web).unwrap();
    assert_eq!(block["lease"]["leaderEligible"], false, "{block}");
    // The holder stops gracefully and releases the lease: free for anyone to take at once.
    holder.proc.signal(15);
    assert_eq!(holder.proc.wait_exit(), Some(0), "{}", holder.proc.log());
    // A follower takes a released lease within half a second; wait out a whole ttl and more
    // (the lease's own bound) and the witness still does not hold it.
    std::thread::sleep(Duration::from_secs(TTL + 2));
    assert_eq!(cronstable_tests::lease::is_leader(witness.web), Some(false));
    let c = node("c", true);
    assert_eq!(
        wait_one_leader(&[witness.web, c.web], PATIENCE).map(|(i, _)| i),
        Some(1)
    );
}

#[test]
fn filesystem_a_node_that_may_not_lead_never_holds_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::Filesystem(dir.path().join("store"));
    a_node_that_may_not_lead_never_holds_the_lease(dir.path(), &store);
}

#[test]
fn etcd_a_node_that_may_not_lead_never_holds_the_lease() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    a_node_that_may_not_lead_never_holds_the_lease(dir.path(), &Store::Etcd(etcd.endpoint()));
}
