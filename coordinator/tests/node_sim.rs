//! One node, simulated whole: the shim's scheduler and firing state machine in front of the
//! coordinator's real gate, on a virtual clock, with no sockets and no sleeps.
//!
//! The pieces are the production ones: the shim's [`plan`] decides which due instants to
//! launch and which were missed, its [`Sequence::step`] drives every firing, the coordinator's
//! [`CoordinatorState::should_run`] answers each question from a scripted [`ClusterView`], and
//! the answer crosses the same wire translation both ways ([`answer_to_wire`],
//! [`Answer::from_wire`]). What is simulated is only what lies between them: time (an event
//! queue), the round trip (a few milliseconds, longer when the coordinator does not answer),
//! the commands (they run for a while and succeed or fail), and the cluster, as a script of
//! segments: this node leads, follows, lost its quorum, converges, holds a lease that lapses,
//! has no manager, has election off, or its coordinator does not answer at all.
//!
//! Every seed checks, for every job:
//!
//! 1. every due instant up to the scheduler's last horizon is taken up exactly once, or reported
//!    missed by the plan (only a stalled scheduler misses any), never both;
//! 2. every answer is the decision table's for the segment it was decided in (an expected
//!    gate written out here by hand, not read back from the view code), with the start deadline
//!    applied; an answer the shim gave itself is the no-manager rule, or "election off" for
//!    30 s after the coordinator last said so;
//! 3. every attempt is launched at most once, exactly when its last answer was RUN, never
//!    before its instant, and a Leader firing only on an answer from the node that owned it;
//! 4. every answer to one firing carries the same firing id, the coordinator's or the shim's;
//! 5. the ledger holds one decision record per decision (repeated deferrals once);
//! 6. every firing's sequence ends.
//!
//! Seeds run on ordinary days, on the two DST days of 2026 in Europe/Berlin (checked against
//! instants written out here), and with 10,000 jobs due in one second.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use cronstable_coordinator::cluster::{
    ClusterView, Election, HolderRenewals, LeaseGate, ManagedView,
};
use cronstable_coordinator::grpc::answer_to_wire;
use cronstable_coordinator::ledger::Event as LedgerEvent;
use cronstable_coordinator::state::CoordinatorState;
use cronstable_coordinator::status::ClusterStatus;
use cronstable_core::decision::past_starting_deadline;
use cronstable_core::fingerprint::firing_id;
use cronstable_core::schedule::Schedule;
use cronstable_core::seeded::SplitMix64;
use cronstable_core::{
    ClusterPolicy, ConcurrencyPolicy, Decision, Firing, FiringKind, Gate, JobSpec, ManagerView,
    Reason, Verdict, decide,
};
use cronstable_shim::coordinator::call_error::CallError;
use cronstable_shim::coordinator::client::Answer;
use cronstable_shim::firing::LEAD;
use cronstable_shim::firing::election_memory::{ElectionMemory, MEMORY_TTL};
use cronstable_shim::firing::step::{
    Action, Event, Facts, MAX_RETRY_DEFERRAL, MAX_SCHEDULED_DEFERRAL, Now, Phase, Sequence,
};
use cronstable_shim::schedule::plan::plan;
use tokio::sync::watch;
use tokio::time::Instant;

/// This node's name.
const ME: &str = "n1";
/// The shim's lateness bound (its default).
const LATENESS: TimeDelta = TimeDelta::seconds(60);
/// How long the shim waits for an answer before it decides alone.
const CALL_DEADLINE_MS: i64 = 1_000;

/// The simulation's random source: [`SplitMix64`] with an inclusive range.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed))
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.0.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        self.0.chance(p)
    }
}

/// What the cluster looks like from this node during one segment of the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A quorate gossip cluster whose leader is this node.
    Leading,
    /// A quorate gossip cluster led by `a0`, which sorts before this node.
    Following,
    /// This node sees no quorum.
    NoQuorum,
    /// This node leads, inside its convergence hold.
    Converging,
    /// A lease backend: this node holds the lease, whose local deadline passes `lapse_ms` into
    /// the segment (a renewal that did not come).
    LeaseLapsing { lapse_ms: i64 },
    /// A lease backend: `a0` holds the lease, and this node's reads last saw it renew at
    /// `renewed_ms` into the segment: a PreferLeader firing due after that waits (DEFER) until
    /// the holder is seen renewing again, which in this segment it never is.
    LeaseFollowing { renewed_ms: i64 },
    /// Election is configured, the manager's start is being retried.
    NoManager,
    /// No election.
    ElectionOff,
    /// The coordinator does not answer (stopped, or its socket blocked): the shim decides alone.
    Down,
}

