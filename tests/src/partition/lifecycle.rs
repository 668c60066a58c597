//! The lifecycle nemeses of the partition harness: restarts under faults, where a coordinator
//! that just started must not act on a view it does not have yet.
//!
//! - **Restart while isolated** ([`Bench::restart_isolated`]): SIGKILL a node's coordinator and
//!   shim, cut its host off, start both while cut off, heal later. On filesystem the network
//!   cut alone would not separate the node from its peers at all (they meet only in the lease
//!   directory, a local directory here), so the node is also started with the store cut off,
//!   the way [`Bench::cut_from_store`] does it: its coordinator starts inside a mount namespace
//!   where an empty read-only directory covers the store, as when a node boots before its
//!   shared mount is up.
//! - **Slow start** ([`Bench::slow_start`]): a node restarts while what it elects through
//!   answers nothing. Gossip: the other coordinators are SIGSTOPped, so the kernel still
//!   completes TCP handshakes into their listen backlogs but no TLS handshake is ever
//!   answered, and the restarted node's first round lasts its whole `connectTimeout` (3 s,
//!   longer than the 1 s interval). etcd: every member is SIGSTOPped the same way. Filesystem:
//!   the harness holds the lease's and the `@reboot` record's flocks, so every store operation
//!   hangs as on a mount whose lock server stalls (a read-only store at start is already the
//!   isolated restart above).
//! - **Rolling restart** ([`Bench::rolling_restart`]): every node in turn, as a deploy does:
//!   SIGTERM coordinator and shim, start both, wait until it is back (agreed with its peers on
//!   gossip, quorate on a lease backend), next.
//!
//! A node started with no way to a quorum is recorded as cut off until it is let back
//! ([`CutOff`]): the checker then fails any Leader run started there. A restarted node that
//! does not rejoin in time is recorded in [`Bench::rejoin_failures`] rather than failing at
//! once, so the run still reaches the checker.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cronstable_coordinator::clock::now_ms;
use cronstable_core::checker::{CutOff, Period};

use super::nemesis::in_mount_ns;
use super::{Bench, HarnessBackend, Host};
use crate::binary;

/// How long a restarted node may take to rejoin before the harness records that it did not:
/// far more than a gossip node needs (a few rounds) or a lease node (one round, or ttl + 2 s
/// when it must wait out a lost holder's lease).
const REJOIN_LIMIT: Duration = Duration::from_secs(20);

impl Bench {
    /// The index of the node the cluster names as leader, asked of every running coordinator
    /// in turn; `None` when none names one.
    pub fn leader_index(&self) -> Option<usize> {
        let names = self.names();
        self.hosts.iter().find_map(|h| {
            let v = crate::gossip::cluster(h.coordinator.as_ref()?.web)?;
            let leader = v["leader"].as_str()?;
            names.iter().position(|n| n == leader)
        })
    }

    /// Restart-while-isolated: SIGKILLs host `i`'s coordinator and shim, cuts the host off
    /// (network; on filesystem also the store), starts both while cut off, and heals `hold`
    /// after the cut. Then waits for the node to rejoin.
    pub fn restart_isolated(&mut self, i: usize, hold: Duration) {
        let name = self.files.nodes[i].name.clone();
        let label = format!("restart {name} isolated");
        let from = now_ms();
        self.stop_host(i, 9);
        self.lab.isolate(i);
        // A local directory is not behind the network: cut the store in the mount namespace
        // the new coordinator is started in, before it starts.
        let store_cut = self.backend == HarnessBackend::Filesystem;
        let spawned = now_ms();
        let host = if store_cut {
            self.start_host_store_cut(i)
        } else {
            self.start_host(i)
        };
        self.hosts[i] = host;
        let started = now_ms();
        // The kill changes the others' topology; the restart does not (it is not reachable),
        // the heal does. A restart while connected gets a window at the restart instead
        // (kill, rolling restart): here a Leader run at the restart is no settling artefact.
        self.around_change(from);
        self.note_restart(i, from, started);
        sleep_until(from + hold.as_millis() as i64);
        let to = now_ms();
        if store_cut {
            let pid = self.hosts[i].coordinator.as_ref().unwrap().proc.pid();
            in_mount_ns(pid, &format!("umount '{}'", self.store().display()));
        }
        self.lab.heal();
        self.around_change(to);
        self.end_cut_off(i, name, label, (spawned, from, to), hold);
    }

