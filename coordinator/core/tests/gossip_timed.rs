//! A timed, seeded simulation of a gossip cluster, built from `GossipState::round` alone (the
//! gossip-convergence issue, item 3).
//!
//! `gossip_sim` steps every node in lockstep; real nodes do not. Here each node runs its rounds
//! on its own clock: every `interval` from its own start, with its own phase and a few
//! milliseconds of poll latency. A poll returns the report the peer serves at that moment (from
//! the peer's last finished round, or its fresh report before its first), or "unreachable" if
//! the peer is dead or the link is cut. Processes start, die and restart; links are cut and
//! healed. A node serves the empty job set until its shim registers (50–500 ms after its
//! first round may run), as a coordinator started before its shim does; it publishes the
//! change in a refresh, and until it counts itself a candidate (within its first five
//! intervals) it takes refreshes between its rounds, as the manager does. Every node's
//! leadership is logged as it changes, so the checker can ask, for any instant: who leads?
//!
//! The checker asserts safety on every seed (no two mutually connected nodes lead at the same
//! instant, except within the seed's GSP-121 allowance of an interval after a link change) and
//! measures liveness: the cold start (last process start to the first leader), the failover
//! (leader killed to the next leader) and the cost of a rejoin (per-second Leader firings that
//! ran nowhere after the killed node came back). The liveness figures are asserted as today's
//! bounds, so a change that makes them worse fails; the targets are printed beside them.
//!
//! Replay one seed, with its whole timeline:
//! `CRONSTABLE_SIM_SEED=<seed> cargo test -p cronstable-core --test core gossip_timed -- --nocapture`

use std::collections::BTreeSet;
use std::sync::Arc;

use cronstable_core::gossip::{
    Distribution, GossipState, LocalNode, PeerReport, PollOutcome, fresh_report,
};
use cronstable_core::seeded::SplitMix64;

/// `cluster.interval` in the simulation, in ms.
const I: u64 = 1_000;

/// Rule 4b's refreshes a node may take between two rounds (the manager's budget).
const REFRESHES_PER_ROUND: u32 = 3;

/// For how long after its start a node that does not count itself a candidate yet takes
/// refreshes between its rounds (the manager's `BOOT_REFRESH_INTERVALS`), in ms.
const BOOT_REFRESH_MS: u64 = 5 * I;

/// The simulation's random source: [`SplitMix64`] with a half-open range.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed))
    }

    /// Uniform in `lo..hi` (`lo` when the range is empty).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.0.below(hi.saturating_sub(lo))
    }

    fn chance(&mut self, p: f64) -> bool {
        self.0.chance(p)
    }
}

struct Node {
    local: LocalNode,
    state: GossipState,
    served: Arc<PeerReport>,
    alive: bool,
    started_at: u64,
    next_round: u64,
    /// A refresh due before the next round (rule 4b), or `u64::MAX`.
    next_refresh: u64,
    /// Refreshes left before the next full round.
    refreshes_left: u32,
    /// When the node's shim registers its jobs (its job set changes from the empty one), or
    /// `u64::MAX` once it has.
    registers_at: u64,
    /// When the node last folded (a round or a refresh).
    last_fold: u64,
    leads: bool,
    incarnation: u32,
    /// Per peer, the outcome of the last poll that finished: what the manager before issue 43
    /// folded while a newer poll of that peer was still in flight ([`SlowPolls::Reused`]).
    latest: Vec<PollOutcome>,
    /// Per peer, a poll in flight: when it finishes, and what it read when it started.
    inflight: Vec<Option<(u64, PollOutcome)>>,
}

/// What a fold reads of a peer whose poll is slower than the round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlowPolls {
    /// The peer is unreachable for that fold, as the manager has it: every poll is bounded by
    /// the round and a late answer is dropped.
    TimedOut,
    /// The poll stays in flight for up to three intervals and every fold meanwhile reuses the
    /// last finished outcome (the peer as it was, possibly in its previous life): the manager
    /// before issue 43, kept to show that the search sees what that cost.
    Reused,
}

/// The job set a node serves before its shim registers, and the cluster's.
const NO_JOBS: &str = "v1:none";
const JOBS: &str = "v1:same";

