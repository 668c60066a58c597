//! A gossip cluster of real coordinator processes on distinct loopback addresses
//! (127.0.0.0/8 all reaches `lo`), with certificates from a throwaway CA, so mTLS and SAN
//! pinning are exercised for real.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use cronstable_coordinator::config::cluster::TlsPaths;
use cronstable_coordinator::gossip::certgen::TestCa;

use crate::{Coordinator, free_port, http};

/// One node's addresses and files.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// `nodeName`.
    pub name: String,
    /// The loopback address its `/peer` listener binds and its certificate names.
    pub ip: String,
    /// Where the HTTP API is reached from the test process.
    pub web_ip: String,
    /// The `/peer` port.
    pub peer_port: u16,
    /// gRPC port.
    pub api_port: u16,
    /// HTTP port.
    pub web_port: u16,
    /// Its TLS files.
    pub tls: TlsPaths,
    /// Its config file.
    pub config: PathBuf,
}

impl NodeSpec {
    /// `ip:peer_port`.
    pub fn peer_host(&self) -> String {
        format!("{}:{}", self.ip, self.peer_port)
    }

    /// The HTTP address.
    pub fn web(&self) -> SocketAddr {
        SocketAddr::new(self.web_ip.parse().unwrap(), self.web_port)
    }

    /// The gRPC URL.
    pub fn api(&self) -> String {
        format!("http://127.0.0.1:{}", self.api_port)
    }
}

/// How to lay a cluster out.
#[derive(Debug, Clone)]
pub struct ClusterPlan {
    /// Node names, in order; node `i` listens on `127.0.<subnet>.<10 + i>`.
    pub names: Vec<String>,
    /// The third octet of the loopback addresses, so concurrent tests do not collide.
    pub subnet: u8,
    /// Extra YAML lines appended under `cluster:` (indented two spaces by the caller).
    pub extra: String,
    /// `cluster.interval`.
    pub interval: &'static str,
    /// `cluster.connectTimeout`.
    pub connect_timeout: &'static str,
    /// Node addresses instead of `127.0.<subnet>.<10 + i>` (the netns lab's), with fixed ports
    /// (each namespace has its own port space) and the HTTP API on all interfaces.
    pub hosts: Option<Vec<String>>,
    /// Every node's `/peer` listener on one port (each on its own loopback address), the
    /// common local layout; otherwise each node draws a port of its own.
    pub one_peer_port: bool,
}

impl ClusterPlan {
    /// `n` nodes `n1..n<n>` with electLeader on and a 1 s interval.
    pub fn new(n: usize, subnet: u8) -> Self {
        Self {
            names: (1..=n).map(|i| format!("n{i}")).collect(),
            subnet,
            extra: String::new(),
            interval: "1s",
            connect_timeout: "1s",
            hosts: None,
            one_peer_port: false,
        }
    }
}

/// The CA and every node's files; coordinators are started separately so tests can start,
/// kill and restart them one by one.
pub struct ClusterFiles {
    /// The CA that signed every node.
    pub ca: TestCa,
    /// The nodes.
    pub nodes: Vec<NodeSpec>,
}

impl ClusterFiles {
    /// Mints certificates and writes one config per node into `dir`.
    pub fn write(dir: &Path, plan: &ClusterPlan) -> Self {
        let ca = TestCa::new("cronstable-test-ca");
        let shared_peer_port = plan.one_peer_port.then(free_port);
        let mut nodes: Vec<NodeSpec> = plan
            .names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let ip = match &plan.hosts {
                    Some(hosts) => hosts[i].clone(),
                    None => format!("127.0.{}.{}", plan.subnet, 10 + i),
                };
                let fixed = plan.hosts.is_some();
                let port = |fixed_port: u16| if fixed { fixed_port } else { free_port() };
                // Per index, so two nodes sharing a name (the duplicate test) do not share files.
                let home = dir.join(format!("{i}-{name}"));
                let tls = ca.write_node(&home, name, &[&ip]).unwrap();
                NodeSpec {
                    name: name.clone(),
                    web_ip: if fixed {
                        ip.clone()
                    } else {
                        "127.0.0.1".into()
                    },
                    ip,
                    peer_port: shared_peer_port.unwrap_or_else(|| port(8443)),
                    api_port: port(7400),
                    web_port: port(8080),
                    tls,
                    config: home.join("coordinator.yaml"),
                }
            })
            .collect();
        let all = nodes.clone();
        for node in &mut nodes {
            let peers: String = all
                .iter()
                .filter(|p| p.name != node.name || p.ip != node.ip)
                .map(|p| format!("    - host: \"{}\"\n", p.peer_host()))
                .collect();
            write_config(node, &peers, plan);
        }
        Self { ca, nodes }
    }

    /// Starts node `i`'s coordinator.
    pub fn start(&self, i: usize) -> Coordinator {
        let n = &self.nodes[i];
        let mut c = Coordinator::start_with(n.config.clone(), n.api(), n.web());
        c.proc.name = format!("coordinator {}", n.name);
        c
    }
}

/// Writes `node`'s config with `peers` (YAML list lines).
pub fn write_config(node: &NodeSpec, peers: &str, plan: &ClusterPlan) {
    let yaml = format!(
        "api:\n  listen: 127.0.0.1:{api}\nweb:\n  listen: {web_ip}:{web}\ncluster:\n  \
         nodeName: {name}\n  electLeader: true\n  interval: {interval}\n  connectTimeout: {connect_timeout}\n  \
         listen: \"{ip}:{port}\"\n  tls:\n    ca: {ca}\n    cert: {cert}\n    key: {key}\n  \
         peers:\n{peers}{extra}",
        api = node.api_port,
        web = node.web_port,
        web_ip = if node.web_ip == "127.0.0.1" {
            "127.0.0.1"
        } else {
            "0.0.0.0"
        },
        name = node.name,
        interval = plan.interval,
        connect_timeout = plan.connect_timeout,
        ip = node.ip,
        port = node.peer_port,
        ca = node.tls.ca.display(),
        cert = node.tls.cert.display(),
        key = node.tls.key.display(),
        extra = plan.extra,
    );
    std::fs::write(&node.config, yaml).unwrap();
}

/// `GET /cluster` on `web`, or `None` while it does not answer.
pub fn cluster(web: SocketAddr) -> Option<serde_json::Value> {
    http(web, "GET", "/cluster")
        .ok()
        .filter(|r| r.status == 200)
        .map(|r| r.json())
}

/// `GET /fleet` on `web`, or why not.
pub fn fleet(web: SocketAddr) -> Result<serde_json::Value, String> {
    let r = http(web, "GET", "/fleet").map_err(|e| e.to_string())?;
    if r.status == 200 {
        Ok(r.json())
    } else {
        Err(format!("GET /fleet: {} {}", r.status, r.body))
    }
}

/// Whether a `/fleet` node entry carries usable stats: memory, a CPU rate and a CPU count.
pub fn full_stats(node: &serde_json::Value) -> bool {
    let s = &node["node_stats"];
    s["memory_total_bytes"].as_u64().is_some_and(|t| t > 0)
        && s["cpu_percent"]
            .as_f64()
            .is_some_and(|c| (0.0..=100.0).contains(&c))
        && s["cpus"].as_u64().is_some_and(|c| c >= 1)
}
