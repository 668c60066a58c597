//! The load-time rules (inventory §1.8) and advisories (§1.9), applied to the raw config.
//!
//! Every rule runs; nothing stops at the first violation, so `validate-config` shows the whole
//! list at once. Each error and warning names the key path, and the line of that key (or of the
//! nearest enclosing key the file writes, for a key that is missing).
//!
//! This file holds the top level, the shared pieces (addresses, TLS, peers, secrets) and the
//! gossip rules; the lease backends are in [`super::lease`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use super::address::{HostPort, ListenAddr};
use super::cluster::{Backend, ClusterConfig, ObservabilityConfig, PeerConfig, TlsPaths};
use super::ctx::{Ctx, host_port, nonblank_path, secret};
use super::jobs::{JobFileFormat, JobsConfig};
use super::raw::{RawCluster, RawConfig, RawJobs, RawObservability, RawPeer, RawTls};
use super::{Config, Outcome};

/// Applies every rule to `raw` (deserialized from `text`).
pub(super) fn validate(raw: RawConfig, text: &str, source: &str) -> Outcome {
    let mut ctx = Ctx::new(source, text);
    let mut config = Config::default();
    if let Some(api) = raw.api {
        if let Some(listen) = api.listen {
            match listen.parse::<ListenAddr>() {
                Ok(addr) => config.api.listen = addr,
                Err(e) => ctx.error("api.listen", e.to_string()),
            }
        }
        config.api.auth_token = secret(&mut ctx, "api.authToken", api.auth_token.as_ref());
    } else if ctx.written("api.authToken") {
        secret(&mut ctx, "api.authToken", None);
    }
    if config.api.auth_token.is_none() && !config.api.listen.is_local() {
        ctx.warn(
            "api.listen",
            format!(
                "{} can be reached from other hosts and api.authToken is not set: anyone who \
                 can reach it can start jobs (StartJob), replace this node's job set \
                 (RegisterJobs) or hand off retries; set api.authToken, or listen on loopback \
                 or a unix: socket",
                config.api.listen
            ),
        );
    }
    if let Some(web) = raw.web {
        if let Some(listen) = &web.listen
            && let Some(addr) = host_port(&mut ctx, "web.listen", listen)
        {
            config.web.listen = addr;
        }
        config.web.auth_token = secret(&mut ctx, "web.authToken", web.auth_token.as_ref());
    } else if ctx.written("web.authToken") {
        secret(&mut ctx, "web.authToken", None);
    }
    if config.web.auth_token.is_none() && !config.web.listen.is_loopback() {
        ctx.warn(
            "web.listen",
            format!(
                "{} can be reached from other hosts and web.authToken is not set: anyone who \
                 can reach it can read every job's command and history and start jobs \
                 (POST /jobs/NAME/start); set web.authToken, or listen on loopback",
                config.web.listen
            ),
        );
    }
    config.cluster = raw.cluster.map(|c| cluster(&mut ctx, &c));
    if let Some(state) = raw.state {
        config.state.store = match state.store.as_deref().map(str::trim) {
            None | Some("file") => super::StateStore::File,
            Some("etcd") => super::StateStore::Etcd,
            Some(other) => {
                ctx.error(
                    "state.store",
                    format!("must be file or etcd, not {other:?}"),
                );
                super::StateStore::File
            }
        };
        let etcd_backend = config
            .cluster
            .as_ref()
            .is_some_and(|c| c.backend == super::cluster::Backend::Etcd);
        if config.state.store == super::StateStore::Etcd {
            if !etcd_backend {
                ctx.error(
                    "state.store",
                    "etcd needs cluster.backend: etcd (the ledger uses cluster.etcd's \
                     endpoints and credentials)",
                );
            }
            if ctx.written("state.path") {
                ctx.error(
                    "state.path",
                    "must not be set with state.store: etcd (the ledger is kept in etcd)",
                );
            }
        }
        config.state.path = if config.state.store == super::StateStore::Etcd {
            None
        } else {
            nonblank_path(
                &mut ctx,
                "state.path",
                state.path.as_ref(),
                "the directory the run history is kept in",
            )
        };
        if config.state.store == super::StateStore::File
            && config.state.path.is_none()
            && !ctx.written("state.path")
        {
            ctx.error(
                "state.path",
                "is required in a state section: the directory the run history is kept in",
            );
        }
    }
    config.notify = raw
        .notify
        .map(|n| super::notify::validate(&mut ctx, n))
        .unwrap_or_default();
    config.statsd = raw
        .statsd
        .and_then(|s| super::statsd::validate(&mut ctx, s));
    config.jobs = raw.jobs.and_then(|j| jobs(&mut ctx, &j));
    // File order reads best; errors without a line (none today) go last.
    ctx.errors.sort_by_key(|e| e.line.unwrap_or(usize::MAX));
    Outcome {
        config,
        errors: ctx.errors,
        warnings: ctx.warnings,
    }
}

