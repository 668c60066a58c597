//! One firing of one job, end to end: ask the gate, run, report, and retry.
//!
//! Every launch, the first and each relaunch, asks the coordinator first (RTY-01). When the
//! coordinator cannot be reached in time the shim applies the "no manager" row of the decision
//! table itself, so a dead coordinator makes Leader jobs skip and never stops PreferLeader or
//! EveryNode jobs (MAP-05).
//!
//! Beside it: [`handoff`] hands a retry sequence to the new owner, [`resume`] continues one
//! handed to this shim, [`one_shot`] holds `@reboot` one-shots until the coordinator may decide
//! them, [`catch_up`] runs the missed instants the coordinator offers, and [`election_memory`] keeps the election mode the coordinator last stated, for when
//! it is away.

pub mod catch_up;
pub mod election_memory;
pub mod handoff;
pub mod one_shot;
pub mod resume;
pub mod step;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use cronstable_core::fingerprint::{JobSetId, firing_id};
use cronstable_core::{ConcurrencyPolicy, FiringKind, Gate, JobSpec, Reason, Verdict};
use cronstable_proto::v1 as pb;
use tokio::sync::{Notify, watch};

use self::election_memory::ElectionMemory;
use self::step::{Action, Event, Facts, Note, Now, Sequence};
use crate::clock;
use crate::coordinator::client::{Answer, CallError, Coordinator, Registration};
use crate::process::runner::{KILL_GRACE, Launch, LaunchError, Outcome, Supervisor};
use crate::schedule::source::LoadedJob;

/// How far ahead of a scheduled instant the shim asks its gate. The launch itself still waits
/// for the instant; the decision is just taken this much earlier, well inside the granularity
/// at which any backend's view changes.
pub const LEAD: chrono::TimeDelta = chrono::TimeDelta::milliseconds(20);

/// What every firing task shares.
#[derive(Debug, Clone)]
pub struct FiringContext {
    /// The coordinator.
    pub coordinator: Coordinator,
    /// The live job processes.
    pub supervisor: Supervisor,
    /// The job-set ID of the shim's own jobs, for firing IDs when the coordinator is away.
    pub job_set_id: watch::Receiver<JobSetId>,
    /// Becomes true when the shim is shutting down: no new attempts start after that.
    pub stopping: watch::Receiver<bool>,
    /// Notified when the coordinator does not know a job, so the session re-registers.
    pub reregister: Arc<Notify>,
    /// The shim's current jobs (to re-register inline when the coordinator forgot them).
    pub jobs: watch::Receiver<Arc<Vec<LoadedJob>>>,
    /// Where the coordinator's `RunDeferred` pushes wake waiting @reboot one-shots.
    pub wakeups: crate::coordinator::wakeups::DeferredWakeups,
    /// The missed instants this shim has started as catch-ups (each once).
    pub catch_ups: Arc<catch_up::Offers>,
    /// The job-set ID of the shim's last successful registration with the coordinator. An
    /// @reboot one-shot is asked about only while it equals `job_set_id` (see
    /// [`crate::firing::one_shot`]): a coordinator still holding a previous registration would decide
    /// it under the old job set, whose "already ran" record does not apply to the new one.
    pub registered: Arc<watch::Sender<Option<JobSetId>>>,
    /// What the coordinator last said about election (see [`crate::firing::election_memory`]): with
    /// election off, jobs still run while it cannot be reached, for a bounded time. Written
    /// through [`Self::remember`].
    pub election: Arc<watch::Sender<ElectionMemory>>,
    /// Set, with the coordinator's reason, while another live process holds this shim's
    /// executor id or its jobs on this node: the shim then runs nothing at all (not even
    /// EveryNode jobs, which that process runs), and the session keeps asking to take over.
    pub standby: Arc<watch::Sender<Option<String>>>,
}

