//! `cronstable demo --nodes N`: a gossip cluster on this machine (inventory EX-01, in process).
//!
//! Mints a throwaway CA and one certificate per node, then starts N coordinators (gossip,
//! `electLeader: true`, 2 s interval) and N shims, each node with its own copy of the demo
//! crontab, all on loopback. Every few seconds it prints each node's view (`GET /cluster`: who
//! leads, quorum, agreeing peers) and which node ran each job last. Commands on stdin try the
//! failure modes: `stop NODE` and `start NODE` (leader loss, quorum loss), `drift NODE` and
//! `undrift NODE` (a node whose job set differs).
//!
//! `--spread` (the grand tour of `distribution: spread`) gives the cluster a larger job set,
//! several jobs of each policy, and owns each Leader and PreferLeader job by one node
//! (rendezvous hashing of the job name over the agreeing nodes); the report then shows which
//! node owns which job and how many each node owns, so `stop NODE` shows that node's jobs
//! moving to the others and `start NODE` shows them coming back.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use cronstable_shim::schedule::source::JobSource;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{DEMO_CRONTAB, DemoArgs};
use crate::config::Config;
use crate::config::address::HostPort;
use crate::config::cluster::{Backend, ClusterConfig, Distribution, PeerConfig};
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
        let span = super::node_span(&self.name);
        let (config, name, stop) = (self.config.clone(), self.name.clone(), stopped());
        self.tasks
            .push(crate::spawn(tracing::Instrument::instrument(
                async move {
                    // The demo reloads nothing: a closed channel.
                    let reloads = tokio::sync::mpsc::channel(1).1;
                    crate::run(
                        config,
                        name,
                        crate::Environment::default(),
                        listeners,
                        // Demo nodes stop with their shims: nothing to tell about a next start.
                        async move {
                            stop.await;
                            crate::Stop::default()
                        },
                        reloads,
                    )
                    .await
                    .map_err(anyhow::Error::from)
                },
                span.clone(),
            )));
        let mut shim =
            cronstable_shim::ShimConfig::new(JobSource::Crontab(self.crontab.clone()), api_url);
        shim.executor_id = format!("{}-shim", self.name);
        let stop = stopped();
        self.tasks
            .push(crate::spawn(tracing::Instrument::instrument(
                async move {
                    let (reload_tx, reload_rx) = tokio::sync::mpsc::channel(1);
                    let _keep = reload_tx;
                    cronstable_shim::run(shim, stop, reload_rx)
                        .await
                        .map_err(anyhow::Error::from)
                },
                span,
            )));
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
    let crontab_text = demo_crontab(args.spread, &runs_log);

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
        let config = node_config(name, i, &peer_ports, tls, args.spread);
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
    let mode = if args.spread {
        "electLeader, distribution: spread"
    } else {
        "electLeader"
    };
    println!("cronstable demo: a {n}-node gossip cluster on this machine (mTLS, {mode})");
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
    print_guide(args.spread);

    let last_runs: LastRuns = Arc::default();
    let nodes = Arc::new(tokio::sync::Mutex::new(nodes));
    let report = report_views(nodes.clone(), runs_log, last_runs, args.spread);
    let events = print_events(nodes.clone());
    let commands = read_commands(nodes.clone(), crontab_text);
    tokio::select! {
        _ = shutdown => {}
        () = super::run_for(args.duration) => {}
        () = report => {}
        () = events => {}
        r = commands => r?,
    }
    for node in nodes.lock().await.iter_mut() {
        node.stop().await?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("cronstable demo stopped");
    Ok(())
}

/// The demo's crontab: the stock demo jobs and one per policy recording who ran what, or the
/// spread set. Every job also appends `<job> <node> <instant>` to `runs_log`, for the
/// who-ran-what view.
fn demo_crontab(spread: bool, runs_log: &std::path::Path) -> String {
    if spread {
        spread_crontab(runs_log)
    } else {
        DEMO_CRONTAB.to_owned()
            + &format!(
                "\n# cronstable: name=record-leader clusterPolicy=Leader seconds=true\n\
     */3 * * * * * echo \"$CRONSTABLE_JOB $CRONSTABLE_NODE $CRONSTABLE_SCHEDULED_AT\" >> {log}\n\
     # cronstable: name=record-prefer-leader clusterPolicy=PreferLeader seconds=true\n\
     */4 * * * * * echo \"$CRONSTABLE_JOB $CRONSTABLE_NODE $CRONSTABLE_SCHEDULED_AT\" >> {log}\n\
     # cronstable: name=record-every-node clusterPolicy=EveryNode seconds=true\n\
     */6 * * * * * echo \"$CRONSTABLE_JOB $CRONSTABLE_NODE $CRONSTABLE_SCHEDULED_AT\" >> {log}\n",
                log = runs_log.display()
            )
    }
}

