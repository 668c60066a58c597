//! `cronstable demo`: the quick start. Starts a coordinator and an executor shim on loopback
//! with an example crontab, one job of each clusterPolicy, and logs every firing, decision and
//! run as it happens. Everything is real (gRPC over a socket, `/bin/sh` processes); nothing
//! outside the machine is needed.
//!
//! By default it runs a local three-node gossip cluster instead ([`cluster`]); `--nodes 1`
//! runs the single node described here.

pub mod cluster;

use std::future::Future;
use std::time::Duration;

use anyhow::Context;
use cronstable_shim::schedule::source::JobSource;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::Config;
use crate::listeners::{ApiListener, Listeners};

/// Options of `cronstable demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<u64>,
    /// Where the coordinator's HTTP API listens (falls back to a free port if taken). In a
    /// cluster demo this is the first node's; the others count up from its port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub web_listen: String,
    /// How many nodes: 3 or more runs a local gossip cluster (each node a coordinator and a
    /// shim, over real mTLS with a throwaway CA); 1 runs a single node with election off.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub nodes: usize,
    /// Log every node's routine INFO lines too (by default only warnings and errors, each
    /// naming its node, beside the demo's own view and events). `RUST_LOG` overrides both.
    #[arg(long, short)]
    pub verbose: bool,
    /// Spread the cluster's Leader and PreferLeader jobs across the nodes
    /// (`distribution: spread`, each job owned by one node), with a larger job set, and show
    /// which node owns which job as nodes stop and return.
    #[arg(long)]
    pub spread: bool,
}

/// The span a demo node's tasks run in, so that every line they log names the node. At ERROR
/// level so that it is enabled whatever the filter lets through: a span the filter turns off
/// would drop the node's name from the lines that do pass.
pub fn node_span(name: &str) -> tracing::Span {
    tracing::error_span!("node", node = %name)
}

/// The demo's crontab: one job of each policy, two of them on a seconds schedule so something
/// happens right away.
pub const DEMO_CRONTAB: &str = r#"# The cronstable demo crontab. Annotations name each job and set its clusterPolicy.
GREETING=hello from cronstable

# cronstable: name=tick-leader-only clusterPolicy=Leader seconds=true
*/5 * * * * * echo "$CRONSTABLE_JOB ran for $CRONSTABLE_SCHEDULED_AT (attempt $CRONSTABLE_ATTEMPT)"

# cronstable: name=tick-prefer-leader clusterPolicy=PreferLeader seconds=true
*/7 * * * * * echo "$CRONSTABLE_JOB ran for $CRONSTABLE_SCHEDULED_AT"

# cronstable: name=tick-every-node clusterPolicy=EveryNode
* * * * * echo "$GREETING: $CRONSTABLE_JOB, firing $CRONSTABLE_FIRING_ID"

# cronstable: name=hello-at-boot clusterPolicy=EveryNode
@reboot echo "$CRONSTABLE_JOB: the shim started"
"#;

/// Resolves after `seconds`, or never without a limit (`--duration`).
async fn run_for(seconds: Option<u64>) {
    match seconds {
        Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
        None => std::future::pending().await,
    }
}

/// Runs the demo until `shutdown` resolves or the duration passes. Its crontab goes into a
/// fresh directory under `scratch` (the binary passes the system temp dir).
pub async fn run(
    args: DemoArgs,
    scratch: &std::path::Path,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    if args.nodes != 1 {
        return cluster::run(args, scratch, shutdown).await;
    }
    anyhow::ensure!(
        !args.spread,
        "--spread needs a cluster: run it with --nodes 3 or more (the default)"
    );
    let dir = scratch.join(format!("cronstable-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let crontab = dir.join("crontab");
    std::fs::write(&crontab, DEMO_CRONTAB)
        .with_context(|| format!("writing {}", crontab.display()))?;

    let api = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the demo's gRPC port")?;
    let web = match TcpListener::bind(&args.web_listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{} is not free ({e}); using another port", args.web_listen);
            TcpListener::bind("127.0.0.1:0")
                .await
                .context("binding the demo's HTTP port")?
        }
    };
    let listeners = Listeners {
        api: ApiListener::Tcp(api),
        web,
    };
    let api_url = listeners.api.url();
    let web_addr = listeners.web_addr()?;
    println!("cronstable demo: one coordinator and one executor shim on this machine");
    println!("  crontab      {}", crontab.display());
    println!("  gRPC API     {api_url}");
    println!(
        "  HTTP API     http://{web_addr}/job-set-id   (try: curl -X POST http://{web_addr}/jobs/tick-leader-only/start)"
    );
    println!("  every firing is decided by the coordinator; watch the log below (Ctrl-C stops)\n");

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || crate::stop_requested(stop_rx.clone());
    let span = node_span("demo-node");
    let coordinator = crate::spawn(tracing::Instrument::instrument(
        crate::run(
            Config::default(),
            "demo-node".into(),
            crate::Environment::default(),
            listeners,
            // The demo's coordinator and shim stop together: nothing to tell about a next start.
            {
                let stop = stopped();
                async move {
                    stop.await;
                    crate::Stop::default()
                }
            },
            // The demo reloads nothing: a closed channel.
            tokio::sync::mpsc::channel(1).1,
        ),
        span.clone(),
    ));
    let mut shim_config = cronstable_shim::ShimConfig::new(JobSource::Crontab(crontab), api_url);
    shim_config.executor_id = "demo-shim".into();
    let (_reload_tx, reload_rx) = tokio::sync::mpsc::channel(1);
    let shim = crate::spawn(tracing::Instrument::instrument(
        cronstable_shim::run(shim_config, stopped(), reload_rx),
        span,
    ));

    tokio::select! {
        _ = shutdown => {}
        () = run_for(args.duration) => {}
    }
    let _ = stop_tx.send(true);
    shim.await.context("the shim task failed")??;
    coordinator.await.context("the coordinator task failed")??;
    let _ = std::fs::remove_dir_all(&dir);
    println!("cronstable demo stopped");
    Ok(())
}