impl FiringContext {
    /// The context of a shim starting now: not registered, not standby, nothing remembered
    /// of the coordinator's election mode yet.
    pub fn new(
        coordinator: Coordinator,
        supervisor: Supervisor,
        job_set_id: watch::Receiver<JobSetId>,
        stopping: watch::Receiver<bool>,
        jobs: watch::Receiver<Arc<Vec<LoadedJob>>>,
    ) -> Self {
        Self {
            coordinator,
            supervisor,
            job_set_id,
            stopping,
            reregister: Arc::new(Notify::new()),
            jobs,
            wakeups: crate::coordinator::wakeups::DeferredWakeups::new(),
            catch_ups: Arc::default(),
            registered: Arc::new(watch::channel(None).0),
            standby: Arc::new(watch::channel(None).0),
            election: Arc::new(watch::channel(ElectionMemory::default()).0),
        }
    }

    fn stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// True while another live process runs this shim's jobs (see [`Self::standby`]).
    pub fn is_standby(&self) -> bool {
        self.standby.borrow().is_some()
    }

    /// Enters standby with the coordinator's reason; logs once per change.
    pub fn enter_standby(&self, reason: &str) {
        let changed = self.standby.send_if_modified(|s| {
            if s.is_none() {
                *s = Some(reason.to_owned());
                true
            } else {
                false
            }
        });
        if changed {
            tracing::error!(
                "this shim runs no job while another process holds its executor id or jobs on this node: {reason}"
            );
        }
    }

    /// Updates the election memory with `update` (given the time now); logs once per change
    /// of the remembered mode.
    pub fn remember(&self, update: impl FnOnce(&mut ElectionMemory, tokio::time::Instant) -> bool) {
        let now = tokio::time::Instant::now();
        let mut mode = None;
        self.election.send_if_modified(|m| {
            let changed = update(m, now);
            if changed {
                mode = Some(m.mode());
            }
            changed
        });
        if let Some(mode) = mode {
            tracing::info!(
                election_mode = mode.as_str(),
                "the coordinator's election mode, remembered for when it cannot be reached"
            );
        }
    }

    /// Registers `specs` with the coordinator and takes in the answer: standby when another
    /// live process holds them; otherwise out of standby, with the registered job set and the
    /// coordinator's election mode remembered. The session and a firing that found its job
    /// forgotten both register through here.
    pub(crate) async fn register(&self, specs: &[JobSpec]) -> Result<Registration, CallError> {
        let registration = self.coordinator.register(specs).await;
        match &registration {
            Err(e) if e.is_held_elsewhere() => self.enter_standby(&e.to_string()),
            Err(_) => {}
            Ok(r) => {
                self.leave_standby();
                // The shim's own fingerprint of what it registered, compared with its current
                // job set before an @reboot one-shot is asked about (crate::firing::one_shot).
                self.registered
                    .send_replace(Some(cronstable_core::fingerprint::job_set_id(specs)));
                self.remember(|m, now| m.registered(r.election, now));
            }
        }
        registration
    }

    /// Leaves standby (a registration was accepted); logs once per change.
    pub fn leave_standby(&self) {
        if self.standby.send_replace(None).is_some() {
            tracing::warn!(
                "the coordinator accepted this shim's registration: it runs this executor's jobs now"
            );
        }
    }

