//! Every transition of [`Sequence::step`], as tables where the cases share a shape: the
//! actions a step returns and the phase it leaves, for each verdict and reason, DEFER and its
//! bounds, an unreachable coordinator against a refusal, standby, the election memory, an
//! answer that arrives after the instant, a shutdown in every wait, and the `@reboot`
//! one-shot's reload rules.

use chrono::TimeZone;
use cronstable_core::{
    ClusterPolicy, ConcurrencyPolicy, FiringKind, Gate, JobSpec, Reason, Verdict,
};

use super::*;
use crate::coordinator::client::DecidedBy;

/// The firing's instant: a minute boundary.
fn instant() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 5, 3, 0, 0).unwrap()
}

/// A clock: `mono` from a fixed origin, `wall` relative to the instant.
struct Clock {
    origin: Instant,
}

impl Clock {
    fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
    /// `after` since the sequence began; the wall clock 20 ms before the instant plus `after`.
    fn at(&self, after: Duration) -> Now {
        Now {
            mono: self.origin + after,
            wall: instant() - chrono::TimeDelta::milliseconds(20)
                + chrono::TimeDelta::from_std(after).unwrap(),
        }
    }
    fn start(&self) -> Now {
        self.at(Duration::ZERO)
    }
}

fn job(policy: ClusterPolicy) -> Arc<JobSpec> {
    let mut j = JobSpec::new("charge", "* * * * *", "true");
    j.cluster_policy = policy;
    Arc::new(j)
}

fn job_with(policy: ClusterPolicy, concurrency: ConcurrencyPolicy, retries: u32) -> Arc<JobSpec> {
    let mut j = (*job(policy)).clone();
    j.concurrency_policy = concurrency;
    j.retry.retries = retries;
    Arc::new(j)
}

fn reboot_job(policy: ClusterPolicy) -> Arc<JobSpec> {
    let mut j = JobSpec::new("warm", "@reboot", "true");
    j.cluster_policy = policy;
    Arc::new(j)
}

fn seq(job: Arc<JobSpec>, kind: FiringKind, clock: &Clock) -> Sequence {
    let max = job.retry.retries + 1;
    Sequence::new(job, instant(), kind, 1, max, clock.origin)
}

/// The coordinator's answer.
fn answer(verdict: Verdict, reason: Reason) -> Answer {
    Answer {
        decided_by: DecidedBy::Coordinator,
        node_name: "n1".into(),
        retry_after: Duration::from_millis(500),
        ..Answer::decided_here(
            verdict,
            reason,
            format!("{reason:?}"),
            "fid".into(),
            Duration::ZERO,
        )
    }
}

/// The shim's own decision.
fn local(verdict: Verdict, reason: Reason) -> Answer {
    Answer::decided_here(
        verdict,
        reason,
        "coordinator unreachable".into(),
        "fid".into(),
        Duration::from_secs(1),
    )
}

fn ready() -> Event {
    Event::Ready(Facts::quiet())
}

fn answered(a: Answer) -> Event {
    Event::Answered(a, Facts::quiet())
}

fn ask(kind: FiringKind, attempt: u32) -> Action {
    Action::Ask { kind, attempt }
}

fn pause(ms: u64) -> Action {
    Action::Pause {
        wait: Duration::from_millis(ms),
        until_pushed: false,
    }
}

fn launch(a: &Answer, kind: FiringKind, attempt: u32) -> Action {
    Action::Launch {
        answer: a.clone(),
        kind,
        attempt,
    }
}

/// A sequence that has asked its first question.
fn asking(job: Arc<JobSpec>, kind: FiringKind, clock: &Clock) -> Sequence {
    let mut s = seq(job, kind, clock);
    assert_eq!(s.step(ready(), clock.start()), [ask(kind, 1)]);
    assert_eq!(s.phase(), &Phase::Asking);
    s
}

