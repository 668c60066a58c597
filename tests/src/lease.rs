//! Helpers for the lease-backend process tests: coordinators on the filesystem or etcd backend,
//! and reading leadership off `GET /cluster`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant as StdInstant};

use crate::{Coordinator, free_port, http};

/// Which store the coordinators elect through.
#[derive(Debug, Clone)]
pub enum Store {
    /// `cluster.filesystem.path`.
    Filesystem(std::path::PathBuf),
    /// `cluster.etcd.endpoints`.
    Etcd(String),
}

/// The `cluster:` keys (indented two spaces) that put a node on `store` with lease `ttl`
/// seconds.
pub fn backend_yaml(store: &Store, ttl: u64) -> String {
    match store {
        Store::Filesystem(path) => format!(
            // Every test node runs on this one host: the explicit opt-in that lets the store be a
            // plain directory rather than a mount of its own.
            "  backend: filesystem\n  filesystem:\n    path: {}\n    ttl: {ttl}\n    topology: single-node\n",
            path.display()
        ),
        Store::Etcd(endpoint) => {
            format!("  backend: etcd\n  etcd:\n    endpoints: [\"{endpoint}\"]\n    ttl: {ttl}\n")
        }
    }
}

/// Starts a coordinator named `name` in `dir` on `store` with lease `ttl` seconds.
pub fn start_lease_node(dir: &Path, name: &str, store: &Store, ttl: u64) -> Coordinator {
    start_lease_node_in(
        std::process::Command::new(crate::binary("cronstable")),
        dir,
        name,
        store,
        ttl,
    )
}

/// [`start_lease_node`] with `program` (the `cronstable` binary, possibly behind a wrapper such
/// as `faketime`).
pub fn start_lease_node_in(
    program: std::process::Command,
    dir: &Path,
    name: &str,
    store: &Store,
    ttl: u64,
) -> Coordinator {
    let (api_port, web_port) = (free_port(), free_port());
    if let Store::Filesystem(path) = store
        && !path.exists()
    {
        // The coordinator never creates its store directory (a missing mount must not become a
        // store on local disk): the test makes it, as an operator mounts it.
        std::fs::create_dir_all(path).unwrap();
    }
    let backend = backend_yaml(store, ttl);
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &config,
        format!(
            "api:\n  listen: 127.0.0.1:{api_port}\nweb:\n  listen: 127.0.0.1:{web_port}\n\
             cluster:\n  nodeName: {name}\n{backend}"
        ),
    )
    .unwrap();
    Coordinator::start_in(
        program,
        config,
        format!("http://127.0.0.1:{api_port}"),
        ([127, 0, 0, 1], web_port).into(),
    )
}

/// `is_leader` from the node's `GET /cluster`; `None` when it does not answer.
pub fn is_leader(web: SocketAddr) -> Option<bool> {
    let body = http(web, "GET", "/cluster").ok()?.json();
    body["is_leader"].as_bool()
}

/// The indexes of the nodes that say they lead.
pub fn leaders(webs: &[SocketAddr]) -> Vec<usize> {
    (0..webs.len())
        .filter(|&i| is_leader(webs[i]) == Some(true))
        .collect()
}

