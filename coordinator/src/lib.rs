//! The cronstable coordinator: a sidecar that holds the cluster view and decides, for every
//! firing, whether this node runs it.
//!
//! The binary (`cronstable`) parses arguments and calls [`run`] with a loaded [`config::Config`],
//! bound [`listeners::Listeners`], the process [`Environment`] it read, a shutdown future, and
//! the receiving end of a channel of reloaded configs (the binary sends one per SIGHUP).
//! Nothing in this library reads environment variables or exits the process: a `fromEnvVar`
//! secret and the Kubernetes in-cluster address are looked up in the [`Environment`] passed in.
//!
//! # Layout
//!
//! - [`config`]: the YAML config, typed and validated (`validate-config`).
//! - [`cluster`]: the [`cluster::ClusterView`] every decision reads, and the backend seam.
//! - [`status`]: the `GET /cluster` status blocks the backends publish with the view.
//! - [`gossip`]: the gossip backend: mTLS `/peer` attestation and the quorum-gated election.
//! - [`lease`]: the fenced lease election behind one driver (the [`lease::LeaseStore`] seam,
//!   its conformance suite and in-memory store), with the `@reboot` records that live in the
//!   same stores and are read and written on its rounds.
//! - [`handoff`]: retry handoff on the lease backends (the [`handoff::HandoffStore`] seam, its
//!   bound, its suite, and the lease holder's resume task).
//! - [`store`]: one folder per shared store (etcd, filesystem, Kubernetes), each implementing
//!   every aspect kept in it and owning its connection, credentials, fake and tests.
//! - [`jobs`]: the job set executors registered, and its job-set ID.
//! - [`executors`]: which live process holds each executor id (one executor per job per node).
//! - [`liveness`]: whether this node's executors keep asking about their Leader jobs' firings;
//!   a lease holder whose executor is wedged or gone gives its lease up.
//! - [`catch_up`]: on the lease stores, the owner's offers of missed instants of Leader jobs
//!   with `catchUp` (nobody claimed them), and the count of those given up.
//! - [`reboot`]: this node's `@reboot` bookkeeping: the one-shots its executors ran, for the
//!   backend to share, and the deferred ones with their `RunDeferred` push.
//! - [`ledger`]: per-job records of decisions and runs, their one record format
//!   ([`ledger::codec`]) and the [`ledger::LedgerStore`] that keeps them beyond the process
//!   ([`ledger::file`] on disk, [`store::etcd::ledger`] in etcd; [`store::ledger_for`] picks).
//! - [`observe`]: what the node shows about itself: the Prometheus series of `GET /metrics`,
//!   leadership and quorum edges sent to the `notify:` webhook, and the per-job run summaries
//!   with their next fire.
//! - [`state`]: the handles the request handlers share, and the gate: one firing from the view
//!   to the answer ([`state::CoordinatorState::should_run`]).
//! - [`reload`]: applying a reloaded config to a running coordinator; owns the backend.
//! - [`clock`]: the one wall-clock read, and [`clock::Now`], one reading of both clocks.
//! - [`grpc`]: the `cronstable.v1.Executor` service; the only code that sees prost types.
//! - [`web`]: the HTTP API and dashboard; the only code that sees axum types.
//! - [`token`]: the bearer tokens of both APIs (`api.authToken`, `web.authToken`).
//! - [`listeners`]: binding `api.listen` and `web.listen`.
//! - [`verify`]: `cronstable verify`, the schedule checker over run logs.
//! - [`demo`]: the `cronstable demo` quick start.

pub mod catch_up;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod demo;
pub mod executors;
pub mod gate;
pub mod gossip;
pub mod grpc;
pub mod handoff;
pub mod jobs;
pub mod lease;
pub mod ledger;
pub mod listeners;
pub mod liveness;
pub mod observe;
pub mod reboot;
pub mod reload;
pub mod state;
pub mod status;
pub mod store;
pub mod token;
pub mod verify;
pub mod web;

use std::future::Future;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

use crate::config::Config;
use crate::listeners::{ApiListener, Listeners};
use crate::state::CoordinatorState;

