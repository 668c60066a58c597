//! One firing's sequence of attempts as a state machine: [`Sequence::step`] takes what just
//! happened and the time, and returns what to do next. It does no I/O and reads no clock; the
//! async shell in the parent module performs the [`Action`]s (asks the coordinator, sleeps,
//! launches, reports) and feeds back the [`Event`] each one ends with.
//!
//! The sequence, from the first attempt (or a resumed handoff's next one):
//!
//! 1. **Checking** the shim's own facts: shutting down ends it; a deferred `@reboot` one-shot
//!    follows the job file (RBT-07, RBT-08: the current definition runs, a missing name waits,
//!    a name that is no longer a one-shot drops it); `concurrencyPolicy: Forbid` with a run
//!    still going skips; a one-shot waits for the shim's registration to cover its job set
//!    (**AwaitingRegistration**, at most [`REBOOT_PATIENCE`]); standby (another process holds
//!    this executor) ends it.
//! 2. **Asking** the coordinator (RTY-01: every launch, retries included). The answer, or the
//!    shim's own decision when there is none ([`without_coordinator`]), is one of:
//!    SKIP (reported if decided here; a retry that lost ownership is handed off), DEFER
//!    (**Waiting** its `retry_after`, or for the coordinator's push for a one-shot, up to a
//!    bound per kind), RUN.
//! 3. **WaitingInstant**: the question went out [`super::LEAD`] early; the launch waits for the
//!    instant (an answer that arrives after it launches at once). A shim that stops meanwhile
//!    launches nothing and reports `not_launched`, so the coordinator gives the claim back.
//! 4. **Running**; then done, or **BackingOff** and back to 1 for the next attempt.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronstable_core::{
    ClusterPolicy, ConcurrencyPolicy, FiringKind, Gate, JobSpec, Reason, Verdict, decide,
};
use tokio::time::Instant;

use super::one_shot::{PENDING_RECHECK, PendingReboot};
use crate::coordinator::client::{Answer, CallError};

/// How long a deferred retry keeps re-asking before it gives up.
pub const MAX_RETRY_DEFERRAL: Duration = Duration::from_secs(3600);
/// How long a deferred scheduled firing keeps re-asking before it gives up. A coordinator
/// defers one only while a lease follower waits to confirm the holder ran it (PreferLeader),
/// which ends within a few seconds; this bound keeps a coordinator that never settles from
/// piling up waiting firings.
pub const MAX_SCHEDULED_DEFERRAL: Duration = Duration::from_secs(60);
/// How long an `@reboot` one-shot waits for a coordinator that is not up yet (a sidecar often
/// starts after the container it serves) before the no-manager rule decides it.
pub const REBOOT_PATIENCE: Duration = Duration::from_secs(30);
/// How long a deferred `@reboot` one-shot waits between questions when its coordinator
/// answered: the coordinator pushes `RunDeferred` over Watch as soon as the gate would decide
/// it, so this is only the fallback for a push that could not be delivered.
pub const REBOOT_DEFER_FALLBACK: Duration = Duration::from_secs(5);
/// What a shim stopping between a RUN answer and the launch reports.
pub const NOT_LAUNCHED: &str =
    "the executor stopped between the RUN answer and the launch, so nothing ran";
/// How long a one-shot decided here as SKIP waits before asking again, within its patience.
const REBOOT_RETRY: Duration = Duration::from_secs(1);

/// The time, as the step reads it: the monotonic clock for every wait and bound, the wall
/// clock only for the firing's instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Monotonic.
    pub mono: Instant,
    /// Wall clock.
    pub wall: DateTime<Utc>,
}

/// What the shim knows about itself at a moment, gathered by the shell for every event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The shim is shutting down: no new attempt starts.
    pub stopping: bool,
    /// Another live process holds this shim's executor id or jobs on this node.
    pub standby: bool,
    /// The coordinator's registration covers the shim's current job set (see
    /// [`super::one_shot::still_registered`]).
    pub registered: bool,
    /// For a deferred `@reboot` one-shot: what the current job file says of it.
    pub pending: Option<PendingReboot>,
    /// Runs of this job going on now.
    pub running: usize,
    /// The job's name is in the shim's current job file.
    pub in_job_file: bool,
}

