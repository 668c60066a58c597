//! Bounded catch-up: a Leader job's instant that no node ran (its holder died, every shim was
//! down, a deploy) still runs on the job's current owner while it is inside the job's
//! `catchUpWindow`, and every instant given up is counted.
//!
//! Three parts live here, all pure (no I/O, the time is an argument):
//!
//! - the per-job settings, [`CatchUpPolicy`], and the one place that checks them
//!   ([`policy_from`]), shared by the YAML job file, the crontab annotations and a gRPC
//!   registration, so every door refuses the same bad input with the same sentence;
//! - [`Tracker`], the owner's bookkeeping for one job: which instants are due for a look, which
//!   are still unclaimed, which to offer to the executor now, which to give up and why;
//! - the give-up reasons ([`GiveUp`]), which are metric labels.
//!
//! "Unclaimed" is the lease stores' per-firing claim: an instant somebody answered RUN for is
//! claimed, whoever ran it. The tracker never decides that an instant may run; it only offers
//! it. The executor then asks ShouldRun with the catch-up kind, and the gate claims it like any
//! scheduled Leader firing, so an instant is still run at most once however offers and normal
//! questions race.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::duration::format_duration;
use crate::job::ClusterPolicy;
pub use crate::job::{CatchUp, CatchUpPolicy};
use crate::schedule::Schedule;

/// `catchUpLimit` when it is left out.
pub const DEFAULT_LIMIT: u32 = 10;

/// The largest `catchUpLimit`: Kubernetes gives up on a CronJob after more than 100 missed
/// start times, and a catch-up storm larger than that is an outage of its own.
pub const MAX_LIMIT: u32 = 100;

/// How many instants [`shortest_gap`] walks.
const GAP_SAMPLES: usize = 200;

/// The fixed start of [`shortest_gap`]'s walk, so a job file is judged the same on every day.
const GAP_FROM_MS: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// The shortest time between two consecutive instants of `schedule` over its next
/// [`GAP_SAMPLES`] instants from a fixed day; `None` for `@reboot` or a schedule that fires
/// fewer than twice.
pub fn shortest_gap(schedule: &Schedule) -> Option<Duration> {
    let mut at = DateTime::<Utc>::from_timestamp_millis(GAP_FROM_MS)?;
    let mut prev = schedule.next_after(at)?;
    let mut shortest: Option<Duration> = None;
    for _ in 0..GAP_SAMPLES {
        at = prev;
        let Some(next) = schedule.next_after(at) else {
            break;
        };
        let gap = (next - prev).to_std().ok()?;
        shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
        prev = next;
    }
    shortest
}

/// The catch-up keys of one job as written, before they are checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatchUpKeys {
    /// `catchUp`, when given.
    pub mode: Option<CatchUp>,
    /// `catchUpWindow`, when given.
    pub window: Option<Duration>,
    /// `catchUpLimit`, when given.
    pub limit: Option<u32>,
}

impl CatchUpKeys {
    /// True when none of the keys is given.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Checks a job's catch-up keys against the rest of the job and builds its policy: `None` for
/// `catchUp: none` or no keys at all. On failure, every problem as (key, sentence), for the
/// caller to place (file and line, annotation line, registration field).
pub fn policy_from(
    keys: CatchUpKeys,
    schedule: &Schedule,
    policy: ClusterPolicy,
    starting_deadline: Duration,
) -> Result<Option<CatchUpPolicy>, Vec<(&'static str, String)>> {
    let mode = keys.mode.unwrap_or_default();
    if mode == CatchUp::None {
        let mut problems = Vec::new();
        for (key, given) in [
            ("catchUpWindow", keys.window.is_some()),
            ("catchUpLimit", keys.limit.is_some()),
        ] {
            if given {
                problems.push((key, format!("{key} is set but catchUp is none: set catchUp to latest or all, or leave {key} out")));
            }
        }
        return if problems.is_empty() {
            Ok(None)
        } else {
            Err(problems)
        };
    }
    let mut problems = Vec::new();
    if schedule.is_reboot() {
        problems.push((
            "catchUp",
            "an @reboot job has no missed instants to catch up".to_owned(),
        ));
    }
    if policy != ClusterPolicy::Leader {
        problems.push((
            "catchUp",
            format!(
                "only Leader jobs catch up (this one is {policy}): a Leader firing is claimed \
                 in the store, so a missed one runs once; other policies keep no such record"
            ),
        ));
    }
    let limit = keys.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        problems.push((
            "catchUpLimit",
            format!("{limit} is out of range: 1 to {MAX_LIMIT} missed instants per window"),
        ));
    }
    let window = match keys.window {
        None => {
            problems.push((
                "catchUpWindow",
                format!(
                    "required with catchUp {mode}: how long after its instant a missed firing \
                     may still run"
                ),
            ));
            return Err(problems);
        }
        Some(Duration::ZERO) => {
            problems.push(("catchUpWindow", "must be more than 0".to_owned()));
            return Err(problems);
        }
        Some(w) => w,
    };
    if starting_deadline > window {
        problems.push((
            "catchUpWindow",
            format!(
                "{} is shorter than the job's startingDeadline {}: the window must cover every \
                 instant that could still start the ordinary way",
                format_duration(window),
                format_duration(starting_deadline)
            ),
        ));
    }
    if mode == CatchUp::Latest && keys.limit.is_some() {
        problems.push((
            "catchUpLimit",
            "applies to catchUp: all only (catchUp: latest runs one instant)".to_owned(),
        ));
    }
    if let Some(gap) = shortest_gap(schedule)
        && mode == CatchUp::All
        && limit > 0
        && window > gap.saturating_mul(limit)
    {
        problems.push((
            "catchUpWindow",
            format!(
                "{} is longer than the schedule's period ({}) times catchUpLimit {limit}: the \
                 window could hold more missed instants than would ever run; shorten the \
                 window or raise the limit",
                format_duration(window),
                format_duration(gap)
            ),
        ));
    }
    if problems.is_empty() {
        Ok(Some(CatchUpPolicy {
            mode,
            window,
            limit,
        }))
    } else {
        Err(problems)
    }
}

