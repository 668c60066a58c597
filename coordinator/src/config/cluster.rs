//! The typed, validated `cluster:` section (inventory §1.1–1.5).
//!
//! Values here have passed every load-time rule of the config loader, and defaults are
//! filled in, so the runtime never re-checks them. Two normalisations to know about:
//!
//! - On a lease backend (kubernetes, etcd, filesystem) [`ClusterConfig::elect_leader`] is
//!   always `true` (an explicit `false` is ignored with an advisory, CFG-51), and the gossip
//!   keys `listen`, `tls` and `peers` are cleared (ignored with one advisory, CFG-50), so the
//!   runtime cannot use them by accident.
//! - The backend's own section ([`ClusterConfig::kubernetes`], `etcd`, `filesystem`) is `Some`
//!   exactly when that backend is selected, with defaults filled in; sections of the other
//!   backends are dropped (with a warning).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::address::HostPort;
use super::secret::SecretSource;

/// `cluster.interval` when unset: one poll round every 30 s.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
/// `cluster.driftAfter` when unset.
pub const DEFAULT_DRIFT_AFTER: u32 = 3;
/// `cluster.connectTimeout` when unset.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// `cluster.kubernetes.leaseName` when unset.
pub const DEFAULT_K8S_LEASE_NAME: &str = "cronstable-leader";
/// `cluster.etcd.electionName` when unset.
pub const DEFAULT_ETCD_ELECTION_NAME: &str = "cronstable/leader";
/// `cluster.filesystem.electionName` when unset.
pub const DEFAULT_FS_ELECTION_NAME: &str = "cluster/leader";
/// `cluster.etcd.ttl` and `cluster.filesystem.ttl` when unset, in seconds.
pub const DEFAULT_LEASE_TTL: u64 = 15;

/// How leadership is decided (`cluster.backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Best-effort quorum election over mTLS polling; no shared state. The default.
    #[default]
    Gossip,
    /// A `coordination.k8s.io/v1` Lease.
    Kubernetes,
    /// An etcd lease bound to an election key.
    Etcd,
    /// A lease file on a shared POSIX mount.
    Filesystem,
}

impl Backend {
    /// The spelling in the config and on `GET /cluster`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gossip => "gossip",
            Self::Kubernetes => "kubernetes",
            Self::Etcd => "etcd",
            Self::Filesystem => "filesystem",
        }
    }

    /// True for the lease backends (everything but gossip): a shared store fences leadership.
    pub fn is_lease(self) -> bool {
        self != Self::Gossip
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who runs leader-gated jobs under election (`cluster.distribution`, gossip only). The same
/// type gossip advertises on `/peer`, so the config and the policy-conflict check cannot
/// disagree on spellings.
pub use cronstable_core::gossip::Distribution;

/// `cluster.kubernetes.clientLibrary`: which apiserver client the backend uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientLibrary {
    /// The library client when it is built in, else the plain HTTP client. The default.
    #[default]
    Auto,
    /// Always the plain HTTP client.
    Http,
    /// Require the library client; without it the backend fails to start (Leader jobs fail
    /// closed).
    Library,
}

/// `cluster.filesystem.topology`: whether the store is shared between hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// Decide from the platform and the mount. The default. On Windows and macOS this means
    /// single-node.
    #[default]
    Auto,
    /// The store is used by this host only.
    SingleNode,
    /// The store is shared between hosts (asserted by the operator).
    Shared,
}

/// The three TLS files of an mTLS mesh. All three are required and nonempty; the files
/// themselves are read when the listener starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPaths {
    /// The dedicated cluster CA: the trust anchor for peer certificates.
    pub ca: PathBuf,
    /// This node's certificate (SAN = its reachable host name), for serving and as a client.
    pub cert: PathBuf,
    /// This node's private key.
    pub key: PathBuf,
}

/// One other member of a gossip (or observability) mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// Where the member's `/peer` listener is reached.
    pub host: HostPort,
}

