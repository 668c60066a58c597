//! A wedged executor on the lease holder (the lease-faults issue, item 2): the holder's *shim*
//! frozen with SIGSTOP for longer than the lease while its coordinator stays healthy. The
//! coordinator keeps renewing its lease, so before this work no other node could take over and
//! the cluster's Leader jobs stalled for the whole freeze. Now the coordinator sees a due Leader
//! firing go unasked, stands down and releases the lease; a node whose shim is live runs the
//! job; the frozen node does not take the lease back while its shim is frozen.
//!
//! Three lease nodes (ttl 3 s; a filesystem store, then a real etcd), each with a shim running a per-second Leader job
//! that writes its node and instant. What each freeze cost in missed seconds is printed (the
//! measurement in BENCHMARKS.md); the test asserts the handover and that no instant ran twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use cronstable_tests::etcd::Etcd;
use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster};
use cronstable_tests::lease::{
    Store, TickCluster, doubled_ticks, leaders, tick_cluster_on, ticks, wait_one_leader,
};
use cronstable_tests::{PATIENCE, http, lines, start_shim, wait_for};

const TTL: u64 = 3;
/// SIGSTOP, SIGCONT.
const STOP: i32 = 19;
const CONT: i32 = 18;
/// How long each freeze lasts: well past the lease and the overdue grace.
const FREEZE: Duration = Duration::from_secs(8);

/// The whole seconds in `[from_s, to_s)` that no node ran.
fn missed(out: &Path, from_s: i64, to_s: i64) -> usize {
    let ran: BTreeSet<i64> = ticks(out)
        .keys()
        .filter_map(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .map(|t| t.timestamp())
        .collect();
    (from_s..to_s).filter(|s| !ran.contains(s)).count()
}

fn now_s() -> i64 {
    cronstable_coordinator::clock::now_ms() / 1000
}

/// Sleeps until [`FREEZE`] has passed since `frozen_at` (whole seconds).
fn sleep_out_the_freeze(frozen_at: i64) {
    std::thread::sleep(FREEZE.saturating_sub(Duration::from_secs(
        u64::try_from(now_s() - frozen_at).unwrap_or(0),
    )));
}

/// Waits until the node at `web` no longer counts an executor as overdue.
fn wait_keeping_up(web: std::net::SocketAddr) {
    wait_for("the thawed node to count as keeping up again", || {
        let m = http(web, "GET", "/metrics").ok()?.body;
        m.contains("cronstable_executor_overdue 0").then_some(())
    });
}

#[test]
fn filesystem_a_holder_whose_shim_is_frozen_hands_the_lease_over() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::Filesystem(dir.path().join("store"));
    wedged(dir.path(), &store);
}

#[test]
fn etcd_a_holder_whose_shim_is_frozen_hands_the_lease_over() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    wedged(dir.path(), &Store::Etcd(etcd.endpoint()));
}

/// Three freezes of the holder's shim on `store`: each time another node takes the lease, the
/// frozen node says why and does not take it back while frozen, and no instant runs twice.
fn wedged(dir: &std::path::Path, store: &Store) {
    let TickCluster {
        nodes: _nodes,
        webs,
        shims,
        out,
    } = tick_cluster_on(dir, store, TTL, "Leader");

    let mut costs = Vec::new();
    for round in 0..3 {
        let (holder, _) = wait_one_leader(&webs, PATIENCE).expect("one leader");
        let before = lines(&out).len();
        wait_for("the Leader job to run", || {
            (lines(&out).len() >= before + 2).then_some(())
        });
        let frozen_at = now_s();
        shims[holder].signal(STOP);
        // The holder's coordinator is healthy and keeps renewing; only its executor is gone.
        let others: Vec<_> = (0..3).filter(|i| *i != holder).map(|i| webs[i]).collect();
        wait_for(
            "another node to take the lease from the wedged executor's node",
            || (leaders(&others).len() == 1).then_some(()),
        );
        let view = cluster(webs[holder]).expect("the frozen shim's coordinator answers");
        let why = view["last_error"].as_str().unwrap_or_default().to_owned();
        assert!(
            why.contains("standing down") && why.contains("\"tick\""),
            "round {round}: /cluster says why: {view}"
        );
        let metrics = http(webs[holder], "GET", "/metrics").unwrap().body;
        assert!(
            metrics.contains("cronstable_executor_overdue 1"),
            "round {round}: the overdue gauge is set"
        );
        // Past the lease, the free-lease round and the grace: the node must still not lead.
        sleep_out_the_freeze(frozen_at);
        assert!(
            !leaders(&webs).contains(&holder),
            "round {round}: the node whose shim is frozen took the lease back"
        );
        shims[holder].signal(CONT);
        let thawed_at = now_s();
        let after = lines(&out).len();
        wait_for("runs to go on after the thaw", || {
            (lines(&out).len() >= after + 3).then_some(())
        });
        wait_keeping_up(webs[holder]);
        let cost = missed(&out, frozen_at, thawed_at);
        println!(
            "freeze {round}: {cost} of {} seconds missed",
            thawed_at - frozen_at
        );
        costs.push(cost);
        assert_eq!(
            doubled_ticks(&out),
            BTreeMap::new(),
            "round {round}: a Leader instant ran on two nodes"
        );
    }
    println!(
        "missed seconds per {} s freeze: {costs:?}",
        FREEZE.as_secs()
    );
}

