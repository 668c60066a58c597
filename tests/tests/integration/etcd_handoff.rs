//! Handoff records and `@reboot` records on a real etcd: the handoff checks every store passes
//! (`cronstable_coordinator::handoff::conformance`; the unit tests run them on the
//! filesystem store), and the @reboot records' own client round trip (RBT-21).

use std::collections::BTreeSet;

use cronstable_coordinator::handoff::conformance as handoff;
use cronstable_coordinator::lease::records_store::RecordsStore;
use cronstable_coordinator::store::etcd::EtcdStore;
use cronstable_tests::etcd::{Etcd, etcd_config};

use crate::etcd_ledger::Real;

#[tokio::test]
async fn rty_04_etcd_records_are_keys_claimed_once_by_mod_revision() {
    handoff::etcd_records_are_keys_claimed_once_by_mod_revision(&Real(Etcd::start())).await;
}

#[tokio::test]
async fn rty_04_an_etcd_claim_whose_answer_was_lost_is_resumed() {
    handoff::an_etcd_claim_whose_answer_was_lost_is_resumed(&Real(Etcd::start())).await;
}

#[tokio::test]
async fn rbt_21_etcd_records_round_trip_on_their_own_client() {
    let etcd = Etcd::start();
    let store = RecordsStore::over(EtcdStore::new(
        &etcd_config(vec![etcd.endpoint()], 6),
        "a",
        None,
    ));
    let jobs = BTreeSet::from(["migrate".to_owned()]);
    store.record("set-1", &jobs).await.unwrap();
    assert_eq!(store.read("set-1").await.unwrap(), jobs);
    assert!(store.read("set-2").await.unwrap().is_empty());
}
