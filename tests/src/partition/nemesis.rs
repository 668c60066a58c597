//! The nemesis of the partition harness: the standard fault schedule and the store faults of
//! the lease backends.
//!
//! Network faults come from [`crate::netns::Lab`]. On the lease backends the holder's
//! coordinator and, separately, its shim are also frozen past the lease ([`Bench::pause`]); on
//! the filesystem backend a follower also runs with its clock off ([`Bench::skewed_restart`]).
//! Store faults differ per backend:
//!
//! - etcd: every member is frozen with SIGSTOP, so its sockets stay open but nothing answers
//!   (the worst case for a client);
//! - filesystem: the lease directory is one local directory every host shares, so a network cut
//!   never separates a node from it. The store is cut off instead by mounting an empty,
//!   read-only directory over it inside the node's own mount namespace (`ip netns exec` gives
//!   every coordinator one), which a coordinator sees as a store whose every open or write
//!   fails: a shared mount gone read-only or lost. Either one node is cut off (the lease holder:
//!   it must stop leading before anyone else can take over) or every node is (no one leads).

use std::process::Command;
use std::time::Duration;

use cronstable_coordinator::clock::now_ms;
use cronstable_coordinator::liveness::OVERDUE_GRACE;
use cronstable_core::ClusterPolicy;
use cronstable_core::checker::{Exemption, Period};

use super::{Bench, HarnessBackend, RunPlan};

/// Runs the standard nemesis schedule: `plan.cycles` rounds of majority/minority split,
/// isolated leader, bridge and a kill of the leader, each held `plan.hold`, with `plan.rest` of
/// health between; on lease backends also the store faults and the paused holder (its
/// coordinator, then its shim). Then the lifecycle nemeses of the
/// cycle: `plan.isolated_restarts` nodes restarted while cut off (the leader first), one slow
/// start (a different node each cycle, never the leader in the first) and a rolling restart
/// of every node. Returns the final heal.
pub fn nemesis_schedule(bench: &mut Bench, plan: &RunPlan) -> i64 {
    let (hold, rest) = (plan.hold, plan.rest);
    for cycle in 0..plan.cycles {
        std::thread::sleep(rest);
        bench.partition("partition [n1 n2]|[n3 n4 n5]", hold, |lab| {
            lab.split(&[0, 1], &[2, 3, 4])
        });
        std::thread::sleep(rest);
        bench.partition("isolate leader n1", hold, |lab| lab.isolate(0));
        std::thread::sleep(rest);
        bench.partition("bridge n3: [n1 n2]x[n4 n5]", hold, |lab| {
            lab.split(&[0, 1], &[3, 4])
        });
        std::thread::sleep(rest);
        bench.kill(0, hold / 2);
        match bench.backend {
            HarnessBackend::Gossip => {}
            HarnessBackend::Etcd => {
                std::thread::sleep(rest);
                bench.store_outage(hold);
            }
            HarnessBackend::Filesystem => {
                std::thread::sleep(rest);
                if let Some(holder) = bench.lease_holder() {
                    bench.cut_from_store(&[holder], hold);
                }
                std::thread::sleep(rest);
                bench.cut_from_store(&[0, 1, 2, 3, 4], hold);
            }
        }
        // Paused processes on a lease backend (the lease-faults issue): the holder's
        // coordinator frozen past the lease (a zombie that wakes believing it leads), then the
        // new holder's shim frozen (a wedged executor under a healthy coordinator).
        if bench.backend != HarnessBackend::Gossip {
            std::thread::sleep(rest);
            if let Some(holder) = bench.lease_holder() {
                bench.pause(holder, Paused::Coordinator, hold);
            }
            std::thread::sleep(rest);
            if let Some(holder) = bench.lease_holder() {
                bench.pause(holder, Paused::Shim, hold);
            }
        }
        // A follower restarted with its clock off (filesystem: the store's file times are the
        // reference): within the budget it takes part as any node; far beyond it, it must
        // never lead and must say why.
        if bench.backend == HarnessBackend::Filesystem {
            for offset in plan.skew_offsets {
                std::thread::sleep(rest);
                let holder = bench.lease_holder().unwrap_or(0);
                bench.skewed_restart((holder + 1) % 5, offset, hold);
            }
        }
        // Restart while isolated: the leader, then the others in order, as many as the plan
        // asks (the short CI run takes the leader and one follower to fit its time; the long
        // run takes every node).
        std::thread::sleep(rest);
        let leader = bench.leader_index().unwrap_or(0);
        let order: Vec<usize> = std::iter::once(leader)
            .chain((0..5).filter(|&k| k != leader))
            .take(plan.isolated_restarts)
            .collect();
        for (n, &i) in order.iter().enumerate() {
            if n > 0 {
                std::thread::sleep(rest);
            }
            bench.restart_isolated(i, plan.isolated_hold);
        }
        // Slow start of a follower in the first cycle, then round the nodes (the leader too).
        std::thread::sleep(rest);
        let leader = bench.leader_index().unwrap_or(0);
        let slow = (0..5)
            .map(|k| (k + cycle) % 5)
            .find(|&k| cycle > 0 || k != leader)
            .unwrap_or(1);
        bench.slow_start(slow, plan.slow_hold);
        std::thread::sleep(rest);
        bench.rolling_restart();
    }
    now_ms()
}

