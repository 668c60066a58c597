//! `@reboot` on a gossip cluster (inventory §5.1), with real coordinators over mTLS and real
//! shims: Leader and PreferLeader one-shots are deferred until the cluster converges and run
//! once, EveryNode ones run on every node at once, and a node that boots again does not re-run a
//! one-shot its peers advertise in `ran_reboot_jobs`.

use std::path::Path;
use std::process::Command;

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster};
use cronstable_tests::{Coordinator, Proc, binary, http, wait_for_state};
use serde_json::Value;

/// The same job file on every node (the job-set ID must agree); `$NODE` and `$OUT` differ.
const CRONTAB: &str = "\
# cronstable: name=migrate clusterPolicy=Leader
@reboot echo \"$NODE migrate\" >> \"$OUT\"
# cronstable: name=announce clusterPolicy=PreferLeader
@reboot echo \"$NODE announce\" >> \"$OUT\"
# cronstable: name=warm clusterPolicy=EveryNode
@reboot echo \"$NODE warm\" >> \"$OUT\"
";

fn shim(dir: &Path, coordinator: &Coordinator, node: &str) -> Proc {
    let crontab = dir.join(format!("crontab-{node}"));
    std::fs::write(&crontab, CRONTAB).unwrap();
    let mut cmd = Command::new(binary("cronstable-shim"));
    cmd.arg("--crontab")
        .arg(&crontab)
        .arg("--coordinator")
        .arg(&coordinator.api)
        .env("NODE", node)
        .env("OUT", dir.join(format!("runs-{node}")));
    Proc::spawn(&format!("shim {node}"), cmd)
}

/// Every "NODE JOB" line the shims wrote.
fn runs(dir: &Path) -> Vec<String> {
    let mut all = Vec::new();
    for node in ["n1", "n2", "n3"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(format!("runs-{node}"))) {
            all.extend(text.lines().map(str::to_owned));
        }
    }
    all.sort();
    all
}

fn count(runs: &[String], job: &str) -> usize {
    runs.iter()
        .filter(|l| l.ends_with(&format!(" {job}")))
        .count()
}

