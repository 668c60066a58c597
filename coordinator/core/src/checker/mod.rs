//! The schedule checker: did every job run when it should have, and never twice where it must
//! not? (seed 003; `partition-checker.md` is the spec this follows.)
//!
//! Input is a job set with each job's acknowledgement, the runs the hosts logged, the read time,
//! the nemesis periods and the documented exemption windows. Each job's firings expand into
//! target windows `[t, t + ε + F]` (F, the forgiveness, is 5 s); runs are matched to targets
//! exactly ([`matching`]); unmatched runs are classified as duplicates, unrequired or strays;
//! and each job gets the verdicts its policy promises:
//!
//! - **at-least-once** (PreferLeader, EveryNode per node): every required target outside the
//!   exemptions is met by a completed run;
//! - **at-most-once** (Leader): no target window holds two started runs, except inside an
//!   exemption, where each extra run is counted and reported;
//! - **no-concurrency** (Leader): runs of the job never overlap in time;
//! - **no-stray**: no completed run lies outside every window;
//! - **no-wedge** (every policy): every required target after the final heal plus the recovery
//!   bound is met.
//!
//! A target is *required* when its window closes, and a run started at its last instant would
//! finish, by the read: `t + ε + F + duration ≤ readTime` (D2, the cutoff with F included). Only
//! completed runs meet targets; every started run counts for at-most-once and no-concurrency.
//! With no acknowledged job or no required target the verdict is `unknown`, never a pass. All
//! times are Unix milliseconds.

pub mod matching;
pub mod svg;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::job::ClusterPolicy;

/// The epsilon-forgiveness added to every window, in ms.
pub const FORGIVENESS_MS: i64 = 5_000;

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
    fn of(ok: bool) -> Self {
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
    /// Problems reading the input.
    pub errors: Vec<String>,
}

struct Target {
    index: u32,
    node: Option<String>,
    window: matching::Window,
    required: bool,
    exempt: Option<String>,
}

fn expand(job: &CheckJob, input: &CheckInput, node: Option<&str>) -> Vec<Target> {
    let acked_at = match job.ack {
        Ack::Acked { at } => at,
        _ => i64::MAX,
    };
    (0..job.count)
        .map(|k| {
            let t = job.start + i64::from(k) * job.interval_ms;
            let end = t + job.epsilon_ms + FORGIVENESS_MS;
            let required = end + job.duration_ms <= input.read_time && t >= acked_at;
            let exempt = input
                .exempt
                .iter()
                .find(|e| {
                    e.policy == job.policy
                        && e.node.as_deref().is_none_or(|n| Some(n) == node)
                        && e.from <= end
                        && t <= e.to
                })
                .map(|e| e.reason.clone());
            Target {
                index: k,
                node: node.map(str::to_owned),
                window: (t, end),
                required,
                exempt,
            }
        })
        .collect()
}

/// Matches `targets` to `runs` (completed, sorted by start): first the required non-exempt
/// targets, so an exempt one cannot steal the run a required one needs; then the rest against
/// what is left. Returns the run index per target and the algorithm used.
fn assign(targets: &[Target], runs: &[&Run]) -> (Vec<Option<usize>>, &'static str) {
    let starts: Vec<i64> = runs.iter().map(|r| r.start).collect();
    let all: Vec<_> = targets.iter().map(|t| t.window).collect();
    let algorithm = if matching::nested(&all) {
        "greedy"
    } else {
        "merge"
    };
    let solve = |windows: &[matching::Window], starts: &[i64]| {
        matching::merge(windows, starts)
            .unwrap_or_else(|| matching::greedy_by_deadline(windows, starts))
    };
    let first: Vec<usize> = (0..targets.len())
        .filter(|&i| targets[i].required && targets[i].exempt.is_none())
        .collect();
    let windows: Vec<_> = first.iter().map(|&i| targets[i].window).collect();
    let mut out = vec![None; targets.len()];
    for (slot, m) in first.iter().zip(solve(&windows, &starts)) {
        out[*slot] = m;
    }
    let used: Vec<bool> = {
        let mut u = vec![false; runs.len()];
        out.iter().flatten().for_each(|&r| u[r] = true);
        u
    };
    let left: Vec<usize> = (0..runs.len()).filter(|&r| !used[r]).collect();
    let left_starts: Vec<i64> = left.iter().map(|&r| starts[r]).collect();
    let second: Vec<usize> = (0..targets.len())
        .filter(|&i| targets[i].required && targets[i].exempt.is_some())
        .collect();
    let windows: Vec<_> = second.iter().map(|&i| targets[i].window).collect();
    for (slot, m) in second.iter().zip(solve(&windows, &left_starts)) {
        out[*slot] = m.map(|j| left[j]);
    }
    (out, algorithm)
}

