//! Prometheus metrics for `GET /metrics` (inventory §8.4).
//!
//! Two kinds of series live here:
//!
//! - **Cluster gauges** (`cronstable_cluster_*`) mirror pre-derived fields of `GET /cluster`.
//!   They are computed from the status block at scrape time, so a scrape can never disagree
//!   with `/cluster` read at the same moment, and nothing has to keep them in step.
//! - **Counters and a histogram** that only accumulate: leadership and quorum transitions
//!   (counted by the event watcher in [`crate::observe::events`]) and the per-job firing, run, skip and
//!   duration series, fed from every ledger record through [`Metrics::observe`].
//!
//! The `prometheus` crate is used (not `prometheus-client`) because it writes the classic text
//! format (0.0.4) that every Prometheus server and `promtool check metrics` accept as is;
//! `prometheus-client` writes OpenMetrics, whose counter naming (`# TYPE x counter` over an
//! `x_total` sample) `promtool check metrics` rejects.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cronstable_core::{FiringKind, Verdict};
use prometheus::{
    Counter, Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use serde_json::Value;

use crate::ledger::{Event, Record};

/// Every peer status the gossip backend reports; each gets a `cronstable_cluster_peers`
/// series, zero when no peer has it, so an alert on one status never sees a missing series.
const PEER_STATUSES: [&str; 7] = [
    "agreed",
    "syncing",
    "drifted",
    "unreachable",
    "untrusted",
    "self",
    "conflict",
];

/// Run-duration buckets in seconds: from a tenth of a second to about three hours.
const DURATION_BUCKETS: [f64; 12] = [
    0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0,
];

/// The coordinator's metrics. Cheap to clone; clones share the series.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    /// The cluster gauges and transition counters: a few dozen series, encoded per scrape.
    registry: Registry,
    /// The per-job series: about twenty per job, so tens of thousands with a thousand jobs.
    /// Their encoding is cached in `job_text` and redone only after an observation.
    job_registry: Registry,
    /// Bumped by every [`Metrics::observe`] that touched a per-job series.
    job_generation: AtomicU64,
    /// Serialises scrape-time refresh and encoding, so two concurrent scrapes cannot
    /// interleave a reset of a labelled gauge with the other's read. Holds the per-job
    /// series' last encoding and the generation it was made at.
    scrape: Mutex<Option<(u64, Arc<str>)>>,
    enabled: IntGauge,
    manager_up: IntGauge,
    quorate: IntGauge,
    is_leader: IntGauge,
    conflict: IntGaugeVec,
    peers: IntGaugeVec,
    store_verified: IntGaugeVec,
    size: IntGauge,
    quorum: IntGauge,
    leader_info: IntGaugeVec,
    leader_transitions: IntCounter,
    quorum_transitions: IntCounter,
    executor_overdue: IntGauge,
    clock_skew: Gauge,
    /// The per-job series of the moment (next fire, owner), set at each scrape from the job
    /// set and the view, in their own registry.
    now: NowSeries,
    ops: OpsSeries,
    process: ProcessSeries,
    jobs: JobSeries,
}

/// The standard process series every Prometheus client library exports, by their usual names,
/// so existing dashboards and alerts (restart loops: a start time that keeps moving) work as
/// they are.
struct ProcessSeries {
    start: Gauge,
    cpu: Counter,
    resident: IntGauge,
    virt: IntGauge,
    open_fds: IntGauge,
    max_fds: IntGauge,
}

impl ProcessSeries {
    fn register(r: &Registry) -> Self {
        let start = float_gauge(
            r,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
        );
        let cpu = Counter::new(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
        )
        .expect("a valid metric name");
        r.register(Box::new(cpu.clone())).expect("registered once");
        Self {
            start,
            cpu,
            resident: gauge(
                r,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
            ),
            virt: gauge(
                r,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
            ),
            open_fds: gauge(r, "process_open_fds", "Number of open file descriptors."),
            max_fds: gauge(
                r,
                "process_max_fds",
                "Maximum number of open file descriptors.",
            ),
        }
    }
}

/// The per-job series, in their own registry (one label set per job of the job set).
struct JobSeries {
    last_success: GaugeVec,
    last_run: GaugeVec,
    firings: IntCounterVec,
    runs: IntCounterVec,
    skips: IntCounterVec,
    missed: IntCounterVec,
    catch_ups: IntCounterVec,
    given_up: IntCounterVec,
    breaches: IntCounterVec,
    duration: HistogramVec,
}

