//! Retry handoff across real processes on the lease backends (RTY-04, RTY-06, MAP-02): two
//! coordinators with a shim each elect through one filesystem store, and through one real etcd.
//! A Leader job fails its first attempt on the leader n1; n1's coordinator is then frozen
//! (SIGSTOP) for longer than the lease ttl, so n2 takes the lease, and thawed (SIGCONT) before
//! the retry is due: n1 keeps store contact but sees n2 holding the lease, so its retry is
//! answered NOT_LEADER and handed off. n2's shim must run the remaining attempts, numbered 2 and
//! 3, with `handed_off` transferred=true on n1 and no cancelled record anywhere.

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::path::Path;

use cronstable_tests::etcd::Etcd;
use cronstable_tests::lease::{Store, is_leader, start_lease_node, wait_one_leader};
use cronstable_tests::{Coordinator, PATIENCE, http, lines, start_shim, wait_for, wait_for_state};

const TTL: u64 = 3;
const SIGSTOP: i32 = 19;
const SIGCONT: i32 = 18;

/// The second-of-minute a few seconds from now, for a job that fires once in the test.
// The test schedules against the wall clock the shims read; no other clock will do.
#[allow(clippy::disallowed_methods)]
fn second_soon(ahead: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    (now + ahead) % 60
}

