//! The lease election's round rules, apart from the store calls: [`Rounds`] takes each round's
//! outcome and the time as arguments and says what the node's view is, which store call the
//! next round makes and when, and when to give the lease up. It does no I/O and reads no clock;
//! `driver.rs` makes the store calls, times them out, and publishes what this returns.
//!
//! The rules (LSE-01..09):
//!
//! - a round that returned a lease (held or not) is store contact: the view is quorate until
//!   round start + duration, with no margin (LSE-05; filesystem LSE-FS-07: only a returned lease
//!   counts);
//! - a round that won or renewed the lease makes this node leader until round start + the
//!   granted time (at most the duration) − [`SAFETY_MARGIN`] (LSE-04, LSE-FS-03); the start is
//!   taken *before* the round, so time spent in the store only shortens leadership;
//! - a [`LeaseError::StandDown`] round, or a follow round that came back holding the lease, is
//!   contact but not leadership;
//! - a failed or timed-out round changes nothing but the error: quorum and leadership lapse at
//!   their deadlines, which `ClusterView::gate_for` checks at decision time;
//! - the holder runs a round every `round_every`, a follower every [`FOLLOWER_ROUND`] at most;
//! - while an executor here is overdue the node stops leading at once (before the release is
//!   sent), gives the lease up, and only follows until the executor keeps up again;
//! - a holder with this node's name that is not this process reads as "another instance", so
//!   no gate takes it for this node (LSE-03).

use std::sync::Arc;

use tokio::time::Instant;

use super::{LeaseError, LeaseObservation, SAFETY_MARGIN};
use crate::cluster::{ClusterView, Election, LeaseGate, ManagedView, RebootRanRecord};
use crate::liveness::Overdue;
use crate::status::{ClusterStatus, LeaseStatus};

/// How often a node that does not hold the lease runs a round (at most; the store's own cadence
/// when that is shorter). One small store read per follower per half second.
pub const FOLLOWER_ROUND: std::time::Duration = std::time::Duration::from_millis(500);

/// How long another holder's record may stay unchanged before this node calls the holder
/// silent: a live holder renews every `round_every`, a renewal round may take up to
/// `round_timeout`, and this node reads every [`FOLLOWER_ROUND`]; only a record unchanged past
/// all three means the renewals stopped (two renew periods and half a second on etcd and
/// filesystem, where the round timeout is the renew period).
pub fn silence_bound(timing: super::LeaseTiming) -> std::time::Duration {
    timing.round_every + timing.round_timeout + FOLLOWER_ROUND
}

/// What the driver remembers between rounds, and the rules each round applies.
pub(super) struct Rounds {
    me: String,
    backend: &'static str,
    view: ManagedView,
    /// The last observation's lease block and holder, kept through failed rounds so `/cluster`
    /// still shows what was last seen.
    block: serde_json::Map<String, serde_json::Value>,
    holder: Option<String>,
    held: bool,
    last_error: Option<String>,
    /// Another holder's record as this node last read it, to tell renewals from silence.
    renewals: Option<Renewals>,
    /// The wall-clock start (Unix ms) of the last round that read the lease.
    last_read_ms: Option<i64>,
    /// [`silence_bound`]: a record unchanged for longer is silent.
    silence: std::time::Duration,
    /// The store's measure of this node's clock against its own, when it takes one.
    clock_skew_ms: Option<i64>,
    /// Whether the store proved it is this node's at its last check, when it has one.
    store_verified: Option<bool>,
    /// The store's cadence and bounds.
    timing: super::LeaseTiming,
    /// An executor here is overdue: this node only follows.
    standing_down: bool,
    /// `cluster.leaderEligible`: a node that may not lead only ever follows.
    eligible: bool,
}

/// Another holder's lease record as this node's reads saw it change.
#[derive(Debug, Clone)]
struct Renewals {
    holder: String,
    mark: i64,
    /// The start of the first read that saw `mark`.
    changed_at: Instant,
    /// The start (Unix ms) of the last read before the change: the holder was alive after it.
    alive_after_ms: Option<i64>,
    /// Whether the latest read saw `mark` still, the silence bound after `changed_at`.
    silent: bool,
    /// The start (Unix ms) of the latest read that saw `mark`.
    seen_ms: i64,
    /// The latest round read no mark (this node stood down, or the record carried none): no
    /// evidence either way, so the gate shows none. Kept rather than forgotten, so the next
    /// read of the same mark is not taken for a renewal nor restarts the silence clock.
    unread: bool,
}

impl Rounds {
    /// Whether this node may hold the lease at all (`cluster.leaderEligible`).
    pub(super) fn with_eligibility(mut self, eligible: bool) -> Self {
        self.eligible = eligible;
        self
    }

