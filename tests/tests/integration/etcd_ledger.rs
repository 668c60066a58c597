//! The etcd run ledger (`state.store: etcd`) against a real etcd: history read back by the next
//! coordinator, writes held while etcd is down and none lost, pruning. The checks live beside
//! the ledger (`cronstable_coordinator::store::etcd::ledger::checks`); this tier gives them the etcd.

use cronstable_coordinator::lease::conformance::RealEtcd;
use cronstable_coordinator::store::etcd::ledger::checks;
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

#[tokio::test]
async fn records_written_by_one_coordinator_are_read_back_by_the_next() {
    checks::records_written_by_one_coordinator_are_read_back_by_the_next(&Real(Etcd::start()))
        .await;
}

#[tokio::test]
async fn an_unreachable_etcd_delays_writes_and_loses_none() {
    checks::an_unreachable_etcd_delays_writes_and_loses_none(&Real(Etcd::start())).await;
}

#[tokio::test]
async fn pruning_keeps_the_newest_records() {
    checks::pruning_keeps_the_newest_records(&Real(Etcd::start())).await;
}
