//! Applying a new config to a running coordinator, and owning the cluster manager meanwhile.
//!
//! The binary reads SIGHUP, loads and validates the config file again, and sends a good one
//! to [`crate::run`] over a channel; a file that does not validate never gets here, so the
//! running config stays. [`Supervisor`] is the task that owns what a reload may replace, and
//! the only one that replaces it:
//!
//! - `notify:`: a new webhook notifier; failed runs and role edges go to it from then on;
//! - `statsd:`: a new statsd sender (or none); the per-job figures go to it from then on;
//! - `web.authToken`, `api.authToken`: resolved again on every reload (a token file's bytes
//!   may be all that changed); the HTTP or gRPC API checks the new token from its next request. A secret that does not resolve
//!   keeps the token in force and logs why;
//! - `jobs:`: the file (already re-read by the loader) is registered again under its executor
//!   id, so `/jobs` and `/job-set-id` change; a removed `jobs:` key unregisters its jobs;
//! - `cluster:`: only when the parsed section differs, the manager is rebuilt (see
//!   [`Supervisor::rebuild`]): the old backend is stopped (a lease holder releases its lease,
//!   the gossip manager frees its listener) within a bound, the view goes back to the new
//!   backend's [`ClusterBackend::initial_view`] (a node that does not know yet does not act:
//!   the seed's convergence hold for a rebuilt manager, GSP-100), and the new backend and the
//!   store clients built from the section (@reboot records, retry handoffs) take over.
//!
//! [`ReloadKey`] lists every change a reload tells apart, each with its [`ReloadRule`]; README's
//! reload table is rendered from it. What cannot change under a running process (the
//! listeners, `state.*`, `cluster.nodeName`) is logged as a WARNING and otherwise ignored; it applies at the next
//! start.
//!
//! A reload can only narrow, never open ([`Changes::refused`]): turning election on or off,
//! removing `web.authToken` or `api.authToken`, or moving where the election happens (the backend, the store's
//! path, endpoints, lease or topology) refuses the whole reload with one ERROR line naming the keys, and
//! the running config stays. A half-written file that read as the defaults would otherwise
//! switch a cluster node to election off and drop its token; a node that moves to another
//! store must not lead on the new one while its peers still elect on the old. Such changes
//! need a restart. `cronstable_config_reloads_total{result}` counts applied and refused
//! reloads (refused also counts a file the binary could not use: empty, missing, invalid).
//!
//! The view's single-writer rule holds across a rebuild: the running backend is its only
//! writer; the supervisor writes the starting view only after the old backend's task has
//! ended (or was aborted and awaited), and before the new one is spawned.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::cluster::{BackendContext, ClusterBackend, ClusterView, Election};
use crate::config::cluster::ClusterConfig;
use crate::config::{Config, SecretError, SecretSource, StateStore};
use crate::handoff::Handoffs;
use crate::lease::records_store::RecordsStore;
use crate::observe::notify;
use crate::state::{CoordinatorState, LiveHandles};
use crate::token::{AuthToken, TokenWriters};
use crate::{Environment, RunError, handoff};

/// How long an aborted backend task may take to end before the stop counts as failed.
const ABORT_WAIT: Duration = Duration::from_secs(5);

/// How often a rebuild whose old manager did not end is tried again.
const REBUILD_RETRY: Duration = Duration::from_secs(5);

/// The longest a coordinator's clean stop takes with `backend` running: the backend's own
/// bound, then the wait for an aborted task. The shipped systemd unit's `TimeoutStopSec`
/// must cover it (README).
pub fn stop_budget(backend: &dyn ClusterBackend) -> Duration {
    backend.stop_bound() + ABORT_WAIT
}

/// How a reload treats a change to one [`ReloadKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadRule {
    /// Applied by the running process at once.
    Live,
    /// Refuses the whole reload with one ERROR naming the key; the running config stays.
    Refused,
    /// Logged as a WARNING and kept at its running value until the next start; the rest of
    /// the file applies.
    AtRestart,
}

impl ReloadRule {
    /// The README table's right-hand column.
    pub const fn readme(self) -> &'static str {
        match self {
            Self::Live => "applied live",
            Self::Refused => "**refused**: restart to apply",
            Self::AtRestart => "ignored with a WARNING until the next start (the rest applies)",
        }
    }
}

/// Every change a reload tells apart: README's reload table is rendered from this list
/// ([`readme_table`], held against README by a test), and the real-process test of the table
/// (`tests/tests/integration/reload_table.rs`) matches on it without a wildcard, so a key
/// cannot be added without its row and its test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReloadKey {
    /// `notify:`.
    Notify,
    /// `statsd:`.
    Statsd,
    /// `web.authToken`: a token added, or another value or source.
    WebAuthToken,
    /// `api.authToken`: a token added, or another value or source.
    ApiAuthToken,
    /// `jobs:`.
    Jobs,
    /// The cluster's tuning: every key of the section that no other row names.
    ClusterTuning,
    /// The `cluster` section added or removed.
    ClusterOnOff,
    /// `cluster.electLeader`.
    ElectLeader,
    /// `web.authToken` removed.
    WebAuthTokenRemoved,
    /// `api.authToken` removed.
    ApiAuthTokenRemoved,
    /// `cluster.backend`.
    Backend,
    /// `cluster.filesystem.path`.
    FilesystemPath,
    /// `cluster.filesystem.deploymentId`.
    FilesystemDeploymentId,
    /// `cluster.filesystem.electionName`.
    FilesystemElectionName,
    /// `cluster.filesystem.topology`: `single-node` drops the mount guard.
    FilesystemTopology,
    /// `cluster.etcd.endpoints`.
    EtcdEndpoints,
    /// `cluster.etcd.electionName`.
    EtcdElectionName,
    /// `cluster.kubernetes.leaseName`.
    KubernetesLeaseName,
    /// `cluster.kubernetes.leaseNamespace`.
    KubernetesLeaseNamespace,
    /// `api.listen`.
    ApiListen,
    /// `web.listen`.
    WebListen,
    /// `state.path`.
    StatePath,
    /// `state.store`.
    StateStore,
    /// `cluster.nodeName`.
    NodeName,
    /// `cluster.observability` on a lease backend.
    LeaseObservability,
    /// `cluster.etcd` while `state.store: etcd` keeps the run ledger there.
    EtcdLedger,
}

impl ReloadKey {
    /// Every key, in README's order.
    pub const ALL: [ReloadKey; 26] = [
        Self::Notify,
        Self::Statsd,
        Self::WebAuthToken,
        Self::ApiAuthToken,
        Self::Jobs,
        Self::ClusterTuning,
        Self::ClusterOnOff,
        Self::ElectLeader,
        Self::WebAuthTokenRemoved,
        Self::ApiAuthTokenRemoved,
        Self::Backend,
        Self::FilesystemPath,
        Self::FilesystemDeploymentId,
        Self::FilesystemElectionName,
        Self::FilesystemTopology,
        Self::EtcdEndpoints,
        Self::EtcdElectionName,
        Self::KubernetesLeaseName,
        Self::KubernetesLeaseNamespace,
        Self::ApiListen,
        Self::WebListen,
        Self::StatePath,
        Self::StateStore,
        Self::NodeName,
        Self::LeaseObservability,
        Self::EtcdLedger,
    ];