impl Mode {
    fn random(rng: &mut Rng) -> Self {
        match rng.range(0, 10) {
            0 | 1 => Mode::Leading,
            2 => Mode::Following,
            3 => Mode::NoQuorum,
            4 => Mode::Converging,
            5 => Mode::LeaseLapsing {
                lapse_ms: rng.range(0, 20_000),
            },
            6 => Mode::NoManager,
            7 => Mode::ElectionOff,
            8 => Mode::LeaseFollowing {
                renewed_ms: rng.range(0, 20_000),
            },
            _ => Mode::Down,
        }
    }

    /// The view the backend publishes for this segment, which started at `start` (`start_ms`
    /// on the wall clock).
    fn view(self, start: Instant, start_ms: i64) -> Option<ClusterView> {
        let managed = |m: ManagedView| ClusterView {
            node_name: ME.into(),
            election: Election::Managed(m),
            status: Arc::new(ClusterStatus::Disabled),
        };
        let both = vec!["a0".to_owned(), ME.to_owned()];
        let alone = vec![ME.to_owned()];
        let view = match self {
            Mode::Leading | Mode::Converging => managed(ManagedView {
                quorate: true,
                converging: self == Mode::Converging,
                leader: Some(ME.into()),
                agreeing: vec![ME.into(), "n2".into()],
                reachable_agreeing: vec![ME.into(), "n2".into()],
                ..ManagedView::default()
            }),
            Mode::Following => managed(ManagedView {
                quorate: true,
                leader: Some("a0".into()),
                agreeing: both.clone(),
                reachable_agreeing: both,
                ..ManagedView::default()
            }),
            Mode::NoQuorum => managed(ManagedView {
                agreeing: alone.clone(),
                reachable_agreeing: alone,
                ..ManagedView::default()
            }),
            Mode::LeaseLapsing { lapse_ms } => managed(ManagedView {
                quorate: true,
                leader: Some(ME.into()),
                fence: Some("7".into()),
                lease: Some(LeaseGate {
                    holder: Some(ME.into()),
                    renewals: None,
                }),
                lead_until: Some(start + ms(lapse_ms)),
                ..ManagedView::default()
            }),
            Mode::LeaseFollowing { renewed_ms } => managed(ManagedView {
                quorate: true,
                leader: Some("a0".into()),
                lease: Some(LeaseGate {
                    holder: Some("a0".into()),
                    renewals: Some(HolderRenewals {
                        silent: false,
                        alive_after_ms: Some(start_ms + renewed_ms),
                    }),
                }),
                ..ManagedView::default()
            }),
            Mode::NoManager => ClusterView {
                node_name: ME.into(),
                election: Election::NoManager {
                    reason: "its listener could not bind".into(),
                },
                status: Arc::new(ClusterStatus::Disabled),
            },
            Mode::ElectionOff => ClusterView::election_off(ME),
            Mode::Down => return None,
        };
        Some(view)
    }

    /// The gate the decision table must be given `into_ms` into this segment for a firing
    /// due `instant_into_ms` into it: written out from what each mode means, not derived from
    /// the view code under test.
    fn expected_gate(self, into_ms: i64, instant_into_ms: i64) -> Gate {
        let manager = |leader_owner: bool, availability_owner: bool, quorate: bool| {
            Gate::Manager(ManagerView {
                quorate,
                leader_owner,
                availability_owner,
                converging: self == Mode::Converging,
                owner_unconfirmed: matches!(
                    self,
                    Mode::LeaseFollowing { renewed_ms } if instant_into_ms > renewed_ms
                ),
                ..ManagerView::default()
            })
        };
        match self {
            Mode::Leading | Mode::Converging => manager(true, true, true),
            Mode::Following | Mode::LeaseFollowing { .. } => manager(false, false, true),
            Mode::NoQuorum => manager(false, true, false),
            Mode::LeaseLapsing { lapse_ms } => manager(into_ms < lapse_ms, true, true),
            Mode::NoManager => Gate::ManagerRetrying,
            Mode::ElectionOff => Gate::ElectionOff,
            Mode::Down => unreachable!("nothing is decided by a coordinator that is down"),
        }
    }

    /// Whether this node owns Leader firings `into_ms` into the segment.
    fn owns_leader(self, into_ms: i64) -> bool {
        match self {
            Mode::Leading | Mode::Converging | Mode::ElectionOff => true,
            Mode::LeaseLapsing { lapse_ms } => into_ms < lapse_ms,
            _ => false,
        }
    }
}