/// Which of a host's processes [`Bench::pause`] freezes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paused {
    /// The coordinator: its lease runs out on its own deadline while it sleeps.
    Coordinator,
    /// The shim: the coordinator stays healthy and must notice its executor stopped asking.
    Shim,
}

impl Bench {
    /// Freezes host `i`'s coordinator or shim (SIGSTOP) for `hold`, then resumes it (SIGCONT).
    ///
    /// A frozen shim runs nothing, so that host's own EveryNode firings meanwhile are exempt.
    /// While the shim is frozen its coordinator keeps renewing until it sees a due Leader
    /// firing go unasked (`liveness::OVERDUE_GRACE`, 2 s) and releases: until then followers
    /// see a live holder and skip PreferLeader firings its frozen shim never runs, the one
    /// PreferLeader window a lease backend still has (README, lease backends). It is noticed
    /// only after a Leader firing falls due, so the window can last the whole freeze.
    pub fn pause(&mut self, i: usize, which: Paused, hold: Duration) {
        let name = self.files.nodes[i].name.clone();
        let host = &self.hosts[i];
        let proc = match which {
            Paused::Coordinator => host.coordinator.as_ref().map(|c| &c.proc),
            Paused::Shim => host.shim.as_ref(),
        };
        let Some(proc) = proc else { return };
        let from = now_ms();
        proc.signal(19);
        std::thread::sleep(hold);
        proc.signal(18);
        let to = now_ms();
        if which == Paused::Shim {
            self.exempt.push(Exemption {
                from,
                to: to + 5_000,
                policy: ClusterPolicy::EveryNode,
                node: Some(name.clone()),
                reason: format!("{name}'s shim was frozen"),
            });
            // The coordinator notices only once a Leader firing falls due unasked and the
            // grace passes: with no Leader job due early in the freeze that is late in it, or
            // never (CI, etcd seed 1796603702220: frozen at :38, first Leader due at :44,
            // released at :46). So the window runs to the thaw, bounded by the grace and a
            // round after it.
            let grace = i64::try_from(OVERDUE_GRACE.as_millis()).unwrap_or(i64::MAX);
            self.exempt.push(Exemption {
                from,
                to: to + grace + 2_000,
                policy: ClusterPolicy::PreferLeader,
                node: None,
                reason: "a wedged executor on the holder: followers see a live holder until \
                         its coordinator notices (the overdue grace and a round)"
                    .into(),
            });
        }
        let what = match which {
            Paused::Coordinator => "coordinator",
            Paused::Shim => "shim",
        };
        let label = format!("{name}'s {what} frozen");
        println!("nemesis: {label} for {} s", hold.as_secs());
        self.nemesis.push(Period { from, to, label });
    }