/// `cluster.observability`: gossip node CPU/memory for the fleet view. Display data only;
/// never part of any decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObservabilityConfig {
    /// On the gossip backend: ride the main mesh (`observability: true`).
    Marker,
    /// On a lease backend: a dedicated, election-inert gossip mesh.
    Mesh {
        /// The mesh's mTLS listener (required).
        listen: HostPort,
        /// The mesh's TLS files (required).
        tls: TlsPaths,
        /// The other members (exact duplicates dropped).
        peers: Vec<PeerConfig>,
        /// Poll round length (`cluster.observability.interval`); default 30 s. The mesh's
        /// per-peer timeout is `cluster.connectTimeout`.
        interval: Duration,
    },
}

/// `cluster.kubernetes`, defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesConfig {
    /// The Lease the replicas contend for; default `cronstable-leader`.
    pub lease_name: String,
    /// The Lease's namespace; `None` (the default) for the pod's own namespace.
    pub lease_namespace: Option<String>,
    /// Lease duration in seconds (failover within about this long); default 15.
    pub lease_duration_seconds: u64,
    /// Renew deadline in seconds; default 10. Checked: `> 0`, `< leaseDurationSeconds`.
    pub renew_deadline_seconds: u64,
    /// Renew/observe cadence in seconds; default 2. Checked: `0 < retry < renewDeadline` and
    /// `renewDeadline + retry < leaseDuration`.
    pub retry_period_seconds: u64,
    /// Which apiserver client; default `auto`.
    pub client_library: ClientLibrary,
    /// The holder name written to the Lease; `None` (the default) for `cluster.nodeName`.
    pub identity: Option<String>,
    /// A kubeconfig for out-of-cluster use; default unset (in-cluster credentials).
    pub kubeconfig: Option<PathBuf>,
    /// Overrides the apiserver URL; default unset.
    pub api_server: Option<String>,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        Self {
            lease_name: DEFAULT_K8S_LEASE_NAME.to_owned(),
            lease_namespace: None,
            lease_duration_seconds: 15,
            renew_deadline_seconds: 10,
            retry_period_seconds: 2,
            client_library: ClientLibrary::Auto,
            identity: None,
            kubeconfig: None,
            api_server: None,
        }
    }
}

/// `cluster.etcd.tls`: all optional. `ca` verifies https endpoints; `cert` and `key` (a pair)
/// are for client-certificate auth.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdTls {
    /// CA for https endpoints; default the system roots.
    pub ca: Option<PathBuf>,
    /// Client certificate; default none.
    pub cert: Option<PathBuf>,
    /// Client key; default none.
    pub key: Option<PathBuf>,
}

/// `cluster.etcd`, defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    /// `http://` or `https://` URLs, tried in order for failover. Required, nonempty.
    pub endpoints: Vec<String>,
    /// The election key (its value is the holder's nodeName); default `cronstable/leader`.
    pub election_name: String,
    /// Lease TTL in seconds, ≥ 3; default 15. Keepalive about every `ttl/3`.
    pub ttl: u64,
    /// User for an auth-enabled cluster; default none. Requires a password and https.
    pub username: Option<String>,
    /// The password's source; default none. Resolved at startup, not at load.
    pub password: Option<SecretSource>,
    /// TLS files; default none.
    pub tls: Option<EtcdTls>,
}

impl EtcdConfig {
    /// The per-request timeout a renew round gets, about `(ttl − ttl/3 − 1 s) / 5` (CFG-23):
    /// 1.0 s at ttl 9, 1.8 s at ttl 15.
    pub fn renew_request_budget(&self) -> Duration {
        renew_request_budget(self.ttl)
    }
}

/// See [`EtcdConfig::renew_request_budget`].
pub fn renew_request_budget(ttl: u64) -> Duration {
    let ttl = ttl as f64;
    Duration::from_secs_f64(((ttl - ttl / 3.0 - 1.0) / 5.0).max(0.0))
}