fn ms(n: i64) -> Duration {
    Duration::from_millis(n.max(0) as u64)
}

/// The cluster's script: segments by start time (virtual ms).
struct Script(Vec<(i64, Mode)>);

impl Script {
    fn random(rng: &mut Rng, until_ms: i64, longest_ms: i64) -> Self {
        let mut segments = Vec::new();
        let mut t = 0;
        while t <= until_ms {
            segments.push((t, Mode::random(rng)));
            t += rng.range(500, longest_ms);
        }
        Self(segments)
    }

    fn fixed(mode: Mode) -> Self {
        Self(vec![(0, mode)])
    }

    /// The segment at `t`: its index, start and mode.
    fn at(&self, t: i64) -> (usize, i64, Mode) {
        let i = self.0.partition_point(|(start, _)| *start <= t) - 1;
        (i, self.0[i].0, self.0[i].1)
    }
}

/// One job of the simulated shim.
struct SimJob {
    spec: Arc<JobSpec>,
    schedule: Schedule,
    next: Option<DateTime<Utc>>,
    /// How long its runs take (ms, at most) and how often they fail.
    run_ms: i64,
    fail: f64,
}

fn job(
    name: &str,
    schedule: &str,
    tz: Option<&str>,
    policy: ClusterPolicy,
    retries: u32,
    concurrency: ConcurrencyPolicy,
) -> JobSpec {
    let mut spec = JobSpec::new(name, schedule, "true");
    spec.timezone = tz.map(str::to_owned);
    spec.cluster_policy = policy;
    spec.retry.retries = retries;
    spec.retry.backoff = Duration::from_secs(1);
    spec.concurrency_policy = concurrency;
    spec
}

/// What happens next in the simulation.
#[derive(Debug)]
enum Happening {
    /// The shim's scheduler loop wakes.
    Wake,
    /// A firing's wait ended.
    Ready(usize),
    /// A question reaches the coordinator (or its deadline passes unanswered).
    Question(usize, FiringKind),
    /// The coordinator's answer reaches the shim, with the oracle's account of the election
    /// mode it states: (epoch, off).
    Answer(usize, Box<Answer>, (u64, bool)),
    /// The shim's deadline for a question passed without an answer.
    Unanswered(usize, FiringKind),
    /// A run ended.
    RunEnd(usize, bool),
}

/// One answer the shim acted on, and what the table said it must be.
#[derive(Debug)]
struct Asked {
    at_ms: i64,
    kind: FiringKind,
    answer: Answer,
    mode: Mode,
    into_ms: i64,
    expected: Decision,
}

/// One firing's sequence and what became of it.
struct SimFiring {
    job: usize,
    instant: DateTime<Utc>,
    seq: Sequence,
    answers: Vec<Asked>,
    launches: Vec<(u32, i64, Answer)>,
    reported_skips: usize,
}

struct Sim<'a> {
    rng: Rng,
    seed: u64,
    base_mono: Instant,
    base_wall: DateTime<Utc>,
    script: &'a Script,
    state: CoordinatorState,
    view_tx: watch::Sender<ClusterView>,
    shown_segment: Option<usize>,
    jobs: Vec<SimJob>,
    firings: Vec<SimFiring>,
    running: Vec<usize>,
    missed: Vec<BTreeSet<DateTime<Utc>>>,
    horizon: DateTime<Utc>,
    memory: ElectionMemory,
    /// The oracle's account of the election memory: the coordinator's mode epoch (a new one
    /// at every change between off and on, as it decides), the newest epoch the shim has heard,
    /// and when it last heard "off" in it (virtual ms).
    coordinator_epoch: (u64, bool),
    heard_epoch: u64,
    off_heard_at: Option<i64>,
    /// Decision records the ledger must hold, per job: the model of "repeats once".
    expected_records: Vec<usize>,
    last_defer: HashMap<(usize, i64, FiringKind), Decision>,
    queue: BinaryHeap<Reverse<(i64, u64, usize)>>,
    happenings: Vec<Option<Happening>>,
    stall_chance: f64,
}