    /// Sleeps for `d`, or returns false early when the shim starts shutting down.
    async fn pause(&self, d: Duration) -> bool {
        let mut stopping = self.stopping.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => !self.stopping(),
            _ = stopping.wait_for(|s| *s) => false,
        }
    }

    /// Like [`Self::pause`], but also ends early when the coordinator pushes `RunDeferred`
    /// for the one-shot `wakeup` stands for.
    async fn pause_until_woken(
        &self,
        d: Duration,
        wakeup: &crate::coordinator::wakeups::WakeupGuard,
    ) -> bool {
        tokio::select! {
            resumed = self.pause(d) => resumed,
            () = wakeup.woken() => {
                tracing::debug!("coordinator says the deferred one-shot may be decided now");
                !self.stopping()
            }
        }
    }

    async fn ask(&self, job: &JobSpec, at_ms: i64, kind: FiringKind, attempt: u32) -> Answer {
        let ask = || self.coordinator.should_run(&job.name, at_ms, kind, attempt);
        let mut answer = ask().await;
        if answer.as_ref().is_err_and(CallError::is_not_found) {
            // The coordinator restarted, or this firing raced the first registration: register
            // now and ask once more, rather than letting a forgotten registration skip a job.
            let specs: Vec<JobSpec> = self
                .jobs
                .borrow()
                .iter()
                .map(|j| (*j.spec).clone())
                .collect();
            if self.register(&specs).await.is_ok() {
                self.reregister.notify_one();
                answer = ask().await;
            }
            if answer.as_ref().is_err_and(CallError::is_not_found)
                && !specs.iter().any(|s| s.name == job.name)
            {
                return Answer::decided_here(
                    Verdict::Skip,
                    Reason::NotOwner,
                    "the job was removed from the job file".into(),
                    String::new(),
                    Duration::ZERO,
                );
            }
        }
        if let Err(e) = &answer
            && e.is_held_elsewhere()
        {
            self.enter_standby(&e.to_string());
            self.reregister.notify_one();
        }
        match answer {
            Ok(a) => {
                self.remember(|m, now| m.answered(a.reason, a.election, now));
                a
            }
            Err(e) => {
                let remembered = self.election.borrow().gate(tokio::time::Instant::now());
                let firing_id = firing_id(&self.job_set_id.borrow(), &job.name, at_ms);
                let answer = step::without_coordinator(job, kind, &e, remembered, firing_id);
                let what = if e.is_unreachable() {
                    "no answer from the coordinator"
                } else {
                    "the coordinator refused the question"
                };
                let rule = if e.is_unreachable() && remembered == Gate::ElectionOff {
                    "it last said election is off, so the job runs here"
                } else {
                    "applying the no-manager rule"
                };
                tracing::warn!(
                    job = job.name,
                    error = %e,
                    verdict = answer.verdict.as_str(),
                    "{what}; {rule}"
                );
                answer
            }
        }
    }

    /// What the shim knows about itself now, for the step (see [`step::Facts`]).
    fn facts(&self, seq: &Sequence) -> Facts {
        let name = &seq.job().name;
        let jobs = self.jobs.borrow();
        Facts {
            stopping: self.stopping(),
            standby: self.is_standby(),
            registered: one_shot::still_registered(&self.registered.subscribe(), &self.job_set_id),
            pending: seq
                .is_deferred_one_shot()
                .then(|| one_shot::pending_reboot(&jobs, name)),
            running: self.supervisor.running(name),
            in_job_file: jobs.iter().any(|j| j.spec.name == *name),
        }
    }
}

/// A firing's identity as its run sees it.
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    /// The nominal instant (`CRONSTABLE_SCHEDULED_AT`, also for a catch-up).
    pub scheduled_at: DateTime<Utc>,
    /// The cluster-wide firing ID.
    pub firing_id: &'a str,
    /// The attempt number.
    pub attempt: u32,
    /// The fencing token, where the backend has one.
    pub fence: Option<&'a str>,
    /// The node that decided.
    pub node: &'a str,
    /// A missed instant run late by catch-up (`CRONSTABLE_CATCH_UP=1`).
    pub catch_up: bool,
}

/// The environment a run gets on top of the shim's own: the job's variables and the firing's
/// identity, so a job can make its side effects idempotent or fenced.
pub fn firing_env(job: &JobSpec, id: Identity<'_>) -> BTreeMap<String, String> {
    let Identity {
        scheduled_at,
        firing_id,
        attempt,
        fence,
        node,
        catch_up,
    } = id;
    let mut env = job.environment.clone();
    env.insert("CRONSTABLE_JOB".into(), job.name.clone());
    env.insert(
        "CRONSTABLE_SCHEDULED_AT".into(),
        scheduled_at.to_rfc3339_opts(SecondsFormat::AutoSi, true),
    );
    env.insert("CRONSTABLE_FIRING_ID".into(), firing_id.to_owned());
    env.insert("CRONSTABLE_ATTEMPT".into(), attempt.to_string());
    if let Some(fence) = fence {
        env.insert("CRONSTABLE_FENCE".into(), fence.to_owned());
    }
    if !node.is_empty() {
        env.insert("CRONSTABLE_NODE".into(), node.to_owned());
    }
    if catch_up {
        env.insert("CRONSTABLE_CATCH_UP".into(), "1".to_owned());
    }
    env
}

