//! The schedule checker: did every job run when it should have, and never twice where it must
//! not? (seed 003; `partition-checker.md` is the spec this follows.)
//!
//! Input is a job set with each job's acknowledgement, the runs the hosts logged, the read time,
//! the nemesis periods and the documented exemption windows. Each job's firings expand into
//! target windows `[t, t + ε + F]` (F, the forgiveness, is 5 s); runs are matched to targets
//! exactly ([`matching`]), except that a run whose log names its nominal instant
//! (`scheduledAt`) meets that instant's target alone, even started up to the job's
//! `catchUpWindowMs` late (a catch-up); unmatched runs are classified as duplicates, unrequired
//! or strays;
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
//! Two lifecycle verdicts are judged only when a [`Lifecycle`] asks for them ([`check_with`]):
//!
//! - **reboot-once** (Leader `@reboot`): under one job set the one-shot starts at most once in
//!   the whole run, and exactly once when a quorum ever formed. Every started run counts;
//! - **leader-liveness** (Leader): between faults, not only after the last one. From each heal
//!   (the end of a nemesis period; overlapping periods are one fault) plus a grace, until the
//!   next fault starts, every required Leader target is met. A target is judged when its
//!   nominal instant lies in such a span and the span lasts at least ε past it, so a healthy
//!   leader had the whole of ε to start the run before the next fault. Exemptions do not apply:
//!   the grace is the whole allowance, which is what the verdict is for;
//! - **no-leader-cut-off** (Leader, ticks and `@reboot`): a node started while cut off from
//!   any quorum (its host isolated, its store unreachable, every peer frozen) starts no Leader
//!   run until it is let back. It never saw a quorum, so no tolerance applies; a lone run there
//!   is no double run when nobody else could run either, which is why at-most-once alone
//!   does not see it.
//!
//! A target is *required* when its window closes, and a run started at its last instant would
//! finish, by the read: `t + ε + F + duration ≤ readTime` (D2, the cutoff with F included). Only
//! completed runs meet targets; every started run counts for at-most-once and no-concurrency.
//! With no acknowledged job or no required target the verdict is `unknown`, never a pass. All
//! times are Unix milliseconds.

pub mod matching;
mod model;
pub mod svg;

pub use model::*;

use std::collections::BTreeMap;

use crate::job::ClusterPolicy;

/// The epsilon-forgiveness added to every window, in ms.
pub const FORGIVENESS_MS: i64 = 5_000;

#[derive(Clone)]
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

/// How a run relates to a job's targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fit {
    /// It does not name its instant: matched by its start time.
    Loose,
    /// It names the instant of target `k` and started within ε, the forgiveness and the
    /// job's catch-up window of it (and no more than the forgiveness before it).
    Named(usize),
    /// It names the instant of target `k` but started outside that allowance: it meets
    /// nothing (a stray), yet it is a start of that firing, so a second one is a double run.
    Late(usize),
    /// It names an instant the job does not have: a stray.
    Misfit,
}

fn fit(job: &CheckJob, run: &Run) -> Fit {
    let Some(at) = run.scheduled_at else {
        return Fit::Loose;
    };
    let offset = at - job.start;
    let k = match job.interval_ms {
        0 => (offset == 0).then_some(0),
        step => (offset >= 0 && offset % step == 0).then(|| offset / step),
    };
    let Some(k) = k
        .filter(|&k| k < i64::from(job.count))
        .and_then(|k| usize::try_from(k).ok())
    else {
        return Fit::Misfit;
    };
    let allowed = job.epsilon_ms + FORGIVENESS_MS + job.catch_up_window_ms;
    if (-FORGIVENESS_MS..=allowed).contains(&(run.start - at)) {
        Fit::Named(k)
    } else {
        Fit::Late(k)
    }
}

/// Matches one group's targets to its completed runs (sorted by start): a run that names its
/// instant meets that target (the earliest such run) when the target is required; the loose
/// runs are matched by start time ([`assign`]) to the targets left open.
fn assign_group(
    targets: &[Target],
    complete: &[&Run],
    fits: &[Fit],
) -> (Vec<Option<usize>>, &'static str) {
    let mut out = vec![None; targets.len()];
    for (r, f) in fits.iter().enumerate() {
        if let Fit::Named(k) = *f
            && targets[k].required
            && out[k].is_none()
        {
            out[k] = Some(r);
        }
    }
    let loose: Vec<usize> = (0..complete.len())
        .filter(|&r| fits[r] == Fit::Loose)
        .collect();
    let open: Vec<usize> = (0..targets.len()).filter(|&k| out[k].is_none()).collect();
    let open_targets: Vec<Target> = open.iter().map(|&k| targets[k].clone()).collect();
    let loose_runs: Vec<&Run> = loose.iter().map(|&r| complete[r]).collect();
    let (matched, algorithm) = assign(&open_targets, &loose_runs);
    for (k, m) in open.iter().zip(matched) {
        out[*k] = m.map(|j| loose[j]);
    }
    (out, algorithm)
}

