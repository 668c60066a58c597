//! The coordinator's YAML config, typed and validated (anchors §2 habit 8).
//!
//! ```yaml
//! api:
//!   listen: 127.0.0.1:7400            # gRPC for shims; or unix:/run/cronstable.sock
//!   authToken:                        # optional bearer token every gRPC call must carry
//!     fromFile: /etc/cronstable/api-token
//! web:
//!   listen: 127.0.0.1:8080            # HTTP API, dashboard, /metrics
//!   authToken:                        # optional bearer token: one of value|fromFile|fromEnvVar
//!     fromEnvVar: CRONSTABLE_TOKEN
//! cluster:                            # absent: no clustering, every node runs every job
//!   listen: "0.0.0.0:8443"
//!   tls: {ca: /etc/cronstable/ca.pem, cert: /etc/cronstable/a.pem, key: /etc/cronstable/a.key}
//!   peers:
//!     - host: cronstable-b.internal:8443
//!     - host: cronstable-c.internal:8443
//!   nodeName: cronstable-a
//!   electLeader: true
//! state:                              # optional: keep run history across restarts
//!   path: /var/lib/cronstable         # (or `store: etcd` with cluster.backend etcd)
//! notify:                             # optional: page someone (see `notify`)
//!   webhook: {url: "https://hooks.internal/cron", events: [leader_change, quorum_loss]}
//! statsd:                             # optional: per-job figures over UDP (see `statsd`)
//!   host: 127.0.0.1
//! jobs:                               # optional: jobs the coordinator registers itself
//!   systemCrontab: /etc/cron.d/app    # (for cronstable-gate; see the `jobs` module)
//! ```
//!
//! Loading happens in two steps. [`cronstable_core::yaml`] deserializes the text into the
//! `raw` structs, which pins down the shape: an unknown key or a mistyped value anywhere is
//! one error naming the file, line, column and key path (`cronstable.yaml:4:3:
//! cluster.electLeder: unknown field ...`). Then `validate` applies every load-time rule of
//! inventory §1.8 and collects *all* violations, each again with file, line and key path (lines
//! come from [`cronstable_core::yaml::KeyLines`]), plus the §1.9 advisories as
//! [`Loaded::warnings`].
//!
//! Nothing here reads the environment or resolves secrets: [`secret::SecretSource::resolve`]
//! takes injected lookups, and `node_name: None` is resolved to the hostname by the caller.
//!
//! An empty document, and a missing file for [`load`], give the defaults: election off,
//! `api.listen` 127.0.0.1:7400, `web.listen` 127.0.0.1:8080. So does `cluster:` with no value
//! (YAML null): the section counts as absent. `cluster: {}` is a gossip cluster section with
//! every key at its default (attestation only, with a warning that it has no mesh).
//!
//! # Errors and advisories
//!
//! Errors (inventory §1.8): address formats (`api.listen`, `web.listen`, `cluster.listen`,
//! `peers[].host`, and the same for the observability mesh); blank or missing TLS paths;
//! gossip + electLeader without `listen` or `tls`; electLeader with N = 2; `spread` on a lease
//! backend; the kubernetes timing inequalities (CFG-10); etcd without endpoints, a non-URL
//! endpoint, `ttl < 3`, credentials with any `http://` endpoint, a username without a password
//! (or the reverse), a secret that is not exactly one nonempty source; filesystem without
//! `path` or with `ttl < 3`; blank names where a name is optional; zero intervals and timeouts;
//! and the CFG-05 self entry under election.
//!
//! Advisories (§1.9), in [`Loaded::warnings`]: an even N > 2 and N = 1 under electLeader (size
//! only matters to the quorum, so attestation-only clusters are not warned about size);
//! `distribution` without electLeader; one advisory naming every gossip key a lease backend
//! ignores; `electLeader: false` on a lease backend; etcd `ttl < 9` with the per-request
//! budget; dropped duplicate peers; sections of a backend that is not selected; filesystem
//! `topology: auto` on Windows/macOS; a self entry without election; attestation without a
//! mesh to attest over.
//!
//! # Self entries in `peers` (CFG-05)
//!
//! A peer that is provably this node (a loopback address that this node's `cluster.listen`
//! would accept a connection to: the same port, and the same loopback address or a wildcard
//! covering it; `127.0.0.12:8443` is another node beside a listener on `127.0.0.11:8443`) is a **ConfigError when `electLeader` is on**:
//! it inflates N, and a self-padded "3-node" cluster of 2 real nodes would run as a degenerate
//! 2-of-2 quorum where any failure stops every Leader job. Without election it only skews the
//! attestation view, so it is a **warning**. Other self entries (a routable address) can only
//! be recognised at runtime.