#[test]
fn a_run_asked_early_waits_for_the_instant_then_launches_once() {
    let c = Clock::new();
    let mut s = asking(job(ClusterPolicy::Leader), FiringKind::Scheduled, &c);
    let a = answer(Verdict::Run, Reason::Leader);
    assert_eq!(
        s.step(answered(a.clone()), c.at(Duration::from_millis(5))),
        [pause(15)]
    );
    assert!(matches!(s.phase(), Phase::WaitingInstant(_)));
    assert_eq!(
        s.step(ready(), c.at(Duration::from_millis(20))),
        [launch(&a, FiringKind::Scheduled, 1)]
    );
    assert_eq!(s.phase(), &Phase::Running);
    assert_eq!(
        s.step(Event::Ran(Some(true)), c.at(Duration::from_secs(1))),
        []
    );
    assert_eq!(s.phase(), &Phase::Done);
}

#[test]
fn an_answer_that_arrives_after_the_instant_launches_at_once() {
    let c = Clock::new();
    let mut s = asking(job(ClusterPolicy::Leader), FiringKind::Scheduled, &c);
    let a = answer(Verdict::Run, Reason::Leader);
    for late in [20, 21, 900, 30_000] {
        let mut s = s.clone();
        assert_eq!(
            s.step(answered(a.clone()), c.at(Duration::from_millis(late))),
            [launch(&a, FiringKind::Scheduled, 1)],
            "{late} ms"
        );
    }
    // Stopping by then: nothing starts, and the RUN is handed back.
    let stopping = Facts {
        stopping: true,
        ..Facts::quiet()
    };
    assert_eq!(
        s.step(Event::Answered(a, stopping), c.at(Duration::from_secs(1))),
        not_launched(FiringKind::Scheduled)
    );
    assert_eq!(s.phase(), &Phase::Done);
}

/// What a sequence stopping with a RUN in hand does: one line, and the `not_launched` report
/// that makes the coordinator give the claim back.
fn not_launched(kind: FiringKind) -> [Action; 2] {
    [
        Action::Log(Note::NotLaunched),
        Action::ReportSkip {
            kind,
            reason: Reason::NotLaunched,
            message: super::NOT_LAUNCHED.to_owned(),
        },
    ]
}

#[test]
fn a_shim_stopping_between_the_run_answer_and_the_instant_hands_the_run_back() {
    let c = Clock::new();
    let stopping = Event::Ready(Facts {
        stopping: true,
        ..Facts::quiet()
    });
    for kind in [FiringKind::Scheduled, FiringKind::CatchUp] {
        let mut s = asking(job(ClusterPolicy::Leader), kind, &c);
        let a = answer(Verdict::Run, Reason::Leader);
        assert_eq!(
            s.step(answered(a), c.at(Duration::from_millis(5))),
            [pause(15)]
        );
        assert_eq!(
            s.step(stopping.clone(), c.at(Duration::from_millis(8))),
            not_launched(kind),
            "{kind:?}"
        );
        assert_eq!(s.phase(), &Phase::Done);
    }
    // A retry is not claimed, so a retry's RUN is not handed back: it just does not start.
    let mut s = asking(
        job_with(ClusterPolicy::Leader, ConcurrencyPolicy::Allow, 2),
        FiringKind::Scheduled,
        &c,
    );
    let a = answer(Verdict::Run, Reason::Leader);
    s.step(answered(a.clone()), c.at(Duration::from_millis(30)));
    s.step(Event::Ran(Some(false)), c.at(Duration::from_secs(1)));
    let retry = FiringKind::Retry { attempt: 2 };
    assert_eq!(
        s.step(ready(), c.at(Duration::from_secs(3))),
        [ask(retry, 2)]
    );
    let stopping_now = Facts {
        stopping: true,
        ..Facts::quiet()
    };
    assert_eq!(
        s.step(
            Event::Answered(a, stopping_now),
            c.at(Duration::from_secs(3))
        ),
        []
    );
    assert_eq!(s.phase(), &Phase::Done);
}