/// Runs one firing of `job` due at `scheduled_at`, with its retries.
pub async fn fire(
    ctx: FiringContext,
    job: Arc<JobSpec>,
    scheduled_at: DateTime<Utc>,
    first: FiringKind,
) {
    fire_launched(ctx, job, scheduled_at, first).await;
}

/// [`fire`], saying whether any attempt was launched (the coordinator answered RUN).
pub async fn fire_launched(
    ctx: FiringContext,
    job: Arc<JobSpec>,
    scheduled_at: DateTime<Utc>,
    first: FiringKind,
) -> bool {
    let max_attempts = job.retry.retries.saturating_add(1);
    run_sequence(ctx, job, scheduled_at, first, 1, max_attempts).await
}

/// The firing loop from attempt `attempt` (of kind `first`) up to `max_attempts`: every launch
/// asks the gate first. A fresh firing starts at 1; a resumed handoff at its next attempt.
/// The rules are [`step::Sequence::step`]'s; this performs what it asks for. Returns whether
/// any attempt was launched.
pub(crate) async fn run_sequence(
    ctx: FiringContext,
    job: Arc<JobSpec>,
    scheduled_at: DateTime<Utc>,
    first: FiringKind,
    attempt: u32,
    max_attempts: u32,
) -> bool {
    let mut seq = Sequence::new(
        job,
        scheduled_at,
        first,
        attempt,
        max_attempts,
        tokio::time::Instant::now(),
    );
    let at_ms = scheduled_at.timestamp_millis();
    // Registered for the whole wait, so a push between two questions is kept.
    let wakeup = seq
        .is_deferred_one_shot()
        .then(|| ctx.wakeups.register(&seq.job().name, at_ms));
    let mut event = Event::Ready(ctx.facts(&seq));
    let mut launched = false;
    loop {
        let now = Now {
            mono: tokio::time::Instant::now(),
            wall: clock::now(),
        };
        let mut next = None;
        for action in seq.step(event, now) {
            launched |= matches!(action, Action::Launch { .. });
            next = perform(&ctx, &seq, action, wakeup.as_ref()).await;
        }
        match next {
            Some(e) => event = e,
            None => return launched,
        }
    }
}

/// Performs one of the step's actions; a wait, a question or a launch ends with the event the
/// step takes next.
async fn perform(
    ctx: &FiringContext,
    seq: &Sequence,
    action: Action,
    wakeup: Option<&crate::coordinator::wakeups::WakeupGuard>,
) -> Option<Event> {
    let job = seq.job();
    let at_ms = seq.scheduled_at().timestamp_millis();
    match action {
        Action::Log(note) => {
            log(seq, note);
            None
        }
        Action::ReportSkip {
            kind,
            reason,
            message,
        } => {
            ctx.coordinator
                .report_skip_logged(&job.name, at_ms, kind, reason, message)
                .await;
            None
        }
        Action::HandOff {
            attempt,
            max_attempts,
        } => {
            handoff::hand_off(&ctx.coordinator, job, at_ms, attempt, max_attempts).await;
            None
        }
        Action::StopPrevious => {
            ctx.supervisor.stop(Some(&job.name), KILL_GRACE).await;
            None
        }
        Action::Pause { wait, until_pushed } => {
            match wakeup.filter(|_| until_pushed) {
                Some(w) => ctx.pause_until_woken(wait, w).await,
                None => ctx.pause(wait).await,
            };
            Some(Event::Ready(ctx.facts(seq)))
        }
        Action::WaitRegistered { patience } => {
            let mut stopping = ctx.stopping.clone();
            let wait = one_shot::wait_registered(
                ctx.registered.subscribe(),
                ctx.job_set_id.clone(),
                patience,
            );
            tokio::select! {
                _ = wait => {}
                _ = stopping.wait_for(|s| *s) => {}
            }
            Some(Event::Ready(ctx.facts(seq)))
        }
        Action::Ask { kind, attempt } => {
            let answer = ctx.ask(job, at_ms, kind, attempt).await;
            Some(Event::Answered(answer, ctx.facts(seq)))
        }
        Action::Launch {
            answer,
            kind,
            attempt,
        } => {
            let firing = (seq.scheduled_at(), kind, attempt, seq.is_catch_up());
            let outcome = launch(ctx, job, firing, &answer).await;
            Some(Event::Ran(outcome.map(|o| o.succeeded())))
        }
    }
}

