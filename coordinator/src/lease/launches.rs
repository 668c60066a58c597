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
//! - [`Launches::answered`] keeps each claim answered RUN, with every executor it was answered
//!   to (a re-ask is answered RUN again), at most [`REMEMBERED`] after it was due and at most
//!   [`MAX_WAITING`] at once: the claim to give back is the one this node made, with its
//!   fence, never whichever claim the store holds now. [`Launches::reported`] gives it back
//!   only when every executor answered RUN from it reported `not_launched` and no run of it
//!   started; a start, or an executor's own skip, settles it for good.
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
    /// The executors answered RUN from this claim whose launch was not reported yet, once per
    /// answer (a re-ask is answered RUN again).
    askers: Vec<String>,
    /// A run of it started, or an executor settled it otherwise (a skip of its own, such as
    /// Forbid's): the claim is never given back.
    settled: bool,
}

/// What an executor reported of a claimed firing, as far as giving its claim back goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// It started a run (or finished one).
    Started,
    /// It launched nothing and said so (`not_launched`).
    NotLaunched,
    /// It skipped the firing for a reason of its own: it is settled, not given back.
    Skipped,
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

    /// `claim` was answered RUN to `asker` at `now_ms`: keep it until its launch is reported.
    pub fn answered(&self, claim: FiringClaim, asker: &str, now_ms: i64) {
        let mut table = self.table();
        let forget_before = now_ms - REMEMBERED.as_millis() as i64;
        table.retain(|_, w| w.due_ms >= forget_before);
        let key = (claim.job.clone(), claim.scheduled_at_ms);
        if !table.contains_key(&key) && table.len() >= MAX_WAITING {
            let oldest = table
                .iter()
                .min_by_key(|(_, w)| w.due_ms)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                table.remove(&k);
            }
        }
        let due_ms = claim.scheduled_at_ms.max(now_ms);
        let entry = table.entry(key).or_insert_with(|| Waiting {
            claim: claim.clone(),
            due_ms,
            askers: Vec::new(),
            settled: false,
        });
        if entry.claim.fence != claim.fence || entry.claim.node != claim.node {
            // Another term's claim of the same instant cannot be won again: a stale entry.
            *entry = Waiting {
                claim,
                due_ms,
                askers: Vec::new(),
                settled: false,
            };
        }
        entry.askers.push(asker.to_owned());
    }

    /// `reporter` reported the firing of `job` at `at_ms`. Returns the claim to give back when
    /// this was a `not_launched` from an executor answered RUN from it, and every executor
    /// answered RUN from it said the same, and no run of it started: only then did nothing run.
    pub fn reported(
        &self,
        job: &str,
        at_ms: i64,
        reporter: &str,
        report: Report,
    ) -> Option<FiringClaim> {
        let key = (job.to_owned(), at_ms);
        let mut table = self.table();
        let entry = table.get_mut(&key)?;
        let asked = entry.askers.iter().position(|a| a == reporter);
        if let Some(i) = asked {
            entry.askers.swap_remove(i);
        }
        entry.settled |= report != Report::NotLaunched;
        let give_back = report == Report::NotLaunched
            && asked.is_some()
            && !entry.settled
            && entry.askers.is_empty();
        let claim = give_back.then(|| entry.claim.clone());
        if give_back {
            table.remove(&key);
        }
        drop(table);
        self.changed.notify_waiters();
        claim
    }

    /// How many launches are due about `now_ms` and not reported (see [`DUE_WITHIN`]).
    pub fn due_now(&self, now_ms: i64) -> usize {
        let from = now_ms - DUE_WITHIN.as_millis() as i64;
        self.table()
            .values()
            .filter(|w| !w.settled && !w.askers.is_empty() && w.due_ms >= from)
            .count()
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
    fn a_not_launched_report_hands_back_the_claim_once() {
        let l = Launches::default();
        l.answered(claim("report", 60_000), "shim", 59_980);
        assert_eq!(l.due_now(59_990), 1);
        assert_eq!(
            l.reported("report", 60_000, "shim", Report::NotLaunched),
            Some(claim("report", 60_000))
        );
        assert_eq!(
            l.reported("report", 60_000, "shim", Report::NotLaunched),
            None
        );
        assert_eq!(l.due_now(59_990), 0);
    }

    #[test]
    fn a_claim_is_not_given_back_while_any_run_of_it_may_have_started() {
        let l = Launches::default();
        // A started run settles it for good: a later not_launched of a re-ask gives nothing back.
        l.answered(claim("a", 60_000), "shim", 59_980);
        assert_eq!(l.reported("a", 60_000, "shim", Report::Started), None);
        l.answered(claim("a", 60_000), "gate", 60_100);
        assert_eq!(l.reported("a", 60_000, "gate", Report::NotLaunched), None);
        // Two askers: only when both handed it back.
        l.answered(claim("b", 60_000), "shim", 59_980);
        l.answered(claim("b", 60_000), "gate", 59_990);
        assert_eq!(l.reported("b", 60_000, "gate", Report::NotLaunched), None);
        assert_eq!(l.due_now(59_990), 1, "the shim's launch is still due");
        assert_eq!(
            l.reported("b", 60_000, "shim", Report::NotLaunched),
            Some(claim("b", 60_000))
        );
        // A reporter that was never answered RUN from the claim gives nothing back.
        l.answered(claim("c", 60_000), "shim", 59_980);
        assert_eq!(
            l.reported("c", 60_000, "stranger", Report::NotLaunched),
            None
        );
        // An executor's own skip (Forbid) settles it.
        assert_eq!(l.reported("c", 60_000, "shim", Report::Skipped), None);
        assert_eq!(l.reported("c", 60_000, "shim", Report::NotLaunched), None);
        assert_eq!(l.due_now(59_990), 0);
    }

    #[test]
    fn a_launch_is_due_from_its_answer_until_a_moment_after_its_instant() {
        let l = Launches::default();
        l.answered(claim("report", 60_000), "shim", 59_980);
        assert_eq!(l.due_now(59_000), 1);
        assert_eq!(l.due_now(61_000), 1);
        assert_eq!(l.due_now(61_001), 0);
        // An answer after the instant (a late question) is due from the answer.
        l.answered(claim("late", 60_000), "shim", 65_000);
        assert_eq!(l.due_now(66_000), 1);
    }

    #[test]
    fn old_and_surplus_answers_are_forgotten() {
        let l = Launches::default();
        l.answered(claim("old", 0), "shim", 0);
        l.answered(claim("new", 120_000), "shim", 120_000);
        assert_eq!(
            l.reported("old", 0, "shim", Report::NotLaunched),
            None,
            "forgotten after REMEMBERED"
        );
        for at in 0..MAX_WAITING as i64 {
            l.answered(claim("many", 200_000 + at), "shim", 200_000);
        }
        assert_eq!(l.table().len(), MAX_WAITING);
        assert_eq!(
            l.reported("new", 120_000, "shim", Report::NotLaunched),
            None,
            "the oldest went first"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn settle_returns_when_the_last_due_launch_is_reported_or_at_its_bound() {
        let l = std::sync::Arc::new(Launches::default());
        assert_eq!(l.settle(STOP_WAIT).await, 0, "nothing due: no wait");
        let now = crate::clock::now_ms();
        l.answered(claim("report", now + 60_000), "shim", now);
        let waiter = tokio::spawn({
            let l = l.clone();
            async move { l.settle(STOP_WAIT).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        l.reported("report", now + 60_000, "shim", Report::Started);
        assert_eq!(waiter.await.unwrap(), 0);
        l.answered(claim("silent", now + 60_000), "shim", now);
        let started = tokio::time::Instant::now();
        assert_eq!(l.settle(STOP_WAIT).await, 1);
        assert!(started.elapsed() >= STOP_WAIT);
    }
}
