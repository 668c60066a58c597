//! Issue 5's manual-run and retry rules on a real three-node gossip cluster over mTLS, with a
//! shim beside every coordinator (the lease backends' versions are in `lease_rules.rs`):
//!
//! - a manual run (`POST /jobs/{name}/start`) is never gated: a follower runs a Leader job when
//!   asked, and an unknown job is a 404 with a readable JSON reason (inventory §6);
//! - a retry re-asks the gate before its relaunch (RTY-01), and a transient denial, the leader
//!   cut off from both peers so it has no quorum, defers it until the quorum is back rather than
//!   dropping it or running it (RTY-02);
//! - a retry whose gate then names another leader, a confirmed ownership change, stops the local
//!   sequence (RTY-03), and as gossip has no shared store the shim abandons it with a WARNING and
//!   a cancelled run-history record; nobody runs the remaining attempts (RTY-05).

use std::path::Path;
use std::process::Command;

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster};
use cronstable_tests::{
    Coordinator, Proc, binary, http, lines, start_job, wait_for, wait_for_state,
};
use serde_json::Value;

/// Linux signal numbers (the tests crate does not link libc).
const SIGSTOP: i32 = 19;
const SIGCONT: i32 = 18;

/// The three coordinators, each with a shim running `jobs`; waits until n1 leads a quorate
/// cluster and every shim has registered.
fn cluster_with(
    dir: &Path,
    subnet: u8,
    jobs: &Path,
) -> (ClusterFiles, Vec<Coordinator>, Vec<Proc>) {
    let files = ClusterFiles::write(dir, &ClusterPlan::new(3, subnet));
    let nodes: Vec<Coordinator> = (0..3).map(|i| files.start(i)).collect();
    for n in &nodes {
        wait_for_state("n1 leads a quorate cluster", || {
            let v = cluster(n.web).ok_or("no /cluster answer")?;
            (v["quorate"] == true && v["leader"] == "n1")
                .then_some(())
                .ok_or(v.to_string())
        });
    }
    let shims = nodes
        .iter()
        .map(|c| {
            let mut cmd = Command::new(binary("cronstable-shim"));
            cmd.arg("--jobs").arg(jobs).arg("--coordinator").arg(&c.api);
            Proc::spawn("shim", cmd)
        })
        .collect();
    for n in &nodes {
        wait_for("the shim registered", || {
            let id = http(n.web, "GET", "/job-set-id").ok()?.json();
            (id["jobs"] == 1).then_some(())
        });
    }
    (files, nodes, shims)
}

fn history(node: &Coordinator, job: &str) -> Vec<Value> {
    http(node.web, "GET", &format!("/jobs/{job}"))
        .ok()
        .filter(|r| r.status == 200)
        .and_then(|r| r.json()["history"].as_array().cloned())
        .unwrap_or_default()
}