/// `tokio::spawn` that carries the caller's tracing span into the task. tokio does not: without
/// it, a task's log lines lose the context they were started in. It matters where several nodes
/// share one process (`cronstable demo`, in-process tests): each node's tasks run under a
/// `node` span, and every line they log names its node.
pub fn spawn<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(tracing::Instrument::in_current_span(future))
}

/// How long shutdown waits for in-flight requests.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long shutdown waits for the supervisor to stop the backend: the backend's own stop
/// bound plus the wait for an aborted task ([`reload::stop_budget`], 16–26 s with default
/// settings), inside the shipped unit's `TimeoutStopSec=45`.
const SUPERVISOR_STOP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(40);

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
    /// The run ledger's store cannot be used: `state.path` cannot be read or written, or
    /// `state.store: etcd`'s TLS files or password do not work.
    #[error(transparent)]
    Ledger(ledger::LedgerStoreError),
    /// `web.authToken` could not be resolved (an unset variable, an unreadable or empty file).
    #[error("web.authToken: {0}")]
    AuthToken(#[source] config::SecretError),
    /// `api.authToken` could not be resolved.
    #[error("api.authToken: {0}")]
    ApiToken(#[source] config::SecretError),
    /// `notify.webhook.signingKey` could not be resolved or is too short.
    #[error("notify.webhook.signingKey: {0}")]
    WebhookKey(#[source] observe::signing::KeyError),
}

/// How a coordinator was told to stop, and what it knows of its next start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stop {
    /// The election mode of the config the process will start with again (the binary reads
    /// its config file once more when told to stop); `None` when it cannot tell. Executors are
    /// told to keep remembering "election off" while the coordinator is away only when this
    /// keeps it off: a node being moved into a cluster must not leave its executors running
    /// Leader jobs beside the elected leader while its new config fails to start.
    pub next_mode: Option<cronstable_core::mode::ElectionMode>,
}

/// Runs a coordinator until `shutdown` resolves, then stops accepting requests, lets in-flight
/// ones finish and returns.
///
/// Each config received on `reloads` (already loaded and validated by the caller: the binary
/// sends one per SIGHUP) is applied while the coordinator runs, as [`reload`] describes; a
/// closed `reloads` only means no more reloads.
pub async fn run(
    config: Config,
    node_name: String,
    env: Environment,
    listeners: Listeners,
    shutdown: impl Future<Output = Stop> + Send + 'static,
    reloads: mpsc::Receiver<reload::Reload>,
) -> Result<(), RunError> {
    // The backend, and the stores built from the same cluster section: the @reboot records'
    // own store client, shared by the lease driver's rounds and the gate's write-before-RUN
    // (etcd and filesystem), and the retry-handoff store (lease backends).
    let manager = reload::Manager::build(config.cluster.as_ref(), &node_name, &env)?;
    let auth_token =
        reload::resolve_token(config.web.auth_token.as_ref(), &env).map_err(RunError::AuthToken)?;
    let api_token =
        reload::resolve_token(config.api.auth_token.as_ref(), &env).map_err(RunError::ApiToken)?;
    // With a cluster section the node starts in Election::Starting, never election-off: until
    // its backend publishes a first view it does not know enough to act.
    let (view_tx, view_rx) = watch::channel(manager.backend.initial_view());
    let notifier = match &config.notify.webhook {
        Some(hook) => {
            let key = observe::signing::resolve(hook.signing_key.as_ref(), &env)
                .map_err(RunError::WebhookKey)?;
            Some(observe::notify::Notifier::start(hook.clone(), key))
        }
        None => None,
    };
    // The OS process's start (the standard process_start_time_seconds); a library caller
    // running several coordinators in one process shares it, each with its own instance id.
    let started_at = observe::process::os_start_ms().unwrap_or_else(clock::now_ms);
    let process = observe::process::ProcessInfo::started(started_at)
        .with_restarts(count_restarts(&config, &node_name));
    tracing::info!(
        instance_id = process.instance_id,
        restarts = process.restarts,
        "coordinator started"
    );
    let mesh = fleet_mesh(&config);
    let (state, live_tx) = CoordinatorState::new(view_rx.clone())
        .with_process(process)
        .with_fleet_mesh(mesh.as_ref().map(|(_, _, rx)| rx.clone()))
        .with_notifier(notifier)
        .with_statsd(config.statsd.clone())
        .with_handoffs(manager.handoffs.clone())
        .with_records_store(manager.records_store.clone())
        .with_certificates(config.cluster.as_ref())
        .reloadable();
    load_history_and_jobs(&config, &env, &node_name, &state).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = {
        let stop_rx = stop_rx.clone();
        move || stop_requested(stop_rx.clone())
    };
    let (tokens_tx, tokens_rx) = watch::channel(auth_token.map(std::sync::Arc::new));
    let (api_tokens_tx, api_tokens_rx) = watch::channel(api_token.map(std::sync::Arc::new));

    log_listening(&node_name, manager.backend.name(), &listeners);
    let background = Background::spawn(&state, view_rx, mesh, &node_name, &stopped);
    // The supervisor owns the backend (and the lease holder's handoff resume task, RTY-04)
    // and applies reloads; it stops the backend when the coordinator stops.
    let mut supervisor = reload::Supervisor::new(
        config,
        node_name,
        env,
        state.clone(),
        view_tx,
        live_tx,
        token::TokenWriters {
            web: tokens_tx,
            api: api_tokens_tx,
        },
        stop_rx,
    );
    supervisor.start(manager.backend, manager.handoffs);
    let supervisor_task = crate::spawn(supervisor.run(reloads));

    let mut grpc_task = serve_grpc(listeners.api, &state, api_tokens_rx, stopped());
    let mut web_task = crate::spawn(web::serve(
        listeners.web,
        state.clone(),
        tokens_rx,
        stopped(),
    ));

    // A server that dies on its own must not leave a coordinator that serves nothing: treat it
    // like a shutdown request and report why.
    let mut failed = None;
    let mut stop = Stop::default();
    tokio::select! {
        s = shutdown => stop = s,
        r = &mut grpc_task => failed = Some(("gRPC", r.map(|r| r.map_err(RunError::Grpc)))),
        r = &mut web_task => failed = Some(("HTTP", r.map(|r| r.map_err(RunError::Web)))),
    }
    say_goodbye(&state, stop.next_mode);
    if let Some((which, result)) = failed {
        let _ = stop_tx.send(true);
        state.close_watches();
        background.abort();
        let _ = tokio::time::timeout(SUPERVISOR_STOP_TIMEOUT, supervisor_task).await;
        return match result {
            Ok(Err(e)) => Err(e),
            Ok(Ok(())) => Err(RunError::ServerExited(which)),
            Err(e) => Err(RunError::ServerPanicked(which, e.to_string())),
        };
    }
    settle_launches(&state).await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    state.close_watches();
    // Every wait has a bound: a client that keeps a connection open cannot hold up the exit.
    let grpc_result = tokio::time::timeout(DRAIN_TIMEOUT, grpc_task).await;
    let web_result = tokio::time::timeout(DRAIN_TIMEOUT, web_task).await;
    let _ = tokio::time::timeout(SUPERVISOR_STOP_TIMEOUT, supervisor_task).await;
    background.stop().await;
    drained("gRPC", grpc_result, RunError::Grpc)?;
    drained("HTTP", web_result, RunError::Web)?;
    tracing::info!("coordinator stopped");
    Ok(())
}

/// The line that says where the coordinator serves.
fn log_listening(node_name: &str, backend: &str, listeners: &Listeners) {
    tracing::info!(
        node = node_name,
        backend,
        api = listeners.api.url(),
        web = %listeners.web_addr().map(|a| a.to_string()).unwrap_or_default(),
        "coordinator listening"
    );
}

/// Before anything stops: the farewell tells executors whether "election off" still holds
/// while this process is away (`next`: the mode of the config it will start with), and every
/// answer from now on carries the same stamp.
fn say_goodbye(state: &CoordinatorState, next: Option<cronstable_core::mode::ElectionMode>) {
    let farewell = state.say_goodbye(next);
    tracing::info!(
        election_mode = farewell.mode.as_str(),
        generation = farewell.generation,
        "told executors which election mode to remember while this coordinator is away"
    );
}

/// At a graceful stop, before the servers and the lease go: no firing is claimed any more (a
/// question now is answered DEFER, so no RUN is handed out that could not be handed back), and
/// the executors get a bounded moment
/// to report the launches this node answered RUN for just before (a shim stopped with this
/// coordinator hands its unlaunched RUN back, and its claim is given back while this node
/// still holds the lease; see [`lease::launches`]).
async fn settle_launches(state: &CoordinatorState) {
    state.stop_claiming().await;
    let due = state.launches.due_now(clock::now_ms());
    if due == 0 {
        return;
    }
    tracing::info!(
        due,
        "waiting for executors to launch or hand back the firings answered RUN just before this stop"
    );
    let left = state.launches.settle(lease::launches::STOP_WAIT).await;
    if left > 0 {
        tracing::warn!(
            left,
            "stopping with firings answered RUN whose launch was never reported: their claims stay"
        );
    }
}

/// The coordinator's tasks beside its servers and its backend.
struct Background {
    /// Leadership and quorum edges: metrics, one log line each, the webhook.
    roles: tokio::task::JoinHandle<()>,
    /// Tells executors when a deferred @reboot one-shot may be decided (Watch RunDeferred).
    deferred: tokio::task::JoinHandle<()>,
    /// Offers missed instants of jobs with catchUp to their executors (Watch CatchUpRun).
    catch_up: tokio::task::JoinHandle<()>,
    /// Judges the firings of jobs with `expect:` this node owns (observe::expectations).
    expectations: tokio::task::JoinHandle<()>,
    /// Whether this node's executors keep asking about their Leader jobs' firings; a lease
    /// holder whose executor falls behind gives its lease up (crate::liveness).
    pace: tokio::task::JoinHandle<()>,
    /// A lease backend's observability mesh, when configured.
    mesh: Option<tokio::task::JoinHandle<()>>,
}

/// The fleet mesh's settings and its publishing side.
type FleetMesh = (
    gossip::observability::MeshSettings,
    watch::Sender<std::sync::Arc<gossip::observability::MeshView>>,
    watch::Receiver<std::sync::Arc<gossip::observability::MeshView>>,
);

impl Background {
    fn spawn<F: Future<Output = ()> + Send + 'static>(
        state: &CoordinatorState,
        view: watch::Receiver<cluster::ClusterView>,
        mesh: Option<FleetMesh>,
        node_name: &str,
        stopped: &impl Fn() -> F,
    ) -> Self {
        let notifier = {
            // Asked at each edge: a reload's new webhook gets the edges after it.
            let state = state.clone();
            move || state.notifier()
        };
        let roles = observe::events::watch_roles(view, state.metrics.clone(), notifier, stopped());
        Self {
            roles: crate::spawn(roles),
            deferred: crate::spawn(reboot::deferred::push::push_when_ready(
                state.clone(),
                stopped(),
            )),
            catch_up: crate::spawn(catch_up::run(state.clone(), stopped())),
            expectations: crate::spawn(observe::expectations::run(state.clone(), stopped())),
            pace: crate::spawn(liveness::watch_pace(state.pace_inputs(), stopped())),
            mesh: mesh.map(|(settings, tx, _)| {
                crate::spawn(gossip::observability::run(
                    settings,
                    node_name.to_owned(),
                    state.registry.subscribe(),
                    state.ledger.clone(),
                    tx,
                    stopped(),
                ))
            }),
        }
    }

    /// After a server failed: no drain.
    fn abort(&self) {
        self.deferred.abort();
        self.catch_up.abort();
        self.expectations.abort();
        self.pace.abort();
        if let Some(t) = &self.mesh {
            t.abort();
        }
    }

    /// At shutdown, once the stop signal went out: the mesh stops its listener on it (a wedged
    /// one is aborted at the drain bound; its server stops when the task's stop sender is
    /// dropped); the others end here.
    async fn stop(self) {
        if let Some(mut t) = self.mesh
            && tokio::time::timeout(DRAIN_TIMEOUT, &mut t).await.is_err()
        {
            t.abort();
        }
        self.roles.abort();
        self.deferred.abort();
        self.catch_up.abort();
        self.expectations.abort();
        self.pace.abort();
    }
}

