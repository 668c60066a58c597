//! The expectation judge: for every job with `expect:`, the node that owns the job watches each
//! of its firings and reports a breach (`missed`, `duplicated`, `too_long`, see
//! [`cronstable_core::expect`]) once: one WARNING line, one count in
//! `cronstable_job_expectation_breaches_total{job, breach}`, one `job_expectation` webhook event
//! with the firing ID, and a mark on `GET /jobs` and the dashboard.
//!
//! **Who judges.** A Leader or PreferLeader job is judged by its owner (the lease holder, the
//! gossip leader, or the job's owner under `distribution: spread`), so the cluster sends one
//! event per firing, not one per node. An EveryNode job, or any job with election off, runs on
//! every node as its own firing, so each node judges its own runs. A firing is judged `missed`
//! only by the node that owns the job at the moment of judgement (its deadline plus the
//! [grace](grace)): a handover between two judgements does not report it twice, and a node that
//! came to own the job after a firing's deadline leaves that firing to the one before it.
//!
//! **What it sees.** Its own ledger, always. On gossip, each peer's first-hand report of its
//! recent runs of the job (on `/peer`, for jobs with `expect` only, see
//! [`crate::gossip::wire::RecentRun`]). On etcd and filesystem, what the other nodes wrote to
//! the store. On Kubernetes, and with election off, only its own runs: a Leader firing that ran
//! on the previous holder before a handover can be reported missed by the next.
//!
//! **What it does not judge.** Instants from before this process first saw the job (what ran
//! before it started is not all known to it), `@reboot` one-shots and manual starts. A run's
//! start and end times are the times of the node that ran it, so a clock off by more than the
//! grace can make a run that finished in time look late.
//!
//! Nothing here feeds a decision: the judge only reads.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use cronstable_core::expect::{Breach, Expectation, Finding, Look, RunSeen, judge};
use cronstable_core::schedule::Schedule;
use cronstable_core::{ClusterPolicy, JobSpec};

use crate::clock::Now;
pub use crate::observe::breaches::{BreachNote, Findings};
use crate::state::CoordinatorState;
use crate::status::ClusterStatus;

/// How often the judge looks.
pub const PASS_EVERY: Duration = Duration::from_secs(1);

/// How long a run's end takes to reach the judge from a store: the writer's queue and one pass.
pub const STORE_GRACE: Duration = Duration::from_secs(3);

/// The most firings of one job watched at once: a per-second schedule with a day's
/// `completeWithin` would otherwise keep 86,400. Past it the oldest are dropped unjudged, with
/// one WARNING per job.
pub const MAX_OPEN: usize = 4096;

/// How long a finished run may take to be seen by the judge on this view: on gossip a peer's
/// report is polled once an interval, so two intervals and a second; elsewhere
/// [`STORE_GRACE`].
pub fn grace(status: &ClusterStatus) -> Duration {
    match status {
        ClusterStatus::Gossip(g) => 2 * g.interval + Duration::from_secs(1),
        _ => STORE_GRACE,
    }
}

/// One watched job.
struct Watched {
    written: (String, Option<String>, Expectation, ClusterPolicy),
    schedule: Option<Schedule>,
    /// When this process first saw the job as it is written now (Unix ms).
    known_since_ms: i64,
    /// Since when this node owns it (Unix ms); `None` while another node does.
    owned_since_ms: Option<i64>,
    /// Instants up to here are watched already.
    cursor_ms: i64,
    /// Watched firings, by instant.
    open: BTreeMap<i64, Open>,
    /// The MAX_OPEN warning was given.
    warned_full: bool,
}

impl Watched {
    fn new(spec: &JobSpec, now_ms: i64) -> Self {
        Self {
            written: written(spec),
            schedule: Schedule::parse(&spec.schedule, spec.timezone.as_deref()).ok(),
            known_since_ms: now_ms,
            owned_since_ms: None,
            cursor_ms: now_ms,
            open: BTreeMap::new(),
            warned_full: false,
        }
    }