    /// Slow start: freezes what host `i` elects through (gossip: every other coordinator;
    /// etcd: every member; filesystem: the store's locks), restarts host `i` (SIGKILL, start),
    /// keeps the freeze for `hold` from its start, then lets go. Then waits for the node to
    /// rejoin.
    pub fn slow_start(&mut self, i: usize, hold: Duration) {
        let name = self.files.nodes[i].name.clone();
        let from = now_ms();
        let (label, frozen) = self.freeze(i);
        let killed = now_ms();
        self.stop_host(i, 9);
        let spawned = now_ms();
        let host = self.start_host(i);
        self.hosts[i] = host;
        let started = now_ms();
        self.around_change(from);
        self.note_restart(i, killed, started);
        sleep_until(from + hold.as_millis() as i64);
        let to = now_ms();
        frozen.thaw();
        self.around_change(to);
        // Every peer or the store stayed frozen from before its start until now: it never had
        // a way to a quorum.
        // The frozen peers' own shims get no answer; the no-manager rule keeps PreferLeader
        // and EveryNode running there, Leader skips (no exemption needed).
        self.end_cut_off(i, name, label, (spawned, from, to), hold);
    }

    /// Closes a nemesis that started host `i` cut off: records the cut-off span (from its
    /// spawn at `spawned` to the heal at `to`) and the nemesis period (`from` to `to`), then
    /// waits for the node to rejoin.
    fn end_cut_off(
        &mut self,
        i: usize,
        name: String,
        label: String,
        (spawned, from, to): (i64, i64, i64),
        hold: Duration,
    ) {
        self.cut_off.push(CutOff {
            node: name,
            from: spawned,
            to,
            label: label.clone(),
        });
        println!("nemesis: {label} for {} s", hold.as_secs());
        self.nemesis.push(Period {
            from,
            to,
            label: label.clone(),
        });
        self.wait_rejoined(i, &label);
    }

    /// Rolling restart: every host in turn gets SIGTERM (coordinator and shim), is started
    /// again, and must be back before the next one goes, as in a deploy.
    pub fn rolling_restart(&mut self) {
        for i in 0..self.hosts.len() {
            let name = self.files.nodes[i].name.clone();
            let label = format!("rolling restart {name}");
            let from = now_ms();
            self.stop_host(i, 15);
            let host = self.start_host(i);
            self.hosts[i] = host;
            let started = now_ms();
            self.around_change(from);
            self.around_change(started);
            self.note_restart(i, from, started);
            self.wait_rejoined(i, &label);
            let to = now_ms();
            println!("nemesis: {label} ({} ms)", to - from);
            self.nemesis.push(Period { from, to, label });
        }
    }