fn inside(w: matching::Window, t: i64) -> bool {
    w.0 <= t && t <= w.1
}

/// Judges one job (for EveryNode, each node's targets and runs separately, in one report).
fn check_job(job: &CheckJob, runs: &[&Run], input: &CheckInput) -> JobReport {
    let groups: Vec<Option<&str>> = if job.policy == ClusterPolicy::EveryNode {
        job.nodes.iter().map(|n| Some(n.as_str())).collect()
    } else {
        vec![None]
    };
    let mut report = JobReport {
        valid: true,
        algorithm: "merge",
        job: job.clone(),
        targets: Vec::new(),
        missed: Vec::new(),
        duplicates: Vec::new(),
        stray: Vec::new(),
        unrequired: Vec::new(),
        incomplete: Vec::new(),
        double_runs: 0,
        exempt_double_runs: 0,
        concurrent_runs: 0,
    };
    for node in groups {
        let mine: Vec<&Run> = runs
            .iter()
            .copied()
            .filter(|r| node.is_none_or(|n| r.node == n))
            .collect();
        let mut complete: Vec<&Run> = mine.iter().copied().filter(|r| r.end.is_some()).collect();
        complete.sort_by(|a, b| (a.start, &a.node, &a.run_id).cmp(&(b.start, &b.node, &b.run_id)));
        report.incomplete.extend(
            mine.iter()
                .filter(|r| r.end.is_none())
                .map(|r| RunRef::from(*r)),
        );
        let targets = expand(job, input, node);
        let (assigned, algorithm) = assign(&targets, &complete);
        if algorithm == "greedy" {
            report.algorithm = "greedy";
        }
        let mut matched = vec![false; complete.len()];
        assigned.iter().flatten().for_each(|&r| matched[r] = true);
        for (r, run) in complete.iter().enumerate().filter(|(r, _)| !matched[*r]) {
            let in_judged = targets
                .iter()
                .any(|t| t.required && inside(t.window, run.start));
            let in_unrequired = targets
                .iter()
                .any(|t| !t.required && inside(t.window, run.start));
            let _ = r;
            if in_judged {
                report.duplicates.push(RunRef::from(*run));
            } else if in_unrequired {
                report.unrequired.push(RunRef::from(*run));
            } else {
                report.stray.push(RunRef::from(*run));
            }
        }
        for (t, m) in targets.iter().zip(&assigned) {
            let started = mine.iter().filter(|r| inside(t.window, r.start)).count();
            if job.policy == ClusterPolicy::Leader && started > 1 {
                if t.exempt.is_some() {
                    report.exempt_double_runs += started - 1;
                } else {
                    report.double_runs += started - 1;
                }
            }
            let status = match (m, t.required, &t.exempt) {
                (Some(_), _, _) => TargetStatus::Met,
                (None, false, _) => TargetStatus::Unrequired,
                (None, true, Some(_)) => TargetStatus::ExemptMissed,
                (None, true, None) => TargetStatus::Missed,
            };
            if status == TargetStatus::Missed {
                report.missed.push(report.targets.len());
            }
            report.targets.push(TargetReport {
                index: t.index,
                node: t.node.clone(),
                start: t.window.0,
                end: t.window.1,
                required: t.required,
                exempt: t.exempt.clone(),
                status,
                run: m.map(|r| RunRef::from(complete[r])),
                started_in_window: started,
            });
        }
        if job.policy == ClusterPolicy::Leader {
            let mut started: Vec<&Run> = mine.clone();
            started.sort_by_key(|r| r.start);
            let mut open_until = i64::MIN;
            for r in started {
                if r.start < open_until {
                    report.concurrent_runs += 1;
                }
                open_until = open_until.max(r.end.unwrap_or(input.read_time));
            }
        }
    }
    let v = job_verdicts(&report, input);
    report.valid = [
        v.at_least_once,
        v.at_most_once,
        v.no_stray,
        v.no_concurrency,
        v.no_wedge,
    ]
    .iter()
    .all(|v| *v != Validity::Invalid);
    report
}

