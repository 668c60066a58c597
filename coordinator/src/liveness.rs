//! Whether this node's executors keep up with their Leader jobs: a due firing nobody asked
//! about means the executor is wedged or gone.
//!
//! The lease holder answers RUN to its own executor only. If that executor is frozen (a
//! stopped process, a wedged runtime) or has exited, the holder keeps renewing its lease and
//! every other node keeps deferring to it, so the cluster's Leader jobs stop running until
//! someone restarts the executor. What the coordinator can see is that the executor stopped
//! asking: an executor is *overdue* when one of its Leader jobs had a due instant more than
//! [`OVERDUE_GRACE`] ago and the executor has neither asked about nor reported any firing at or
//! after that instant. The lease driver then gives the lease up, so a node whose executor is
//! live takes it (issue "lease faults", item 2).
//!
//! Which executors are judged: those that opened a Watch stream (the shim keeps one open for
//! its whole life, and a client that opens one promises to ask about every due firing). The
//! gate's executors (`config:…`, crond asking through `cronstable-gate`) are not: crond has no
//! stream, starts late under load by design, and is supervised by crond itself.
//!
//! The coordinator's own stall is not the executor's: when the monitor finds more than
//! [`STALL_AFTER`] between two of its checks (the coordinator was stopped, suspended or
//! starved), the questions asked meanwhile could not be heard, so firings due before that check
//! are excused and the executor is judged from then on, with the full grace.
//!
//! Any question counts, not only the overdue job's: the signal is "this process is alive and
//! working through its schedule", and a process that asks about one job at an instant asks
//! about the others due with it. The instants compared are the firings' nominal instants, so
//! an executor that asks a little early (the shim asks 20 ms ahead) is never judged late.
//!
//! [`Pace`] is shared with the gRPC handlers (one map insert per question); [`Monitor`] is pure
//! (time is an argument) and remembers each job's next due instant, so a check searches a
//! schedule only when a job's instant has passed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::DateTime;
use cronstable_core::ClusterPolicy;
use tokio::sync::watch;

use crate::executors::{Executors, is_config_executor};
use crate::jobs::{JobRegistry, JobSet};
use crate::observe::metrics::Metrics;
use crate::observe::next_fire::{ScheduleCache, Schedules};

/// How long after a Leader job's due instant its executor may still ask before it counts as
/// overdue. A shim asks 20 ms ahead of the instant; two seconds leave room for a loaded
/// machine while keeping a frozen executor's cost near one lease duration.
pub const OVERDUE_GRACE: Duration = Duration::from_secs(2);

/// How often the monitor task checks.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);

/// A gap between two checks longer than this means the coordinator itself did not run (a
/// SIGSTOP, a suspended VM, a starved runtime): its executors' questions could not be heard
/// meanwhile, so what fell due before the gap closed is not held against them. Four missed
/// checks, and half the overdue grace, so a real wedge is still caught within one grace of
/// the thaw.
pub const STALL_AFTER: Duration = Duration::from_millis(1_000);

/// The latest firing instant each executor asked about or reported, in Unix ms.
#[derive(Debug, Default)]
pub struct Pace {
    asked_through: Mutex<HashMap<String, i64>>,
}

/// How far past `now` a question's instant may move an executor's pace. A shim asks 20 ms
/// ahead; an instant further out (a client's wrong clock, a hostile caller) counts as asked at
/// `now` plus this, so it cannot excuse the executor from every firing until then.
pub const ASK_AHEAD_LIMIT_MS: i64 = 1_000;

impl Pace {
    /// Records that `executor` asked about (or reported) the firing due at `at_ms`, at `now_ms`.
    pub fn heard(&self, executor: &str, at_ms: i64, now_ms: i64) {
        let at_ms = at_ms.min(now_ms.saturating_add(ASK_AHEAD_LIMIT_MS));
        let mut map = self
            .asked_through
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match map.get_mut(executor) {
            Some(t) => *t = (*t).max(at_ms),
            None => {
                map.insert(executor.to_owned(), at_ms);
            }
        }
    }