impl Facts {
    /// Nothing going on: running, registered, not standby, the job in the file.
    pub fn quiet() -> Self {
        Self {
            stopping: false,
            standby: false,
            registered: true,
            pending: None,
            running: 0,
            in_job_file: true,
        }
    }
}

/// What happened: the input of [`Sequence::step`].
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The sequence starts, or a wait the step asked for ended (by its time, a push, or the
    /// shim shutting down, which `facts.stopping` says).
    Ready(Facts),
    /// The coordinator answered, or the shim decided without it.
    Answered(Answer, Facts),
    /// The launch ended: `Some(succeeded)` after a run, `None` when nothing ran (the job was
    /// already running under Forbid, the shim is shutting down, `/bin/sh` did not start).
    Ran(Option<bool>),
}

/// What to do: the output of [`Sequence::step`]. The shell performs them in order; the last
/// one of a step, if it is a wait, a question or a launch, ends with the next event.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Log one line.
    Log(Note),
    /// Report a skip decided here to the coordinator (it goes into the ledger there).
    ReportSkip {
        /// The firing's kind.
        kind: FiringKind,
        /// Why.
        reason: Reason,
        /// The readable sentence.
        message: String,
    },
    /// Hand the retry sequence over to the new owner (RTY-04).
    HandOff {
        /// The attempt that was refused.
        attempt: u32,
        /// Of how many.
        max_attempts: u32,
    },
    /// Wait for `wait` (or until the shim shuts down), then [`Event::Ready`].
    Pause {
        /// How long.
        wait: Duration,
        /// The coordinator's `RunDeferred` push for this one-shot ends the wait early.
        until_pushed: bool,
    },
    /// Wait until the coordinator's registration covers the shim's job set, at most `patience`,
    /// then [`Event::Ready`].
    WaitRegistered {
        /// At most this long.
        patience: Duration,
    },
    /// Ask `ShouldRun`, then [`Event::Answered`].
    Ask {
        /// The firing's kind.
        kind: FiringKind,
        /// Which attempt.
        attempt: u32,
    },
    /// Stop the job's previous run first (`concurrencyPolicy: Replace`).
    StopPrevious,
    /// Start the command under `answer`'s firing id, fence and node, then [`Event::Ran`].
    Launch {
        /// The RUN it runs on.
        answer: Answer,
        /// The firing's kind.
        kind: FiringKind,
        /// Which attempt.
        attempt: u32,
    },
}

/// The lines the sequence logs, each once where it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// A pending one-shot's job was redefined: the current definition runs.
    Redefined,
    /// A pending one-shot's job left the job file: it waits for the name.
    LeftJobFile,
    /// A pending one-shot's name is no longer a Leader/PreferLeader `@reboot` job.
    NoLongerOneShot,
    /// Standby: another process runs this firing.
    Standby,
    /// The job file was reloaded while a one-shot was being decided: asking again.
    ReloadedWhileAsking,
    /// Skipped: a run of the job is still going (Forbid).
    SkippedConcurrency,
    /// Skipped on the answer.
    Skipped {
        /// Which attempt.
        attempt: u32,
        /// Why.
        reason: Reason,
        /// The answer's sentence.
        message: String,
    },
    /// A DEFER outlived its bound.
    GaveUp {
        /// Which attempt.
        attempt: u32,
        /// What is reported.
        message: String,
    },
    /// Deferred; asking again later.
    Deferred {
        /// Why.
        reason: Reason,
    },
    /// Replace: stopping the previous run.
    StoppingPrevious,
    /// The shim stopped with a RUN in hand before the instant: nothing launched.
    NotLaunched,
    /// The attempt failed; the next one after `wait`.
    WillRetry {
        /// The next attempt.
        attempt: u32,
        /// The backoff before it.
        wait: Duration,
    },
}

/// Where the sequence is.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// About to check the shim's facts before a question.
    Checking,
    /// An `@reboot` one-shot waits for the registration to cover its job set.
    AwaitingRegistration,
    /// The question is out.
    Asking,
    /// Waiting before checking again (a DEFER, a pending one-shot, a one-shot's patience).
    Waiting,
    /// RUN: waiting for the instant.
    WaitingInstant(Answer),
    /// The command runs.
    Running,
    /// Waiting out the backoff before the next attempt.
    BackingOff,
    /// Over: nothing more happens for this firing.
    Done,
}

