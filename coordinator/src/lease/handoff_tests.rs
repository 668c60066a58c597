//! Handoff records on the filesystem store (a temporary directory): the format, that a claim
//! succeeds exactly once, and the lease holder's resume pass (RTY-04, RTY-07). The same checks
//! on a real etcd run in the integration tier (`tests/tests/integration/etcd_handoff.rs`).

use std::time::Duration;

use cronstable_core::{FiringKind, JobSpec, Reason};

use super::handoff::RECORD_EXPIRY;
use super::handoff_conformance::{
    a_claim_whose_answer_was_lost_is_resumed, claims_exactly_once, leading_state, record,
};
use super::handoff_resume::{InFlight, scan_once};
use crate::store::etcd::handoff::EtcdHandoffs;
use crate::store::filesystem::handoff::FilesystemHandoffs;
use crate::store::kubernetes::handoff::KubernetesHandoffs;

use super::conformance::{etcd_config, fs_config};
use crate::ledger::{Event, Record};
use crate::state::Instruction;

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
    let body: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
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
async fn rty_05_an_unreachable_etcd_fails_the_write_within_its_bound() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let h =
        EtcdHandoffs::without_password(&etcd_config(vec![format!("http://127.0.0.1:{port}")], 6));
    let took = tokio::time::Instant::now();
    assert!(h.write(&record("backup", 1, 1)).await.is_err());
    assert!(took.elapsed() <= super::handoff::WRITE_TIMEOUT + Duration::from_millis(500));
}

#[tokio::test]
async fn rty_04_the_holder_resumes_its_own_jobs_leaves_others_and_expires_old_records() {
    let dir = tempfile::tempdir().unwrap();
    let h = FilesystemHandoffs::handoffs(&fs_config(dir.path()));
    let state = leading_state("n2");
    state
        .registry
        .register(
            "shim-n2",
            vec![JobSpec::new("backup", "* * * * *", "false")],
        )
        .unwrap();
    let now = 10_000_000;
    h.write(&record("backup", 1_000, now - 1_000))
        .await
        .unwrap();
    h.write(&record("elsewhere", 1_000, now - 1_000))
        .await
        .unwrap();
    let old = now - RECORD_EXPIRY.as_millis() as i64 - 1;
    h.write(&record("backup", 500, old)).await.unwrap();

    // Not watching yet: the record of its own job waits too (only the expired one goes).
    let mut in_flight = InFlight::default();
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    let left: Vec<_> = h.pending().await.unwrap();
    assert_eq!(left.len(), 2, "{left:?}");
    let cancelled = state
        .ledger
        .inspect("backup", |r| r.iter().cloned().collect::<Vec<_>>());
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].kind, FiringKind::Retry { attempt: 2 });
    assert!(matches!(
        &cancelled[0].event,
        Event::Skipped { reason: Some(Reason::NotOwner), message } if message.contains("retry abandoned")
    ));

    let mut watch = state.open_watch("shim-n2");
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert_eq!(
        watch.try_recv().unwrap(),
        Instruction::ResumeRetry {
            job: "backup".into(),
            scheduled_at_ms: 1_000,
            next_attempt: 2,
            remaining_attempts: 3,
            not_before_ms: now + 4_000,
        }
    );
    // The resumed record stays, claimed, until the executor acts on it.
    let left = h.pending().await.unwrap();
    assert_eq!(left.len(), 2, "{left:?}");
    let backup = left.iter().find(|p| p.record.job == "backup").unwrap();
    assert!(backup.record.claimed_by.is_some());
    let elsewhere = left.iter().find(|p| p.record.job == "elsewhere").unwrap();
    assert!(elsewhere.record.claimed_by.is_none());
}

