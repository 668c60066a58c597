//! The state every request handler shares: read handles on the cluster view and job set, the
//! ledger, and the Watch streams of connected executors.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cronstable_core::mode::{ElectionMode, ElectionStamp, Stamps};
use cronstable_core::{ClusterPolicy, Decision, Firing, FiringKind};
use tokio::sync::{mpsc, watch};

use crate::clock::Now;
use crate::cluster::{ClusterView, Election};
use crate::jobs::JobRegistry;
use crate::ledger::{Event, Ledger, Record};
use crate::observe::metrics::Metrics;
use crate::observe::notify::Notifier;
use crate::reboot::ran::RebootRan;

/// The election mode a view stands for, as executors are told it.
fn election_mode(election: &Election) -> ElectionMode {
    match election {
        Election::Off => ElectionMode::Off,
        _ => ElectionMode::On,
    }
}

/// An instruction for one executor, delivered over its Watch stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    /// Run a job now, ungated.
    ManualStart {
        /// The job's name.
        job: String,
        /// When the operator asked (Unix ms).
        requested_at_ms: i64,
        /// An id the operator can look for in the ledger and logs.
        request_id: String,
    },
    /// A deferred `@reboot` one-shot would no longer be deferred: ask ShouldRun again now.
    RunDeferred {
        /// The job's name.
        job: String,
        /// The one-shot's scheduled instant (Unix ms), as the executor asked it.
        scheduled_at_ms: i64,
    },
    /// Run a missed instant that nobody ran (catch-up): ask ShouldRun with the catch-up kind.
    CatchUp {
        /// The job's name.
        job: String,
        /// The missed instant (Unix ms).
        scheduled_at_ms: i64,
    },
    /// Continue a retry sequence another node handed off (RTY-04).
    ResumeRetry {
        /// The job's name.
        job: String,
        /// The firing the sequence belongs to (Unix ms).
        scheduled_at_ms: i64,
        /// The attempt number to run next.
        next_attempt: u32,
        /// Attempts left, `next_attempt` included.
        remaining_attempts: u32,
        /// Not before this instant (Unix ms).
        not_before_ms: i64,
    },
    /// The node's job-set ID changed.
    JobSetChanged {
        /// The new ID.
        job_set_id: String,
    },
    /// The coordinator is stopping: the election mode the executor may keep remembering
    /// while it is away (the last instruction of every stream).
    Goodbye {
        /// The farewell stamp.
        election: ElectionStamp,
    },
}

/// Why a manual start could not be delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManualStartError {
    /// No executor on this node registered the job.
    #[error("no job named {0:?} is registered on this node")]
    UnknownJob(String),
    /// The job's executor has no open Watch stream to receive it.
    #[error(
        "job {job:?} belongs to executor {executor:?}, which is not connected to receive instructions"
    )]
    ExecutorNotWatching {
        /// The job's name.
        job: String,
        /// Its executor.
        executor: String,
    },
}

pub use crate::gate::Answer;
use crate::gate::Effect;

/// The handles built from the parts of the config a reload can change: the webhook
/// (`notify:`) and the two store clients built from the cluster section. A reload replaces
/// them together, so a reader never sees the reboot store of one cluster section with the
/// handoff store of another.
#[derive(Debug, Clone, Default)]
pub struct LiveHandles {
    /// The `notify:` webhook, when configured: told about failed runs and role edges.
    pub notifier: Option<Notifier>,
    /// The shared store's handoff records, on a backend that has them (RTY-04).
    pub handoffs: Option<crate::handoff::Handoffs>,
    /// The shared records' own store client (etcd, filesystem): a Leader one-shot's "already
    /// ran" record (RBT-22) and a scheduled Leader firing's claim are written there before
    /// either is answered RUN.
    pub records_store: Option<Arc<crate::lease::records_store::RecordsStore>>,
    /// The `statsd:` sender, when configured: sent every per-job run, duration and skip.
    pub statsd: Option<crate::observe::statsd::Statsd>,
    /// The certificate files the cluster section names, whose expiry a scrape shows.
    pub certificates: Arc<Vec<crate::observe::certificates::CertificateFile>>,
}

/// A receiver whose value never changes: its sender is dropped at once, and a watch receiver
/// keeps the last value readable after that.
fn fixed(live: LiveHandles) -> watch::Receiver<Arc<LiveHandles>> {
    watch::channel(Arc::new(live)).1
}

