//! `@reboot` on the fenced lease backends (inventory §5.2), on a real etcd and on a filesystem
//! store, with real coordinators and shims: the Leader and PreferLeader one-shots run once on
//! the holder and are recorded in the store (RBT-21); after the holder is SIGKILLed, the node
//! that takes the lease over reads the record back before answering, so its own one-shots are
//! `already_ran` (RBT-22), while EveryNode runs on every boot; a changed job set runs the
//! Leader one-shot once more (RBT-23: once per job configuration, not once per boot).

use std::path::{Path, PathBuf};
use std::process::Command;

use cronstable_coordinator::clock::now_ms;
use cronstable_tests::etcd::Etcd;
use cronstable_tests::lease::{Store, start_lease_node, wait_one_leader};
use cronstable_tests::{Coordinator, PATIENCE, Proc, binary, http, wait_for_state};

const TTL: u64 = 3;

fn crontab(version: &str) -> String {
    format!(
        "# cronstable: name=migrate clusterPolicy=Leader\n\
         @reboot echo \"$NODE migrate{version}\" >> \"$OUT\"\n\
         # cronstable: name=announce clusterPolicy=PreferLeader\n\
         @reboot echo \"$NODE announce\" >> \"$OUT\"\n\
         # cronstable: name=warm clusterPolicy=EveryNode\n\
         @reboot echo \"$NODE warm\" >> \"$OUT\"\n"
    )
}

fn shim(dir: &Path, coordinator: &Coordinator, node: &str, version: &str) -> Proc {
    let tab = dir.join(format!("crontab-{node}"));
    std::fs::write(&tab, crontab(version)).unwrap();
    let mut cmd = Command::new(binary("cronstable-shim"));
    cmd.arg("--crontab")
        .arg(&tab)
        .arg("--coordinator")
        .arg(&coordinator.api)
        .env("NODE", node)
        .env("OUT", dir.join("runs"));
    Proc::spawn(&format!("shim {node}"), cmd)
}

fn runs(dir: &Path) -> Vec<String> {
    let mut r: Vec<String> = std::fs::read_to_string(dir.join("runs"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    r.sort();
    r
}

fn count(runs: &[String], job: &str) -> usize {
    runs.iter()
        .filter(|l| l.ends_with(&format!(" {job}")))
        .count()
}

/// The newest (history is newest first) @reboot decision `node` recorded for `job`'s one-shots of a boot at or after
/// `since_ms` (each shim start is its own @reboot instant), as (verdict, reason).
fn last_reboot_decision(node: &Coordinator, job: &str, since_ms: i64) -> Option<(String, String)> {
    let r = http(node.web, "GET", &format!("/jobs/{job}")).ok()?;
    let history = r.json()["history"].as_array()?.clone();
    history
        .iter()
        .find(|r| {
            r["event"] == "decided"
                && r["kind"] == "reboot"
                && r["scheduledAtMs"].as_i64().is_some_and(|at| at >= since_ms)
        })
        .map(|r| {
            (
                r["verdict"].as_str().unwrap_or_default().to_owned(),
                r["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
}

/// Waits until `node`'s @reboot decision of `job` for a boot after `since_ms` is final.
fn settled(node: &Coordinator, job: &str, since_ms: i64) -> (String, String) {
    wait_for_state(
        &format!("a final @reboot decision of {job}"),
        || match last_reboot_decision(node, job, since_ms) {
            Some(d) if d.0 != "defer" => Ok(d),
            other => Err(format!("{other:?}")),
        },
    )
}

fn once_per_configuration(dir: &Path, store: Store, recorded: impl Fn() -> String) {
    let names = ["a", "b"];
    let nodes: Vec<Coordinator> = names
        .iter()
        .map(|n| start_lease_node(dir, n, &store, TTL))
        .collect();
    let webs: Vec<_> = nodes.iter().map(|c| c.web).collect();
    let (h, _) = wait_one_leader(&webs, PATIENCE).expect("one leader");
    let other = 1 - h;
    let mut shims: Vec<Option<Proc>> = (0..2)
        .map(|i| Some(shim(dir, &nodes[i], names[i], "")))
        .collect();
    let ran = wait_for_state("the boot-time runs", || {
        let r = runs(dir);
        if count(&r, "migrate") == 1 && count(&r, "announce") == 1 && count(&r, "warm") == 2 {
            Ok(r)
        } else {
            Err(format!("{r:?}"))
        }
    });
    // RBT-20: on the holder.
    assert!(ran.contains(&format!("{} migrate", names[h])), "{ran:?}");
    assert!(ran.contains(&format!("{} announce", names[h])), "{ran:?}");
    // RBT-21: in the store, before the holder goes.
    wait_for_state("the record in the store", || {
        let r = recorded();
        (r.contains("migrate") && r.contains("announce"))
            .then_some(())
            .ok_or(r)
    });

    // The holder dies without releasing; the other node takes over.
    shims[h].take();
    nodes[h].proc.signal(9);
    wait_for_state("the other node leads", || {
        let v = http(nodes[other].web, "GET", "/cluster")
            .map_err(|e| e.to_string())?
            .json();
        (v["is_leader"] == true).then_some(()).ok_or(v.to_string())
    });
    // Its shim boots again: as the new holder it must not run what already ran (RBT-22).
    shims[other].take();
    let reboot = now_ms() - 1_000;
    shims[other] = Some(shim(dir, &nodes[other], names[other], ""));
    assert_eq!(
        settled(&nodes[other], "migrate", reboot),
        ("skip".into(), "already_ran".into())
    );
    assert_eq!(
        settled(&nodes[other], "announce", reboot),
        ("skip".into(), "already_ran".into())
    );
    wait_for_state("warm on the new boot", || {
        let r = runs(dir);
        (count(&r, "warm") == 3)
            .then_some(())
            .ok_or(format!("{r:?}"))
    });
    let r = runs(dir);
    assert_eq!(count(&r, "migrate"), 1, "{r:?}");
    assert_eq!(count(&r, "announce"), 1, "{r:?}");

    // RBT-23: a changed Leader job is a new job set, so its one-shot runs once more.
    shims[other].take();
    shims[other] = Some(shim(dir, &nodes[other], names[other], "-v2"));
    // The whole job set is new, so the PreferLeader one-shot runs again too.
    wait_for_state("the changed one-shot", || {
        let r = runs(dir);
        (count(&r, "migrate-v2") == 1 && count(&r, "announce") == 2)
            .then_some(())
            .ok_or(format!(
                "{r:?}; migrate: {:?}",
                http(nodes[other].web, "GET", "/jobs/migrate").map(|r| r.body)
            ))
    });
    let r = runs(dir);
    assert!(r.contains(&format!("{} migrate-v2", names[other])), "{r:?}");
    assert_eq!(count(&r, "migrate"), 1, "{r:?}");
}

#[test]
fn etcd_rbt_20_23_a_leader_reboot_runs_once_per_configuration() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let endpoint = etcd.endpoint();
    once_per_configuration(dir.path(), Store::Etcd(endpoint.clone()), || {
        let out = Command::new("etcdctl")
            .args(["--endpoints", &endpoint, "get", "--prefix", "--keys-only"])
            .arg("cronstable/leader/reboot-ran/")
            .output()
            .expect("etcdctl runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
}

#[test]
fn filesystem_rbt_20_23_a_leader_reboot_runs_once_per_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let store: PathBuf = dir.path().join("store");
    let stream = store.join("default").join("cluster").join("reboot-ran");
    once_per_configuration(dir.path(), Store::Filesystem(store), || {
        std::fs::read_to_string(&stream).unwrap_or_default()
    });
}
