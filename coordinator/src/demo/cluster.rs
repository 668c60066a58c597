//! `cronstable demo --nodes N`: a gossip cluster on this machine (inventory EX-01, in process).
//!
//! Mints a throwaway CA and one certificate per node, then starts N coordinators (gossip,
//! `electLeader: true`, 2 s interval) and N shims, each node with its own copy of the demo
//! crontab, all on loopback. Every few seconds it prints each node's view (`GET /cluster`: who
//! leads, quorum, agreeing peers) and which node ran each job last. Commands on stdin try the
//! failure modes: `stop NODE` and `start NODE` (leader loss, quorum loss), `drift NODE` and
//! `undrift NODE` (a node whose job set differs).

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use cronstable_shim::source::JobSource;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{DEMO_CRONTAB, DemoArgs};
use crate::config::Config;
use crate::config::address::HostPort;
use crate::config::cluster::{Backend, ClusterConfig, PeerConfig};
use crate::gossip::certgen::TestCa;
use crate::listeners::{ApiListener, Listeners};

/// The demo cluster's poll interval.
const INTERVAL: Duration = Duration::from_secs(2);

/// The job `drift NODE` adds to that node's crontab only.
const DRIFT_JOB: &str =
    "\n# cronstable: name=only-here clusterPolicy=EveryNode\n* * * * * echo drifted\n";

/// Which node ran each job last: job → (node, scheduled instant). Filled from the run log the
/// demo's jobs append to.
type LastRuns = Arc<Mutex<BTreeMap<String, (String, String)>>>;

struct Node {
    name: String,
    config: Config,
    crontab: PathBuf,
    web_port: u16,
    web: Option<SocketAddr>,
    stop: Option<watch::Sender<bool>>,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
}

impl Node {
    async fn start(&mut self) -> anyhow::Result<()> {
        let api = TcpListener::bind("127.0.0.1:0").await?;
        let preferred = SocketAddr::from(([127, 0, 0, 1], self.web_port));
        let web = match TcpListener::bind(preferred).await {
            Ok(l) => l,
            Err(_) => TcpListener::bind("127.0.0.1:0").await?,
        };
        let listeners = Listeners {
            api: ApiListener::Tcp(api),
            web,
        };
        let api_url = listeners.api.url();
        let web_addr = listeners.web_addr()?;
        self.web_port = web_addr.port();
        self.web = Some(web_addr);
        let (stop_tx, stop_rx) = watch::channel(false);
        let stopped = move || crate::stop_requested(stop_rx.clone());
        let (config, name, stop) = (self.config.clone(), self.name.clone(), stopped());
        self.tasks.push(tokio::spawn(async move {
            // The demo reloads nothing: a closed channel.
            let reloads = tokio::sync::mpsc::channel(1).1;
            crate::run(
                config,
                name,
                crate::Environment::default(),
                listeners,
                stop,
                reloads,
            )
            .await
            .map_err(anyhow::Error::from)
        }));
        let mut shim =
            cronstable_shim::ShimConfig::new(JobSource::Crontab(self.crontab.clone()), api_url);
        shim.executor_id = format!("{}-shim", self.name);
        let stop = stopped();
        self.tasks.push(tokio::spawn(async move {
            let (reload_tx, reload_rx) = tokio::sync::mpsc::channel(1);
            let _keep = reload_tx;
            cronstable_shim::run(shim, stop, reload_rx)
                .await
                .map_err(anyhow::Error::from)
        }));
        self.stop = Some(stop_tx);
        Ok(())
    }

    async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        self.web = None;
        for t in self.tasks.drain(..) {
            t.await.context("a demo task failed")??;
        }
        Ok(())
    }
}

