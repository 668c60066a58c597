//! A `Handoff` that cannot be transferred (RTY-05, MAP-02), against real coordinators over
//! gRPC: with election off there is no shared store, and on the filesystem backend a handoff
//! directory that cannot be created fails the write. Both answer `transferred=false` with a
//! message naming the reason, and the ledger shows `handed_off` with `transferred: false` (the
//! shim then writes the cancelled record and the WARNING).

use cronstable_core::{ClusterPolicy, JobSpec};
use cronstable_proto::convert::job_to_wire;
use cronstable_proto::v1 as pb;
use cronstable_tests::lease::{Store, is_leader, start_lease_node};
use cronstable_tests::{Coordinator, http, wait_for};

/// Registers a Leader job `flaky` and hands off its attempt 2; returns the answer.
fn hand_off(node: &Coordinator) -> pb::HandoffResponse {
    hand_off_with(node, ClusterPolicy::Leader)
}

/// The same with `policy`.
fn hand_off_with(node: &Coordinator, policy: ClusterPolicy) -> pb::HandoffResponse {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut client = pb::executor_client::ExecutorClient::connect(node.api.clone())
            .await
            .unwrap();
        let mut job = JobSpec::new("flaky", "0 3 * * *", "false");
        job.cluster_policy = policy;
        client
            .register_jobs(pb::RegisterJobsRequest {
                executor_id: "t".into(),
                jobs: vec![job_to_wire(&job)],
                ..Default::default()
            })
            .await
            .unwrap();
        client
            .handoff(pb::HandoffRequest {
                executor_id: "t".into(),
                job: "flaky".into(),
                scheduled_at_ms: 60_000,
                remaining_attempts: 2,
                next_attempt_at_ms: 61_000,
                next_attempt: 2,
            })
            .await
            .unwrap()
            .into_inner()
    })
}

fn handed_off_record(node: &Coordinator) -> serde_json::Value {
    let body = http(node.web, "GET", "/jobs/flaky").unwrap().json();
    body["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["event"] == "handed_off")
        .cloned()
        .unwrap_or_else(|| panic!("no handed_off record: {body}"))
}

#[test]
fn rty_05_without_a_shared_store_a_handoff_is_not_transferred() {
    let dir = tempfile::tempdir().unwrap();
    let node = Coordinator::start(dir.path());
    let answer = hand_off(&node);
    assert!(!answer.transferred);
    assert!(
        answer.message.contains("no shared handoff store"),
        "{}",
        answer.message
    );
    let record = handed_off_record(&node);
    assert_eq!(record["transferred"], false, "{record}");
    assert_eq!(record["attempt"], 2, "{record}");
}

#[test]
fn rty_05_a_failed_store_write_is_not_transferred_and_names_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // `cluster` is a file, so the handoff directory under it cannot be created; the lease
    // under `leases/` still works.
    std::fs::create_dir_all(store.join("default")).unwrap();
    std::fs::write(store.join("default/cluster"), "not a directory").unwrap();
    let node = start_lease_node(dir.path(), "n1", &Store::Filesystem(store.clone()), 3);
    wait_for("n1 to lead", || is_leader(node.web).filter(|l| *l));
    let answer = hand_off(&node);
    assert!(!answer.transferred);
    assert!(
        answer.message.contains("could not be written") && answer.message.contains("handoff"),
        "{}",
        answer.message
    );
    assert_eq!(handed_off_record(&node)["transferred"], false);
    node.proc.wait_log("handoff record not written");
}

/// RTY-06 at the coordinator too: an EveryNode retry is never written for another node, even
/// on a backend with a shared store and even when a client other than the shim asks.
#[test]
fn rty_06_an_every_node_retry_is_never_handed_off() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let node = start_lease_node(dir.path(), "n1", &Store::Filesystem(store.clone()), 3);
    wait_for("n1 to lead", || is_leader(node.web).filter(|l| *l));
    let answer = hand_off_with(&node, ClusterPolicy::EveryNode);
    assert!(!answer.transferred);
    assert!(answer.message.contains("never move"), "{}", answer.message);
    assert_eq!(handed_off_record(&node)["transferred"], false);
    assert!(
        !store.join("default/cluster/handoff").exists()
            || std::fs::read_dir(store.join("default/cluster/handoff"))
                .unwrap()
                .next()
                .is_none(),
        "no handoff record written"
    );
}
