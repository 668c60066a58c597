//! The etcd store against a real three-member etcd cluster, one member per network namespace
//! on a bridge, with one member partitioned away from its peers (a blackhole route in its
//! namespace) while contenders can still reach it. Needs root and iproute2; without them the
//! test fails, naming what is missing. (Moved from the coordinator's unit tests: the fast tier
//! needs no root.)

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cronstable_coordinator::lease::conformance::{self, Node};
use cronstable_coordinator::lease::driver;
use cronstable_coordinator::store::etcd::{EtcdStore, timing};
use cronstable_tests::etcd::etcd_config;

/// Runs `ip` with `args`, panicking with the command on failure.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("this test needs iproute2 (`ip`): {e}"));
    assert!(
        out.status.success(),
        "ip {args:?} failed (this test needs root): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Three namespaces `<p>n1..3` with members at 10.<x>.0.11..13 on bridge `<p>br` (10.<x>.0.1).
struct Cluster {
    prefix: String,
    net: String,
    dir: tempfile::TempDir,
    members: Vec<Child>,
}

impl Cluster {
    fn start() -> Cluster {
        let pid = std::process::id();
        let prefix = format!("hl{}", pid % 100_000);
        let net = format!("10.{}.{}", 200 + pid % 50, (pid / 50) % 250);
        let c = Cluster {
            prefix: prefix.clone(),
            net: net.clone(),
            dir: tempfile::tempdir().unwrap(),
            members: Vec::new(),
        };
        let br = format!("{prefix}br");
        ip(&["link", "add", &br, "type", "bridge"]);
        ip(&["addr", "add", &format!("{net}.1/24"), "dev", &br]);
        ip(&["link", "set", &br, "up"]);
        for i in 1..=3 {
            let (ns, veth) = (format!("{prefix}n{i}"), format!("{prefix}v{i}"));
            ip(&["netns", "add", &ns]);
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ]);
            ip(&["link", "set", &veth, "master", &br, "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{net}.1{i}/24"),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        let mut c = c;
        let initial: Vec<String> = (1..=3)
            .map(|i| format!("m{i}=http://{net}.1{i}:2380"))
            .collect();
        for i in 1..=3 {
            let ns = format!("{prefix}n{i}");
            let me = format!("{net}.1{i}");
            let child = Command::new("ip")
                .args(["netns", "exec", &ns, "etcd", "--name", &format!("m{i}")])
                .arg("--data-dir")
                .arg(c.dir.path().join(format!("m{i}")))
                .args(["--listen-client-urls", &format!("http://{me}:2379")])
                .args(["--advertise-client-urls", &format!("http://{me}:2379")])
                .args(["--listen-peer-urls", &format!("http://{me}:2380")])
                .args([
                    "--initial-advertise-peer-urls",
                    &format!("http://{me}:2380"),
                ])
                .args(["--initial-cluster", &initial.join(",")])
                .args(["--initial-cluster-state", "new"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("starting etcd in a namespace");
            c.members.push(child);
        }
        c.wait_healthy();
        c
    }

    fn endpoint(&self, i: usize) -> String {
        format!("http://{}.1{i}:2379", self.net)
    }

    fn wait_healthy(&self) {
        let all: Vec<String> = (1..=3).map(|i| self.endpoint(i)).collect();
        for _ in 0..300 {
            let ok = Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", &all.join(","), "endpoint", "health"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the three-member etcd cluster did not become healthy");
    }

    /// Member `i` can no longer reach its peers (nor they it); clients still reach it.
    fn partition(&self, i: usize) {
        let ns = format!("{}n{i}", self.prefix);
        for peer in (1..=3).filter(|&p| p != i) {
            ip(&[
                "-n",
                &ns,
                "route",
                "add",
                "blackhole",
                &format!("{}.1{peer}/32", self.net),
            ]);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            let _ = m.kill();
            let _ = m.wait();
        }
        for i in 1..=3 {
            // Deleting the host end removes the pair at once; the namespace's teardown would
            // leave it behind for a while.
            for args in [
                vec![
                    "link".to_owned(),
                    "del".into(),
                    format!("{}v{i}", self.prefix),
                ],
                vec![
                    "netns".to_owned(),
                    "del".into(),
                    format!("{}n{i}", self.prefix),
                ],
            ] {
                let _ = Command::new("ip")
                    .args(&args)
                    .stderr(Stdio::null())
                    .status();
            }
        }
        let _ = Command::new("ip")
            .args(["link", "del", &format!("{}br", self.prefix)])
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_member_does_not_split_leadership_and_clients_move_on() {
    let _serial = conformance::serial().await;
    let cluster = Cluster::start();
    let timing = timing(6);
    // a talks to member 3 first, b to member 1: partitioning member 3 strands a's endpoint.
    let orders = [[3, 1, 2], [1, 2, 3]];
    let nodes: Vec<Node> = ["a", "b"]
        .iter()
        .zip(orders)
        .map(|(name, order)| {
            let eps = order.iter().map(|&i| cluster.endpoint(i)).collect();
            let (rx, stop, task) =
                driver::spawn(EtcdStore::new(&etcd_config(eps, 6), name, None), name);
            Node::from_parts(name, rx, stop, task)
        })
        .collect();
    conformance::one_leader(&nodes, timing).await;
    cluster.partition(3);
    // For two lease durations: never two leaders; and by the end exactly one leads again.
    let until = tokio::time::Instant::now() + timing.duration * 2;
    while tokio::time::Instant::now() < until {
        let leaders = nodes.iter().filter(|n| n.leads()).count();
        assert!(leaders <= 1, "two leaders during the partition");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    conformance::one_leader(&nodes, timing).await;
    // a's first endpoint is the stranded member; it must have moved on to a working one.
    conformance::wait_nodes(
        "a is quorate through another member",
        timing.duration,
        &nodes,
        |n| n[0].view.borrow().status.to_json("a")["quorate"] == true,
    )
    .await;
    for n in nodes {
        n.stop().await;
    }
}