/// Runs an N-node gossip demo until `shutdown` or the duration.
pub async fn run(
    args: DemoArgs,
    scratch: &std::path::Path,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let n = args.nodes;
    anyhow::ensure!(
        (3..=26).contains(&n),
        "--nodes {n}: a gossip demo runs 3 to 26 nodes (with 2, election is strictly worse than \
         a single replica)"
    );
    let dir = scratch.join(format!("cronstable-demo-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let runs_log = dir.join("runs.log");
    // Every job also appends `<job> <node> <instant>` to one log, for the who-ran-what view.
    let crontab_text = DEMO_CRONTAB.to_owned()
        + &format!(
            "\n# cronstable: name=record-leader clusterPolicy=Leader seconds=true\n\
         */3 * * * * * echo \"$CRONSTABLE_JOB $CRONSTABLE_NODE $CRONSTABLE_SCHEDULED_AT\" >> {log}\n\
         # cronstable: name=record-prefer-leader clusterPolicy=PreferLeader seconds=true\n\
         */4 * * * * * echo \"$CRONSTABLE_JOB $CRONSTABLE_NODE $CRONSTABLE_SCHEDULED_AT\" >> {log}\n\
         # cronstable: name=record-every-node clusterPolicy=EveryNode seconds=true\n\
         */6 * * * * * echo \"$CRONSTABLE_JOB $CRONSTABLE_NODE $CRONSTABLE_SCHEDULED_AT\" >> {log}\n",
            log = runs_log.display()
        );

    let ca = TestCa::try_new("cronstable demo CA")?;
    let names: Vec<String> = (0..n)
        .map(|i| format!("cronstable-{}", (b'a' + i as u8) as char))
        .collect();
    let mut peer_ports = Vec::new();
    for _ in 0..n {
        peer_ports.push(TcpListener::bind("127.0.0.1:0").await?.local_addr()?.port());
    }
    // `--web-listen` sets the first node's HTTP port; the others count up from it (port 0:
    // every node takes a free one).
    let base_port = args
        .web_listen
        .parse::<SocketAddr>()
        .map(|a| a.port())
        .unwrap_or(8080);
    let mut nodes = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let home = dir.join(name);
        let tls = ca.write_node(&home, name, &["127.0.0.1", "localhost"])?;
        let crontab = home.join("crontab");
        std::fs::write(&crontab, &crontab_text)
            .with_context(|| format!("writing {}", crontab.display()))?;
        let peers = (0..n)
            .filter(|&j| j != i)
            .map(|j| PeerConfig {
                host: HostPort::new("127.0.0.1", peer_ports[j]),
            })
            .collect();
        let config = Config {
            cluster: Some(ClusterConfig {
                backend: Backend::Gossip,
                node_name: Some(name.clone()),
                elect_leader: true,
                listen: Some(HostPort::new("127.0.0.1", peer_ports[i])),
                tls: Some(tls),
                peers,
                interval: INTERVAL,
                connect_timeout: Duration::from_secs(1),
                ..ClusterConfig::default()
            }),
            ..Config::default()
        };
        nodes.push(Node {
            name: name.clone(),
            config,
            crontab,
            web_port: if base_port == 0 {
                0
            } else {
                base_port.saturating_add(i as u16)
            },
            web: None,
            stop: None,
            tasks: Vec::new(),
        });
    }
    println!("cronstable demo: a {n}-node gossip cluster on this machine (mTLS, electLeader)");
    println!(
        "  files    {} (crontabs, and certificates from a throwaway CA)",
        dir.display()
    );
    for node in &mut nodes {
        node.start().await?;
        if let Some(web) = node.web {
            println!("  {}  http://{web}/cluster", node.name);
        }
    }
    println!(
        "\nLeader jobs run on the elected node only, PreferLeader on the lowest reachable node,\n\
         EveryNode everywhere. Type a command and Enter to try a failure:\n  \
         stop cronstable-a     the leader goes away; another node takes over within ~2 rounds\n  \
         stop cronstable-b     with a and b stopped, c has no quorum: Leader jobs stop, PreferLeader runs on\n  \
         start cronstable-a    it rejoins and leads again\n  \
         drift cronstable-c    c's crontab gains a job: its job set differs, peers see it syncing, then drifted\n  \
         undrift cronstable-c  back in agreement\n\
         Ctrl-C stops the demo.\n"
    );

    let last_runs: LastRuns = Arc::default();
    let nodes = Arc::new(tokio::sync::Mutex::new(nodes));
    let report = report_views(nodes.clone(), runs_log, last_runs);
    let commands = read_commands(nodes.clone(), crontab_text);
    tokio::select! {
        _ = shutdown => {}
        () = super::run_for(args.duration) => {}
        () = report => {}
        r = commands => r?,
    }
    for node in nodes.lock().await.iter_mut() {
        node.stop().await?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("cronstable demo stopped");
    Ok(())
}

/// Applies `stop|start|drift|undrift NODE` lines from stdin until stdin closes (then idles).
async fn read_commands(
    nodes: Arc<tokio::sync::Mutex<Vec<Node>>>,
    crontab_text: String,
) -> anyhow::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut words = line.split_whitespace();
        let (Some(verb), Some(target)) = (words.next(), words.next()) else {
            continue;
        };
        let mut nodes = nodes.lock().await;
        let Some(node) = nodes.iter_mut().find(|n| n.name == target) else {
            println!("no node {target}; the nodes are cronstable-a, cronstable-b, …");
            continue;
        };
        match verb {
            "stop" if node.stop.is_some() => {
                node.stop().await?;
                println!("stopped {target} (its coordinator and its shim)");
            }
            "start" if node.stop.is_none() => {
                node.start().await?;
                println!("started {target}");
            }
            "drift" => {
                std::fs::write(&node.crontab, format!("{crontab_text}{DRIFT_JOB}"))?;
                println!("{target}'s crontab gained a job; its shim re-registers within 2 s");
            }
            "undrift" => {
                std::fs::write(&node.crontab, &crontab_text)?;
                println!("{target}'s crontab restored");
            }
            _ => println!("try: stop|start|drift|undrift NODE"),
        }
    }
    std::future::pending().await
}