/// Shared handles for the gRPC and HTTP handlers. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CoordinatorState {
    /// The latest cluster view (written only by the backend task).
    pub view: watch::Receiver<ClusterView>,
    /// The registered job set.
    pub registry: JobRegistry,
    /// Which live process instance holds each executor id (one per executor per node).
    pub executors: Arc<crate::executors::Executors>,
    /// The run ledger. Write through [`Self::record`], so the metrics see every record.
    pub ledger: Ledger,
    /// The Prometheus series.
    pub metrics: Metrics,
    /// Deferred `@reboot` one-shots this node's executors started, for the backend to share.
    pub reboot_ran: RebootRan,
    /// The latest firing instant each executor asked about, for [`crate::liveness`].
    pub pace: Arc<crate::liveness::Pace>,
    /// The earliest firing an executor here let pass unasked, as the pace monitor last found
    /// it; the lease driver gives its lease up while there is one.
    overdue: Arc<watch::Sender<Option<crate::liveness::Overdue>>>,
    /// Deferred `@reboot` one-shots executors wait on, for the `RunDeferred` push.
    pub deferred: crate::reboot::deferred::DeferredOneShots,
    /// Which deferral answers are repeats, so a waiting firing is recorded once.
    repeats: Arc<crate::observe::repeats::Repeats>,
    /// The handles a config reload replaces. Read-only here: the one writer is the reload
    /// task that [`Self::reloadable`] hands the sender to.
    live: watch::Receiver<Arc<LiveHandles>>,
    watchers: Arc<Mutex<HashMap<String, mpsc::Sender<Instruction>>>>,
    next_request: Arc<AtomicU64>,
    /// Serialises gossip's stand-in for a firing claim (a ledger check, then the record).
    gossip_answers: Arc<tokio::sync::Mutex<()>>,
    /// Claimed firings answered RUN whose launch was not reported yet, to give back a claim
    /// whose RUN was never launched ([`crate::lease::launches`]).
    pub launches: Arc<crate::lease::launches::Launches>,
    /// Held across a claim and its answer, and across giving a claim back: a re-ask answered
    /// RUN from a claim cannot slip in between the check that nothing ran and the removal.
    claiming: Arc<tokio::sync::Mutex<()>>,
    /// Set when a graceful stop begins: no firing is claimed (answered RUN) after it, so every
    /// RUN whose launch the stop waits for was answered before ([`Self::stop_claiming`]).
    claims_closed: Arc<std::sync::atomic::AtomicBool>,
    /// The election stamps this process hands its executors (cronstable_core::mode).
    stamps: Arc<Mutex<Stamps>>,
    /// When this coordinator started, its instance id and restart count.
    pub process: Arc<crate::observe::process::ProcessInfo>,
    /// What a lease backend's observability mesh last saw of its peers (display only:
    /// `/fleet`); `None` without one.
    pub fleet_mesh: Option<watch::Receiver<Arc<crate::gossip::observability::MeshView>>>,
    /// The expectation breaches this node found, for `GET /jobs`
    /// ([`crate::observe::expectations`]).
    pub expectations: crate::observe::breaches::Findings,
}

impl CoordinatorState {
    /// State over a cluster view receiver, with an empty job set and ledger.
    pub fn new(view: watch::Receiver<ClusterView>) -> Self {
        Self {
            view,
            registry: JobRegistry::new(),
            executors: Arc::default(),
            ledger: Ledger::new(),
            metrics: Metrics::new(),
            reboot_ran: RebootRan::new(),
            pace: Arc::default(),
            overdue: Arc::new(watch::channel(None).0),
            deferred: crate::reboot::deferred::DeferredOneShots::new(),
            repeats: Arc::default(),
            live: fixed(LiveHandles::default()),
            watchers: Arc::default(),
            next_request: Arc::new(AtomicU64::new(1)),
            gossip_answers: Arc::default(),
            launches: Arc::default(),
            claiming: Arc::default(),
            claims_closed: Arc::default(),
            stamps: Arc::new(Mutex::new(Stamps::new(
                ElectionMode::Unknown,
                crate::clock::now_ms(),
            ))),
            process: Arc::new(crate::observe::process::ProcessInfo::started(
                crate::clock::now_ms(),
            )),
            fleet_mesh: None,
            expectations: Default::default(),
        }
    }

    /// Shows what the observability mesh sees on `/fleet`.
    pub fn with_fleet_mesh(
        mut self,
        mesh: Option<watch::Receiver<Arc<crate::gossip::observability::MeshView>>>,
    ) -> Self {
        self.fleet_mesh = mesh;
        self
    }

    /// Says `process` about this coordinator (its start, instance id and restart count).
    pub fn with_process(mut self, process: crate::observe::process::ProcessInfo) -> Self {
        self.metrics.set_process(&process);
        self.process = Arc::new(process);
        self
    }

    /// Sends failed runs to `notifier`.
    pub fn with_notifier(self, notifier: Option<Notifier>) -> Self {
        self.with_live(|l| l.notifier = notifier)
    }

