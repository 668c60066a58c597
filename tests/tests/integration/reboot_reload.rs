//! A reload while deferred `@reboot` one-shots are pending (RBT-07, RBT-08), on a real gossip
//! cluster over mTLS with real shims. n1 starts alone, without a quorum, so its Leader
//! one-shots are deferred; its job file is then edited under it, and only once n2 joins do the
//! one-shots run. What runs must follow the job file as it is by then:
//!
//! - `redefined` (its command changed) runs once, with the current command;
//! - `returns` (removed, then added back unchanged) still runs;
//! - `removed` (removed and left removed) never runs;
//! - `reused` (its name now an EveryNode `@reboot` job) is dropped from the deferral: a reload
//!   does not start new `@reboot` work, as under cron.
//!
//! Each edit changes the job-set ID, so the one-shots are also asked about only under the
//! registration of the job file they follow (RBT-21's scope).

use std::path::Path;

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster};
use cronstable_tests::{
    Coordinator, Proc, http, lines, start_shim, wait_for, wait_for_state, wait_same_job_set,
};
use serde_json::Value;

const SIGHUP: i32 = 1;

fn entry(name: &str, policy: &str, command: &str, out: &Path) -> String {
    format!(
        "# cronstable: name={name} clusterPolicy={policy}\n@reboot echo \"$CRONSTABLE_NODE \
         {command}\" >> {}\n",
        out.display()
    )
}

/// Replaces `crontab` in one rename, so the shim never reads half a file, and tells the shim.
fn rewrite(crontab: &Path, text: &str, shim: &Proc) {
    let tmp = crontab.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, crontab).unwrap();
    shim.signal(SIGHUP);
}

fn deferred(node: &Coordinator, job: &str) -> bool {
    http(node.web, "GET", &format!("/jobs/{job}"))
        .ok()
        .filter(|r| r.status == 200)
        .and_then(|r| r.json()["history"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .any(|r: &Value| {
            r["event"] == "decided" && r["kind"] == "reboot" && r["verdict"] == "defer"
        })
}

#[test]
fn rbt_07_08_a_reload_decides_what_a_pending_one_shot_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let crontab = dir.path().join("crontab");
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 97));
    let n1 = files.start(0);
    wait_for_state("n1 up without a quorum", || {
        let v = cluster(n1.web).ok_or("no /cluster answer")?;
        (v["quorate"] == false).then_some(()).ok_or(v.to_string())
    });

    let boot = [
        entry("redefined", "Leader", "redefined v1", &out),
        entry("returns", "Leader", "returns", &out),
        entry("removed", "Leader", "removed", &out),
        entry("reused", "Leader", "reused", &out),
    ]
    .concat();
    std::fs::write(&crontab, &boot).unwrap();
    let shim = start_shim(&crontab, &n1.api, &[]);
    for job in ["redefined", "returns", "removed", "reused"] {
        wait_for(&format!("{job} deferred without a quorum"), || {
            deferred(&n1, job).then_some(())
        });
    }

    // Edit 1: redefine one, remove two, reuse a name for EveryNode boot work.
    let redefined = entry("redefined", "Leader", "redefined v2", &out);
    let reused = entry("reused", "EveryNode", "reused as EveryNode", &out);
    rewrite(
        &crontab,
        &[redefined.clone(), reused.clone()].concat(),
        &shim,
    );
    wait_same_job_set(std::slice::from_ref(&n1), 2);
    shim.wait_log("it stays pending until the name returns");
    shim.wait_log("its pending boot-time one-shot is dropped");
    // Edit 2: `returns` comes back as it was.
    let last = [
        redefined,
        entry("returns", "Leader", "returns", &out),
        reused,
    ]
    .concat();
    rewrite(&crontab, &last, &shim);
    wait_same_job_set(std::slice::from_ref(&n1), 3);
    assert!(lines(&out).is_empty(), "nothing ran without a quorum");

    // n2 joins with the same job file, so both nodes agree on the job set; n1 leads.
    let n2 = files.start(1);
    let crontab2 = dir.path().join("crontab-n2");
    std::fs::write(&crontab2, &last).unwrap();
    let _shim2 = start_shim(&crontab2, &n2.api, &[]);
    let ran = wait_for_state("the pending one-shots to run on n1", || {
        let ran: Vec<String> = lines(&out)
            .into_iter()
            .filter(|l| l.starts_with("n1 "))
            .collect();
        (ran.len() >= 2).then_some(ran.clone()).ok_or(format!(
            "n1 ran {ran:?}; cluster {:?}; shim log:\n{}",
            cluster(n1.web),
            shim.log()
        ))
    });
    let mut sorted = ran.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        vec!["n1 redefined v2".to_owned(), "n1 returns".to_owned()],
        "the current definitions ran, once each"
    );
    // The pending check looks at the job file every 2 s: two more rounds must not start the
    // removed or the reused one-shot.
    std::thread::sleep(std::time::Duration::from_secs(5));
    let all = lines(&out);
    let n1_lines: Vec<&String> = all.iter().filter(|l| l.starts_with("n1 ")).collect();
    assert_eq!(n1_lines.len(), 2, "nothing else ran on n1: {all:?}");
    assert!(
        !all.iter()
            .any(|l| l.ends_with(" removed") || l.ends_with("redefined v1")),
        "{all:?}"
    );
    // n2's shim booted with `reused` as EveryNode work, so it ran there; n1's did not.
    assert!(
        all.contains(&"n2 reused as EveryNode".to_owned()),
        "{all:?}"
    );
    assert!(!all.iter().any(|l| l.starts_with("n1 reused")), "{all:?}");
}
