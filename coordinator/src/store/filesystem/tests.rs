//! Filesystem store tests: the round rule as a table, the store on a real directory, the
//! conformance suite on the real clock (ttl 3 s: rounds every 1 s), and the handoff records.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::lease::conformance::{self, Harness};

const TTL: Duration = Duration::from_secs(15);

fn lease(holder: Option<&str>, fence: u64, expiry_ms: i64) -> LeaseFile {
    LeaseFile {
        holder: holder.map(str::to_owned),
        fence,
        expiry_ms,
        store_offset_ms: Some(0),
    }
}

#[test]
fn a_fresh_store_is_won_with_fence_one() {
    let (next, held) = decide_round(None, "a#1", 1_000, 0, TTL);
    assert!(held);
    assert_eq!(next, Some(lease(Some("a#1"), 1, 16_000)));
}

#[test]
fn the_holder_renews_without_bumping_the_fence() {
    let cur = lease(Some("a#1"), 7, 5_000);
    let (next, held) = decide_round(Some(&cur), "a#1", 4_000, 0, TTL);
    assert!(held);
    assert_eq!(next, Some(lease(Some("a#1"), 7, 19_000)));
}

#[test]
fn a_challenger_waits_until_a_margin_past_expiry_then_bumps_the_fence() {
    let cur = lease(Some("a#1"), 7, 5_000);
    assert_eq!(
        decide_round(Some(&cur), "b#2", 4_999, 0, TTL),
        (None, false)
    );
    // Expired, but not yet 1 s ago on the challenger's clock.
    assert_eq!(
        decide_round(Some(&cur), "b#2", 5_999, 0, TTL),
        (None, false)
    );
    let (next, held) = decide_round(Some(&cur), "b#2", 6_000, 0, TTL);
    assert!(held);
    assert_eq!(next, Some(lease(Some("b#2"), 8, 21_000)));
}

/// Issue 43, item 3: each node may be up to 1.5 s off the store, so a holder 1.4 s behind and
/// a challenger 1.4 s ahead are 2.8 s apart. Read on the store's clock, the takeover still
/// comes 2 s after the holder's last moment. Red on the rule before it (each side on its own
/// clock): the challenger took over 0.8 s *before* the holder stopped leading.
#[test]
fn a_challenger_ahead_never_takes_over_before_a_holder_behind_has_stopped() {
    let (behind, ahead) = (-1_400, 1_400);
    // Real (store) time of the holder's last renewal.
    let renewed = 100_000;
    let ttl = Duration::from_secs(3);
    let (written, held) = decide_round(None, "a#1", renewed + behind, behind, ttl);
    assert!(held);
    let record = written.unwrap();
    assert_eq!(record.store_offset_ms, Some(behind));
    // The holder leads until its monotonic deadline: ttl less the margin after the renewal.
    let holder_stops = renewed + 3_000 - 1_000;
    let takeover = (renewed..renewed + 10_000)
        .step_by(10)
        .find(|real| decide_round(Some(&record), "b#2", real + ahead, ahead, ttl).1)
        .unwrap();
    assert_eq!(
        takeover,
        renewed + 3_000 + 1_000,
        "a margin past the expiry"
    );
    assert!(
        takeover - holder_stops >= 2_000,
        "{takeover} vs {holder_stops}"
    );
    // A record from before the offsets (none written) is read on the holder's clock, as then.
    let old = LeaseFile {
        store_offset_ms: None,
        ..record
    };
    assert!(!decide_round(Some(&old), "b#2", renewed + 2_000, 0, ttl).1);
}

#[test]
fn the_same_name_with_another_token_cannot_renew() {
    // LSE-FS-02: a restarted daemon or a duplicate nodeName is a different holder.
    let cur = lease(Some("a#111111111111"), 3, 5_000);
    assert_eq!(
        decide_round(Some(&cur), "a#222222222222", 4_000, 0, TTL),
        (None, false)
    );
}

#[test]
fn a_released_lease_is_taken_at_once() {
    let cur = lease(None, 4, 0);
    let (next, held) = decide_round(Some(&cur), "b#2", 100, 0, TTL);
    assert!(held);
    assert_eq!(next.map(|l| l.fence), Some(5));
}

