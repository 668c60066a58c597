//! A small lab of network namespaces on one bridge, so several "hosts" run on one machine and
//! the network between any two of them can be cut and healed (needs root and `ip` from
//! iproute2; no iptables).
//!
//! Host `i` lives in namespace `cs<id>n<i>` at `10.<id>.0.<i+1>/24`, with a veth into the bridge
//! `csbr<id>`, which also has `10.<id>.0.254` in the root namespace so the test process can
//! reach every host's HTTP API. A cut between two hosts installs a blackhole route to the other
//! in each namespace: packets are dropped at the sender, so established connections stall and
//! new ones fail, as across a real partition. Only the lab's own addresses are ever routed.
//! Everything is deleted on drop, also when the test panics, and leftovers of an earlier crashed
//! run with the same id are removed first.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Mutex;

/// One host of the lab.
#[derive(Debug, Clone)]
pub struct Host {
    /// The namespace.
    pub ns: String,
    /// Its address on the bridge.
    pub ip: String,
}

/// The lab; torn down on drop.
pub struct Lab {
    id: u8,
    /// The hosts, in order.
    pub hosts: Vec<Host>,
    cuts: Mutex<BTreeSet<(usize, usize)>>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| {
        format!(
            "running `ip {}`: {e} (is iproute2 installed?)",
            args.join(" ")
        )
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {} (network-namespace tests need root)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn must(args: &[&str]) {
    if let Err(e) = ip(args) {
        panic!("{e}");
    }
}

impl Lab {
    /// Builds `n` hosts on bridge `csbr<id>`. Panics with the reason when the machine cannot
    /// (these tests fail loudly rather than skip).
    pub fn new(id: u8, n: usize) -> Lab {
        let lab = Lab {
            id,
            hosts: (0..n)
                .map(|i| Host {
                    ns: format!("cs{id}n{i}"),
                    ip: format!("10.{id}.0.{}", i + 1),
                })
                .collect(),
            cuts: Mutex::new(BTreeSet::new()),
        };
        lab.teardown();
        let bridge = lab.bridge();
        must(&["link", "add", &bridge, "type", "bridge"]);
        must(&["addr", "add", &format!("10.{id}.0.254/24"), "dev", &bridge]);
        must(&["link", "set", &bridge, "up"]);
        for (i, h) in lab.hosts.iter().enumerate() {
            let veth = format!("cs{id}v{i}");
            must(&["netns", "add", &h.ns]);
            must(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &h.ns,
            ]);
            must(&["link", "set", &veth, "master", &bridge, "up"]);
            must(&[
                "-n",
                &h.ns,
                "addr",
                "add",
                &format!("{}/24", h.ip),
                "dev",
                "eth0",
            ]);
            must(&["-n", &h.ns, "link", "set", "eth0", "up"]);
            must(&["-n", &h.ns, "link", "set", "lo", "up"]);
        }
        lab
    }

    fn bridge(&self) -> String {
        format!("csbr{}", self.id)
    }

    fn teardown(&self) {
        for (i, h) in self.hosts.iter().enumerate() {
            // Deleting the root-side veth is synchronous; a namespace's own cleanup is not.
            let _ = ip(&["link", "del", &format!("cs{}v{i}", self.id)]);
            let _ = ip(&["netns", "del", &h.ns]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }

    /// A command that runs `program` inside host `i`'s namespace.
    pub fn command(&self, i: usize, program: &std::path::Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.hosts[i].ns]).arg(program);
        cmd
    }

    /// Cuts the network between hosts `a` and `b`, both directions.
    pub fn cut(&self, a: usize, b: usize) {
        let mut cuts = self.cuts.lock().unwrap();
        if cuts.insert((a.min(b), a.max(b))) {
            must(&[
                "-n",
                &self.hosts[a].ns,
                "route",
                "add",
                "blackhole",
                &self.hosts[b].ip,
            ]);
            must(&[
                "-n",
                &self.hosts[b].ns,
                "route",
                "add",
                "blackhole",
                &self.hosts[a].ip,
            ]);
        }
    }

    /// Cuts every pair with one host in `left` and the other in `right`.
    pub fn split(&self, left: &[usize], right: &[usize]) {
        for &a in left {
            for &b in right {
                self.cut(a, b);
            }
        }
    }

    /// Cuts host `a` off from every other host.
    pub fn isolate(&self, a: usize) {
        for b in 0..self.hosts.len() {
            if b != a {
                self.cut(a, b);
            }
        }
    }

    /// Removes every cut.
    pub fn heal(&self) {
        let mut cuts = self.cuts.lock().unwrap();
        for (a, b) in std::mem::take(&mut *cuts) {
            let _ = ip(&[
                "-n",
                &self.hosts[a].ns,
                "route",
                "del",
                "blackhole",
                &self.hosts[b].ip,
            ]);
            let _ = ip(&[
                "-n",
                &self.hosts[b].ns,
                "route",
                "del",
                "blackhole",
                &self.hosts[a].ip,
            ]);
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.teardown();
    }
}
