//! Rules for the lease backends: kubernetes, etcd and filesystem (inventory §1.3–1.5, §1.7).

use super::cluster::{
    Backend, ClusterConfig, DEFAULT_ETCD_ELECTION_NAME, DEFAULT_FS_ELECTION_NAME,
    DEFAULT_LEASE_TTL, EtcdConfig, EtcdTls, FilesystemConfig, KubernetesConfig,
    ObservabilityConfig, Topology, renew_request_budget,
};
use super::ctx::{Ctx, nonblank_path, secret};
use super::raw::{RawCluster, RawEtcd, RawFilesystem, RawKubernetes};

/// Fills in `c` for a lease backend, from `raw`.
pub(super) fn apply(ctx: &mut Ctx<'_>, c: &mut ClusterConfig, raw: &RawCluster) {
    let backend = c.backend;
    // CFG-51: choosing a lease backend is the opt-in to leadership.
    if raw.elect_leader == Some(false) {
        ctx.warn(
            "cluster.electLeader",
            format!(
                "false is ignored: backend {backend} always elects a leader; remove the cluster \
                 section to run every job on every node"
            ),
        );
    }
    c.elect_leader = true;
    c.leader_eligible = raw.leader_eligible.unwrap_or(true);
    // CFG-52: a hard error, not a silent fallback to single-leader.
    if raw.distribution == Some(super::cluster::Distribution::Spread) {
        ctx.error(
            "cluster.distribution",
            format!(
                "spread is not available on backend {backend}: one lease holder cannot also be \
                 a per-job owner; remove distribution or use backend gossip"
            ),
        );
    }
    // CFG-50: one advisory naming every ignored gossip key. connectTimeout still times the
    // observability mesh's requests when there is one.
    let has_mesh = matches!(c.observability, Some(ObservabilityConfig::Mesh { .. }));
    let mut ignored: Vec<&str> = ["listen", "tls", "peers", "interval", "driftAfter"]
        .into_iter()
        .filter(|k| ctx.written(&format!("cluster.{k}")))
        .collect();
    if !has_mesh && ctx.written("cluster.connectTimeout") {
        ignored.push("connectTimeout");
    }
    if !ignored.is_empty() {
        ctx.warn(
            "cluster",
            format!(
                "backend {backend} ignores the gossip keys {}: they configure the gossip mesh \
                 only",
                ignored.join(", ")
            ),
        );
    }
    for other in [Backend::Kubernetes, Backend::Etcd, Backend::Filesystem] {
        let path = format!("cluster.{other}");
        if other != backend && ctx.written(&path) {
            ctx.warn(&path, format!("is ignored: cluster.backend is {backend}"));
        }
    }
    match backend {
        Backend::Kubernetes => c.kubernetes = Some(kubernetes(ctx, raw.kubernetes.as_ref())),
        Backend::Etcd => c.etcd = Some(etcd(ctx, raw.etcd.as_ref())),
        Backend::Filesystem => c.filesystem = Some(filesystem(ctx, raw.filesystem.as_ref())),
        Backend::Gossip => {}
    }
}

/// A string key that may be left out but not written blank.
fn nonblank(ctx: &mut Ctx<'_>, path: &str, value: Option<&String>, hint: &str) -> Option<String> {
    match value {
        Some(v) if v.trim().is_empty() => {
            ctx.error(path, format!("is blank: {hint}"));
            None
        }
        other => other.cloned(),
    }
}

/// Checks a Kubernetes object name: a DNS-1123 subdomain (`dots`, at most 253) or label (a
/// namespace, at most 63): lower-case letters, digits and `-`, alphanumeric at both ends.
fn dns_name(ctx: &mut Ctx<'_>, path: &str, value: Option<&String>, max: usize, dots: bool) {
    let Some(v) = value.filter(|v| !v.trim().is_empty()) else {
        return;
    };
    let allowed =
        |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (dots && c == '.');
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if v.len() > max
        || !v.chars().all(allowed)
        || !ends_ok(v.chars().next())
        || !ends_ok(v.chars().last())
    {
        let what = if dots {
            "a DNS-1123 subdomain"
        } else {
            "a DNS-1123 label"
        };
        ctx.error(
            path,
            format!(
                "{v:?} is not a valid Kubernetes name: it must be {what} (lower-case letters, \
                 digits and '-'{}, starting and ending with a letter or digit, at most {max} \
                 characters)",
                if dots { ", '.'" } else { "" }
            ),
        );
    }
}

