//! A Leader `@reboot` one-shot's "already ran" record is in the store *before* the one-shot
//! runs (RBT-21, RBT-22), on a real etcd and a real filesystem store with a real coordinator
//! and shim: the one-shot's own command looks in the store, so it would print "unrecorded" if
//! the record only followed the run (the window a dying holder used to leave its successor).
//! When the record cannot be written (the filesystem stream made immutable with `chattr +i`),
//! the Leader one-shot waits, deferred with the store's error, while the PreferLeader one-shot
//! runs anyway (RBT-20); once the store takes writes again the Leader one-shot runs, once.

use std::path::Path;
use std::process::Command;

use cronstable_tests::etcd::Etcd;
use cronstable_tests::lease::{Store, start_lease_node, wait_one_leader};
use cronstable_tests::{Coordinator, PATIENCE, Proc, binary, http, lines, wait_for_state};

const TTL: u64 = 3;

/// `check` is a shell condition that holds when the store has the record of `migrate`.
fn shim(dir: &Path, coordinator: &Coordinator, check: &str) -> Proc {
    let tab = dir.join("crontab");
    let out = dir.join("runs");
    std::fs::write(
        &tab,
        format!(
            "# cronstable: name=migrate clusterPolicy=Leader\n\
             @reboot if {check}; then echo migrate recorded; else echo migrate unrecorded; fi >> {o}\n\
             # cronstable: name=announce clusterPolicy=PreferLeader\n\
             @reboot echo announce >> {o}\n",
            o = out.display()
        ),
    )
    .unwrap();
    let mut cmd = Command::new(binary("cronstable-shim"));
    cmd.arg("--crontab")
        .arg(&tab)
        .arg("--coordinator")
        .arg(&coordinator.api);
    Proc::spawn("shim", cmd)
}

fn leader(store: &Store, dir: &Path) -> Coordinator {
    let node = start_lease_node(dir, "n1", store, TTL);
    wait_one_leader(&[node.web], PATIENCE).expect("n1 takes the lease");
    node
}

fn chattr(flag: &str, path: &Path) {
    let status = Command::new("chattr")
        .arg(flag)
        .arg(path)
        .status()
        .expect("chattr (e2fsprogs) is needed to make the stream immutable");
    assert!(status.success(), "chattr {flag} {} failed", path.display());
}

fn decided(node: &Coordinator, job: &str) -> Vec<String> {
    http(node.web, "GET", &format!("/jobs/{job}"))
        .ok()
        .filter(|r| r.status == 200)
        .and_then(|r| r.json()["history"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|r| r["event"] == "decided" && r["kind"] == "reboot")
        .map(|r| format!("{} {}", r["verdict"], r["reason"]))
        .collect()
}

#[test]
fn rbt_22_filesystem_the_record_precedes_the_run_and_an_unwritable_store_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let stream = store_dir.join("default/cluster/reboot-ran");
    std::fs::create_dir_all(stream.parent().unwrap()).unwrap();
    std::fs::write(&stream, "{\"jobSetId\":\"an-old-set\",\"job\":\"x\"}\n").unwrap();
    // Readable, not writable, even by root.
    chattr("+i", &stream);
    struct Unfreeze<'a>(&'a Path);
    impl Drop for Unfreeze<'_> {
        fn drop(&mut self) {
            let _ = Command::new("chattr").arg("-i").arg(self.0).status();
        }
    }
    let _unfreeze = Unfreeze(&stream);

    let node = leader(&Store::Filesystem(store_dir.clone()), dir.path());
    let check = format!("grep -q '\"job\":\"migrate\"' {}", stream.display());
    let _shim = shim(dir.path(), &node, &check);
    let out = dir.path().join("runs");
    wait_for_state("the PreferLeader one-shot runs without the store", || {
        let l = lines(&out);
        l.contains(&"announce".to_owned())
            .then_some(())
            .ok_or(format!("{l:?}"))
    });
    node.proc
        .wait_log("could not be written to the store before running it");
    let held = decided(&node, "migrate");
    assert!(
        held.iter().any(|d| d == "\"defer\" \"convergence_hold\""),
        "{held:?}"
    );
    assert!(
        !lines(&out).iter().any(|l| l.starts_with("migrate")),
        "the Leader one-shot waited"
    );

    chattr("-i", &stream);
    let ran = wait_for_state("the Leader one-shot once the store takes writes", || {
        let l: Vec<String> = lines(&out)
            .into_iter()
            .filter(|l| l.starts_with("migrate"))
            .collect();
        (!l.is_empty())
            .then_some(l.clone())
            .ok_or(format!("{l:?}; decisions {:?}", decided(&node, "migrate")))
    });
    assert_eq!(
        ran,
        ["migrate recorded"],
        "recorded before it ran, ran once"
    );
}

#[test]
fn rbt_22_etcd_the_record_precedes_the_run() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let node = leader(&Store::Etcd(etcd.endpoint()), dir.path());
    let check = format!(
        "ETCDCTL_API=3 etcdctl --endpoints={} get --prefix --keys-only '' | grep -q '/reboot-ran/.*/migrate$'",
        etcd.endpoint()
    );
    let _shim = shim(dir.path(), &node, &check);
    let out = dir.path().join("runs");
    let ran = wait_for_state("the Leader one-shot", || {
        let l: Vec<String> = lines(&out)
            .into_iter()
            .filter(|l| l.starts_with("migrate"))
            .collect();
        (!l.is_empty()).then_some(l.clone()).ok_or(format!("{l:?}"))
    });
    assert_eq!(ran, ["migrate recorded"], "recorded before it ran");
}