/// Node `i`'s config: gossip with election, its peers the other nodes' ports.
fn node_config(
    name: &str,
    i: usize,
    peer_ports: &[u16],
    tls: crate::config::TlsPaths,
    spread: bool,
) -> Config {
    let peers = (0..peer_ports.len())
        .filter(|&j| j != i)
        .map(|j| PeerConfig {
            host: HostPort::new("127.0.0.1", peer_ports[j]),
        })
        .collect();
    Config {
        cluster: Some(ClusterConfig {
            backend: Backend::Gossip,
            node_name: Some(name.to_owned()),
            elect_leader: true,
            distribution: if spread {
                Distribution::Spread
            } else {
                Distribution::SingleLeader
            },
            listen: Some(HostPort::new("127.0.0.1", peer_ports[i])),
            tls: Some(tls),
            peers,
            interval: INTERVAL,
            connect_timeout: Duration::from_secs(1),
            ..ClusterConfig::default()
        }),
        ..Config::default()
    }
}

/// What to try, printed once the nodes run.
fn print_guide(spread: bool) {
    if spread {
        println!(
            "\nSpread: each Leader and PreferLeader job is owned by one node (rendezvous hashing of\n\
         its name over the agreeing nodes), so the jobs fan out; EveryNode jobs run everywhere.\n\
         The report below shows who owns what. Type a command and Enter:\n  \
         stop cronstable-b     b's jobs move to the others within about a round (the rest stay put)\n  \
         start cronstable-b    they come back to b once it agrees again\n  \
         stop cronstable-a     with two nodes stopped the last has no quorum: Leader jobs stop\n\
         Ctrl-C stops the demo.\n"
        );
    } else {
        println!(
            "\nLeader jobs run on the elected node only, PreferLeader on the lowest reachable node,\n\
     EveryNode everywhere. Type a command and Enter to try a failure:\n  \
     stop cronstable-a     the leader goes away; another node takes over within about a round\n  \
     stop cronstable-b     with a and b stopped, c has no quorum: Leader jobs stop, PreferLeader runs on\n  \
     start cronstable-a    it rejoins; a node that leads keeps the lead, else a leads\n  \
     drift cronstable-c    c's crontab gains a job: its job set differs, peers see it syncing, then drifted\n  \
     undrift cronstable-c  back in agreement\n\
     Ctrl-C stops the demo.\n"
        );
    }
}