    /// The key as the reload's log lines name it (`changed=…`, `refused=…`, the WARNING).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Notify => "notify",
            Self::Statsd => "statsd",
            Self::WebAuthToken => "web.authToken",
            Self::ApiAuthToken => "api.authToken",
            Self::Jobs => "jobs",
            Self::ClusterTuning => "cluster",
            Self::ClusterOnOff => "cluster (election turned on or off)",
            Self::ElectLeader => "cluster.electLeader",
            Self::WebAuthTokenRemoved => "web.authToken (removed)",
            Self::ApiAuthTokenRemoved => "api.authToken (removed)",
            Self::Backend => "cluster.backend",
            Self::FilesystemPath => "cluster.filesystem.path",
            Self::FilesystemDeploymentId => "cluster.filesystem.deploymentId",
            Self::FilesystemElectionName => "cluster.filesystem.electionName",
            Self::FilesystemTopology => "cluster.filesystem.topology",
            Self::EtcdEndpoints => "cluster.etcd.endpoints",
            Self::EtcdElectionName => "cluster.etcd.electionName",
            Self::KubernetesLeaseName => "cluster.kubernetes.leaseName",
            Self::KubernetesLeaseNamespace => "cluster.kubernetes.leaseNamespace",
            Self::ApiListen => "api.listen",
            Self::WebListen => "web.listen",
            Self::StatePath => "state.path",
            Self::StateStore => "state.store",
            Self::NodeName => "cluster.nodeName",
            Self::LeaseObservability => {
                "cluster.observability (the lease backend's observability mesh)"
            }
            Self::EtcdLedger => "cluster.etcd (the run ledger of state.store: etcd)",
        }
    }

    /// What a reload does with a change to this key.
    pub const fn rule(self) -> ReloadRule {
        match self {
            Self::Notify
            | Self::Statsd
            | Self::WebAuthToken
            | Self::ApiAuthToken
            | Self::Jobs
            | Self::ClusterTuning => ReloadRule::Live,
            Self::ClusterOnOff
            | Self::ElectLeader
            | Self::WebAuthTokenRemoved
            | Self::ApiAuthTokenRemoved
            | Self::Backend
            | Self::FilesystemPath
            | Self::FilesystemDeploymentId
            | Self::FilesystemElectionName
            | Self::FilesystemTopology
            | Self::EtcdEndpoints
            | Self::EtcdElectionName
            | Self::KubernetesLeaseName
            | Self::KubernetesLeaseNamespace => ReloadRule::Refused,
            Self::ApiListen
            | Self::WebListen
            | Self::StatePath
            | Self::StateStore
            | Self::NodeName
            | Self::LeaseObservability
            | Self::EtcdLedger => ReloadRule::AtRestart,
        }
    }

    /// The README table's left-hand column: the change, as an operator makes it.
    pub const fn readme(self) -> &'static str {
        match self {
            Self::Notify => "`notify:` (the webhook)",
            Self::Statsd => "`statsd:`",
            Self::WebAuthToken => {
                "`web.authToken` added, or a new value or source (a token file's new bytes too)"
            }
            Self::ApiAuthToken => {
                "`api.authToken` added, or a new value or source (a token file's new bytes too)"
            }
            Self::Jobs => "`jobs:` (the key, the file's path, or the file's jobs)",
            Self::ClusterTuning => {
                "the cluster's tuning: every `cluster` key no other row names (`ttl`, \
                 `interval`, `peers`, `tls`, `distribution`, …); the manager is rebuilt"
            }
            Self::ClusterOnOff => "the `cluster` section added or removed (election on or off)",
            Self::ElectLeader => "`cluster.electLeader`",
            Self::WebAuthTokenRemoved => "`web.authToken` removed",
            Self::ApiAuthTokenRemoved => "`api.authToken` removed",
            Self::Backend => "`cluster.backend`",
            Self::FilesystemPath => "`cluster.filesystem.path`",
            Self::FilesystemDeploymentId => "`cluster.filesystem.deploymentId`",
            Self::FilesystemElectionName => "`cluster.filesystem.electionName`",
            Self::FilesystemTopology => {
                "`cluster.filesystem.topology` (`single-node` would drop the mount guard)"
            }
            Self::EtcdEndpoints => "`cluster.etcd.endpoints`",
            Self::EtcdElectionName => "`cluster.etcd.electionName`",
            Self::KubernetesLeaseName => "`cluster.kubernetes.leaseName`",
            Self::KubernetesLeaseNamespace => "`cluster.kubernetes.leaseNamespace`",
            Self::ApiListen => "`api.listen`",
            Self::WebListen => "`web.listen`",
            Self::StatePath => "`state.path`",
            Self::StateStore => "`state.store`",
            Self::NodeName => "`cluster.nodeName`",
            Self::LeaseObservability => {
                "`cluster.observability` on a lease backend (the display-only mesh)"
            }
            Self::EtcdLedger => {
                "`cluster.etcd` while `state.store: etcd` keeps the run ledger there \
                 (the ledger's client)"
            }
        }
    }
}

/// README's reload table, as [`ReloadKey::ALL`] defines it.
pub fn readme_table() -> String {
    let mut out = String::from("| change in the reloaded file | at a reload |\n|---|---|\n");
    for key in ReloadKey::ALL {
        out.push_str(&format!("| {} | {} |\n", key.readme(), key.rule().readme()));
    }
    out
}

/// One SIGHUP, as the binary read the config file.
#[derive(Debug)]
pub enum Reload {
    /// A file that loaded and validated.
    Config(Box<Config>),
    /// A file that could not be used (missing, empty, invalid): the binary logged why; the
    /// running config stays, and the reload is counted as refused.
    Unusable,
}

/// What differs between the running config and a reloaded one, by [`ReloadKey`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Changes of [`ReloadRule::Live`] keys. A token's source is listed only when it differs:
    /// the token itself is resolved again at every reload (a file's bytes may be all that
    /// changed).
    pub live: Vec<ReloadKey>,
    /// Changes of [`ReloadRule::AtRestart`] keys.
    pub restart_needed: Vec<ReloadKey>,
    /// Changes of [`ReloadRule::Refused`] keys (see the module docs): any of them refuses
    /// the whole reload.
    pub refused: Vec<ReloadKey>,
}

impl Changes {
    /// Whether `key` changed.
    pub fn has(&self, key: ReloadKey) -> bool {
        self.live.contains(&key)
            || self.restart_needed.contains(&key)
            || self.refused.contains(&key)
    }
}

