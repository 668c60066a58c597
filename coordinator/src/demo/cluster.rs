//! `cronstable demo --nodes N`: a gossip cluster on this machine (inventory EX-01, in process).
//!
//! Mints a throwaway CA and one certificate per node, then starts N coordinators (gossip,
//! `electLeader: true`, 2 s interval) and N shims with the demo crontab, all on loopback. Every
//! few seconds it prints each node's view (`GET /cluster`): who leads, whether it is quorate,
//! how many peers agree. Stop a node's view from leading by killing nothing here; instead try
//! `curl` on the printed `/cluster` URLs, or run the multi-process tests for failover.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use cronstable_shim::source::JobSource;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::{DEMO_CRONTAB, DemoArgs};
use crate::config::Config;
use crate::config::address::HostPort;
use crate::config::cluster::{Backend, ClusterConfig, PeerConfig};
use crate::gossip::certgen::TestCa;
use crate::listeners::{ApiListener, Listeners};

/// The demo cluster's poll interval.
const INTERVAL: Duration = Duration::from_secs(2);

async fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0").await?.local_addr()?.port())
}

/// Runs an N-node gossip demo until `shutdown` or the duration.
pub async fn run(
    args: DemoArgs,
    scratch: &std::path::Path,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let n = args.nodes;
    anyhow::ensure!(
        n >= 3,
        "--nodes {n}: a gossip cluster needs at least 3 nodes (with 2, election is strictly worse \
         than a single replica)"
    );
    let dir = scratch.join(format!("cronstable-demo-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let crontab = dir.join("crontab");
    std::fs::write(&crontab, DEMO_CRONTAB)
        .with_context(|| format!("writing {}", crontab.display()))?;

    let ca = TestCa::try_new("cronstable demo CA")?;
    let names: Vec<String> = (0..n)
        .map(|i| format!("cronstable-{}", (b'a' + (i % 26) as u8) as char))
        .collect();
    let mut peer_ports = Vec::new();
    for _ in 0..n {
        peer_ports.push(free_port().await?);
    }
    println!("cronstable demo: a {n}-node gossip cluster on this machine (mTLS, electLeader)");
    println!("  crontab  {}", crontab.display());
    println!(
        "  certs    {} (a throwaway CA made for this demo)",
        dir.display()
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let mut tasks = Vec::new();
    let mut webs = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let tls = ca.write_node(&dir.join(name), name, &["127.0.0.1", "localhost"])?;
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
        let api = TcpListener::bind("127.0.0.1:0").await?;
        let preferred = format!("127.0.0.1:{}", 8080 + i);
        let web = match TcpListener::bind(&preferred).await {
            Ok(l) => l,
            Err(_) => TcpListener::bind("127.0.0.1:0").await?,
        };
        let listeners = Listeners {
            api: ApiListener::Tcp(api),
            web,
        };
        let api_url = listeners.api.url();
        let web_addr = listeners.web_addr()?;
        println!("  {name}  http://{web_addr}/cluster");
        webs.push((name.clone(), web_addr));
        let node = name.clone();
        let stop = stopped();
        tasks.push(tokio::spawn(async move {
            crate::run(config, node, listeners, stop)
                .await
                .map_err(anyhow::Error::from)
        }));
        let mut shim =
            cronstable_shim::ShimConfig::new(JobSource::Crontab(crontab.clone()), api_url);
        shim.executor_id = format!("{}-shim", names[i]);
        let (reload_tx, reload_rx) = tokio::sync::mpsc::channel(1);
        let stop = stopped();
        tasks.push(tokio::spawn(async move {
            let _keep = reload_tx;
            cronstable_shim::run(shim, stop, reload_rx)
                .await
                .map_err(anyhow::Error::from)
        }));
    }
    println!("  Leader jobs run on the elected node only; watch the views below (Ctrl-C stops)\n");

    let report = async {
        let mut every = tokio::time::interval(Duration::from_secs(5));
        loop {
            every.tick().await;
            let mut line = Vec::new();
            for (name, web) in &webs {
                line.push(match cluster_view(*web).await {
                    Some(v) => format!(
                        "{name}: leader={} quorate={} agreed={}/{}",
                        v["leader"].as_str().unwrap_or("-"),
                        v["quorate"],
                        v["peers"]
                            .as_array()
                            .map_or(0, |p| p.iter().filter(|p| p["status"] == "agreed").count()),
                        v["peers"].as_array().map_or(0, Vec::len),
                    ),
                    None => format!("{name}: no answer"),
                });
            }
            println!("views | {}", line.join(" | "));
        }
    };
    let limit = async {
        match args.duration {
            Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = shutdown => {}
        _ = limit => {}
        () = report => {}
    }
    let _ = stop_tx.send(true);
    for t in tasks {
        t.await.context("a demo task failed")??;
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("cronstable demo stopped");
    Ok(())
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