impl JobSeries {
    fn register(jr: &Registry) -> Self {
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "cronstable_job_run_duration_seconds",
                "How long finished runs of each job took, as the executor measured it.",
            )
            .buckets(DURATION_BUCKETS.to_vec()),
            &["job"],
        )
        .expect("a valid histogram");
        jr.register(Box::new(duration.clone()))
            .expect("registered once");
        Self {
            last_success: float_gauge_vec(
                jr,
                "cronstable_job_last_success_timestamp_seconds",
                "When the newest successful run of each job on this node ended (Unix seconds); \
                 absent until one did. Across the cluster, take the max by job.",
                &["job"],
            ),
            last_run: float_gauge_vec(
                jr,
                "cronstable_job_last_run_timestamp_seconds",
                "When the newest finished run of each job on this node ended (Unix seconds), \
                 labelled with its result: success, failure, timeout or signal (one series per \
                 job).",
                &["job", "result"],
            ),
            firings: counter_vec(
                jr,
                "cronstable_job_firings_total",
                "Scheduled firings this coordinator decided, by verdict.",
                &["job", "verdict"],
            ),
            runs: counter_vec(
                jr,
                "cronstable_job_runs_total",
                "Finished runs by result: success, failure, timeout or signal.",
                &["job", "result"],
            ),
            skips: counter_vec(
                jr,
                "cronstable_job_skips_total",
                "Firings not run on this node, by reason (gate or executor).",
                &["job", "reason"],
            ),
            missed: counter_vec(
                jr,
                "cronstable_job_missed_firings_total",
                "Firings this node's executor owned but could not start in time.",
                &["job"],
            ),
            catch_ups: counter_vec(
                jr,
                "cronstable_job_catch_up_runs_total",
                "Missed instants this node answered RUN as a catch-up (catchUp: latest or all).",
                &["job"],
            ),
            given_up: counter_vec(
                jr,
                "cronstable_job_catch_up_given_up_total",
                "Missed instants this node's catch-up gave up, by reason: window (it left \
                 catchUpWindow unrun), superseded (catchUp latest: a newer missed one runs instead) or \
                 storm_limit (more than catchUpLimit in the window).",
                &["job", "reason"],
            ),
            breaches: counter_vec(
                jr,
                "cronstable_job_expectation_breaches_total",
                "Firings of each job with expect: that broke it, counted once for the cluster on \
                 the node that judged them, by breach: missed (no run succeeded within \
                 completeWithin), duplicated (a Leader firing ran twice) or too_long (a run \
                 passed maxDuration).",
                &["job", "breach"],
            ),
            duration,
        }
    }
}

/// What a scrape shows of one job at this moment, from the job set and the view.
#[derive(Debug, Clone, PartialEq)]
pub struct JobNow {
    /// The job.
    pub job: String,
    /// Its clusterPolicy, as written.
    pub policy: &'static str,
    /// Its next nominal instant (Unix ms); `None` for `@reboot` or a schedule that never fires.
    pub next_fire_ms: Option<i64>,
    /// Whether this node would run its next firing now; `None` for EveryNode jobs, which every
    /// node runs.
    pub is_owner: Option<bool>,
}

/// The per-job series of the moment, refilled at each scrape.
struct NowSeries {
    registry: Registry,
    next_fire: GaugeVec,
    is_owner: IntGaugeVec,
    certificate_expiry: GaugeVec,
}

impl NowSeries {
    fn new() -> Self {
        let registry = Registry::new();
        Self {
            next_fire: float_gauge_vec(
                &registry,
                "cronstable_job_next_fire_timestamp_seconds",
                "The next nominal instant of each job (Unix seconds); absent for @reboot jobs and \
                 schedules that never fire.",
                &["job"],
            ),
            is_owner: gauge_vec(
                &registry,
                "cronstable_job_is_owner",
                "1 when this node would run the job's next firing now (the lease holder, the \
                 leader, or the job's owner under spread), else 0; Leader and PreferLeader jobs \
                 only. Summed across the cluster it is the number of owners.",
                &["job", "policy"],
            ),
            certificate_expiry: float_gauge_vec(
                &registry,
                "cronstable_tls_certificate_expiration_timestamp_seconds",
                "When a TLS certificate file the config names stops being valid (Unix seconds), \
                 read at each scrape: tls is cluster (the gossip mesh), observability or etcd; \
                 file is cert (this node's certificate, the file's first) or ca (the bundle, \
                 its latest). Absent for a file that cannot be read.",
                &["tls", "file"],
            ),
            registry,
        }
    }