    /// Watches the instants after the cursor up to `now_ms`.
    fn open_new(&mut self, job: &str, now_ms: i64) {
        let Some(schedule) = &self.schedule else {
            return;
        };
        let from = self.cursor_ms.max(self.known_since_ms - 1);
        let mut at = DateTime::<Utc>::from_timestamp_millis(from);
        while let Some(next) = at.and_then(|t| schedule.next_after(t)) {
            let ms = next.timestamp_millis();
            if ms > now_ms {
                break;
            }
            self.open.insert(ms, Open::default());
            at = Some(next);
        }
        self.cursor_ms = now_ms;
        while self.open.len() > MAX_OPEN {
            self.open.pop_first();
            if !std::mem::replace(&mut self.warned_full, true) {
                tracing::warn!(
                    job,
                    max = MAX_OPEN,
                    "expectations: more firings to watch than the limit; the oldest go unjudged"
                );
            }
        }
    }
}

/// What is known of one watched firing.
#[derive(Debug, Default)]
struct Open {
    /// The breaches already reported (or left to the judge before this one).
    reported: BTreeSet<Breach>,
    /// A run succeeded by the deadline: `completeWithin` is met for good, even once the bounded
    /// ledger or a peer's report forgets the run.
    met: bool,
}

fn written(spec: &JobSpec) -> (String, Option<String>, Expectation, ClusterPolicy) {
    (
        spec.schedule.clone(),
        spec.timezone.clone(),
        spec.expect.unwrap_or_default(),
        spec.cluster_policy,
    )
}

/// The judge's memory between passes.
#[derive(Default)]
pub struct Judge {
    jobs: HashMap<String, Watched>,
    /// The last error reading the store's run records, logged once per change.
    store_error: Option<String>,
}

/// Runs passes until `shutdown` resolves.
pub async fn run(state: CoordinatorState, shutdown: impl std::future::Future<Output = ()>) {
    let mut changes = state.changes();
    let mut judge = Judge::default();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => return,
            more = changes.next(PASS_EVERY) => if !more { return },
        }
        let elsewhere = others::read(&state, &mut judge).await;
        pass(&state, &mut judge, &elsewhere, Now::read());
    }
}

/// One pass at `now`, with what the other nodes said of their runs.
pub fn pass(state: &CoordinatorState, judge: &mut Judge, elsewhere: &others::Runs, now: Now) {
    let set = state.registry.current();
    judge
        .jobs
        .retain(|name, _| set.get(name).is_some_and(|j| j.spec.expect.is_some()));
    state
        .expectations
        .retain(|job| judge.jobs.contains_key(job));
    let view = state.view.borrow().clone();
    let grace = grace(&view.status);
    let me = state.node_name();
    let instant = tokio::time::Instant::now();
    for (name, registered) in &set.jobs {
        let spec = &registered.spec;
        let Some(expect) = spec.expect else { continue };
        let watched = judge.jobs.entry(name.clone()).or_insert_with(|| {
            state.metrics.expectations_watched(name);
            Watched::new(spec, now.unix_ms)
        });
        if watched.written != written(spec) {
            *watched = Watched::new(spec, now.unix_ms);
        }
        // Without a running manager (starting, stopping, failed to start) this node does not
        // know who owns a Leader or PreferLeader job, so it does not judge one: the gate's
        // "PreferLeader runs" there is not ownership.
        let knows = !matches!(
            view.election,
            crate::cluster::Election::Starting | crate::cluster::Election::NoManager { .. }
        ) || spec.cluster_policy == ClusterPolicy::EveryNode;
        let owner = view
            .owner_of(name, spec.cluster_policy, instant)
            .filter(|_| knows);
        if owner.as_deref() != Some(me.as_str()) {
            if watched.owned_since_ms.take().is_some() {
                tracing::info!(job = name, "expectations: another node judges the job now");
            }
            watched.open.clear();
            watched.cursor_ms = now.unix_ms;
            continue;
        }
        if watched.owned_since_ms.is_none() {
            watched.owned_since_ms = Some(now.unix_ms);
            // The firings still open when the previous judge stopped: look back over them.
            let back = i64::try_from(spec.expectation_span().as_millis()).unwrap_or(i64::MAX);
            watched.cursor_ms = now.unix_ms.saturating_sub(back);
        }
        watched.open_new(name, now.unix_ms);
        // A firing of an EveryNode job, or of any job with election off, is each node's own:
        // only this node's runs count, and running it on every node is what was asked.
        let shared = spec.cluster_policy != ClusterPolicy::EveryNode && view.elects();
        let shape = Shape {
            expect,
            single_run: shared && spec.cluster_policy == ClusterPolicy::Leader,
            grace,
            keep_ms: i64::try_from(spec.expectation_span().as_millis()).unwrap_or(i64::MAX),
        };
        let none = others::Runs::default();
        let elsewhere = if shared { elsewhere } else { &none };
        judge_job(state, (name, &set.id), watched, shape, elsewhere, now);
    }
}