#[test]
fn tokens_are_twelve_hex_digits_and_differ() {
    let (a, b) = (token(), token());
    assert_eq!(a.len(), 12);
    assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
}

fn config(path: PathBuf, ttl: u64) -> FilesystemConfig {
    FilesystemConfig {
        path,
        election_name: "cluster/leader".into(),
        ttl,
        deployment_id: None,
        topology: Topology::SingleNode,
    }
}

#[tokio::test]
async fn two_stores_on_one_directory_share_one_fenced_lease() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path().to_owned(), 15);
    let mut a = FilesystemStore::new(&cfg, "a");
    let mut b = FilesystemStore::new(&cfg, "b");
    a.prepare().await.unwrap();
    b.prepare().await.unwrap();
    assert_eq!(
        a.lease_path(),
        dir.path().join("default/leases/cluster/leader.json")
    );
    let won = a.campaign().await.unwrap();
    assert!(won.held_by_me);
    assert_eq!(won.fence.as_deref(), Some("fence:1"));
    assert_eq!(won.block["holder"], "a");
    assert_eq!(won.block["fence"], 1);
    assert_eq!(won.block["electionName"], "cluster/leader");
    assert!(won.block["expiry"].as_str().unwrap().ends_with("+00:00"));
    let lost = b.campaign().await.unwrap();
    assert!(!lost.held_by_me);
    assert_eq!(lost.holder.as_deref(), Some("a"));
    assert_eq!(lost.fence, None);
    // The file names the full holder, token included.
    let on_disk: LeaseFile =
        serde_json::from_slice(&std::fs::read(a.lease_path()).unwrap()).unwrap();
    assert_eq!(on_disk.holder.as_deref(), Some(a.holder()));
    a.release().await.unwrap();
    let taken = b.campaign().await.unwrap();
    assert!(taken.held_by_me);
    assert_eq!(taken.fence.as_deref(), Some("fence:2"));
}

#[tokio::test]
async fn an_unusable_path_is_refused_with_the_seed_wording() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, "x").unwrap();
    let mut s = FilesystemStore::new(&config(not_a_dir.clone(), 15), "a");
    let err = s.prepare().await.unwrap_err();
    assert!(
        err.starts_with(&format!(
            "cluster.backend filesystem: refusing to elect over {}: ",
            not_a_dir.display()
        )),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_store_directory_is_refused_and_never_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("mnt").join("cronstable");
    let mut s = FilesystemStore::new(&config(missing.clone(), 15), "a");
    let err = s.prepare().await.unwrap_err();
    assert!(
        err.contains("refusing to elect over") && err.contains("does not exist"),
        "{err}"
    );
    assert!(
        !dir.path().join("mnt").exists(),
        "created {}",
        missing.display()
    );
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn under_topology_auto_a_directory_on_this_hosts_disk_is_refused() {
    // A temporary directory is not a mount point; on this kind of machine it lies on the root
    // filesystem (ext4), so it is what a node sees when its shared mount is missing.
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path().to_owned(), 15);
    c.topology = Topology::Auto;
    let err = FilesystemStore::new(&c, "a").prepare().await.unwrap_err();
    assert!(err.contains("is not a mount point"), "{err}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing is written into a refused directory"
    );
}

/// Red on the code before the marker: a store that may be shared was used whatever stood at
/// its path. Every round checks the operator's marker: a store whose marker goes away (a mount
/// that vanished or was swapped) or names another deployment stops this node at its next
/// round, and the marker back lets it elect again. `single-node` needs none.
#[tokio::test]
async fn a_shared_store_elects_only_while_its_marker_names_the_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path().to_owned(), 15);
    c.topology = Topology::Shared;
    c.deployment_id = Some("billing".into());
    // The mount check aside (a temporary directory is no mount): the rounds alone.
    std::fs::create_dir_all(dir.path().join("billing/leases/cluster")).unwrap();
    let mut s = FilesystemStore::new(&c, "a");
    let unmarked = s.campaign().await.unwrap_err().to_string();
    assert!(
        unmarked.contains("no store marker") && unmarked.contains("--deployment-id billing"),
        "{unmarked}"
    );
    assert_eq!(s.store_verified(), Some(false));
    marker::init(dir.path(), "billing").unwrap();
    assert!(s.campaign().await.unwrap().held_by_me);
    assert_eq!(s.store_verified(), Some(true));
    // Swapped for another deployment's store.
    std::fs::remove_file(marker::path(dir.path())).unwrap();
    marker::init(dir.path(), "payroll").unwrap();
    let other = s.campaign().await.unwrap_err().to_string();
    assert!(other.contains("payroll"), "{other}");
    assert!(s.follow().await.is_err(), "a follower round checks it too");
    assert_eq!(s.store_verified(), Some(false));
    marker::init(dir.path(), "billing").unwrap();
    assert!(s.campaign().await.unwrap().held_by_me);

    let single = FilesystemStore::new(&config(dir.path().to_owned(), 15), "b");
    assert_eq!(single.store_verified(), None);
}

