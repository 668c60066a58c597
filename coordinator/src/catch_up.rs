//! Bounded catch-up: the task that finds the instants of this node's Leader jobs with
//! `catchUp` that nobody ran, offers them to the job's executor over Watch (`CatchUpRun`), and
//! counts and logs every instant it gives up.
//!
//! Once a [`PASS_EVERY`], and whenever the view or the job set changes, it looks at each such
//! job this node would run now (the gate's own answer for a catch-up at this moment: the
//! holder or leader, or the job's owner under `distribution: spread`) and steps the job's
//! [`cronstable_core::catch_up::Tracker`], which names what to offer and what to give up. The
//! offer is only a wake-up: the executor asks ShouldRun with the catch-up kind, and the gate
//! answers it like an ordinary scheduled Leader firing.
//!
//! What it can know depends on the backend:
//!
//! - **etcd, filesystem**: an instant is "nobody ran it" when it has no claim; one read of the
//!   store's claims per pass covers every owned job. The gate claims a catch-up before it
//!   answers RUN, so an instant runs at most once however offers, ordinary questions and
//!   handovers race. Claims are kept for [`crate::lease::claims::retention`], which covers
//!   every window. When a node comes to own a job it starts looking after the newest instant
//!   anyone claimed before (where the previous owner stopped: a coordinator restarted a moment
//!   ago that wins the lease at once, a cluster whose every coordinator restarted), or, when the
//!   claims hold none, after the moment it first saw the job (an instant from before the job
//!   existed is nobody's miss).
//! - **gossip**, best effort: nothing is claimed. An instant is "nobody ran it" when this
//!   node's ledger has no RUN for it and no peer says it ran it or may have ([`peers`]: each
//!   peer's report names the newest instant it answered RUN for; a peer first heard, restarted
//!   or fallen silent settles everything before the moment that was noticed). An instant is
//!   looked at only once every answering peer has reported after it, over the whole window
//!   but never before this node first knew the job. A leader cut off by a partition that
//!   still runs an instant inside gossip's documented double-run window can meet a catch-up
//!   of that instant on the new leader.
//! - **kubernetes** keeps no claims and exchanges no summaries: the task does nothing there
//!   (registration warns).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use cronstable_core::catch_up::{CatchUpPolicy, GRACE, Tracker};
use cronstable_core::schedule::Schedule;
use cronstable_core::{FiringKind, JobSpec, Verdict};

use crate::clock::Now;
use crate::lease::claims::retention;
use crate::state::{CoordinatorState, Instruction};
use crate::status::ClusterStatus;

mod peers;

/// How often the owner looks for missed instants.
pub const PASS_EVERY: Duration = Duration::from_secs(1);

/// One job's tracker, with what it was built for: a job redefined (another schedule, zone or
/// policy) starts over, as if first seen then.
struct Tracked {
    schedule: Schedule,
    written: (String, Option<String>, CatchUpPolicy),
    tracker: Tracker,
    /// Since when this node owns the job (Unix ms), as the passes saw it; `None` while another
    /// node does.
    owned_since: Option<i64>,
}

/// The claims of `from..=to_ms`, by job; `None` when the store cannot be read (logged once per
/// change of error, and the pass waits for the next).
async fn read_claims(
    store: &crate::lease::records_store::RecordsStore,
    memory: &mut CatchUps,
    from: i64,
    to_ms: i64,
) -> Option<Claimed> {
    match store.claimed_between(from, to_ms).await {
        Ok(found) => {
            if memory.store_error.take().is_some() {
                tracing::info!("catch-up reads the firing claims again");
            }
            let mut by_job = Claimed::new();
            for (job, at) in found {
                by_job.entry(job).or_default().insert(at);
            }
            Some(by_job)
        }
        Err(e) => {
            let said = e.to_string();
            if memory.store_error.as_ref() != Some(&said) {
                tracing::warn!(
                    "catch-up cannot read the firing claims ({said}); missed instants wait \
                     for the next pass"
                );
                memory.store_error = Some(said);
            }
            None
        }
    }
}

/// The claimed instants of one pass's span, by job.
type Claimed = std::collections::BTreeMap<String, BTreeSet<i64>>;

/// The task's memory between passes.
#[derive(Default)]
pub struct CatchUps {
    jobs: HashMap<String, Tracked>,
    /// The last store error, so a failing store is logged once per change, not every pass.
    store_error: Option<String>,
    /// On gossip, which peers answered at the last pass.
    heard: peers::Heard,
}

/// Runs passes until `shutdown` resolves.
pub async fn run(state: CoordinatorState, shutdown: impl std::future::Future<Output = ()>) {
    let mut changes = state.changes();
    let mut memory = CatchUps::default();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => return,
            more = changes.next(PASS_EVERY) => if !more { return },
        }
        pass(&state, &mut memory, Now::read()).await;
    }
}

