//! The cronstable coordinator: a sidecar that holds the cluster view and decides, for every
//! firing, whether this node runs it.
//!
//! The binary (`cronstable`) parses arguments and calls [`run`] with a loaded [`config::Config`],
//! bound [`listeners::Listeners`], the process [`Environment`] it read, and a shutdown future.
//! Nothing in this library reads environment variables or exits the process: a `fromEnvVar`
//! secret and the Kubernetes in-cluster address are looked up in the [`Environment`] passed in.
//!
//! # Layout
//!
//! - [`config`]: the YAML config, typed and validated (`validate-config`).
//! - [`cluster`]: the [`cluster::ClusterView`] every decision reads, and the backend seam.
//! - [`status`]: the `GET /cluster` status blocks the backends publish with the view.
//! - [`gossip`]: the gossip backend: mTLS `/peer` attestation and the quorum-gated election.
//! - [`lease`]: the fenced lease backends (etcd, Kubernetes, filesystem) behind one driver.
//! - [`jobs`]: the job set executors registered, and its job-set ID.
//! - [`ledger`]: per-job records of decisions and runs; [`ledger_file`] keeps them on disk.
//! - [`metrics`]: the Prometheus series of `GET /metrics`.
//! - [`events`]: leadership and quorum edges, counted and sent to [`notify`]'s webhook.
//! - [`state`]: the handles the request handlers share.
//! - [`summary`]: the per-job run summary a node shows the fleet.
//! - [`grpc`]: the `cronstable.v1.Executor` service.
//! - [`web`]: the HTTP API.
//! - [`listeners`]: binding `api.listen` and `web.listen`.
//! - [`verify`]: `cronstable verify`, the schedule checker over run logs.
//! - [`demo`]: the `cronstable demo` quick start.

pub mod clock;
pub mod cluster;
pub mod config;
pub mod deferred;
pub mod demo;
pub mod events;
pub mod gossip;
pub mod grpc;
pub mod jobs;
pub mod lease;
pub mod ledger;
pub mod ledger_etcd;
pub mod ledger_file;
pub mod listeners;
pub mod metrics;
pub mod next_fire;
pub mod notify;
pub mod reboot_ran;
pub mod state;
pub mod status;
pub mod summary;
pub mod verify;
pub mod web;

use std::future::Future;

use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

use crate::cluster::{BackendContext, ClusterBackend, ElectionOffBackend};
use crate::config::Config;
use crate::config::cluster::Backend;
use crate::gossip::{GossipBackend, GossipSettings};
use crate::listeners::{ApiListener, Listeners};
use crate::state::CoordinatorState;

/// How long shutdown waits for in-flight requests.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The process environment as the binary read it. The library consults it (`fromEnvVar`
/// secrets, the in-cluster Kubernetes service address) but never reads the environment itself,
/// so tests and embedders decide exactly what it sees.
#[derive(Debug, Clone, Default)]
pub struct Environment(std::sync::Arc<std::collections::BTreeMap<String, String>>);

impl Environment {
    /// An environment holding `vars` (the binary passes `std::env::vars()`).
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        Self(std::sync::Arc::new(vars.into_iter().collect()))
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<String> {
        self.0.get(key).cloned()
    }
}

