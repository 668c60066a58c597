//! The etcd run ledger (`state.store: etcd`) against a real etcd: the ledger stores' shared suite
//! (`cronstable_coordinator::ledger::conformance`: history read back by the next coordinator, in
//! order, after a restart, within the per-job bound), then etcd's own checks (writes held while
//! etcd is down and none lost, pruning) from `cronstable_coordinator::store::etcd::ledger::checks`.
//! This tier gives them the etcd.

use cronstable_coordinator::lease::conformance::{RealEtcd, etcd_config};
use cronstable_coordinator::ledger::conformance;
use cronstable_coordinator::store::etcd::ledger::{EtcdLedger, checks};
use cronstable_tests::etcd::Etcd;

/// The test etcd as the checks see it.
pub(crate) struct Real(pub(crate) Etcd);

impl RealEtcd for Real {
    fn endpoint(&self) -> String {
        self.0.endpoint()
    }
    fn stop(&self) {
        self.0.stop();
    }
    fn restart(&self) {
        self.0.restart();
    }
}

/// The ledger in a fresh etcd, with the etcd kept running while it is used.
fn fresh() -> (Etcd, EtcdLedger) {
    let etcd = Etcd::start();
    let store = EtcdLedger::without_password(&etcd_config(vec![etcd.endpoint()], 6));
    (etcd, store)
}

#[tokio::test]
async fn history_is_read_back_by_the_next_start() {
    let (_etcd, store) = fresh();
    conformance::history_is_read_back_by_the_next_start(&store).await;
}

#[tokio::test]
async fn a_reopened_ledger_goes_on_after_its_history() {
    let (_etcd, store) = fresh();
    conformance::a_reopened_ledger_goes_on_after_its_history(&store).await;
}

#[tokio::test]
async fn a_read_back_keeps_the_newest_records_per_job() {
    let (_etcd, store) = fresh();
    conformance::a_read_back_keeps_the_newest_records_per_job(&store).await;
}

#[tokio::test]
async fn an_unreachable_etcd_delays_writes_and_loses_none() {
    checks::an_unreachable_etcd_delays_writes_and_loses_none(&Real(Etcd::start())).await;
}

#[tokio::test]
async fn pruning_keeps_the_newest_records() {
    checks::pruning_keeps_the_newest_records(&Real(Etcd::start())).await;
}