    /// Waits until host `i` is back: its shim's job set registered and, on gossip, every peer
    /// agreed; on a lease backend, quorate with a leader named. Records a failure (with the
    /// last `/cluster`) after [`REJOIN_LIMIT`] instead of panicking.
    pub(super) fn wait_rejoined(&mut self, i: usize, after: &str) {
        let name = self.files.nodes[i].name.clone();
        let deadline = now_ms() + REJOIN_LIMIT.as_millis() as i64;
        loop {
            let last = match self.rejoined(i) {
                Ok(()) => return,
                Err(state) => state,
            };
            if now_ms() > deadline {
                let msg = format!(
                    "{name} not back within {} s after {after}: {last}",
                    REJOIN_LIMIT.as_secs()
                );
                println!("harness: {msg}");
                self.rejoin_failures.push(msg);
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn rejoined(&self, i: usize) -> Result<(), String> {
        let c = self.hosts[i].coordinator.as_ref().ok_or("down")?;
        let ids = crate::http(c.web, "GET", "/job-set-id").map_err(|e| e.to_string())?;
        if ids.status != 200 || ids.json()["jobs"] != self.registered {
            return Err(format!("job set not registered: {}", ids.body));
        }
        let v = crate::gossip::cluster(c.web).ok_or("no /cluster answer")?;
        let back = match self.backend {
            HarnessBackend::Gossip => v["peers"]
                .as_array()
                .is_some_and(|p| p.iter().all(|p| p["status"] == "agreed")),
            HarnessBackend::Etcd | HarnessBackend::Filesystem => v["quorate"] == true,
        } && v["leader"].is_string();
        if back { Ok(()) } else { Err(v.to_string()) }
    }

    /// Freezes what host `i` elects through; returns the label and how to let go.
    fn freeze(&self, i: usize) -> (String, Frozen) {
        let name = &self.files.nodes[i].name;
        match self.backend {
            HarnessBackend::Gossip => {
                let pids: Vec<u32> = (0..self.hosts.len())
                    .filter(|&k| k != i)
                    .filter_map(|k| self.hosts[k].coordinator.as_ref().map(|c| c.proc.pid()))
                    .collect();
                signal_all(&pids, 19);
                (
                    format!("{name} restarted, peers' coordinators stopped"),
                    Frozen::Stopped(pids),
                )
            }
            HarnessBackend::Etcd => {
                let pids: Vec<u32> = self.etcd.iter().map(Child::id).collect();
                signal_all(&pids, 19);
                (
                    format!("{name} restarted, etcd stopped"),
                    Frozen::Stopped(pids),
                )
            }
            HarnessBackend::Filesystem => {
                // The lease's and the @reboot record's locks (README: filesystem layout).
                let root = self.store().join("default");
                let lease = root.join("leases/cluster/leader.json.lock");
                let record = root.join("cluster/reboot-ran.lock");
                let mut holder = Command::new("flock")
                    .arg("-x")
                    .arg(&lease)
                    .arg("flock")
                    .arg("-x")
                    .arg(&record)
                    // Held until the harness closes stdin: `read` then returns, the shell and
                    // both flocks exit, and the locks go with them.
                    .args(["sh", "-c", "echo held; read _"])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap_or_else(|e| panic!("flock (util-linux) could not run: {e}"));
                let mut line = String::new();
                BufReader::new(holder.stdout.take().unwrap())
                    .read_line(&mut line)
                    .unwrap();
                assert_eq!(line.trim(), "held", "the store's locks were not taken");
                (
                    format!("{name} restarted, store locks held"),
                    Frozen::Locked(holder),
                )
            }
        }
    }

    /// The filesystem backend's lease directory.
    fn store(&self) -> std::path::PathBuf {
        self.dir.join("lease-store")
    }

    /// Starts host `i` with its coordinator inside a mount namespace where the store is
    /// already cut off (an empty read-only directory over it), so it starts without the store.
    fn start_host_store_cut(&self, i: usize) -> Host {
        let store = self.store();
        let blank = self.dir.join("lease-store-unreachable");
        std::fs::create_dir_all(&blank).unwrap();
        let mut cmd = self.lab.command(i, std::path::Path::new("sh"));
        // `ip netns exec` gives the shell a private mount namespace; the coordinator is exec'd
        // into it, so the process the harness holds is the coordinator itself.
        cmd.arg("-c")
            .arg(format!(
                "mount --bind '{blank}' '{store}' && mount -o remount,ro,bind '{store}' && \
                 exec \"$0\" \"$@\"",
                blank = blank.display(),
                store = store.display()
            ))
            .arg(binary("cronstable"));
        self.start_host_in(i, cmd)
    }
}

/// A freeze to let go of.
enum Frozen {
    /// Processes SIGSTOPped: SIGCONT them.
    Stopped(Vec<u32>),
    /// A flock holder: close its stdin and wait for it.
    Locked(Child),
}

impl Frozen {
    fn thaw(self) {
        match self {
            Frozen::Stopped(pids) => signal_all(&pids, 18),
            Frozen::Locked(mut holder) => {
                let mut stdin = holder.stdin.take().unwrap();
                let _ = stdin.write_all(b"\n");
                drop(stdin);
                let _ = holder.wait();
            }
        }
    }
}

fn signal_all(pids: &[u32], sig: i32) {
    for &pid in pids {
        assert!(crate::send_signal(pid, sig), "kill -{sig} {pid}");
    }
}

/// Sleeps until the wall-clock instant `at_ms` (the harness runs on wall time by nature).
pub(super) fn sleep_until(at_ms: i64) {
    let left = at_ms - now_ms();
    if left > 0 {
        std::thread::sleep(Duration::from_millis(left as u64));
    }
}