/// The names of `keys`, comma-separated, as the log lines carry them.
fn names(keys: &[ReloadKey]) -> String {
    keys.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// The changes a reload refuses: each would let this node act where it did not, or drop a
/// guard, so each needs a restart.
fn door_openers(old: &Config, new: &Config) -> Vec<ReloadKey> {
    use ReloadKey as K;
    let mut out = Vec::new();
    if old.web.auth_token.is_some() && new.web.auth_token.is_none() {
        out.push(K::WebAuthTokenRemoved);
    }
    if old.api.auth_token.is_some() && new.api.auth_token.is_none() {
        out.push(K::ApiAuthTokenRemoved);
    }
    let (Some(o), Some(n)) = (old.cluster.as_ref(), new.cluster.as_ref()) else {
        if old.cluster.is_some() != new.cluster.is_some() {
            out.push(K::ClusterOnOff);
        }
        return out;
    };
    if o.backend != n.backend {
        out.push(K::Backend);
        return out;
    }
    if o.elect_leader != n.elect_leader {
        out.push(K::ElectLeader);
    }
    if let (Some(o), Some(n)) = (&o.filesystem, &n.filesystem) {
        if o.path != n.path {
            out.push(K::FilesystemPath);
        }
        if o.deployment_id != n.deployment_id {
            out.push(K::FilesystemDeploymentId);
        }
        if o.election_name != n.election_name {
            out.push(K::FilesystemElectionName);
        }
        if o.topology != n.topology {
            out.push(K::FilesystemTopology);
        }
    }
    if let (Some(o), Some(n)) = (&o.etcd, &n.etcd) {
        if o.endpoints != n.endpoints {
            out.push(K::EtcdEndpoints);
        }
        if o.election_name != n.election_name {
            out.push(K::EtcdElectionName);
        }
    }
    if let (Some(o), Some(n)) = (&o.kubernetes, &n.kubernetes) {
        if o.lease_name != n.lease_name {
            out.push(K::KubernetesLeaseName);
        }
        if o.lease_namespace != n.lease_namespace {
            out.push(K::KubernetesLeaseNamespace);
        }
    }
    out
}

/// Compares two configs section by section. Pure, so the rules are unit-tested.
pub fn changes(old: &Config, new: &Config) -> Changes {
    use ReloadKey as K;
    let mut restart_needed = Vec::new();
    if old.api.listen != new.api.listen {
        restart_needed.push(K::ApiListen);
    }
    if old.web.listen != new.web.listen {
        restart_needed.push(K::WebListen);
    }
    if old.state.path != new.state.path {
        restart_needed.push(K::StatePath);
    }
    if old.state.store != new.state.store {
        restart_needed.push(K::StateStore);
    }
    if node_name_of(old) != node_name_of(new) {
        restart_needed.push(K::NodeName);
    }
    // A lease backend's observability mesh runs for the process's life (its listener is bound
    // once); it is display only, so leaving the old one running is safe.
    let mesh = |c: &Config| {
        c.cluster
            .as_ref()
            .and_then(crate::gossip::observability::MeshSettings::from_cluster)
    };
    if mesh(old) != mesh(new) {
        restart_needed.push(K::LeaseObservability);
    }
    let etcd = |c: &Config| c.cluster.as_ref().and_then(|c| c.etcd.clone());
    // The run ledger opened its etcd client at start; a rebuilt manager does not reopen it.
    if old.state.store == StateStore::Etcd && etcd(old) != etcd(new) {
        restart_needed.push(K::EtcdLedger);
    }
    let live = [
        (K::Notify, old.notify != new.notify),
        (K::Statsd, old.statsd != new.statsd),
        (
            K::WebAuthToken,
            new.web.auth_token.is_some() && old.web.auth_token != new.web.auth_token,
        ),
        (
            K::ApiAuthToken,
            new.api.auth_token.is_some() && old.api.auth_token != new.api.auth_token,
        ),
        (K::Jobs, old.jobs != new.jobs),
        (
            K::ClusterTuning,
            election_part(old.cluster.as_ref()) != election_part(new.cluster.as_ref()),
        ),
    ]
    .into_iter()
    .filter_map(|(k, changed)| changed.then_some(k))
    .collect();
    Changes {
        live,
        restart_needed,
        refused: door_openers(old, new),
    }
}

fn node_name_of(c: &Config) -> Option<&str> {
    c.cluster.as_ref().and_then(|c| c.node_name.as_deref())
}

/// The section as compared: the node's name is fixed for the life of the process.
/// The part of a cluster section a rebuilt manager would change: all of it but `nodeName`
/// (restart only) and, on a lease backend, the observability mesh's keys
/// (`observability`, and `connectTimeout`, which only the mesh uses there): the mesh is not
/// the election, so a change to it must not restart the lease (it needs a restart of its own).
fn election_part(c: Option<&ClusterConfig>) -> Option<ClusterConfig> {
    c.map(|c| {
        let mut part = ClusterConfig {
            node_name: None,
            ..c.clone()
        };
        if c.backend != crate::config::cluster::Backend::Gossip {
            part.observability = None;
            part.connect_timeout = ClusterConfig::default().connect_timeout;
        }
        part
    })
}

/// The config a reload leaves in force: `new`, except the keys that need a restart, which
/// keep their running values (so the next reload compares against what really runs).
fn effective(old: &Config, mut new: Config) -> Config {
    new.api.listen = old.api.listen.clone();
    new.web.listen = old.web.listen.clone();
    new.state = old.state.clone();
    if let Some(c) = &mut new.cluster {
        c.node_name = node_name_of(old).map(str::to_owned);
        // A lease backend's observability mesh keeps running as it started.
        if let Some(o) = old.cluster.as_ref().filter(|o| o.backend == c.backend)
            && c.backend != crate::config::cluster::Backend::Gossip
        {
            c.observability = o.observability.clone();
            c.connect_timeout = o.connect_timeout;
        }
    }
    new
}

/// Resolves `web.authToken`'s or `api.authToken`'s source into the token its API checks.
pub fn resolve_token(
    source: Option<&SecretSource>,
    env: &Environment,
) -> Result<Option<AuthToken>, SecretError> {
    source
        .map(|s| {
            s.resolve(&|k| env.get(k), &|f| std::fs::read_to_string(f))
                .map(|t| AuthToken::new(&t))
        })
        .transpose()
}

/// A cluster section's backend and the store clients built from the same section.
pub(crate) struct Manager {
    /// The backend, not started yet.
    pub(crate) backend: Box<dyn ClusterBackend>,
    /// Its @reboot record store, on etcd and filesystem.
    pub(crate) records_store: Option<Arc<RecordsStore>>,
    /// Its retry-handoff store, on the lease backends.
    pub(crate) handoffs: Option<Handoffs>,
}

impl Manager {
    /// Builds (does not start) everything for `cluster`.
    pub(crate) fn build(
        cluster: Option<&ClusterConfig>,
        node_name: &str,
        env: &Environment,
    ) -> Result<Self, RunError> {
        use crate::config::cluster::Backend;
        use crate::gossip::{GossipBackend, GossipSettings};
        let alone = |backend: Box<dyn ClusterBackend>| Self {
            backend,
            records_store: None,
            handoffs: None,
        };
        match cluster {
            None => Ok(alone(Box::new(crate::cluster::ElectionOffBackend::new(
                node_name,
            )))),
            Some(c) if c.backend == Backend::Gossip => Ok(alone(Box::new(GossipBackend::new(
                GossipSettings::from_config(c),
                node_name,
            )))),
            Some(c) => {
                let stores = crate::store::for_cluster(c, node_name, env)
                    .ok_or_else(|| RunError::BackendUnavailable(c.backend.to_string()))?;
                Ok(Self {
                    backend: stores.backend,
                    records_store: stores.records_store,
                    handoffs: Some(stores.handoffs),
                })
            }
        }
    }
}

/// The running backend and the tasks that belong to it.
struct Running {
    name: &'static str,
    /// How long it may take to stop ([`ClusterBackend::stop_bound`]).
    stop_bound: Duration,
    /// Stops this backend alone (the coordinator's stop also stops it).
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    /// The lease holder's handoff resume task (RTY-04), bound to this backend's store.
    handoff_task: Option<JoinHandle<()>>,
}

/// Owns the reloadable parts of a running coordinator; see the module docs.
pub(crate) struct Supervisor {
    /// The config in force.
    config: Config,
    node_name: String,
    env: Environment,
    state: CoordinatorState,
    /// A handle on the view, written only while no backend runs.
    view: watch::Sender<ClusterView>,
    /// The only writer of the state's [`LiveHandles`].
    live: watch::Sender<Arc<LiveHandles>>,
    /// The only writer of the HTTP and gRPC APIs' tokens.
    tokens: TokenWriters,
    /// The webhook signing key the running notifier signs with, as last resolved: a reload
    /// reads the key again and restarts the notifier when it changed (a rotated key file).
    webhook_key: Option<crate::observe::signing::SigningKey>,
    /// The coordinator's stop.
    stop: watch::Receiver<bool>,
    running: Option<Running>,
    /// A rebuild whose old manager did not end in time: tried again every [`REBUILD_RETRY`]
    /// (the old manager's handle stays in `running` meanwhile).
    pending: Option<Pending>,
    /// [`ABORT_WAIT`] and [`REBUILD_RETRY`]; shorter in tests.
    abort_wait: Duration,
    retry_every: Duration,
}

/// A built manager waiting for the old one to end, and the section it is for.
struct Pending {
    manager: Manager,
    cluster: Option<ClusterConfig>,
}

/// The old cluster manager did not end within its bounds; a new one is not started beside it.
#[derive(Debug, thiserror::Error)]
#[error(
    "the old cluster manager ({0}) did not stop within its bound, nor end when aborted; the new \
     one is not started beside it, and the switch is retried every {retry:?}",
    retry = REBUILD_RETRY
)]
pub struct ManagerDidNotStop(&'static str);

impl Supervisor {
    /// A supervisor with no backend running yet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        config: Config,
        node_name: String,
        env: Environment,
        state: CoordinatorState,
        view: watch::Sender<ClusterView>,
        live: watch::Sender<Arc<LiveHandles>>,
        tokens: TokenWriters,
        stop: watch::Receiver<bool>,
    ) -> Self {
        let webhook_key = config
            .notify
            .webhook
            .as_ref()
            .and_then(|h| crate::observe::signing::resolve(h.signing_key.as_ref(), &env).ok())
            .flatten();
        Self {
            webhook_key,
            config,
            node_name,
            env,
            state,
            view,
            live,
            tokens,
            stop,
            running: None,
            pending: None,
            abort_wait: ABORT_WAIT,
            retry_every: REBUILD_RETRY,
        }
    }

    /// Spawns `backend` as the view's writer, and the handoff resume task over `handoffs`.
    pub(crate) fn start(&mut self, backend: Box<dyn ClusterBackend>, handoffs: Option<Handoffs>) {
        let (own_tx, own_rx) = watch::channel(false);
        let global = self.stop.clone();
        let name = backend.name();
        let stop_bound = backend.stop_bound();
        let task = crate::spawn(backend.run(BackendContext {
            reboot_ran: self.state.reboot_ran.clone(),
            view: self.view.clone(),
            job_set: self.state.registry.subscribe(),
            ledger: self.state.ledger.clone(),
            overdue: self.state.overdue(),
            shutdown: Box::pin(async move {
                tokio::select! {
                    () = crate::stop_requested(global) => {}
                    () = crate::stop_requested(own_rx) => {}
                }
            }),
        }));
        let handoff_task = handoffs.map(|h| {
            let own = own_tx.subscribe();
            let global = self.stop.clone();
            crate::spawn(handoff::resume::run(h, self.state.clone(), async move {
                tokio::select! {
                    () = crate::stop_requested(global) => {}
                    () = crate::stop_requested(own) => {}
                }
            }))
        });
        self.running = Some(Running {
            name,
            stop_bound,
            stop: own_tx,
            task,
            handoff_task,
        });
    }

    /// Stops the running backend, if any, within its bound: asked to stop, then aborted. When
    /// this returns `Ok` the backend's task has ended, so it writes the view no more. When the
    /// task is still alive after both bounds it may still write the view, so no other writer
    /// may start: its handle stays in `running` and this returns the error.
    async fn stop_running(&mut self) -> Result<(), ManagerDidNotStop> {
        let Some(mut running) = self.running.take() else {
            return Ok(());
        };
        let _ = running.stop.send(true);
        // The handoff task and the backend stop side by side, under the backend's bound.
        let bound = running.stop_bound;
        let handoff = async {
            if let Some(t) = running.handoff_task.as_mut()
                && tokio::time::timeout(bound, &mut *t).await.is_err()
            {
                t.abort();
            }
        };
        let (_, stopped) = tokio::join!(handoff, tokio::time::timeout(bound, &mut running.task));
        if stopped.is_ok() {
            return Ok(());
        }
        tracing::warn!(
            backend = running.name,
            "the cluster manager did not stop within {bound:?}; aborting it"
        );
        running.task.abort();
        if tokio::time::timeout(self.abort_wait, &mut running.task)
            .await
            .is_ok()
        {
            return Ok(());
        }
        let name = running.name;
        tracing::error!(
            backend = name,
            "the aborted cluster manager has not ended either; no other manager starts beside it"
        );
        self.running = Some(running);
        Err(ManagerDidNotStop(name))
    }

    /// Applies reloads until the coordinator stops, then stops the backend.
    pub(crate) async fn run(mut self, mut reloads: mpsc::Receiver<Reload>) {
        let mut open = true;
        loop {
            let retrying = self.pending.is_some();
            tokio::select! {
                // A stop wins over a queued reload: no manager is rebuilt while stopping.
                biased;
                () = crate::stop_requested(self.stop.clone()) => break,
                next = reloads.recv(), if open => match next {
                    Some(Reload::Config(config)) => self.apply(*config).await,
                    Some(Reload::Unusable) => self.state.metrics.reload("refused"),
                    // The binary dropped its sender: no more reloads, but keep running.
                    None => open = false,
                },
                () = tokio::time::sleep(self.retry_every), if retrying => self.retry_pending().await,
            }
        }
        let _ = self.stop_running().await;
    }

    /// Tries the pending switch again (the old manager may have ended by now).
    async fn retry_pending(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        match self.switch_to(p.manager, p.cluster.clone()).await {
            Ok(()) => {
                self.config.cluster = p.cluster;
                tracing::info!("config reload: cluster: applied on a retry");
            }
            Err(e) => tracing::error!("config reload: cluster: {e}"),
        }
    }

    /// Applies one validated config. Logs one WARNING per key that needs a restart, an ERROR
    /// for anything that could not be applied (the previous value stays), and one INFO line
    /// naming what changed.
    pub(crate) async fn apply(&mut self, new: Config) {
        let ch = changes(&self.config, &new);
        if !ch.refused.is_empty() {
            let refused = names(&ch.refused);
            tracing::error!(
                refused,
                "config reload refused: {refused} changed; a reload can only narrow what this \
                 node does, so this needs a restart; the running config stays"
            );
            self.state.metrics.reload("refused");
            return;
        }
        self.state.metrics.reload("applied");
        for key in &ch.restart_needed {
            tracing::warn!(
                "config reload: {} changed; restart the coordinator to apply it",
                key.name()
            );
        }
        let mut next = effective(&self.config, new);
        let mut applied: Vec<ReloadKey> = Vec::new();

        if Self::apply_token(
            "web.authToken",
            &mut next.web.auth_token,
            &self.config.web.auth_token,
            &self.tokens.web,
            &self.env,
        ) {
            applied.push(ReloadKey::WebAuthToken);
        }
        if Self::apply_token(
            "api.authToken",
            &mut next.api.auth_token,
            &self.config.api.auth_token,
            &self.tokens.api,
            &self.env,
        ) {
            applied.push(ReloadKey::ApiAuthToken);
        }

        if self.apply_notify(&mut next.notify, ch.has(ReloadKey::Notify)) {
            applied.push(ReloadKey::Notify);
        }

        if ch.has(ReloadKey::Statsd) {
            let metrics = self.state.metrics.clone();
            let statsd = next
                .statsd
                .clone()
                .map(|c| crate::observe::statsd::Statsd::start(c, metrics));
            self.live.send_modify(|l| {
                *l = Arc::new(LiveHandles {
                    statsd,
                    ..LiveHandles::clone(l)
                });
            });
            applied.push(ReloadKey::Statsd);
        }

        if ch.has(ReloadKey::Jobs) {
            match self.register_jobs(&next) {
                Ok(()) => applied.push(ReloadKey::Jobs),
                Err(e) => {
                    tracing::error!("config reload: jobs: {e}; the previous jobs stay registered");
                    next.jobs = self.config.jobs.clone();
                }
            }
        }

        let cluster = ch.has(ReloadKey::ClusterTuning);
        if !cluster && self.pending.take().is_some() {
            tracing::info!(
                "config reload: cluster: the section is back to the running one; the pending \
                 switch is dropped"
            );
        }
        if cluster {
            match self.rebuild(next.cluster.as_ref()).await {
                Ok(()) => applied.push(ReloadKey::ClusterTuning),
                Err(e) => {
                    tracing::error!(
                        "config reload: cluster: {e}; the running cluster manager stays"
                    );
                    next.cluster = self.config.cluster.clone();
                }
            }
        }

        self.config = next;
        if applied.is_empty() {
            let live: Vec<ReloadKey> = ReloadKey::ALL
                .into_iter()
                .filter(|k| k.rule() == ReloadRule::Live)
                .collect();
            tracing::info!(
                "config reloaded: nothing that applies live changed ({})",
                names(&live)
            );
        } else {
            tracing::info!(changed = names(&applied), "config reloaded");
        }
    }

    /// Resolves `key`'s `source` again and hands a changed token to `to`; true when it
    /// changed. A source that does not resolve keeps the previous token (and its source in
    /// `source`, so the next reload tries again).
    /// Starts a new notifier for `next` when `notify:` changed or its signing key did (the
    /// key is read again at every reload). A key that cannot be read keeps the running
    /// notifier and `notify:` as it was. Returns whether a new notifier runs.
    fn apply_notify(&mut self, next: &mut crate::config::NotifyConfig, changed: bool) -> bool {
        let resolved = next
            .webhook
            .as_ref()
            .map(|h| crate::observe::signing::resolve(h.signing_key.as_ref(), &self.env))
            .transpose();
        let key = match resolved {
            Ok(key) => key.flatten(),
            Err(e) => {
                tracing::error!(
                    "config reload: notify.webhook.signingKey: {e}; the running webhook stays \
                     in force"
                );
                next.clone_from(&self.config.notify);
                return false;
            }
        };
        if !changed && key == self.webhook_key {
            return false;
        }
        let notifier = next
            .webhook
            .clone()
            .map(|h| notify::Notifier::start(h, key.clone()));
        self.webhook_key = key;
        self.live.send_modify(|l| {
            *l = Arc::new(LiveHandles {
                notifier,
                ..LiveHandles::clone(l)
            });
        });
        true
    }

    fn apply_token(
        key: &str,
        source: &mut Option<SecretSource>,
        previous: &Option<SecretSource>,
        to: &watch::Sender<Option<Arc<AuthToken>>>,
        env: &Environment,
    ) -> bool {
        match resolve_token(source.as_ref(), env) {
            Ok(token) => {
                let token = token.map(Arc::new);
                let changed = *to.borrow() != token;
                if changed {
                    to.send_replace(token);
                }
                changed
            }
            Err(e) => {
                tracing::error!("config reload: {key}: {e}; the previous token stays in force");
                source.clone_from(previous);
                false
            }
        }
    }

    /// Registers `next`'s job file in place of the running one. A failure leaves the running
    /// registration as it was.
    fn register_jobs(&self, next: &Config) -> Result<(), crate::jobs::RegisterError> {
        let old = self.config.jobs.as_ref();
        let new = next.jobs.as_ref();
        let old_id = old.map(|j| j.executor_id());
        let new_id = new.map(|j| j.executor_id());
        // Another file (or none): its jobs go first, so a job that moved between the two
        // files is not refused as taken by the old registration.
        if let Some(old_id) = old_id
            .as_deref()
            .filter(|id| Some(*id) != new_id.as_deref())
        {
            self.state.registry.register(old_id, Vec::new())?;
        }
        let Some(jobs) = new else {
            tracing::info!("config reload: jobs: the job file's jobs are unregistered");
            return Ok(());
        };
        match self
            .state
            .registry
            .register(&jobs.executor_id(), jobs.specs.clone())
        {
            Ok(set) => {
                tracing::info!(
                    file = %jobs.path.display(),
                    jobs = jobs.specs.len(),
                    job_set_id = %set.id,
                    "config reload: registered the config's job file"
                );
                Ok(())
            }
            Err(e) => {
                // Put back what was unregistered above.
                if let (Some(old), Some(old_id)) = (old, old_id.as_deref())
                    && Some(old_id) != new_id.as_deref()
                {
                    let _ = self.state.registry.register(old_id, old.specs.clone());
                }
                Err(e)
            }
        }
    }

    /// Rebuilds the cluster manager for `cluster`: builds the new one first (a section this
    /// build cannot run leaves the running one alone), then [`Self::switch_to`] it.
    async fn rebuild(&mut self, cluster: Option<&ClusterConfig>) -> Result<(), RebuildError> {
        let next = Manager::build(cluster, &self.node_name, &self.env)?;
        self.switch_to(next, cluster.cloned()).await?;
        Ok(())
    }

    /// Stops the old manager within its bounds, publishes the new backend's starting view and
    /// store clients, and starts it. When the old one does not end, the new one is kept as
    /// [`Self::pending`] and tried again later, never started beside it.
    async fn switch_to(
        &mut self,
        next: Manager,
        cluster: Option<ClusterConfig>,
    ) -> Result<(), ManagerDidNotStop> {
        let old = self.running.as_ref().map_or("none", |r| r.name);
        let was_off = matches!(self.view.borrow().election, Election::Off);
        if let Err(e) = self.stop_running().await {
            self.pending = Some(Pending {
                manager: next,
                cluster,
            });
            return Err(e);
        }
        if *self.stop.borrow() {
            return Ok(());
        }
        // No backend runs now: this task is the view's one writer until the new one starts.
        let first = next.backend.initial_view();
        let now_off = matches!(first.election, Election::Off);
        self.view.send_replace(first);
        if was_off != now_off {
            // Shims remember whether election is off for when they cannot reach this
            // coordinator; ending their Watch streams makes every one register again at once
            // and learn the new mode from the answer.
            self.state.close_watches();
        }
        let (records_store, handoffs) = (next.records_store, next.handoffs.clone());
        let certificates = Arc::new(crate::observe::certificates::configured(cluster.as_ref()));
        self.live.send_modify(|l| {
            *l = Arc::new(LiveHandles {
                records_store,
                handoffs,
                certificates,
                ..LiveHandles::clone(l)
            });
        });
        let name = next.backend.name();
        self.start(next.backend, next.handoffs);
        tracing::info!(
            from = old,
            to = name,
            "cluster manager rebuilt: the cluster section changed; the node does not act on \
             Leader jobs until the new manager's first view"
        );
        Ok(())
    }
}

