//! A paused lease holder (the lease-faults issue): the holder's coordinator frozen with SIGSTOP
//! for longer than the lease, then resumed, a "zombie" that wakes believing nothing happened.
//! Three filesystem-lease nodes, each with a shim running a per-second Leader job that writes
//! its node and instant. Whatever the freeze costs in missed seconds, no instant may run twice:
//! the frozen node's lease runs out on its own monotonic deadline, so it leads no more when it
//! wakes, and its shim, unanswered, applies the no-manager rule (Leader skips).

use std::collections::BTreeMap;
use std::time::Duration;

use cronstable_tests::lease::{TickCluster, doubled_ticks, leaders, tick_cluster, wait_one_leader};
use cronstable_tests::{PATIENCE, lines, wait_for};

const TTL: u64 = 3;
/// SIGSTOP, SIGCONT.
const STOP: i32 = 19;
const CONT: i32 = 18;

#[test]
fn a_holder_frozen_past_its_lease_runs_no_leader_firing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let TickCluster {
        nodes,
        webs,
        shims: _shims,
        out,
    } = tick_cluster(dir.path(), TTL);

    for round in 0..2 {
        let (holder, _) = wait_one_leader(&webs, PATIENCE).expect("one leader");
        let before = lines(&out).len();
        wait_for("the Leader job to run", || {
            (lines(&out).len() >= before + 2).then_some(())
        });
        nodes[holder].proc.signal(STOP);
        // Frozen for more than twice the lease: another node must take over meanwhile.
        let others: Vec<_> = (0..3).filter(|i| *i != holder).map(|i| webs[i]).collect();
        wait_for("another node to take the lease", || {
            (leaders(&others).len() == 1).then_some(())
        });
        std::thread::sleep(Duration::from_secs(2 * TTL));
        nodes[holder].proc.signal(CONT);
        let after = lines(&out).len();
        wait_for("runs to go on after the thaw", || {
            (lines(&out).len() >= after + 3).then_some(())
        });
        assert_eq!(
            doubled_ticks(&out),
            BTreeMap::new(),
            "round {round}: a Leader instant ran on two nodes"
        );
    }
}