/// A shim restart loses no handed-off sequence: one sent to an executor whose Watch stream
/// closes before it acted goes back to the store and is offered again; one it acted on does not.
#[tokio::test]
async fn rty_04_a_sequence_its_executor_never_acted_on_goes_back_to_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let h = FilesystemHandoffs::handoffs(&fs_config(dir.path()));
    let state = leading_state("n2");
    state
        .registry
        .register(
            "shim-n2",
            vec![JobSpec::new("backup", "* * * * *", "false")],
        )
        .unwrap();
    let now = 10_000_000;
    h.write(&record("backup", 1_000, now - 1_000))
        .await
        .unwrap();
    let mut in_flight = InFlight::default();

    let watch = state.open_watch("shim-n2");
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    let held = h.pending().await.unwrap();
    assert!(held[0].record.claimed_by.is_some(), "claimed: {held:?}");
    assert_eq!(in_flight.len(), 1);
    drop(watch); // the shim died before it asked about attempt 2
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert!(in_flight.is_empty());
    let back = h.pending().await.unwrap();
    assert_eq!(back.len(), 1, "released: {back:?}");
    assert_eq!(back[0].record.next_attempt, 2);
    assert!(back[0].record.claimed_by.is_none(), "released: {back:?}");

    // The restarted shim watches again: offered again, and this time it acts on it.
    let mut watch = state.open_watch("shim-n2");
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert!(matches!(
        watch.try_recv().unwrap(),
        Instruction::ResumeRetry {
            next_attempt: 2,
            ..
        }
    ));
    state.record(Record {
        job: "backup".into(),
        scheduled_at_ms: 1_000,
        kind: FiringKind::Retry { attempt: 2 },
        attempt: 2,
        node: "n2".into(),
        recorded_at_ms: now,
        event: Event::Decided {
            verdict: cronstable_core::Verdict::Run,
            reason: Reason::Leader,
        },
    });
    drop(watch);
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert!(in_flight.is_empty());
    assert!(
        h.pending().await.unwrap().is_empty(),
        "acted on: not written back"
    );
}

#[tokio::test]
async fn rty_04_a_filesystem_claim_whose_answer_was_lost_is_resumed() {
    let dir = tempfile::tempdir().unwrap();
    a_claim_whose_answer_was_lost_is_resumed(FilesystemHandoffs::handoffs(&fs_config(dir.path())))
        .await;
}

/// Another claimer's claim is left alone (it may be resuming it right now); once the record is
/// past its expiry, the claimer is taken to be gone and the record is dropped with a cancelled
/// record instead of being run again.
#[tokio::test]
async fn rty_04_another_claimers_record_is_left_alone_until_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let h = FilesystemHandoffs::handoffs(&fs_config(dir.path()));
    let state = leading_state("n2");
    state
        .registry
        .register(
            "shim-n2",
            vec![JobSpec::new("backup", "* * * * *", "false")],
        )
        .unwrap();
    let now = 10_000_000;
    h.write(&record("backup", 1_000, now - 1_000))
        .await
        .unwrap();
    let scanned = h.pending().await.unwrap().remove(0);
    h.claim(&scanned, "n3-dead", now).await.unwrap().unwrap();

    let mut watch = state.open_watch("shim-n2");
    let mut in_flight = InFlight::default();
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert!(
        watch.try_recv().is_err(),
        "another node's claim is not resumed here"
    );
    assert_eq!(h.pending().await.unwrap().len(), 1);

    let later = now + RECORD_EXPIRY.as_millis() as i64;
    scan_once(&h, &state, later, &mut in_flight).await.unwrap();
    assert!(
        watch.try_recv().is_err(),
        "an expired claim is not run again"
    );
    assert!(h.pending().await.unwrap().is_empty());
    let cancelled = state
        .ledger
        .inspect("backup", |r| r.iter().cloned().collect::<Vec<_>>());
    assert!(
        matches!(
            &cancelled[..],
            [Record { event: Event::Skipped { message, .. }, .. }] if message.contains("retry abandoned")
        ),
        "{cancelled:?}"
    );
}

/// A service-account directory and a Kubernetes config for the fake apiserver at `url`.
fn k8s_setup(
    url: &str,
    lib: crate::config::cluster::ClientLibrary,
) -> (
    tempfile::TempDir,
    crate::config::cluster::KubernetesConfig,
    crate::store::kubernetes::api::K8sEnv,
) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "t").unwrap();
    std::fs::write(dir.path().join("namespace"), "jobs\n").unwrap();
    let config = crate::config::cluster::KubernetesConfig {
        api_server: Some(url.to_owned()),
        client_library: lib,
        ..Default::default()
    };
    let env = crate::store::kubernetes::api::K8sEnv {
        service_host: None,
        service_port: None,
        service_account_dir: dir.path().to_owned(),
    };
    (dir, config, env)
}