#[test]
fn a_skip_is_logged_reported_only_when_decided_here_and_hands_off_only_a_retry_that_lost_ownership()
{
    let c = Clock::new();
    let retry = FiringKind::Retry { attempt: 2 };
    // (kind, answer, reported, handed off)
    let cases = [
        (
            FiringKind::Scheduled,
            answer(Verdict::Skip, Reason::NotLeader),
            false,
            false,
        ),
        (
            FiringKind::Scheduled,
            answer(Verdict::Skip, Reason::NoQuorum),
            false,
            false,
        ),
        (
            FiringKind::Scheduled,
            answer(Verdict::Skip, Reason::StartingDeadline),
            false,
            false,
        ),
        (
            FiringKind::Scheduled,
            local(Verdict::Skip, Reason::CoordinatorUnreachable),
            true,
            false,
        ),
        (retry, answer(Verdict::Skip, Reason::NotLeader), false, true),
        (retry, answer(Verdict::Skip, Reason::NotOwner), false, true),
        (retry, answer(Verdict::Skip, Reason::NoQuorum), false, false),
        (
            retry,
            local(Verdict::Skip, Reason::CoordinatorUnreachable),
            true,
            false,
        ),
    ];
    for (kind, a, reported, handed) in cases {
        let mut s = seq(
            job_with(ClusterPolicy::Leader, ConcurrencyPolicy::Allow, 3),
            kind,
            &c,
        );
        s.step(ready(), c.start());
        let actions = s.step(answered(a.clone()), c.at(Duration::from_secs(2)));
        let mut want = vec![Action::Log(Note::Skipped {
            attempt: 1,
            reason: a.why(),
            message: a.message.clone(),
        })];
        if reported {
            want.push(Action::ReportSkip {
                kind,
                reason: a.why(),
                message: a.message.clone(),
            });
        }
        if handed {
            want.push(Action::HandOff {
                attempt: 1,
                max_attempts: 4,
            });
        }
        assert_eq!(actions, want, "{kind:?} {a:?}");
        assert_eq!(s.phase(), &Phase::Done);
    }
}

#[test]
fn a_reason_newer_than_the_shim_counts_as_no_manager() {
    let c = Clock::new();
    let mut s = asking(job(ClusterPolicy::Leader), FiringKind::Scheduled, &c);
    let mut a = answer(Verdict::Skip, Reason::NotLeader);
    a.reason = None;
    let actions = s.step(answered(a), c.start());
    assert!(matches!(
        &actions[0],
        Action::Log(Note::Skipped {
            reason: Reason::NoManager,
            ..
        })
    ));
}

#[test]
fn defer_asks_again_after_retry_after_until_its_bound_per_kind() {
    let c = Clock::new();
    // (kind, bound): past it the firing gives up and reports a skip; None never gives up.
    let cases = [
        (FiringKind::Scheduled, Some(MAX_SCHEDULED_DEFERRAL)),
        (FiringKind::Retry { attempt: 2 }, Some(MAX_RETRY_DEFERRAL)),
        (FiringKind::Manual, None),
    ];
    for (kind, bound) in cases {
        let mut s = asking(job(ClusterPolicy::PreferLeader), kind, &c);
        let d = answer(Verdict::Defer, Reason::ConvergenceHold);
        // The first DEFER starts the clock.
        assert_eq!(
            s.step(answered(d.clone()), c.at(Duration::from_secs(1))),
            [
                Action::Log(Note::Deferred {
                    reason: Reason::ConvergenceHold
                }),
                pause(500)
            ]
        );
        assert_eq!(s.phase(), &Phase::Waiting);
        assert_eq!(
            s.step(ready(), c.at(Duration::from_millis(1_500))),
            [ask(kind, 1)]
        );
        let far = bound.unwrap_or(Duration::from_secs(7_200)) + Duration::from_secs(1);
        // At the bound exactly, still deferring.
        let at_bound = s.clone().step(
            answered(d.clone()),
            c.at(Duration::from_secs(1) + bound.unwrap_or(far)),
        );
        assert!(
            matches!(at_bound.last(), Some(Action::Pause { .. })),
            "{kind:?}"
        );
        let past = s.step(
            answered(d.clone()),
            c.at(Duration::from_secs(1) + far + Duration::from_millis(1)),
        );
        match bound {
            Some(b) => {
                let message = format!("gave up after deferring for {b:?}: {}", d.message);
                assert_eq!(
                    past,
                    [
                        Action::Log(Note::GaveUp {
                            attempt: 1,
                            message: message.clone()
                        }),
                        Action::ReportSkip {
                            kind,
                            reason: Reason::ConvergenceHold,
                            message
                        }
                    ],
                    "{kind:?}"
                );
                assert_eq!(s.phase(), &Phase::Done);
            }
            None => assert!(
                matches!(past.last(), Some(Action::Pause { .. })),
                "{kind:?}"
            ),
        }
    }
}

