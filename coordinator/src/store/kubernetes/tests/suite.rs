//! The conformance suite on the Kubernetes store against the fake apiserver, through both
//! clients, on the real clock (rounds every 500 ms, lease 3 s), serialised with the other
//! real-clock suites.

use super::*;

struct K8s {
    fake: FakeApiServer,
    dir: tempfile::TempDir,
    lib: ClientLibrary,
}

impl K8s {
    async fn new(lib: ClientLibrary) -> Self {
        K8s {
            fake: FakeApiServer::start().await,
            dir: sa_dir("t"),
            lib,
        }
    }
}

impl Harness for K8s {
    type Store = KubernetesStore;
    fn contender(&self, name: &str) -> KubernetesStore {
        let cfg = config(&self.fake.url(), self.lib);
        KubernetesStore::new(&cfg, name, env(self.dir.path())).with_timing(T)
    }
    fn break_store(&self) {
        self.fake.set_down(true);
    }
    fn heal_store(&self) {
        self.fake.set_down(false);
    }
}

both_clients!(
    single_holder,
    fence_on_run_changes_on_takeover,
    release_gives_immediate_takeover,
    overdue_holder_hands_over,
    dead_holder_is_replaced,
    outage_fails_closed_then_recovers,
    duplicate_identity_cannot_give_two_leaders,
    rbt_21_reboot_records_round_trip,
);

async fn rbt_21_reboot_records_round_trip(lib: ClientLibrary) {
    let _serial = conformance::serial().await;
    conformance::reboot_records_round_trip(&K8s::new(lib).await).await;
}

async fn single_holder(lib: ClientLibrary) {
    let _serial = conformance::serial().await;
    conformance::single_holder(&K8s::new(lib).await, T).await;
}

async fn fence_on_run_changes_on_takeover(lib: ClientLibrary) {
    let _serial = conformance::serial().await;
    conformance::fence_on_run_changes_on_takeover(&K8s::new(lib).await, T).await;
}

async fn release_gives_immediate_takeover(lib: ClientLibrary) {
    let _serial = conformance::serial().await;
    conformance::release_gives_immediate_takeover(&K8s::new(lib).await, T).await;
}

async fn overdue_holder_hands_over(lib: ClientLibrary) {
    let _serial = conformance::serial().await;
    conformance::overdue_holder_hands_over(&K8s::new(lib).await, T).await;
}

async fn dead_holder_is_replaced(lib: ClientLibrary) {
    let _serial = conformance::serial().await;
    let took = conformance::dead_holder_is_replaced(&K8s::new(lib).await, T).await;
    // LSE-K-02: never sooner than a lease duration after the last renew could have been seen.
    assert!(took >= T.duration - T.round_every, "took {took:?}");
}

async fn outage_fails_closed_then_recovers(lib: ClientLibrary) {
    let _serial = conformance::serial().await;
    conformance::outage_fails_closed_then_recovers(&K8s::new(lib).await, T).await;
}

/// LSE-03 through the driver: two processes named "a" write distinct holders.
async fn duplicate_identity_cannot_give_two_leaders(lib: ClientLibrary) {
    let _serial = conformance::serial().await;
    let h = K8s::new(lib).await;
    let nodes = [Node::start(&h, "a"), Node::start(&h, "a")];
    conformance::one_leader(&nodes, T).await;
    let until = Instant::now() + T.duration;
    while Instant::now() < until {
        assert!(nodes.iter().filter(|n| n.leads()).count() <= 1);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for n in nodes {
        n.stop().await;
    }
}