fn inside(w: matching::Window, t: i64) -> bool {
    w.0 <= t && t <= w.1
}

/// The spans in which Leader liveness is judged: from each heal plus `grace_ms` to the start of
/// the next fault. Periods that overlap or touch count as one fault; the first span opens
/// before any fault (`i64::MIN`), the last never closes (`i64::MAX`).
pub fn live_spans(nemesis: &[Period], grace_ms: i64) -> Vec<(i64, i64)> {
    let mut periods: Vec<(i64, i64)> = nemesis.iter().map(|p| (p.from, p.to)).collect();
    periods.sort_unstable();
    let mut spans = Vec::new();
    let mut open = i64::MIN;
    let mut busy_until = i64::MIN;
    for (from, to) in periods {
        if from > busy_until && open < from {
            spans.push((open, from));
        }
        busy_until = busy_until.max(to);
        open = busy_until.saturating_add(grace_ms);
    }
    spans.push((open, i64::MAX));
    spans
}

fn judged_for_liveness(spans: &[(i64, i64)], t: i64, epsilon_ms: i64) -> bool {
    spans
        .iter()
        .any(|&(from, to)| from <= t && t.saturating_add(epsilon_ms) <= to)
}

/// Judges one job (for EveryNode, each node's targets and runs separately, in one report).
/// `spans` are the liveness spans when the liveness verdict is asked for.
fn check_job(
    job: &CheckJob,
    runs: &[&Run],
    input: &CheckInput,
    spans: Option<&[(i64, i64)]>,
) -> JobReport {
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
        between_faults: 0,
        missed_between_faults: Vec::new(),
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
        let fits: Vec<Fit> = complete.iter().map(|r| fit(job, r)).collect();
        let (assigned, algorithm) = assign_group(&targets, &complete, &fits);
        if algorithm == "greedy" {
            report.algorithm = "greedy";
        }
        let mut matched = vec![false; complete.len()];
        assigned.iter().flatten().for_each(|&r| matched[r] = true);
        for (r, run) in complete.iter().enumerate().filter(|(r, _)| !matched[*r]) {
            let (in_judged, in_unrequired) = match fits[r] {
                Fit::Loose => (
                    targets
                        .iter()
                        .any(|t| t.required && inside(t.window, run.start)),
                    targets
                        .iter()
                        .any(|t| !t.required && inside(t.window, run.start)),
                ),
                Fit::Named(k) => (targets[k].required, !targets[k].required),
                Fit::Late(_) | Fit::Misfit => (false, false),
            };
            if in_judged {
                report.duplicates.push(RunRef::from(*run));
            } else if in_unrequired {
                report.unrequired.push(RunRef::from(*run));
            } else {
                report.stray.push(RunRef::from(*run));
            }
        }
        for (k, (t, m)) in targets.iter().zip(&assigned).enumerate() {
            let started = mine
                .iter()
                .filter(|r| match fit(job, r) {
                    Fit::Loose => inside(t.window, r.start),
                    Fit::Named(n) | Fit::Late(n) => n == k,
                    Fit::Misfit => false,
                })
                .count();
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
            let judged = job.policy == ClusterPolicy::Leader
                && t.required
                && spans.is_some_and(|s| judged_for_liveness(s, t.window.0, job.epsilon_ms));
            if judged {
                report.between_faults += 1;
                if m.is_none() {
                    report.missed_between_faults.push(report.targets.len());
                }
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
        v.leader_liveness,
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
        reboot_once: Validity::Unknown,
        no_leader_cut_off: Validity::Unknown,
        leader_liveness: if r.between_faults == 0 {
            Validity::Unknown
        } else {
            Validity::of(r.missed_between_faults.is_empty())
        },
    }
}

/// Checks a run history against its jobs (the lifecycle verdicts are not asked for; see
/// [`check_with`]).
pub fn check(input: &CheckInput) -> CheckReport {
    check_with(input, &Lifecycle::default())
}

/// [`check`] plus the lifecycle verdicts `lifecycle` asks for: reboot-once for its one-shots
/// and Leader liveness between faults when it gives a grace. A verdict asked for joins the
/// overall validity (an asked one with nothing to judge makes it `unknown`); one not asked for
/// is `unknown` and left out.
pub fn check_with(input: &CheckInput, lifecycle: &Lifecycle) -> CheckReport {
    let mut by_job: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for r in &input.runs {
        by_job.entry(r.job.as_str()).or_default().push(r);
    }
    let spans = lifecycle
        .liveness_grace_ms
        .map(|g| live_spans(&input.nemesis, g));
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
            reboot_once: Validity::Unknown,
            leader_liveness: Validity::Unknown,
            no_leader_cut_off: Validity::Unknown,
        },
        jobs: BTreeMap::new(),
        unjudged_runs: Vec::new(),
        phantom_runs: Vec::new(),
        one_shots: BTreeMap::new(),
        liveness: None,
        leader_runs_cut_off: Vec::new(),
        errors: input.errors.clone(),
    };
    // Leader runs on nodes cut off from any quorum: ticks of Leader jobs and the one-shots.
    let leader_names: Vec<&str> = input
        .jobs
        .iter()
        .filter(|j| j.policy == ClusterPolicy::Leader && matches!(j.ack, Ack::Acked { .. }))
        .map(|j| j.name.as_str())
        .chain(lifecycle.one_shots.iter().map(|o| o.name.as_str()))
        .collect();
    for c in &lifecycle.cut_off {
        for r in &input.runs {
            if r.node == c.node
                && c.from <= r.start
                && r.start <= c.to
                && leader_names.contains(&r.job.as_str())
            {
                report.leader_runs_cut_off.push(CutOffRun {
                    job: r.job.clone(),
                    run: RunRef::from(r),
                    label: c.label.clone(),
                });
            }
        }
    }
    report
        .leader_runs_cut_off
        .sort_by(|a, b| (a.run.start, &a.run.node).cmp(&(b.run.start, &b.run.node)));
    report.summary.leader_runs_cut_off = report.leader_runs_cut_off.len();
    if !lifecycle.cut_off.is_empty() {
        report.verdicts.no_leader_cut_off = Validity::of(report.leader_runs_cut_off.is_empty());
    }
    // Leader @reboot one-shots: every started run counts (D4), over the whole run.
    for shot in &lifecycle.one_shots {
        let mut runs: Vec<RunRef> = by_job
            .remove(shot.name.as_str())
            .unwrap_or_default()
            .into_iter()
            .map(RunRef::from)
            .collect();
        runs.sort_by(|a, b| (a.start, &a.node, &a.run_id).cmp(&(b.start, &b.node, &b.run_id)));
        let valid = runs.len() <= 1 && (!shot.quorum_formed || runs.len() == 1);
        report.summary.reboot_runs += runs.len();
        report.one_shots.insert(
            shot.name.clone(),
            OneShotReport {
                valid,
                quorum_formed: shot.quorum_formed,
                runs,
            },
        );
    }
    if !lifecycle.one_shots.is_empty() {
        report.verdicts.reboot_once = Validity::of(report.one_shots.values().all(|o| o.valid));
    }
    let mut liveness = spans.as_ref().map(|s| LivenessReport {
        grace_ms: lifecycle.liveness_grace_ms.unwrap_or_default(),
        spans: s.clone(),
        judged: 0,
        missed: Vec::new(),
    });
    let mut liveness_verdict = Validity::Unknown;
    let mut any_wedge_known = false;
    let mut wedge = Validity::Valid;
    for job in &input.jobs {
        let runs = by_job.remove(job.name.as_str()).unwrap_or_default();
        match job.ack {
            Ack::Indeterminate => report.unjudged_runs.extend(runs.into_iter().cloned()),
            Ack::Rejected => report.phantom_runs.extend(runs.into_iter().cloned()),
            Ack::Acked { .. } => {
                let r = check_job(job, &runs, input, spans.as_deref());
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
                if let Some(l) = liveness.as_mut() {
                    l.judged += r.between_faults;
                    l.missed.extend(
                        r.missed_between_faults
                            .iter()
                            .map(|&i| (job.name.clone(), i)),
                    );
                    s.liveness_judged += r.between_faults;
                    s.liveness_missed += r.missed_between_faults.len();
                    if v.leader_liveness != Validity::Unknown {
                        liveness_verdict = if liveness_verdict == Validity::Unknown {
                            v.leader_liveness
                        } else {
                            liveness_verdict.and(v.leader_liveness)
                        };
                    }
                }
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
    report.verdicts.leader_liveness = liveness_verdict;
    report.liveness = liveness;
    let v = report.verdicts;
    let mut all = v
        .at_least_once
        .and(v.at_most_once)
        .and(v.no_stray)
        .and(v.no_concurrency)
        .and(v.no_wedge)
        .and(Validity::of(report.phantom_runs.is_empty()));
    if !lifecycle.one_shots.is_empty() {
        all = all.and(v.reboot_once);
    }
    if lifecycle.liveness_grace_ms.is_some() {
        all = all.and(v.leader_liveness);
    }
    if !lifecycle.cut_off.is_empty() {
        all = all.and(v.no_leader_cut_off);
    }
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