impl<'a> Sim<'a> {
    fn new(
        seed: u64,
        base_wall: DateTime<Utc>,
        script: &'a Script,
        specs: Vec<JobSpec>,
        stall_chance: f64,
    ) -> Self {
        let mut rng = Rng::new(seed);
        let (view_tx, view_rx) = watch::channel(ClusterView::election_off(ME));
        let state = CoordinatorState::new(view_rx);
        state
            .registry
            .register("shim", specs.clone())
            .expect("the job set registers");
        let jobs: Vec<SimJob> = specs
            .into_iter()
            .map(|spec| {
                let schedule = Schedule::parse(&spec.schedule, spec.timezone.as_deref())
                    .expect("a valid schedule");
                let next = schedule.next_after(base_wall);
                let run_ms = rng.range(100, 4_000);
                let fail = if spec.retry.retries > 0 { 0.4 } else { 0.1 };
                SimJob {
                    spec: Arc::new(spec),
                    schedule,
                    next,
                    run_ms,
                    fail,
                }
            })
            .collect();
        let n = jobs.len();
        Self {
            rng,
            seed,
            base_mono: Instant::now(),
            base_wall,
            script,
            state,
            view_tx,
            shown_segment: None,
            jobs,
            firings: Vec::new(),
            running: vec![0; n],
            missed: vec![BTreeSet::new(); n],
            horizon: base_wall,
            memory: ElectionMemory::default(),
            coordinator_epoch: (0, false),
            heard_epoch: 0,
            off_heard_at: None,
            expected_records: vec![0; n],
            last_defer: HashMap::new(),
            queue: BinaryHeap::new(),
            happenings: Vec::new(),
            stall_chance,
        }
    }

    fn now(&self, t: i64) -> Now {
        Now {
            mono: self.base_mono + ms(t),
            wall: self.base_wall + TimeDelta::milliseconds(t),
        }
    }

    fn at(&mut self, t: i64, what: Happening) {
        let id = self.happenings.len();
        self.happenings.push(Some(what));
        self.queue.push(Reverse((t, id as u64, id)));
    }

    /// Runs the scheduler until `until_ms`, then lets every firing finish.
    async fn run(&mut self, until_ms: i64) {
        self.at(0, Happening::Wake);
        while let Some(Reverse((t, _, id))) = self.queue.pop() {
            let what = self.happenings[id].take().expect("each happening once");
            match what {
                Happening::Wake if t <= until_ms => self.wake(t),
                Happening::Wake => {}
                Happening::Ready(f) => {
                    let facts = self.facts(f);
                    self.step(f, Event::Ready(facts), t);
                }
                Happening::Question(f, kind) => self.question(f, kind, t).await,
                Happening::Answer(f, answer, (epoch, off)) => {
                    self.memory
                        .answered(answer.reason, answer.election, self.now(t).mono);
                    // The newest word wins; an older one arriving late does not.
                    if epoch >= self.heard_epoch {
                        self.heard_epoch = epoch;
                        self.off_heard_at = off.then_some(t);
                    }
                    let facts = self.facts(f);
                    self.step(f, Event::Answered(*answer, facts), t);
                }
                Happening::Unanswered(f, kind) => {
                    let answer = self.decide_alone(f, kind, t);
                    let facts = self.facts(f);
                    self.step(f, Event::Answered(answer, facts), t);
                }
                Happening::RunEnd(f, ok) => {
                    self.running[self.firings[f].job] -= 1;
                    self.step(f, Event::Ran(Some(ok)), t);
                }
            }
            // A retry waiting for a manager that never comes back defers for up to an hour.
            let longest = MAX_RETRY_DEFERRAL.as_millis() as i64 + 600_000;
            assert!(
                t < until_ms + longest,
                "seed {}: the simulation ran away",
                self.seed
            );
        }
    }

    /// The scheduler loop's body, as `cronstable_shim::run` has it: plan every job `LEAD`
    /// ahead, start what is due, then sleep until the next due instant (at most 5 s), or
    /// longer when the loop stalls.
    fn wake(&mut self, t: i64) {
        let wall = self.now(t).wall;
        self.horizon = self.horizon.max(wall + LEAD);
        for j in 0..self.jobs.len() {
            let sim_job = &mut self.jobs[j];
            let p = plan(&sim_job.schedule, sim_job.next, wall + LEAD, LATENESS);
            sim_job.next = p.next;
            assert_eq!(p.missed.len() as u64, p.missed_total, "seed {}", self.seed);
            for m in p.missed {
                assert!(self.missed[j].insert(m), "seed {}: missed twice", self.seed);
            }
            if let Some(instant) = p.fire {
                let seq = Sequence::new(
                    sim_job.spec.clone(),
                    instant,
                    FiringKind::Scheduled,
                    1,
                    sim_job.spec.retry.retries + 1,
                    self.now(t).mono,
                );
                self.firings.push(SimFiring {
                    job: j,
                    instant,
                    seq,
                    answers: Vec::new(),
                    launches: Vec::new(),
                    reported_skips: 0,
                });
                let f = self.firings.len() - 1;
                let facts = self.facts(f);
                self.step(f, Event::Ready(facts), t);
            }
        }
        let earliest = self.jobs.iter().filter_map(|j| j.next).min();
        let mut nap = earliest
            .map(|w| (w - LEAD - wall).num_milliseconds().clamp(0, 5_000))
            .unwrap_or(5_000)
            + self.rng.range(0, 3);
        if self.rng.chance(self.stall_chance) {
            nap += self.rng.range(1_000, 100_000);
        }
        self.at(t + nap.max(1), Happening::Wake);
    }