async fn kubernetes_records_are_claimed_once(lib: crate::config::cluster::ClientLibrary) {
    let fake = crate::store::kubernetes::fake::FakeApiServer::start().await;
    let (_dir, config, env) = k8s_setup(&fake.url(), lib);
    let a = KubernetesHandoffs::handoffs(&config, "n1", env.clone());
    let b = KubernetesHandoffs::handoffs(&config, "n2", env);
    claims_exactly_once(a.clone(), b).await;
    // The documented object and annotation, beside (not on) the election Lease.
    let object = fake.lease("jobs", "cronstable-leader-handoff").unwrap();
    let text = object["metadata"]["annotations"]["cronstable.io/handoff-records"]
        .as_str()
        .unwrap();
    let map: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(map["report@2000"]["job"], "report");
    assert_eq!(map["report@2000"]["nextAttempt"], 2);
    assert!(fake.lease("jobs", "cronstable-leader").is_none());
    // An entry that does not decode is skipped and kept; the others still work.
    fake.edit("jobs", "cronstable-leader-handoff", |o| {
        let mut m: serde_json::Value = serde_json::from_str(
            o["metadata"]["annotations"]["cronstable.io/handoff-records"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        m["junk@1"] = serde_json::json!({"job": 7});
        o["metadata"]["annotations"]["cronstable.io/handoff-records"] =
            serde_json::Value::String(m.to_string());
    });
    let seen = a.pending().await.unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(a.remove(&seen[0]).await.unwrap());
    let object = fake.lease("jobs", "cronstable-leader-handoff").unwrap();
    assert!(
        object["metadata"]["annotations"]["cronstable.io/handoff-records"]
            .as_str()
            .unwrap()
            .contains("junk@1")
    );
}

#[tokio::test]
async fn rty_04_kubernetes_records_are_claimed_once_through_the_rest_client() {
    kubernetes_records_are_claimed_once(crate::config::cluster::ClientLibrary::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rty_04_kubernetes_records_are_claimed_once_through_the_kube_library() {
    kubernetes_records_are_claimed_once(crate::config::cluster::ClientLibrary::Library).await;
}

#[tokio::test]
async fn rty_04_a_kubernetes_claim_whose_answer_was_lost_is_resumed() {
    let fake = crate::store::kubernetes::fake::FakeApiServer::start().await;
    let (_dir, config, env) = k8s_setup(&fake.url(), crate::config::cluster::ClientLibrary::Http);
    a_claim_whose_answer_was_lost_is_resumed(KubernetesHandoffs::handoffs(&config, "n2", env))
        .await;
}

/// A write that races another writer (a 409 between the read and the write) reads again and
/// keeps both records; an apiserver that is down fails the write within its bound.
#[tokio::test]
async fn rty_05_kubernetes_writes_survive_a_race_and_fail_in_time_when_down() {
    let fake = crate::store::kubernetes::fake::FakeApiServer::start().await;
    let (_dir, config, env) = k8s_setup(&fake.url(), crate::config::cluster::ClientLibrary::Http);
    let h = KubernetesHandoffs::handoffs(&config, "n1", env);
    h.write(&record("backup", 1_000, 10)).await.unwrap();
    fake.race_next_get();
    h.write(&record("report", 2_000, 10)).await.unwrap();
    let names: Vec<_> = h
        .pending()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(
        names,
        vec!["backup@1000".to_owned(), "report@2000".to_owned()]
    );
    fake.set_down(true);
    let took = tokio::time::Instant::now();
    let e = h.write(&record("late", 3_000, 10)).await.unwrap_err();
    assert!(took.elapsed() <= super::handoff::WRITE_TIMEOUT + Duration::from_millis(500));
    assert!(!e.to_string().is_empty());
}