/// Every 5 s: each node's view, and who ran each recording job last.
async fn report_views(
    nodes: Arc<tokio::sync::Mutex<Vec<Node>>>,
    runs_log: PathBuf,
    last_runs: LastRuns,
) {
    let mut every = tokio::time::interval(Duration::from_secs(5));
    loop {
        every.tick().await;
        let webs: Vec<(String, Option<SocketAddr>)> = nodes
            .lock()
            .await
            .iter()
            .map(|n| (n.name.clone(), n.web))
            .collect();
        println!("── views");
        for (name, web) in webs {
            let view = match web {
                None => "stopped".to_owned(),
                Some(web) => match cluster_view(web).await {
                    None => "no answer".to_owned(),
                    Some(v) => {
                        let peers = v["peers"].as_array().cloned().unwrap_or_default();
                        let statuses: Vec<String> = peers
                            .iter()
                            .map(|p| {
                                format!(
                                    "{}={}",
                                    p["node_name"]
                                        .as_str()
                                        .or(p["host"].as_str())
                                        .unwrap_or("?"),
                                    p["status"].as_str().unwrap_or("?")
                                )
                            })
                            .collect();
                        format!(
                            "leader={} quorate={} peers: {}",
                            v["leader"].as_str().unwrap_or("none"),
                            v["quorate"],
                            statuses.join(" ")
                        )
                    }
                },
            };
            println!("   {name}: {view}");
        }
        let log = std::fs::read_to_string(&runs_log).unwrap_or_default();
        let mut last = last_runs.lock().unwrap_or_else(PoisonError::into_inner);
        for line in log.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if let [job, node, at] = f[..] {
                last.insert(job.to_owned(), (node.to_owned(), at.to_owned()));
            }
        }
        for (job, (node, at)) in last.iter() {
            println!("   {job:<22} last ran on {node} for {at}");
        }
    }
}

/// `GET /cluster` on a local node, with a short timeout; `None` when it does not answer.
async fn cluster_view(web: SocketAddr) -> Option<serde_json::Value> {
    let fetch = async {
        let mut s = TcpStream::connect(web).await.ok()?;
        s.write_all(b"GET /cluster HTTP/1.0\r\nHost: demo\r\n\r\n")
            .await
            .ok()?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.ok()?;
        let raw = String::from_utf8_lossy(&raw);
        let (_, body) = raw.split_once("\r\n\r\n")?;
        serde_json::from_str(body).ok()
    };
    tokio::time::timeout(Duration::from_secs(2), fetch)
        .await
        .ok()
        .flatten()
}