#[tokio::test]
async fn a_refused_start_publishes_no_manager() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, "x").unwrap();
    let store = FilesystemStore::new(&config(not_a_dir, 15), "a");
    let (mut rx, stop, task) = crate::lease::driver::spawn(store, "a");
    let view = rx
        .wait_for(|v| !matches!(v.election, crate::cluster::Election::Off))
        .await
        .unwrap()
        .clone();
    let crate::cluster::Election::NoManager { reason } = &view.election else {
        panic!("expected NoManager, got {:?}", view.election)
    };
    assert!(reason.contains("refusing to elect over"));
    assert_eq!(view.status.to_json("a")["last_error"], reason.as_str());
    stop.send(()).unwrap();
    task.await.unwrap();
}

// === the conformance suite, real clock ===

struct Fs {
    dir: tempfile::TempDir,
}

impl Fs {
    fn new() -> Self {
        Fs {
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

impl Harness for Fs {
    type Store = FilesystemStore;
    fn contender(&self, name: &str) -> FilesystemStore {
        FilesystemStore::new(&config(self.dir.path().to_owned(), 3), name)
    }
    // Moving the deployment directory away is an unmounted store: every open fails.
    fn break_store(&self) {
        let d = self.dir.path();
        std::fs::rename(d.join("default"), d.join("away")).unwrap();
    }
    fn heal_store(&self) {
        let d = self.dir.path();
        std::fs::rename(d.join("away"), d.join("default")).unwrap();
    }
}

const FS_TIMING: LeaseTiming = LeaseTiming {
    round_every: Duration::from_secs(1),
    round_timeout: Duration::from_secs(1),
    duration: Duration::from_secs(3),
};

#[test]
fn ttl_three_renews_every_second() {
    assert_eq!(timing(3), FS_TIMING);
    assert_eq!(timing(15).round_every, Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_conformance_single_holder() {
    let _serial = conformance::serial().await;
    conformance::single_holder(&Fs::new(), FS_TIMING).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_conformance_fence_on_run_changes_on_takeover() {
    let _serial = conformance::serial().await;
    conformance::fence_on_run_changes_on_takeover(&Fs::new(), FS_TIMING).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_conformance_release_gives_immediate_takeover() {
    let _serial = conformance::serial().await;
    conformance::release_gives_immediate_takeover(&Fs::new(), FS_TIMING).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_conformance_overdue_holder_hands_over() {
    let _serial = conformance::serial().await;
    conformance::overdue_holder_hands_over(&Fs::new(), FS_TIMING).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_conformance_dead_holder_is_replaced() {
    let _serial = conformance::serial().await;
    conformance::dead_holder_is_replaced(&Fs::new(), FS_TIMING).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_conformance_outage_fails_closed_then_recovers() {
    let _serial = conformance::serial().await;
    conformance::outage_fails_closed_then_recovers(&Fs::new(), FS_TIMING).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_conformance_rbt_21_reboot_records_round_trip() {
    let _serial = conformance::serial().await;
    conformance::reboot_records_round_trip(&Fs::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_conformance_firing_claims_once() {
    let _serial = conformance::serial().await;
    conformance::firing_claims_once(&Fs::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_conformance_run_records_round_trip() {
    let _serial = conformance::serial().await;
    conformance::run_records_round_trip(&Fs::new()).await;
}

/// The handoff records in the shared directory: the documented format, a claim that succeeds
/// exactly once, and failures that name the path (RTY-04, RTY-05).
mod handoffs {
    use crate::handoff::conformance::{
        a_claim_whose_answer_was_lost_is_resumed, claims_exactly_once, record,
    };
    use crate::lease::conformance::fs_config;
    use crate::store::filesystem::handoff::FilesystemHandoffs;

    #[tokio::test]
    async fn rty_04_filesystem_records_are_json_files_claimed_once() {
        let dir = tempfile::tempdir().unwrap();
        let config = fs_config(dir.path());
        claims_exactly_once(
            FilesystemHandoffs::handoffs(&config),
            FilesystemHandoffs::handoffs(&config),
        )
        .await;
        // The documented name and format.
        let file = dir.path().join("prod/cluster/handoff/report@2000.json");
        let body: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(body["job"], "report");
        assert_eq!(body["scheduledAtMs"], 2000);
        assert_eq!(body["nextAttempt"], 2);
        assert_eq!(body["remainingAttempts"], 3);
        assert_eq!(body["notBeforeMs"], 5010);
        assert_eq!(body["fromNode"], "n1");
        assert_eq!(body["createdAtMs"], 10);
        assert_eq!(body["jobSetId"], "set-1");
        // No temporary or claimed files are left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path().join("prod/cluster/handoff"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["report@2000.json".to_owned()]);
    }

    #[tokio::test]
    async fn rty_05_an_unwritable_filesystem_store_fails_the_write_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        // The deployment's directory is a file, so the handoff directory cannot be made.
        std::fs::write(dir.path().join("prod"), "x").unwrap();
        let h = FilesystemHandoffs::handoffs(&fs_config(dir.path()));
        let e = h
            .write(&record("backup", 1, 1))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("prod/cluster/handoff"), "{e}");
    }

    #[tokio::test]
    async fn rty_05_a_missing_store_directory_fails_the_write_and_is_never_created() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("mnt");
        let h = FilesystemHandoffs::handoffs(&fs_config(&missing));
        let e = h
            .write(&record("backup", 1, 1))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("never creates it"), "{e}");
        assert!(!missing.exists());
    }

    #[tokio::test]
    async fn rty_04_a_filesystem_claim_whose_answer_was_lost_is_resumed() {
        let dir = tempfile::tempdir().unwrap();
        a_claim_whose_answer_was_lost_is_resumed(FilesystemHandoffs::handoffs(&fs_config(
            dir.path(),
        )))
        .await;
    }
}

#[test]
fn a_clock_off_the_store_by_more_than_the_budget_is_refused_either_way() {
    use super::{MAX_CLOCK_SKEW, SKEW_HYSTERESIS, skew_refusal};
    let probe = std::path::Path::new("/store/default/leases/.clock-a");
    let budget = MAX_CLOCK_SKEW.as_millis() as i64;
    assert_eq!(skew_refusal(10_000, 10_000, probe, false), None);
    assert_eq!(skew_refusal(10_000 + budget, 10_000, probe, false), None);
    assert_eq!(skew_refusal(10_000 - budget, 10_000, probe, false), None);
    let ahead = skew_refusal(15_000, 10_000, probe, false).expect("5 s ahead");
    assert!(ahead.contains("5.0 s ahead of the store's"), "{ahead}");
    assert!(ahead.contains(".clock-a"), "{ahead}");
    let behind = skew_refusal(10_000, 12_000, probe, false).expect("2 s behind");
    assert!(behind.contains("2.0 s behind"), "{behind}");
    // Standing down already, a clock on the bound stays refused until it is back within the
    // bound less the hysteresis, so a clock sitting on 1.5 s does not flap.
    let back = budget - SKEW_HYSTERESIS.as_millis() as i64;
    assert!(skew_refusal(10_000 + budget, 10_000, probe, true).is_some());
    assert!(skew_refusal(10_000 + back + 1, 10_000, probe, true).is_some());
    assert_eq!(skew_refusal(10_000 + back, 10_000, probe, true), None);
    assert_eq!(skew_refusal(10_000 - back, 10_000, probe, true), None);
}