#[test]
fn gossip_manual_runs_are_never_gated() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let jobs = dir.path().join("jobs.yaml");
    std::fs::write(
        &jobs,
        format!(
            "jobs:\n  - name: migrate\n    schedule: \"0 0 1 1 *\"\n    clusterPolicy: Leader\n    \
             command: echo \"$CRONSTABLE_NODE\" >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let (_files, nodes, _shims) = cluster_with(dir.path(), 95, &jobs);
    let follower = &nodes[2];
    let r = start_job(follower.web, "migrate");
    assert_eq!(r.status, 202, "{}", r.body);
    let ran = wait_for("the follower's manual run", || {
        let l = lines(&out);
        (!l.is_empty()).then_some(l)
    });
    assert_eq!(ran, vec!["n3".to_owned()], "ran on the follower only");
    let decided = wait_for("the manual decision in n3's ledger", || {
        history(follower, "migrate")
            .into_iter()
            .find(|r| r["event"] == "decided" && r["kind"] == "manual")
    });
    assert_eq!(decided["verdict"], "run");
    assert_eq!(decided["reason"], "manual");
    assert!(
        history(&nodes[0], "migrate").is_empty(),
        "the leader did not run it"
    );

    let r = http(follower.web, "POST", "/jobs/no-such-job/start").unwrap();
    assert_eq!(r.status, 404, "{}", r.body);
    let reason = r.json()["error"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("no-such-job"), "{}", r.body);
}

#[test]
fn gossip_rty_01_02_a_retry_defers_while_the_leader_has_no_quorum() {
    let dir = tempfile::tempdir().unwrap();
    let (out, failed, healed) = (
        dir.path().join("ok"),
        dir.path().join("failed"),
        dir.path().join("healed"),
    );
    let jobs = dir.path().join("jobs.yaml");
    std::fs::write(
        &jobs,
        format!(
            "jobs:\n  - name: flaky\n    schedule: \"0 0 1 1 *\"\n    clusterPolicy: Leader\n    \
             retries: 2\n    retryBackoff: 20s\n    command: \"if [ -e {h} ]; then echo \
             $CRONSTABLE_NODE $CRONSTABLE_ATTEMPT >> {o}; else echo $CRONSTABLE_ATTEMPT >> {f}; \
             exit 1; fi\"\n",
            h = healed.display(),
            o = out.display(),
            f = failed.display()
        ),
    )
    .unwrap();
    let (_files, nodes, _shims) = cluster_with(dir.path(), 96, &jobs);
    let leader = &nodes[0];
    // Attempt 1 is a manual run (ungated) that fails; its retry is gated.
    let r = start_job(leader.web, "flaky");
    assert_eq!(r.status, 202, "{}", r.body);
    wait_for("the first attempt's failure", || {
        (lines(&failed) == ["1"]).then_some(())
    });
    // Both peers stop answering: n1 is alone, without a majority, but still the node that
    // sorts first, so the denial is transient, not an ownership change.
    for n in &nodes[1..] {
        n.proc.signal(SIGSTOP);
    }
    wait_for_state("n1 loses its quorum", || {
        let v = cluster(leader.web).ok_or("no /cluster answer")?;
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
    assert!(lines(&out).is_empty(), "nothing ran without a quorum");
    for n in &nodes[1..] {
        n.proc.signal(SIGCONT);
    }
    let ran = wait_for_state("the retry once the quorum is back", || {
        let l = lines(&out);
        if l.is_empty() {
            let tail: Vec<Value> = history(leader, "flaky").into_iter().rev().take(3).collect();
            Err(format!(
                "cluster {:?}; newest records {tail:?}",
                cluster(leader.web)
            ))
        } else {
            Ok(l)
        }
    });
    assert_eq!(ran, vec!["n1 2".to_owned()], "attempt 2 ran on n1, once");
    assert_eq!(lines(&failed), vec!["1".to_owned()]);
    for n in &nodes[1..] {
        assert!(
            !history(n, "flaky").iter().any(|r| r["event"] == "started"),
            "{} did not run it",
            n.proc.name
        );
    }
}

#[test]
fn gossip_rty_03_05_a_retry_that_loses_the_leadership_is_abandoned_visibly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let jobs = dir.path().join("jobs.yaml");
    std::fs::write(
        &jobs,
        format!(
            "jobs:\n  - name: flaky\n    schedule: \"0 0 1 1 *\"\n    clusterPolicy: Leader\n    \
             retries: 2\n    retryBackoff: 20s\n    command: \"echo $CRONSTABLE_NODE \
             $CRONSTABLE_ATTEMPT >> {}; exit 1\"\n",
            out.display()
        ),
    )
    .unwrap();
    let shim_for = |c: &Coordinator| {
        let mut cmd = Command::new(binary("cronstable-shim"));
        cmd.arg("--jobs")
            .arg(&jobs)
            .arg("--coordinator")
            .arg(&c.api);
        Proc::spawn(&format!("shim {}", c.proc.name), cmd)
    };
    // n2 and n3 are a quorum of three; n2 sorts first among them, so it leads until n1 joins.
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 98));
    let (n2, n3) = (files.start(1), files.start(2));
    for n in [&n2, &n3] {
        wait_for_state("n2 leads a quorate cluster", || {
            let v = cluster(n.web).ok_or("no /cluster answer")?;
            (v["quorate"] == true && v["leader"] == "n2")
                .then_some(())
                .ok_or(v.to_string())
        });
    }
    let shim2 = shim_for(&n2);
    let _shim3 = shim_for(&n3);
    wait_for("n2's shim registered", || {
        let id = http(n2.web, "GET", "/job-set-id").ok()?.json();
        (id["jobs"] == 1).then_some(())
    });
    // Attempt 1 is a manual run (ungated) on n2; it fails, and its retry waits 20 s.
    let r = start_job(n2.web, "flaky");
    assert_eq!(r.status, 202, "{}", r.body);
    wait_for("the first attempt's failure", || {
        (lines(&out) == ["n2 1"]).then_some(())
    });
    // n1 joins during the backoff and takes the leadership: for n2's retry that is a confirmed
    // ownership change, not a transient denial.
    let n1 = files.start(0);
    let _shim1 = shim_for(&n1);
    wait_for_state("n1 leads", || {
        let v = cluster(n2.web).ok_or("no /cluster answer")?;
        (v["quorate"] == true && v["leader"] == "n1")
            .then_some(())
            .ok_or(v.to_string())
    });
    shim2.wait_log("retry abandoned");
    let cancelled = wait_for("the cancelled record on n2", || {
        history(&n2, "flaky")
            .into_iter()
            .find(|r| r["event"] == "skipped" && r["reason"] == "not_owner")
    });
    assert_eq!(cancelled["attempt"], 2, "{cancelled}");
    let message = cancelled["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("retry abandoned") && message.contains("no shared handoff store"),
        "{cancelled}"
    );
    let h2 = history(&n2, "flaky");
    let handed = h2.iter().find(|r| r["event"] == "handed_off").unwrap();
    assert_eq!(handed["transferred"], false, "{handed}");
    let denied = h2
        .iter()
        .find(|r| r["event"] == "decided" && r["kind"] == "retry")
        .unwrap();
    assert_eq!(denied["verdict"], "skip", "{denied}");
    assert!(
        shim2.log().contains("WARN"),
        "the abandon is a WARNING:\n{}",
        shim2.log()
    );
    // Nobody runs attempts 2 and 3: not n2 (it stopped), not n1 (nothing was handed over).
    assert_eq!(lines(&out), ["n2 1"]);
    for n in [&n1, &n3] {
        assert!(
            !history(n, "flaky").iter().any(|r| r["event"] == "started"),
            "{} did not run it",
            n.proc.name
        );
    }
}