    fn facts(&self, f: usize) -> Facts {
        Facts {
            running: self.running[self.firings[f].job],
            ..Facts::quiet()
        }
    }

    /// One step of firing `f`'s state machine, and its actions performed.
    fn step(&mut self, f: usize, event: Event, t: i64) {
        let now = self.now(t);
        let actions = self.firings[f].seq.step(event, now);
        for action in actions {
            match action {
                Action::Log(_) => {}
                Action::ReportSkip { .. } => self.firings[f].reported_skips += 1,
                Action::HandOff { .. } => {}
                Action::Pause { wait, .. } => {
                    self.at(t + wait.as_millis() as i64, Happening::Ready(f));
                }
                Action::Ask { kind, .. } => {
                    let trip = self.rng.range(0, 15);
                    self.at(t + trip, Happening::Question(f, kind));
                }
                Action::Launch {
                    answer, attempt, ..
                } => {
                    let job = self.firings[f].job;
                    self.running[job] += 1;
                    self.firings[f].launches.push((attempt, t, answer));
                    let took = self.rng.range(10, self.jobs[job].run_ms);
                    let ok = !self.rng.chance(self.jobs[job].fail);
                    self.at(t + took, Happening::RunEnd(f, ok));
                }
                a @ (Action::WaitRegistered { .. } | Action::StopPrevious) => {
                    panic!(
                        "seed {}: {a:?} for a scheduled firing without Replace",
                        self.seed
                    )
                }
            }
        }
    }

    /// A question reaches the coordinator at `t` and is answered from the segment's view; when
    /// the coordinator is down, the shim's deadline passes instead.
    async fn question(&mut self, f: usize, kind: FiringKind, t: i64) {
        let (segment, start, mode) = self.script.at(t);
        if mode == Mode::Down {
            self.at(t + CALL_DEADLINE_MS, Happening::Unanswered(f, kind));
            return;
        }
        let job = self.firings[f].job;
        let spec = self.jobs[job].spec.clone();
        let instant_ms = self.firings[f].instant.timestamp_millis();
        let now = self.now(t);
        if self.shown_segment != Some(segment) {
            let start_ms = (self.base_wall + TimeDelta::milliseconds(start)).timestamp_millis();
            let view = mode
                .view(self.base_mono + ms(start), start_ms)
                .expect("a view");
            self.view_tx.send_replace(view);
            self.shown_segment = Some(segment);
        }
        let firing = Firing {
            job: spec.name.clone(),
            scheduled_at_ms: instant_ms,
            kind,
        };
        let gate_now = cronstable_coordinator::clock::Now {
            at: now.mono,
            unix_ms: now.wall.timestamp_millis(),
        };
        let decided = self
            .state
            .should_run(&firing, gate_now)
            .await
            .expect("the job is registered");
        let decision = decided.decision;
        let answer = Answer::from_wire(answer_to_wire(decided, self.state.election_stamp()));
        let expected =
            if past_starting_deadline(kind, instant_ms, gate_now.unix_ms, spec.starting_deadline())
            {
                Decision::skip(Reason::StartingDeadline)
            } else {
                let instant_into_ms = instant_ms - self.now(start).wall.timestamp_millis();
                let gate = mode.expected_gate(t - start, instant_into_ms);
                decide(spec.cluster_policy, kind, gate)
            };
        // The ledger's model: a DEFER repeated for the same firing is recorded once.
        let key = (job, instant_ms, kind);
        let repeat = self.last_defer.get(&key) == Some(&decision);
        if decision.verdict == Verdict::Defer {
            self.last_defer.insert(key, decision);
        } else {
            self.last_defer.remove(&key);
        }
        if !repeat {
            self.expected_records[job] += 1;
        }
        let off = mode == Mode::ElectionOff;
        if off != self.coordinator_epoch.1 {
            self.coordinator_epoch = (self.coordinator_epoch.0 + 1, off);
        }
        self.firings[f].answers.push(Asked {
            at_ms: t,
            kind,
            answer: answer.clone(),
            mode,
            into_ms: t - start,
            expected,
        });
        let reply_at = t + self.rng.range(0, 15);
        let epoch = self.coordinator_epoch;
        self.at(reply_at, Happening::Answer(f, Box::new(answer), epoch));
    }