    fn set_certificates(&self, certificates: &[crate::observe::certificates::CertificateNow]) {
        self.certificate_expiry.reset();
        for c in certificates {
            self.certificate_expiry
                .with_label_values(&[c.tls, c.file])
                .set(c.not_after_s as f64);
        }
    }

    fn set(&self, jobs: &[JobNow]) {
        self.next_fire.reset();
        self.is_owner.reset();
        for j in jobs {
            if let Some(ms) = j.next_fire_ms {
                self.next_fire
                    .with_label_values(&[&j.job])
                    .set(ms as f64 / 1000.0);
            }
            if let Some(owner) = j.is_owner {
                self.is_owner
                    .with_label_values(&[&j.job, j.policy])
                    .set(i64::from(owner));
            }
        }
    }
}

/// The counters of what the node did besides deciding: reloads, refused calls, statsd
/// datagrams and firing claims.
struct OpsSeries {
    reloads: IntCounterVec,
    refused_calls: IntCounterVec,
    statsd: IntCounterVec,
    claims: IntCounterVec,
}

impl OpsSeries {
    fn register(r: &Registry) -> Self {
        let ops = Self {
            reloads: counter_vec(
                r,
                "cronstable_config_reloads_total",
                "Config reloads (SIGHUP) by result: applied, or refused (a file that is empty or \
                 does not validate, or a change that needs a restart) with the running config kept.",
                &["result"],
            ),
            refused_calls: counter_vec(
                r,
                "cronstable_api_unauthenticated_total",
                "API calls refused for a missing or wrong bearer token, by API (grpc: \
                 api.authToken).",
                &["api"],
            ),
            statsd: counter_vec(
                r,
                "cronstable_statsd_datagrams_total",
                "Datagrams for statsd (statsd:) by result: sent, failed (the host does not \
                 resolve or the send fails) or dropped (the send queue was full).",
                &["result"],
            ),
            claims: counter_vec(
                r,
                "cronstable_firing_claims_total",
                "Per-firing claims this node tried before answering RUN for a scheduled Leader \
                 firing on a lease store, by result: won (created, or this holder's own), taken \
                 (another claim holds the firing: answered SKIP already_ran), failed (not \
                 written: answered DEFER) or given_back (won, but its RUN was never launched: \
                 removed again so the instant is not taken as run).",
                &["result"],
            ),
        };
        // Every result from the start, so a dashboard sees 0 rather than no series.
        let _ = ["applied", "refused"].map(|result| ops.reloads.with_label_values(&[result]));
        ops.refused_calls.with_label_values(&["grpc"]);
        let _ = ["won", "taken", "failed"].map(|result| ops.claims.with_label_values(&[result]));
        ops
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("a valid metric name");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

fn float_gauge(registry: &Registry, name: &str, help: &str) -> Gauge {
    let g = Gauge::new(name, help).expect("a valid metric name");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

fn float_gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    let g = GaugeVec::new(Opts::new(name, help), labels).expect("a valid metric name");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid metric name");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("a valid metric name");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric name");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

impl Metrics {
    /// A fresh set of series, all zero.
    pub fn new() -> Self {
        let r = Registry::new();
        let jr = Registry::new();
        let inner = Inner {
            enabled: gauge(
                &r,
                "cronstable_cluster_enabled",
                "1 when a cluster section is configured, 0 when every node runs every job.",
            ),
            manager_up: gauge(
                &r,
                "cronstable_cluster_manager_up",
                "1 when the cluster manager publishes views (or election is off); 0 while it is \
                 starting or its start fails and is retried (GET /cluster `manager`).",
            ),
            quorate: gauge(
                &r,
                "cronstable_cluster_quorate",
                "1 when this node sees a quorum (gossip) or has a fresh read of the lease store.",
            ),
            is_leader: gauge(
                &r,
                "cronstable_cluster_is_leader",
                "1 when this node is the quorum-gated leader (always 0 in spread mode).",
            ),
            conflict: gauge_vec(
                &r,
                "cronstable_cluster_conflict",
                "1 while a conflict of this kind (name, size, policy) stands Leader jobs down.",
                &["kind"],
            ),
            peers: gauge_vec(
                &r,
                "cronstable_cluster_peers",
                "Configured peers by the status this node last saw.",
                &["status"],
            ),
            store_verified: gauge_vec(
                &r,
                "cronstable_cluster_store_verified",
                "1 while the lease store proves it is this node's (the filesystem store's marker \
                 names its deploymentId), 0 while it does not and the node elects nothing there; \
                 only for a store that has such a check.",
                &["backend"],
            ),
            size: gauge(
                &r,
                "cronstable_cluster_size",
                "The cluster size N this node was configured with.",
            ),
            quorum: gauge(
                &r,
                "cronstable_cluster_quorum",
                "Agreeing members needed for a quorum.",
            ),
            leader_info: gauge_vec(
                &r,
                "cronstable_cluster_leader_info",
                "1 for the leader this node sees; no series when it sees none.",
                &["leader"],
            ),
            leader_transitions: counter(
                &r,
                "cronstable_cluster_leader_transitions_total",
                "Times this node acquired or lost scheduled-job leadership.",
            ),
            quorum_transitions: counter(
                &r,
                "cronstable_cluster_quorum_transitions_total",
                "Times this node gained or lost its quorum.",
            ),
            executor_overdue: gauge(
                &r,
                "cronstable_executor_overdue",
                "1 while an executor on this node has let a Leader job's due firing pass \
                 unasked (wedged or gone); a lease holder gives its lease up meanwhile.",
            ),
            clock_skew: float_gauge(
                &r,
                "cronstable_cluster_clock_skew_seconds",
                "This node's clock minus the lease store's, as the filesystem backend measures \
                 it every round (0 where no store measures it). Past 1.5 s either way the node \
                 does not lead.",
            ),
            now: NowSeries::new(),
            ops: OpsSeries::register(&r),
            process: ProcessSeries::register(&r),
            jobs: JobSeries::register(&jr),
            registry: r,
            job_registry: jr,
            job_generation: AtomicU64::new(0),
            scrape: Mutex::new(None),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Says when this process started and, when `state.path` counts them, how many starts
    /// came before it (`cronstable_restarts_total`, absent without a count).
    pub fn set_process(&self, process: &crate::observe::process::ProcessInfo) {
        let m = &self.inner;
        m.process.start.set(process.started_at_ms as f64 / 1000.0);
        if let Some(restarts) = process.restarts {
            let c = IntCounter::new(
                "cronstable_restarts_total",
                "Times this node's coordinator started before this process, as counted in \
                 state.path (absent without state.path). A climbing count is a restart loop.",
            )
            .expect("a valid metric name");
            // Set once per process; a second call (a builder used twice) keeps the first.
            if m.registry.register(Box::new(c.clone())).is_ok() {
                c.inc_by(restarts);
            }
        }
    }

    /// Counts one change of this node's leadership.
    pub fn leader_transition(&self) {
        self.inner.leader_transitions.inc();
    }

    /// Counts one config reload, `applied` or `refused`.
    pub fn reload(&self, result: &str) {
        self.inner.ops.reloads.with_label_values(&[result]).inc();
    }

    /// Counts one call `api` refused for its bearer token.
    pub fn unauthenticated(&self, api: &str) {
        self.inner.ops.refused_calls.with_label_values(&[api]).inc();
    }

    /// Counts one statsd datagram by `result` (`sent`, `failed`, `dropped`).
    pub fn statsd_datagram(&self, result: &str) {
        self.inner.ops.statsd.with_label_values(&[result]).inc();
    }

    /// Counts one claim attempt by `result` (`won`, `taken`, `failed`).
    pub fn firing_claim(&self, result: &str) {
        self.inner.ops.claims.with_label_values(&[result]).inc();
    }

    /// Sets whether an executor on this node is overdue (`crate::liveness`).
    pub fn set_executor_overdue(&self, overdue: bool) {
        self.inner.executor_overdue.set(i64::from(overdue));
    }

    /// Counts one change of this node's quorum.
    pub fn quorum_transition(&self) {
        self.inner.quorum_transitions.inc();
    }

    /// Counts `n` missed instants of `job` that catch-up gave up, for `reason`.
    pub fn catch_up_given_up(&self, job: &str, reason: &str, n: usize) {
        let m = &self.inner;
        m.jobs
            .given_up
            .with_label_values(&[job, reason])
            .inc_by(n as u64);
        m.job_generation.fetch_add(1, Ordering::Release);
    }

    /// Shows `job`'s expectation breach series, at 0 until one is counted: a rate over a
    /// series that appears with its first breach would miss that breach. Every node shows
    /// them, so a sum over the cluster has every job whichever node judges it.
    pub fn expectations_watched(&self, job: &str) {
        let m = &self.inner;
        for breach in cronstable_core::expect::Breach::ALL {
            m.jobs.breaches.with_label_values(&[job, breach.as_str()]);
        }
        m.job_generation.fetch_add(1, Ordering::Release);
    }

    /// Counts one breach of `job`'s expectation.
    pub fn expectation_breach(&self, job: &str, breach: &str) {
        let m = &self.inner;
        m.jobs.breaches.with_label_values(&[job, breach]).inc();
        m.job_generation.fetch_add(1, Ordering::Release);
    }

    /// Feeds one ledger record into the per-job series.
    pub fn observe(&self, record: &Record) {
        let m = &self.inner;
        let job = record.job.as_str();
        match &record.event {
            Event::Decided { verdict, reason } => {
                if record.kind == FiringKind::CatchUp && *verdict == Verdict::Run {
                    m.jobs.catch_ups.with_label_values(&[job]).inc();
                }
                if record.kind == FiringKind::Scheduled {
                    m.jobs
                        .firings
                        .with_label_values(&[job, verdict.as_str()])
                        .inc();
                }
                if *verdict == Verdict::Skip {
                    m.jobs.skips.with_label_values(&[job, reason.code()]).inc();
                }
            }
            Event::Skipped { reason, .. } => {
                let code = reason.map_or("unknown", |r| r.code());
                m.jobs.skips.with_label_values(&[job, code]).inc();
                if matches!(
                    reason,
                    Some(
                        cronstable_core::Reason::TooLate
                            | cronstable_core::Reason::CoordinatorUnreachable
                    )
                ) {
                    m.jobs.missed.with_label_values(&[job]).inc();
                }
            }
            Event::Finished(end) => {
                let result = end.result();
                m.jobs.runs.with_label_values(&[job, result]).inc();
                let ended = end.finished_at_ms as f64 / 1000.0;
                // One series per job: the newest run's result replaces the one before.
                for other in ["success", "failure", "timeout", "signal"] {
                    if other != result {
                        let _ = m.jobs.last_run.remove_label_values(&[job, other]);
                    }
                }
                m.jobs.last_run.with_label_values(&[job, result]).set(ended);
                if result == "success" {
                    m.jobs.last_success.with_label_values(&[job]).set(ended);
                }
                m.jobs
                    .duration
                    .with_label_values(&[job])
                    .observe(end.duration_ms as f64 / 1000.0);
            }
            Event::Started { .. } | Event::HandedOff { .. } => return,
        }
        // After the series changed: a scrape that reads the new generation encodes them anew.
        m.job_generation.fetch_add(1, Ordering::Release);
    }

    /// The text exposition, with the cluster gauges taken from `cluster`, the `GET /cluster`
    /// body of the same moment, and no per-job series of the moment.
    pub fn render(&self, cluster: &Value) -> String {
        self.render_with(cluster, &[])
    }

    /// [`Self::render`] with each job's series of the moment (next fire, owner) from `jobs`.
    pub fn render_with(&self, cluster: &Value, jobs: &[JobNow]) -> String {
        let m = &self.inner;
        let mut one_scrape = m.scrape.lock().unwrap_or_else(PoisonError::into_inner);
        m.now.set(jobs);
        let flag = |key: &str| i64::from(cluster[key].as_bool().unwrap_or(false));
        let count = |key: &str| cluster[key].as_i64().unwrap_or(0);
        let enabled = cluster["enabled"].as_bool().unwrap_or(false);
        m.enabled.set(i64::from(enabled));
        m.conflict.reset();
        m.peers.reset();
        m.leader_info.reset();
        m.store_verified.reset();
        m.manager_up.set(i64::from(
            !enabled || cluster["manager"].as_str().is_none_or(|s| s == "running"),
        ));
        if enabled {
            m.quorate.set(flag("quorate"));
            m.is_leader.set(flag("is_leader"));
            m.size.set(count("cluster_size"));
            m.quorum.set(count("quorum"));
            let names = cluster["conflict_names"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
            m.conflict
                .with_label_values(&["name"])
                .set(i64::from(names));
            m.conflict
                .with_label_values(&["size"])
                .set(flag("size_conflict"));
            m.conflict
                .with_label_values(&["policy"])
                .set(flag("policy_conflict"));
            for status in PEER_STATUSES {
                m.peers.with_label_values(&[status]).set(0);
            }
            for peer in cluster["peers"].as_array().into_iter().flatten() {
                if let Some(status) = peer["status"].as_str() {
                    m.peers.with_label_values(&[status]).inc();
                }
            }
            if let Some(leader) = cluster["leader"].as_str() {
                m.leader_info.with_label_values(&[leader]).set(1);
            }
            if let Some(verified) = cluster["lease"]["storeVerified"].as_bool() {
                let backend = cluster["backend"].as_str().unwrap_or("unknown");
                m.store_verified
                    .with_label_values(&[backend])
                    .set(i64::from(verified));
            }
            let skew_ms = cluster["lease"]["clockSkewMs"].as_f64().unwrap_or(0.0);
            m.clock_skew.set(skew_ms / 1000.0);
        } else {
            // Without a cluster every node runs every job: it is its own quorum of one.
            m.quorate.set(1);
            m.is_leader.set(0);
            m.size.set(1);
            m.quorum.set(1);
        }
        let usage = crate::observe::process::usage();
        if let Some(cpu) = usage.cpu_seconds {
            let delta = cpu - m.process.cpu.get();
            if delta > 0.0 {
                m.process.cpu.inc_by(delta);
            }
        }
        let set = |g: &IntGauge, v: Option<u64>| {
            if let Some(v) = v {
                g.set(i64::try_from(v).unwrap_or(i64::MAX));
            }
        };
        set(&m.process.resident, usage.resident_bytes);
        set(&m.process.virt, usage.virtual_bytes);
        set(&m.process.open_fds, usage.open_fds);
        set(&m.process.max_fds, usage.max_fds);
        // Read before encoding: an observation made while encoding leaves the text stale.
        let generation = m.job_generation.load(Ordering::Acquire);
        let job_text = match one_scrape.as_ref() {
            Some((cached, text)) if *cached == generation => text.clone(),
            _ => {
                let text: Arc<str> = encode(&m.job_registry).into();
                *one_scrape = Some((generation, text.clone()));
                text
            }
        };
        let mut out = encode(&m.registry);
        out.push_str(&job_text);
        out.push_str(&encode(&m.now.registry));
        out
    }

    /// Shows `certificates` (read at this scrape) in the next render.
    pub fn set_certificates(&self, certificates: &[crate::observe::certificates::CertificateNow]) {
        self.inner.now.set_certificates(certificates);
    }

    /// The content type of [`Self::render`]'s output.
    pub const CONTENT_TYPE: &'static str = "text/plain; version=0.0.4; charset=utf-8";
}

/// One registry's families in the text format.
fn encode(registry: &Registry) -> String {
    let mut out = Vec::new();
    // Encoding into memory only fails on a malformed family, which registration rules out.
    if let Err(e) = TextEncoder::new().encode(&registry.gather(), &mut out) {
        tracing::error!(error = %e, "encoding the metrics failed");
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::RunEnd;
    use cronstable_core::Reason;
    use serde_json::json;

    fn record(event: Event) -> Record {
        Record {
            job: "backup".into(),
            scheduled_at_ms: 0,
            kind: FiringKind::Scheduled,
            attempt: 1,
            node: "a".into(),
            recorded_at_ms: 0,
            event,
        }
    }

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn cluster_gauges_mirror_the_cluster_body() {
        let m = Metrics::new();
        let body = json!({
            "enabled": true, "quorate": true, "is_leader": false, "cluster_size": 3,
            "quorum": 2, "conflict_names": ["n2"], "size_conflict": false,
            "policy_conflict": true, "leader": "n1",
            "peers": [{"status": "agreed"}, {"status": "unreachable"}, {"status": "agreed"}],
        });
        let text = m.render(&body);
        assert_eq!(
            line(&text, "cronstable_cluster_quorate "),
            Some("cronstable_cluster_quorate 1")
        );
        assert!(text.contains("cronstable_cluster_is_leader 0"));
        assert!(text.contains("cronstable_cluster_size 3"));
        assert!(text.contains("cronstable_cluster_quorum 2"));
        assert!(text.contains("cronstable_cluster_conflict{kind=\"name\"} 1"));
        assert!(text.contains("cronstable_cluster_conflict{kind=\"size\"} 0"));
        assert!(text.contains("cronstable_cluster_conflict{kind=\"policy\"} 1"));
        assert!(text.contains("cronstable_cluster_peers{status=\"agreed\"} 2"));
        assert!(text.contains("cronstable_cluster_peers{status=\"unreachable\"} 1"));
        assert!(text.contains("cronstable_cluster_peers{status=\"untrusted\"} 0"));
        assert!(text.contains("cronstable_cluster_leader_info{leader=\"n1\"} 1"));

        // The next scrape sees a new leader and no stale label from the old one.
        let mut body = body;
        body["leader"] = json!("n2");
        let text = m.render(&body);
        assert!(text.contains("cronstable_cluster_leader_info{leader=\"n2\"} 1"));
        assert!(!text.contains("leader=\"n1\""));
        body["leader"] = Value::Null;
        assert!(!m.render(&body).contains("cronstable_cluster_leader_info{"));
        // The filesystem store's clock measure, signed, in seconds; 0 where nothing measures.
        assert!(
            m.render(&body)
                .contains("cronstable_cluster_clock_skew_seconds 0")
        );
        body["lease"] = json!({"clockSkewMs": -5012});
        assert!(
            m.render(&body)
                .contains("cronstable_cluster_clock_skew_seconds -5.012")
        );
        // The store's marker, only where a store checks one.
        assert!(
            !m.render(&body)
                .contains("cronstable_cluster_store_verified{")
        );
        body["backend"] = json!("filesystem");
        body["lease"] = json!({"storeVerified": false});
        assert!(
            m.render(&body)
                .contains("cronstable_cluster_store_verified{backend=\"filesystem\"} 0")
        );
    }

    #[test]
    fn without_a_cluster_the_node_is_its_own_quorum() {
        let text = Metrics::new().render(&json!({"enabled": false, "peers": []}));
        assert!(text.contains("cronstable_cluster_enabled 0"));
        assert!(text.contains("cronstable_cluster_quorate 1"));
        assert!(text.contains("cronstable_cluster_size 1"));
    }

    #[test]
    fn ledger_records_feed_the_job_series() {
        let m = Metrics::new();
        m.observe(&record(Event::Decided {
            verdict: Verdict::Run,
            reason: Reason::Leader,
        }));
        m.observe(&record(Event::Decided {
            verdict: Verdict::Skip,
            reason: Reason::NoQuorum,
        }));
        m.observe(&record(Event::Skipped {
            reason: Some(Reason::TooLate),
            message: "late".into(),
        }));
        for (exit_code, signal, timed_out) in [
            (Some(0), None, false),
            (Some(3), None, false),
            (None, Some(9), false),
            (None, Some(9), true),
        ] {
            m.observe(&record(Event::Finished(RunEnd {
                started_at_ms: 0,
                finished_at_ms: 2000,
                duration_ms: 2000,
                exit_code,
                signal,
                timed_out,
                output_tail: String::new(),
            })));
        }
        m.leader_transition();
        m.quorum_transition();
        m.quorum_transition();
        let text = m.render(&json!({"enabled": false}));
        for expected in [
            "cronstable_job_firings_total{job=\"backup\",verdict=\"run\"} 1",
            "cronstable_job_firings_total{job=\"backup\",verdict=\"skip\"} 1",
            "cronstable_job_skips_total{job=\"backup\",reason=\"no_quorum\"} 1",
            "cronstable_job_skips_total{job=\"backup\",reason=\"too_late\"} 1",
            "cronstable_job_missed_firings_total{job=\"backup\"} 1",
            "cronstable_job_runs_total{job=\"backup\",result=\"success\"} 1",
            "cronstable_job_runs_total{job=\"backup\",result=\"failure\"} 1",
            "cronstable_job_runs_total{job=\"backup\",result=\"signal\"} 1",
            "cronstable_job_runs_total{job=\"backup\",result=\"timeout\"} 1",
            "cronstable_job_run_duration_seconds_count{job=\"backup\"} 4",
            "cronstable_job_run_duration_seconds_bucket{job=\"backup\",le=\"1\"} 0",
            "cronstable_job_run_duration_seconds_bucket{job=\"backup\",le=\"5\"} 4",
            "cronstable_cluster_leader_transitions_total 1",
            "cronstable_cluster_quorum_transitions_total 2",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
    }

    #[test]
    fn a_cached_job_encoding_is_redone_after_an_observation() {
        let m = Metrics::new();
        let off = json!({"enabled": false});
        let finished = || {
            record(Event::Finished(RunEnd {
                started_at_ms: 0,
                finished_at_ms: 0,
                duration_ms: 200,
                exit_code: Some(0),
                signal: None,
                timed_out: false,
                output_tail: String::new(),
            }))
        };
        m.observe(&finished());
        let first = m.render(&off);
        let runs = "cronstable_job_runs_total{job=\"backup\",result=\"success\"}";
        assert_eq!(line(&first, runs), Some(format!("{runs} 1").as_str()));
        // The process series are read anew at every scrape (the RSS moves under the test).
        let steady = |text: &str| -> String {
            text.lines()
                .filter(|l| !l.starts_with("process_"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(
            steady(&m.render(&off)),
            steady(&first),
            "nothing changed: the same text"
        );
        m.observe(&finished());
        let second = m.render(&off);
        assert_eq!(line(&second, runs), Some(format!("{runs} 2").as_str()));
        // The cluster gauges are fresh on every scrape, cached job series or not.
        let on = json!({"enabled": true, "quorate": true, "peers": []});
        assert!(m.render(&on).contains("cronstable_cluster_quorate 1"));
        assert!(m.render(&on).contains(&format!("{runs} 2")));
    }

    fn ended(at_ms: i64, exit_code: i32) -> Record {
        record(Event::Finished(RunEnd {
            started_at_ms: at_ms - 100,
            finished_at_ms: at_ms,
            duration_ms: 100,
            exit_code: Some(exit_code),
            signal: None,
            timed_out: false,
            output_tail: String::new(),
        }))
    }

    /// What alerts on a job's runs are written on: when it last succeeded, and when it last
    /// ran with which result (one series per job, the newest result's).
    #[test]
    fn the_last_success_and_the_last_run_with_its_result() {
        let m = Metrics::new();
        let text = m.render(&json!({}));
        assert!(!text.contains("cronstable_job_last_success_timestamp_seconds{"));
        m.observe(&ended(1_700_000_000_000, 0));
        m.observe(&ended(1_700_000_060_500, 3));
        let text = m.render(&json!({}));
        assert_eq!(
            line(&text, "cronstable_job_last_success_timestamp_seconds{"),
            Some("cronstable_job_last_success_timestamp_seconds{job=\"backup\"} 1700000000")
        );
        let runs: Vec<_> = text
            .lines()
            .filter(|l| l.starts_with("cronstable_job_last_run_timestamp_seconds{"))
            .collect();
        assert_eq!(
            runs,
            [
                "cronstable_job_last_run_timestamp_seconds{job=\"backup\",result=\"failure\"} 1700000060.5"
            ]
        );
    }

    /// The series of the moment follow the job set and the view at each scrape: a job gone
    /// from the set leaves no series behind.
    #[test]
    fn next_fire_and_owner_are_set_per_scrape() {
        let m = Metrics::new();
        let jobs = [
            JobNow {
                job: "backup".into(),
                policy: "Leader",
                next_fire_ms: Some(1_700_000_100_000),
                is_owner: Some(true),
            },
            JobNow {
                job: "clean".into(),
                policy: "EveryNode",
                next_fire_ms: None,
                is_owner: None,
            },
        ];
        let text = m.render_with(&json!({}), &jobs);
        assert!(
            text.contains("cronstable_job_next_fire_timestamp_seconds{job=\"backup\"} 1700000100")
        );
        assert!(text.contains("cronstable_job_is_owner{job=\"backup\",policy=\"Leader\"} 1"));
        assert!(
            !text.contains("job=\"clean\""),
            "no next fire, no owner: no series"
        );
        let text = m.render_with(&json!({}), &jobs[1..]);
        assert!(!text.contains("cronstable_job_is_owner{"), "{text}");
    }
}