/// One firing's attempts: the state [`Self::step`] moves.
#[derive(Debug, Clone)]
pub struct Sequence {
    job: Arc<JobSpec>,
    scheduled_at: DateTime<Utc>,
    kind: FiringKind,
    attempt: u32,
    max_attempts: u32,
    /// A Leader/PreferLeader `@reboot` one-shot: it follows reloads while it waits.
    deferred_one_shot: bool,
    /// When the first question of this sequence was about to be asked.
    asked_from: Instant,
    /// The sequence began as a catch-up.
    catch_up: bool,
    told_vanished: bool,
    deferred_since: Option<Instant>,
    registered_before: bool,
    phase: Phase,
}

impl Sequence {
    /// The sequence of `job`'s firing at `scheduled_at` from attempt `attempt` (of kind
    /// `first`) up to `max_attempts`, starting at `now`.
    pub fn new(
        job: Arc<JobSpec>,
        scheduled_at: DateTime<Utc>,
        first: FiringKind,
        attempt: u32,
        max_attempts: u32,
        now: Instant,
    ) -> Self {
        let deferred_one_shot =
            first == FiringKind::Reboot && job.cluster_policy != ClusterPolicy::EveryNode;
        Self {
            catch_up: first == FiringKind::CatchUp,
            job,
            scheduled_at,
            kind: first,
            attempt,
            max_attempts,
            deferred_one_shot,
            asked_from: now,
            told_vanished: false,
            deferred_since: None,
            registered_before: false,
            phase: Phase::Checking,
        }
    }

    /// The job as it now stands (a pending one-shot follows its redefinition).
    pub fn job(&self) -> &Arc<JobSpec> {
        &self.job
    }

    /// The firing's instant.
    pub fn scheduled_at(&self) -> DateTime<Utc> {
        self.scheduled_at
    }

    /// Whether this sequence runs a missed instant the coordinator offered (its retries too).
    pub fn is_catch_up(&self) -> bool {
        self.catch_up
    }

    /// Whether this is a deferred `@reboot` one-shot (it may be woken by a push).
    pub fn is_deferred_one_shot(&self) -> bool {
        self.deferred_one_shot
    }

    /// Where the sequence is.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// The current attempt.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// One transition: `event` in the current phase at `now`.
    pub fn step(&mut self, event: Event, now: Now) -> Vec<Action> {
        let mut out = Vec::new();
        let phase = std::mem::replace(&mut self.phase, Phase::Done);
        match (phase, event) {
            (Phase::Checking | Phase::Waiting | Phase::BackingOff, Event::Ready(f)) => {
                self.check(&f, now, &mut out);
            }
            (Phase::AwaitingRegistration, Event::Ready(f)) if !f.stopping => {
                self.ask_unless_standby(&f, &mut out);
            }
            (Phase::Asking, Event::Answered(answer, f)) => self.answered(answer, &f, now, &mut out),
            (Phase::WaitingInstant(answer), Event::Ready(f)) if !f.stopping => {
                self.launch(answer, &f, &mut out);
            }
            (Phase::WaitingInstant(_), Event::Ready(_)) => self.not_launched(&mut out),
            (Phase::Running, Event::Ran(ran)) => self.ran(ran, &mut out),
            // Shutting down in a wait ends the firing. Anything else is a shell that did not
            // do what the step asked: stop this firing rather than guess (a test holds every
            // pair the shell produces).
            _ => {}
        }
        out
    }