    /// The shim's own answer at `t`, its question unanswered: the no-manager rule, or election
    /// off while the coordinator's last word was "off" and at most 30 s old.
    fn decide_alone(&mut self, f: usize, kind: FiringKind, t: i64) -> Answer {
        let (_, start, mode) = self.script.at(t);
        let spec = self.jobs[self.firings[f].job].spec.clone();
        let instant_ms = self.firings[f].instant.timestamp_millis();
        let set = self.state.registry.current();
        let answer = cronstable_shim::firing::step::without_coordinator(
            &spec,
            kind,
            &CallError::Unreachable("no answer in time".into()),
            self.memory.gate(self.now(t).mono),
            firing_id(&set.id, &spec.name, instant_ms),
        );
        let fresh_off = self
            .off_heard_at
            .is_some_and(|heard| t - heard <= MEMORY_TTL.as_millis() as i64);
        let gate = if fresh_off {
            Gate::ElectionOff
        } else {
            Gate::NoManager
        };
        let d = decide(spec.cluster_policy, kind, gate);
        let expected = Decision {
            verdict: d.verdict,
            reason: if d.verdict == Verdict::Run {
                d.reason
            } else {
                Reason::CoordinatorUnreachable
            },
        };
        self.firings[f].answers.push(Asked {
            at_ms: t,
            kind,
            answer: answer.clone(),
            mode,
            into_ms: t - start,
            expected,
        });
        answer
    }

    /// Every property of the module docs, for every job.
    fn check(&self) {
        let seed = self.seed;
        let mut by_job = vec![Vec::new(); self.jobs.len()];
        for fx in &self.firings {
            by_job[fx.job].push(fx);
        }
        for (j, sim_job) in self.jobs.iter().enumerate() {
            let name = &sim_job.spec.name;
            let expected: BTreeSet<DateTime<Utc>> = instants(&sim_job.schedule, self.base_wall)
                .take_while(|t| *t <= self.horizon)
                .collect();
            let mut taken = BTreeSet::new();
            for fx in &by_job[j] {
                assert!(
                    taken.insert(fx.instant),
                    "seed {seed}: {name} {} taken up twice",
                    fx.instant
                );
                assert!(
                    !self.missed[j].contains(&fx.instant),
                    "seed {seed}: {name} {} both taken up and missed",
                    fx.instant
                );
                self.check_firing(fx);
            }
            let accounted: BTreeSet<_> = taken.union(&self.missed[j]).copied().collect();
            assert_eq!(
                accounted, expected,
                "seed {seed}: {name}: the instants taken up or missed are not the due ones"
            );
            let records = self
                .state
                .ledger
                .records(name)
                .iter()
                .filter(|r| matches!(r.event, LedgerEvent::Decided { .. }))
                .count();
            assert_eq!(
                records, self.expected_records[j],
                "seed {seed}: {name}: decision records in the ledger"
            );
        }
    }