    /// Sends the per-job figures to the statsd server of `config` (starts its sender).
    pub fn with_statsd(self, config: Option<crate::config::StatsdConfig>) -> Self {
        let statsd = config.map(|c| crate::observe::statsd::Statsd::start(c, self.metrics.clone()));
        self.with_live(|l| l.statsd = statsd)
    }

    /// Hands retry sequences off through `handoffs` (a lease backend's shared store).
    pub fn with_handoffs(self, handoffs: Option<crate::handoff::Handoffs>) -> Self {
        self.with_live(|l| l.handoffs = handoffs)
    }

    /// Writes a Leader `@reboot` one-shot's "already ran" record (RBT-22) and a scheduled
    /// Leader firing's claim to `store` before answering either RUN.
    pub fn with_records_store(
        self,
        store: Option<Arc<crate::lease::records_store::RecordsStore>>,
    ) -> Self {
        self.with_live(|l| l.records_store = store)
    }

    /// Shows when the certificate files `cluster` names expire.
    pub fn with_certificates(
        self,
        cluster: Option<&crate::config::cluster::ClusterConfig>,
    ) -> Self {
        let files = Arc::new(crate::observe::certificates::configured(cluster));
        self.with_live(|l| l.certificates = files)
    }

    /// The certificate files the latest cluster section names.
    pub fn certificates(&self) -> Arc<Vec<crate::observe::certificates::CertificateFile>> {
        self.live.borrow().certificates.clone()
    }

    /// Builder step: a copy of the current handles, changed by `change`, fixed from now on.
    fn with_live(mut self, change: impl FnOnce(&mut LiveHandles)) -> Self {
        let mut live = LiveHandles::clone(&self.live.borrow());
        change(&mut live);
        self.live = fixed(live);
        self
    }

    /// Makes the handles set so far replaceable and returns their only writer (the reload
    /// task keeps it). Call it once, after the builder steps; clones made earlier keep the
    /// handles they had.
    pub fn reloadable(mut self) -> (Self, watch::Sender<Arc<LiveHandles>>) {
        let current = self.live.borrow().clone();
        let (tx, rx) = watch::channel(current);
        self.live = rx;
        (self, tx)
    }

    /// The `notify:` webhook, as the latest config has it.
    pub fn notifier(&self) -> Option<Notifier> {
        self.live.borrow().notifier.clone()
    }

    /// The shared store's handoff records, on a backend that has them (RTY-04).
    pub fn handoffs(&self) -> Option<crate::handoff::Handoffs> {
        self.live.borrow().handoffs.clone()
    }

    /// The shared records' own store client (@reboot records, firing claims), on a backend
    /// that has one.
    pub fn records_store(&self) -> Option<Arc<crate::lease::records_store::RecordsStore>> {
        self.live.borrow().records_store.clone()
    }

    /// The overdue executor as the pace monitor last found it (`None`: every one keeps up).
    pub fn overdue(&self) -> watch::Receiver<Option<crate::liveness::Overdue>> {
        self.overdue.subscribe()
    }

    /// What the pace monitor reads, and its end of [`Self::overdue`] (it is the only writer).
    pub(crate) fn pace_inputs(&self) -> crate::liveness::PaceInputs {
        crate::liveness::PaceInputs {
            registry: self.registry.clone(),
            pace: self.pace.clone(),
            executors: self.executors.clone(),
            metrics: self.metrics.clone(),
            overdue: self.overdue.clone(),
        }
    }

    /// Whether `executor_id` has an open Watch stream.
    pub fn is_watching(&self, executor_id: &str) -> bool {
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(executor_id)
            .is_some_and(|tx| !tx.is_closed())
    }

    /// Appends one record to the ledger, counts it in the metrics (and statsd), and reports a
    /// failed run to the webhook.
    pub fn record(&self, record: Record) {
        self.metrics.observe(&record);
        self.store_run(&record);
        if let Some(statsd) = &self.live.borrow().statsd {
            statsd.observe(&record);
        }
        if record.kind == FiringKind::Reboot && matches!(record.event, Event::Started { .. }) {
            let set = self.registry.current();
            // EveryNode boot work is per node; only the deferred kinds are run once (RBT-05).
            if set
                .get(&record.job)
                .is_some_and(|j| j.spec.cluster_policy != ClusterPolicy::EveryNode)
            {
                self.reboot_ran.mark(set.id.as_str(), &record.job);
            }
        }
        if let (Some(n), Some(payload)) = (self.notifier(), failure_payload(&record)) {
            n.send(crate::config::NotifyEvent::JobFailure, payload);
        }
        self.ledger.append(record);
    }