/// The @reboot decisions a node's ledger holds for `job`, oldest first, as (verdict, reason).
fn reboot_decisions(node: &Coordinator, job: &str) -> Vec<(String, String)> {
    let Ok(r) = http(node.web, "GET", &format!("/jobs/{job}")) else {
        return Vec::new();
    };
    if r.status != 200 {
        return Vec::new();
    }
    let mut out: Vec<(String, String)> = r.json()["history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| h["kind"] == "reboot" && h["event"] == "decided")
        .map(|h| {
            (
                h["verdict"].as_str().unwrap_or("").to_owned(),
                h["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    out.reverse();
    out
}

/// Waits until every node's one-shot of `job` got a final answer (run or skip).
fn wait_settled(nodes: &[&Coordinator], job: &str) -> Vec<(String, String)> {
    wait_for_state(&format!("a final decision of {job} on every node"), || {
        let finals: Vec<(String, String)> = nodes
            .iter()
            .filter_map(|n| {
                reboot_decisions(n, job)
                    .into_iter()
                    .rfind(|(v, _)| v != "defer")
            })
            .collect();
        if finals.len() == nodes.len() {
            Ok(finals)
        } else {
            Err(format!("final decisions so far: {finals:?}"))
        }
    })
}

/// The leader `node` names once it is quorate. Which node leads after a joint boot depends on
/// who first has a quorum of agreeing peers (the shims register one by one, and each changes
/// its node's job set); once one leads it keeps the lead (sticky leadership).
fn any_leader(node: &Coordinator) -> String {
    wait_for_state("a quorate leader", || {
        let v: Value = cluster(node.web).ok_or("no /cluster answer")?;
        match v["leader"].as_str() {
            Some(l) if v["quorate"] == true => Ok(l.to_owned()),
            _ => Err(format!("/cluster {v}")),
        }
    })
}

#[test]
fn rbt_01_05_06_deferred_one_shots_run_once_and_a_rebooted_leader_does_not_rerun_them() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 71));
    let mut coordinators: Vec<Option<Coordinator>> = (0..3).map(|i| Some(files.start(i))).collect();
    let names = ["n1", "n2", "n3"];
    // Shims start with their coordinators: no peer has been polled yet, so the deferred kinds
    // must wait for convergence instead of running (or skipping) at once (RBT-01, RBT-02).
    let mut shims: Vec<Option<Proc>> = (0..3)
        .map(|i| {
            Some(shim(
                dir.path(),
                coordinators[i].as_ref().unwrap(),
                names[i],
            ))
        })
        .collect();

    let leader = any_leader(coordinators[0].as_ref().unwrap());
    let l = names.iter().position(|n| *n == leader).unwrap();
    let all: Vec<&Coordinator> = coordinators.iter().flatten().collect();
    let migrate = wait_settled(&all, "migrate");
    let announce = wait_settled(&all, "announce");
    let ran = wait_for_state("the one-shots' output", || {
        let r = runs(dir.path());
        if count(&r, "migrate") >= 1 && count(&r, "announce") >= 1 && count(&r, "warm") >= 3 {
            Ok(r)
        } else {
            Err(format!("runs so far: {r:?}"))
        }
    });
    // Leader: once, on the quorum-gated leader (RBT-03); PreferLeader: once, on the lowest
    // reachable agreeing node (RBT-04); EveryNode: on every node, not deferred (RBT-05).
    assert_eq!(count(&ran, "migrate"), 1, "{ran:?} {migrate:?}");
    assert!(ran.contains(&format!("{leader} migrate")), "{ran:?}");
    assert_eq!(count(&ran, "announce"), 1, "{ran:?} {announce:?}");
    assert!(ran.contains(&"n1 announce".to_owned()), "{ran:?}");
    assert_eq!(count(&ran, "warm"), 3, "{ran:?}");
    // The deferred one-shots were woken by the coordinator over Watch (RunDeferred), not by
    // the shim's own fallback re-ask.
    let pushed = all[0]
        .proc
        .log()
        .lines()
        .filter(|l| l.contains("deferred @reboot one-shot may be decided now"))
        .count();
    assert!(pushed >= 2, "n1 pushed {pushed} RunDeferred instructions");
    for n in &all {
        let warm = reboot_decisions(n, "warm");
        assert!(
            warm.iter().all(|(v, _)| v == "run"),
            "EveryNode @reboot is never deferred: {warm:?}"
        );
    }

    // The record reaches the peers with the leader's next /peer body; until they have it, a
    // reboot of the leader could run the one-shots again (gossip keeps no durable record,
    // RBT-09).
    for (i, n) in all.iter().enumerate() {
        if i == l {
            continue;
        }
        wait_for_state("the peers learn what ran", || {
            let log = n.proc.log();
            let learned = log
                .lines()
                .filter(|l| l.contains("@reboot one-shots known to have run"))
                .any(|l| l.contains("\"announce\", \"migrate\""));
            if learned {
                Ok(())
            } else {
                Err("ran_reboot_jobs not merged yet".to_owned())
            }
        });
    }
    drop(all);
    // The leader boots again: coordinator and shim SIGKILLed and restarted. Another node leads
    // meanwhile and keeps the lead; the rebooted node's new one-shots are deferred again, but
    // its peers advertise that both already ran under this job set, so neither runs twice
    // (RBT-06). EveryNode boot work runs again.
    drop(shims[l].take());
    drop(coordinators[l].take());
    coordinators[l] = Some(files.start(l));
    let n1 = coordinators[l].as_ref().unwrap();
    shims[l] = Some(shim(dir.path(), n1, names[l]));
    let other = (l + 1) % 3;
    // Whoever leads now (a node back within two rounds of a new leader's first lead may still
    // win by the lowest-name rule): what matters is that the one-shots do not run again.
    any_leader(n1);
    for job in ["migrate", "announce"] {
        let decided = wait_for_state(&format!("n1's new one-shot of {job} answered"), || {
            let d = reboot_decisions(n1, job);
            match d.iter().rfind(|(v, _)| v != "defer") {
                Some(last) => Ok(last.clone()),
                None => Err(format!("n1's decisions so far: {d:?}")),
            }
        });
        let known = |c: &Coordinator| -> Vec<String> {
            c.proc
                .log()
                .lines()
                .filter(|l| l.contains("@reboot one-shots known") || l.contains(job))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(
            decided,
            ("skip".to_owned(), "already_ran".to_owned()),
            "{job} on the rebooted leader; it logged {:#?}; a peer logged {:#?}",
            known(n1),
            known(coordinators[other].as_ref().unwrap()),
        );
    }
    let ran = wait_for_state("n1's EveryNode one-shot again", || {
        let r = runs(dir.path());
        if count(&r, "warm") >= 4 {
            Ok(r)
        } else {
            Err(format!("runs so far: {r:?}"))
        }
    });
    assert_eq!(count(&ran, "migrate"), 1, "{ran:?}");
    assert_eq!(count(&ran, "announce"), 1, "{ran:?}");
    assert_eq!(count(&ran, "warm"), 4, "{ran:?}");
}