    /// Step 1: the shim's own facts before a question.
    fn check(&mut self, f: &Facts, now: Now, out: &mut Vec<Action>) {
        if f.stopping {
            return;
        }
        if self.deferred_one_shot && self.kind == FiringKind::Reboot {
            match &f.pending {
                Some(PendingReboot::Run(spec)) => {
                    if *spec != self.job {
                        out.push(Action::Log(Note::Redefined));
                        self.job = spec.clone();
                        self.max_attempts = self.job.retry.retries.saturating_add(1);
                    }
                    self.told_vanished = false;
                }
                Some(PendingReboot::Wait) => {
                    if !self.told_vanished {
                        out.push(Action::Log(Note::LeftJobFile));
                        self.told_vanished = true;
                    }
                    self.wait(PENDING_RECHECK, false, out);
                    return;
                }
                Some(PendingReboot::Gone) => {
                    out.push(Action::Log(Note::NoLongerOneShot));
                    return;
                }
                None => {}
            }
        }
        if self.kind != FiringKind::Manual
            && self.job.concurrency_policy == ConcurrencyPolicy::Forbid
            && f.running > 0
        {
            out.push(Action::Log(Note::SkippedConcurrency));
            out.push(Action::ReportSkip {
                kind: self.kind,
                reason: Reason::ConcurrencyPolicy,
                message: Reason::ConcurrencyPolicy.describe().to_owned(),
            });
            return;
        }
        if self.kind == FiringKind::Reboot && !f.registered {
            // Bounded: a coordinator that never answers leaves the one-shot to the no-manager
            // rule after REBOOT_PATIENCE.
            let waited = now.mono.saturating_duration_since(self.asked_from);
            out.push(Action::WaitRegistered {
                patience: REBOOT_PATIENCE.saturating_sub(waited),
            });
            self.phase = Phase::AwaitingRegistration;
            return;
        }
        self.ask_unless_standby(f, out);
    }

    fn ask_unless_standby(&mut self, f: &Facts, out: &mut Vec<Action>) {
        self.registered_before = self.kind == FiringKind::Reboot && f.registered;
        if f.standby {
            out.push(Action::Log(Note::Standby));
            return;
        }
        out.push(Action::Ask {
            kind: self.kind,
            attempt: self.attempt,
        });
        self.phase = Phase::Asking;
    }

    /// Step 2: what the answer means.
    fn answered(&mut self, answer: Answer, f: &Facts, now: Now, out: &mut Vec<Action>) {
        if f.standby {
            // Refused as a second instance while asking: the other process runs this firing.
            return;
        }
        let reboot_skipped_here =
            self.kind == FiringKind::Reboot && answer.is_local() && answer.verdict == Verdict::Skip;
        if self.registered_before && !answer.is_local() && !f.registered {
            // A reload landed while the question was in flight, so it was decided under the
            // job set the shim just left: ask again under the new one (RBT-07, RBT-21).
            out.push(Action::Log(Note::ReloadedWhileAsking));
            self.check(f, now, out);
            return;
        }
        if self.deferred_one_shot && reboot_skipped_here && !f.in_job_file {
            // A reload removed the job while the question was in flight: back to the pending
            // check, which waits for the name to return (RBT-07).
            self.check(f, now, out);
            return;
        }
        if reboot_skipped_here
            && now.mono.saturating_duration_since(self.asked_from) < REBOOT_PATIENCE
        {
            // An @reboot one-shot never fires again: give a coordinator that is still starting
            // a chance before the no-manager rule drops it.
            self.wait(REBOOT_RETRY, false, out);
            return;
        }
        match answer.verdict {
            Verdict::Skip => self.skipped(&answer, out),
            Verdict::Defer => self.deferred(&answer, now, out),
            Verdict::Run => {
                self.deferred_since = None;
                match (self.scheduled_at - now.wall).to_std() {
                    // Asked LEAD early: launch on the instant, not before it.
                    Ok(early) if !early.is_zero() => {
                        out.push(Action::Pause {
                            wait: early,
                            until_pushed: false,
                        });
                        self.phase = Phase::WaitingInstant(answer);
                    }
                    _ if f.stopping => self.not_launched(out),
                    _ => self.launch(answer, f, out),
                }
            }
        }
    }

    fn skipped(&mut self, answer: &Answer, out: &mut Vec<Action>) {
        let why = answer.why();
        out.push(Action::Log(Note::Skipped {
            attempt: self.attempt,
            reason: why,
            message: answer.message.clone(),
        }));
        if answer.is_local() {
            out.push(Action::ReportSkip {
                kind: self.kind,
                reason: why,
                message: answer.message.clone(),
            });
        }
        if matches!(self.kind, FiringKind::Retry { .. })
            && matches!(why, Reason::NotLeader | Reason::NotOwner)
        {
            out.push(Action::HandOff {
                attempt: self.attempt,
                max_attempts: self.max_attempts,
            });
        }
    }