fn job_verdicts(r: &JobReport, input: &CheckInput) -> Verdicts {
    let leader = r.job.policy == ClusterPolicy::Leader;
    let heal = input.final_heal.unwrap_or(input.test_start) + input.recovery_bound_ms;
    let after_heal: Vec<&TargetReport> = r
        .targets
        .iter()
        .filter(|t| t.required && t.exempt.is_none() && t.start >= heal)
        .collect();
    Verdicts {
        at_least_once: if leader {
            Validity::Valid
        } else {
            Validity::of(r.missed.is_empty())
        },
        at_most_once: Validity::of(!leader || r.double_runs == 0),
        no_stray: Validity::of(r.stray.is_empty()),
        no_concurrency: Validity::of(!leader || r.concurrent_runs == 0),
        no_wedge: if after_heal.is_empty() {
            Validity::Unknown
        } else {
            Validity::of(after_heal.iter().all(|t| t.status == TargetStatus::Met))
        },
    }
}

/// Checks a run history against its jobs.
pub fn check(input: &CheckInput) -> CheckReport {
    let mut by_job: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for r in &input.runs {
        by_job.entry(r.job.as_str()).or_default().push(r);
    }
    let mut report = CheckReport {
        valid: Validity::Unknown,
        read_time: input.read_time,
        test_start: input.test_start,
        forgiveness_ms: FORGIVENESS_MS,
        summary: Summary::default(),
        verdicts: Verdicts {
            at_least_once: Validity::Valid,
            at_most_once: Validity::Valid,
            no_stray: Validity::Valid,
            no_concurrency: Validity::Valid,
            no_wedge: Validity::Unknown,
        },
        jobs: BTreeMap::new(),
        unjudged_runs: Vec::new(),
        phantom_runs: Vec::new(),
        errors: input.errors.clone(),
    };
    let mut any_wedge_known = false;
    let mut wedge = Validity::Valid;
    for job in &input.jobs {
        let runs = by_job.remove(job.name.as_str()).unwrap_or_default();
        match job.ack {
            Ack::Indeterminate => report.unjudged_runs.extend(runs.into_iter().cloned()),
            Ack::Rejected => report.phantom_runs.extend(runs.into_iter().cloned()),
            Ack::Acked { .. } => {
                let r = check_job(job, &runs, input);
                let v = job_verdicts(&r, input);
                let s = &mut report.summary;
                s.jobs_acked += 1;
                s.jobs_valid += usize::from(r.valid);
                for t in &r.targets {
                    s.targets_required += usize::from(t.required);
                    s.met += usize::from(t.required && t.status == TargetStatus::Met);
                    s.missed += usize::from(t.status == TargetStatus::Missed);
                    s.exempt_missed += usize::from(t.status == TargetStatus::ExemptMissed);
                }
                s.duplicates += r.duplicates.len();
                s.stray += r.stray.len();
                s.unrequired += r.unrequired.len();
                s.incomplete += r.incomplete.len();
                s.double_runs += r.double_runs;
                s.exempt_double_runs += r.exempt_double_runs;
                let vs = &mut report.verdicts;
                vs.at_least_once = vs.at_least_once.and(v.at_least_once);
                vs.at_most_once = vs.at_most_once.and(v.at_most_once);
                vs.no_stray = vs.no_stray.and(v.no_stray);
                vs.no_concurrency = vs.no_concurrency.and(v.no_concurrency);
                if v.no_wedge != Validity::Unknown {
                    any_wedge_known = true;
                    wedge = wedge.and(v.no_wedge);
                }
                report.jobs.insert(job.name.clone(), r);
            }
        }
    }
    // Runs of jobs nobody defined are phantoms, never silently dropped.
    report
        .phantom_runs
        .extend(by_job.into_values().flatten().cloned());
    report.summary.phantom_runs = report.phantom_runs.len();
    report.verdicts.no_wedge = if any_wedge_known {
        wedge
    } else {
        Validity::Unknown
    };
    let v = report.verdicts;
    let all = v
        .at_least_once
        .and(v.at_most_once)
        .and(v.no_stray)
        .and(v.no_concurrency)
        .and(v.no_wedge)
        .and(Validity::of(report.phantom_runs.is_empty()));
    report.valid = if report.summary.jobs_acked == 0
        || report.summary.targets_required == 0
        || (!input.errors.is_empty() && all != Validity::Invalid)
    {
        if all == Validity::Invalid {
            Validity::Invalid
        } else {
            Validity::Unknown
        }
    } else {
        all
    };
    report
}
