//! The filesystem store must really be shared (issue 28, item 2). A node whose NFS/EFS mount is
//! not there yet sees an empty directory on its own disk, or nothing at all; a lease there
//! would make it a second leader beside the real one. So the coordinator never creates
//! `cluster.filesystem.path`, and under the default `topology: auto` refuses a directory that
//! is neither a mount point nor on a network filesystem: Leader jobs fail closed, `/cluster`
//! and `cronstable_cluster_manager_up` say so, and the check is retried. A real coordinator and
//! shim on loopback; the test's temporary directory is on this host's own disk.

use std::path::Path;

use cronstable_tests::{Coordinator, http, lines, start_shim, wait_for_state};

fn start(dir: &Path, store: &Path, topology: &str) -> Coordinator {
    Coordinator::start_named(
        dir,
        "coordinator",
        &format!(
            "cluster:\n  nodeName: a\n  backend: filesystem\n  filesystem:\n    path: {}\n    \
             ttl: 3\n{topology}",
            store.display()
        ),
    )
}

fn manager_up(c: &Coordinator) -> Option<String> {
    let metrics = http(c.web, "GET", "/metrics").ok()?.body;
    metrics
        .lines()
        .find(|l| l.starts_with("cronstable_cluster_manager_up "))
        .map(str::to_owned)
}

#[test]
fn a_store_directory_that_is_missing_or_on_local_disk_is_refused_and_leader_jobs_fail_closed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("mnt").join("cronstable");
    let c = start(dir.path(), &store, "");
    let out = dir.path().join("runs");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=tick clusterPolicy=Leader seconds=true\n\
             * * * * * * echo \"$CRONSTABLE_SCHEDULED_AT\" >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let shim = start_shim(&crontab, &c.api, &[]);

    // Missing: refused, never created.
    let body = wait_for_state("the missing store to be refused", || {
        let body = http(c.web, "GET", "/cluster")
            .map_err(|e| e.to_string())?
            .json();
        let error = body["last_error"].as_str().unwrap_or_default();
        if error.contains("refusing to elect over") && error.contains("does not exist") {
            Ok(body)
        } else {
            Err(body.to_string())
        }
    });
    assert_eq!(body["is_leader"], false, "{body}");
    assert_eq!(body["manager"], "retrying", "{body}");
    assert_eq!(
        manager_up(&c).as_deref(),
        Some("cronstable_cluster_manager_up 0")
    );
    assert!(
        !store.exists() && !store.parent().unwrap().exists(),
        "the coordinator created the store directory"
    );

    // The directory appears on this host's own disk (a mount point directory whose mount is
    // missing): the retried check sees it and refuses it for what it is.
    std::fs::create_dir_all(&store).unwrap();
    let body = wait_for_state("the local directory to be refused", || {
        let body = http(c.web, "GET", "/cluster")
            .map_err(|e| e.to_string())?
            .json();
        let error = body["last_error"].as_str().unwrap_or_default();
        if error.contains("is not a mount point") {
            Ok(body)
        } else {
            Err(body.to_string())
        }
    });
    assert_eq!(body["is_leader"], false, "{body}");
    assert!(
        body["last_error"]
            .as_str()
            .unwrap()
            .contains("topology: single-node"),
        "the refusal names the opt-in: {body}"
    );
    c.proc.wait_log("is not a mount point");

    // Leader firings were asked about and failed closed the whole time.
    wait_for_state("three Leader firings skipped", || {
        let skipped = shim.log().matches("skipped").count();
        if skipped >= 3 {
            Ok(())
        } else {
            Err(format!("{skipped} skips"))
        }
    });
    assert_eq!(lines(&out), Vec::<String>::new(), "a Leader job ran");
    assert!(
        std::fs::read_dir(&store).unwrap().next().is_none(),
        "nothing was written into the refused directory"
    );
}

#[test]
fn topology_single_node_is_the_explicit_opt_in_for_a_store_on_this_hosts_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let c = start(dir.path(), &store, "    topology: single-node\n");
    wait_for_state("the single-node store to elect", || {
        let body = http(c.web, "GET", "/cluster")
            .map_err(|e| e.to_string())?
            .json();
        if body["is_leader"] == true {
            Ok(())
        } else {
            Err(body.to_string())
        }
    });
}
