//! What the coordinator last said about election, for the moments it cannot be reached.
//!
//! Without a `cluster` section a coordinator answers RUN for every job. When such a coordinator
//! restarts (the single-replica sidecar), the shim would otherwise fall back to the "no
//! manager" row and skip every Leader job until it is back. So the shim remembers the election
//! mode the coordinator stated ([`cronstable_core::mode`]), and while that mode is "off" it runs
//! its jobs while the coordinator is away, for a bounded time.
//!
//! The memory must never outlive the mode it describes, or a shim would run Leader jobs on every
//! node beside the elected leader. So it only ever holds what the coordinator said in so many
//! words, never what the shim inferred:
//!
//! - every registration answer, Watch hello, ShouldRun answer and farewell carries a stamp (mode
//!   and generation); a registration answer is always applied (it comes from the process the
//!   shim talks to now), the others in generation order, so a late answer from a coordinator
//!   process that has since stopped cannot undo its farewell;
//! - a coordinator that stops gracefully says "unknown" unless the config it will start with
//!   still has election off, so a node moved into a cluster whose new config fails to start
//!   leaves its shim applying the no-manager row;
//! - an answer with a reason this build does not know clears the memory, and so does a
//!   registration answer without a stamp (an older coordinator);
//! - "off" is trusted for [`MEMORY_TTL`] (30 s) after the coordinator last said it, which
//!   bounds a coordinator that was killed (no farewell) and crash-loops on a new config, and a
//!   config edited after a truthful farewell;
//! - it applies only when the coordinator cannot be reached: an answer that refuses the
//!   question is no reason to assume anything.
//!
//! Pure: the clock is an argument.

use std::time::Duration;

use cronstable_core::mode::{ElectionMode, ElectionStamp};
use cronstable_core::{Gate, Reason};
use tokio::time::Instant;

/// How long "election is off" is trusted after the coordinator last said so. It bounds what
/// nothing can tell the shim: a coordinator killed without a farewell, or a config edited after
/// a truthful farewell into a cluster whose new start fails; for that long a shim may run Leader
/// jobs beside a cluster's leader. A coordinator restart that takes longer (an image pull, a
/// crash-loop back-off) skips Leader jobs from then on: failing closed is the side to err on.
pub const MEMORY_TTL: Duration = Duration::from_secs(30);

/// The remembered election mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ElectionMemory {
    /// The last stamp applied.
    stamp: ElectionStamp,
    /// When the coordinator last said election is off.
    off_said_at: Option<Instant>,
}

impl ElectionMemory {
    /// The remembered mode.
    pub fn mode(&self) -> ElectionMode {
        self.stamp.mode
    }

    /// Whether the coordinator had election off when it last said anything.
    pub fn election_off(&self) -> bool {
        self.stamp.mode == ElectionMode::Off
    }

    /// Takes in a registration answer's stamp at `now`. Always applied: the registration
    /// starts the session with the coordinator process that answers now, whose generation is
    /// lower than the last one only if the clock was set back between two starts. Returns
    /// whether the mode changed.
    pub fn registered(&mut self, stamp: ElectionStamp, now: Instant) -> bool {
        self.apply(stamp, now)
    }

    /// Takes in the stamp of a Watch hello, a farewell or an answer at `now`, unless it is older
    /// than the last one applied. Returns whether the mode changed.
    pub fn heard(&mut self, stamp: ElectionStamp, now: Instant) -> bool {
        if stamp.generation < self.stamp.generation {
            return false;
        }
        self.apply(stamp, now)
    }

    /// Takes in a ShouldRun answer at `now`: its `reason` (`None` when this build does not know
    /// it) and its stamp. An unknown reason comes from a newer coordinator whose answer this
    /// shim cannot fully read: it clears the memory. Returns whether the mode changed.
    pub fn answered(&mut self, reason: Option<Reason>, stamp: ElectionStamp, now: Instant) -> bool {
        if reason.is_none() {
            let cleared = ElectionStamp {
                mode: ElectionMode::Unknown,
                generation: self.stamp.generation.max(stamp.generation),
            };
            return self.apply(cleared, now);
        }
        self.heard(stamp, now)
    }

    fn apply(&mut self, stamp: ElectionStamp, now: Instant) -> bool {
        let changed = stamp.mode != self.stamp.mode;
        self.stamp = stamp;
        self.off_said_at = (stamp.mode == ElectionMode::Off).then_some(now);
        changed
    }