/// The sequence's log lines, with the job (and where it helps, the instant) on each.
fn log(seq: &Sequence, note: Note) {
    let job = seq.job().name.as_str();
    let scheduled_at = seq.scheduled_at();
    match note {
        Note::Redefined => tracing::info!(
            job,
            "@reboot job redefined while its one-shot was pending; the current definition will run"
        ),
        Note::LeftJobFile => tracing::info!(
            job,
            "@reboot job left the job file while its one-shot was pending; it stays pending until the name returns"
        ),
        Note::NoLongerOneShot => tracing::info!(
            job,
            "job is no longer a Leader/PreferLeader @reboot job; its pending boot-time one-shot is dropped"
        ),
        Note::Standby => tracing::debug!(
            job,
            scheduled_at = %scheduled_at,
            "not run: another process holds this executor"
        ),
        Note::ReloadedWhileAsking => tracing::info!(
            job,
            "job file reloaded while the @reboot one-shot was being decided; asking again"
        ),
        Note::SkippedConcurrency => tracing::info!(
            job,
            scheduled_at = %scheduled_at,
            "skipped: {}",
            Reason::ConcurrencyPolicy.describe()
        ),
        Note::Skipped {
            attempt,
            reason,
            message,
        } => tracing::info!(
            job,
            scheduled_at = %scheduled_at,
            attempt,
            reason = reason.code(),
            "skipped: {message}"
        ),
        Note::GaveUp { attempt, message } => tracing::warn!(job, attempt, "{message}"),
        Note::Deferred { reason } => tracing::debug!(job, reason = reason.code(), "deferred"),
        Note::NotLaunched => tracing::info!(
            job,
            scheduled_at = %scheduled_at,
            "not launched: the shim is stopping; handing the RUN back to the coordinator"
        ),
        Note::StoppingPrevious => {
            tracing::info!(job, "stopping the previous run (concurrencyPolicy Replace)")
        }
        Note::WillRetry { attempt, wait } => tracing::info!(
            job,
            attempt,
            wait_ms = wait.as_millis() as u64,
            "will retry"
        ),
    }
}

/// One attempt to start: its instant, kind, attempt number, and whether its sequence is a
/// catch-up (a retry of a caught-up instant is marked too).
type Attempt = (DateTime<Utc>, FiringKind, u32, bool);

async fn launch(
    ctx: &FiringContext,
    job: &JobSpec,
    (scheduled_at, kind, attempt, catch_up): Attempt,
    gate: &Answer,
) -> Option<Outcome> {
    let at_ms = scheduled_at.timestamp_millis();
    let reporter = ctx.coordinator.clone();
    let name = job.name.clone();
    let result = ctx
        .supervisor
        .run(
            launch_of(job, (scheduled_at, kind, attempt, catch_up), gate),
            move |pid, started_at| {
                tracing::info!(
                    job = name,
                    pid,
                    attempt,
                    reason = gate.why().code(),
                    "run started"
                );
                // Reported off the launch path so a slow coordinator never delays a job's start.
                crate::spawn(async move {
                    let event = pb::report_run_request::Event::Started(pb::RunStarted {
                        started_at_ms: started_at.timestamp_millis(),
                        pid,
                    });
                    let _ = reporter.report(&name, at_ms, kind, attempt, event).await;
                });
            },
        )
        .await;
    match result {
        Ok(outcome) => {
            tracing::info!(
                job = job.name,
                pid = outcome.pid,
                exit_code = ?outcome.exit_code,
                signal = ?outcome.signal,
                timed_out = outcome.timed_out,
                "run finished"
            );
            let report =
                ctx.coordinator
                    .report(&job.name, at_ms, kind, attempt, finished(&outcome));
            if let Err(e) = report.await {
                tracing::debug!(job = job.name, error = %e, "could not report a finish");
            }
            Some(outcome)
        }
        Err(e) => {
            launched_nothing(ctx, job, (scheduled_at, kind, attempt, catch_up), e).await;
            None
        }
    }
}

