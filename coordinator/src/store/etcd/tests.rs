//! What the etcd store's clients do without an etcd (unit tier); everything that needs a real
//! etcd runs in the integration tier.

use std::time::Duration;

use crate::handoff::conformance::record;
use crate::lease::conformance::etcd_config;
use crate::store::etcd::handoff::EtcdHandoffs;

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
    assert!(took.elapsed() <= crate::handoff::WRITE_TIMEOUT + Duration::from_millis(500));
}