pub mod address;
pub mod cluster;
mod ctx;
pub mod jobs;
mod lease;
mod notify;
mod raw;
pub mod secret;
mod statsd;
mod validate;

use std::fmt;
use std::io;
use std::path::Path;

use cronstable_core::yaml::{self, YamlError};

pub use address::{AddressError, HostPort, ListenAddr};
pub use cluster::{
    Backend, ClientLibrary, ClusterConfig, Distribution, EtcdConfig, EtcdTls, FilesystemConfig,
    KubernetesConfig, ObservabilityConfig, PeerConfig, TlsPaths, Topology,
};
pub use jobs::{JobFileFormat, JobsConfig};
pub use notify::{NotifyConfig, NotifyEvent, WebhookConfig};
pub use secret::{SecretError, SecretSource};
pub use statsd::StatsdConfig;

/// `api.listen` when unset.
pub const DEFAULT_API_LISTEN: &str = "127.0.0.1:7400";
/// `web.listen` when unset.
pub const DEFAULT_WEB_LISTEN: &str = "127.0.0.1:8080";

/// The whole coordinator config.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// The gRPC listener for shims and clients.
    pub api: ApiConfig,
    /// The HTTP listener: API, dashboard, metrics.
    pub web: WebConfig,
    /// Clustering; `None` (the default) for none: every instance runs every job.
    pub cluster: Option<ClusterConfig>,
    /// Event reporters (`notify:`); none by default.
    pub notify: NotifyConfig,
    /// Per-job figures sent to statsd (`statsd:`); `None` (the default) sends none.
    pub statsd: Option<StatsdConfig>,
    /// Durable local state (`state:`); none by default: history lives in memory only.
    pub state: StateConfig,
    /// A job file the coordinator loads and registers itself (`jobs:`); `None` for none.
    pub jobs: Option<JobsConfig>,
}

impl Config {
    /// Whether this config elects: a `cluster` section with `electLeader` (always on for the
    /// lease backends). Without one every node runs every job.
    pub fn election_mode(&self) -> cronstable_core::mode::ElectionMode {
        use cronstable_core::mode::ElectionMode;
        match &self.cluster {
            Some(c) if c.elect_leader => ElectionMode::On,
            _ => ElectionMode::Off,
        }
    }
}

/// `state:`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StateConfig {
    /// The directory the run ledger is kept in (`state.path`), so run history survives a
    /// restart; `None` keeps it in memory only (or in etcd, with [`StateStore::Etcd`]).
    pub path: Option<std::path::PathBuf>,
    /// Where the run ledger is kept (`state.store`): a file under `path` (the default) or etcd.
    pub store: StateStore,
}

/// `state.store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateStore {
    /// `file`: `<state.path>/ledger-<node>.jsonl`.
    #[default]
    File,
    /// `etcd`: under `<cluster.etcd.electionName>/ledger/<node>/` in the election's etcd.
    Etcd,
}

/// `api:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    /// Where the gRPC API listens; default `127.0.0.1:7400`. `unix:/path` for a socket.
    pub listen: ListenAddr,
    /// The bearer token every gRPC call must carry (`authToken`); default none. Resolved by
    /// the caller, again at every reload.
    pub auth_token: Option<SecretSource>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            listen: ListenAddr::Tcp(HostPort::new("127.0.0.1", 7400)),
            auth_token: None,
        }
    }
}

/// `web:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebConfig {
    /// Where the HTTP API listens; default `127.0.0.1:8080`.
    pub listen: HostPort,
    /// The bearer token protecting the API (`authToken`); default none. Resolved by the caller.
    pub auth_token: Option<SecretSource>,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            listen: HostPort::new("127.0.0.1", 8080),
            auth_token: None,
        }
    }
}

/// A loaded config and the advisories found while loading it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Loaded {
    /// The validated config.
    pub config: Config,
    /// Advisories (inventory §1.9), each `file:line: key: message`; the caller logs them.
    pub warnings: Vec<String>,
}

/// One reason the config cannot be used: `file:line:column: key.path: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", YamlError::from(self.clone()))]
pub struct ConfigError {
    /// The config file.
    pub file: String,
    /// 1-based line, where known.
    pub line: Option<usize>,
    /// 1-based column, where known.
    pub column: Option<usize>,
    /// The key path (`cluster.peers[1].host`); empty for the file as a whole.
    pub path: String,
    /// What is wrong and, where it helps, what to write instead.
    pub message: String,
}