fn history(node: &Coordinator, job: &str) -> Vec<serde_json::Value> {
    http(node.web, "GET", &format!("/jobs/{job}"))
        .ok()
        .map(|r| r.json()["history"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default()
}

/// Two lease nodes with a shim each; the job's attempt 1 failed on n1, and n1's coordinator
/// was frozen past the ttl (n2 leads now) and thawed before attempt 2 is due.
struct Scenario {
    _dir: tempfile::TempDir,
    out: std::path::PathBuf,
    n1: Coordinator,
    n2: Coordinator,
    shim1: cronstable_tests::Proc,
    shim2: cronstable_tests::Proc,
}

fn lost_leadership_mid_retry(store: &Store) -> Scenario {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("attempts");
    let crontab = dir.path().join("crontab");
    let n1 = start_lease_node(dir.path(), "n1", store, TTL);
    wait_for("n1 to lead", || is_leader(n1.web).filter(|l| *l));
    let n2 = start_lease_node(dir.path(), "n2", store, TTL);
    wait_one_leader(&[n1.web, n2.web], PATIENCE).expect("one leader");
    assert_eq!(is_leader(n1.web), Some(true));

    // Every attempt fails, so the sequence runs to its end: 1 on n1, then 2 and 3 on n2.
    let write_tab = |second: u64| {
        std::fs::write(
            &crontab,
            format!(
                "# cronstable: name=flaky clusterPolicy=Leader seconds=true retries=2 retryBackoff=10s\n\
                 {second} * * * * * echo \"$CRONSTABLE_NODE $CRONSTABLE_ATTEMPT\" >> {}; exit 1\n",
                out.display()
            ),
        )
        .unwrap();
    };
    write_tab(second_soon(4));
    let shim1 = start_shim(&crontab, &n1.api, &[]);
    let shim2 = start_shim(&crontab, &n2.api, &[]);
    shim1.wait_log("registered with the coordinator");
    shim2.wait_log("registered with the coordinator");

    wait_for("attempt 1 on n1", || {
        Some(lines(&out)).filter(|l| !l.is_empty())
    });
    assert_eq!(lines(&out), ["n1 1"]);
    // Freeze n1's coordinator past the ttl: n2 takes over; then thaw it well before the
    // 10 s backoff ends, so its next round sees n2's lease (store contact, not leading).
    n1.proc.signal(SIGSTOP);
    wait_for("n2 to take the lease", || is_leader(n2.web).filter(|l| *l));
    n1.proc.signal(SIGCONT);
    Scenario {
        _dir: dir,
        out,
        n1,
        n2,
        shim1,
        shim2,
    }
}

fn handoff(store: Store) {
    let Scenario {
        _dir,
        out,
        n1,
        n2,
        shim1,
        shim2,
    } = lost_leadership_mid_retry(&store);
    let logs = || {
        format!(
            "attempts: {:?}\n--- n1\n{}\n--- shim1\n{}\n--- n2\n{}\n--- shim2\n{}",
            lines(&out),
            n1.proc.log(),
            shim1.log(),
            n2.proc.log(),
            shim2.log()
        )
    };
    for n in [2, 3] {
        wait_for_state(&format!("attempt {n} on n2"), || {
            if lines(&out).len() >= n {
                Ok(())
            } else {
                Err(logs())
            }
        });
    }
    let finished_3 = || {
        history(&n2, "flaky")
            .into_iter()
            .find(|r| r["event"] == "finished" && r["attempt"] == 3)
    };
    wait_for("attempt 3 reported finished on n2", finished_3);
    // Exactly retries + 1 attempts, the handed-off ones numbered on from the first.
    assert_eq!(lines(&out), ["n1 1", "n2 2", "n2 3"]);
    n2.proc.wait_log("resuming a handed-off retry sequence");
    shim2.wait_log("resuming a retry sequence handed off by another node");

    let h1 = history(&n1, "flaky");
    let handed = h1
        .iter()
        .find(|r| r["event"] == "handed_off")
        .unwrap_or_else(|| panic!("no handed_off record on n1: {h1:?}"));
    assert_eq!(handed["transferred"], true, "{handed}");
    assert_eq!(handed["attempt"], 2, "{handed}");
    for (node, h) in [("n1", &h1), ("n2", &history(&n2, "flaky"))] {
        assert!(
            !h.iter().any(|r| r["event"] == "skipped"),
            "a cancelled record on {node}: {h:?}"
        );
    }
    assert!(
        !shim1.log().contains("retry abandoned"),
        "n1's shim abandoned the retry:\n{}",
        shim1.log()
    );
    // The record was claimed: none is left in the store.
    if let Store::Filesystem(path) = &store {
        let left = std::fs::read_dir(path.join("default/cluster/handoff"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(left, 0, "handoff records left in {}", path.display());
    }
    drop(shim1);
    drop(shim2);
}

fn store_dir(dir: &Path) -> Store {
    Store::Filesystem(dir.to_owned())
}

#[test]
fn rty_05_filesystem_a_failed_handoff_write_abandons_with_a_warning_and_a_cancelled_record() {
    let store = tempfile::tempdir().unwrap();
    // `cluster/handoff` is a file, so no handoff record can be written; the lease and the
    // firing claims (`cluster/claims`) still work.
    std::fs::create_dir_all(store.path().join("default/cluster")).unwrap();
    std::fs::write(
        store.path().join("default/cluster/handoff"),
        "not a directory",
    )
    .unwrap();
    let s = lost_leadership_mid_retry(&store_dir(store.path()));
    s.shim1.wait_log("retry abandoned");
    let cancelled = wait_for("the cancelled record on n1", || {
        history(&s.n1, "flaky")
            .into_iter()
            .find(|r| r["event"] == "skipped" && r["reason"] == "not_owner")
    });
    assert_eq!(cancelled["attempt"], 2, "{cancelled}");
    let h1 = history(&s.n1, "flaky");
    let handed = h1.iter().find(|r| r["event"] == "handed_off").unwrap();
    assert_eq!(handed["transferred"], false, "{handed}");
    assert!(
        s.shim1.log().contains("could not be written"),
        "{}",
        s.shim1.log()
    );
    // Nobody runs attempt 2.
    assert_eq!(lines(&s.out), ["n1 1"]);
    assert!(!s.shim2.log().contains("resuming a retry sequence"));
}

#[test]
fn rty_04_filesystem_a_retry_moves_to_the_new_leader() {
    let store = tempfile::tempdir().unwrap();
    handoff(store_dir(store.path()));
}

#[test]
fn rty_04_etcd_a_retry_moves_to_the_new_leader() {
    let etcd = Etcd::start();
    handoff(Store::Etcd(etcd.endpoint()));
}
