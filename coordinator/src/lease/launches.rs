//! The claimed firings this holder answered RUN for and whose launch it has not heard of yet.
//!
//! A claim makes an instant count as run, by every node, from the moment it is written. But an
//! executor asks a moment before the instant and launches on it, so between the answer and the
//! launch there is a short span in which the executor can stop (its node is being restarted,
//! SIGTERM reached the shim) with the RUN in hand and nothing started. Left alone, that
//! instant is claimed and runs nowhere: not on a successor (the claim answers it SKIP
//! `already_ran`) and not by catch-up (which looks for unclaimed instants). So the executor
//! says so (a `not_launched` skip), and the holder gives the claim back under the fence it made
//! it with; the instant is then as unrun as it is, and a successor or catch-up may run it.
//!
//! This table is what makes that possible and bounded:
//!
//! - [`Launches::answered`] keeps each claim answered RUN until its executor reports the run
//!   started or skipped ([`Launches::reported`]), at most [`REMEMBERED`] after it was due and
//!   at most [`MAX_WAITING`] at once: the claim to give back is the one this node made, with
//!   its fence, never whichever claim the store holds now.
//! - At a graceful stop the coordinator waits, at most [`STOP_WAIT`], for the launches that are
//!   due about now ([`Launches::settle`]) before it stops serving and gives up its lease: the
//!   node's shim, stopped at the same moment, can then still hand its unlaunched RUN back. A
//!   client that never reports a start costs a stop that wait, only when it was answered RUN
//!   within the last [`DUE_WITHIN`].
//!
//! What stays open: an executor killed outright (SIGKILL, a crash) in that span says nothing,
//! and its instant stays claimed and unrun. Nothing can tell it from an executor that launched
//! and then died, and a second run is the worse failure.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::Notify;

use super::claims::FiringClaim;

/// How long after its due time a RUN answer's claim is remembered for giving back.
pub const REMEMBERED: Duration = Duration::from_secs(60);

/// How many RUN answers wait for their launch at most; the oldest is forgotten first.
pub const MAX_WAITING: usize = 4096;

/// A launch counts as due about now from its answer until this long after its instant (or
/// its answer, if that came later): an executor launches on the instant and reports at once.
pub const DUE_WITHIN: Duration = Duration::from_secs(1);

/// The longest a graceful stop waits for the launches due about now.
pub const STOP_WAIT: Duration = Duration::from_secs(3);

#[derive(Debug)]
struct Waiting {
    claim: FiringClaim,
    /// When the launch is due (Unix ms): the instant, or the answer if that came later.
    due_ms: i64,
}

/// RUN answers of claimed firings waiting for their launch (see the module docs). Cheap to
/// share behind an `Arc`.
#[derive(Debug, Default)]
pub struct Launches {
    waiting: std::sync::Mutex<BTreeMap<(String, i64), Waiting>>,
    changed: Notify,
}

impl Launches {
    fn table(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, i64), Waiting>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `claim` was answered RUN at `now_ms`: keep it until its launch is reported.
    pub fn answered(&self, claim: FiringClaim, now_ms: i64) {
        let mut table = self.table();
        let forget_before = now_ms - REMEMBERED.as_millis() as i64;
        table.retain(|_, w| w.due_ms >= forget_before);
        while table.len() >= MAX_WAITING {
            let oldest = table
                .iter()
                .min_by_key(|(_, w)| w.due_ms)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => table.remove(&k),
                None => break,
            };
        }
        let due_ms = claim.scheduled_at_ms.max(now_ms);
        let key = (claim.job.clone(), claim.scheduled_at_ms);
        table.insert(key, Waiting { claim, due_ms });
    }

    /// The executor reported the firing of `job` at `at_ms` (started, finished or skipped):
    /// it waits no more. Returns the claim this node made for it, if it still remembers one.
    pub fn reported(&self, job: &str, at_ms: i64) -> Option<FiringClaim> {
        let gone = self.table().remove(&(job.to_owned(), at_ms));
        if gone.is_some() {
            self.changed.notify_waiters();
        }
        gone.map(|w| w.claim)
    }

    /// How many launches are due about `now_ms` and not reported (see [`DUE_WITHIN`]).
    pub fn due_now(&self, now_ms: i64) -> usize {
        let from = now_ms - DUE_WITHIN.as_millis() as i64;
        self.table().values().filter(|w| w.due_ms >= from).count()
    }

    /// Waits until no launch is due about now, or `bound` passed; returns how many still were.
    pub async fn settle(&self, bound: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the count is read, so a report in between is not missed.
            changed.as_mut().enable();
            let left = self.due_now(crate::clock::now_ms());
            if left == 0 {
                return 0;
            }
            // A due launch stops counting DUE_WITHIN after it was due: look again by then.
            let recheck = tokio::time::Instant::now() + Duration::from_millis(100);
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(recheck.min(deadline)) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return self.due_now(crate::clock::now_ms());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(job: &str, at: i64) -> FiringClaim {
        FiringClaim {
            job: job.into(),
            scheduled_at_ms: at,
            node: "a".into(),
            fence: "7".into(),
            claimed_at_ms: at - 20,
            catch_up: false,
        }
    }

    #[test]
    fn a_reported_launch_hands_back_the_claim_once() {
        let l = Launches::default();
        l.answered(claim("report", 60_000), 59_980);
        assert_eq!(l.due_now(59_990), 1);
        assert_eq!(l.reported("report", 60_000), Some(claim("report", 60_000)));
        assert_eq!(l.reported("report", 60_000), None);
        assert_eq!(l.due_now(59_990), 0);
    }

    #[test]
    fn a_launch_is_due_from_its_answer_until_a_moment_after_its_instant() {
        let l = Launches::default();
        l.answered(claim("report", 60_000), 59_980);
        assert_eq!(l.due_now(59_000), 1);
        assert_eq!(l.due_now(61_000), 1);
        assert_eq!(l.due_now(61_001), 0);
        // An answer after the instant (a late question) is due from the answer.
        l.answered(claim("late", 60_000), 65_000);
        assert_eq!(l.due_now(66_000), 1);
    }

    #[test]
    fn old_and_surplus_answers_are_forgotten() {
        let l = Launches::default();
        l.answered(claim("old", 0), 0);
        l.answered(claim("new", 120_000), 120_000);
        assert_eq!(l.reported("old", 0), None, "forgotten after REMEMBERED");
        for at in 0..MAX_WAITING as i64 {
            l.answered(claim("many", 200_000 + at), 200_000);
        }
        assert_eq!(l.table().len(), MAX_WAITING);
        assert_eq!(l.reported("new", 120_000), None, "the oldest went first");
    }

    #[tokio::test(start_paused = true)]
    async fn settle_returns_when_the_last_due_launch_is_reported_or_at_its_bound() {
        let l = std::sync::Arc::new(Launches::default());
        assert_eq!(l.settle(STOP_WAIT).await, 0, "nothing due: no wait");
        let now = crate::clock::now_ms();
        l.answered(claim("report", now + 60_000), now);
        let waiter = tokio::spawn({
            let l = l.clone();
            async move { l.settle(STOP_WAIT).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        l.reported("report", now + 60_000);
        assert_eq!(waiter.await.unwrap(), 0);
        l.answered(claim("silent", now + 60_000), now);
        let started = tokio::time::Instant::now();
        assert_eq!(l.settle(STOP_WAIT).await, 1);
        assert!(started.elapsed() >= STOP_WAIT);
    }
}