/// `jobs:`: exactly one file key, and a file that reads and parses without a single error.
fn jobs(ctx: &mut Ctx<'_>, raw: &RawJobs) -> Option<JobsConfig> {
    let given: Vec<(JobFileFormat, &String)> = [
        (JobFileFormat::Crontab, raw.crontab.as_ref()),
        (JobFileFormat::SystemCrontab, raw.system_crontab.as_ref()),
        (JobFileFormat::JobFile, raw.job_file.as_ref()),
    ]
    .into_iter()
    .filter_map(|(f, p)| p.map(|p| (f, p)))
    .collect();
    let (format, path) = match given[..] {
        [one] => one,
        [] => {
            ctx.error(
                "jobs",
                "name the job file with one of crontab, systemCrontab or jobFile",
            );
            return None;
        }
        [_, (second, _), ..] => {
            ctx.error(
                &format!("jobs.{}", second.key()),
                "only one of crontab, systemCrontab and jobFile may be given",
            );
            return None;
        }
    };
    let key = format!("jobs.{}", format.key());
    if path.trim().is_empty() {
        ctx.error(&key, "must be a file path, not blank");
        return None;
    }
    let path = PathBuf::from(path);
    match super::jobs::load(&path, format) {
        Ok((specs, warnings)) => {
            for w in warnings {
                ctx.warn(&key, w);
            }
            Some(JobsConfig {
                path,
                format,
                specs,
            })
        }
        Err(problems) => {
            for p in problems {
                ctx.error(&key, p);
            }
            None
        }
    }
}

/// An mTLS mesh's `tls:` (rule 2): ca, cert and key, all present and nonblank.
fn tls(ctx: &mut Ctx<'_>, path: &str, raw: Option<&RawTls>) -> Option<TlsPaths> {
    let empty = RawTls::default();
    let raw = raw.unwrap_or(&empty);
    let mut get = |key: &str, value: Option<&String>, why: &str| {
        let full = format!("{path}.{key}");
        let got = nonblank_path(ctx, &full, value, why);
        if got.is_none() && value.is_none() && !ctx.written(&full) {
            ctx.error(&full, format!("is missing: {path} needs ca, cert and key"));
        }
        got
    };
    let ca = get(
        "ca",
        raw.ca.as_ref(),
        "without a CA the listener would accept clients without certificates",
    );
    let cert = get(
        "cert",
        raw.cert.as_ref(),
        "this node's certificate is required",
    );
    let key = get(
        "key",
        raw.key.as_ref(),
        "this node's private key is required",
    );
    Some(TlsPaths {
        ca: ca?,
        cert: cert?,
        key: key?,
    })
}

/// A `peers:` list: each host checked (rule 1), exact duplicates dropped with a warning (the
/// first is kept, so a repeated line cannot inflate N). Returns the kept entries with their
/// index in the file, and how many distinct entries there were, valid or not.
fn peers(ctx: &mut Ctx<'_>, path: &str, raw: &[RawPeer]) -> (Vec<(usize, PeerConfig)>, usize) {
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut kept = Vec::new();
    for (i, peer) in raw.iter().enumerate() {
        let item = format!("{path}[{i}].host");
        if let Some(j) = first.get(peer.host.as_str()) {
            let at = ctx
                .line(&format!("{path}[{j}]"))
                .map(|l| format!(" (line {l})"))
                .unwrap_or_default();
            ctx.warn(
                &item,
                format!(
                    "duplicate of {path}[{j}]{at}; dropped, so it does not count toward the \
                     cluster size"
                ),
            );
            continue;
        }
        first.insert(&peer.host, i);
        if let Some(host) = host_port(ctx, &item, &peer.host) {
            kept.push((i, PeerConfig { host }));
        }
    }
    (kept, first.len())
}

/// Peers that are provably this node (CFG-05): a loopback peer that this node's listener would
/// accept a connection to ([`HostPort::accepts_loopback`]). A loopback peer on another
/// loopback address is another process, even on the same port.
fn self_entries(listen: Option<&HostPort>, peers: &[(usize, PeerConfig)]) -> Vec<(usize, String)> {
    let Some(listen) = listen else {
        return Vec::new();
    };
    peers
        .iter()
        .filter(|(_, p)| listen.accepts_loopback(&p.host))
        .map(|(i, p)| (*i, p.host.to_string()))
        .collect()
}