    /// Restarts host `i`'s coordinator under libfaketime at `offset` (`+5s`; file times stay
    /// the store's, [`crate::with_faketime`]), keeps it so for `hold`, then restarts it with the true
    /// clock. Past the filesystem store's 1.5 s skew bound the node must say so on `/cluster`
    /// within a few rounds (a rejoin failure otherwise); within it, it must rejoin as any node.
    /// The checker's at-most-once verdict covers the rest: no Leader instant twice.
    pub fn skewed_restart(&mut self, i: usize, offset: &str, hold: Duration) {
        let name = self.files.nodes[i].name.clone();
        let label = format!("{name} restarted with its clock {offset}");
        let from = now_ms();
        self.stop_host(i, 15);
        let mut cmd = self.lab.command(i, &crate::binary("cronstable"));
        crate::with_faketime(&mut cmd, offset);
        let host = self.start_host_in(i, cmd);
        self.hosts[i] = host;
        let started = now_ms();
        self.around_change(from);
        self.note_restart(i, from, started);
        let far = offset.trim_start_matches(['+', '-']).trim_end_matches('s');
        let far = far.parse::<f64>().unwrap_or(0.0) > 1.5;
        if far {
            let deadline = now_ms() + 10_000;
            loop {
                let why = self.hosts[i]
                    .coordinator
                    .as_ref()
                    .and_then(|c| crate::gossip::cluster(c.web))
                    .map(|v| v["last_error"].to_string())
                    .unwrap_or_default();
                if why.contains("clock skew") {
                    break;
                }
                if now_ms() > deadline {
                    let msg = format!("{label}: /cluster never said why it stands down: {why}");
                    println!("harness: {msg}");
                    self.rejoin_failures.push(msg);
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        } else {
            self.wait_rejoined(i, &label);
        }
        super::lifecycle::sleep_until(from + i64::try_from(hold.as_millis()).unwrap_or(0));
        let back = now_ms();
        self.stop_host(i, 15);
        let host = self.start_host(i);
        self.hosts[i] = host;
        let to = now_ms();
        self.around_change(to);
        self.note_restart(i, back, to);
        self.wait_rejoined(i, &format!("{name}'s clock was put right"));
        println!("nemesis: {label} for {} s", hold.as_secs());
        self.nemesis.push(Period {
            from,
            to: now_ms(),
            label,
        });
    }

    /// Freezes every etcd member (SIGSTOP) for `hold`, then resumes them: the store is down but
    /// its sockets stay open, the worst case for a client. On the filesystem backend the store is
    /// cut off from every node instead; a no-op on gossip.
    pub fn store_outage(&mut self, hold: Duration) {
        match self.backend {
            HarnessBackend::Gossip => {}
            HarnessBackend::Filesystem => self.cut_from_store(&[0, 1, 2, 3, 4], hold),
            HarnessBackend::Etcd => {
                let from = now_ms();
                for m in &self.etcd {
                    crate::send_signal(m.id(), 19);
                }
                std::thread::sleep(hold);
                for m in &self.etcd {
                    crate::send_signal(m.id(), 18);
                }
                let to = now_ms();
                println!("nemesis: etcd stopped for {} s", hold.as_secs());
                self.nemesis.push(Period {
                    from,
                    to,
                    label: "etcd stopped".into(),
                });
            }
        }
    }

    /// The index of the host whose coordinator says it holds the lease, if one does.
    pub fn lease_holder(&self) -> Option<usize> {
        self.hosts.iter().position(|h| {
            h.coordinator
                .as_ref()
                .and_then(|c| crate::gossip::cluster(c.web))
                .is_some_and(|v| v["is_leader"] == true)
        })
    }

    /// Filesystem backend: cuts hosts `cut` off the lease directory for `hold` (an empty
    /// read-only directory mounted over it in each coordinator's mount namespace), then
    /// restores it. Panics when the mount cannot be made, so a broken nemesis fails the run
    /// instead of passing as a fault that never happened.
    pub fn cut_from_store(&mut self, cut: &[usize], hold: Duration) {
        assert_eq!(
            self.backend,
            HarnessBackend::Filesystem,
            "only the filesystem store is a local directory"
        );
        let store = self.dir.join("lease-store");
        let blank = self.dir.join("lease-store-unreachable");
        std::fs::create_dir_all(&blank).unwrap();
        let pids: Vec<u32> = cut
            .iter()
            .filter_map(|&i| self.hosts[i].coordinator.as_ref().map(|c| c.proc.pid()))
            .collect();
        let from = now_ms();
        for &pid in &pids {
            in_mount_ns(
                pid,
                &format!(
                    "mount --bind '{}' '{}' && mount -o remount,ro,bind '{}'",
                    blank.display(),
                    store.display(),
                    store.display()
                ),
            );
        }
        std::thread::sleep(hold);
        for &pid in &pids {
            in_mount_ns(pid, &format!("umount '{}'", store.display()));
        }
        let to = now_ms();
        let who: Vec<String> = cut.iter().map(|&i| format!("n{}", i + 1)).collect();
        let label = if cut.len() == self.hosts.len() {
            "filesystem store unreachable".to_owned()
        } else {
            format!("{} cut from the store", who.join(" "))
        };
        println!("nemesis: {label} for {} s", hold.as_secs());
        self.nemesis.push(Period { from, to, label });
    }
}

/// Runs `script` with sh inside the mount namespace of process `pid`.
pub(super) fn in_mount_ns(pid: u32, script: &str) {
    let status = Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-m", "--", "sh", "-c", script])
        .status()
        .unwrap_or_else(|e| panic!("nsenter (util-linux) could not run: {e}"));
    assert!(
        status.success(),
        "in pid {pid}'s mount namespace: `{script}` failed"
    );
}