    /// Writes a run's start or end to the store's run records, for the judge of a job with
    /// `expect:` on whichever node owns it (not for an EveryNode job: each node judges its own).
    fn store_run(&self, record: &Record) {
        let Some(store) = self.records_store().filter(|s| s.keeps_runs()) else {
            return;
        };
        let set = self.registry.current();
        let Some(job) = set.get(&record.job) else {
            return;
        };
        if job.spec.expect.is_none() || job.spec.cluster_policy == ClusterPolicy::EveryNode {
            return;
        }
        let Some(run) = crate::lease::run_records::RunRecord::of(record) else {
            return;
        };
        // A start reported after its end (the shim reports starts off the launch path) must
        // not replace the end's record.
        let ended = run.ended_at_ms.is_none()
            && self.ledger.inspect(&record.job, |records| {
                records.iter().any(|r| {
                    r.scheduled_at_ms == record.scheduled_at_ms
                        && r.attempt == record.attempt
                        && matches!(r.event, Event::Finished(_))
                })
            });
        if !ended {
            // Kept for the longest span of any job, so no node prunes what another still judges.
            let keep = set
                .jobs
                .values()
                .filter(|j| j.spec.expect.is_some())
                .map(|j| j.spec.expectation_span())
                .max()
                .unwrap_or_default();
            store.record_run(run, keep);
        }
    }

    /// This node's name.
    pub fn node_name(&self) -> String {
        self.view.borrow().node_name.clone()
    }

    /// Decides one firing of a registered job and records the decision: [`crate::gate::gate`]
    /// answers from one borrow of the view on one reading of the clocks (`now`), and this
    /// performs the effects it lists, in order. `None` when the job is not registered.
    ///
    /// A Leader `@reboot` one-shot that the gate would run is first recorded as ran in the
    /// store, within the store's bound: a holder that dies right after its executor starts the
    /// one-shot must leave a record its successor's read-back finds, or the successor runs it
    /// again. If the record cannot be written the answer is DEFER (a convergence hold) with
    /// the store's error as the message, and the executor asks again. PreferLeader one-shots
    /// are not held up: they must run even while the store is unreachable (RBT-20), and their
    /// record follows on the driver's next round.
    pub async fn should_run(&self, firing: &Firing, now: Now) -> Option<Answer> {
        self.should_run_as(firing, now, "").await
    }

    /// [`Self::should_run`], asked by the executor `asker` (whose report of the launch may give
    /// the firing's claim back: [`crate::lease::launches`]).
    pub async fn should_run_as(&self, firing: &Firing, now: Now, asker: &str) -> Option<Answer> {
        let set = self.registry.current();
        let gated = crate::gate::gate(&self.view.borrow(), &set, firing, now)?;
        let mut answer = gated.answer;
        // On gossip the ledger stands in for a firing's claim: its check and the record of the
        // answer must not interleave with another question's, held until the record is made.
        let mut _answering = None;
        for effect in gated.effects {
            match effect {
                Effect::MarkPace { executor_id } => {
                    self.pace
                        .heard(&executor_id, firing.scheduled_at_ms, now.unix_ms);
                }
                Effect::RecordOneShotFirst => {
                    if let Some(store) = self.records_store() {
                        answer = self
                            .record_one_shot_first(&store, &set, firing, answer)
                            .await;
                    }
                }
                Effect::ClaimFirst => match self.records_store() {
                    Some(store) => {
                        let asked = (firing, asker);
                        answer = self.claim_first(&store, &set, asked, answer, now).await;
                    }
                    None if self.on_gossip() => {
                        _answering = Some(self.gossip_answers.lock().await);
                        answer = self.ran_here_first(firing, answer);
                    }
                    None if firing.kind == FiringKind::CatchUp => {
                        answer = Answer {
                            decision: Decision::skip(cronstable_core::Reason::NotCaughtUp),
                            message: "this backend keeps no firing claims, so nothing tells \
                                      that nobody ran this instant: it is not caught up"
                                .to_owned(),
                            fence: None,
                            ..answer
                        };
                    }
                    None => {}
                },
                Effect::TrackOneShot { executor_id } => self.deferred.answered(
                    &firing.job,
                    firing.scheduled_at_ms,
                    &executor_id,
                    answer.decision.verdict,
                ),
                Effect::RecordDecision => self.record_decision(firing, &answer, now),
            }
        }
        Some(answer)
    }

    /// Whether the backend is gossip (its view says so from its first round).
    pub(crate) fn on_gossip(&self) -> bool {
        matches!(
            self.view.borrow().status.as_ref(),
            crate::status::ClusterStatus::Gossip(_)
        )
    }

