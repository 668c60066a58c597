//! The @reboot records' own store client on the filesystem store (a temporary directory; on a
//! real etcd in `tests/tests/integration/etcd_handoff.rs`), and the gate's write-before-RUN for Leader one-shots over it (RBT-21, RBT-22).

use std::collections::BTreeSet;
use std::time::Duration;

use cronstable_core::{ClusterPolicy, Firing, FiringKind, JobSpec, Reason, Verdict};
use tokio::sync::watch;

use super::{CALL_TIMEOUT, RecordsStore};
use crate::clock::Now;
use crate::cluster::{ClusterView, Election, ManagedView};
use crate::lease::conformance::{etcd_config, fs_config};
use crate::state::CoordinatorState;
use crate::store::etcd::EtcdStore;
use crate::store::filesystem::FilesystemStore;

fn jobs(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// This node ("a") leads a quorate lease cluster.
fn leading() -> ClusterView {
    let mut v = ClusterView::election_off("a");
    v.election = Election::Managed(ManagedView {
        quorate: true,
        leader: Some("a".to_owned()),
        ..ManagedView::default()
    });
    v
}

/// A state over `store` with a Leader and a PreferLeader @reboot job registered.
fn state_with(store: std::sync::Arc<RecordsStore>) -> (CoordinatorState, String) {
    let (_tx, rx) = watch::channel(leading());
    let state = CoordinatorState::new(rx).with_records_store(Some(store));
    let mut migrate = JobSpec::new("migrate", "@reboot", "./migrate");
    migrate.cluster_policy = ClusterPolicy::Leader;
    let mut announce = JobSpec::new("announce", "@reboot", "./announce");
    announce.cluster_policy = ClusterPolicy::PreferLeader;
    state
        .registry
        .register("shim-1", vec![migrate, announce])
        .unwrap();
    let id = state.registry.current().id.as_str().to_owned();
    (state, id)
}

/// The `@reboot` one-shot of `job`, at instant 1.
fn boot(job: &str) -> Firing {
    Firing {
        job: job.into(),
        scheduled_at_ms: 1,
        kind: FiringKind::Reboot,
    }
}

#[tokio::test]
async fn rbt_21_filesystem_records_round_trip_on_their_own_client() {
    let dir = tempfile::tempdir().unwrap();
    let store = RecordsStore::over(FilesystemStore::new(&fs_config(dir.path()), "a"));
    // A store mount that is not there is an error, not "nothing ran" (RBT-22).
    assert!(store.read("set-1").await.is_err());
    // The lease store creates the deployment directory; `cluster/` may not exist yet.
    std::fs::create_dir_all(dir.path().join("prod")).unwrap();
    assert!(store.read("set-1").await.unwrap().is_empty(), "fresh store");
    store.record("set-1", &jobs(&["migrate"])).await.unwrap();
    store.record("set-2", &jobs(&["other"])).await.unwrap();
    assert_eq!(store.read("set-1").await.unwrap(), jobs(&["migrate"]));
    // The same stream the lease store's records use (README: cluster/reboot-ran).
    assert!(dir.path().join("prod/cluster/reboot-ran").is_file());
}

#[tokio::test]
async fn rbt_22_a_leader_one_shot_is_recorded_before_it_is_answered_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = RecordsStore::over(FilesystemStore::new(&fs_config(dir.path()), "a"));
    let (state, id) = state_with(store.clone());
    // The stream cannot be written: a directory stands where the file goes.
    let stream = dir.path().join("prod/cluster/reboot-ran");
    std::fs::create_dir_all(&stream).unwrap();

    let held = state
        .should_run(&boot("migrate"), Now::with_unix_ms(1))
        .await
        .unwrap();
    assert_eq!(held.decision.verdict, Verdict::Defer, "{held:?}");
    assert_eq!(held.decision.reason, Reason::ConvergenceHold);
    assert!(
        held.message.contains("could not be written"),
        "{}",
        held.message
    );
    assert!(
        state.reboot_ran.jobs_under(&id).is_empty(),
        "not marked as ran"
    );
    // PreferLeader is never held up by the store (RBT-20).
    let prefer = state
        .should_run(&boot("announce"), Now::with_unix_ms(1))
        .await
        .unwrap();
    assert_eq!(prefer.decision.verdict, Verdict::Run, "{prefer:?}");

    // The store is writable again: RUN, and the record is already there when the answer is.
    std::fs::remove_dir(&stream).unwrap();
    let run = state
        .should_run(&boot("migrate"), Now::with_unix_ms(2))
        .await
        .unwrap();
    assert_eq!(run.decision.verdict, Verdict::Run, "{run:?}");
    assert_eq!(store.read(&id).await.unwrap(), jobs(&["migrate"]));
    assert!(state.reboot_ran.jobs_under(&id).contains("migrate"));
}