/// Polls every 20 ms until exactly one of `webs` leads; returns it and how long it took, or
/// `None` after `limit`. Also fails if two ever lead at once.
pub fn wait_one_leader(webs: &[SocketAddr], limit: Duration) -> Option<(usize, Duration)> {
    let start = StdInstant::now();
    while start.elapsed() < limit {
        let l = leaders(webs);
        assert!(l.len() <= 1, "two leaders at once: {l:?}");
        if let [one] = l[..] {
            return Some((one, start.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A shim on `node` whose per-second Leader job `tick` appends "<instant> <name>" to `out`:
/// the workload of the pause and wedged-executor tests, where every second must run on
/// exactly one node.
pub fn tick_shim(dir: &Path, node: &Coordinator, name: &str, out: &Path) -> crate::Proc {
    tick_shim_with(dir, node, name, out, "Leader")
}

/// [`tick_shim`] with the job's `clusterPolicy` set to `policy`.
pub fn tick_shim_with(
    dir: &Path,
    node: &Coordinator,
    name: &str,
    out: &Path,
    policy: &str,
) -> crate::Proc {
    let tab = dir.join(format!("{name}.crontab"));
    std::fs::write(
        &tab,
        format!(
            "# cronstable: name=tick clusterPolicy={policy} seconds=true\n\
             * * * * * * echo \"$CRONSTABLE_SCHEDULED_AT {name}\" >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    crate::start_shim(&tab, &node.api, &[])
}

/// Each instant [`tick_shim`]'s job wrote to `out`, with the nodes that ran it.
pub fn ticks(out: &Path) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut by_instant: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for line in crate::lines(out) {
        if let Some((at, node)) = line.split_once(' ') {
            by_instant
                .entry(at.to_owned())
                .or_default()
                .push(node.to_owned());
        }
    }
    by_instant
}

/// The instants in [`ticks`] that ran on more than one node.
pub fn doubled_ticks(out: &Path) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut all = ticks(out);
    all.retain(|_, nodes| nodes.len() > 1);
    all
}

/// Three filesystem-lease nodes `a`, `b`, `c` (lease `ttl` seconds) in `dir`, each with a
/// [`tick_shim`] writing to `out`.
pub struct TickCluster {
    /// The coordinators.
    pub nodes: Vec<Coordinator>,
    /// Their web addresses, in the same order.
    pub webs: Vec<SocketAddr>,
    /// Their shims, in the same order.
    pub shims: Vec<crate::Proc>,
    /// Where the job writes.
    pub out: std::path::PathBuf,
}

/// Starts a [`TickCluster`] in `dir`.
pub fn tick_cluster(dir: &Path, ttl: u64) -> TickCluster {
    tick_cluster_with(dir, ttl, "Leader")
}

/// [`tick_cluster`] with the job's `clusterPolicy` set to `policy`.
pub fn tick_cluster_with(dir: &Path, ttl: u64, policy: &str) -> TickCluster {
    tick_cluster_on(dir, &Store::Filesystem(dir.join("store")), ttl, policy)
}

/// [`tick_cluster_with`] electing through `store`.
pub fn tick_cluster_on(dir: &Path, store: &Store, ttl: u64, policy: &str) -> TickCluster {
    let out = dir.join("out");
    let names = ["a", "b", "c"];
    let nodes: Vec<Coordinator> = names
        .iter()
        .map(|n| start_lease_node(dir, n, store, ttl))
        .collect();
    let webs = nodes.iter().map(|c| c.web).collect();
    let shims = nodes
        .iter()
        .zip(names)
        .map(|(node, name)| tick_shim_with(dir, node, name, &out, policy))
        .collect();
    TickCluster {
        nodes,
        webs,
        shims,
        out,
    }
}

/// Rewrites each node's config as a lease node (`backend` YAML lines under `cluster:`) with
/// an observability mesh over the certificates and addresses `files` minted (`extra_peers`:
/// further mesh peers' `host:port`).
pub fn lease_mesh(files: &crate::gossip::ClusterFiles, backend: &str, extra_peers: &[String]) {
    for node in &files.nodes {
        let peers: String = files
            .nodes
            .iter()
            .filter(|p| p.name != node.name)
            .map(crate::gossip::NodeSpec::peer_host)
            .chain(extra_peers.iter().cloned())
            .map(|h| format!("      - host: \"{h}\"\n"))
            .collect();
        let yaml = format!(
            "api:\n  listen: 127.0.0.1:{api}\nweb:\n  listen: 127.0.0.1:{web}\ncluster:\n  \
             nodeName: {name}\n{backend}  connectTimeout: 1s\n  observability:\n    \
             listen: \"{ip}:{port}\"\n    interval: 1s\n    tls:\n      ca: {ca}\n      \
             cert: {cert}\n      key: {key}\n    peers:\n{peers}",
            api = node.api_port,
            web = node.web_port,
            name = node.name,
            ip = node.ip,
            port = node.peer_port,
            ca = node.tls.ca.display(),
            cert = node.tls.cert.display(),
            key = node.tls.key.display(),
        );
        std::fs::write(&node.config, yaml).unwrap();
    }
}