    /// Gossip's stand-in for a claim, on this node only: a RUN of a scheduled Leader firing is
    /// SKIP (`already_ran`) when this node already answered RUN for the same instant as the
    /// other kind (a catch-up after the ordinary question, or the ordinary question late after
    /// a catch-up). The same kind asked again is answered again: the executor's own retry of a
    /// question whose answer it never got.
    fn ran_here_first(&self, firing: &Firing, answer: Answer) -> Answer {
        if answer.decision.verdict != cronstable_core::Verdict::Run {
            return answer;
        }
        let before = self.ledger.ran_kind_at(&firing.job, firing.scheduled_at_ms);
        match before {
            Some(kind) if kind != firing.kind => Answer {
                decision: Decision::skip(cronstable_core::Reason::AlreadyRan),
                message: format!(
                    "this node already answered RUN for this instant (as {}), so it is not \
                     run again",
                    kind.code()
                ),
                fence: None,
                ..answer
            },
            _ => answer,
        }
    }

    /// Claims a scheduled Leader firing in the store ([`crate::lease::claims`]), then answers
    /// from the view as it is after the write (the write took time; a leadership lost
    /// meanwhile must not be answered RUN, and the claim then stands: the firing runs nowhere,
    /// which is said loudly). SKIP (`already_ran`) when another claim holds the firing, DEFER
    /// when the claim cannot be written.
    async fn claim_first(
        &self,
        store: &Arc<crate::lease::records_store::RecordsStore>,
        set: &crate::jobs::JobSet,
        (firing, asker): (&Firing, &str),
        answer: Answer,
        now: Now,
    ) -> Answer {
        use crate::lease::claims::{ClaimWrite, Claimed, FiringClaim, judge, retention};
        let _claiming = self.claiming.lock().await;
        let job = firing.job.as_str();
        if self
            .claims_closed
            .load(std::sync::atomic::Ordering::Acquire)
        {
            // A RUN answered now could not be handed back: the stop is about to end the API.
            return Answer {
                decision: Decision::defer(cronstable_core::Reason::ConvergenceHold),
                message: "this coordinator is stopping and claims no more firings; asked \
                          again, the next lease holder answers"
                    .to_owned(),
                fence: None,
                ..answer
            };
        }
        let mine = FiringClaim {
            job: job.to_owned(),
            scheduled_at_ms: firing.scheduled_at_ms,
            node: answer.node.clone(),
            fence: answer.fence.clone().unwrap_or_default(),
            claimed_at_ms: now.unix_ms,
            catch_up: firing.kind == FiringKind::CatchUp,
        };
        let longest_deadline = || retention(set.jobs.values().map(|j| &j.spec));
        let write = store.claim(&mine, longest_deadline).await;
        // Created now: no answer of this node can rest on it yet, so it may be given back.
        let created = matches!(write, Ok(ClaimWrite::Created));
        let claimed = write.map(|w| judge(&mine, w));
        self.metrics.firing_claim(match &claimed {
            Ok(Claimed::Won) => "won",
            Ok(Claimed::Taken(_)) => "taken",
            Err(_) => "failed",
        });
        match claimed {
            Ok(Claimed::Won) => {
                let again = now.again();
                let after = crate::gate::gate(&self.view.borrow(), set, firing, again)
                    .map_or(answer, |g| g.answer);
                if after.decision.verdict == cronstable_core::Verdict::Run {
                    self.launches.answered(mine, asker, again.unix_ms);
                } else if created {
                    tracing::warn!(
                        job,
                        scheduled_at_ms = firing.scheduled_at_ms,
                        "this node stopped leading while it claimed the firing ({}); giving the \
                         claim back",
                        after.message
                    );
                    self.give_back(store, &mine).await;
                }
                after
            }
            Ok(Claimed::Taken(whose)) => Answer {
                decision: Decision::skip(cronstable_core::Reason::AlreadyRan),
                message: format!("this firing already ran: it was {whose}, and a firing runs once"),
                ..answer
            },
            Err(e) => {
                let message = format!(
                    "the firing's claim could not be written to the store before running it \
                     ({e}); it waits and is asked again"
                );
                tracing::warn!(job, scheduled_at_ms = firing.scheduled_at_ms, "{message}");
                Answer {
                    decision: Decision::defer(cronstable_core::Reason::ConvergenceHold),
                    message,
                    ..answer
                }
            }
        }
    }

