//! Driver tests on the in-memory store with a paused clock, and the conformance suite run
//! against the in-memory store.

use std::time::Duration;

use cronstable_core::{ClusterPolicy, FiringKind, Reason, Verdict, decide};
use tokio::time::Instant;

use super::conformance::{self, Harness, Node, wait_until};
use super::memory::{MemoryServer, MemoryStore};
use super::{LeaseTiming, SAFETY_MARGIN};
use crate::cluster::{ClusterView, Election};

/// ttl 6 s: rounds every 2 s, each bounded by 1 s.
const TIMING: LeaseTiming = LeaseTiming {
    round_every: Duration::from_secs(2),
    round_timeout: Duration::from_secs(1),
    duration: Duration::from_secs(6),
};

struct Memory(MemoryServer);

impl Harness for Memory {
    type Store = MemoryStore;
    fn contender(&self, name: &str) -> MemoryStore {
        self.0.client(name, TIMING)
    }
    fn break_store(&self) {
        self.0.set_down(true);
    }
    fn heal_store(&self) {
        self.0.set_down(false);
    }
}

fn memory() -> Memory {
    Memory(MemoryServer::new())
}

fn verdict(view: &ClusterView, policy: ClusterPolicy, now: Instant) -> (Verdict, Reason) {
    let d = decide(policy, FiringKind::Scheduled, view.gate_for("job", now));
    (d.verdict, d.reason)
}

// === the conformance suite on the in-memory store ===

#[tokio::test(start_paused = true)]
async fn memory_conformance_single_holder() {
    conformance::single_holder(&memory(), TIMING).await;
}

#[tokio::test(start_paused = true)]
async fn memory_conformance_fence_on_run_changes_on_takeover() {
    conformance::fence_on_run_changes_on_takeover(&memory(), TIMING).await;
}

#[tokio::test(start_paused = true)]
async fn memory_conformance_release_gives_immediate_takeover() {
    let took = conformance::release_gives_immediate_takeover(&memory(), TIMING).await;
    assert!(took <= TIMING.round_every, "took {took:?}");
}