/// Resolves once `rx` says stop (`true`), or when its sender is gone, which also means stop.
pub(crate) async fn stop_requested(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Why the coordinator could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The configured cluster backend is not part of this build.
    #[error(
        "cluster.backend {0} is not available in this build of cronstable yet; remove the \
         cluster section to run with election off"
    )]
    BackendUnavailable(String),
    /// The gRPC server failed.
    #[error("the gRPC server on api.listen failed: {0}")]
    Grpc(#[from] tonic::transport::Error),
    /// A server stopped although no shutdown was requested.
    #[error("the {0} server stopped on its own")]
    ServerExited(&'static str),
    /// A server task panicked.
    #[error("the {0} server task panicked: {1}")]
    ServerPanicked(&'static str, String),
    /// The jobs of the config's `jobs:` file could not be registered.
    #[error("the job file named in the config (jobs:) cannot be registered: {0}")]
    ConfigJobs(#[from] crate::jobs::RegisterError),
    /// The HTTP server failed.
    #[error("the HTTP server on web.listen failed: {0}")]
    Web(#[source] std::io::Error),
    /// `state.path` could not be read or written.
    #[error(transparent)]
    State(ledger_file::LedgerFileError),
    /// `state.store: etcd` cannot be used (its TLS files or password do not work).
    #[error(transparent)]
    StateEtcd(ledger_etcd::LedgerEtcdError),
    /// `web.authToken` could not be resolved (an unset variable, an unreadable or empty file).
    #[error("web.authToken: {0}")]
    AuthToken(#[source] config::SecretError),
}

/// Picks the backend for `config`. Without a cluster section every node runs every job.
fn backend_for(
    config: &Config,
    node_name: &str,
    env: &Environment,
    reboot_store: Option<std::sync::Arc<lease::reboot_store::RebootStore>>,
) -> Result<Box<dyn ClusterBackend>, RunError> {
    match &config.cluster {
        None => Ok(Box::new(ElectionOffBackend::new(node_name))),
        Some(cluster) if cluster.backend == Backend::Gossip => Ok(Box::new(GossipBackend::new(
            GossipSettings::from_config(cluster),
            node_name,
        ))),
        Some(cluster) => lease::backend_for(cluster, node_name, env, reboot_store)
            .ok_or_else(|| RunError::BackendUnavailable(cluster.backend.to_string())),
    }
}

/// Runs a coordinator until `shutdown` resolves, then stops accepting requests, lets in-flight
/// ones finish and returns.
pub async fn run(
    config: Config,
    node_name: String,
    env: Environment,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    // The @reboot records' own store client, shared by the lease driver's rounds and the gate's
    // write-before-RUN (etcd and filesystem).
    let reboot_store = config
        .cluster
        .as_ref()
        .and_then(|c| lease::reboot_store::RebootStore::for_cluster(c, &node_name, &env));
    let backend = backend_for(&config, &node_name, &env, reboot_store.clone())?;
    let auth_token = match &config.web.auth_token {
        Some(source) => Some(web::AuthToken::new(
            &source
                .resolve(&|k| env.get(k), &|f| std::fs::read_to_string(f))
                .map_err(RunError::AuthToken)?,
        )),
        None => None,
    };
    // With a cluster section the node starts in Election::Starting, never election-off: until
    // its backend publishes a first view it does not know enough to act.
    let (view_tx, view_rx) = watch::channel(backend.initial_view());
    let notifier = config.notify.webhook.clone().map(notify::Notifier::start);
    let handoffs = config
        .cluster
        .as_ref()
        .and_then(|c| lease::handoff::Handoffs::for_cluster(c, &node_name, &env));
    let state = CoordinatorState::new(view_rx.clone())
        .with_notifier(notifier.clone())
        .with_handoffs(handoffs.clone())
        .with_reboot_store(reboot_store);
    if let Some(dir) = &config.state.path {
        ledger_file::open(dir, &node_name, &state.ledger).map_err(RunError::State)?;
    }
    if config.state.store == config::StateStore::Etcd
        && let Some(etcd) = config.cluster.as_ref().and_then(|c| c.etcd.as_ref())
    {
        let password = match &etcd.password {
            Some(p) => Some(
                p.resolve(&|k| env.get(k), &|f| std::fs::read_to_string(f))
                    .map_err(|e| {
                        RunError::StateEtcd(ledger_etcd::LedgerEtcdError::Settings(format!(
                            "cluster.etcd.password: {e}"
                        )))
                    })?,
            ),
            None => None,
        };
        ledger_etcd::open(etcd, password, &node_name, &state.ledger)
            .await
            .map_err(RunError::StateEtcd)?;
    }
    if let Some(jobs) = &config.jobs {
        // Registered before the backend starts, so the first job-set ID peers see covers them.
        let set = state
            .registry
            .register(&jobs.executor_id(), jobs.specs.clone())?;
        tracing::info!(
            file = %jobs.path.display(),
            jobs = jobs.specs.len(),
            job_set_id = %set.id,
            "registered the config's job file"
        );
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || stop_requested(stop_rx.clone());

    tracing::info!(
        node = node_name,
        backend = backend.name(),
        api = listeners.api.url(),
        web = %listeners.web_addr().map(|a| a.to_string()).unwrap_or_default(),
        "coordinator listening"
    );
    let roles_task = tokio::spawn(events::watch_roles(
        view_rx,
        state.metrics.clone(),
        notifier,
        stopped(),
    ));
    // Tells executors when a deferred @reboot one-shot may be decided (Watch RunDeferred).
    let deferred_task = tokio::spawn(deferred::push_when_ready(state.clone(), stopped()));
    let backend_task = tokio::spawn(backend.run(BackendContext {
        reboot_ran: state.reboot_ran.clone(),
        view: view_tx,
        job_set: state.registry.subscribe(),
        ledger: state.ledger.clone(),
        shutdown: Box::pin(stopped()),
    }));

    // The lease holder resumes retry sequences other nodes handed off (RTY-04).
    let handoff_task =
        handoffs.map(|h| tokio::spawn(lease::handoff_resume::run(h, state.clone(), stopped())));

    // HTTP/2 pings find executors whose host vanished, so their Watch streams end.
    let grpc = Server::builder()
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(10)))
        .http2_keepalive_timeout(Some(std::time::Duration::from_secs(5)))
        // HTTP/2's default 64 KiB windows hold about 750 ShouldRun requests: a shim with more
        // jobs due at one instant would otherwise wait a round trip for a WINDOW_UPDATE per
        // window, on a loaded machine long enough to miss its deadline.
        .initial_connection_window_size(Some(1 << 20))
        .initial_stream_window_size(Some(1 << 20))
        .add_service(grpc::service(state.clone()));
    let mut grpc_task = match listeners.api {
        ApiListener::Tcp(l) => {
            // tonic ignores the builder's nodelay for custom incoming streams; without it unary
            // calls hit 40 ms delayed-ACK stalls (measured, dependencies.md).
            let incoming = TcpIncoming::from(l).with_nodelay(Some(true));
            tokio::spawn(grpc.serve_with_incoming_shutdown(incoming, stopped()))
        }
        ApiListener::Unix(l, _) => {
            let incoming = UnixListenerStream::new(l);
            tokio::spawn(grpc.serve_with_incoming_shutdown(incoming, stopped()))
        }
    };
    let mut web_task = tokio::spawn(
        axum::serve(listeners.web, web::router(state.clone(), auth_token))
            .with_graceful_shutdown(stopped())
            .into_future(),
    );

    // A server that dies on its own must not leave a coordinator that serves nothing: treat it
    // like a shutdown request and report why.
    let mut failed = None;
    tokio::select! {
        () = shutdown => {}
        r = &mut grpc_task => failed = Some(("gRPC", r.map(|r| r.map_err(RunError::Grpc)))),
        r = &mut web_task => failed = Some(("HTTP", r.map(|r| r.map_err(RunError::Web)))),
    }
    if let Some((which, result)) = failed {
        let _ = stop_tx.send(true);
        deferred_task.abort();
        if let Some(t) = &handoff_task {
            t.abort();
        }
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, backend_task).await;
        return match result {
            Ok(Err(e)) => Err(e),
            Ok(Ok(())) => Err(RunError::ServerExited(which)),
            Err(e) => Err(RunError::ServerPanicked(which, e.to_string())),
        };
    }
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    state.close_watches();
    // Every wait has a bound: a client that keeps a connection open cannot hold up the exit.
    let grpc_result = tokio::time::timeout(DRAIN_TIMEOUT, grpc_task).await;
    let web_result = tokio::time::timeout(DRAIN_TIMEOUT, web_task).await;
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, backend_task).await;
    roles_task.abort();
    deferred_task.abort();
    if let Some(t) = handoff_task {
        t.abort();
    }
    match grpc_result {
        Ok(Ok(Err(e))) => return Err(RunError::Grpc(e)),
        Ok(Err(e)) => tracing::error!(error = %e, "gRPC server task panicked"),
        Err(_) => tracing::warn!("gRPC connections still open after the drain timeout"),
        Ok(Ok(Ok(()))) => {}
    }
    match web_result {
        Ok(Ok(Err(e))) => return Err(RunError::Web(e)),
        Ok(Err(e)) => tracing::error!(error = %e, "HTTP server task panicked"),
        Err(_) => tracing::warn!("HTTP connections still open after the drain timeout"),
        Ok(Ok(Ok(()))) => {}
    }
    tracing::info!("coordinator stopped");
    Ok(())
}