    fn check_firing(&self, fx: &SimFiring) {
        let seed = self.seed;
        let name = &self.jobs[fx.job].spec.name;
        let policy = self.jobs[fx.job].spec.cluster_policy;
        let what = format!("seed {seed}: {name} at {}", fx.instant);
        assert_eq!(
            fx.seq.phase(),
            &Phase::Done,
            "{what}: the sequence did not end"
        );
        let ids: BTreeSet<_> = fx
            .answers
            .iter()
            .map(|a| a.answer.firing_id.as_str())
            .collect();
        assert!(ids.len() <= 1, "{what}: answers carry firing ids {ids:?}");
        for a in &fx.answers {
            let got = Decision {
                verdict: a.answer.verdict,
                reason: a.answer.reason.expect("a reason this build knows"),
            };
            assert_eq!(
                got,
                a.expected,
                "{what}: {:?} asked at {} ms, {} ms into {:?} (local: {})",
                a.kind,
                a.at_ms,
                a.into_ms,
                a.mode,
                a.answer.is_local()
            );
        }
        // A deferral is asked again for a bounded time only.
        for attempt in fx
            .answers
            .iter()
            .map(|a| a.kind.attempt())
            .collect::<BTreeSet<_>>()
        {
            let of_attempt = || fx.answers.iter().filter(|a| a.kind.attempt() == attempt);
            let first_defer = of_attempt().find(|a| a.answer.verdict == Verdict::Defer);
            let last = of_attempt().next_back().expect("asked").at_ms;
            if let Some(first) = first_defer {
                let bound = match first.kind {
                    FiringKind::Scheduled => MAX_SCHEDULED_DEFERRAL,
                    _ => MAX_RETRY_DEFERRAL,
                };
                // The shim gives up at the first answer past the bound: one more wait of the
                // coordinator's retry hint (1 s) and a few round trips at most.
                assert!(
                    last - first.at_ms <= bound.as_millis() as i64 + 1_050,
                    "{what}: attempt {attempt} deferred from {} ms to {last} ms",
                    first.at_ms
                );
            }
        }
        let mut attempts = BTreeSet::new();
        for (attempt, at, answer) in &fx.launches {
            assert!(
                attempts.insert(*attempt),
                "{what}: attempt {attempt} launched twice"
            );
            assert!(
                self.now(*at).wall >= fx.instant,
                "{what}: launched before its instant"
            );
            // The last answer for this attempt was RUN, and it is the one launched on.
            let last = fx
                .answers
                .iter()
                .rfind(|a| a.kind.attempt() == *attempt)
                .expect("a launch follows an answer");
            assert_eq!(
                last.answer.verdict,
                Verdict::Run,
                "{what}: launched on {last:?}"
            );
            assert_eq!(&last.answer, answer, "{what}: launched on another answer");
            if policy == ClusterPolicy::Leader {
                let owned = if last.answer.is_local() {
                    // Only the coordinator's own recent "election off" lets the shim run it.
                    last.expected.reason == Reason::ElectionOff
                } else {
                    last.answer.owner == ME
                        && last.answer.node_name == ME
                        && last.mode.owns_leader(last.into_ms)
                };
                assert!(owned, "{what}: a Leader firing ran on {last:?}");
            }
        }
        // Every attempt whose last answer was RUN was launched.
        let mut last_per_attempt = BTreeMap::new();
        for a in &fx.answers {
            last_per_attempt.insert(a.kind.attempt(), a.answer.verdict);
        }
        for (attempt, verdict) in last_per_attempt {
            assert_eq!(
                verdict == Verdict::Run,
                attempts.contains(&attempt),
                "{what}: attempt {attempt}'s last answer was {verdict:?}"
            );
        }
        if fx.answers.is_empty() {
            // Never asked: only Forbid with a run going skips before the question.
            assert_eq!(fx.reported_skips, 1, "{what}: neither asked nor skipped");
        }
    }
}

/// The due instants of `schedule` after `from`.
fn instants(schedule: &Schedule, from: DateTime<Utc>) -> impl Iterator<Item = DateTime<Utc>> + '_ {
    std::iter::successors(schedule.next_after(from), |t| schedule.next_after(*t))
}

/// The ordinary mix: every policy, per-second to per-minute, retries and Forbid.
fn ordinary_jobs() -> Vec<JobSpec> {
    use ClusterPolicy::*;
    use ConcurrencyPolicy::*;
    vec![
        job("leader-every-second", "* * * * * *", None, Leader, 0, Allow),
        JobSpec {
            // Short enough that a stalled scheduler's late firings meet it.
            starting_deadline: Some(Duration::from_secs(5)),
            ..job("leader-forbid", "*/7 * * * * *", None, Leader, 0, Forbid)
        },
        job("leader-retries", "*/10 * * * * *", None, Leader, 2, Allow),
        job(
            "prefer-every-5s",
            "*/5 * * * * *",
            None,
            PreferLeader,
            1,
            Forbid,
        ),
        job("prefer-minute", "* * * * *", None, PreferLeader, 0, Allow),
        job("every-node", "*/3 * * * * *", None, EveryNode, 1, Allow),
    ]
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
}