#[test]
fn a_run_after_a_defer_restarts_the_deferral_clock() {
    let c = Clock::new();
    let mut s = seq(
        job_with(ClusterPolicy::PreferLeader, ConcurrencyPolicy::Allow, 1),
        FiringKind::Scheduled,
        &c,
    );
    s.step(ready(), c.start());
    s.step(
        answered(answer(Verdict::Defer, Reason::ConvergenceHold)),
        c.start(),
    );
    s.step(ready(), c.at(Duration::from_secs(50)));
    let run = answer(Verdict::Run, Reason::Leader);
    s.step(answered(run), c.at(Duration::from_secs(50)));
    // The run fails; its retry is deferred 50 s later: a fresh clock, not 100 s of deferral.
    s.step(Event::Ran(Some(false)), c.at(Duration::from_secs(51)));
    s.step(ready(), c.at(Duration::from_secs(52)));
    let retry = FiringKind::Retry { attempt: 2 };
    let d = answer(Verdict::Defer, Reason::ConvergenceHold);
    s.step(answered(d.clone()), c.at(Duration::from_secs(53)));
    s.step(ready(), c.at(Duration::from_secs(54)));
    let later = s.step(answered(d), c.at(Duration::from_secs(103)));
    assert!(
        matches!(later.last(), Some(Action::Pause { .. })),
        "{later:?}"
    );
    assert_eq!(
        s.step(ready(), c.at(Duration::from_secs(104))),
        [ask(retry, 2)]
    );
}

#[test]
fn without_a_coordinator_the_no_manager_row_or_the_memory_of_election_off_decides() {
    let unreachable = CallError::Unreachable("connection refused".into());
    let refused = CallError::Refused {
        code: tonic::Code::PermissionDenied,
        message: "not for you".into(),
    };
    // (policy, error, remembered gate, verdict, reason)
    let cases = [
        (
            ClusterPolicy::Leader,
            &unreachable,
            Gate::NoManager,
            Verdict::Skip,
            Reason::CoordinatorUnreachable,
        ),
        (
            ClusterPolicy::PreferLeader,
            &unreachable,
            Gate::NoManager,
            Verdict::Run,
            Reason::NoManager,
        ),
        (
            ClusterPolicy::EveryNode,
            &unreachable,
            Gate::NoManager,
            Verdict::Run,
            Reason::EveryNode,
        ),
        // The memory of "election off" speaks for a coordinator that is away...
        (
            ClusterPolicy::Leader,
            &unreachable,
            Gate::ElectionOff,
            Verdict::Run,
            Reason::ElectionOff,
        ),
        // ...never for one that refused the question.
        (
            ClusterPolicy::Leader,
            &refused,
            Gate::ElectionOff,
            Verdict::Skip,
            Reason::CoordinatorUnreachable,
        ),
        (
            ClusterPolicy::PreferLeader,
            &refused,
            Gate::ElectionOff,
            Verdict::Run,
            Reason::NoManager,
        ),
    ];
    for (policy, error, remembered, verdict, reason) in cases {
        let a = without_coordinator(
            &job(policy),
            FiringKind::Scheduled,
            error,
            remembered,
            "fid".into(),
        );
        assert_eq!(
            (a.verdict, a.reason),
            (verdict, Some(reason)),
            "{policy:?} {error} {remembered:?}"
        );
        assert!(a.is_local());
        assert_eq!(a.firing_id, "fid");
        assert_eq!(a.message, error.to_string());
    }
}

#[test]
fn forbid_skips_while_a_run_goes_on_except_for_a_manual_run_and_replace_stops_it_first() {
    let c = Clock::new();
    let busy = Facts {
        running: 1,
        ..Facts::quiet()
    };
    let forbid = job_with(ClusterPolicy::EveryNode, ConcurrencyPolicy::Forbid, 0);
    let mut s = seq(forbid.clone(), FiringKind::Scheduled, &c);
    assert_eq!(
        s.step(Event::Ready(busy.clone()), c.start()),
        [
            Action::Log(Note::SkippedConcurrency),
            Action::ReportSkip {
                kind: FiringKind::Scheduled,
                reason: Reason::ConcurrencyPolicy,
                message: Reason::ConcurrencyPolicy.describe().to_owned(),
            }
        ]
    );
    assert_eq!(s.phase(), &Phase::Done);
    let mut manual = seq(forbid, FiringKind::Manual, &c);
    assert_eq!(
        manual.step(Event::Ready(busy.clone()), c.start()),
        [ask(FiringKind::Manual, 1)]
    );

    let mut s = asking(
        job_with(ClusterPolicy::EveryNode, ConcurrencyPolicy::Replace, 0),
        FiringKind::Scheduled,
        &c,
    );
    let run = answer(Verdict::Run, Reason::EveryNode);
    s.step(answered(run.clone()), c.start());
    assert_eq!(
        s.step(Event::Ready(busy), c.at(Duration::from_millis(20))),
        [
            Action::Log(Note::StoppingPrevious),
            Action::StopPrevious,
            launch(&run, FiringKind::Scheduled, 1)
        ]
    );
}