    /// The gate the shim applies by itself at `now` when the coordinator cannot be reached:
    /// election off while the coordinator last said so and that is fresh, else the "no
    /// manager" row.
    pub fn gate(&self, now: Instant) -> Gate {
        let fresh = self
            .off_said_at
            .is_some_and(|t| now.saturating_duration_since(t) <= MEMORY_TTL);
        if self.election_off() && fresh {
            Gate::ElectionOff
        } else {
            Gate::NoManager
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(mode: ElectionMode, generation: u64) -> ElectionStamp {
        ElectionStamp { mode, generation }
    }

    #[test]
    fn election_off_is_remembered_for_a_bounded_time() {
        let t0 = Instant::now();
        let mut m = ElectionMemory::default();
        assert!(m.registered(stamp(ElectionMode::Off, 100), t0));
        assert!(m.election_off());
        assert_eq!(m.gate(t0 + MEMORY_TTL), Gate::ElectionOff);
        assert_eq!(
            m.gate(t0 + MEMORY_TTL + Duration::from_millis(1)),
            Gate::NoManager
        );
        // Said again later: trusted from then on.
        let t1 = t0 + MEMORY_TTL;
        assert!(!m.heard(stamp(ElectionMode::Off, 100), t1));
        assert_eq!(m.gate(t1 + MEMORY_TTL), Gate::ElectionOff);
    }

    #[test]
    fn never_told_on_or_unknown_fails_closed() {
        let t0 = Instant::now();
        assert_eq!(ElectionMemory::default().gate(t0), Gate::NoManager);
        for mode in [ElectionMode::On, ElectionMode::Unknown] {
            let mut m = ElectionMemory::default();
            m.registered(stamp(mode, 100), t0);
            assert_eq!(m.gate(t0), Gate::NoManager, "{mode:?}");
        }
    }

    #[test]
    fn stamps_apply_in_generation_order_and_a_farewell_is_not_undone() {
        let t0 = Instant::now();
        let mut m = ElectionMemory::default();
        m.registered(stamp(ElectionMode::Off, 100), t0);
        // The coordinator stops into a cluster config: its farewell says unknown.
        assert!(m.heard(stamp(ElectionMode::Unknown, 101), t0));
        assert_eq!(m.gate(t0), Gate::NoManager);
        // An answer it gave before the farewell arrives late: ignored.
        assert!(!m.heard(stamp(ElectionMode::Off, 100), t0));
        assert!(!m.answered(Some(Reason::ElectionOff), stamp(ElectionMode::Off, 100), t0));
        assert_eq!(m.gate(t0), Gate::NoManager);
        // A farewell that keeps election off keeps the memory.
        let mut kept = ElectionMemory::default();
        kept.registered(stamp(ElectionMode::Off, 100), t0);
        assert!(!kept.heard(stamp(ElectionMode::Off, 101), t0));
        assert_eq!(kept.gate(t0), Gate::ElectionOff);
    }

    #[test]
    fn a_registration_applies_even_from_an_older_generation() {
        // The clock was set back between two coordinator starts: the new process's stamps
        // are older, and its registration answer still counts.
        let t0 = Instant::now();
        let mut m = ElectionMemory::default();
        m.registered(stamp(ElectionMode::Off, 5_000), t0);
        assert!(m.registered(stamp(ElectionMode::On, 1_000), t0));
        assert_eq!(m.gate(t0), Gate::NoManager);
        // And its later stamps are in order with it.
        assert!(m.heard(stamp(ElectionMode::Off, 1_001), t0));
        assert_eq!(m.gate(t0), Gate::ElectionOff);
    }

    #[test]
    fn every_answer_updates_the_memory_and_an_unknown_reason_clears_it() {
        let t0 = Instant::now();
        let mut m = ElectionMemory::default();
        m.registered(stamp(ElectionMode::Off, 100), t0);
        // A manual start's answer says the mode too.
        assert!(!m.answered(Some(Reason::Manual), stamp(ElectionMode::Off, 100), t0));
        assert_eq!(m.gate(t0), Gate::ElectionOff);
        // A newer reason this build cannot read: assume nothing.
        assert!(m.answered(None, stamp(ElectionMode::Off, 100), t0));
        assert_eq!(m.gate(t0), Gate::NoManager);
        // An older coordinator states no mode: its registration answer clears the memory.
        m.registered(stamp(ElectionMode::Off, 100), t0);
        assert!(m.registered(ElectionStamp::default(), t0));
        assert_eq!(m.gate(t0), Gate::NoManager);
    }
}
