//! The checker's input and output shapes: jobs, runs, periods and exemptions in; per-job and
//! global reports out. JSON field names are camelCase, like the project's public keys, and
//! verdicts are three-valued (`true`, `false`, `"unknown"`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::job::ClusterPolicy;

/// Whether a job reached the system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum Ack {
    /// Acknowledged at `at` (Unix ms): its targets are judged.
    Acked {
        /// When the acknowledgement arrived.
        at: i64,
    },
    /// Unknown whether it was accepted: its runs are reported, not judged.
    Indeterminate,
    /// Definitely rejected: any run of it is a phantom.
    Rejected,
}

/// One job as the workload defined it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckJob {
    /// Unique name.
    pub name: String,
    /// The first nominal instant.
    pub start: i64,
    /// How many firings.
    pub count: u32,
    /// Between firings, ms.
    pub interval_ms: i64,
    /// How late a run may start, ms (ε).
    pub epsilon_ms: i64,
    /// How long a run lasts, ms.
    pub duration_ms: i64,
    /// Its clusterPolicy.
    pub policy: ClusterPolicy,
    /// Its acknowledgement.
    pub ack: Ack,
    /// EveryNode only: the nodes expected to run each firing.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// How late after its nominal instant a run that names that instant (a catch-up) may
    /// still start, ms, beyond ε and the forgiveness; 0 when the job does not catch up.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub catch_up_window_ms: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// One run from a host's log.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// The job's name.
    pub job: String,
    /// The node that ran it.
    pub node: String,
    /// When it started.
    pub start: i64,
    /// When it ended; `None` for a run that never finished (killed, or still running).
    pub end: Option<i64>,
    /// An id from the log, for tie-breaks and reports.
    pub run_id: String,
    /// The nominal instant the run was for, when the log says (`scheduledAt`, Unix ms). Such
    /// a run is judged against that instant alone, however late it started (a catch-up), and
    /// never meets another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_at: Option<i64>,
}

/// A period shown on the timeline (a partition, a kill, a store outage).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Period {
    /// Start, ms.
    pub from: i64,
    /// End, ms.
    pub to: i64,
    /// What it was, e.g. `partition [n1 n2]|[n3 n4 n5]`.
    pub label: String,
}

/// A documented window in which a policy may deviate (a gossip double-run after a partition
/// starts, the convergence hold, a node's own kill window for EveryNode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exemption {
    /// Start, ms.
    pub from: i64,
    /// End, ms.
    pub to: i64,
    /// The policy it applies to.
    pub policy: ClusterPolicy,
    /// EveryNode: only this node's targets; `None` for all.
    #[serde(default)]
    pub node: Option<String>,
    /// Why, e.g. `GSP-121 one interval after the partition`.
    pub reason: String,
}

/// Everything the checker reads.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckInput {
    /// The jobs.
    pub jobs: Vec<CheckJob>,
    /// Every logged run.
    pub runs: Vec<Run>,
    /// When the final read started.
    pub read_time: i64,
    /// When the test started (the timeline's origin).
    pub test_start: i64,
    /// Nemesis periods, for the plot.
    #[serde(default)]
    pub nemesis: Vec<Period>,
    /// Documented exemption windows.
    #[serde(default)]
    pub exempt: Vec<Exemption>,
    /// The final heal; `None` when there was no nemesis (no-wedge then covers every target).
    #[serde(default)]
    pub final_heal: Option<i64>,
    /// How long after the final heal every target must be met again.
    #[serde(default)]
    pub recovery_bound_ms: i64,
    /// Malformed log lines found while reading the runs (reported; they make the verdict
    /// unknown because run data was lost).
    #[serde(default)]
    pub errors: Vec<String>,
}

/// What the lifecycle verdicts need beyond [`CheckInput`]: the Leader `@reboot` one-shots and
/// the grace after each heal for Leader liveness between faults. Kept apart from
/// [`CheckInput`] so inputs written before these verdicts existed stay valid; an empty
/// `Lifecycle` asks for neither verdict and leaves the overall validity as [`check`] gives it.
///
/// [`check`]: super::check
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// Leader `@reboot` jobs of the one job set the run used.
    #[serde(default)]
    pub one_shots: Vec<OneShot>,
    /// Leader liveness between faults: how long after each heal (the end of a nemesis
    /// period) every Leader target must be met again, until the next fault starts. `None`
    /// does not ask for the verdict.
    #[serde(default)]
    pub liveness_grace_ms: Option<i64>,
    /// Nodes started with no way to a quorum (started while cut off, or while every peer or
    /// the store was frozen), each until it was let back: no Leader run may start there.
    #[serde(default)]
    pub cut_off: Vec<CutOff>,
}