/// What every firing of one job is judged with.
#[derive(Clone, Copy)]
struct Shape {
    expect: Expectation,
    single_run: bool,
    grace: Duration,
    keep_ms: i64,
}

/// Judges the open firings of one owned job, reports what is new, and closes what is done.
fn judge_job(
    state: &CoordinatorState,
    (name, set_id): (&str, &cronstable_core::fingerprint::JobSetId),
    watched: &mut Watched,
    shape: Shape,
    elsewhere: &others::Runs,
    now: Now,
) {
    let Some(oldest) = watched.open.keys().next().copied() else {
        return;
    };
    let mut runs: BTreeMap<i64, Vec<RunSeen>> = BTreeMap::new();
    let here = state
        .ledger
        .inspect(name, |r| crate::ledger::runs::runs_since(r, oldest));
    for r in here.into_iter().chain(elsewhere.of(name, oldest)) {
        runs.entry(r.scheduled_at_ms).or_default().push(r.run);
    }
    let owned_since = watched.owned_since_ms.unwrap_or(now.unix_ms);
    let grace_ms = i64::try_from(shape.grace.as_millis()).unwrap_or(i64::MAX);
    for (&at, open) in &mut watched.open {
        let of = runs.get(&at).map_or(&[][..], Vec::as_slice);
        open.met = open.met || cronstable_core::expect::met(shape.expect, at, of);
        let mut expect = shape.expect;
        if open.met {
            expect.complete_within = None;
        }
        let look = Look {
            expect,
            single_run: shape.single_run,
            instant_ms: at,
            now_ms: now.unix_ms,
            grace: shape.grace,
        };
        for finding in judge(look, of) {
            // A breach belongs to whoever owned the job when it could first be known (plus
            // the grace its reports take): a new owner leaves the earlier ones to the old.
            if finding.since_ms.saturating_add(grace_ms) < owned_since {
                open.reported.insert(finding.breach);
            }
            if open.reported.insert(finding.breach) {
                report(state, (name, set_id), at, &finding, now);
            }
        }
    }
    let keep_ms = shape.keep_ms.saturating_add(grace_ms);
    watched
        .open
        .retain(|&at, _| now.unix_ms <= at.saturating_add(keep_ms));
}

/// Reports one breach: the log line, the counter, the webhook event and the `/jobs` mark.
fn report(
    state: &CoordinatorState,
    (job, set_id): (&str, &cronstable_core::fingerprint::JobSetId),
    scheduled_at_ms: i64,
    finding: &Finding,
    now: Now,
) {
    let firing_id = cronstable_core::fingerprint::firing_id(set_id, job, scheduled_at_ms);
    let breach = finding.breach.as_str();
    let iso = |ms: i64| {
        DateTime::<Utc>::from_timestamp_millis(ms)
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
    };
    tracing::warn!(
        job,
        breach,
        firing_id,
        scheduled_at = iso(scheduled_at_ms),
        "firing broke its expectation: {}",
        finding.why
    );
    state.metrics.expectation_breach(job, breach);
    if let Some(n) = state.notifier() {
        let node = state.node_name();
        n.send(
            crate::config::NotifyEvent::JobExpectation,
            serde_json::json!({
                "event": "job_expectation",
                "breach": breach,
                "node": node,
                "job": job,
                "firing_id": firing_id,
                "scheduled_at": iso(scheduled_at_ms),
                "detected_at": iso(now.unix_ms),
                "message": format!("job {job}: the firing of {} {breach}: {}",
                    iso(scheduled_at_ms).unwrap_or_default(), finding.why),
            }),
        );
    }
    state.expectations.add(
        job,
        BreachNote {
            breach: finding.breach,
            scheduled_at_ms,
            firing_id,
            found_at_ms: now.unix_ms,
            why: finding.why.clone(),
        },
    );
}

pub mod others;

#[cfg(test)]
mod tests;