impl From<YamlError> for ConfigError {
    fn from(e: YamlError) -> Self {
        Self {
            file: e.source,
            line: e.line,
            column: e.column,
            path: e.path,
            message: e.message,
        }
    }
}

impl From<ConfigError> for YamlError {
    fn from(e: ConfigError) -> Self {
        Self {
            source: e.file,
            line: e.line,
            column: e.column,
            path: e.path,
            message: e.message,
        }
    }
}

/// Every reason the config cannot be used (never empty), in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    /// One error per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Parses and validates config `text`; `source` names the file in messages.
pub fn parse(text: &str, source: &str) -> Result<Loaded, ConfigErrors> {
    let outcome = analyse(text, source);
    if outcome.errors.is_empty() {
        Ok(Loaded {
            config: outcome.config,
            warnings: outcome.warnings,
        })
    } else {
        Err(ConfigErrors(outcome.errors))
    }
}

/// Reads and validates the config file at `path`. A missing file gives the defaults (with a
/// warning saying so); any other read failure is a [`ConfigError`] naming the file.
pub fn load(path: &Path) -> Result<Loaded, ConfigErrors> {
    let source = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, &source),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Loaded {
            config: Config::default(),
            warnings: vec![format!(
                "{source}: not found; using the defaults (no cluster)"
            )],
        }),
        Err(e) => Err(ConfigErrors(vec![unreadable(&source, &e)])),
    }
}

/// Loads `path` for a reload of a running coordinator. Unlike [`load`], a missing file and
/// an empty document (nothing but whitespace, comments and document markers: what a file being
/// rewritten in place looks like for a moment) are errors: either would read as the defaults
/// and turn a running node's election off.
pub fn load_for_reload(path: &Path) -> Result<Loaded, ConfigErrors> {
    let source = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| ConfigErrors(vec![unreadable(&source, &e)]))?;
    if is_empty_document(&text) {
        return Err(ConfigErrors(vec![ConfigError {
            file: source,
            line: None,
            column: None,
            path: String::new(),
            message: "the file is empty (a write in progress?); a reload needs the whole config, \
                      and an empty one would read as the defaults (no cluster, no token)"
                .into(),
        }]));
    }
    parse(&text, &source)
}

/// True when `text` holds no YAML content at all.
pub fn is_empty_document(text: &str) -> bool {
    text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
    })
}

/// What `cronstable validate-config FILE` prints: every error, then every warning, then a
/// one-line summary. The bool is true when the config is usable (warnings allowed).
///
/// Unlike [`load`], a missing file is an error here: asked to validate a path, a typo in it
/// must not report "valid".
pub fn validate_report(path: &Path) -> (bool, String) {
    let source = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => report_text(&text, &source),
        Err(e) => render(&source, &[unreadable(&source, &e)], &[]),
    }
}

/// [`validate_report`] for text already read.
pub fn report_text(text: &str, source: &str) -> (bool, String) {
    let outcome = analyse(text, source);
    render(source, &outcome.errors, &outcome.warnings)
}

/// A validation run: the config as far as it could be built, and what was found.
struct Outcome {
    config: Config,
    errors: Vec<ConfigError>,
    warnings: Vec<String>,
}

fn analyse(text: &str, source: &str) -> Outcome {
    match yaml::parse::<raw::RawConfig>(text, source) {
        Ok(raw) => validate::validate(raw, text, source),
        Err(e) => Outcome {
            config: Config::default(),
            errors: vec![e.into()],
            warnings: Vec::new(),
        },
    }
}

fn unreadable(source: &str, e: &io::Error) -> ConfigError {
    ConfigError {
        file: source.to_owned(),
        line: None,
        column: None,
        path: String::new(),
        message: format!("cannot read the config file: {e}"),
    }
}

fn render(source: &str, errors: &[ConfigError], warnings: &[String]) -> (bool, String) {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let mut out = String::new();
    for e in errors {
        out.push_str(&format!("error: {e}\n"));
    }
    for w in warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    let verdict = if errors.is_empty() {
        "valid"
    } else {
        "invalid"
    };
    out.push_str(&format!(
        "{source}: {verdict}: {}, {}\n",
        plural(errors.len(), "error"),
        plural(warnings.len(), "warning")
    ));
    (errors.is_empty(), out)
}