/// What happens next to a node.
#[derive(Debug, Clone, Copy)]
enum Event {
    Register,
    Refresh,
    Round,
}

/// One simulated cluster.
struct Timed {
    nodes: Vec<Node>,
    /// `reach[i][j]`: node i can poll node j.
    reach: Vec<Vec<bool>>,
    now: u64,
    /// (time, node, leads) at every change of a node's leadership.
    lead_log: Vec<(u64, usize, bool)>,
    /// When the reachability last changed (the GSP-121 allowance runs from there).
    reach_changes: Vec<u64>,
    /// What happened, for a replay.
    trace: Vec<String>,
    /// Every round goes into the trace too (a replay).
    verbose: bool,
    rng: Rng,
    /// With slow polls: how a fold reads them, and the draws that make a poll slow and how
    /// slow (a stream of its own, so the seeds of the fresh-poll tests keep their schedules).
    /// `None`: every poll is answered within its round.
    slow_polls: Option<(SlowPolls, f64, Rng)>,
    /// (time, poller, peer) of every poll that timed out ([`SlowPolls::TimedOut`]): for that
    /// fold the link is as good as cut (the GSP-121 allowance runs from there, for that pair).
    timed_out: Vec<(u64, usize, usize)>,
}

impl Timed {
    fn new(n: usize, seed: u64) -> Self {
        let nodes = (0..n)
            .map(|i| {
                let local = LocalNode {
                    name: format!("n{}", i + 1),
                    instance_id: format!("n{}-0", i + 1),
                    job_set_id: NO_JOBS.into(),
                    configured_size: n,
                    elect_leader: true,
                    distribution: Distribution::SingleLeader,
                    drift_after: 3,
                    interval_ms: I,
                };
                Node {
                    served: Arc::new(fresh_report(&local)),
                    state: GossipState::new(n - 1, 0),
                    local,
                    alive: false,
                    started_at: 0,
                    next_round: u64::MAX,
                    next_refresh: u64::MAX,
                    refreshes_left: 0,
                    registers_at: u64::MAX,
                    last_fold: 0,
                    leads: false,
                    incarnation: 0,
                    latest: vec![PollOutcome::NotPolled; n],
                    inflight: vec![None; n],
                }
            })
            .collect();
        Self {
            nodes,
            reach: vec![vec![true; n]; n],
            now: 0,
            lead_log: Vec::new(),
            reach_changes: Vec::new(),
            trace: Vec::new(),
            verbose: replaying(),
            rng: Rng::new(seed),
            slow_polls: None,
            timed_out: Vec::new(),
        }
    }

    /// The same cluster whose polls are slower than a round with probability `chance`, read
    /// as `how` says.
    fn with_slow_polls(mut self, how: SlowPolls, chance: f64, seed: u64) -> Self {
        self.slow_polls = Some((how, chance, Rng::new(seed ^ 0x510E_7011)));
        self
    }

    /// What node `i`'s fold at the current time reads of peer `j`.
    fn poll(&mut self, i: usize, j: usize) -> PollOutcome {
        let fresh = if self.nodes[j].alive && self.reach[i][j] {
            PollOutcome::Report(Arc::clone(&self.nodes[j].served))
        } else {
            PollOutcome::Unreachable {
                error: "refused".into(),
            }
        };
        let now = self.now;
        let Some((how, chance, slow)) = self.slow_polls.as_mut() else {
            return fresh;
        };
        if *how == SlowPolls::TimedOut {
            if slow.chance(*chance) {
                self.timed_out.push((now, i, j));
                return PollOutcome::Unreachable {
                    error: "no answer within the round".into(),
                };
            }
            return fresh;
        }
        let node = &mut self.nodes[i];
        if let Some((done, read)) = node.inflight[j].clone() {
            if now < done {
                return node.latest[j].clone();
            }
            node.latest[j] = read;
            node.inflight[j] = None;
        }
        if slow.chance(*chance) {
            let done = now + slow.range(I / 2, 3 * I);
            node.inflight[j] = Some((done, fresh));
            return node.latest[j].clone();
        }
        node.latest[j] = fresh.clone();
        fresh
    }

    fn n(&self) -> usize {
        self.nodes.len()
    }

