//! Which deferral answers are worth a ledger record and a log line: the first of a run of
//! identical ones for the same firing.
//!
//! A deferred firing is asked again until it settles (a retry waiting for a quorum, a
//! PreferLeader firing waiting for the lease holder's renewal, a one-shot waiting for the first
//! view): about once a second per executor. Recording every answer would write one ledger
//! record and one INFO line per second per waiting firing, and count each in the decision
//! metrics, for a single event ("this firing waits, because …"). So the first DEFER of a firing
//! is recorded, a repeat with the same reason is not, and any other answer (RUN, SKIP, or a
//! DEFER for a new reason) is recorded and ends the run.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use cronstable_core::{Decision, FiringKind, Verdict};

/// How many waiting firings are remembered; past it the one with the oldest instant is
/// forgotten (at worst its next repeat is recorded once more).
const MAX_WAITING: usize = 4096;

type Key = (String, i64, FiringKind);

/// The last DEFER answered for each waiting firing.
#[derive(Debug, Default)]
pub struct Repeats {
    waiting: Mutex<HashMap<Key, Decision>>,
}

impl Repeats {
    /// Nothing waiting yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes `decision` for the firing of `job` at `scheduled_at_ms` of `kind`; true unless it
    /// repeats the DEFER answered last time for that firing.
    pub fn is_news(
        &self,
        job: &str,
        scheduled_at_ms: i64,
        kind: FiringKind,
        decision: Decision,
    ) -> bool {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (job.to_owned(), scheduled_at_ms, kind);
        if decision.verdict != Verdict::Defer {
            waiting.remove(&key);
            return true;
        }
        if waiting.insert(key, decision) == Some(decision) {
            return false;
        }
        if waiting.len() > MAX_WAITING
            && let Some(oldest) = waiting.keys().min_by_key(|(_, at, _)| *at).cloned()
        {
            waiting.remove(&oldest);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronstable_core::Reason;

    #[test]
    fn only_the_first_of_identical_deferrals_is_news() {
        let r = Repeats::new();
        let wait = Decision::defer(Reason::NotOwner);
        let k = FiringKind::Scheduled;
        assert!(r.is_news("job", 1_000, k, wait));
        assert!(!r.is_news("job", 1_000, k, wait));
        assert!(!r.is_news("job", 1_000, k, wait));
        // Another firing, another kind, another reason: each news.
        assert!(r.is_news("job", 2_000, k, wait));
        assert!(r.is_news("job", 1_000, FiringKind::Retry { attempt: 2 }, wait));
        assert!(r.is_news("job", 1_000, k, Decision::defer(Reason::NoQuorum)));
        // The settling answer is news, and ends the run: a later DEFER is news again.
        assert!(r.is_news("job", 1_000, k, Decision::skip(Reason::NotOwner)));
        assert!(r.is_news("job", 1_000, k, wait));
    }

    #[test]
    fn run_and_skip_are_always_news_and_the_memory_is_bounded() {
        let r = Repeats::new();
        let run = Decision::run(Reason::Leader);
        assert!(r.is_news("job", 1, FiringKind::Scheduled, run));
        assert!(r.is_news("job", 1, FiringKind::Scheduled, run));
        for at in 0..(MAX_WAITING as i64 + 10) {
            r.is_news(
                "job",
                at,
                FiringKind::Scheduled,
                Decision::defer(Reason::NoQuorum),
            );
        }
        assert!(r.waiting.lock().unwrap().len() <= MAX_WAITING);
    }
}
