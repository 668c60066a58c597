//! PreferLeader never skips on a lease backend (the lease-faults issue, item 3). When the
//! holder dies without releasing, its lease record stays until it expires, and followers used
//! to defer every PreferLeader firing to the dead holder until then (about ttl + 2 s lost, a
//! window the partition harness had to exempt). Now a follower holds a PreferLeader firing
//! (DEFER) until it sees the holder renew after the firing's instant (the holder was alive to
//! run it: skip) or sees its renewals stop (no change for a renew period, a round's timeout
//! and half a second: run it here, late).
//!
//! Three filesystem-lease nodes (ttl 3 s), each with a shim running a per-second PreferLeader
//! job that writes the nominal instant and its node. The holder's coordinator and shim are
//! SIGKILLed together (a host dying), half-way through a second so the instant it had started
//! is written; every second around the kill must have run somewhere.

use std::collections::BTreeSet;
use std::time::Duration;

use cronstable_tests::gossip::cluster;
use cronstable_tests::lease::{TickCluster, tick_cluster_with, ticks, wait_one_leader};
use cronstable_tests::{PATIENCE, lines, wait_for};

const TTL: u64 = 3;
const KILL: i32 = 9;

/// The whole seconds (Unix) some node ran.
fn ran(out: &std::path::Path) -> BTreeSet<i64> {
    ticks(out)
        .keys()
        .filter_map(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .map(|t| t.timestamp())
        .collect()
}

#[test]
fn prefer_leader_runs_every_second_when_the_lease_holder_dies() {
    let dir = tempfile::tempdir().unwrap();
    let TickCluster {
        nodes,
        webs,
        shims,
        out,
    } = tick_cluster_with(dir.path(), TTL, "PreferLeader");
    let (holder, _) = wait_one_leader(&webs, PATIENCE).expect("one leader");
    let follower = (holder + 1) % 3;
    wait_for("a follower to see the holder", || {
        let v = cluster(webs[follower])?;
        v["lease"]["holder"].is_string().then_some(())
    });
    let before = lines(&out).len();
    wait_for("the PreferLeader job to run", || {
        (lines(&out).len() >= before + 3).then_some(())
    });
    // Half-way through a second: the holder's shim has started this second's run.
    let now = cronstable_coordinator::clock::now_ms();
    std::thread::sleep(Duration::from_millis(
        u64::try_from(1500 - now % 1000).unwrap_or(0),
    ));
    let killed_s = cronstable_coordinator::clock::now_ms() / 1000;
    shims[holder].signal(KILL);
    nodes[holder].proc.signal(KILL);
    // Past the expiry of the dead holder's lease and the survivors' takeover.
    let until_s = killed_s + i64::try_from(TTL).unwrap() + 5;
    wait_for("the survivors to run past the dead holder's lease", || {
        ran(&out).contains(&(until_s + 1)).then_some(())
    });
    let ran = ran(&out);
    let missed: Vec<i64> = (killed_s - 2..=until_s)
        .filter(|s| !ran.contains(s))
        .collect();
    println!(
        "missed {} of {} seconds around the kill",
        missed.len(),
        until_s - killed_s + 3
    );
    assert_eq!(
        missed,
        Vec::<i64>::new(),
        "PreferLeader seconds that ran nowhere after the holder died at {killed_s}"
    );
}
