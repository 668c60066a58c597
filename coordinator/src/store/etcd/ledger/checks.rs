//! The etcd ledger's own checks against a real etcd (what the shared suite in
//! [`crate::ledger::conformance`] does not cover: an etcd down at start, pruning), here beside
//! the code they reach into; the integration tier runs them and the suite against a real etcd
//! process (`tests/tests/integration/etcd_ledger.rs`), so the coordinator's own unit tests
//! need no etcd.

use std::time::Duration;

use cronstable_core::{FiringKind, Reason, Verdict};

use super::*;
use crate::lease::conformance::{RealEtcd, etcd_config};
use crate::ledger::Event;

/// A ledger record of `job` at `at` on node n1.
pub(crate) fn record(job: &str, at: i64, event: Event) -> Record {
    Record {
        job: job.into(),
        scheduled_at_ms: at,
        kind: FiringKind::Scheduled,
        attempt: 1,
        node: "n1".into(),
        recorded_at_ms: at + 5,
        event,
    }
}

/// Polls etcd until `prefix` holds `n` keys (the writer is asynchronous).
async fn wait_for_keys(client: &mut Client, prefix: &EtcdLedgerPlace, n: i64) {
    for _ in 0..200 {
        let got = client
            .get(
                prefix.prefix.clone(),
                Some(GetOptions::new().with_range(prefix.end()).with_count_only()),
            )
            .await
            .unwrap()
            .count();
        if got == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("etcd never held {n} ledger keys under {}", prefix.prefix);
}

/// An etcd that is down at start costs the history, not the start; records made meanwhile
/// land once it is back.
pub async fn an_unreachable_etcd_delays_writes_and_loses_none(etcd: &impl RealEtcd) {
    let cfg = etcd_config(vec![etcd.endpoint()], 6);
    etcd.stop();
    let ledger = Ledger::new();
    let started = tokio::time::Instant::now();
    open(&EtcdCredentials::fixed(&cfg, None), "n1", &ledger)
        .await
        .unwrap();
    assert!(started.elapsed() <= LOAD_TIMEOUT + Duration::from_secs(2));
    for at in [1_000, 2_000, 3_000] {
        ledger.append(record(
            "backup",
            at,
            Event::Decided {
                verdict: Verdict::Skip,
                reason: Reason::NoQuorum,
            },
        ));
    }
    etcd.restart();
    let mut client = Client::connect([etcd.endpoint()], None).await.unwrap();
    wait_for_keys(
        &mut client,
        &EtcdLedgerPlace::new("cronstable/leader", "n1"),
        3,
    )
    .await;
}

/// Pruning keeps a node's newest records and drops the oldest.
pub async fn pruning_keeps_the_newest_records(etcd: &impl RealEtcd) {
    let mut client = Client::connect([etcd.endpoint()], None).await.unwrap();
    let place = EtcdLedgerPlace::new("cronstable/leader", "n1");
    for i in 0..10 {
        let r = record("backup", 1_000 * i, Event::Started { at_ms: 0, pid: 1 });
        client
            .put(place.key(&r, i as u64), encode(&r), None)
            .await
            .unwrap();
    }
    prune(&mut client, &place, Duration::from_secs(2), 4)
        .await
        .unwrap();
    let left = Ledger::new();
    let (loaded, skipped) = load(&mut client, &place, &left).await.unwrap();
    assert_eq!((loaded, skipped), (4, 0));
    let ats: Vec<i64> = left
        .records("backup")
        .iter()
        .map(|r| r.scheduled_at_ms)
        .collect();
    assert_eq!(ats, vec![6_000, 7_000, 8_000, 9_000]);
}