fn kubernetes(ctx: &mut Ctx<'_>, raw: Option<&RawKubernetes>) -> KubernetesConfig {
    const P: &str = "cluster.kubernetes";
    let mut k = KubernetesConfig::default();
    let Some(r) = raw else { return k };
    let leave_out = "leave it out for the default";
    if let Some(name) = nonblank(
        ctx,
        &format!("{P}.leaseName"),
        r.lease_name.as_ref(),
        leave_out,
    ) {
        k.lease_name = name;
    }
    k.lease_namespace = nonblank(
        ctx,
        &format!("{P}.leaseNamespace"),
        r.lease_namespace.as_ref(),
        "leave it out for the pod's own namespace",
    );
    // The two names go into the Lease's URL path: anything the apiserver would reject (or a
    // `/` that would change the path) is a ConfigError here, not a 404 at run time.
    dns_name(
        ctx,
        &format!("{P}.leaseName"),
        Some(&k.lease_name),
        253,
        true,
    );
    dns_name(
        ctx,
        &format!("{P}.leaseNamespace"),
        k.lease_namespace.as_ref(),
        63,
        false,
    );
    k.identity = nonblank(
        ctx,
        &format!("{P}.identity"),
        r.identity.as_ref(),
        "leave it out to use cluster.nodeName",
    );
    k.kubeconfig = nonblank_path(
        ctx,
        &format!("{P}.kubeconfig"),
        r.kubeconfig.as_ref(),
        "leave it out for in-cluster credentials",
    );
    k.api_server = nonblank(
        ctx,
        &format!("{P}.apiServer"),
        r.api_server.as_ref(),
        leave_out,
    );
    if let Some(url) = &k.api_server
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        ctx.error(
            &format!("{P}.apiServer"),
            format!("{url:?} is not an http(s):// URL"),
        );
    }
    k.client_library = r.client_library.unwrap_or_default();
    k.lease_duration_seconds = r.lease_duration_seconds.unwrap_or(k.lease_duration_seconds);
    k.renew_deadline_seconds = r.renew_deadline_seconds.unwrap_or(k.renew_deadline_seconds);
    k.retry_period_seconds = r.retry_period_seconds.unwrap_or(k.retry_period_seconds);
    // CFG-10, on the effective values (a default can be what breaks an ordering).
    let (lease, renew, retry) = (
        k.lease_duration_seconds,
        k.renew_deadline_seconds,
        k.retry_period_seconds,
    );
    if renew == 0 {
        ctx.error(&format!("{P}.renewDeadlineSeconds"), "must be more than 0");
    }
    if lease <= renew {
        ctx.error(
            &format!("{P}.leaseDurationSeconds"),
            format!("{lease} must be greater than renewDeadlineSeconds ({renew})"),
        );
    }
    if retry == 0 || retry >= renew {
        ctx.error(
            &format!("{P}.retryPeriodSeconds"),
            format!("{retry} must be more than 0 and less than renewDeadlineSeconds ({renew})"),
        );
    }
    if renew.saturating_add(retry) >= lease {
        ctx.error(
            &format!("{P}.leaseDurationSeconds"),
            format!(
                "renewDeadlineSeconds + retryPeriodSeconds ({renew} + {retry}) must be less than \
                 leaseDurationSeconds ({lease}), so a renew that narrowly misses its deadline \
                 still leaves a retry inside the lease"
            ),
        );
    }
    k
}