fn self_entry_message(host: &str, listen: Option<&HostPort>) -> String {
    let listen = listen.map(ToString::to_string).unwrap_or_default();
    format!(
        "{host} is this node itself (a loopback address this node's listener accepts, listen \
         {listen}); list only the OTHER members"
    )
}

/// The `cluster:` section.
fn cluster(ctx: &mut Ctx<'_>, raw: &RawCluster) -> ClusterConfig {
    let backend = raw.backend.unwrap_or_default();
    let mut c = ClusterConfig {
        backend,
        ..ClusterConfig::default()
    };
    timing_and_name(ctx, raw, &mut c);
    // The gossip keys are checked on every backend: a malformed address is a mistake even
    // where it is ignored, and leaving it in would bite on a switch back to gossip.
    let listen = raw
        .listen
        .as_deref()
        .and_then(|l| host_port(ctx, "cluster.listen", l));
    let tls_written = raw.tls.is_some() || ctx.written("cluster.tls");
    let tls_paths = if tls_written {
        tls(ctx, "cluster.tls", raw.tls.as_ref())
    } else {
        None
    };
    let (peers, distinct) = peers(ctx, "cluster.peers", raw.peers.as_deref().unwrap_or(&[]));
    c.observability = observability(ctx, backend, raw.observability.as_ref());
    if backend.is_lease() {
        super::lease::apply(ctx, &mut c, raw);
        return c;
    }
    let elect = raw.elect_leader.unwrap_or(false);
    c.elect_leader = elect;
    c.leader_eligible = raw.leader_eligible.unwrap_or(true);
    if !c.leader_eligible && !elect {
        ctx.warn(
            "cluster.leaderEligible",
            "false has no effect without electLeader: no node leads, every node runs every job",
        );
    }
    c.distribution = raw.distribution.unwrap_or_default();
    let n = distinct + 1;
    if elect {
        election_needs(ctx, raw, tls_written, n);
    } else {
        attestation_needs(ctx, raw, tls_written);
    }
    for (i, host) in self_entries(listen.as_ref(), &peers) {
        let path = format!("cluster.peers[{i}].host");
        let message = self_entry_message(&host, listen.as_ref());
        if elect {
            ctx.error(&path, message);
        } else {
            ctx.warn(&path, message);
        }
    }
    for other in ["kubernetes", "etcd", "filesystem"] {
        let path = format!("cluster.{other}");
        if ctx.written(&path) {
            ctx.warn(&path, format!("is ignored: cluster.backend is {backend}"));
        }
    }
    c.listen = listen;
    c.tls = tls_paths;
    c.peers = peers.into_iter().map(|(_, p)| p).collect();
    c
}

/// `cluster.nodeName`, `interval`, `driftAfter` and `connectTimeout`: blank or zero is an
/// error, an absent key keeps its default.
fn timing_and_name(ctx: &mut Ctx<'_>, raw: &RawCluster, c: &mut ClusterConfig) {
    if let Some(name) = &raw.node_name {
        if name.trim().is_empty() {
            ctx.error(
                "cluster.nodeName",
                "is blank: leave it out for the system hostname, or give a unique stable name",
            );
        } else {
            c.node_name = Some(name.clone());
        }
    }
    if let Some(interval) = raw.interval {
        if interval.is_zero() {
            ctx.error("cluster.interval", "must be more than 0 seconds");
        } else {
            c.interval = interval;
        }
    }
    match raw.drift_after {
        Some(0) => ctx.error("cluster.driftAfter", "must be at least 1 round"),
        Some(n) => c.drift_after = n,
        None => {}
    }
    if let Some(timeout) = raw.connect_timeout {
        if timeout.is_zero() {
            ctx.error("cluster.connectTimeout", "must be more than 0 seconds");
        } else {
            c.connect_timeout = timeout;
        }
    }
}

