//! A filesystem store under the default `topology: auto` is used only once it is a mount of
//! its own (issue 28, item 2) *and* carries the operator's marker naming its deployment (issue
//! 43, item 2): a coordinator started while its store is a plain directory on this host's disk
//! refuses to elect (Leader jobs fail closed); an empty directory bind-mounted in its place is a
//! mount point but no store, and is refused too; the real store (a tmpfs here, as an NFS/EFS
//! mount that comes up late would be) is used once `cronstable store init` has marked it,
//! without a restart; and a mount swapped while the node runs stops it at its next round. The
//! mounts are real (root only), unmounted when the test ends.
//!
//! Red on the code before the marker: the bind-mounted empty directory passed the mount check
//! and the node led on it, beside whatever held the real store.

use std::path::{Path, PathBuf};
use std::process::Command;

use cronstable_tests::{Coordinator, binary, http, wait_for_state};

/// Unmounts the test's mount when dropped, even when the test fails.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Mounts `what` (`-t tmpfs`, or `--bind DIR`) at `at`; unmounted when the guard drops.
fn mount(args: &[&str], at: &Path) -> Mounted {
    let status = Command::new("mount")
        .args(args)
        .arg(at)
        .status()
        .expect("mount(8)");
    assert!(
        status.success(),
        "mount {args:?} failed (this test needs root)"
    );
    Mounted(at.to_owned())
}

/// Waits until `/cluster` says the node does not lead and `last_error` contains `why`.
fn refused(c: &Coordinator, what: &str, why: &str) {
    wait_for_state(what, || {
        let v = cluster(c)?;
        let error = v["last_error"].as_str().unwrap_or_default();
        if error.contains(why) && v["is_leader"] == false {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
}

fn leads(c: &Coordinator, what: &str) {
    wait_for_state(what, || {
        let v = cluster(c)?;
        if v["is_leader"] == true && v["manager"] == "running" {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
}

fn cluster(c: &Coordinator) -> Result<serde_json::Value, String> {
    Ok(http(c.web, "GET", "/cluster")
        .map_err(|e| e.to_string())?
        .json())
}

fn start(dir: &Path, store: &Path) -> Coordinator {
    Coordinator::start_named(
        dir,
        "coordinator",
        &format!(
            "cluster:\n  nodeName: a\n  backend: filesystem\n  filesystem:\n    path: {}\n    \
             ttl: 3\n",
            store.display()
        ),
    )
}

#[test]
fn a_store_is_used_once_it_is_mounted_and_marked_and_dropped_when_swapped() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("shared");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&store).unwrap();
    std::fs::create_dir(&empty).unwrap();
    let c = start(dir.path(), &store);
    refused(
        &c,
        "the plain directory to be refused",
        "is not a mount point",
    );

    // An empty directory bind-mounted where the shared mount should be: a mount point, no
    // store.
    let bound = mount(&["--bind", empty.to_str().unwrap()], &store);
    refused(
        &c,
        "the bind-mounted empty directory to be refused",
        "no store marker",
    );
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "nothing is written into an unmarked store"
    );
    drop(bound);

    // The real store comes up, and the operator marks it once.
    let real = mount(&["-t", "tmpfs", "-o", "size=8m", "cronstable-test"], &store);
    refused(&c, "the unmarked store to be refused", "no store marker");
    let init = Command::new(binary("cronstable"))
        .args(["store", "init"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    leads(&c, "the node to lead on the marked store");
    c.proc.wait_log("store can be used now");
    assert!(
        store.join("default").join("leases").is_dir(),
        "the lease lives on the mounted filesystem"
    );
    let metric = "cronstable_cluster_store_verified{backend=\"filesystem\"}";
    let metrics = http(c.web, "GET", "/metrics").unwrap().body;
    assert!(metrics.contains(&format!("{metric} 1")), "{metrics}");

    // Swapped while the node runs: an empty directory bound over the store.
    let swapped = mount(&["--bind", empty.to_str().unwrap()], &store);
    refused(&c, "the swapped store to stop the node", "no store marker");
    let v = cluster(&c).unwrap();
    assert_eq!(v["lease"]["storeVerified"], false, "{v}");
    let metrics = http(c.web, "GET", "/metrics").unwrap().body;
    assert!(metrics.contains(&format!("{metric} 0")), "{metrics}");
    drop(swapped);
    leads(&c, "the node to lead again once the store is back");
    drop(real);
}