    /// Starts (or restarts, as a new incarnation) node `i` at the current time: its first round
    /// comes after a process start of 50–300 ms.
    fn start(&mut self, i: usize) {
        let n = self.n();
        let boot = self.rng.range(50, 300);
        let registers = self.rng.range(50, 500);
        let node = &mut self.nodes[i];
        node.incarnation += 1;
        node.local.instance_id = format!("{}-{}", node.local.name, node.incarnation);
        // Until its shim registers, a node serves the empty job set (its peers see it
        // syncing), as a coordinator started before its shim does.
        node.local.job_set_id = NO_JOBS.into();
        node.registers_at = self.now + boot + registers;
        node.state = GossipState::new(n - 1, 0);
        node.served = Arc::new(fresh_report(&node.local));
        // A new process has polled nothing yet.
        node.latest = vec![PollOutcome::NotPolled; n];
        node.inflight = vec![None; n];
        node.alive = true;
        node.started_at = self.now;
        node.next_round = self.now + boot;
        node.next_refresh = u64::MAX;
        self.trace
            .push(format!("{:>7} start {}", self.now, node.local.name));
    }

    fn kill(&mut self, i: usize) {
        let now = self.now;
        let node = &mut self.nodes[i];
        node.alive = false;
        node.next_round = u64::MAX;
        node.next_refresh = u64::MAX;
        node.registers_at = u64::MAX;
        if node.leads {
            node.leads = false;
            self.lead_log.push((now, i, false));
        }
        self.trace
            .push(format!("{now:>7} kill {}", node.local.name));
    }

    fn set_reach(&mut self, reach: Vec<Vec<bool>>) {
        self.reach = reach;
        self.reach_changes.push(self.now);
        self.trace
            .push(format!("{:>7} reach {:?}", self.now, self.reach));
    }

    /// One round of node `i` at the current time (a refresh when `refresh`).
    fn round(&mut self, i: usize, refresh: bool) {
        let polls: Vec<PollOutcome> = (0..self.n())
            .filter(|&j| j != i)
            .map(|j| self.poll(i, j))
            .collect();
        let now = self.now;
        let latency = self.rng.range(1, 30);
        let node = &mut self.nodes[i];
        let view = if refresh {
            node.state
                .refresh(&node.local, &polls, now - node.started_at)
        } else {
            node.state.round(&node.local, &polls, now - node.started_at)
        };
        node.served = Arc::new(view.report(&node.local, Vec::new()));
        node.last_fold = now;
        if self.verbose {
            self.trace.push(format!(
                "{now:>7}   {} {}: leader {:?} candidates {:?} claims {:?} recheck {}",
                node.local.name,
                if refresh { "refresh" } else { "round" },
                view.leader,
                view.candidates,
                view.incumbents,
                view.recheck
            ));
        }
        let leads = view.leader.as_deref() == Some(node.local.name.as_str());
        if leads != node.leads {
            node.leads = leads;
            self.lead_log.push((now, i, leads));
            self.trace.push(format!(
                "{now:>7} {} {} (candidates {:?})",
                node.local.name,
                if leads { "leads" } else { "stops leading" },
                view.candidates
            ));
        }
        if refresh {
            node.next_refresh = u64::MAX;
        } else {
            // The next tick, as tokio's interval with `Delay`, plus this round's polls.
            node.next_round = now + I + latency;
            node.refreshes_left = REFRESHES_PER_ROUND;
        }
        // Rule 4b, as the coordinator's manager takes it: a quarter interval later, at most
        // REFRESHES_PER_ROUND times before the next round.
        // And while booting, as the manager does: until the node counts itself a candidate,
        // within its first five intervals.
        let booting = now - node.started_at < BOOT_REFRESH_MS && !view.self_candidate;
        if (view.recheck || booting) && node.refreshes_left > 0 && now + I / 4 < node.next_round {
            node.refreshes_left -= 1;
            node.next_refresh = now + I / 4 + latency;
        }
    }