/// Where one pass learns which instants ran.
enum Knowledge {
    /// A lease store's claims of the pass's span, by job.
    Claims(Claimed),
    /// Gossip: this node's ledger and what its peers said ([`peers`]); every answering peer
    /// has reported after the instants up to `known_until_ms`.
    Peers { known_until_ms: i64 },
}

/// One pass at `now` (see the module docs).
pub async fn pass(state: &CoordinatorState, memory: &mut CatchUps, now: Now) {
    let store = state.records_store();
    let peers = match (&store, state.view.borrow().status.as_ref()) {
        (None, ClusterStatus::Gossip(g)) => Some((g.peers.clone(), g.interval)),
        _ => None,
    };
    if store.is_none() && peers.is_none() {
        memory.jobs.clear();
        return;
    }
    let set = state.registry.current();
    memory
        .jobs
        .retain(|name, _| set.get(name).is_some_and(|j| j.spec.catch_up.is_some()));
    let known_until_ms = peers.map(|(rows, interval)| {
        let jobs = set
            .jobs
            .values()
            .filter(|j| j.spec.catch_up.is_some())
            .map(|j| j.spec.name.as_str());
        memory
            .heard
            .fold(&rows, interval, jobs, &state.ledger, now.unix_ms)
    });
    let lookback = retention(set.jobs.values().map(|j| &j.spec));
    let owned = owned_jobs(state, memory, &set, now);
    if owned.is_empty() {
        return;
    }
    let knowledge = match (store, known_until_ms) {
        (_, Some(known_until_ms)) => Knowledge::Peers { known_until_ms },
        (Some(store), None) => {
            let from = owned
                .iter()
                .filter_map(|(name, _)| memory.jobs.get(name))
                .map(|t| t.tracker.look_from(now.unix_ms, lookback))
                .min()
                .unwrap_or(now.unix_ms);
            match read_claims(&store, memory, from, now.unix_ms).await {
                Some(claimed) => Knowledge::Claims(claimed),
                None => return,
            }
        }
        (None, None) => return,
    };
    for (name, executor) in owned {
        if let Some(tracked) = memory.jobs.get_mut(&name) {
            judge(
                state,
                tracked,
                &knowledge,
                (&name, &executor),
                now,
                lookback,
            );
        }
    }
}

/// The catch-up jobs this node would run now, with their executors; every other tracked job
/// is told that another node owns it.
fn owned_jobs(
    state: &CoordinatorState,
    memory: &mut CatchUps,
    set: &crate::jobs::JobSet,
    now: Now,
) -> Vec<(String, String)> {
    let mut owned = Vec::new();
    for (name, registered) in &set.jobs {
        let Some(tracked) = track(memory, &registered.spec, now.unix_ms) else {
            continue;
        };
        let probe = now.unix_ms - GRACE.as_millis() as i64;
        let owns = state.peek_verdict(name, FiringKind::CatchUp, probe) == Some(Verdict::Run);
        if owns && tracked.owned_since.is_none() {
            tracked.owned_since = Some(now.unix_ms);
        }
        if owns {
            owned.push((name.clone(), registered.executor_id.clone()));
        } else {
            if tracked.owned_since.take().is_some() {
                tracing::info!(job = name, "catch-up: another node owns the job now");
            }
            tracked.tracker.not_owner();
        }
    }
    owned
}