    pub(super) fn new(me: String, backend: &'static str, timing: super::LeaseTiming) -> Self {
        Self {
            timing,
            standing_down: false,
            eligible: true,
            me,
            backend,
            renewals: None,
            last_read_ms: None,
            silence: silence_bound(timing),
            clock_skew_ms: None,
            store_verified: None,
            view: ManagedView {
                lease: Some(LeaseGate::default()),
                ..ManagedView::default()
            },
            block: serde_json::Map::new(),
            holder: None,
            held: false,
            last_error: None,
        }
    }

    /// Follows another holder's renewals through one read that started at `start`
    /// (`start_ms` on the wall clock). A change of holder counts as a change: the new holder
    /// wrote the record after the previous read.
    fn track_renewals(&mut self, obs: &LeaseObservation, start: Instant, start_ms: i64) {
        let previous_read = self.last_read_ms.replace(start_ms);
        let (Some(holder), false) = (&obs.holder, obs.held_by_me) else {
            self.renewals = None;
            return;
        };
        let Some(mark) = obs.renewal else {
            match &mut self.renewals {
                Some(r) if r.holder == *holder => r.unread = true,
                _ => self.renewals = None,
            }
            return;
        };
        match &mut self.renewals {
            Some(r) if r.holder == *holder && r.mark == mark => {
                r.unread = false;
                r.seen_ms = start_ms;
                let silent = start.saturating_duration_since(r.changed_at) >= self.silence;
                if silent && !r.silent {
                    tracing::warn!(
                        "cluster: {} lease holder {holder} has not renewed for {:?}: \
                         PreferLeader jobs run on this node until it renews or the lease changes \
                         hands",
                        self.backend,
                        self.silence
                    );
                }
                r.silent = silent;
            }
            Some(r) if r.holder == *holder => {
                if r.silent {
                    tracing::info!(
                        "cluster: {} lease holder {holder} renews again: PreferLeader jobs are \
                         its again",
                        self.backend
                    );
                }
                // It renewed after the last read that saw the old mark, whatever came between.
                let after = Some(r.seen_ms);
                self.track_renewals_from(holder, mark, start, start_ms, after);
            }
            _ => self.track_renewals_from(holder, mark, start, start_ms, previous_read),
        }
    }

    fn track_renewals_from(
        &mut self,
        holder: &str,
        mark: i64,
        start: Instant,
        start_ms: i64,
        alive_after_ms: Option<i64>,
    ) {
        self.renewals = Some(Renewals {
            holder: holder.to_owned(),
            mark,
            changed_at: start,
            alive_after_ms,
            silent: false,
            seen_ms: start_ms,
            unread: false,
        });
    }

    /// The renewals part of the gate, for the holder the gate names.
    fn gate_renewals(&self) -> Option<crate::cluster::HolderRenewals> {
        let r = self.renewals.as_ref().filter(|r| !r.unread)?;
        (!self.held && self.holder.as_deref() == Some(r.holder.as_str())).then_some(
            crate::cluster::HolderRenewals {
                silent: r.silent,
                alive_after_ms: r.alive_after_ms,
            },
        )
    }

    /// Applies one round that started at `start` (`start_ms` on the wall clock) and returned
    /// `result`.
    fn apply(
        &mut self,
        start: Instant,
        start_ms: i64,
        duration: std::time::Duration,
        result: RoundResult,
    ) {
        match result {
            RoundResult::Observed(obs) => {
                self.last_error = None;
                self.track_renewals(&obs, start, start_ms);
                self.contact(start, duration);
                self.held = obs.held_by_me;
                self.holder = obs.holder.clone();
                self.block = obs.block;
                if obs.held_by_me {
                    let granted = obs.valid_for.map_or(duration, |v| v.min(duration));
                    self.view.lead_until = Some(start + granted.saturating_sub(SAFETY_MARGIN));
                    self.view.fence = obs.fence;
                } else {
                    self.view.lead_until = None;
                    self.view.fence = None;
                }
            }
            RoundResult::StandDown(why) => {
                self.last_error = Some(why);
                self.contact(start, duration);
                self.held = false;
                self.view.lead_until = None;
                self.view.fence = None;
                // Whoever holds it, it is not this node this round.
                if self.holder.as_deref() == Some(self.me.as_str()) {
                    self.holder = None;
                }
                // The lease was not read: no evidence of renewals either way. A PreferLeader
                // firing defers to the last holder seen, as before, rather than wait for a
                // confirmation no round will bring while this node stands down.
                if let Some(r) = &mut self.renewals {
                    r.unread = true;
                }
            }
            RoundResult::Failed(why) => {
                // No contact: quorum and leadership lapse at the deadlines already set.
                tracing::warn!("cluster: {} election round failed: {why}", self.backend);
                self.last_error = Some(why);
            }
        }
        let (leader, gate_holder) = self.names();
        self.view.leader = leader;
        self.view.lease = Some(LeaseGate {
            holder: gate_holder,
            renewals: self.gate_renewals(),
        });
    }