fn etcd(ctx: &mut Ctx<'_>, raw: Option<&RawEtcd>) -> EtcdConfig {
    const P: &str = "cluster.etcd";
    let empty = RawEtcd::default();
    let r = raw.unwrap_or(&empty);
    let endpoints = r.endpoints.clone().unwrap_or_default();
    if endpoints.is_empty() {
        let anchor = if ctx.written(P) { P } else { "cluster.backend" };
        ctx.error_near(
            &format!("{P}.endpoints"),
            anchor,
            "is required: at least one etcd URL, as http://etcd-0:2379 or https://etcd-0:2379",
        );
    }
    let mut plain_http = Vec::new();
    for (i, url) in endpoints.iter().enumerate() {
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://").inspect(|_| plain_http.push(i)));
        if rest.is_none_or(|host| host.trim().is_empty() || host.contains(char::is_whitespace)) {
            ctx.error(
                &format!("{P}.endpoints[{i}]"),
                format!("{url:?} is not an http:// or https:// URL"),
            );
        }
    }
    let ttl = r.ttl.unwrap_or(DEFAULT_LEASE_TTL);
    if ttl < 3 {
        ctx.error(
            &format!("{P}.ttl"),
            format!("{ttl} is below the minimum of 3 seconds"),
        );
    } else if ttl < 9 {
        // CFG-23: a one-time, non-fatal advisory at load.
        ctx.warn(
            &format!("{P}.ttl"),
            format!(
                "{ttl} s leaves each renew request about {:.1} s ((ttl - ttl/3 - 1 s) / 5); if one \
                 etcd round-trip is slower, a reachable etcd looks unreachable and Leader jobs \
                 fail closed. Raise cluster.etcd.ttl unless etcd is local and fast",
                renew_request_budget(ttl).as_secs_f64()
            ),
        );
    }
    let election_name = nonblank(
        ctx,
        &format!("{P}.electionName"),
        r.election_name.as_ref(),
        "leave it out for the default",
    )
    .unwrap_or_else(|| DEFAULT_ETCD_ELECTION_NAME.to_owned());
    let username = nonblank(
        ctx,
        &format!("{P}.username"),
        r.username.as_ref(),
        "leave it out for a cluster without auth",
    );
    let password_path = format!("{P}.password");
    let password_set = r.password.is_some() || ctx.written(&password_path);
    let password = secret(ctx, &password_path, r.password.as_ref());
    // CFG-21 and its mirror: credentials come as a pair.
    if r.username.is_some() && !password_set {
        ctx.error(
            &format!("{P}.username"),
            "has no password: add password with one of value, fromFile or fromEnvVar",
        );
    }
    if password_set && r.username.is_none() {
        ctx.error(&password_path, "is set without a username");
    }
    // CFG-20: credentials never travel over plain http.
    if (r.username.is_some() || password_set) && !plain_http.is_empty() {
        for i in plain_http {
            ctx.error(
                &format!("{P}.endpoints[{i}]"),
                "is http://, but authentication (username/password) requires every endpoint to \
                 be https://",
            );
        }
    }
    let tls = r.tls.as_ref().map(|t| {
        let why = "leave it out, or name the file";
        let tls = EtcdTls {
            ca: nonblank_path(ctx, &format!("{P}.tls.ca"), t.ca.as_ref(), why),
            cert: nonblank_path(ctx, &format!("{P}.tls.cert"), t.cert.as_ref(), why),
            key: nonblank_path(ctx, &format!("{P}.tls.key"), t.key.as_ref(), why),
        };
        if tls.cert.is_some() != tls.key.is_some() && t.cert.is_some() != t.key.is_some() {
            ctx.error(
                &format!("{P}.tls"),
                "cert and key come as a pair for client-certificate auth",
            );
        }
        tls
    });
    EtcdConfig {
        endpoints,
        election_name,
        ttl,
        username,
        password,
        tls,
    }
}

fn filesystem(ctx: &mut Ctx<'_>, raw: Option<&RawFilesystem>) -> FilesystemConfig {
    const P: &str = "cluster.filesystem";
    let empty = RawFilesystem::default();
    let r = raw.unwrap_or(&empty);
    let path_key = format!("{P}.path");
    let path = nonblank_path(
        ctx,
        &path_key,
        r.path.as_ref(),
        "name the directory on the shared mount",
    );
    if r.path.is_none() && !ctx.written(&path_key) {
        let anchor = if ctx.written(P) { P } else { "cluster.backend" };
        ctx.error_near(
            &path_key,
            anchor,
            "is required for backend filesystem: the directory on the shared mount (S3 Files, \
             EFS, NFSv4) the lease lives in",
        );
    }
    let ttl = r.ttl.unwrap_or(DEFAULT_LEASE_TTL);
    if ttl < 3 {
        ctx.error(
            &format!("{P}.ttl"),
            format!(
                "{ttl} is below the minimum of 3 seconds: the holder keeps the lease only until \
                 ttl - 1 s, so a smaller ttl would expire a freshly won lease"
            ),
        );
    }
    let election_name = nonblank(
        ctx,
        &format!("{P}.electionName"),
        r.election_name.as_ref(),
        "leave it out for the default",
    )
    .unwrap_or_else(|| DEFAULT_FS_ELECTION_NAME.to_owned());
    let deployment_id = nonblank(
        ctx,
        &format!("{P}.deploymentId"),
        r.deployment_id.as_ref(),
        "leave it out (or null) for \"default\"",
    );
    let topology = r.topology.unwrap_or_default();
    if topology == Topology::Auto && cfg!(any(windows, target_os = "macos")) {
        ctx.warn(
            &format!("{P}.topology"),
            "auto means single-node on this platform: its locks only exclude processes on THIS \
             host; set cluster.filesystem.topology: shared if the mount is shared",
        );
    }
    FilesystemConfig {
        path: path.unwrap_or_default(),
        election_name,
        ttl,
        deployment_id,
        topology,
    }
}