    /// Records that `executor` registered at `now_ms`: a new session, judged from now on
    /// whatever the one before it asked about.
    pub fn registered(&self, executor: &str, now_ms: i64) {
        self.asked_through
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(executor.to_owned(), now_ms);
    }

    /// The latest instant `executor` asked about, if it ever did.
    pub fn asked_through(&self, executor: &str) -> Option<i64> {
        self.asked_through
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(executor)
            .copied()
    }
}

/// An executor that let a Leader firing pass unasked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overdue {
    /// The executor id.
    pub executor: String,
    /// The Leader job whose due instant passed.
    pub job: String,
    /// That instant (Unix ms).
    pub due_ms: i64,
}

impl std::fmt::Display for Overdue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let due = DateTime::from_timestamp_millis(self.due_ms)
            .map_or_else(|| self.due_ms.to_string(), |t| t.to_rfc3339());
        write!(
            f,
            "executor {:?} did not ask about Leader job {:?} due at {due} within {} s: it is \
             wedged or gone",
            self.executor,
            self.job,
            OVERDUE_GRACE.as_secs()
        )
    }
}

/// One job's remembered next due instant, and the instant it was searched after.
#[derive(Debug, Clone, Copy)]
struct Due {
    after_ms: i64,
    next_ms: Option<i64>,
}

/// Finds overdue executors. Keeps each job's next due instant between checks, and when it last
/// checked, to tell its own stall from an executor's.
#[derive(Debug, Default)]
pub struct Monitor {
    set_id: String,
    due: HashMap<String, Due>,
    last_check_ms: Option<i64>,
    /// Firings due before this instant are excused: the coordinator was stalled until then.
    excused_through: i64,
    stalled_for_ms: Option<i64>,
}

impl Monitor {
    /// A monitor that remembers nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long the coordinator had stopped before the latest check, when that check found a
    /// stall (for the one log line); `None` when it ran on time.
    pub fn stalled_for_ms(&self) -> Option<i64> {
        self.stalled_for_ms
    }

    /// The earliest overdue firing among the Leader jobs of the executors `judged` accepts, at
    /// `now_ms`; `None` when every one keeps up. An executor never heard from is not judged
    /// (it registered, so [`Pace::registered`] was called).
    pub fn check(
        &mut self,
        set: &JobSet,
        schedules: &Schedules,
        asked_through: impl Fn(&str) -> Option<i64>,
        judged: impl Fn(&str) -> bool,
        now_ms: i64,
    ) -> Option<Overdue> {
        if self.set_id != set.id.as_str() {
            self.set_id = set.id.as_str().to_owned();
            self.due.clear();
        }
        let grace = i64::try_from(OVERDUE_GRACE.as_millis()).unwrap_or(i64::MAX);
        let stall = i64::try_from(STALL_AFTER.as_millis()).unwrap_or(i64::MAX);
        // A clock stepped back is no stall; the next gap is measured from here either way.
        self.stalled_for_ms = self
            .last_check_ms
            .map(|last| now_ms.saturating_sub(last))
            .filter(|gap| *gap > stall);
        if self.stalled_for_ms.is_some() {
            self.excused_through = now_ms;
        }
        self.last_check_ms = Some(now_ms);
        let mut worst: Option<Overdue> = None;
        for (name, job) in &set.jobs {
            if job.spec.cluster_policy != ClusterPolicy::Leader
                || is_config_executor(&job.executor_id)
                || !judged(&job.executor_id)
            {
                continue;
            }
            let Some(through) = asked_through(&job.executor_id) else {
                continue;
            };
            let through = through.max(self.excused_through);
            let Some(Some(schedule)) = schedules.get(name) else {
                continue;
            };
            let remembered = self.due.get(name).copied();
            let due = match remembered {
                // Still ahead of what was asked, and searched from no later than that.
                Some(d) if d.after_ms <= through && d.next_ms.is_none_or(|n| n > through) => d,
                _ => {
                    let next_ms = DateTime::from_timestamp_millis(through)
                        .and_then(|t| schedule.next_after(t))
                        .map(|t| t.timestamp_millis());
                    let d = Due {
                        after_ms: through,
                        next_ms,
                    };
                    self.due.insert(name.clone(), d);
                    d
                }
            };
            if let Some(next) = due.next_ms
                && next.saturating_add(grace) <= now_ms
                && worst.as_ref().is_none_or(|w| next < w.due_ms)
            {
                worst = Some(Overdue {
                    executor: job.executor_id.clone(),
                    job: name.clone(),
                    due_ms: next,
                });
            }
        }
        worst
    }
}