#[test]
fn standby_runs_nothing_whether_known_before_the_question_or_learnt_from_it() {
    let c = Clock::new();
    let standby = Facts {
        standby: true,
        ..Facts::quiet()
    };
    let mut s = seq(job(ClusterPolicy::EveryNode), FiringKind::Scheduled, &c);
    assert_eq!(
        s.step(Event::Ready(standby.clone()), c.start()),
        [Action::Log(Note::Standby)]
    );
    assert_eq!(s.phase(), &Phase::Done);
    let mut s = asking(job(ClusterPolicy::EveryNode), FiringKind::Scheduled, &c);
    let refused = local(Verdict::Run, Reason::EveryNode);
    assert_eq!(s.step(Event::Answered(refused, standby), c.start()), []);
    assert_eq!(s.phase(), &Phase::Done);
}

#[test]
fn a_shutdown_ends_the_firing_in_every_wait() {
    let c = Clock::new();
    let stopping = || {
        Event::Ready(Facts {
            stopping: true,
            ..Facts::quiet()
        })
    };
    // Before the first question.
    let mut s = seq(job(ClusterPolicy::Leader), FiringKind::Scheduled, &c);
    assert_eq!(s.step(stopping(), c.start()), []);
    assert_eq!(s.phase(), &Phase::Done);
    // Waiting out a DEFER.
    let mut s = asking(job(ClusterPolicy::PreferLeader), FiringKind::Scheduled, &c);
    s.step(
        answered(answer(Verdict::Defer, Reason::ConvergenceHold)),
        c.start(),
    );
    assert_eq!(s.step(stopping(), c.start()), []);
    assert_eq!(s.phase(), &Phase::Done);
    // Waiting for the instant.
    let mut s = asking(job(ClusterPolicy::Leader), FiringKind::Scheduled, &c);
    s.step(answered(answer(Verdict::Run, Reason::Leader)), c.start());
    assert_eq!(
        s.step(stopping(), c.at(Duration::from_millis(20))),
        not_launched(FiringKind::Scheduled)
    );
    assert_eq!(s.phase(), &Phase::Done);
    // Backing off before a retry.
    let mut s = asking(
        job_with(ClusterPolicy::Leader, ConcurrencyPolicy::Allow, 2),
        FiringKind::Scheduled,
        &c,
    );
    s.step(
        answered(answer(Verdict::Run, Reason::Leader)),
        c.at(Duration::from_millis(30)),
    );
    s.step(Event::Ran(Some(false)), c.at(Duration::from_secs(1)));
    assert_eq!(s.phase(), &Phase::BackingOff);
    assert_eq!(s.step(stopping(), c.at(Duration::from_secs(2))), []);
    assert_eq!(s.phase(), &Phase::Done);
    // A one-shot waiting for its registration.
    let mut s = seq(reboot_job(ClusterPolicy::Leader), FiringKind::Reboot, &c);
    let unregistered = Facts {
        registered: false,
        pending: Some(PendingReboot::Run(reboot_job(ClusterPolicy::Leader))),
        ..Facts::quiet()
    };
    s.step(Event::Ready(unregistered), c.start());
    assert_eq!(s.phase(), &Phase::AwaitingRegistration);
    assert_eq!(s.step(stopping(), c.start()), []);
    assert_eq!(s.phase(), &Phase::Done);
}

