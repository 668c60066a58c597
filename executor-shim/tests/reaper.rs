//! The orphan reaper, in its own test process: it reaps any unowned zombie child of the
//! process, so it must not share a process with tests that wait on their own children.

use std::time::Duration;

use cronstable_shim::process::reaper::reap_once;
use cronstable_shim::process::runner::Supervisor;

#[tokio::test]
async fn reaps_a_zombie_it_does_not_own() {
    // A child spawned outside the supervisor and never waited on becomes our zombie.
    let child = std::process::Command::new("/bin/true").spawn().unwrap();
    let pid = child.id();
    std::mem::forget(child);
    let supervisor = Supervisor::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(format!("/proc/{pid}")).is_ok() {
        reap_once(&supervisor);
        assert!(
            tokio::time::Instant::now() < deadline,
            "zombie {pid} was not reaped"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