/// What `electLeader` on the gossip backend needs: the `/peer` listener, the cluster TLS, and a
/// cluster size `n` that a quorum can make sense of.
fn election_needs(ctx: &mut Ctx<'_>, raw: &RawCluster, tls_written: bool, n: usize) {
    if raw.listen.is_none() {
        ctx.error_near(
            "cluster.listen",
            "cluster.electLeader",
            "is required with electLeader on the gossip backend: the mTLS /peer listener \
             peers poll (for example \"0.0.0.0:8443\")",
        );
    }
    if !tls_written {
        ctx.error_near(
            "cluster.tls",
            "cluster.electLeader",
            "is required with electLeader on the gossip backend: ca, cert and key from the \
             dedicated cluster CA",
        );
    }
    let quorum = n / 2 + 1;
    match n {
        1 => ctx.warn(
            "cluster.electLeader",
            "no peers are listed, so the cluster has 1 node with quorum 1 and this node \
             always leads; list every other member under peers",
        ),
        2 => ctx.error(
            "cluster.electLeader",
            "with 2 nodes (1 peer) election is strictly worse than a single replica: quorum \
             is 2 of 2, so losing either node stops every Leader job; use 3 or more nodes, \
             or electLeader: false for attestation only",
        ),
        n if n % 2 == 0 => ctx.warn(
            "cluster.peers",
            format!(
                "the cluster has an even size {n} (quorum {quorum}): it tolerates no more \
                 failures than {} nodes would; prefer an odd size",
                n - 1
            ),
        ),
        _ => {}
    }
}

/// Without `electLeader`: a distribution is inert, and attestation needs a listener and TLS.
fn attestation_needs(ctx: &mut Ctx<'_>, raw: &RawCluster, tls_written: bool) {
    if raw.distribution.is_some() {
        ctx.warn(
            "cluster.distribution",
            "is inert without electLeader: every node runs every job",
        );
    }
    if raw.listen.is_none() || !tls_written {
        ctx.warn(
            "cluster",
            "attestation needs cluster.listen and cluster.tls; without them this node \
             neither serves /peer nor polls its peers",
        );
    }
}

/// `cluster.observability` (rule 3: the mesh gets the same address and TLS checks).
fn observability(
    ctx: &mut Ctx<'_>,
    backend: Backend,
    raw: Option<&RawObservability>,
) -> Option<ObservabilityConfig> {
    const PATH: &str = "cluster.observability";
    let o = raw?;
    let tls_written = o.tls.is_some() || ctx.written("cluster.observability.tls");
    let mesh_keys = o.listen.is_some() || tls_written || o.peers.is_some() || o.interval.is_some();
    if !o.enabled.unwrap_or(true) {
        if mesh_keys {
            ctx.warn(
                PATH,
                "is disabled (enabled: false); its mesh keys are ignored",
            );
        }
        return None;
    }
    let listen = o
        .listen
        .as_deref()
        .and_then(|l| host_port(ctx, "cluster.observability.listen", l));
    let tls_paths = if tls_written {
        tls(ctx, "cluster.observability.tls", o.tls.as_ref())
    } else {
        None
    };
    let (peers, _) = peers(
        ctx,
        "cluster.observability.peers",
        o.peers.as_deref().unwrap_or(&[]),
    );
    if o.interval.is_some_and(|i| i.is_zero()) {
        ctx.error(
            "cluster.observability.interval",
            "must be more than 0 seconds",
        );
    }
    if backend == Backend::Gossip {
        if mesh_keys {
            ctx.warn(
                PATH,
                "on the gossip backend node stats ride the main mesh; listen, tls, peers and \
                 interval here are ignored (write observability: true)",
            );
        }
        return Some(ObservabilityConfig::Marker);
    }
    if o.listen.is_none() {
        ctx.error(
            "cluster.observability.listen",
            format!(
                "is required: backend {backend} has no node-to-node channel, so observability \
                 needs its own gossip mesh (listen, tls, peers)"
            ),
        );
    }
    if !tls_written {
        ctx.error(
            "cluster.observability.tls",
            "is required for the observability mesh: ca, cert and key",
        );
    }
    for (i, host) in self_entries(listen.as_ref(), &peers) {
        let path = format!("cluster.observability.peers[{i}].host");
        ctx.warn(&path, self_entry_message(&host, listen.as_ref()));
    }
    // A mesh with address or TLS errors has those errors only, no advisory on top.
    let (Some(listen), Some(tls)) = (listen, tls_paths) else {
        return None;
    };
    if o.peers.as_deref().is_none_or(<[_]>::is_empty) {
        ctx.warn(
            "cluster.observability.peers",
            "is empty: the observability mesh has no one to poll, so /fleet shows this node alone",
        );
    }
    Some(ObservabilityConfig::Mesh {
        listen,
        tls,
        peers: peers.into_iter().map(|(_, p)| p).collect(),
        interval: o.interval.unwrap_or(Duration::from_secs(30)),
    })
}