#[test]
fn a_failed_run_is_retried_after_its_backoff_with_a_fresh_question_until_the_attempts_run_out() {
    let c = Clock::new();
    let j = job_with(ClusterPolicy::Leader, ConcurrencyPolicy::Allow, 2);
    let mut s = asking(j.clone(), FiringKind::Scheduled, &c);
    let run = answer(Verdict::Run, Reason::Leader);
    s.step(answered(run.clone()), c.at(Duration::from_millis(20)));
    for attempt in 2..=3 {
        let wait = j.retry.backoff_before(attempt);
        assert_eq!(
            s.step(Event::Ran(Some(false)), c.at(Duration::from_secs(1))),
            [
                Action::Log(Note::WillRetry { attempt, wait }),
                Action::Pause {
                    wait,
                    until_pushed: false
                }
            ]
        );
        let retry = FiringKind::Retry { attempt };
        assert_eq!(
            s.step(ready(), c.at(Duration::from_secs(2))),
            [ask(retry, attempt)]
        );
        // A retry answered after its instant launches at once (RTY-01: it asked first).
        assert_eq!(
            s.step(answered(run.clone()), c.at(Duration::from_secs(2))),
            [launch(&run, retry, attempt)]
        );
        assert_eq!(s.attempt(), attempt);
    }
    assert_eq!(
        s.step(Event::Ran(Some(false)), c.at(Duration::from_secs(3))),
        []
    );
    assert_eq!(s.phase(), &Phase::Done);
    // Nothing ran (already running, shutting down, no /bin/sh): no retry.
    let mut s = asking(j, FiringKind::Scheduled, &c);
    s.step(answered(run), c.at(Duration::from_millis(20)));
    assert_eq!(s.step(Event::Ran(None), c.at(Duration::from_secs(1))), []);
    assert_eq!(s.phase(), &Phase::Done);
}

#[test]
fn a_one_shot_waits_for_its_registration_then_for_a_coordinator_that_is_still_starting() {
    let c = Clock::new();
    let j = reboot_job(ClusterPolicy::Leader);
    let current = Some(PendingReboot::Run(j.clone()));
    let unregistered = Facts {
        registered: false,
        pending: current.clone(),
        ..Facts::quiet()
    };
    let registered = Facts {
        pending: current,
        ..Facts::quiet()
    };
    let mut s = seq(j, FiringKind::Reboot, &c);
    assert_eq!(
        s.step(
            Event::Ready(unregistered.clone()),
            c.at(Duration::from_secs(4))
        ),
        [Action::WaitRegistered {
            patience: REBOOT_PATIENCE - Duration::from_secs(4)
        }]
    );
    assert_eq!(
        s.step(
            Event::Ready(registered.clone()),
            c.at(Duration::from_secs(5))
        ),
        [ask(FiringKind::Reboot, 1)]
    );
    // Decided here as SKIP within the patience: ask again a second later.
    let skip_here = local(Verdict::Skip, Reason::CoordinatorUnreachable);
    assert_eq!(
        s.step(
            Event::Answered(skip_here.clone(), registered.clone()),
            c.at(Duration::from_secs(6))
        ),
        [pause(1_000)]
    );
    assert_eq!(
        s.step(
            Event::Ready(registered.clone()),
            c.at(Duration::from_secs(7))
        ),
        [ask(FiringKind::Reboot, 1)]
    );
    // Past the patience the no-manager rule stands, reported as decided here.
    let done = s.step(
        Event::Answered(skip_here.clone(), registered),
        c.at(REBOOT_PATIENCE + Duration::from_millis(1)),
    );
    assert_eq!(
        done[1..],
        [Action::ReportSkip {
            kind: FiringKind::Reboot,
            reason: Reason::CoordinatorUnreachable,
            message: skip_here.message.clone()
        }]
    );
    assert_eq!(s.phase(), &Phase::Done);
}