#[tokio::test(start_paused = true)]
async fn memory_conformance_overdue_holder_hands_over() {
    let took = conformance::overdue_holder_hands_over(&memory(), TIMING).await;
    // The holder acts on the signal at once, not at its next round; the follower takes the
    // free lease at its next look (plus this check's 50 ms polling).
    assert!(
        took <= super::driver::FOLLOWER_ROUND + Duration::from_millis(100),
        "took {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn memory_conformance_dead_holder_is_replaced() {
    let took = conformance::dead_holder_is_replaced(&memory(), TIMING).await;
    // The store lets a challenger in one margin after expiry; it notices on its next round.
    assert!(
        took <= TIMING.duration + SAFETY_MARGIN + TIMING.round_every,
        "took {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn memory_conformance_outage_fails_closed_then_recovers() {
    conformance::outage_fails_closed_then_recovers(&memory(), TIMING).await;
}

// === driver behaviour the suite does not pin down ===

#[tokio::test(start_paused = true)]
async fn a_wedged_store_call_demotes_the_holder_at_its_local_deadline() {
    let h = memory();
    let a = Node::start(&h, "a");
    wait_until("a leads", TIMING.duration, || a.leads()).await;
    // Renewed just now: wedge the store, and keep the snapshot the driver last published.
    tokio::time::sleep(TIMING.round_every).await;
    let renewed = Instant::now();
    h.0.set_wedged(true);
    let snapshot = a.view.borrow().clone();
    let Election::Managed(m) = &snapshot.election else {
        panic!("a managed view")
    };
    let deadline = m.lead_until.expect("a holder has a local deadline");
    assert!(deadline <= renewed + TIMING.duration - SAFETY_MARGIN);
    // The snapshot alone, with no store call, stops leading at the deadline.
    let just_before = deadline - Duration::from_millis(1);
    assert_eq!(
        verdict(&snapshot, ClusterPolicy::Leader, just_before).0,
        Verdict::Run
    );
    assert_eq!(
        verdict(&snapshot, ClusterPolicy::Leader, deadline),
        (Verdict::Skip, Reason::NotLeader)
    );
    // The live view agrees once the clock gets there, although every round since then hung.
    tokio::time::sleep_until(deadline).await;
    assert!(!a.leads());
    tokio::time::sleep_until(m.quorate_until.expect("a quorum deadline")).await;
    assert_eq!(
        verdict(&a.view.borrow(), ClusterPolicy::Leader, Instant::now()),
        (Verdict::Skip, Reason::NoQuorum)
    );
    assert_eq!(a.verdict(ClusterPolicy::PreferLeader), Verdict::Run);
    h.0.set_wedged(false);
    wait_until("a leads again", TIMING.duration, || a.leads()).await;
    a.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_follower_defers_prefer_leader_to_the_holder_it_can_see() {
    let h = memory();
    let nodes = [Node::start(&h, "a"), Node::start(&h, "b")];
    let first = conformance::one_leader(&nodes, TIMING).await;
    let (leader, follower) = (&nodes[first], &nodes[1 - first]);
    wait_until("the follower has read the holder", TIMING.duration, || {
        follower.verdict(ClusterPolicy::PreferLeader) == Verdict::Skip
    })
    .await;
    assert_eq!(leader.verdict(ClusterPolicy::PreferLeader), Verdict::Run);
    assert_eq!(follower.verdict(ClusterPolicy::EveryNode), Verdict::Run);
    let [a, b] = nodes;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn two_processes_sharing_a_name_never_both_lead() {
    // LSE-03: the lease is the fence, not the name.
    let h = memory();
    let nodes = [Node::start(&h, "a"), Node::start(&h, "a")];
    conformance::one_leader(&nodes, TIMING).await;
    let until = Instant::now() + TIMING.duration * 2;
    while Instant::now() < until {
        assert!(!(nodes[0].leads() && nodes[1].leads()), "both lead");
        assert_eq!(nodes.iter().filter(|n| n.leads()).count(), 1);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let [a, b] = nodes;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_out_of_band_revoke_is_won_again_on_the_next_round() {
    let h = memory();
    let a = Node::start(&h, "a");
    wait_until("a leads", TIMING.duration, || a.leads()).await;
    let fence = h.0.fence();
    h.0.revoke();
    wait_until("a re-acquires the lease", TIMING.round_every * 2, || {
        h.0.fence() == fence + 1 && a.leads()
    })
    .await;
    a.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_start_that_recovers_goes_back_to_starting_until_its_first_round() {
    let h = memory();
    h.0.set_unpreparable(Some("the store is not there yet"));
    // Its first round never completes, so whatever follows the recovery is the driver's own.
    h.0.set_wedged(true);
    let a = Node::start(&h, "a");
    wait_until("a reports no manager", TIMING.duration, || {
        matches!(a.view.borrow().election, Election::NoManager { .. })
    })
    .await;
    h.0.set_unpreparable(None);
    wait_until("a goes back to starting", TIMING.duration * 4, || {
        matches!(a.view.borrow().election, Election::Starting)
    })
    .await;
    // Starting, not "no manager": a PreferLeader firing is held, not run.
    assert_eq!(
        verdict(
            &a.view.borrow(),
            ClusterPolicy::PreferLeader,
            Instant::now()
        )
        .1,
        Reason::Starting
    );
    h.0.set_wedged(false);
    wait_until("a leads", TIMING.duration * 2, || a.leads()).await;
    a.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_status_block_is_the_lease_shape() {
    let h = memory();
    let a = Node::start(&h, "a");
    wait_until("a leads", TIMING.duration, || a.leads()).await;
    let json = a.view.borrow().status.to_json("a");
    assert_eq!(json["backend"], "memory");
    assert_eq!(json["quorate"], true);
    assert_eq!(json["is_leader"], true);
    assert_eq!(json["leader"], "a");
    assert_eq!(json["cluster_size"], 1);
    assert_eq!(json["quorum"], 1);
    assert_eq!(json["lease"]["holder"], "a");
    assert_eq!(json["last_error"], serde_json::Value::Null);
    h.0.set_down(true);
    tokio::time::sleep(TIMING.duration + TIMING.round_every).await;
    let json = a.view.borrow().status.to_json("a");
    assert_eq!(json["quorate"], false);
    assert_eq!(json["is_leader"], false);
    assert_eq!(json["last_error"], "memory store is down");
    a.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stand_down_round_keeps_the_view_quorate_but_not_leading() {
    let h = memory();
    let a = Node::start(&h, "a");
    wait_until("a leads", TIMING.duration, || a.leads()).await;
    h.0.set_stand_down(Some("granted TTL 2 s is below the floor"));
    wait_until("a stands down", TIMING.round_every * 2, || !a.leads()).await;
    // Still in contact with the store: quorate, so Leader skips as not-leader, not no-quorum.
    tokio::time::sleep(TIMING.duration * 2).await;
    assert_eq!(
        verdict(&a.view.borrow(), ClusterPolicy::Leader, Instant::now()),
        (Verdict::Skip, Reason::NotLeader)
    );
    let json = a.view.borrow().status.to_json("a");
    assert_eq!(json["quorate"], true);
    assert_eq!(
        json["last_error"],
        "standing down this round: granted TTL 2 s is below the floor"
    );
    h.0.set_stand_down(None);
    wait_until("a leads again", TIMING.duration, || a.leads()).await;
    a.stop().await;
}

#[tokio::test(start_paused = true)]
async fn memory_conformance_rbt_21_reboot_records_round_trip() {
    conformance::reboot_records_round_trip(&memory()).await;
}

#[tokio::test(start_paused = true)]
async fn memory_conformance_firing_claims_once() {
    conformance::firing_claims_once(&memory()).await;
}

#[tokio::test(start_paused = true)]
async fn memory_conformance_run_records_round_trip() {
    conformance::run_records_round_trip(&memory()).await;
}

/// The renewals the follower `n` last read of another holder.
fn renewals(n: &Node) -> Option<crate::cluster::HolderRenewals> {
    match &n.view.borrow().election {
        Election::Managed(m) => m.lease.as_ref().and_then(|l| l.renewals),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_follower_sees_the_holders_renewals_and_its_silence_within_the_silence_bound() {
    let h = memory();
    let a = Node::start(&h, "a");
    wait_until("a leads", TIMING.duration, || a.leads()).await;
    let b = Node::start(&h, "b");
    // b reads a's record change at a's renewals: it knows a was alive after one of its reads.
    wait_until("b sees a renew", TIMING.round_every * 3, || {
        renewals(&b).is_some_and(|r| r.alive_after_ms.is_some() && !r.silent)
    })
    .await;
    assert!(!b.leads());
    // a dies without releasing: its record stops changing; b calls it silent within the
    // silence bound (plus b's own half-second reads), long before the lease expires.
    a.kill().await;
    let took = wait_until(
        "b sees a's renewals stop",
        super::driver::silence_bound(TIMING) + super::driver::FOLLOWER_ROUND + TIMING.round_every,
        || renewals(&b).is_some_and(|r| r.silent),
    )
    .await;
    assert!(took < TIMING.duration, "took {took:?}");
    assert_eq!(
        verdict(
            &b.view.borrow(),
            ClusterPolicy::PreferLeader,
            Instant::now()
        ),
        (Verdict::Run, Reason::Owner),
        "PreferLeader runs on b while a's lease has not expired"
    );
    assert!(!b.leads(), "Leader still waits for the lease");
    // Then b takes the lease as before, and tracks nobody's renewals while it holds.
    wait_until("b leads", TIMING.duration + SAFETY_MARGIN * 2, || b.leads()).await;
    assert_eq!(renewals(&b), None);
    b.stop().await;
}