    /// The node's shim registers: its job set becomes the cluster's. The coordinator publishes
    /// that in a refresh at once (a quarter interval after its last fold at the earliest).
    fn register(&mut self, i: usize) {
        let now = self.now;
        let node = &mut self.nodes[i];
        node.registers_at = u64::MAX;
        node.local.job_set_id = JOBS.into();
        let at = (node.last_fold + I / 4).max(now);
        if at < node.next_round {
            node.next_refresh = node.next_refresh.min(at);
        }
        if self.verbose {
            self.trace
                .push(format!("{now:>7}   {} registers", node.local.name));
        }
    }

    /// Runs every round, refresh and registration due before `until`, in time order (ties in
    /// node order).
    fn run_until(&mut self, until: u64) {
        while let Some((i, at, kind)) = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.alive)
            .map(|(i, n)| {
                let (at, kind) = [
                    (n.registers_at, Event::Register),
                    (n.next_round, Event::Round),
                    (n.next_refresh, Event::Refresh),
                ]
                .into_iter()
                .min_by_key(|&(at, _)| at)
                .unwrap_or((u64::MAX, Event::Round));
                (i, at, kind)
            })
            .min_by_key(|&(i, at, _)| (at, i))
        {
            if at >= until {
                break;
            }
            self.now = at;
            match kind {
                Event::Register => self.register(i),
                Event::Refresh => self.round(i, true),
                Event::Round => self.round(i, false),
            }
        }
        self.now = until;
    }

    /// The nodes leading at instant `t` (a change at `t` counts).
    fn leaders_at(&self, t: u64) -> BTreeSet<usize> {
        let mut leading = BTreeSet::new();
        for &(at, i, leads) in &self.lead_log {
            if at > t {
                break;
            }
            if leads {
                leading.insert(i);
            } else {
                leading.remove(&i);
            }
        }
        leading
    }

    /// The first instant at or after `t` at which some node starts leading.
    fn first_lead_from(&self, t: u64) -> Option<u64> {
        self.lead_log
            .iter()
            .find(|&&(at, _, leads)| at >= t && leads)
            .map(|&(at, _, _)| at)
    }

    /// Whole seconds in `[from, to)` at which no node leads: per-second Leader firings lost.
    fn missed_firings(&self, from: u64, to: u64) -> u64 {
        (from.div_ceil(1000)..to.div_ceil(1000))
            .filter(|s| self.leaders_at(s * 1000).is_empty())
            .count() as u64
    }

    /// Whether the later of two leaders (both leading at `at`) began to lead at a fold in
    /// which its poll of the other timed out, within the GSP-121 allowance: it did not hear
    /// the other that round, as if the link were cut, and hears it at its next fold.
    fn blind_start(&self, a: usize, b: usize, at: u64) -> bool {
        let began = |x: usize| {
            self.lead_log
                .iter()
                .rev()
                .find(|&&(t, i, leads)| t <= at && i == x && leads)
                .map(|&(t, _, _)| t)
        };
        let (Some(ta), Some(tb)) = (began(a), began(b)) else {
            return false;
        };
        let (later, other, since) = if ta >= tb { (a, b, ta) } else { (b, a, tb) };
        at < since + 2 * I + 100 && self.timed_out.contains(&(since, later, other))
    }

    /// Safety: every instant at which two mutually connected nodes both lead, outside an
    /// interval after a link change (GSP-121: a newly cut-off leader acts on its stale view
    /// until its own next poll).
    fn double_leaders(&self) -> Vec<(u64, usize, usize)> {
        let mut found = Vec::new();
        let mut leading = BTreeSet::new();
        for (k, &(at, i, leads)) in self.lead_log.iter().enumerate() {
            if leads {
                leading.insert(i);
            } else {
                leading.remove(&i);
            }
            // Only the state after the last change at this instant counts.
            if self
                .lead_log
                .get(k + 1)
                .is_some_and(|&(next, _, _)| next == at)
            {
                continue;
            }
            let excused = self
                .reach_changes
                .iter()
                .any(|&c| c <= at && at < c + 2 * I + 100);
            if excused {
                continue;
            }
            for &a in &leading {
                for &b in &leading {
                    if a < b && self.reach[a][b] && self.reach[b][a] && !self.blind_start(a, b, at)
                    {
                        found.push((at, a, b));
                    }
                }
            }
        }
        found
    }
}