/// Why a missed instant was given up: the label of
/// `cronstable_catch_up_given_up_total{job,reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GiveUp {
    /// It fell out of `catchUpWindow` before it could run (found too late, or offered and
    /// never asked about: no executor was watching).
    Window,
    /// `catchUp: latest`, and a newer missed instant runs instead.
    Superseded,
    /// `catchUp: all`, and more instants were missed inside the window than `catchUpLimit`.
    StormLimit,
}

impl GiveUp {
    /// Every reason, for metrics that list each from the start.
    pub const ALL: [GiveUp; 3] = [Self::Window, Self::Superseded, Self::StormLimit];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Window => "window",
            Self::Superseded => "superseded",
            Self::StormLimit => "storm_limit",
        }
    }
}

/// The instants one pass gave up for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenUp {
    /// Why.
    pub reason: GiveUp,
    /// The instants (Unix ms), oldest first.
    pub instants: Vec<i64>,
}

/// What one pass of a [`Tracker`] asks its caller to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// Instants to offer the executor now, oldest first.
    pub offer: Vec<i64>,
    /// Instants given up, by reason.
    pub given_up: Vec<GivenUp>,
}

/// How recent an instant is left to the ordinary path: a firing is asked about within
/// milliseconds of its instant, so one unclaimed after this long was missed. A question slower
/// than that (a claim write that DEFERs) still cannot run twice: both meet on the claim.
pub const GRACE: Duration = Duration::from_secs(2);

/// How long an offered instant that is still unclaimed waits before it is offered again (the
/// executor was not watching, or its question failed).
pub const REOFFER: Duration = Duration::from_secs(5);

/// The most instants one pass offers for one job; the rest wait for the next pass, so a burst
/// never fills an executor's instruction stream (64 deep), which would drop it.
pub const MAX_OFFERS_PER_PASS: usize = 16;

/// The most instants one pass looks at for one job: a bound on the work of a first pass after
/// a long time without ownership (an hour of a per-second job is 3,600).
pub const MAX_EXAMINED: usize = 100_000;

/// One job's catch-up bookkeeping on one node: while it owns the job, what it has looked at
/// (everything up to the horizon) and the missed instants still inside the window.
///
/// Where the looking starts is the anchor, set each time the node comes to own the job: the
/// newest instant anyone claimed before then, which is where the previous owner stopped (so a
/// coordinator restarted a moment ago, which wins the lease at once, still finds the instant
/// its predecessor process let pass); with no claim in the claims' retention, the moment this
/// node first knew the job (an instant from before a job existed is nobody's miss).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracker {
    /// When this node first knew the job (Unix ms).
    known_since_ms: i64,
    /// No instant at or before this is ever looked at: the job's definition changed then, and
    /// the claims of the old one say nothing about the new one's instants.
    floor_ms: Option<i64>,
    /// Every instant at or before this was looked at (Unix ms); `None` while another node
    /// owns the job (the next ownership anchors it again).
    horizon_ms: Option<i64>,
    /// Missed instants, each with when it was last offered.
    pending: BTreeMap<i64, Option<i64>>,
}

impl Tracker {
    /// A tracker for a job this node first knew at `known_since_ms`.
    pub fn new(known_since_ms: i64) -> Self {
        Self {
            known_since_ms,
            floor_ms: None,
            horizon_ms: None,
            pending: BTreeMap::new(),
        }
    }

    /// A tracker for a job whose definition (schedule, zone or catch-up) changed at `now_ms`:
    /// nothing before the change is looked at.
    pub fn redefined(now_ms: i64) -> Self {
        Self {
            floor_ms: Some(now_ms),
            ..Self::new(now_ms)
        }
    }

    /// When this node first knew the job (Unix ms).
    pub fn known_since_ms(&self) -> i64 {
        self.known_since_ms
    }