#[test]
fn a_pending_one_shot_follows_the_job_file_and_waits_for_the_push() {
    let c = Clock::new();
    let j = reboot_job(ClusterPolicy::Leader);
    let with = |pending: PendingReboot| Facts {
        pending: Some(pending),
        ..Facts::quiet()
    };
    let mut s = seq(j.clone(), FiringKind::Reboot, &c);
    // The name left the job file: logged once, rechecked every PENDING_RECHECK.
    for first in [true, false] {
        let mut want = Vec::new();
        if first {
            want.push(Action::Log(Note::LeftJobFile));
        }
        want.push(Action::Pause {
            wait: PENDING_RECHECK,
            until_pushed: false,
        });
        assert_eq!(
            s.step(Event::Ready(with(PendingReboot::Wait)), c.start()),
            want
        );
    }
    // It came back redefined: the current definition is asked about and runs.
    let mut redefined = (*j).clone();
    redefined.command = "echo new".into();
    redefined.retry.retries = 4;
    let redefined = Arc::new(redefined);
    assert_eq!(
        s.step(
            Event::Ready(with(PendingReboot::Run(redefined.clone()))),
            c.start()
        ),
        [Action::Log(Note::Redefined), ask(FiringKind::Reboot, 1)]
    );
    assert_eq!(s.job(), &redefined);
    // The coordinator defers it: the wait ends early on its push, at least every 5 s.
    let d = answer(Verdict::Defer, Reason::Starting);
    assert_eq!(
        s.step(
            Event::Answered(d, with(PendingReboot::Run(redefined.clone()))),
            c.start()
        )
        .last(),
        Some(&Action::Pause {
            wait: REBOOT_DEFER_FALLBACK,
            until_pushed: true
        })
    );
    // A defer decided here waits without the push (no coordinator to push).
    let mut t = asking(j.clone(), FiringKind::Reboot, &c);
    let here = local(Verdict::Defer, Reason::CoordinatorUnreachable);
    assert_eq!(
        t.step(answered(here), c.start()).last(),
        Some(&Action::Pause {
            wait: Duration::from_secs(1),
            until_pushed: false
        })
    );
    // The name now belongs to a job that is no one-shot: dropped.
    assert_eq!(
        s.step(Event::Ready(with(PendingReboot::Gone)), c.start()),
        [Action::Log(Note::NoLongerOneShot)]
    );
    assert_eq!(s.phase(), &Phase::Done);
}

#[test]
fn a_reload_during_a_one_shots_question_asks_again_under_the_new_job_set() {
    let c = Clock::new();
    let j = reboot_job(ClusterPolicy::Leader);
    let current = Some(PendingReboot::Run(j.clone()));
    let registered = Facts {
        pending: current.clone(),
        ..Facts::quiet()
    };
    let mut s = seq(j.clone(), FiringKind::Reboot, &c);
    assert_eq!(
        s.step(Event::Ready(registered), c.start()),
        [ask(FiringKind::Reboot, 1)]
    );
    // Answered, but the job set moved meanwhile: not acted on; wait for the new registration.
    let moved = Facts {
        registered: false,
        pending: current,
        ..Facts::quiet()
    };
    assert_eq!(
        s.step(
            Event::Answered(answer(Verdict::Run, Reason::Leader), moved),
            c.at(Duration::from_secs(1))
        ),
        [
            Action::Log(Note::ReloadedWhileAsking),
            Action::WaitRegistered {
                patience: REBOOT_PATIENCE - Duration::from_secs(1)
            }
        ]
    );
    // Removed from the file while a local SKIP was being decided: back to waiting for the name.
    let mut s = asking(j, FiringKind::Reboot, &c);
    let gone = Facts {
        in_job_file: false,
        pending: Some(PendingReboot::Wait),
        ..Facts::quiet()
    };
    assert_eq!(
        s.step(
            Event::Answered(local(Verdict::Skip, Reason::CoordinatorUnreachable), gone),
            c.start()
        ),
        [
            Action::Log(Note::LeftJobFile),
            Action::Pause {
                wait: PENDING_RECHECK,
                until_pushed: false
            }
        ]
    );
}

#[test]
fn an_event_the_phase_does_not_expect_ends_the_firing_without_acting() {
    let c = Clock::new();
    let run = answer(Verdict::Run, Reason::Leader);
    // (how far the sequence got, the stray event)
    let strays: [(usize, Event); 4] = [
        (0, answered(run.clone())),
        (0, Event::Ran(Some(true))),
        (1, ready()),
        (1, Event::Ran(None)),
    ];
    for (steps, event) in strays {
        let mut s = seq(job(ClusterPolicy::Leader), FiringKind::Scheduled, &c);
        if steps == 1 {
            s.step(ready(), c.start());
        }
        assert_eq!(s.step(event.clone(), c.start()), [], "{event:?}");
        assert_eq!(s.phase(), &Phase::Done);
    }
}