#[tokio::test]
async fn rbt_22_an_unreachable_etcd_defers_a_leader_one_shot_within_the_bound() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let store = RecordsStore::over(EtcdStore::new(
        &etcd_config(vec![format!("http://127.0.0.1:{port}")], 6),
        "a",
        None,
    ));
    let (state, _) = state_with(store);
    let started = tokio::time::Instant::now();
    let held = state
        .should_run(&boot("migrate"), Now::with_unix_ms(1))
        .await
        .unwrap();
    assert_eq!(held.decision.verdict, Verdict::Defer, "{held:?}");
    assert!(
        started.elapsed() < CALL_TIMEOUT + Duration::from_secs(1),
        "bounded: {:?}",
        started.elapsed()
    );
}

/// A state leading over `store` with one scheduled Leader job, "report".
fn leading_with_report(store: std::sync::Arc<RecordsStore>) -> CoordinatorState {
    let (_tx, rx) = watch::channel(leading());
    let state = CoordinatorState::new(rx).with_records_store(Some(store));
    let mut report = JobSpec::new("report", "* * * * *", "./report");
    report.cluster_policy = ClusterPolicy::Leader;
    state.registry.register("shim-1", vec![report]).unwrap();
    state
}

fn scheduled(at_ms: i64) -> Firing {
    Firing {
        job: "report".into(),
        scheduled_at_ms: at_ms,
        kind: FiringKind::Scheduled,
    }
}

#[tokio::test]
async fn a_scheduled_leader_firing_is_claimed_before_run_and_deferred_when_it_cannot_be() {
    let dir = tempfile::tempdir().unwrap();
    let store = RecordsStore::over(FilesystemStore::new(&fs_config(dir.path()), "a"));
    let state = leading_with_report(store.clone());
    // The claims cannot be written: a file stands where their directory goes.
    let claims = dir.path().join("prod/cluster/claims");
    std::fs::create_dir_all(claims.parent().unwrap()).unwrap();
    std::fs::write(&claims, b"").unwrap();
    let held = state
        .should_run(&scheduled(60_000), Now::with_unix_ms(60_100))
        .await
        .unwrap();
    assert_eq!(held.decision.verdict, Verdict::Defer, "{held:?}");
    assert!(
        held.message.contains("claim could not be written"),
        "{}",
        held.message
    );

    // Writable again: RUN, and the claim is there; asked again, still RUN (its own claim).
    std::fs::remove_file(&claims).unwrap();
    for _ in 0..2 {
        let run = state
            .should_run(&scheduled(60_000), Now::with_unix_ms(60_200))
            .await
            .unwrap();
        assert_eq!(run.decision.verdict, Verdict::Run, "{run:?}");
    }
    assert_eq!(std::fs::read_dir(&claims).unwrap().count(), 1);

    // Another holder (a new process of another node) over the same store: SKIP already_ran.
    let other = RecordsStore::over(FilesystemStore::new(&fs_config(dir.path()), "b"));
    let mut view = leading();
    view.node_name = "b".into();
    if let Election::Managed(m) = &mut view.election {
        m.leader = Some("b".into());
    }
    let (_tx, rx) = watch::channel(view);
    let successor = CoordinatorState::new(rx).with_records_store(Some(other));
    successor
        .registry
        .register(
            "shim-1",
            state
                .registry
                .current()
                .jobs
                .values()
                .map(|j| j.spec.clone())
                .collect(),
        )
        .unwrap();
    let skipped = successor
        .should_run(&scheduled(60_000), Now::with_unix_ms(61_000))
        .await
        .unwrap();
    assert_eq!(
        (skipped.decision.verdict, skipped.decision.reason),
        (Verdict::Skip, Reason::AlreadyRan),
        "{skipped:?}"
    );
    assert!(
        skipped.message.contains("node \"a\""),
        "{}",
        skipped.message
    );
    // Each attempt counted by its result.
    let counted = |state: &CoordinatorState, result: &str| {
        let text = state.metrics.render(&serde_json::json!({}));
        let series = format!("cronstable_firing_claims_total{{result=\"{result}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .map(|v| v.trim().to_owned())
    };
    assert_eq!(counted(&state, "failed").as_deref(), Some("1"));
    assert_eq!(counted(&state, "won").as_deref(), Some("2"));
    assert_eq!(counted(&successor, "taken").as_deref(), Some("1"));
}