    /// A graceful stop begins: claim no more firings (a claimed firing is answered DEFER from
    /// now on), once any claim in progress is done.
    pub async fn stop_claiming(&self) {
        let _claiming = self.claiming.lock().await;
        self.claims_closed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Gives back `claim`, which this node made and whose RUN was never launched (see
    /// [`crate::lease::launches`]); one log line either way.
    async fn give_back(
        &self,
        store: &crate::lease::records_store::RecordsStore,
        claim: &crate::lease::claims::FiringClaim,
    ) {
        let (job, scheduled_at_ms) = (claim.job.as_str(), claim.scheduled_at_ms);
        match store.release_claim(claim).await {
            Ok(true) => {
                self.metrics.firing_claim("given_back");
                tracing::info!(
                    job,
                    scheduled_at_ms,
                    "gave the firing's claim back: its RUN was never launched, so the instant \
                     is not taken as run"
                );
            }
            Ok(false) => tracing::info!(
                job,
                scheduled_at_ms,
                "the firing's claim was not given back: the store no longer holds it as this \
                 node's under its fence"
            ),
            Err(e) => tracing::warn!(
                job,
                scheduled_at_ms,
                "could not give the firing's claim back ({e}): the instant stays taken as run"
            ),
        }
    }

    /// The executor `reporter` reported `event` of the firing of `job` at `at_ms` (of `kind`):
    /// its launch no longer waits, and a `not_launched` skip from every executor answered RUN
    /// from the claim, with no run started, gives the claim back ([`crate::lease::launches`]).
    /// Only a firing's first attempt is claimed, so only its reports count.
    pub async fn launch_reported(
        &self,
        (job, at_ms, kind): (&str, i64, FiringKind),
        reporter: &str,
        event: &crate::ledger::Event,
    ) {
        use crate::lease::launches::Report;
        use crate::ledger::Event;
        if !kind.is_claimed() {
            return;
        }
        let report = match event {
            Event::Started { .. } | Event::Finished(_) => Report::Started,
            Event::Skipped {
                reason: Some(cronstable_core::Reason::NotLaunched),
                ..
            } => Report::NotLaunched,
            Event::Skipped { .. } => Report::Skipped,
            Event::Decided { .. } | Event::HandedOff { .. } => return,
        };
        // Only a hand-back removes a claim, so only it waits for a claim in progress; a start
        // or a skip settles the table entry on its own.
        let _claiming = match report {
            Report::NotLaunched => Some(self.claiming.lock().await),
            Report::Started | Report::Skipped => None,
        };
        let Some(claim) = self.launches.reported(job, at_ms, reporter, report) else {
            return;
        };
        if let Some(store) = self.records_store() {
            self.give_back(&store, &claim).await;
        }
    }

    /// Writes a Leader one-shot's "already ran" record, then answers from the view as it is
    /// after the write (a second, deliberate clock reading: the write took time, and a
    /// leadership lost meanwhile must not be answered RUN). DEFER when the write fails.
    async fn record_one_shot_first(
        &self,
        store: &crate::lease::records_store::RecordsStore,
        set: &crate::jobs::JobSet,
        firing: &Firing,
        answer: Answer,
    ) -> Answer {
        let job = firing.job.as_str();
        let jobs = std::collections::BTreeSet::from([job.to_owned()]);
        match store.record(set.id.as_str(), &jobs).await {
            Ok(()) => {
                self.reboot_ran.mark(set.id.as_str(), job);
                let now = Now::read();
                let after = crate::gate::gate(&self.view.borrow(), set, firing, now)
                    .map_or(answer, |g| g.answer);
                if after.decision.verdict == cronstable_core::Verdict::Run {
                    return after;
                }
                // The record already says "ran", so no later leader runs it: a Leader @reboot
                // is at most once, and this is the one case where that means never. Say so
                // loudly rather than skip it quietly.
                let message = format!(
                    "this node stopped being the owner while the @reboot one-shot's \
                     \"already ran\" record was being written ({}); the record stands, so the \
                     one-shot does not run on any node this boot",
                    after.message
                );
                tracing::warn!(job, "{message}");
                Answer { message, ..after }
            }
            Err(e) => {
                let message = format!(
                    "the @reboot one-shot's \"already ran\" record could not be written to the \
                     store before running it ({e}); it waits and is asked again"
                );
                tracing::warn!(job, "{message}");
                Answer {
                    decision: Decision::defer(cronstable_core::Reason::ConvergenceHold),
                    message,
                    ..answer
                }
            }
        }
    }

    /// The decision's ledger record and log line; a waiting firing is asked again about once
    /// a second, so a repeated DEFER is recorded once (and logged at debug).
    fn record_decision(&self, firing: &Firing, answer: &Answer, now: Now) {
        let decision = answer.decision;
        let (job, at_ms, kind) = (firing.job.as_str(), firing.scheduled_at_ms, firing.kind);
        if !self.repeats.is_news(job, at_ms, kind, decision) {
            tracing::debug!(
                job,
                scheduled_at_ms = at_ms,
                ?kind,
                reason = decision.reason.code(),
                "firing still deferred"
            );
            return;
        }
        self.record(Record::decided(firing, decision, &answer.node, now.unix_ms));
        tracing::info!(
            job,
            scheduled_at_ms = at_ms,
            ?kind,
            attempt = kind.attempt(),
            verdict = decision.verdict.as_str(),
            reason = decision.reason.code(),
            "firing decided"
        );
    }

    /// What the gate would answer a firing of `job` of `kind` due at `at_ms`, now, without
    /// recording it (for the `RunDeferred` push); `None` when the job is not registered.
    pub fn peek_verdict(
        &self,
        job: &str,
        kind: FiringKind,
        at_ms: i64,
    ) -> Option<cronstable_core::Verdict> {
        let set = self.registry.current();
        let registered = set.get(job)?;
        let answer = crate::gate::decide_at(
            &self.view.borrow(),
            &set,
            job,
            registered.spec.cluster_policy,
            kind,
            at_ms,
            tokio::time::Instant::now(),
        );
        Some(answer.decision.verdict)
    }

    /// Opens the instruction channel of an executor, replacing any previous one (a reconnect).
    pub fn open_watch(&self, executor_id: &str) -> mpsc::Receiver<Instruction> {
        let (tx, rx) = mpsc::channel(64);
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(executor_id.to_owned(), tx);
        rx
    }

    /// The election mode as executors should remember it, stamped: off when the view has
    /// election off, on otherwise (a node that is starting or has lost its manager still
    /// belongs to a cluster). After [`Self::say_goodbye`], the farewell stamp.
    pub fn election_stamp(&self) -> ElectionStamp {
        let mode = election_mode(&self.view.borrow().election);
        self.stamps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stamp(mode)
    }

    /// Tells every executor with an open Watch stream that this coordinator is stopping, and
    /// which election mode it may keep remembering: the running one when `next` (the mode of
    /// the config the process will start with again, `None` when unknown) keeps it, unknown
    /// otherwise. Every later answer carries the same farewell stamp.
    pub fn say_goodbye(&self, next: Option<ElectionMode>) -> ElectionStamp {
        let running = election_mode(&self.view.borrow().election);
        let election = self
            .stamps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .farewell(running, next);
        let senders: Vec<_> = self
            .watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for tx in senders {
            // A stream too far behind to take one more message is one the executor is not
            // reading; it is closed right after this in any case.
            let _ = tx.try_send(Instruction::Goodbye { election });
        }
        election
    }

    /// Ends every open Watch stream (at shutdown, so graceful shutdown is not held up by them).
    pub fn close_watches(&self) {
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Sends an instruction to one executor. Returns false when it is not watching (or its
    /// stream is gone or too far behind, in which case it is dropped from the table).
    pub fn send_to(&self, executor_id: &str, instruction: Instruction) -> bool {
        let mut watchers = self.watchers.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(tx) = watchers.get(executor_id) else {
            return false;
        };
        if tx.try_send(instruction).is_ok() {
            true
        } else {
            watchers.remove(executor_id);
            false
        }
    }

    /// Routes a manual start of `job` to the executor that registered it. Never gated.
    pub fn start_manually(&self, job: &str, now_ms: i64) -> Result<String, ManualStartError> {
        let set = self.registry.current();
        let registered = set
            .get(job)
            .ok_or_else(|| ManualStartError::UnknownJob(job.to_owned()))?;
        let n = self.next_request.fetch_add(1, Ordering::Relaxed);
        let request_id = format!("manual-{now_ms}-{n}");
        let instruction = Instruction::ManualStart {
            job: job.to_owned(),
            requested_at_ms: now_ms,
            request_id: request_id.clone(),
        };
        if self.send_to(&registered.executor_id, instruction) {
            tracing::info!(job, request_id, "manual start sent to executor");
            Ok(request_id)
        } else {
            Err(ManualStartError::ExecutorNotWatching {
                job: job.to_owned(),
                executor: registered.executor_id.clone(),
            })
        }
    }
}

/// The `job_failure` event for a finished run that did not succeed.
fn failure_payload(record: &Record) -> Option<serde_json::Value> {
    let Event::Finished(end) = &record.event else {
        return None;
    };
    if end.succeeded() {
        return None;
    }
    let iso = |ms: i64| {
        chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    };
    let how = if end.timed_out {
        "timed out".to_owned()
    } else if let Some(sig) = end.signal {
        format!("was killed by signal {sig}")
    } else {
        format!("exited {}", end.exit_code.unwrap_or(-1))
    };
    Some(serde_json::json!({
        "event": "job_failure",
        "node": record.node,
        "job": record.job,
        "scheduled_at": iso(record.scheduled_at_ms),
        "attempt": record.attempt,
        "started_at": iso(end.started_at_ms),
        "finished_at": iso(end.finished_at_ms),
        "duration_ms": end.duration_ms,
        "exit_code": end.exit_code,
        "signal": end.signal,
        "timed_out": end.timed_out,
        "output_tail": end.output_tail,
        "message": format!("job {} on {} {how}", record.job, record.node),
    }))
}

/// What a background pass wakes on: a new cluster view, a new job set, or its period.
pub struct Changes {
    view: watch::Receiver<ClusterView>,
    job_sets: watch::Receiver<Arc<crate::jobs::JobSet>>,
}

impl Changes {
    /// Waits for the next change or `every`, whichever comes first; false once either channel
    /// is closed (the coordinator is going away).
    pub async fn next(&mut self, every: std::time::Duration) -> bool {
        tokio::select! {
            biased;
            changed = self.view.changed() => changed.is_ok(),
            changed = self.job_sets.changed() => changed.is_ok(),
            () = tokio::time::sleep(every) => true,
        }
    }
}

impl CoordinatorState {
    /// A waker for a background pass over this state (see [`Changes`]).
    pub fn changes(&self) -> Changes {
        Changes {
            view: self.view.clone(),
            job_sets: self.registry.subscribe(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronstable_core::{Firing, JobSpec};

    /// A firing asked again while it waits is one event: the first DEFER is recorded (ledger,
    /// INFO line, metrics), its identical repeats are not, and the answer that settles it is.
    #[tokio::test]
    async fn repeated_identical_deferrals_of_one_firing_are_recorded_once() {
        let (tx, rx) = watch::channel(ClusterView::starting(
            "a",
            crate::status::ClusterStatus::Disabled,
        ));
        let state = CoordinatorState::new(rx);
        let mut spec = JobSpec::new("boot", "@reboot", "./boot");
        spec.cluster_policy = ClusterPolicy::Leader;
        state.registry.register("shim-1", vec![spec]).unwrap();
        let firing = Firing {
            job: "boot".into(),
            scheduled_at_ms: 1,
            kind: FiringKind::Reboot,
        };
        for at in 1..=3 {
            let a = state
                .should_run(&firing, Now::with_unix_ms(at))
                .await
                .unwrap();
            assert_eq!(a.decision.verdict, cronstable_core::Verdict::Defer);
        }
        assert_eq!(
            state.ledger.records("boot").len(),
            1,
            "one wait, one record"
        );
        tx.send_replace(ClusterView::election_off("a"));
        let a = state
            .should_run(&firing, Now::with_unix_ms(4))
            .await
            .unwrap();
        assert_eq!(a.decision.verdict, cronstable_core::Verdict::Run);
        assert_eq!(
            state.ledger.records("boot").len(),
            2,
            "the settling answer is recorded"
        );
    }

    /// Row −1 in the coordinator: a scheduled firing asked after its job's start deadline is
    /// SKIP (`starting_deadline`) even where the table says RUN (election off here), recorded
    /// and counted per job; inside the deadline, and for a retry, the table answers.
    #[tokio::test]
    async fn a_question_after_the_start_deadline_is_skipped_and_counted() {
        let (_tx, rx) = watch::channel(ClusterView::election_off("a"));
        let state = CoordinatorState::new(rx);
        let mut spec = JobSpec::new("report", "* * * * *", "./report");
        spec.starting_deadline = Some(std::time::Duration::from_secs(10));
        state.registry.register("shim-1", vec![spec]).unwrap();
        let at = 1_800_000_000_000;
        let ask = |kind, late_ms| {
            let state = state.clone();
            async move {
                let firing = Firing {
                    job: "report".into(),
                    scheduled_at_ms: at,
                    kind,
                };
                state
                    .should_run(&firing, Now::with_unix_ms(at + late_ms))
                    .await
                    .unwrap()
                    .decision
            }
        };
        let run = Decision::run(cronstable_core::Reason::ElectionOff);
        let late = Decision::skip(cronstable_core::Reason::StartingDeadline);
        assert_eq!(ask(FiringKind::Scheduled, 10_000).await, run);
        assert_eq!(ask(FiringKind::Scheduled, 10_001).await, late);
        assert_eq!(ask(FiringKind::Retry { attempt: 2 }, 600_000).await, run);
        let recorded = state.ledger.records("report");
        assert!(
            recorded
                .iter()
                .any(|r| format!("{r:?}").contains("StartingDeadline")),
            "{recorded:?}"
        );
        let metrics = state.metrics.render(&serde_json::json!({}));
        assert!(
            metrics.contains(
                "cronstable_job_skips_total{job=\"report\",reason=\"starting_deadline\"} 1"
            ),
            "{metrics}"
        );
    }
}