    fn deferred(&mut self, answer: &Answer, now: Now, out: &mut Vec<Action>) {
        let why = answer.why();
        let since = *self.deferred_since.get_or_insert(now.mono);
        let bound = match self.kind {
            FiringKind::Retry { .. } => Some(MAX_RETRY_DEFERRAL),
            FiringKind::Scheduled | FiringKind::CatchUp => Some(MAX_SCHEDULED_DEFERRAL),
            FiringKind::Reboot | FiringKind::Manual => None,
        };
        if let Some(bound) = bound
            && now.mono.saturating_duration_since(since) > bound
        {
            let message = format!("gave up after deferring for {bound:?}: {}", answer.message);
            out.push(Action::Log(Note::GaveUp {
                attempt: self.attempt,
                message: message.clone(),
            }));
            out.push(Action::ReportSkip {
                kind: self.kind,
                reason: why,
                message,
            });
            return;
        }
        out.push(Action::Log(Note::Deferred { reason: why }));
        let pushed =
            self.deferred_one_shot && self.kind == FiringKind::Reboot && !answer.is_local();
        if pushed {
            self.wait(REBOOT_DEFER_FALLBACK.max(answer.retry_after), true, out);
        } else {
            self.wait(answer.retry_after, false, out);
        }
    }

    fn wait(&mut self, wait: Duration, until_pushed: bool, out: &mut Vec<Action>) {
        out.push(Action::Pause { wait, until_pushed });
        self.phase = Phase::Waiting;
    }

    /// Step 3, cut short: the shim is stopping with a RUN in hand that it will not launch. It
    /// says so, and the coordinator gives the firing's claim back, so the instant is not taken
    /// as run (a successor or catch-up may still run it).
    /// Only a firing's first question is claimed (a scheduled firing or a catch-up), so only
    /// that one is handed back.
    fn not_launched(&mut self, out: &mut Vec<Action>) {
        if !self.kind.is_claimed() {
            return;
        }
        out.push(Action::Log(Note::NotLaunched));
        out.push(Action::ReportSkip {
            kind: self.kind,
            reason: Reason::NotLaunched,
            message: NOT_LAUNCHED.to_owned(),
        });
    }

    /// Step 3: the instant has come.
    fn launch(&mut self, answer: Answer, f: &Facts, out: &mut Vec<Action>) {
        if self.job.concurrency_policy == ConcurrencyPolicy::Replace && f.running > 0 {
            out.push(Action::Log(Note::StoppingPrevious));
            out.push(Action::StopPrevious);
        }
        out.push(Action::Launch {
            answer,
            kind: self.kind,
            attempt: self.attempt,
        });
        self.phase = Phase::Running;
    }

    /// Step 4: after the run.
    fn ran(&mut self, ran: Option<bool>, out: &mut Vec<Action>) {
        let Some(succeeded) = ran else {
            return;
        };
        if succeeded || self.attempt >= self.max_attempts {
            return;
        }
        self.attempt += 1;
        self.kind = FiringKind::Retry {
            attempt: self.attempt,
        };
        let wait = self.job.retry.backoff_before(self.attempt);
        out.push(Action::Log(Note::WillRetry {
            attempt: self.attempt,
            wait,
        }));
        out.push(Action::Pause {
            wait,
            until_pushed: false,
        });
        self.phase = Phase::BackingOff;
    }
}

/// The answer the shim gives itself when the coordinator gave none: the decision table's
/// "no manager" row, or, for a coordinator that is away (not one that refused) and last said
/// election is off, that row (`remembered`: the election memory's gate now).
pub fn without_coordinator(
    job: &JobSpec,
    kind: FiringKind,
    error: &CallError,
    remembered: Gate,
    firing_id: String,
) -> Answer {
    // The memory speaks only for a coordinator that is away, not for one that answered with a
    // refusal.
    // A catch-up runs only on the coordinator's claimed RUN: whatever the memory says, without
    // an answer nothing can tell that nobody else ran the instant.
    let gate = if error.is_unreachable() && kind != FiringKind::CatchUp {
        remembered
    } else {
        Gate::NoManager
    };
    let local = decide(job.cluster_policy, kind, gate);
    Answer::decided_here(
        local.verdict,
        if local.verdict == Verdict::Run {
            local.reason
        } else {
            Reason::CoordinatorUnreachable
        },
        error.to_string(),
        firing_id,
        Duration::from_secs(1),
    )
}

#[cfg(test)]
mod tests;