/// A node that was started cut off from any quorum, from its start until the fault ended.
/// It never saw a quorum in that span, so no tolerance applies: a Leader tick or a Leader
/// `@reboot` started there ran on a node that could not have been the leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CutOff {
    /// The node.
    pub node: String,
    /// When it was started, ms.
    pub from: i64,
    /// When it was let back (the heal, the thaw), ms.
    pub to: i64,
    /// The fault, for the report.
    pub label: String,
}

/// A Leader run that started on a node cut off from any quorum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CutOffRun {
    /// The job.
    pub job: String,
    /// The run.
    pub run: RunRef,
    /// The fault it ran in.
    pub label: String,
}

/// A Leader `@reboot` job: it has no targets, only a count over the whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OneShot {
    /// The job's name (runs are found by it).
    pub name: String,
    /// Whether a quorum formed at some point under this job set: then it must have run
    /// exactly once, otherwise at most once.
    pub quorum_formed: bool,
}

/// What became of one Leader `@reboot` job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OneShotReport {
    /// At most once, and exactly once when a quorum formed.
    pub valid: bool,
    /// Whether a quorum formed.
    pub quorum_formed: bool,
    /// Every started run (complete or not: a started run had its side effects), by start.
    pub runs: Vec<RunRef>,
}

/// The spans in which Leader liveness was judged, and what was missed in them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LivenessReport {
    /// The grace after each heal.
    pub grace_ms: i64,
    /// `[heal + grace, next fault start)`; the first span opens at `i64::MIN` (before any
    /// fault), the last closes at `i64::MAX` (no further fault).
    pub spans: Vec<(i64, i64)>,
    /// Leader targets judged.
    pub judged: usize,
    /// Of those, missed: `(job, target index in its report)`.
    pub missed: Vec<(String, usize)>,
}

/// A three-valued verdict: `true`, `false` or `"unknown"` in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    /// Holds.
    Valid,
    /// Violated.
    Invalid,
    /// Nothing to judge (no acknowledged jobs, no required targets, data lost).
    Unknown,
}

impl Validity {
    pub(crate) fn of(ok: bool) -> Self {
        if ok { Self::Valid } else { Self::Invalid }
    }

    /// Both hold; `Invalid` wins over `Unknown`.
    pub fn and(self, other: Self) -> Self {
        match (self, other) {
            (Self::Invalid, _) | (_, Self::Invalid) => Self::Invalid,
            (Self::Unknown, _) | (_, Self::Unknown) => Self::Unknown,
            _ => Self::Valid,
        }
    }
}

impl Serialize for Validity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Valid => s.serialize_bool(true),
            Self::Invalid => s.serialize_bool(false),
            Self::Unknown => s.serialize_str("unknown"),
        }
    }
}

/// A run as a report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRef {
    /// The node.
    pub node: String,
    /// Start.
    pub start: i64,
    /// End, if it finished.
    pub end: Option<i64>,
    /// The log's id.
    pub run_id: String,
}

impl From<&Run> for RunRef {
    fn from(r: &Run) -> Self {
        Self {
            node: r.node.clone(),
            start: r.start,
            end: r.end,
            run_id: r.run_id.clone(),
        }
    }
}

/// What became of one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetStatus {
    /// A completed run started in the window.
    Met,
    /// Required, not exempt, and no run: a violation for at-least-once policies.
    Missed,
    /// Exempt and no run: allowed.
    ExemptMissed,
    /// Past the read cutoff: not judged.
    Unrequired,
}

/// One target window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetReport {
    /// Firing index k.
    pub index: u32,
    /// EveryNode: the node this target belongs to.
    pub node: Option<String>,
    /// Window start (the nominal instant).
    pub start: i64,
    /// Window end.
    pub end: i64,
    /// Judged at all (closed before the read, after the acknowledgement).
    pub required: bool,
    /// The exemption that covers it.
    pub exempt: Option<String>,
    /// Met, missed, …
    pub status: TargetStatus,
    /// The run that met it.
    pub run: Option<RunRef>,
    /// Started runs (complete or not) whose start lies in the window.
    pub started_in_window: usize,
}