/// Applies `stop|start|drift|undrift NODE` lines from stdin until stdin closes (then idles).
async fn read_commands(
    nodes: Arc<tokio::sync::Mutex<Vec<Node>>>,
    crontab_text: String,
) -> anyhow::Result<()> {
    // Read on a plain thread, not the runtime's blocking pool: a read of a terminal blocks
    // until Enter, and the runtime waits for its blocking tasks at exit, so Ctrl-C would stop
    // the demo but leave the process hanging. A detached thread ends with the process.
    let (tx, mut lines) = tokio::sync::mpsc::channel::<String>(16);
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = lines.recv().await {
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
    spread: bool,
) {
    let mut every = tokio::time::interval(Duration::from_secs(5));
    loop {
        every.tick().await;
        let webs = node_webs(&nodes).await;
        println!("── views");
        for (name, web) in &webs {
            let view = match web {
                None => "stopped".to_owned(),
                Some(web) => match cluster_view(*web).await {
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
        let last = {
            let mut last = last_runs.lock().unwrap_or_else(PoisonError::into_inner);
            for line in log.lines() {
                let f: Vec<&str> = line.split(' ').collect();
                if let [job, node, at] = f[..] {
                    last.insert(job.to_owned(), (node.to_owned(), at.to_owned()));
                }
            }
            last.clone()
        };
        if spread {
            print_owners(&webs, &last).await;
            continue;
        }
        for (job, (node, at)) in &last {
            println!("   {job:<22} last ran on {node} for {at}");
        }
    }
}

/// The spread demo's job set: several jobs of each policy, each appending
/// `<job> <node> <instant>` to `log`.
fn spread_crontab(log: &std::path::Path) -> String {
    let mut text = String::from(
        "# The cronstable spread demo: each Leader and PreferLeader job is owned by one node.\n",
    );
    let jobs: [(&str, &str, &str); 9] = [
        ("billing", "Leader", "*/3"),
        ("reports", "Leader", "*/4"),
        ("cleanup", "Leader", "*/5"),
        ("backups", "Leader", "*/6"),
        ("invoices", "Leader", "*/3"),
        ("thumbnails", "PreferLeader", "*/4"),
        ("search-index", "PreferLeader", "*/5"),
        ("cache-warm", "PreferLeader", "*/6"),
        ("heartbeat", "EveryNode", "*/5"),
    ];
    for (name, policy, seconds) in jobs {
        text.push_str(&format!(
            "\n# cronstable: name={name} clusterPolicy={policy} seconds=true\n\
             {seconds} * * * * * echo \"$CRONSTABLE_JOB $CRONSTABLE_NODE $CRONSTABLE_SCHEDULED_AT\" >> {}\n",
            log.display()
        ));
    }
    text
}

/// Spread's ownership: each leader-gated job's `clusterOwner` as the first answering node
/// sees it, who ran it last, and how many jobs each node owns.
async fn print_owners(
    webs: &[(String, Option<SocketAddr>)],
    last: &BTreeMap<String, (String, String)>,
) {
    let mut jobs = None;
    for (name, web) in webs {
        if let Some(web) = web
            && let Some(v) = get_json(*web, "/jobs").await
        {
            jobs = Some((name.clone(), v));
            break;
        }
    }
    let Some((seen_by, jobs)) = jobs else {
        println!("── owners: no node answers");
        return;
    };
    println!("── owners (as {seen_by} sees them)");
    let mut per_node: BTreeMap<String, usize> = webs.iter().map(|(n, _)| (n.clone(), 0)).collect();
    for job in jobs["jobs"].as_array().into_iter().flatten() {
        let (Some(name), Some(policy)) = (job["name"].as_str(), job["clusterPolicy"].as_str())
        else {
            continue;
        };
        if policy == "EveryNode" {
            continue;
        }
        let owner = job["clusterOwner"].as_str().unwrap_or("none (no quorum)");
        if let Some(count) = per_node.get_mut(owner) {
            *count += 1;
        }
        let ran = last
            .get(name)
            .map(|(node, at)| format!("last ran on {node} for {at}"))
            .unwrap_or_else(|| "not run yet".into());
        println!("   {name:<14} {policy:<13} owner {owner:<14} {ran}");
    }
    let counts: Vec<String> = per_node
        .iter()
        .map(|(node, n)| format!("{node} {n}"))
        .collect();
    println!("   jobs owned: {}", counts.join(", "));
}

/// Each node's name and HTTP address (`None` while it is stopped).
async fn node_webs(nodes: &tokio::sync::Mutex<Vec<Node>>) -> Vec<(String, Option<SocketAddr>)> {
    nodes
        .lock()
        .await
        .iter()
        .map(|n| (n.name.clone(), n.web))
        .collect()
}

/// `GET /cluster` on a local node, with a short timeout; `None` when it does not answer.
async fn cluster_view(web: SocketAddr) -> Option<serde_json::Value> {
    get_json(web, "/cluster").await
}

/// `GET path` on a local node, with a short timeout; `None` when it does not answer.
async fn get_json(web: SocketAddr, path: &str) -> Option<serde_json::Value> {
    let fetch = async {
        let mut s = TcpStream::connect(web).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: demo\r\n\r\n").as_bytes())
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

/// Skip reasons that are the cluster working as designed (a follower leaves a Leader job to
/// the leader): the event feed leaves them out, and prints every other skip.
const ROUTINE_SKIPS: [&str; 2] = ["not_leader", "not_owner"];

/// What the event feed last saw of one node, so it prints changes only.
#[derive(Default)]
struct Seen {
    /// `None` until the first answer; then the leader the node named (or none).
    leader: Option<Option<String>>,
    quorate: Option<bool>,
    /// Per job, the (scheduled instant, attempt) of the newest decision and run already seen.
    decisions: BTreeMap<String, (i64, u64)>,
    runs: BTreeMap<String, (i64, u64)>,
}

/// The events that matter, one line each as they happen, naming the node: a node's leader
/// changes or its quorum comes or goes, a firing is skipped for a reason other than "another
/// node leads/owns it", a run fails, a node stops answering. Polls each node's `GET /cluster`
/// and `GET /jobs` every second.
async fn print_events(nodes: Arc<tokio::sync::Mutex<Vec<Node>>>) {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        every.tick().await;
        let webs = node_webs(&nodes).await;
        for (name, web) in webs {
            let Some(web) = web else {
                if seen.remove(&name).is_some() {
                    event(&name, "stopped");
                }
                continue;
            };
            let s = seen.entry(name.clone()).or_default();
            if let Some(v) = cluster_view(web).await {
                for line in cluster_events(&name, s, &v) {
                    event(&name, &line);
                }
            }
            if let Some(v) = get_json(web, "/jobs").await {
                for line in job_events(s, &v) {
                    event(&name, &line);
                }
            }
        }
    }
}

fn event(node: &str, what: &str) {
    let at = chrono::DateTime::from_timestamp_millis(crate::clock::now_ms())
        .map(|t| t.format("%H:%M:%S").to_string())
        .unwrap_or_default();
    println!("{at} ▸ {node:<13} {what}");
}

/// Leader and quorum changes in one node's `GET /cluster` body.
fn cluster_events(me: &str, s: &mut Seen, v: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    let leader = v["leader"].as_str().map(str::to_owned);
    if s.leader.as_ref() != Some(&leader) {
        out.push(match &leader {
            Some(l) if l == me => "now leads".to_owned(),
            Some(l) => format!("follows {l}"),
            None => "sees no leader".to_owned(),
        });
        s.leader = Some(leader);
    }
    if let Some(q) = v["quorate"].as_bool() {
        if s.quorate.is_some_and(|was| was != q) {
            out.push(if q { "has a quorum" } else { "lost its quorum" }.to_owned());
        }
        s.quorate = Some(q);
    }
    out
}

/// New non-routine skips and failed runs in one node's `GET /jobs` body.
fn job_events(s: &mut Seen, v: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    let jobs = v["jobs"].as_array().map(Vec::as_slice).unwrap_or_default();
    for job in jobs {
        let Some(name) = job["name"].as_str() else {
            continue;
        };
        let id = |r: &serde_json::Value| {
            (
                r["scheduledAtMs"].as_i64().unwrap_or(0),
                r["attempt"].as_u64().unwrap_or(0),
            )
        };
        let d = &job["lastDecision"];
        if d.is_object() && s.decisions.insert(name.to_owned(), id(d)) != Some(id(d)) {
            let reason = d["reason"].as_str().unwrap_or("?");
            if d["verdict"] == "skip" && !ROUTINE_SKIPS.contains(&reason) {
                out.push(format!(
                    "skipped {name} at {}: {reason}",
                    d["scheduledAt"].as_str().unwrap_or("?")
                ));
            }
        }
        let r = &job["lastRun"];
        if r.is_object() && s.runs.insert(name.to_owned(), id(r)) != Some(id(r)) {
            let failed = r["exitCode"].as_i64().is_none_or(|c| c != 0) || r["timedOut"] == true;
            if failed {
                out.push(format!(
                    "run of {name} FAILED (exit {}, signal {}, timed out {})",
                    r["exitCode"], r["signal"], r["timedOut"]
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_event_feed_prints_leader_and_quorum_changes_once() {
        let mut s = Seen::default();
        let lead = json!({"leader": "cronstable-a", "quorate": true});
        assert_eq!(cluster_events("cronstable-a", &mut s, &lead), ["now leads"]);
        assert!(cluster_events("cronstable-a", &mut s, &lead).is_empty());
        let alone = json!({"leader": null, "quorate": false});
        assert_eq!(
            cluster_events("cronstable-a", &mut s, &alone),
            ["sees no leader", "lost its quorum"]
        );
        let follow = json!({"leader": "cronstable-b", "quorate": true});
        assert_eq!(
            cluster_events("cronstable-a", &mut s, &follow),
            ["follows cronstable-b", "has a quorum"]
        );
    }

    #[test]
    fn the_event_feed_prints_unusual_skips_and_failed_runs_once() {
        let mut s = Seen::default();
        let body = |reason: &str, at: i64, exit: i64| {
            json!({"jobs": [{
                "name": "backup",
                "lastDecision": {"verdict": "skip", "reason": reason, "scheduledAtMs": at,
                                 "attempt": 1, "scheduledAt": "t"},
                "lastRun": {"exitCode": exit, "signal": null, "timedOut": false,
                            "scheduledAtMs": at - 1000, "attempt": 1},
            }]})
        };
        let first = job_events(&mut s, &body("no_quorum", 2_000, 3));
        assert_eq!(first.len(), 2, "{first:?}");
        assert!(first[0].contains("backup") && first[0].contains("no_quorum"));
        assert!(first[1].contains("FAILED (exit 3"));
        assert!(job_events(&mut s, &body("no_quorum", 2_000, 3)).is_empty());
        // Another node leading is routine; a successful run is not an event.
        assert!(job_events(&mut s, &body("not_leader", 3_000, 0)).is_empty());
    }
}