/// How many seeds the main property runs: 200 in the fast tier, more with
/// `CRONSTABLE_NODE_SIM_SEEDS` (BENCHMARKS.md records a longer run).
#[expect(
    clippy::disallowed_methods,
    reason = "a test's depth switch; the simulated code never reads the environment"
)]
fn seeds() -> u64 {
    std::env::var("CRONSTABLE_NODE_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

#[test]
fn every_due_instant_is_decided_once_and_run_as_the_table_says() {
    let rt = rt();
    let mut modes_seen = BTreeSet::new();
    for seed in 0..seeds() {
        let mut rng = Rng::new(seed ^ 0x5EED);
        // Somewhere in 2026, on the millisecond.
        let base = Utc
            .timestamp_millis_opt(1_767_225_600_000 + rng.range(0, 360 * 86_400_000))
            .unwrap();
        let script = Script::random(&mut rng, 150_000, 40_000);
        for (_, m) in &script.0 {
            modes_seen.insert(format!("{m:?}").split(' ').next().unwrap().to_owned());
        }
        let mut sim = Sim::new(seed, base, &script, ordinary_jobs(), 0.004);
        rt.block_on(sim.run(150_000));
        sim.check();
    }
    assert_eq!(modes_seen.len(), 9, "every mode scripted: {modes_seen:?}");
}

/// The two DST days of 2026 in Europe/Berlin, against instants written out by hand: a fixed-time
/// job runs once (spring: at 03:00 CEST, the first instant after the gap; autumn: on the first
/// 02:30), a wildcard job skips the gap and runs in both passes of the repeated hour.
#[test]
fn dst_days_keep_every_instant() {
    use ClusterPolicy::*;
    let rt = rt();
    let utc = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
    let days = [
        (
            utc("2026-03-29T00:15:00Z"),
            vec![utc("2026-03-29T01:00:00Z")],
            ["00:30", "01:00", "01:30", "02:00", "02:30", "03:00"]
                .map(|hm| utc(&format!("2026-03-29T{hm}:00Z"))),
        ),
        (
            utc("2026-10-24T23:15:00Z"),
            vec![utc("2026-10-25T00:30:00Z")],
            [
                "2026-10-24T23:30",
                "2026-10-25T00:00",
                "2026-10-25T00:30",
                "2026-10-25T01:00",
                "2026-10-25T01:30",
                "2026-10-25T02:00",
            ]
            .map(|t| utc(&format!("{t}:00Z"))),
        ),
    ];
    let berlin = Some("Europe/Berlin");
    for (day, (base, fixed, wildcard)) in days.iter().enumerate() {
        for seed in 0..seeds() / 8 {
            let seed = seed * 2 + day as u64;
            let mut rng = Rng::new(seed ^ 0xD57);
            let script = Script::random(&mut rng, 3 * 3_600_000, 1_800_000);
            let jobs = vec![
                job(
                    "fixed",
                    "30 2 * * *",
                    berlin,
                    Leader,
                    1,
                    ConcurrencyPolicy::Allow,
                ),
                job(
                    "wildcard",
                    "*/30 * * * *",
                    berlin,
                    PreferLeader,
                    0,
                    ConcurrencyPolicy::Allow,
                ),
                job(
                    "pacer",
                    "*/5 * * * *",
                    berlin,
                    EveryNode,
                    0,
                    ConcurrencyPolicy::Allow,
                ),
            ];
            let mut sim = Sim::new(seed, *base, &script, jobs, 0.0005);
            rt.block_on(sim.run(3 * 3_600_000));
            sim.check();
            let end = *base + TimeDelta::hours(3);
            for (j, want) in [(0, fixed.as_slice()), (1, wildcard.as_slice())] {
                let mut got: BTreeSet<_> = sim.missed[j].clone();
                got.extend(sim.firings.iter().filter(|f| f.job == j).map(|f| f.instant));
                let want: BTreeSet<_> = want.iter().copied().filter(|t| *t <= end).collect();
                assert_eq!(got, want, "seed {seed}: {}", sim.jobs[j].spec.name);
            }
        }
    }
}

/// 10,000 jobs due in the same second: each is taken up once and decided by the table, in
/// every mode.
#[test]
fn ten_thousand_jobs_due_in_one_second() {
    let rt = rt();
    let policies = ClusterPolicy::ALL;
    let jobs: Vec<JobSpec> = (0..10_000)
        .map(|i| {
            job(
                &format!("job-{i:05}"),
                "* * * * *",
                None,
                policies[i % 3],
                0,
                ConcurrencyPolicy::Allow,
            )
        })
        .collect();
    let base = "2026-06-01T11:59:30Z".parse::<DateTime<Utc>>().unwrap();
    for (seed, mode) in [Mode::Leading, Mode::Following, Mode::Down]
        .into_iter()
        .enumerate()
    {
        let script = Script::fixed(mode);
        let mut sim = Sim::new(seed as u64, base, &script, jobs.clone(), 0.0);
        rt.block_on(sim.run(45_000));
        sim.check();
        let launched = sim
            .firings
            .iter()
            .filter(|f| !f.launches.is_empty())
            .count();
        let want = match mode {
            Mode::Leading => 10_000,
            // Another node leads: only EveryNode runs here.
            Mode::Following => 3_333,
            // The no-manager rule: Leader skips, PreferLeader and EveryNode run.
            _ => 6_666,
        };
        assert_eq!(sim.firings.len(), 10_000, "{mode:?}: every job taken up");
        assert_eq!(launched, want, "{mode:?}");
    }
}