/// A joint boot: every process starts within one interval, in random order. Returns the
/// last start.
fn joint_boot(sim: &mut Timed, rng: &mut Rng) -> u64 {
    let spread = rng.range(0, I);
    let mut starts: Vec<(u64, usize)> = (0..sim.n())
        .map(|i| (rng.range(0, spread + 1), i))
        .collect();
    starts.sort_unstable();
    for &(at, i) in &starts {
        sim.run_until(at);
        sim.start(i);
    }
    starts.last().map_or(0, |s| s.0)
}

/// What one seed measured.
#[derive(Debug, Default, Clone, Copy)]
struct Measured {
    cold_start_ms: Option<u64>,
    failover_ms: Option<u64>,
    failover_missed: u64,
    rejoin_missed: u64,
    /// Firings missed when the leader is restarted at once (its failover and its return).
    restart_missed: u64,
}

/// The seed's whole life: a joint boot of 3–5 nodes within up to one interval; the leader
/// killed at a random instant; the killed node restarted; then a random link cut and heal.
fn life(seed: u64) -> (Timed, Measured) {
    let mut rng = Rng::new(seed ^ 0x5EED);
    let n = rng.range(3, 6) as usize;
    let mut sim = Timed::new(n, seed);
    let mut m = Measured::default();

    let last_start = joint_boot(&mut sim, &mut rng);
    sim.run_until(last_start + 15 * I);
    m.cold_start_ms = sim.first_lead_from(0).map(|t| t.saturating_sub(last_start));

    // Leader kill, at a random phase.
    let kill_at = sim.now + rng.range(0, I);
    sim.run_until(kill_at);
    if let Some(&leader) = sim.leaders_at(kill_at).iter().next() {
        sim.kill(leader);
        sim.run_until(kill_at + 15 * I);
        m.failover_ms = sim.first_lead_from(kill_at).map(|t| t - kill_at);
        m.failover_missed = sim.missed_firings(kill_at, kill_at + 15 * I);

        // Rejoin, at a random phase.
        let back_at = sim.now + rng.range(0, I);
        sim.run_until(back_at);
        sim.start(leader);
        sim.run_until(back_at + 15 * I);
        m.rejoin_missed = sim.missed_firings(back_at, back_at + 15 * I);
    }

    // The leader restarted at once (a deploy: SIGTERM, then a start a moment later).
    let restart_at = sim.now + rng.range(0, I);
    sim.run_until(restart_at);
    if let Some(&leader) = sim.leaders_at(restart_at).iter().next() {
        sim.kill(leader);
        sim.run_until(restart_at + rng.range(50, 2500));
        sim.start(leader);
        sim.run_until(restart_at + 15 * I);
        m.restart_missed = sim.missed_firings(restart_at, restart_at + 15 * I);
    }

    // A link cut between two random nodes, then healed.
    let (a, b) = (
        rng.range(0, n as u64) as usize,
        rng.range(0, n as u64) as usize,
    );
    if a != b {
        let mut cut = sim.reach.clone();
        cut[a][b] = false;
        if rng.chance(0.5) {
            cut[b][a] = false;
        }
        sim.set_reach(cut);
        sim.run_until(sim.now + 10 * I);
        sim.set_reach(vec![vec![true; n]; n]);
        sim.run_until(sim.now + 10 * I);
    }
    (sim, m)
}

/// How often a poll is slower than its round in [`restarts_with_slow_polls`].
const SLOW_POLL_CHANCE: f64 = 0.10;

/// Restarts under slow polls (issue 43, item 5): a joint boot of 3–5 nodes, then the leader
/// (or, with no leader, the lowest node) restarted at once, eight times, while one poll in ten
/// is slower than its round. The seven-step sequence by which rule 4c counted a vote relayed
/// from a node's previous life is pinned as a table test (`gossip_table.rs`); this search is
/// the guard around it, and around the manager's bound on every poll.
fn restarts_with_slow_polls(seed: u64, how: SlowPolls) -> Timed {
    let mut rng = Rng::new(seed ^ 0x2E57_A275);
    let n = rng.range(3, 6) as usize;
    let mut sim = Timed::new(n, seed).with_slow_polls(how, SLOW_POLL_CHANCE, seed);
    let last_start = joint_boot(&mut sim, &mut rng);
    sim.run_until(last_start + 8 * I);
    for _ in 0..8 {
        let at = sim.now + rng.range(0, I);
        sim.run_until(at);
        let who = sim.leaders_at(at).iter().next().copied().unwrap_or(0);
        sim.kill(who);
        sim.run_until(at + rng.range(50, 2500));
        sim.start(who);
        sim.run_until(sim.now + rng.range(2 * I, 8 * I));
    }
    sim
}