/// Three gossip nodes (`interval: 1s`), each with a shim running the per-second Leader job
/// `tick`, which appends its instant and node to `out`; `subnet` keeps concurrent tests apart.
struct GossipTicks {
    nodes: Vec<cronstable_tests::Coordinator>,
    webs: Vec<std::net::SocketAddr>,
    out: std::path::PathBuf,
    shims: Vec<cronstable_tests::Proc>,
}

fn gossip_ticks(dir: &Path, subnet: u8) -> GossipTicks {
    let files = ClusterFiles::write(dir, &ClusterPlan::new(3, subnet));
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    let webs: Vec<_> = nodes.iter().map(|c| c.web).collect();
    let out = dir.join("out");
    // One crontab for all three: gossip attests the job set, so the command may not name the
    // node; the shim tells it through CRONSTABLE_NODE.
    let tab = dir.join("tick.crontab");
    std::fs::write(
        &tab,
        format!(
            "# cronstable: name=tick clusterPolicy=Leader seconds=true\n\
             * * * * * * echo \"$CRONSTABLE_SCHEDULED_AT $CRONSTABLE_NODE\" >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let shims = nodes
        .iter()
        .map(|node| start_shim(&tab, &node.api, &[]))
        .collect();
    GossipTicks {
        nodes,
        webs,
        out,
        shims,
    }
}

/// Gossip (item 2, "within an interval"): three nodes, `interval: 1s`, each with a shim running
/// the per-second Leader job. The leader's shim is frozen twice: the leader must stop being
/// elected (its `/peer` advert says it stands down, so its peers pass it over), another node
/// must lead and run the job, the frozen node must not lead while frozen, and its return must
/// not move the lead back. No instant may run twice, through the freeze or the return.
#[test]
fn gossip_a_leader_whose_shim_is_frozen_is_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    // The coordinators live as long as `_nodes`.
    let GossipTicks {
        nodes: _nodes,
        webs,
        out,
        shims,
    } = gossip_ticks(dir.path(), 131);

    let mut costs = Vec::new();
    for round in 0..2 {
        let (leader, _) = wait_one_leader(&webs, PATIENCE)
            .unwrap_or_else(|| panic!("round {round}: no leader: {:?}", cluster(webs[0])));
        let before = lines(&out).len();
        wait_for("the Leader job to run", || {
            (lines(&out).len() >= before + 2).then_some(())
        });
        let frozen_at = now_s();
        shims[leader].signal(STOP);
        let others: Vec<_> = (0..3).filter(|i| *i != leader).map(|i| webs[i]).collect();
        let replacement = wait_for(
            "another node to lead instead of the wedged executor's node",
            || match leaders(&webs)[..] {
                [one] if one != leader => Some(one),
                _ => None,
            },
        );
        let view = cluster(webs[leader]).expect("the frozen shim's coordinator answers");
        let why = view["standing_down"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            why.contains("\"tick\""),
            "round {round}: /cluster says why it stands down: {view}"
        );
        let other = cluster(others[0]).expect("a peer answers");
        assert!(
            other["peers"]
                .as_array()
                .is_some_and(|rows| rows.iter().any(|r| r["standing_down"] == true)),
            "round {round}: a peer shows the frozen node standing down: {other}"
        );
        sleep_out_the_freeze(frozen_at);
        assert!(
            !leaders(&webs).contains(&leader),
            "round {round}: the node whose shim is frozen leads again"
        );
        shims[leader].signal(CONT);
        let thawed_at = now_s();
        wait_keeping_up(webs[leader]);
        // The return: the node is a candidate again once its shim asks, but the node that took
        // over keeps the lead (sticky leadership, the gossip core's rule 4a), so the return
        // moves nothing.
        let (after_thaw, _) = wait_one_leader(&webs, PATIENCE).expect("one leader after the thaw");
        assert_eq!(
            after_thaw, replacement,
            "round {round}: the lead moved back to the returning node"
        );
        let after = lines(&out).len();
        wait_for("runs to go on after the thaw", || {
            (lines(&out).len() >= after + 3).then_some(())
        });
        wait_for("five seconds past the thaw", || {
            (now_s() > thawed_at + 5).then_some(())
        });
        let cost = missed(&out, frozen_at, thawed_at);
        let rejoin = missed(&out, thawed_at, thawed_at + 5);
        println!(
            "gossip freeze {round}: {cost} of {} seconds missed; {rejoin} of the 5 after the thaw",
            thawed_at - frozen_at
        );
        costs.push(cost);
        assert_eq!(
            doubled_ticks(&out),
            BTreeMap::new(),
            "round {round}: a Leader instant ran on two nodes"
        );
    }
    println!(
        "gossip: missed seconds per {} s freeze: {costs:?}",
        FREEZE.as_secs()
    );
}

/// The other side of the overdue rule: a *coordinator* stopped for longer than the overdue
/// grace (SIGSTOP, as a suspended VM or a stalled runtime) while its shim keeps asking. The
/// shim's questions about the firings due meanwhile never reached it, so on its thaw it must
/// not blame the shim and stand down. A partition run froze a majority's coordinators and every
/// one of them stood down at the thaw, leaving the cluster without a leader for longer than
/// the two-interval grace (CI seed 1796584572264). Three gossip nodes, all three coordinators
/// frozen together for 5 s; after the thaw no node may call its shim wedged or lose quorum, and
/// the leader before the freeze leads again.
#[test]
fn gossip_coordinators_frozen_together_do_not_blame_their_shims_at_the_thaw() {
    let dir = tempfile::tempdir().unwrap();
    // The shims run as long as `_shims` lives (a `..` would drop them here).
    let GossipTicks {
        nodes,
        webs,
        out,
        shims: _shims,
    } = gossip_ticks(dir.path(), 137);
    let (leader, _) = wait_one_leader(&webs, PATIENCE)
        .unwrap_or_else(|| panic!("no leader: {:?}", cluster(webs[0])));
    let before = lines(&out).len();
    wait_for("the Leader job to run", || {
        (lines(&out).len() >= before + 2).then_some(())
    });
    for node in &nodes {
        node.proc.signal(STOP);
    }
    std::thread::sleep(Duration::from_secs(5));
    for node in &nodes {
        node.proc.signal(CONT);
    }
    let thawed_at = now_s();
    let after = lines(&out).len();
    wait_for("runs to go on after the thaw", || {
        (lines(&out).len() >= after + 3).then_some(())
    });
    for (i, node) in nodes.iter().enumerate() {
        let log = node.proc.log();
        assert!(
            !log.contains("wedged or gone"),
            "n{}'s coordinator blamed its shim for its own freeze:\n{log}",
            i + 1
        );
        // The peers' kept-alive connections died under the first polls after the thaw; those
        // go out again on new connections, so the thaw costs no quorum.
        assert!(
            !log.contains("quorum lost"),
            "n{} lost quorum at the thaw:\n{log}",
            i + 1
        );
    }
    let (now_leading, _) = wait_one_leader(&webs, PATIENCE).expect("one leader after the thaw");
    wait_for("three seconds past the thaw", || {
        (now_s() > thawed_at + 3).then_some(())
    });
    println!(
        "coordinators frozen 5 s: {} of the 3 seconds after the thaw missed; leader n{} then n{}",
        missed(&out, thawed_at, thawed_at + 3),
        leader + 1,
        now_leading + 1
    );
    if now_leading != leader {
        for node in &nodes {
            println!("{}", node.proc.log());
        }
    }
    assert_eq!(now_leading, leader, "the thaw moved the lead");
    assert_eq!(
        doubled_ticks(&out),
        BTreeMap::new(),
        "a Leader instant ran on two nodes"
    );
}