/// A lease backend's observability mesh, when configured: display only, so nothing but
/// `/fleet` reads it.
fn fleet_mesh(config: &Config) -> Option<FleetMesh> {
    let settings = config
        .cluster
        .as_ref()
        .filter(|c| c.backend != config::cluster::Backend::Gossip)
        .and_then(gossip::observability::MeshSettings::from_cluster)?;
    let (tx, rx) = watch::channel(std::sync::Arc::new(
        gossip::observability::MeshView::default(),
    ));
    Some((settings, tx, rx))
}

/// Loads the run ledger's history, when a store keeps it, and registers the config's job
/// file: before the backend starts, so the first job-set ID peers see covers its jobs.
async fn load_history_and_jobs(
    config: &Config,
    env: &Environment,
    node_name: &str,
    state: &CoordinatorState,
) -> Result<(), RunError> {
    if let Some(kept) = store::ledger_for(config, env) {
        kept.open(node_name, &state.ledger)
            .await
            .map_err(RunError::Ledger)?;
    }
    if let Some(jobs) = &config.jobs {
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
    Ok(())
}

/// Serves the executor API on `listener` until `stop` resolves.
fn serve_grpc(
    listener: ApiListener,
    state: &CoordinatorState,
    api_tokens: token::AuthTokens,
    stop: impl Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<Result<(), tonic::transport::Error>> {
    // HTTP/2 pings find executors whose host vanished, so their Watch streams end.
    // tonic serves each connection on a task of its own: hand it this node's span, so request
    // handlers' log lines name the node too (see [`spawn`]).
    let node_span = tracing::Span::current();
    let grpc = Server::builder()
        .trace_fn(move |_| node_span.clone())
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(10)))
        .http2_keepalive_timeout(Some(std::time::Duration::from_secs(5)))
        // HTTP/2's default 64 KiB windows hold about 750 ShouldRun requests: a shim with more
        // jobs due at one instant would otherwise wait a round trip for a WINDOW_UPDATE per
        // window, on a loaded machine long enough to miss its deadline.
        .initial_connection_window_size(Some(1 << 20))
        .initial_stream_window_size(Some(1 << 20))
        .add_service(grpc::service(state.clone(), api_tokens));
    match listener {
        ApiListener::Tcp(l) => {
            // tonic ignores the builder's nodelay for custom incoming streams; without it unary
            // calls hit 40 ms delayed-ACK stalls (measured, dependencies.md).
            let incoming = TcpIncoming::from(l).with_nodelay(Some(true));
            crate::spawn(grpc.serve_with_incoming_shutdown(incoming, stop))
        }
        ApiListener::Unix(l, _) => {
            let incoming = UnixListenerStream::new(l);
            crate::spawn(grpc.serve_with_incoming_shutdown(incoming, stop))
        }
    }
}