/// A joint boot on a random, possibly asymmetric reachability (bridges and one-hop gaps).
fn bridged_boot(seed: u64) -> Timed {
    let mut rng = Rng::new(seed ^ 0xB1D6E);
    let n = rng.range(3, 8) as usize;
    let mut sim = Timed::new(n, seed);
    let reach = (0..n)
        .map(|i| (0..n).map(|j| i == j || rng.chance(0.6)).collect())
        .collect();
    sim.reach = reach;
    joint_boot(&mut sim, &mut rng);
    sim.run_until(30 * I);
    sim
}

fn replay_hint(seed: u64) -> String {
    format!(
        "replay: CRONSTABLE_SIM_SEED={seed} cargo test -p cronstable-core --test core gossip_timed -- --nocapture"
    )
}

/// The safety check every seed passes.
fn assert_safe(sim: &Timed, seed: u64) {
    let doubles = sim.double_leaders();
    assert!(
        doubles.is_empty(),
        "seed {seed}: two connected leaders at once (ms, a, b): {doubles:?}\n{}",
        replay_hint(seed)
    );
}

/// The seed in `CRONSTABLE_SIM_SEED`, when one is being replayed.
#[expect(
    clippy::disallowed_methods,
    reason = "a test's replay switch; the simulated code never reads the environment"
)]
fn replay_seed() -> Option<u64> {
    std::env::var("CRONSTABLE_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
}

fn replaying() -> bool {
    replay_seed().is_some()
}

/// Seeds to run: the one being replayed (with its trace printed), or `count` seeds.
fn seeds(count: u64) -> (Vec<u64>, bool) {
    match replay_seed() {
        Some(seed) => (vec![seed], true),
        None => ((1..=count).collect(), false),
    }
}

fn percentile(sorted: &[u64], p: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(sorted.len() - 1) * p / 100]
}

fn intervals(ms: u64) -> String {
    format!("{:.2}", ms as f64 / I as f64)
}

/// Today's liveness, asserted so it cannot get worse unnoticed (in ms of simulated time, or
/// firings). The targets: cold start ≤ 2 intervals (met, below), failover median ≤ 1
/// interval (met, 0.84) and at most one firing missed (p95 1, max 2: not met), 0 firings
/// missed at a rejoin (met since
/// leadership is sticky, rule 4a; it was a median of 2 and a maximum of 3 before). The cold
/// start, with the shims' registrations simulated: median 4.13, max 4.39 intervals with
/// rule 4's wait alone; 3.12 and 4.34 with rule 4c; 1.08 and 1.60 with rule 4c and the boot
/// and job-set refreshes (met).
const COLD_START_MAX_MS: u64 = 2 * I;
const FAILOVER_MAX_MS: u64 = I + I / 2;
const FAILOVER_MISSED_MAX: u64 = 2;

