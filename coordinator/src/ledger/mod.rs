//! The run ledger: per-job records of every firing decision and every run on this node.
//!
//! Bounded in memory (the newest [`Ledger::PER_JOB`] records per job), so a chatty per-second
//! job cannot grow the coordinator without limit. It answers "what happened to this firing?":
//! which decision the gate made and why, and how the run went. Durable persistence and the
//! `/jobs/{name}/firings` view build on this type.

pub mod codec;
#[cfg(any(test, feature = "testkit"))]
pub mod conformance;
pub mod file;
pub mod ran;
pub mod runs;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use cronstable_core::{FiringKind, Reason, Verdict};

/// Where a node's ledger outlives the process: the `state.path` file ([`file::FileLedger`]) or
/// etcd (`state.store: etcd`, [`crate::store::etcd::ledger::EtcdLedger`]). Both keep records in
/// the one format of [`codec`] and pass the one suite in `ledger::conformance` (tests);
/// [`crate::store::ledger_for`] picks the store from the config.
#[tonic::async_trait]
pub trait LedgerStore: Send + Sync {
    /// The store's name for messages (`file`, `etcd`).
    fn store_name(&self) -> &'static str;

    /// Loads the history kept for `node` into `ledger` and starts the writer that keeps every
    /// record appended from now on. Call before anything records. Only unusable settings are
    /// an error: a store that cannot be read costs the history (a WARNING), never the start.
    async fn open(&self, node: &str, ledger: &Ledger) -> Result<(), LedgerStoreError>;
}

/// Why a ledger store cannot be used; its message names the setting.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct LedgerStoreError(#[from] Box<dyn std::error::Error + Send + Sync + 'static>);

/// How a run ended, as its executor reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnd {
    /// When it started (Unix ms).
    pub started_at_ms: i64,
    /// When it ended (Unix ms).
    pub finished_at_ms: i64,
    /// How long it ran, as the executor measured it.
    pub duration_ms: u64,
    /// The exit code, when the process exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// The executor killed it at the job's timeout.
    pub timed_out: bool,
    /// The last few KiB of its output.
    pub output_tail: String,
}

impl RunEnd {
    /// Exited with code 0 and was not killed at its timeout.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// The result label of `cronstable_job_runs_total` and statsd: `timeout`, `signal`,
    /// `success` or `failure`.
    pub fn result(&self) -> &'static str {
        if self.timed_out {
            "timeout"
        } else if self.signal.is_some() {
            "signal"
        } else if self.exit_code == Some(0) {
            "success"
        } else {
            "failure"
        }
    }
}

/// What one record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The gate answered a ShouldRun.
    Decided {
        /// Run, skip or defer.
        verdict: Verdict,
        /// Why.
        reason: Reason,
    },
    /// The executor started the command.
    Started {
        /// When it started (Unix ms).
        at_ms: i64,
        /// The process id.
        pid: u32,
    },
    /// The command ended.
    Finished(RunEnd),
    /// The executor skipped the firing itself (concurrency policy, no coordinator, too late).
    Skipped {
        /// Why; `None` for a reason newer than this coordinator.
        reason: Option<Reason>,
        /// A readable sentence.
        message: String,
    },
    /// A retry sequence was handed to the cluster.
    HandedOff {
        /// Attempts left in the sequence.
        remaining_attempts: u32,
        /// Whether another node will resume it.
        transferred: bool,
    },
}

/// One ledger record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The job's name.
    pub job: String,
    /// The nominal instant of the firing (Unix ms).
    pub scheduled_at_ms: i64,
    /// The kind of firing.
    pub kind: FiringKind,
    /// The attempt number (1 for the first).
    pub attempt: u32,
    /// The node that wrote it.
    pub node: String,
    /// When the coordinator recorded it (Unix ms).
    pub recorded_at_ms: i64,
    /// What happened.
    pub event: Event,
}

impl Record {
    /// The gate's `decision` about `firing`, as `node` answered it at `recorded_at_ms`.
    pub fn decided(
        firing: &cronstable_core::Firing,
        decision: cronstable_core::Decision,
        node: &str,
        recorded_at_ms: i64,
    ) -> Self {
        Self {
            job: firing.job.clone(),
            scheduled_at_ms: firing.scheduled_at_ms,
            kind: firing.kind,
            attempt: firing.kind.attempt(),
            node: node.to_owned(),
            recorded_at_ms,
            event: Event::Decided {
                verdict: decision.verdict,
                reason: decision.reason,
            },
        }
    }
}

/// What a job's records say about its runs right now: the one scan every display shares
/// (`GET /jobs`, the gossip run summaries, `GET /fleet`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunStatus<'a> {
    /// A run started and has not finished.
    pub running: bool,
    /// The newest `Finished` record.
    pub last_finished: Option<&'a Record>,
    /// The newest `Decided` record.
    pub last_decision: Option<&'a Record>,
}

