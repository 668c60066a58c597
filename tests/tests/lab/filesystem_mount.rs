//! A filesystem store under the default `topology: auto` is used only once it is a mount of
//! its own (issue 28, item 2): a coordinator started while its store is a plain directory on
//! this host's disk refuses to elect (Leader jobs fail closed), and elects without a restart
//! when a filesystem is mounted there, as an NFS/EFS mount that comes up late would be. The
//! mount is a real tmpfs (root only), unmounted when the test ends.

use std::path::{Path, PathBuf};
use std::process::Command;

use cronstable_tests::{Coordinator, http, wait_for_state};

/// Unmounts the test's mount when dropped, even when the test fails.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
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
fn a_store_is_used_once_its_mount_appears_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("shared");
    std::fs::create_dir(&store).unwrap();
    let c = start(dir.path(), &store);
    wait_for_state("the plain directory to be refused", || {
        let v = cluster(&c)?;
        let error = v["last_error"].as_str().unwrap_or_default();
        if error.contains("is not a mount point") && v["is_leader"] == false {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });

    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "cronstable-test"])
        .arg(&store)
        .status()
        .expect("mount(8)");
    assert!(
        status.success(),
        "mount -t tmpfs failed (this test needs root)"
    );
    let _mounted = Mounted(store.clone());

    wait_for_state("the node to lead on the mounted store", || {
        let v = cluster(&c)?;
        if v["is_leader"] == true && v["manager"] == "running" {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    c.proc.wait_log("store can be used now");
    assert!(
        store.join("default").join("leases").is_dir(),
        "the lease lives on the mounted filesystem"
    );
}