    fn contact(&mut self, start: Instant, duration: std::time::Duration) {
        self.view.quorate = true;
        self.view.quorate_until = Some(start + duration);
    }

    /// The `leader` and the PreferLeader holder the gates read. A holder with this node's name
    /// that is not this process (a duplicate nodeName, or this node's previous incarnation) must
    /// not read as "me": the gates compare names, so it is published under a name that cannot
    /// match (LSE-03, the lease is the fence, not the name).
    fn names(&self) -> (Option<String>, Option<String>) {
        match self.holder.as_deref() {
            None => (None, None),
            Some(_) if self.held => (Some(self.me.clone()), Some(self.me.clone())),
            Some(h) if h == self.me => {
                let other = format!("{h} (another instance)");
                (Some(other.clone()), Some(other))
            }
            Some(h) => (Some(h.to_owned()), Some(h.to_owned())),
        }
    }

    /// Stops leading now, before the lease is given up: no RUN is handed out after the release.
    fn stop_leading(&mut self, why: String) {
        self.held = false;
        self.view.lead_until = None;
        self.view.fence = None;
        self.last_error = Some(why);
        let (leader, holder) = self.names();
        self.view.leader = leader;
        self.view.lease = Some(LeaseGate {
            holder,
            renewals: self.gate_renewals(),
        });
    }

    /// The view and status to publish at `now`.
    pub(super) fn publish(&self, now: Instant) -> ClusterView {
        let mut status = LeaseStatus::new(self.backend);
        let quorate = self.view.quorate_at(now);
        status.quorate = quorate;
        status.leader = if quorate { self.holder.clone() } else { None };
        status.is_leader = self.view.leader_at(&self.me, now) == Some(self.me.as_str());
        status.lease = self.block.clone();
        if let Some(skew) = self.clock_skew_ms {
            // This node's clock minus the store's (filesystem): the skew check's measure.
            status
                .lease
                .insert("clockSkewMs".into(), serde_json::Value::from(skew));
        }
        if let Some(verified) = self.store_verified {
            // The filesystem store's marker: false while this is not the node's store.
            status
                .lease
                .insert("storeVerified".into(), serde_json::Value::Bool(verified));
        }
        if !self.eligible {
            status
                .lease
                .insert("leaderEligible".into(), serde_json::Value::Bool(false));
        }
        if let Some(r) = self.gate_renewals() {
            // Whether PreferLeader runs here because the holder stopped renewing.
            status
                .lease
                .insert("holderSilent".into(), serde_json::Value::Bool(r.silent));
        }
        status.last_error = self.last_error.clone();
        let mut view = self.view.clone();
        // Keep the flag in step with its deadline, so readers of the bare flag agree too.
        view.quorate = quorate;
        ClusterView {
            node_name: self.me.clone(),
            election: Election::Managed(view),
            status: Arc::new(ClusterStatus::Lease(Box::new(status))),
        }
    }
}

/// A round's outcome, with a timeout folded into `Failed`.
#[derive(Debug)]
pub(super) enum RoundResult {
    Observed(LeaseObservation),
    StandDown(String),
    Failed(String),
}

/// Whether `view` leads and is quorate at `now`.
pub(super) fn roles(view: &ClusterView, now: Instant) -> (bool, bool) {
    match &view.election {
        Election::Managed(v) => (
            v.leader_at(&view.node_name, now) == Some(view.node_name.as_str()),
            v.quorate_at(now),
        ),
        _ => (false, false),
    }
}

/// Logs leadership and quorum changes at INFO.
pub(super) fn log_transitions(
    before: (bool, bool),
    after: (bool, bool),
    view: &ClusterView,
    backend: &str,
) {
    if before.1 != after.1 {
        if after.1 {
            tracing::info!("cluster: {backend} store reachable: quorate");
        } else {
            tracing::info!(
                "cluster: {backend} store not read within one lease duration: not quorate"
            );
        }
    }
    if before.0 != after.0 {
        if after.0 {
            tracing::info!(
                fence = view.fence().unwrap_or_default(),
                "cluster: {backend} leadership acquired by {}",
                view.node_name
            );
        } else {
            tracing::info!("cluster: {backend} leadership lost by {}", view.node_name);
        }
    }
}