impl<'a> RunStatus<'a> {
    /// Scans a job's records, oldest first, from the newest end. A run is going when a
    /// `Started` record has no `Finished` for the same firing and attempt after it.
    pub fn of(records: &'a VecDeque<Record>) -> Self {
        let mut status = RunStatus::default();
        let mut finished: Vec<(i64, u32)> = Vec::new();
        for r in records.iter().rev() {
            match &r.event {
                Event::Finished(RunEnd { .. }) => {
                    status.last_finished.get_or_insert(r);
                    finished.push((r.scheduled_at_ms, r.attempt));
                }
                Event::Started { .. } if !finished.contains(&(r.scheduled_at_ms, r.attempt)) => {
                    status.running = true;
                }
                Event::Decided { .. } => {
                    status.last_decision.get_or_insert(r);
                }
                _ => {}
            }
        }
        status
    }
}

/// The bounded in-memory ledger. Cheap to clone; clones share the records.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    jobs: Arc<Mutex<BTreeMap<String, VecDeque<Record>>>>,
    /// Bumped by every record that answers RUN, starts or ends a run, so a reader of run
    /// summaries (the gossip `/peer` body) can tell cheaply whether anything changed.
    runs_generation: Arc<AtomicU64>,
    /// Bumped by every record, so a cached rendering of the ledger (`GET /jobs`) knows when it
    /// is stale.
    generation: Arc<AtomicU64>,
    /// Where every appended record is also sent: the `state.path` file writer, when set.
    sink: Arc<OnceLock<tokio::sync::mpsc::Sender<Record>>>,
    /// Per job, through which instant it is settled on other nodes ([`ran`]).
    settled: Arc<Mutex<BTreeMap<String, i64>>>,
}

/// A handle on a ledger's records that does not keep the ledger alive (for its file writer).
#[derive(Debug, Clone)]
pub struct WeakLedger(Weak<Mutex<BTreeMap<String, VecDeque<Record>>>>);

impl WeakLedger {
    /// Every record, job by job, oldest first; empty once the ledger is gone.
    pub fn all_records(&self) -> Vec<Record> {
        self.0.upgrade().map_or_else(Vec::new, |jobs| {
            let jobs = jobs.lock().unwrap_or_else(PoisonError::into_inner);
            jobs.values().flatten().cloned().collect()
        })
    }
}