/// One owned job's step: anchors the look when the node just came to own it, then offers
/// what nobody ran and counts what is given up.
fn judge(
    state: &CoordinatorState,
    tracked: &mut Tracked,
    knowledge: &Knowledge,
    (name, executor): (&str, &str),
    now: Now,
    lookback: Duration,
) {
    let (claims, gossip) = match knowledge {
        Knowledge::Claims(claimed) => (claimed.get(name), None),
        Knowledge::Peers { known_until_ms } => (
            None,
            Some((
                state.ledger.ran_here(name),
                state.ledger.settled_elsewhere(name),
                *known_until_ms,
            )),
        ),
    };
    let window = tracked.written.2.window;
    if !tracked.tracker.is_anchored() {
        let since = tracked.owned_since.unwrap_or(now.unix_ms);
        let before = match gossip {
            // Gossip: the whole window, judged pass by pass on what is known then, but
            // nothing from before this node knew the job.
            Some(_) => {
                let floor =
                    (now.unix_ms - window.as_millis() as i64).max(tracked.tracker.known_since_ms());
                Some((floor, floor))
            }
            None => claims_before(claims, since),
        };
        let from = tracked.tracker.anchor(before, now.unix_ms, window);
        tracing::info!(
            job = name,
            looks_back_to_ms = from,
            "catch-up: this node owns the job now and looks for instants nobody ran since"
        );
    }
    let policy = tracked.written.2;
    // An instant this node's executor skipped under concurrencyPolicy Forbid (a run was
    // still going) was not missed: the job said to skip it, so it is settled like a claimed one.
    // Read from the ledger only when an unclaimed instant is in question.
    let forbidden = std::cell::OnceCell::new();
    // On gossip an instant is looked at only once every answering peer has reported after it.
    let step_at = match &gossip {
        Some((_, _, known_until)) => now.unix_ms.min(known_until + GRACE.as_millis() as i64),
        None => now.unix_ms,
    };
    let step = tracked
        .tracker
        .step(&tracked.schedule, &policy, step_at, lookback, |at| {
            claims.is_some_and(|c| c.contains(&at))
                || gossip.as_ref().is_some_and(|(ran, elsewhere, _)| {
                    ran.settled(at) || elsewhere.is_some_and(|e| at <= e)
                })
                || forbidden
                    .get_or_init(|| skipped_by_forbid(state, name))
                    .contains(&at)
        });
    for given in step.given_up {
        let (Some(&first), Some(&last)) = (given.instants.first(), given.instants.last()) else {
            continue;
        };
        tracing::warn!(
            job = name,
            reason = given.reason.as_str(),
            count = given.instants.len(),
            first_scheduled_at_ms = first,
            last_scheduled_at_ms = last,
            "gave up missed instants: nobody ran them and catch-up will not"
        );
        state
            .metrics
            .catch_up_given_up(name, given.reason.as_str(), given.instants.len());
    }
    for at in step.offer {
        let sent = state.send_to(
            executor,
            Instruction::CatchUp {
                job: name.to_owned(),
                scheduled_at_ms: at,
            },
        );
        tracing::info!(
            job = name,
            scheduled_at_ms = at,
            executor,
            sent,
            "offered a missed instant to catch up"
        );
    }
}

/// The instants of `job` this node's executor skipped because a run was still going
/// (`concurrencyPolicy: Forbid`), from the ledger.
fn skipped_by_forbid(state: &CoordinatorState, job: &str) -> BTreeSet<i64> {
    use crate::ledger::Event;
    state
        .ledger
        .records(job)
        .iter()
        .filter(|r| {
            matches!(
                r.event,
                Event::Skipped {
                    reason: Some(cronstable_core::Reason::ConcurrencyPolicy),
                    ..
                }
            )
        })
        .map(|r| r.scheduled_at_ms)
        .collect()
}

/// How far before this node came to own a job a claim must be to count as the previous
/// owner's: the pass that notices the new ownership can come a moment after this node's own
/// first claims (a question answered right after the lease was won), and counting one of those
/// as the anchor would skip the gap before it. A claim of the previous owner inside this margin
/// only makes the look start a little earlier, over instants that are claimed anyway.
const ANCHOR_MARGIN_MS: i64 = 1_000;

/// The oldest and the newest of a job's `claimed` instants before `owner_since` (less
/// [`ANCHOR_MARGIN_MS`]): the job's first run the store remembers, and where the previous owner
/// stopped.
fn claims_before(claimed: Option<&BTreeSet<i64>>, owner_since: i64) -> Option<(i64, i64)> {
    let mut at = claimed?.range(..owner_since - ANCHOR_MARGIN_MS).copied();
    let oldest = at.next()?;
    Some((oldest, at.next_back().unwrap_or(oldest)))
}

/// The tracker of `spec`, new when the job is first seen or was redefined; `None` for a job
/// without catch-up (or whose schedule no longer parses, which registration prevents).
fn track<'m>(memory: &'m mut CatchUps, spec: &JobSpec, now_ms: i64) -> Option<&'m mut Tracked> {
    let policy = spec.catch_up?;
    let written = (spec.schedule.clone(), spec.timezone.clone(), policy);
    let fresh = memory
        .jobs
        .get(&spec.name)
        .is_none_or(|t| t.written != written);
    if fresh {
        let schedule = Schedule::parse(&spec.schedule, spec.timezone.as_deref()).ok()?;
        // A redefinition: the old definition's claims say nothing about the new one's instants.
        let tracker = if memory.jobs.contains_key(&spec.name) {
            Tracker::redefined(now_ms)
        } else {
            Tracker::new(now_ms)
        };
        memory.jobs.insert(
            spec.name.clone(),
            Tracked {
                schedule,
                written,
                tracker,
                owned_since: None,
            },
        );
    }
    memory.jobs.get_mut(&spec.name)
}

#[cfg(test)]
mod tests;