/// One job's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobReport {
    /// Every verdict that applies to the job's policy holds.
    pub valid: bool,
    /// `merge` when no window nests, else `greedy`.
    pub algorithm: &'static str,
    /// The job.
    pub job: CheckJob,
    /// Every target.
    pub targets: Vec<TargetReport>,
    /// Indices of missed targets (into `targets`).
    pub missed: Vec<usize>,
    /// Completed runs in a window another run already met.
    pub duplicates: Vec<RunRef>,
    /// Completed runs inside no window.
    pub stray: Vec<RunRef>,
    /// Completed runs in a window past the cutoff only.
    pub unrequired: Vec<RunRef>,
    /// Runs that never finished.
    pub incomplete: Vec<RunRef>,
    /// Extra started runs in non-exempt windows (Leader: at-most-once violations).
    pub double_runs: usize,
    /// Extra started runs inside exemptions (allowed, counted).
    pub exempt_double_runs: usize,
    /// Pairs of runs that overlapped in time (Leader).
    pub concurrent_runs: usize,
    /// Leader targets judged for liveness between faults (only when asked).
    pub between_faults: usize,
    /// Of those, the ones without a completed run (indices into `targets`).
    pub missed_between_faults: Vec<usize>,
}

/// Counts over every job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Acknowledged jobs.
    pub jobs_acked: usize,
    /// Of those, valid.
    pub jobs_valid: usize,
    /// Required targets.
    pub targets_required: usize,
    /// Required targets met.
    pub met: usize,
    /// Required, non-exempt targets missed.
    pub missed: usize,
    /// Exempt targets missed.
    pub exempt_missed: usize,
    /// Duplicate runs.
    pub duplicates: usize,
    /// Stray runs.
    pub stray: usize,
    /// Unrequired runs.
    pub unrequired: usize,
    /// Incomplete runs.
    pub incomplete: usize,
    /// Extra started runs in non-exempt windows.
    pub double_runs: usize,
    /// Extra started runs inside exemptions.
    pub exempt_double_runs: usize,
    /// Runs of rejected or unknown jobs.
    pub phantom_runs: usize,
    /// Started runs of Leader `@reboot` jobs.
    pub reboot_runs: usize,
    /// Leader runs (ticks and `@reboot`) started on a node cut off from any quorum.
    pub leader_runs_cut_off: usize,
    /// Leader targets judged for liveness between faults.
    pub liveness_judged: usize,
    /// Of those, missed.
    pub liveness_missed: usize,
}

/// The verdicts over every job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdicts {
    /// PreferLeader and EveryNode met every required, non-exempt target.
    pub at_least_once: Validity,
    /// Leader never ran twice in a non-exempt window.
    pub at_most_once: Validity,
    /// No run outside every window.
    pub no_stray: Validity,
    /// No two runs of a Leader job overlapped.
    pub no_concurrency: Validity,
    /// Every required target after the final heal and the recovery bound was met.
    pub no_wedge: Validity,
    /// Every Leader `@reboot` job started at most once in the run, and exactly once when a
    /// quorum formed; `unknown` when none was declared.
    pub reboot_once: Validity,
    /// Every Leader target between a heal plus the grace and the next fault was met;
    /// `unknown` when not asked or nothing fell in such a span.
    pub leader_liveness: Validity,
    /// No Leader run (tick or `@reboot`) started on a node while it was cut off from any
    /// quorum since its start; `unknown` when no such span was declared.
    pub no_leader_cut_off: Validity,
}

/// The checker's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    /// The AND of the verdicts; `unknown` when nothing could be judged.
    pub valid: Validity,
    /// The read time.
    pub read_time: i64,
    /// The test start.
    pub test_start: i64,
    /// The forgiveness used.
    pub forgiveness_ms: i64,
    /// Counts.
    pub summary: Summary,
    /// Verdicts.
    pub verdicts: Verdicts,
    /// Per job, by name. EveryNode jobs are judged per node inside one report.
    pub jobs: BTreeMap<String, JobReport>,
    /// Runs of jobs whose acknowledgement is unknown.
    pub unjudged_runs: Vec<Run>,
    /// Runs of rejected or never-defined jobs.
    pub phantom_runs: Vec<Run>,
    /// Leader `@reboot` jobs, by name.
    pub one_shots: BTreeMap<String, OneShotReport>,
    /// Leader liveness between faults, when asked.
    pub liveness: Option<LivenessReport>,
    /// Leader runs started on nodes cut off from any quorum.
    pub leader_runs_cut_off: Vec<CutOffRun>,
    /// Problems reading the input.
    pub errors: Vec<String>,
}