impl Ledger {
    /// Records kept per job; older ones are dropped first.
    pub const PER_JOB: usize = 200;

    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sends every record appended from now on to `sink` as well (once; later calls are
    /// ignored).
    pub fn set_sink(&self, sink: tokio::sync::mpsc::Sender<Record>) {
        let _ = self.sink.set(sink);
    }

    /// A handle on the records that does not keep the ledger alive.
    pub fn downgrade(&self) -> WeakLedger {
        WeakLedger(Arc::downgrade(&self.jobs))
    }

    /// Appends a record read back from the ledger file: like [`Self::append`], without
    /// sending it to the file again.
    pub fn restore(&self, record: Record) {
        self.keep(record);
    }

    /// Appends a record, dropping the job's oldest one past [`Self::PER_JOB`].
    pub fn append(&self, record: Record) {
        if let Some(sink) = self.sink.get()
            && sink.try_send(record.clone()).is_err()
        {
            tracing::warn!(
                job = record.job,
                "ledger: the history file writer is behind; this record is kept in memory only"
            );
        }
        self.keep(record);
    }

    fn keep(&self, record: Record) {
        // A panic elsewhere while holding the lock leaves the records intact, so keep using them.
        // A RUN answer too: the gossip summary names the newest instant answered RUN, and a
        // peer's catch-up must see it before the run's start is reported.
        if matches!(
            record.event,
            Event::Started { .. }
                | Event::Finished(RunEnd { .. })
                | Event::Decided {
                    verdict: Verdict::Run,
                    ..
                }
        ) {
            self.runs_generation.fetch_add(1, Ordering::Relaxed);
        }
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        let ring = jobs.entry(record.job.clone()).or_default();
        if ring.len() == Self::PER_JOB {
            ring.pop_front();
        }
        ring.push_back(record);
        // Bumped after the record is in place (under the lock), so a reader that saw the new
        // value also sees the record.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// A counter that changes whenever a run starts or finishes.
    pub fn runs_generation(&self) -> u64 {
        self.runs_generation.load(Ordering::Relaxed)
    }

    /// A counter that changes whenever any record is appended.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Runs `f` over a job's records (oldest first) under the lock, without copying them: for
    /// summaries over many jobs. Keep `f` short; appends wait for it.
    pub fn inspect<R>(&self, job: &str, f: impl FnOnce(&VecDeque<Record>) -> R) -> R {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        match jobs.get(job) {
            Some(ring) => f(ring),
            None => f(&VecDeque::new()),
        }
    }

    /// A job's records, oldest first.
    pub fn records(&self, job: &str) -> Vec<Record> {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.get(job)
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// What became of one nominal firing on this node, judged from its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A run finished (whatever its exit status).
    Ran,
    /// The gate said run, or a run started, and it has not finished yet.
    Running,
    /// Another node owns the firing: this node's gate skipped it as not leader or not owner.
    Elsewhere,
    /// The gate skipped it for a reason that is not "another node runs it" (no quorum, a
    /// conflict, the convergence hold, no manager).
    Skipped,
    /// The gate deferred it and nothing followed yet.
    Deferred,
    /// The executor did not run it (too late, coordinator unreachable, concurrency policy).
    Missed,
    /// No record: the executor never asked (it was down, or the coordinator was).
    NoRecord,
}

impl Outcome {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ran => "ran",
            Self::Running => "running",
            Self::Elsewhere => "elsewhere",
            Self::Skipped => "skipped",
            Self::Deferred => "deferred",
            Self::Missed => "missed",
            Self::NoRecord => "no_record",
        }
    }
}

/// Judges one firing from its records (all with the same scheduled instant), returning the
/// outcome and the reason code behind it, when there is one. A finished run outranks
/// everything else: a retry that succeeded after a skip still ran.
pub fn explain(records: &[&Record]) -> (Outcome, Option<&'static str>) {
    let has = |f: &dyn Fn(&Event) -> bool| records.iter().any(|r| f(&r.event));
    if has(&|e| matches!(e, Event::Finished(RunEnd { .. }))) {
        return (Outcome::Ran, None);
    }
    if has(&|e| matches!(e, Event::Started { .. }))
        || has(&|e| {
            matches!(
                e,
                Event::Decided {
                    verdict: Verdict::Run,
                    ..
                }
            )
        })
    {
        return (Outcome::Running, None);
    }
    // The newest record says what happened last.
    for record in records.iter().rev() {
        match &record.event {
            Event::Skipped { reason, .. } => {
                return (
                    Outcome::Missed,
                    Some(reason.map_or("unknown", |r| r.code())),
                );
            }
            Event::Decided {
                verdict: Verdict::Skip,
                reason,
            } => {
                let outcome = if matches!(reason, Reason::NotLeader | Reason::NotOwner) {
                    Outcome::Elsewhere
                } else {
                    Outcome::Skipped
                };
                return (outcome, Some(reason.code()));
            }
            Event::Decided {
                verdict: Verdict::Defer,
                reason,
            } => return (Outcome::Deferred, Some(reason.code())),
            Event::HandedOff { transferred, .. } => {
                let why = if *transferred {
                    "handed_off"
                } else {
                    "handoff_abandoned"
                };
                return (Outcome::Elsewhere, Some(why));
            }
            _ => {}
        }
    }
    (Outcome::NoRecord, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(job: &str, n: i64) -> Record {
        Record {
            job: job.into(),
            scheduled_at_ms: n,
            kind: FiringKind::Scheduled,
            attempt: 1,
            node: "a".into(),
            recorded_at_ms: n,
            event: Event::Decided {
                verdict: Verdict::Run,
                reason: Reason::ElectionOff,
            },
        }
    }

    #[test]
    fn keeps_the_newest_records_per_job() {
        let l = Ledger::new();
        for n in 0..(Ledger::PER_JOB as i64 + 5) {
            l.append(record("a", n));
        }
        l.append(record("b", 1));
        let a = l.records("a");
        assert_eq!(a.len(), Ledger::PER_JOB);
        assert_eq!(a[0].scheduled_at_ms, 5);
        assert_eq!(l.records("b").len(), 1);
        assert!(l.records("c").is_empty());
    }

    fn with(event: Event) -> Record {
        Record {
            event,
            ..record("a", 1)
        }
    }

    #[test]
    fn explains_a_firing_from_its_records() {
        let decided = |verdict, reason| with(Event::Decided { verdict, reason });
        let finished = with(Event::Finished(RunEnd {
            started_at_ms: 1,
            finished_at_ms: 2,
            duration_ms: 1,
            exit_code: Some(1),
            signal: None,
            timed_out: false,
            output_tail: String::new(),
        }));
        let cases: Vec<(Vec<Record>, Outcome, Option<&str>)> = vec![
            (vec![], Outcome::NoRecord, None),
            (
                vec![decided(Verdict::Skip, Reason::NotLeader)],
                Outcome::Elsewhere,
                Some("not_leader"),
            ),
            (
                vec![decided(Verdict::Skip, Reason::NoQuorum)],
                Outcome::Skipped,
                Some("no_quorum"),
            ),
            (
                vec![decided(Verdict::Defer, Reason::ConvergenceHold)],
                Outcome::Deferred,
                Some("convergence_hold"),
            ),
            (
                vec![decided(Verdict::Run, Reason::Leader)],
                Outcome::Running,
                None,
            ),
            (
                vec![decided(Verdict::Run, Reason::Leader), finished.clone()],
                Outcome::Ran,
                None,
            ),
            (
                vec![
                    decided(Verdict::Defer, Reason::NoQuorum),
                    decided(Verdict::Run, Reason::Leader),
                    finished,
                ],
                Outcome::Ran,
                None,
            ),
            (
                vec![with(Event::Skipped {
                    reason: Some(Reason::TooLate),
                    message: String::new(),
                })],
                Outcome::Missed,
                Some("too_late"),
            ),
        ];
        for (records, outcome, reason) in cases {
            let refs: Vec<&Record> = records.iter().collect();
            assert_eq!(explain(&refs), (outcome, reason), "{records:?}");
        }
    }
}