/// `cluster.filesystem`, defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesystemConfig {
    /// The directory on the shared mount. Required.
    pub path: PathBuf,
    /// The lease's name inside the store; default `cluster/leader`.
    pub election_name: String,
    /// Lease TTL in seconds, ≥ 3; default 15. Renewed every `max(1 s, ttl/3)`.
    pub ttl: u64,
    /// Namespace inside the store; `None` (the default) means `"default"`.
    pub deployment_id: Option<String>,
    /// Whether the store is shared between hosts; default `auto`.
    pub topology: Topology,
}

/// The `cluster:` section. Absent means no clustering: every node runs every job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// How leadership is decided; default gossip.
    pub backend: Backend,
    /// This node's unique, stable name; `None` (the default) for the system hostname, which
    /// the caller resolves.
    pub node_name: Option<String>,
    /// Run leader-gated jobs on the elected node only; default `false` (attestation only).
    /// Always `true` on a lease backend.
    pub elect_leader: bool,
    /// Whether this node may lead (hold the lease, own Leader and PreferLeader jobs); default
    /// `true`. A node with `false` still runs its EveryNode jobs and follows the holder; on a
    /// lease backend it never campaigns. Not yet on gossip (refused at load).
    pub leader_eligible: bool,
    /// Single leader or per-job owners; default single-leader. Spread is gossip-only.
    pub distribution: Distribution,
    /// The gossip mTLS `/peer` listener; no default. Required with gossip + electLeader.
    pub listen: Option<HostPort>,
    /// The gossip mesh's TLS files; no default. Required with gossip + electLeader.
    pub tls: Option<TlsPaths>,
    /// Every *other* gossip member; default none. Exact duplicates are dropped at load.
    pub peers: Vec<PeerConfig>,
    /// Poll round length; default 30 s.
    pub interval: Duration,
    /// Consecutive mismatched rounds before a peer is `drifted`; default 3.
    pub drift_after: u32,
    /// Per-peer request timeout; default 10 s.
    pub connect_timeout: Duration,
    /// Node stats for the fleet view; default off.
    pub observability: Option<ObservabilityConfig>,
    /// Set exactly when `backend` is kubernetes.
    pub kubernetes: Option<KubernetesConfig>,
    /// Set exactly when `backend` is etcd.
    pub etcd: Option<EtcdConfig>,
    /// Set exactly when `backend` is filesystem.
    pub filesystem: Option<FilesystemConfig>,
}

impl ClusterConfig {
    /// The declared gossip cluster size N = `len(peers) + 1` (after duplicate drop; runtime
    /// self-exclusion may lower it further).
    pub fn size(&self) -> usize {
        self.peers.len() + 1
    }
}

impl Default for ClusterConfig {
    /// A gossip cluster section with every key at its default (attestation only, no mesh).
    fn default() -> Self {
        Self {
            backend: Backend::Gossip,
            node_name: None,
            elect_leader: false,
            leader_eligible: true,
            distribution: Distribution::SingleLeader,
            listen: None,
            tls: None,
            peers: Vec::new(),
            interval: DEFAULT_INTERVAL,
            drift_after: DEFAULT_DRIFT_AFTER,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            observability: None,
            kubernetes: None,
            etcd: None,
            filesystem: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renew_budget_matches_the_inventory_numbers() {
        assert_eq!(renew_request_budget(9), Duration::from_secs(1));
        let at15 = renew_request_budget(15).as_secs_f64();
        assert!((at15 - 1.8).abs() < 1e-9, "{at15}");
        assert_eq!(renew_request_budget(0), Duration::ZERO);
    }

    #[test]
    fn defaults_pass_the_kubernetes_ordering() {
        let k = KubernetesConfig::default();
        assert!(k.renew_deadline_seconds + k.retry_period_seconds < k.lease_duration_seconds);
    }
}