/// How a server's task ended within the drain bound: its own error is the coordinator's; a
/// panic or connections still open at the bound are logged.
fn drained<E: std::fmt::Display>(
    which: &str,
    result: Result<Result<Result<(), E>, tokio::task::JoinError>, tokio::time::error::Elapsed>,
    wrap: impl FnOnce(E) -> RunError,
) -> Result<(), RunError> {
    match result {
        Ok(Ok(Err(e))) => return Err(wrap(e)),
        Ok(Err(e)) => tracing::error!(error = %e, "{which} server task panicked"),
        Err(_) => tracing::warn!("{which} connections still open after the drain timeout"),
        Ok(Ok(Ok(()))) => {}
    }
    Ok(())
}

/// Counts this start in `state.path` (when the run ledger is kept there) and returns the
/// starts before it; `None` without `state.path`, or when it cannot be written (a WARN says
/// why: the coordinator still starts, and the ledger's own open reports an unusable path).
fn count_restarts(config: &Config, node_name: &str) -> Option<u64> {
    let dir = config.state.path.as_ref()?;
    match observe::process::count_start(dir, node_name) {
        Ok(counted) => {
            if let Some(aside) = &counted.set_aside {
                tracing::warn!(
                    file = %aside.display(),
                    "the restart count could not be read; it was set aside and counts from 0"
                );
            }
            Some(counted.restarts)
        }
        Err(e) => {
            tracing::warn!(error = %e, "restarts are not counted");
            None
        }
    }
}