/// What the pace monitor reads and where it publishes: handles the coordinator's state holds,
/// passed in so this module depends on none of the state's other parts.
#[derive(Debug, Clone)]
pub struct PaceInputs {
    /// The registered job set.
    pub registry: JobRegistry,
    /// The latest instant each executor asked about.
    pub pace: Arc<Pace>,
    /// Which executors have an open Watch stream (they are watched, not polled).
    pub executors: Arc<Executors>,
    /// `cronstable_executor_overdue`.
    pub metrics: Metrics,
    /// The one writer of the overdue executor as last found.
    pub overdue: Arc<watch::Sender<Option<Overdue>>>,
}

/// Checks every [`CHECK_EVERY`] and publishes the earliest overdue firing (or `None`) on
/// `inputs.overdue`, logging each change once: a WARN when an executor falls behind, an INFO
/// when they all keep up again. Returns when `shutdown` resolves.
pub async fn watch_pace(inputs: PaceInputs, shutdown: impl std::future::Future<Output = ()>) {
    let PaceInputs {
        registry,
        pace,
        executors,
        metrics,
        overdue: tx,
    } = inputs;
    let schedules = ScheduleCache::default();
    let mut monitor = Monitor::new();
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => return,
            _ = tick.tick() => {}
        }
        let set = registry.current();
        let parsed = schedules.for_set(&set);
        let overdue = monitor.check(
            &set,
            &parsed,
            |e| pace.asked_through(e),
            |e| executors.watched(e),
            crate::clock::now_ms(),
        );
        if let Some(gap) = monitor.stalled_for_ms() {
            tracing::info!(
                "this coordinator did not run for {gap} ms (stopped or starved); firings due \
                 meanwhile are not held against its executors"
            );
        }
        // One line per change of executor, not per check or per passing instant.
        let before = tx.borrow().as_ref().map(|o| o.executor.clone());
        let after = overdue.as_ref().map(|o| o.executor.clone());
        if before != after {
            match &overdue {
                Some(o) => tracing::warn!("{o}"),
                None => tracing::info!(
                    "every executor on this node is asking about its Leader jobs' firings again"
                ),
            }
        }
        metrics.set_executor_overdue(overdue.is_some());
        tx.send_if_modified(|cur| {
            let changed =
                cur.as_ref().map(|o| &o.executor) != overdue.as_ref().map(|o| &o.executor);
            *cur = overdue;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::JobRegistry;
    use cronstable_core::JobSpec;
    use std::sync::Arc;

    fn spec(name: &str, schedule: &str, policy: ClusterPolicy) -> JobSpec {
        let mut s = JobSpec::new(name, schedule, "true");
        s.cluster_policy = policy;
        s
    }

    /// 2026-01-01T00:00:00Z in ms: a whole minute, so every-second and every-minute jobs are due.
    const T0: i64 = 1_767_225_600_000;

    fn set(jobs: Vec<(&str, JobSpec)>) -> (Arc<JobSet>, Schedules) {
        let registry = JobRegistry::new();
        let mut by_executor: std::collections::BTreeMap<&str, Vec<JobSpec>> = Default::default();
        for (executor, spec) in jobs {
            by_executor.entry(executor).or_default().push(spec);
        }
        let mut last = None;
        for (executor, specs) in by_executor {
            last = Some(registry.register(executor, specs).unwrap());
        }
        let set = last.unwrap();
        let schedules = ScheduleCache::default().for_set(&set);
        (set, schedules)
    }

    fn check(
        m: &mut Monitor,
        s: &(Arc<JobSet>, Schedules),
        pace: &Pace,
        now_ms: i64,
    ) -> Option<Overdue> {
        m.check(&s.0, &s.1, |e| pace.asked_through(e), |_| true, now_ms)
    }

    #[test]
    fn an_executor_that_asks_at_every_instant_keeps_up() {
        let s = set(vec![(
            "shim",
            spec("tick", "* * * * * *", ClusterPolicy::Leader),
        )]);
        let (mut m, pace) = (Monitor::new(), Pace::default());
        pace.heard("shim", T0, T0);
        for k in 1..100 {
            // Asked 20 ms ahead of each instant, checked just before the next question.
            pace.heard("shim", T0 + k * 1000, T0 + k * 1000);
            assert_eq!(check(&mut m, &s, &pace, T0 + k * 1000 + 970), None);
        }
    }

    #[test]
    fn a_due_instant_passed_unasked_by_the_grace_is_overdue_and_names_job_and_executor() {
        let s = set(vec![(
            "shim",
            spec("tick", "* * * * * *", ClusterPolicy::Leader),
        )]);
        let (mut m, pace) = (Monitor::new(), Pace::default());
        pace.heard("shim", T0, T0);
        let grace = i64::try_from(OVERDUE_GRACE.as_millis()).unwrap();
        // T0 + 1 s was never asked about.
        assert_eq!(check(&mut m, &s, &pace, T0 + 1000 + grace - 1), None);
        let o = check(&mut m, &s, &pace, T0 + 1000 + grace).expect("overdue");
        assert_eq!((o.executor.as_str(), o.job.as_str()), ("shim", "tick"));
        assert_eq!(o.due_ms, T0 + 1000);
        let msg = o.to_string();
        assert!(
            msg.contains("\"shim\"") && msg.contains("wedged or gone"),
            "{msg}"
        );
        // It asks again (a thawed process catching up): keeping up from then on.
        pace.heard("shim", T0 + 5000, T0 + 5000);
        assert_eq!(check(&mut m, &s, &pace, T0 + 5500), None);
    }

    #[test]
    fn only_leader_jobs_of_judged_executors_outside_the_gate_count() {
        let s = set(vec![
            (
                "shim",
                spec("pref", "* * * * * *", ClusterPolicy::PreferLeader),
            ),
            (
                "shim",
                spec("every", "* * * * * *", ClusterPolicy::EveryNode),
            ),
            (
                "config:/etc/jobs",
                spec("gated", "* * * * * *", ClusterPolicy::Leader),
            ),
            ("quiet", spec("lead", "* * * * * *", ClusterPolicy::Leader)),
        ]);
        let (mut m, pace) = (Monitor::new(), Pace::default());
        for e in ["shim", "config:/etc/jobs", "quiet"] {
            pace.heard(e, T0, T0);
        }
        let late = T0 + 60_000;
        // "quiet" is not judged (no Watch stream); the rest have no Leader job to judge.
        assert_eq!(
            m.check(
                &s.0,
                &s.1,
                |e| pace.asked_through(e),
                |e| e != "quiet",
                late
            ),
            None
        );
        let o = m.check(&s.0, &s.1, |e| pace.asked_through(e), |_| true, late);
        assert_eq!(o.map(|o| o.job), Some("lead".to_owned()));
    }

    #[test]
    fn an_executor_never_heard_from_or_a_job_not_due_yet_is_not_overdue() {
        let s = set(vec![(
            "shim",
            spec("hourly", "0 * * * *", ClusterPolicy::Leader),
        )]);
        let (mut m, pace) = (Monitor::new(), Pace::default());
        assert_eq!(check(&mut m, &s, &pace, T0 + 7_200_000), None);
        // Registered a second after the hour: next due an hour later.
        pace.heard("shim", T0 + 1000, T0 + 1000);
        assert_eq!(check(&mut m, &s, &pace, T0 + 3_600_000 + 1999), None);
        let o = check(&mut m, &s, &pace, T0 + 3_600_000 + 2000).expect("overdue");
        assert_eq!(o.due_ms, T0 + 3_600_000);
    }

    /// A question about a far-future instant (a client's bad clock, a hostile caller) must not
    /// excuse the executor from every firing until then.
    #[test]
    fn a_question_about_a_far_future_instant_does_not_pin_the_pace() {
        let s = set(vec![(
            "shim",
            spec("tick", "* * * * * *", ClusterPolicy::Leader),
        )]);
        let (mut m, pace) = (Monitor::new(), Pace::default());
        pace.heard("shim", T0, T0);
        pace.heard("shim", T0 + 10 * 365 * 86_400_000, T0 + 500);
        let grace = i64::try_from(OVERDUE_GRACE.as_millis()).unwrap();
        let o = check(&mut m, &s, &pace, T0 + 3000 + grace).expect("overdue");
        assert!(o.due_ms <= T0 + 3000, "due {}", o.due_ms - T0);
        // A registration starts a new session: judged from its instant, not from the last.
        pace.heard("shim", T0 + 9000, T0 + 8990);
        pace.registered("shim", T0 + 5000);
        assert_eq!(pace.asked_through("shim"), Some(T0 + 5000));
    }

    /// The coordinator itself stopped (SIGSTOP, a stalled runtime, a suspended VM): the
    /// executor's questions about firings due meanwhile could not be heard, so the first
    /// check after the stall must not blame it. Every coordinator of a partition run's frozen
    /// majority stood down at its thaw for this (CI seed 1796584572264), and the cluster lost
    /// its leader for longer than the two-interval grace.
    #[test]
    fn firings_due_while_the_coordinator_itself_stalled_are_not_held_against_the_executor() {
        let s = set(vec![(
            "shim",
            spec("tick", "* * * * * *", ClusterPolicy::Leader),
        )]);
        let (mut m, pace) = (Monitor::new(), Pace::default());
        pace.heard("shim", T0, T0);
        assert_eq!(check(&mut m, &s, &pace, T0 + 250), None);
        // Frozen for eight seconds: the first check after the thaw excuses what fell due.
        let thaw = T0 + 8_250;
        assert_eq!(check(&mut m, &s, &pace, thaw), None);
        assert_eq!(check(&mut m, &s, &pace, thaw + 250), None);
        // Judged again from the thaw on: an executor that still does not ask is overdue.
        let grace = i64::try_from(OVERDUE_GRACE.as_millis()).unwrap();
        let mut at = thaw + 250;
        let mut found = None;
        while found.is_none() && at < thaw + 1000 + grace + 1000 {
            at += 250;
            found = check(&mut m, &s, &pace, at);
        }
        let o = found.expect("overdue once the grace after the thaw has passed");
        assert!(
            o.due_ms > thaw && o.due_ms + grace <= at,
            "due {}",
            o.due_ms - T0
        );
    }

    #[test]
    fn the_earliest_overdue_firing_is_named() {
        let s = set(vec![
            ("a", spec("minutely", "* * * * *", ClusterPolicy::Leader)),
            ("b", spec("secondly", "* * * * * *", ClusterPolicy::Leader)),
        ]);
        let (mut m, pace) = (Monitor::new(), Pace::default());
        pace.heard("a", T0 + 30_000, T0 + 30_000);
        pace.heard("b", T0 + 30_000, T0 + 30_000);
        let o = check(&mut m, &s, &pace, T0 + 90_000).expect("overdue");
        assert_eq!((o.executor.as_str(), o.due_ms), ("b", T0 + 31_000));
    }
}