/// Says why an attempt answered RUN started nothing, to the log and the coordinator.
async fn launched_nothing(
    ctx: &FiringContext,
    job: &JobSpec,
    (scheduled_at, kind, attempt, _): Attempt,
    error: LaunchError,
) {
    let at_ms = scheduled_at.timestamp_millis();
    match error {
        LaunchError::AlreadyRunning => {
            let msg = Reason::ConcurrencyPolicy.describe().to_owned();
            tracing::info!(job = job.name, scheduled_at = %scheduled_at, "skipped: {msg}");
            ctx.coordinator
                .report_skip_logged(&job.name, at_ms, kind, Reason::ConcurrencyPolicy, msg)
                .await;
        }
        LaunchError::ShuttingDown if !kind.is_claimed() => {}
        LaunchError::ShuttingDown => {
            tracing::info!(
                job = job.name,
                scheduled_at = %scheduled_at,
                "not launched: the shim is stopping; handing the RUN back to the coordinator"
            );
            ctx.coordinator
                .report_skip_logged(
                    &job.name,
                    at_ms,
                    kind,
                    Reason::NotLaunched,
                    step::NOT_LAUNCHED.to_owned(),
                )
                .await;
        }
        LaunchError::Spawn(e) => {
            tracing::error!(job = job.name, error = %e, "could not start /bin/sh");
            let _ = ctx
                .coordinator
                .report(
                    &job.name,
                    at_ms,
                    kind,
                    attempt,
                    not_started_event(&e.to_string()),
                )
                .await;
        }
    }
}

/// What the supervisor starts for `job`'s firing at `scheduled_at`, on the RUN `gate`.
fn launch_of(
    job: &JobSpec,
    (scheduled_at, kind, attempt, catch_up): Attempt,
    gate: &Answer,
) -> Launch {
    Launch {
        job: job.name.clone(),
        command: job.command.clone(),
        stdin: job.stdin.clone(),
        env: firing_env(
            job,
            Identity {
                scheduled_at,
                firing_id: &gate.firing_id,
                attempt,
                fence: gate.fence.as_deref(),
                node: &gate.node_name,
                catch_up,
            },
        ),
        timeout: job.timeout,
        // Forbid is enforced again under the supervisor's lock: firings that were asked at the
        // same moment must not both start.
        exclusive: kind != FiringKind::Manual
            && job.concurrency_policy == ConcurrencyPolicy::Forbid,
    }
}

/// The report of a run that ended.
fn finished(outcome: &Outcome) -> pb::report_run_request::Event {
    pb::report_run_request::Event::Finished(pb::RunFinished {
        started_at_ms: outcome.started_at.timestamp_millis(),
        finished_at_ms: outcome.finished_at.timestamp_millis(),
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        timed_out: outcome.timed_out,
        output_tail: outcome.output_tail.clone(),
        duration_ms: (outcome.finished_at - outcome.started_at)
            .num_milliseconds()
            .max(0) as u64,
    })
}