/// Why a cluster section could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    /// The section cannot be run by this build.
    #[error(transparent)]
    Build(#[from] RunError),
    /// The old manager did not end.
    #[error(transparent)]
    DidNotStop(#[from] ManagerDidNotStop),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::cluster::Backend;

    fn parse(yaml: &str) -> Config {
        crate::config::parse(yaml, "test.yaml")
            .unwrap_or_else(|e| panic!("{e}"))
            .config
    }

    const ETCD: &str = "cluster:\n  backend: etcd\n  nodeName: a\n  etcd:\n    endpoints: [\"http://127.0.0.1:2379\"]\n";

    /// README's reload table is [`readme_table`]: a key added to [`ReloadKey`] without its
    /// row, or a row edited by hand, fails here.
    #[test]
    fn readme_carries_the_reload_table_rendered_from_the_keys() {
        let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"));
        let table = readme_table();
        assert!(
            readme.contains(&table),
            "README's reload table differs from reload::readme_table(); put this in its place:\n{table}"
        );
        let mut names: Vec<&str> = ReloadKey::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ReloadKey::ALL.len(), "two keys share a name");
    }

    const FS: &str = "cluster:\n  backend: filesystem\n  nodeName: a\n  filesystem:\n    path: /tmp/x\n    ttl: 3\n";

    #[test]
    fn an_unchanged_file_changes_nothing() {
        let c = parse(FS);
        assert_eq!(changes(&c, &c.clone()), Changes::default());
    }

    #[test]
    fn a_changed_lease_setting_is_a_cluster_change() {
        let old = parse(FS);
        let new = parse(&FS.replace("ttl: 3", "ttl: 4"));
        let ch = changes(&old, &new);
        assert_eq!(ch.live, vec![ReloadKey::ClusterTuning], "{ch:?}");
        assert!(ch.restart_needed.is_empty());
    }

    #[test]
    fn a_cluster_section_added_or_removed_is_a_cluster_change() {
        let off = Config::default();
        let on = parse(FS);
        assert!(changes(&off, &on).has(ReloadKey::ClusterTuning));
        assert!(changes(&on, &off).has(ReloadKey::ClusterTuning));
    }

    #[test]
    fn a_reload_that_would_open_the_door_is_refused_naming_the_key() {
        let fs = parse(FS);
        let token = "web:\n  authToken:\n    value: s3cret\n";
        let api_token = "api:\n  authToken:\n    value: s3cret\n";
        let cases: [(&str, String, String, ReloadKey); 11] = [
            ("on", String::new(), FS.into(), ReloadKey::ClusterOnOff),
            ("off", FS.into(), String::new(), ReloadKey::ClusterOnOff),
            ("token", token.into(), String::new(), ReloadKey::WebAuthTokenRemoved),
            ("api token", api_token.into(), String::new(), ReloadKey::ApiAuthTokenRemoved),
            ("path", FS.into(), FS.replace("/tmp/x", "/tmp/y"), ReloadKey::FilesystemPath),
            (
                "topology",
                FS.into(),
                format!("{FS}    topology: single-node\n"),
                ReloadKey::FilesystemTopology,
            ),
            (
                "etcd endpoints",
                ETCD.into(),
                ETCD.replace("2379", "2380"),
                ReloadKey::EtcdEndpoints,
            ),
            (
                "deployment",
                FS.into(),
                format!("{FS}    deploymentId: other\n"),
                ReloadKey::FilesystemDeploymentId,
            ),
            (
                "election",
                FS.into(),
                format!("{FS}    electionName: other/leader\n"),
                ReloadKey::FilesystemElectionName,
            ),
            (
                "backend",
                FS.into(),
                ETCD.into(),
                ReloadKey::Backend,
            ),
            (
                "electLeader",
                "cluster:\n  nodeName: a\n  electLeader: true\n  listen: 127.0.0.1:8443\n  tls: {ca: /c, cert: /c, key: /k}\n  peers: [{host: 127.0.0.2:8443}, {host: 127.0.0.3:8443}]\n".into(),
                "cluster:\n  nodeName: a\n  electLeader: false\n  listen: 127.0.0.1:8443\n  tls: {ca: /c, cert: /c, key: /k}\n  peers: [{host: 127.0.0.2:8443}, {host: 127.0.0.3:8443}]\n".into(),
                ReloadKey::ElectLeader,
            ),
        ];
        for (what, old, new, key) in cases {
            let ch = changes(&parse(&old), &parse(&new));
            assert_eq!(ch.refused, vec![key], "{what}: {ch:?}");
        }
        // Narrowing or tuning is not refused: a new token, a new ttl, a token added.
        let tuned = changes(&fs, &parse(&FS.replace("ttl: 3", "ttl: 5")));
        assert!(
            tuned.refused.is_empty() && tuned.has(ReloadKey::ClusterTuning),
            "{tuned:?}"
        );
        for (t, key) in [
            (token, ReloadKey::WebAuthToken),
            (api_token, ReloadKey::ApiAuthToken),
        ] {
            let added = changes(&Config::default(), &parse(t));
            assert_eq!(added.live, vec![key], "{added:?}");
            assert!(added.refused.is_empty(), "{added:?}");
            let other = changes(&parse(t), &parse(&t.replace("s3cret", "other")));
            assert_eq!(other.live, vec![key], "{other:?}");
            assert!(other.refused.is_empty(), "{other:?}");
        }
    }

    #[test]
    fn a_new_node_name_needs_a_restart_and_is_not_a_cluster_change() {
        let old = parse(FS);
        let new = parse(&FS.replace("nodeName: a", "nodeName: b"));
        let ch = changes(&old, &new);
        assert!(!ch.has(ReloadKey::ClusterTuning), "{ch:?}");
        assert_eq!(ch.restart_needed, vec![ReloadKey::NodeName]);
        let kept = effective(&old, new);
        assert_eq!(
            kept.cluster.as_ref().and_then(|c| c.node_name.as_deref()),
            Some("a")
        );
        assert_eq!(kept.cluster.map(|c| c.backend), Some(Backend::Filesystem));
    }

    #[test]
    fn listeners_and_state_need_a_restart_and_keep_their_running_values() {
        let old = parse("api:\n  listen: 127.0.0.1:7001\nweb:\n  listen: 127.0.0.1:7002\n");
        let new = parse(
            "api:\n  listen: 127.0.0.1:7003\nweb:\n  listen: 127.0.0.1:7004\nstate:\n  path: /tmp/s\n",
        );
        let ch = changes(&old, &new);
        assert_eq!(
            ch.restart_needed,
            vec![
                ReloadKey::ApiListen,
                ReloadKey::WebListen,
                ReloadKey::StatePath
            ]
        );
        let kept = effective(&old, new);
        assert_eq!(kept.api, old.api);
        // A token is not a listener: the reload keeps the new one (it was lost before).
        let with_token = parse("api:\n  listen: 127.0.0.1:7003\n  authToken:\n    value: t\n");
        let kept = effective(&old, with_token.clone());
        assert_eq!(kept.api.listen, old.api.listen);
        assert_eq!(kept.api.auth_token, with_token.api.auth_token);
        assert_eq!(kept.web.listen, old.web.listen);
        assert_eq!(kept.state, old.state);
    }

    #[test]
    fn a_lease_backends_observability_mesh_change_does_not_restart_the_election() {
        let mesh = |peer: &str| {
            parse(&format!(
                "cluster:\n  backend: filesystem\n  filesystem: {{path: /mnt/s}}\n  \
                 observability:\n    listen: 127.0.0.1:9443\n    \
                 tls: {{ca: /ca.pem, cert: /c.pem, key: /c.key}}\n    \
                 peers:\n      - host: {peer}\n"
            ))
        };
        let (old, new) = (mesh("127.0.0.2:9443"), mesh("127.0.0.3:9443"));
        let ch = changes(&old, &new);
        assert!(
            !ch.has(ReloadKey::ClusterTuning),
            "the lease is not rebuilt for the mesh: {ch:?}"
        );
        assert_eq!(ch.restart_needed, vec![ReloadKey::LeaseObservability]);
        // The running mesh stays what the next reload compares against: going back to it
        // needs nothing.
        let running = effective(&old, new);
        assert_eq!(running.cluster, old.cluster);
        assert!(changes(&running, &old).restart_needed.is_empty());
    }

    #[test]
    fn notify_and_token_sources_are_told_apart() {
        let old = Config::default();
        let new = parse(
            "notify:\n  webhook:\n    url: http://127.0.0.1:9/hook\nweb:\n  authToken:\n    value: s3cret\n",
        );
        let ch = changes(&old, &new);
        assert_eq!(ch.live, vec![ReloadKey::Notify, ReloadKey::WebAuthToken]);
    }

    #[test]
    fn a_token_is_resolved_from_its_source() {
        let env = Environment::from_vars([("TOK".to_owned(), "abc".to_owned())]);
        let from_env = SecretSource::FromEnvVar("TOK".into());
        let t = resolve_token(Some(&from_env), &env).unwrap().unwrap();
        assert!(t.matches("abc"));
        assert!(resolve_token(None, &env).unwrap().is_none());
        let unset = SecretSource::FromEnvVar("NOPE".into());
        assert!(resolve_token(Some(&unset), &env).is_err());
    }

    mod stubborn {
        //! A rebuild whose old manager does not end: the new one waits, never beside it.
        use std::sync::atomic::{AtomicBool, Ordering};

        use super::super::*;
        use crate::cluster::BackendContext;

        /// Blocks its worker thread for `block` once told to stop, so neither its stop nor an
        /// abort ends it in time; `alive` is true until its future is dropped.
        struct Stubborn {
            alive: Arc<AtomicBool>,
            block: Duration,
        }

        struct Alive(Arc<AtomicBool>);
        impl Drop for Alive {
            fn drop(&mut self) {
                self.0.store(false, Ordering::SeqCst);
            }
        }

        impl ClusterBackend for Stubborn {
            fn name(&self) -> &'static str {
                "stubborn"
            }
            fn initial_view(&self) -> ClusterView {
                ClusterView::election_off("a")
            }
            fn stop_bound(&self) -> Duration {
                Duration::from_millis(50)
            }
            fn run(
                self: Box<Self>,
                ctx: BackendContext,
            ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
                self.alive.store(true, Ordering::SeqCst);
                let alive = Alive(self.alive.clone());
                Box::pin(async move {
                    let _alive = alive;
                    ctx.shutdown.await;
                    // Stuck outside any await: an abort cannot end it until this returns.
                    std::thread::sleep(self.block);
                    std::future::pending::<()>().await;
                })
            }
        }

        /// Records whether the stubborn one was still alive when it started.
        struct Recorder {
            other_alive: Arc<AtomicBool>,
            started: Arc<AtomicBool>,
            started_beside: Arc<AtomicBool>,
        }

        impl ClusterBackend for Recorder {
            fn name(&self) -> &'static str {
                "recorder"
            }
            fn initial_view(&self) -> ClusterView {
                ClusterView::election_off("a")
            }
            fn run(
                self: Box<Self>,
                ctx: BackendContext,
            ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
                self.started_beside
                    .store(self.other_alive.load(Ordering::SeqCst), Ordering::SeqCst);
                self.started.store(true, Ordering::SeqCst);
                Box::pin(ctx.shutdown)
            }
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_manager_that_does_not_end_fails_the_switch_keeps_its_handle_and_is_retried() {
            let (view_tx, view_rx) = watch::channel(ClusterView::election_off("a"));
            let (state, live) = CoordinatorState::new(view_rx).reloadable();
            let tokens = TokenWriters::open();
            let (_stop_tx, stop_rx) = watch::channel(false);
            let mut sup = Supervisor::new(
                Config::default(),
                "a".into(),
                Environment::from_vars([]),
                state,
                view_tx,
                live,
                tokens,
                stop_rx,
            );
            sup.abort_wait = Duration::from_millis(50);
            let alive = Arc::new(AtomicBool::new(false));
            sup.start(
                Box::new(Stubborn {
                    alive: alive.clone(),
                    block: Duration::from_millis(800),
                }),
                None,
            );
            let (started, beside) = (
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicBool::new(false)),
            );
            let recorder = || Manager {
                backend: Box::new(Recorder {
                    other_alive: alive.clone(),
                    started: started.clone(),
                    started_beside: beside.clone(),
                }),
                records_store: None,
                handoffs: None,
            };
            let err = sup.switch_to(recorder(), None).await.unwrap_err();
            assert!(err.to_string().contains("stubborn"), "{err}");
            assert!(sup.pending.is_some(), "the switch waits to be retried");
            assert_eq!(
                sup.running.as_ref().map(|r| r.name),
                Some("stubborn"),
                "handle kept"
            );
            assert!(
                !started.load(Ordering::SeqCst),
                "no manager beside one that did not end"
            );

            // A retry while it still runs fails the same way and starts nothing.
            sup.retry_pending().await;
            assert!(sup.pending.is_some() && !started.load(Ordering::SeqCst));

            // Once it has ended, the retry switches.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while alive.load(Ordering::SeqCst) {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the stubborn task never ended"
                );
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            sup.retry_pending().await;
            assert!(sup.pending.is_none());
            assert!(
                started.load(Ordering::SeqCst),
                "the retry started the new manager"
            );
            assert!(
                !beside.load(Ordering::SeqCst),
                "it started after the old one ended"
            );
            assert_eq!(sup.running.as_ref().map(|r| r.name), Some("recorder"));
        }
    }

    mod switching {
        //! What a switch of cluster managers shows while it happens: the new backend's own
        //! starting view, Watch streams ended when election turns on or off, and a stop that
        //! wins over a reload queued behind it. Backends that never publish, so every view
        //! checked here is the supervisor's own.
        use super::super::*;
        use super::{FS, parse};
        use crate::cluster::BackendContext;
        use crate::status::ClusterStatus;

        struct Silent {
            election: bool,
        }

        impl ClusterBackend for Silent {
            fn name(&self) -> &'static str {
                "silent"
            }
            fn initial_view(&self) -> ClusterView {
                if self.election {
                    ClusterView::starting("a", ClusterStatus::Disabled)
                } else {
                    ClusterView::election_off("a")
                }
            }
            fn run(
                self: Box<Self>,
                ctx: BackendContext,
            ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
                Box::pin(ctx.shutdown)
            }
        }

        fn silent(election: bool) -> Manager {
            Manager {
                backend: Box::new(Silent { election }),
                records_store: None,
                handoffs: None,
            }
        }

        struct Fixture {
            sup: Supervisor,
            view: watch::Receiver<ClusterView>,
            state: CoordinatorState,
            stop: watch::Sender<bool>,
        }

        fn fixture(election: bool) -> Fixture {
            let first = Silent { election }.initial_view();
            let (view_tx, view) = watch::channel(first);
            let (state, live) = CoordinatorState::new(view.clone()).reloadable();
            let tokens = TokenWriters::open();
            let (stop, stop_rx) = watch::channel(false);
            let mut sup = Supervisor::new(
                Config::default(),
                "a".into(),
                Environment::from_vars([]),
                state.clone(),
                view_tx,
                live,
                tokens,
                stop_rx,
            );
            sup.start(Box::new(Silent { election }), None);
            Fixture {
                sup,
                view,
                state,
                stop,
            }
        }

        #[tokio::test]
        async fn a_rebuild_shows_the_new_backends_starting_view_until_it_publishes() {
            let mut f = fixture(true);
            f.sup.switch_to(silent(true), None).await.unwrap();
            assert_eq!(f.view.borrow().election, Election::Starting);
            assert_eq!(f.sup.running.as_ref().map(|r| r.name), Some("silent"));
        }

        #[tokio::test]
        async fn turning_election_on_or_off_ends_the_watch_streams_and_a_tuning_does_not() {
            let mut f = fixture(false);
            let mut before = f.state.open_watch("shim");
            f.sup.switch_to(silent(true), None).await.unwrap();
            let ended = tokio::time::timeout(Duration::from_secs(5), before.recv()).await;
            assert!(
                ended.as_ref().is_ok_and(Option::is_none),
                "the stream ends on a mode flip"
            );
            let mut kept = f.state.open_watch("shim");
            f.sup.switch_to(silent(true), None).await.unwrap();
            assert!(
                matches!(
                    kept.try_recv(),
                    Err(tokio::sync::mpsc::error::TryRecvError::Empty)
                ),
                "the stream stays open when the mode does not change"
            );
        }

        #[tokio::test]
        async fn a_stop_wins_over_a_reload_queued_behind_it() {
            let f = fixture(false);
            let (tx, rx) = mpsc::channel(1);
            let changed = parse(FS);
            tx.send(Reload::Config(Box::new(changed))).await.unwrap();
            f.stop.send(true).unwrap();
            f.sup.run(rx).await;
            assert_eq!(
                f.view.borrow().election,
                Election::Off,
                "no manager was rebuilt while stopping"
            );
            let metrics = f.state.metrics.render(&serde_json::Value::Null);
            assert!(
                metrics.contains("cronstable_config_reloads_total{result=\"applied\"} 0")
                    && metrics.contains("cronstable_config_reloads_total{result=\"refused\"} 0"),
                "the queued reload was not taken: {metrics}"
            );
        }
    }

    #[test]
    fn a_clean_stop_with_default_settings_fits_the_shipped_units_timeout() {
        let unit = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/systemd/cronstable.service"
        ))
        .unwrap();
        let limit: u64 = unit
            .lines()
            .find_map(|l| l.strip_prefix("TimeoutStopSec="))
            .expect("TimeoutStopSec in the unit")
            .trim()
            .parse()
            .unwrap();
        let env = Environment::from_vars([]);
        let gossip = "cluster:\n  nodeName: a\n  listen: 127.0.0.1:8443\n  tls: {ca: /c, cert: /c, key: /k}\n  peers: [{host: 127.0.0.2:8443}, {host: 127.0.0.3:8443}]\n";
        let etcd = "cluster:\n  backend: etcd\n  nodeName: a\n  etcd:\n    endpoints: [\"http://127.0.0.1:2379\"]\n";
        let fs =
            "cluster:\n  backend: filesystem\n  nodeName: a\n  filesystem:\n    path: /tmp/x\n";
        let k8s = "cluster:\n  backend: kubernetes\n  nodeName: a\n  kubernetes:\n    apiServer: https://127.0.0.1:6443\n";
        for (what, yaml) in [
            ("gossip", gossip),
            ("etcd", etcd),
            ("filesystem", fs),
            ("kubernetes", k8s),
        ] {
            let config = parse(yaml);
            let manager = Manager::build(config.cluster.as_ref(), "a", &env)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            // The supervisor's stop, and the HTTP and gRPC drains that run beside it.
            let budget = stop_budget(&*manager.backend);
            assert!(
                budget.as_secs() + 5 < limit,
                "{what}: a clean stop may take {budget:?}, the unit allows {limit} s"
            );
        }
    }
}