#[test]
fn gossip_timed_boot_kill_rejoin_and_a_link_cut_are_safe_and_within_todays_bounds() {
    let (seeds, replay) = seeds(2_000);
    #[expect(
        clippy::disallowed_types,
        reason = "measures the simulator's own speed on the wall clock; simulated time is a number"
    )]
    let started = std::time::Instant::now();
    let (mut cold, mut failover, mut failover_missed, mut rejoin_missed, mut restart_missed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &seed in &seeds {
        let (sim, m) = life(seed);
        if replay {
            println!("{}\n{m:?}", sim.trace.join("\n"));
        }
        assert_safe(&sim, seed);
        let cold_ms = m.cold_start_ms.unwrap_or(u64::MAX);
        assert!(
            cold_ms <= COLD_START_MAX_MS,
            "seed {seed}: cold start {cold_ms} ms\n{}",
            replay_hint(seed)
        );
        let failover_ms = m.failover_ms.unwrap_or(u64::MAX);
        assert!(
            failover_ms <= FAILOVER_MAX_MS && m.failover_missed <= FAILOVER_MISSED_MAX,
            "seed {seed}: failover {failover_ms} ms, {} firings missed\n{}",
            m.failover_missed,
            replay_hint(seed)
        );
        assert!(
            m.restart_missed <= FAILOVER_MISSED_MAX,
            "seed {seed}: a restart of the leader lost {} firings\n{}",
            m.restart_missed,
            replay_hint(seed)
        );
        assert!(
            m.rejoin_missed == 0,
            "seed {seed}: a rejoin lost {} firings\n{}",
            m.rejoin_missed,
            replay_hint(seed)
        );
        cold.push(cold_ms);
        failover.push(failover_ms);
        failover_missed.push(m.failover_missed);
        rejoin_missed.push(m.rejoin_missed);
        restart_missed.push(m.restart_missed);
    }
    let elapsed = started.elapsed();
    for v in [
        &mut cold,
        &mut failover,
        &mut failover_missed,
        &mut rejoin_missed,
        &mut restart_missed,
    ] {
        v.sort_unstable();
    }
    println!(
        "gossip_timed: {} seeds in {:.2} s ({:.0} seeds/s)\n\
         cold start, intervals: median {} p95 {} max {} (target ≤ 2)\n\
         failover, intervals: median {} p95 {} max {} (target median ≤ 1)\n\
         firings missed at a failover: median {} p95 {} max {} (target ≤ 1)\n\
         firings missed at a rejoin: median {} max {} (target 0)\n\
         firings missed when the leader restarts at once: median {} p95 {} max {}",
        seeds.len(),
        elapsed.as_secs_f64(),
        seeds.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        intervals(percentile(&cold, 50)),
        intervals(percentile(&cold, 95)),
        intervals(percentile(&cold, 100)),
        intervals(percentile(&failover, 50)),
        intervals(percentile(&failover, 95)),
        intervals(percentile(&failover, 100)),
        percentile(&failover_missed, 50),
        percentile(&failover_missed, 95),
        percentile(&failover_missed, 100),
        percentile(&rejoin_missed, 50),
        percentile(&rejoin_missed, 100),
        percentile(&restart_missed, 50),
        percentile(&restart_missed, 95),
        percentile(&restart_missed, 100),
    );
}

#[test]
fn gossip_timed_restarts_under_slow_polls_never_elect_two_connected_leaders() {
    let (seeds, replay) = seeds(2_000);
    for &seed in &seeds {
        let sim = restarts_with_slow_polls(seed, SlowPolls::TimedOut);
        if replay {
            println!("{}", sim.trace.join("\n"));
        }
        assert_safe(&sim, seed);
    }
}

/// The search has teeth: folding a slow peer's last answer instead (the manager before issue
/// 43) lets a node begin to lead on reports older than the leader's claim, and the same seeds
/// find it. A node whose poll times out knows it did not hear the peer; one that reuses an
/// answer does not know how old it is.
#[test]
fn gossip_timed_reused_slow_polls_would_elect_two_connected_leaders() {
    if replaying() {
        return;
    }
    let found: Vec<u64> = (1..=2_000)
        .filter(|&seed| {
            !restarts_with_slow_polls(seed, SlowPolls::Reused)
                .double_leaders()
                .is_empty()
        })
        .collect();
    assert!(
        !found.is_empty(),
        "no seed of 2,000 found two leaders with reused polls: the search lost its reach"
    );
}

#[test]
fn gossip_timed_bridges_and_one_hop_gaps_never_elect_two_connected_leaders() {
    let (seeds, replay) = seeds(2_000);
    for &seed in &seeds {
        let sim = bridged_boot(seed);
        if replay {
            println!("{}", sim.trace.join("\n"));
        }
        assert_safe(&sim, seed);
        // Once settled, one leader at most even across a bridge (rule 3's argument).
        let end = sim.leaders_at(sim.now);
        assert!(
            end.len() <= 1,
            "seed {seed}: leaders at the end {end:?}\n{}",
            replay_hint(seed)
        );
    }
}