    /// The instants still waiting to run (for `/jobs` and tests).
    pub fn pending(&self) -> impl Iterator<Item = i64> + '_ {
        self.pending.keys().copied()
    }

    /// Whether the looking has a start since this node came to own the job.
    pub fn is_anchored(&self) -> bool {
        self.horizon_ms.is_some()
    }

    /// This node owns the job from `now_ms`. `claimed` is the oldest and the newest instant
    /// anyone claimed before then (within the claims' retention). Look at the instants after the
    /// newest (where the previous owner stopped) and at least over the whole window (that owner
    /// may have died with older missed instants still pending), but never before the oldest
    /// claim (the job's first run here, as far as the store remembers: an instant from before a
    /// job existed is nobody's miss); with no claim, after the moment this node first knew the
    /// job. Never before a redefinition. Returns where the looking starts.
    pub fn anchor(&mut self, claimed: Option<(i64, i64)>, now_ms: i64, window: Duration) -> i64 {
        let from = match claimed {
            Some((oldest, newest)) => newest.min(now_ms - ms(window)).max(oldest),
            None => self.known_since_ms,
        };
        let from = self.floor_ms.map_or(from, |floor| from.max(floor));
        self.horizon_ms = Some(from);
        self.pending.clear();
        from
    }

    /// The oldest instant the next [`Self::step`] at `now_ms` may ask about, for the caller's
    /// one read of the claims (an unanchored tracker's anchor is looked for as far back as the
    /// claims are kept).
    pub fn look_from(&self, now_ms: i64, lookback: Duration) -> i64 {
        let oldest = now_ms - ms(lookback);
        let Some(horizon) = self.horizon_ms else {
            return oldest;
        };
        let from = horizon.max(oldest);
        self.pending.keys().next().map_or(from, |&t| t.min(from))
    }

    /// Another node owns the job now: what this node had pending is the new owner's to find
    /// (unclaimed, it looks unrun to them too, inside the window its anchor always covers) and
    /// to count.
    pub fn not_owner(&mut self) {
        self.pending.clear();
        self.horizon_ms = None;
    }

    /// One pass at `now_ms` while this node owns the job: look at the instants since the
    /// horizon (anchored at the first pass, [`Self::anchor`]; no further back than `lookback`,
    /// the claims' retention: older claims are pruned, so an older instant cannot be judged),
    /// drop the claimed ones, give up what left the window or exceeds the policy, and name what
    /// to offer.
    pub fn step(
        &mut self,
        schedule: &Schedule,
        policy: &CatchUpPolicy,
        now_ms: i64,
        lookback: Duration,
        claimed: impl Fn(i64) -> bool,
    ) -> Pass {
        let upper = now_ms - ms(GRACE);
        let lower = now_ms - ms(policy.window);
        let horizon = match self.horizon_ms {
            Some(h) => h,
            None => self.anchor(None, now_ms, policy.window),
        };
        let from = horizon.max(now_ms - ms(lookback));
        if upper > from {
            self.examine(schedule, from, upper);
            self.horizon_ms = Some(upper);
        }
        self.pending.retain(|&t, _| !claimed(t));
        let mut pass = Pass::default();
        let old: Vec<i64> = self.pending.range(..lower).map(|(&t, _)| t).collect();
        self.give_up(&mut pass, GiveUp::Window, old);
        // An offer already made is not withdrawn (its run may be starting): only instants not
        // offered yet are superseded or over the limit.
        let unoffered = self
            .pending
            .iter()
            .filter(|(_, offered)| offered.is_none())
            .map(|(&t, _)| t);
        let (reason, dropped): (GiveUp, Vec<i64>) = match policy.mode {
            CatchUp::Latest => {
                let newest = self.pending.keys().next_back().copied();
                let older = unoffered.filter(|&t| Some(t) != newest).collect();
                (GiveUp::Superseded, older)
            }
            _ => {
                let extra = self.pending.len().saturating_sub(policy.limit as usize);
                (GiveUp::StormLimit, unoffered.take(extra).collect())
            }
        };
        self.give_up(&mut pass, reason, dropped);
        for (&t, offered) in self.pending.iter_mut() {
            if pass.offer.len() == MAX_OFFERS_PER_PASS {
                break;
            }
            if offered.is_none_or(|at| now_ms - at >= ms(REOFFER)) {
                *offered = Some(now_ms);
                pass.offer.push(t);
            }
        }
        pass
    }

    /// Adds the instants in `(from, upper]` as pending (at most [`MAX_EXAMINED`], the newest).
    fn examine(&mut self, schedule: &Schedule, from: i64, upper: i64) {
        let Some(mut at) = DateTime::<Utc>::from_timestamp_millis(from) else {
            return;
        };
        let mut found = Vec::new();
        while let Some(next) = schedule.next_after(at) {
            let t = next.timestamp_millis();
            if t > upper {
                break;
            }
            found.push(t);
            at = next;
        }
        let skip = found.len().saturating_sub(MAX_EXAMINED);
        for t in found.into_iter().skip(skip) {
            self.pending.entry(t).or_insert(None);
        }
    }

    fn give_up(&mut self, pass: &mut Pass, reason: GiveUp, instants: Vec<i64>) {
        if instants.is_empty() {
            return;
        }
        for t in &instants {
            self.pending.remove(t);
        }
        pass.given_up.push(GivenUp { reason, instants });
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