/// The report of a run whose shell could not start: a run that ended without an exit code,
/// with the reason as its output, so the ledger never shows a RUN decision with nothing after.
fn not_started_event(why: &str) -> pb::report_run_request::Event {
    let now = clock::now_ms();
    pb::report_run_request::Event::Finished(pb::RunFinished {
        started_at_ms: now,
        finished_at_ms: now,
        exit_code: None,
        signal: None,
        timed_out: false,
        output_tail: format!("could not start /bin/sh: {why}"),
        duration_ms: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_firing_env_names_the_firing_and_keeps_the_jobs_variables() {
        let mut job = JobSpec::new("backup", "0 3 * * *", "./backup.sh");
        job.environment.insert("TARGET".into(), "s3".into());
        let at = Utc.with_ymd_and_hms(2026, 3, 5, 3, 0, 0).unwrap();
        let id = Identity {
            scheduled_at: at,
            firing_id: "fid",
            attempt: 2,
            fence: Some("fence-7"),
            node: "n1",
            catch_up: false,
        };
        let env = firing_env(&job, id);
        assert_eq!(env["CRONSTABLE_JOB"], "backup");
        assert_eq!(env["CRONSTABLE_SCHEDULED_AT"], "2026-03-05T03:00:00Z");
        assert_eq!(env["CRONSTABLE_FIRING_ID"], "fid");
        assert_eq!(env["CRONSTABLE_ATTEMPT"], "2");
        assert_eq!(env["CRONSTABLE_NODE"], "n1");
        assert_eq!(env["CRONSTABLE_FENCE"], "fence-7");
        assert_eq!(env["TARGET"], "s3");
        assert!(!env.contains_key("CRONSTABLE_CATCH_UP"));
        let bare = Identity {
            attempt: 1,
            fence: None,
            node: "",
            ..id
        };
        assert!(!firing_env(&job, bare).contains_key("CRONSTABLE_FENCE"));
        let late = firing_env(
            &job,
            Identity {
                catch_up: true,
                ..id
            },
        );
        assert_eq!(late["CRONSTABLE_CATCH_UP"], "1");
        assert_eq!(
            late["CRONSTABLE_SCHEDULED_AT"], "2026-03-05T03:00:00Z",
            "a catch-up keeps its nominal instant"
        );
    }

    /// A coordinator that answers from a script: the logic above the client (what the shim does
    /// with answers and errors) is under test here; the real coordinator is in the integration
    /// tier.
    mod scripted {
        use std::collections::VecDeque;
        use std::sync::Mutex;

        use cronstable_proto::v1 as pb;
        use cronstable_proto::v1::executor_server::{Executor, ExecutorServer};
        use tonic::{Request, Response, Status};

        /// Registration says election off (generation 100); ShouldRun answers pop `answers`.
        #[derive(Default)]
        pub(super) struct Scripted {
            pub(super) answers: Mutex<VecDeque<Result<pb::ShouldRunResponse, Status>>>,
        }

        pub(super) fn stamp(mode: pb::ElectionMode, generation: u64) -> Option<pb::ElectionStamp> {
            Some(pb::ElectionStamp {
                mode: mode as i32,
                generation,
            })
        }

        pub(super) fn run_answer(election: Option<pb::ElectionStamp>) -> pb::ShouldRunResponse {
            pb::ShouldRunResponse {
                verdict: pb::Verdict::Run as i32,
                reason: pb::Reason::ElectionOff as i32,
                message: "election off".into(),
                election,
                ..Default::default()
            }
        }

        type Instructions = std::pin::Pin<
            Box<dyn tokio_stream::Stream<Item = Result<pb::Instruction, Status>> + Send>,
        >;

        #[tonic::async_trait]
        impl Executor for Scripted {
            async fn register_jobs(
                &self,
                _: Request<pb::RegisterJobsRequest>,
            ) -> Result<Response<pb::RegisterJobsResponse>, Status> {
                Ok(Response::new(pb::RegisterJobsResponse {
                    job_set_id: "v1:scripted".into(),
                    jobs: Vec::new(),
                    election: stamp(pb::ElectionMode::Off, 100),
                    warnings: Vec::new(),
                }))
            }
            async fn should_run(
                &self,
                _: Request<pb::ShouldRunRequest>,
            ) -> Result<Response<pb::ShouldRunResponse>, Status> {
                let next = self.answers.lock().unwrap().pop_front();
                next.unwrap_or_else(|| Err(Status::internal("the script ran out")))
                    .map(Response::new)
            }
            async fn should_run_batch(
                &self,
                _: Request<pb::ShouldRunBatchRequest>,
            ) -> Result<Response<pb::ShouldRunBatchResponse>, Status> {
                Err(Status::unimplemented("scripted"))
            }
            async fn report_run(
                &self,
                _: Request<pb::ReportRunRequest>,
            ) -> Result<Response<pb::ReportRunResponse>, Status> {
                Ok(Response::new(pb::ReportRunResponse {}))
            }
            async fn handoff(
                &self,
                _: Request<pb::HandoffRequest>,
            ) -> Result<Response<pb::HandoffResponse>, Status> {
                Err(Status::unimplemented("scripted"))
            }
            async fn start_job(
                &self,
                _: Request<pb::StartJobRequest>,
            ) -> Result<Response<pb::StartJobResponse>, Status> {
                Err(Status::unimplemented("scripted"))
            }
            type WatchStream = Instructions;
            async fn watch(
                &self,
                _: Request<pb::WatchRequest>,
            ) -> Result<Response<Self::WatchStream>, Status> {
                Err(Status::unimplemented("scripted"))
            }
        }

        /// Serves `script` on a loopback port; returns its address.
        pub(super) async fn serve(script: Scripted) -> String {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let incoming = tonic::transport::server::TcpIncoming::from(l);
            tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(ExecutorServer::new(script))
                    .serve_with_incoming(incoming),
            );
            format!("http://{addr}")
        }
    }

    /// A shim context on the coordinator at `addr`, registered (election off, generation 100).
    async fn registered_context(addr: &str, job: &JobSpec) -> FiringContext {
        let coordinator =
            Coordinator::new(addr, "scripted-shim".into(), Duration::from_secs(2), None).unwrap();
        let specs = vec![job.clone()];
        let registration = coordinator.register(&specs).await.unwrap();
        let loaded = LoadedJob {
            spec: Arc::new(job.clone()),
            schedule: cronstable_core::schedule::Schedule::parse(&job.schedule, None).unwrap(),
        };
        let ctx = FiringContext {
            coordinator,
            supervisor: Supervisor::new(),
            job_set_id: watch::channel(cronstable_core::fingerprint::job_set_id(&specs)).1,
            stopping: watch::channel(false).1,
            reregister: Arc::new(Notify::new()),
            jobs: watch::channel(Arc::new(vec![loaded])).1,
            wakeups: crate::coordinator::wakeups::DeferredWakeups::new(),
            catch_ups: Arc::default(),
            registered: Arc::new(watch::channel(None).0),
            standby: Arc::new(watch::channel(None).0),
            election: Arc::new(watch::channel(ElectionMemory::default()).0),
        };
        ctx.remember(|m, now| m.registered(registration.election, now));
        ctx
    }

    fn leader_job() -> JobSpec {
        let mut job = JobSpec::new("charge", "* * * * *", "true");
        job.cluster_policy = cronstable_core::ClusterPolicy::Leader;
        job
    }

    /// Issue 29, item 6: the remembered "election off" speaks for a coordinator that is away,
    /// never for one that refused the question. Each case failed with its rule reverted: the
    /// memory consulted on a refusal, or not updated from an answer's stamp.
    #[tokio::test]
    async fn the_memory_runs_leader_jobs_only_for_an_absent_coordinator_and_follows_every_answer() {
        use scripted::{Scripted, run_answer, stamp};
        let job = leader_job();
        let script = Scripted::default();
        script.answers.lock().unwrap().extend([
            // Unreachable (UNAVAILABLE): the memory says off, so the Leader job runs.
            Err(tonic::Status::unavailable("restarting")),
            // A refusal: no reason to assume anything, so the no-manager row skips it.
            Err(tonic::Status::permission_denied("not for you")),
            // An answer with the farewell of a coordinator moving into a cluster (unknown,
            // generation 101), then unreachable again: the memory followed the answer.
            Ok(run_answer(stamp(pb::ElectionMode::Unspecified, 101))),
            Err(tonic::Status::unavailable("gone")),
        ]);
        let addr = scripted::serve(script).await;
        let ctx = registered_context(&addr, &job).await;
        assert!(ctx.election.borrow().election_off());

        let away = ctx.ask(&job, 0, FiringKind::Scheduled, 1).await;
        assert_eq!(
            (away.verdict, away.is_local()),
            (Verdict::Run, true),
            "{away:?}"
        );
        assert_eq!(away.why(), Reason::ElectionOff);

        let refused = ctx.ask(&job, 0, FiringKind::Scheduled, 1).await;
        assert_eq!(refused.verdict, Verdict::Skip, "{refused:?}");
        assert_eq!(refused.why(), Reason::CoordinatorUnreachable);

        let answered = ctx.ask(&job, 0, FiringKind::Scheduled, 1).await;
        assert_eq!(answered.verdict, Verdict::Run, "{answered:?}");
        assert!(!ctx.election.borrow().election_off());

        let gone = ctx.ask(&job, 0, FiringKind::Scheduled, 1).await;
        assert_eq!(gone.verdict, Verdict::Skip, "{gone:?}");
    }
}