/// Which store call a round makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Call {
    /// Take or renew the lease.
    Campaign,
    /// Only read it (an executor here is overdue).
    Follow,
}

/// One round's outcome as the driver saw it.
#[derive(Debug)]
pub(super) struct Round {
    /// When the round started, on both clocks (before the store call).
    pub start: Instant,
    /// The same moment on the wall clock (Unix ms).
    pub start_ms: i64,
    /// The call it made.
    pub call: Call,
    /// What the store returned; `None` when it did not answer within the round timeout.
    pub returned: Option<Result<LeaseObservation, LeaseError>>,
    /// The store's measure of this node's clock against its own, when it takes one.
    pub clock_skew_ms: Option<i64>,
    /// Whether the store proved it is this node's, when it checks.
    pub store_verified: Option<bool>,
    /// The overdue executor this node stands down for, if any.
    pub behind: Option<String>,
}

impl Rounds {
    /// The overdue signal before a round: on its first sight while this node holds, stop
    /// leading now and return the view to publish before the lease is released (no RUN is
    /// handed out after the release). Logs one line per change.
    pub(super) fn on_overdue(
        &mut self,
        behind: Option<&Overdue>,
        now: Instant,
    ) -> Option<ClusterView> {
        match (behind, self.standing_down) {
            // A node that may not lead holds nothing to give up and never campaigns.
            (Some(_), false) if !self.eligible => self.standing_down = true,
            (Some(o), false) => {
                self.standing_down = true;
                tracing::warn!(
                    "cluster: {}: {o}; this node stops leading and gives its lease up, so a \
                     node whose executor keeps up runs the Leader jobs",
                    self.backend
                );
                if self.held {
                    self.stop_leading(format!("standing down: {o}"));
                    return Some(self.publish(now));
                }
            }
            (None, true) if !self.eligible => self.standing_down = false,
            (None, true) => {
                self.standing_down = false;
                tracing::info!(
                    "cluster: {}: this node's executors keep up again; campaigning for the lease",
                    self.backend
                );
            }
            _ => {}
        }
        None
    }

    /// The call a round starting at `start` makes, and when the next round is due: the
    /// holder renews at the store's cadence; a follower looks more often, so a released lease
    /// is taken within [`FOLLOWER_ROUND`] rather than a whole `round_every` (LSE-08).
    pub(super) fn plan(&self, start: Instant) -> (Call, Instant) {
        let call = if self.standing_down || !self.eligible {
            Call::Follow
        } else {
            Call::Campaign
        };
        let cadence = if self.held {
            self.timing.round_every
        } else {
            self.timing.round_every.min(FOLLOWER_ROUND)
        };
        (call, start + cadence)
    }

    /// Takes in one round.
    pub(super) fn on_round(&mut self, round: Round) {
        let result = match round.returned {
            // A store that took the lease anyway (a follow must not) is not led on.
            Some(Ok(obs)) if round.call == Call::Follow && obs.held_by_me => {
                RoundResult::StandDown(
                    "the store reported the lease held while this node only followed".into(),
                )
            }
            Some(Ok(obs)) => RoundResult::Observed(obs),
            Some(Err(e @ LeaseError::StandDown(_))) => RoundResult::StandDown(e.to_string()),
            Some(Err(LeaseError::Store(why))) => RoundResult::Failed(why),
            None => RoundResult::Failed(format!(
                "no answer within the round timeout of {:?}",
                self.timing.round_timeout
            )),
        };
        self.apply(round.start, round.start_ms, self.timing.duration, result);
        self.clock_skew_ms = round.clock_skew_ms;
        self.store_verified = round.store_verified;
        if let Some(o) = round.behind
            && self.last_error.is_none()
        {
            self.last_error = Some(format!("standing down: {o}"));
        }
    }

    /// Whether this node leads at `now`.
    pub(super) fn leads(&self, now: Instant) -> bool {
        self.view.leader_at(&self.me, now) == Some(self.me.as_str())
    }

    /// Whether the view is quorate at `now`.
    pub(super) fn quorate(&self, now: Instant) -> bool {
        self.view.quorate_at(now)
    }

    /// The `@reboot` records the view carries.
    pub(super) fn set_reboot_ran(&mut self, record: Arc<RebootRanRecord>) {
        self.view.reboot_ran = Some(record);
    }

    /// At shutdown: stop leading and stop counting as quorate, before the release.
    pub(super) fn shut_down(&mut self, now: Instant) -> ClusterView {
        self.stop_leading("the coordinator is shutting down".into());
        self.view.quorate = false;
        self.publish(now)
    }
}

#[cfg(test)]
mod tests;
