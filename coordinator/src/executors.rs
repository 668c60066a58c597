//! Which process is each executor on this node: one live instance per executor id.
//!
//! Jobs are registered under an executor id, and every RUN answer for them is launched by
//! whoever asked. Two processes that share an executor id (two shims started on one job file,
//! a restarted shim whose old self lingers) would each ask, each hear RUN and each launch the
//! firing: a Leader job would run twice on the leader. So each executor id is held by one
//! process instance (its random `instance_id`, new at every process start) and a second
//! instance is refused, at registration and at every question, naming the holder.
//!
//! The holder is gone, and another instance may take over, when its Watch stream has closed
//! (a shim keeps one open for its whole life, so its death is seen at once), or, for a holder
//! that never opened a Watch stream, when it has been silent past [`SILENCE_BOUND`].
//!
//! The table is pure: time is an argument, and whether a Watch stream is open is asked through
//! a closure, so the rule is tested without a server.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How long a holder that never opened a Watch stream may stay silent before another instance
/// of its executor may take over.
pub const SILENCE_BOUND: Duration = Duration::from_secs(30);

/// The jobs registered under a `config:` executor id are the coordinator's own `jobs:` file,
/// run by crond through `cronstable-gate` under the gate's executor id.
pub fn is_config_executor(executor_id: &str) -> bool {
    executor_id.starts_with("config:")
}

/// One process instance of an executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Random per process start; empty when the client sends none.
    pub id: String,
    /// The process id it reported (0 when unknown).
    pub pid: u32,
}

impl std::fmt::Display for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = if self.id.is_empty() {
            "(no instance id)"
        } else {
            &self.id
        };
        if self.pid == 0 {
            write!(f, "instance {id}")
        } else {
            write!(f, "instance {id} (pid {})", self.pid)
        }
    }
}

#[derive(Debug, Clone)]
struct Holder {
    instance: Instance,
    last_seen: Instant,
    /// Whether it ever opened a Watch stream: from then on its liveness is that stream's.
    watched: bool,
}

/// Why a holder counts as alive, for the refusal message.
fn alive_because(holder: &Holder, watching: bool, now: Instant) -> Option<String> {
    if holder.watched {
        watching.then(|| "whose Watch stream is open".to_owned())
    } else {
        let silent = now.saturating_duration_since(holder.last_seen);
        (silent < SILENCE_BOUND).then(|| format!("last heard from {} ms ago", silent.as_millis()))
    }
}

/// Another live instance holds the executor id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "executor {executor:?} is already running on this node as {holder}, {why}: a second process \
     with the same executor id would run every firing twice, so {asker} runs nothing. Stop the \
     other process, or give this one its own executor id and job names; this one takes over when \
     the other is gone (its Watch stream closes, or it is silent for {bound} s without one)",
    bound = SILENCE_BOUND.as_secs()
)]
pub struct HeldByOther {
    /// The executor id.
    pub executor: String,
    /// The live instance that holds it.
    pub holder: Instance,
    /// Why it counts as live.
    pub why: String,
    /// The refused instance.
    pub asker: Instance,
}

/// A registration that replaced a holder that was gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    /// The instance that held the executor id before.
    pub previous: Instance,
}

/// The executor-id → live-instance table of this node.
#[derive(Debug, Default)]
pub struct Executors {
    table: Mutex<BTreeMap<String, Holder>>,
}

impl Executors {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Claims `executor` for `asker` and, under the same lock, runs `register`; the claim is
    /// kept only if `register` succeeds, so a refused registration changes nothing.
    /// `watching(executor)` tells whether the executor's Watch stream is open.
    pub fn claim<T, E>(
        &self,
        executor: &str,
        asker: Instance,
        now: Instant,
        watching: impl Fn(&str) -> bool,
        register: impl FnOnce() -> Result<T, E>,
    ) -> Result<Result<(T, Option<Takeover>), E>, HeldByOther> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let previous = match table.get(executor) {
            Some(h) if h.instance.id == asker.id => None,
            Some(h) => match alive_because(h, watching(executor), now) {
                Some(why) => {
                    return Err(HeldByOther {
                        executor: executor.to_owned(),
                        holder: h.instance.clone(),
                        why,
                        asker,
                    });
                }
                None => Some(h.instance.clone()),
            },
            None => None,
        };
        let value = match register() {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        // Every registration starts a new session: alive by being heard from until it opens
        // its Watch stream again, so a shim reconnecting (registration, then a new stream) is
        // not taken over in between.
        table.insert(
            executor.to_owned(),
            Holder {
                instance: asker,
                last_seen: now,
                watched: false,
            },
        );
        Ok(Ok((value, previous.map(|previous| Takeover { previous }))))
    }

    /// Checks that `instance_id` is `executor`'s holder (or that nobody holds it), and marks it
    /// heard from. For questions and Watch streams, which never claim.
    pub fn check(
        &self,
        executor: &str,
        instance_id: &str,
        now: Instant,
    ) -> Result<(), HeldByOther> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        match table.get_mut(executor) {
            None => Ok(()),
            Some(h) if h.instance.id == instance_id => {
                h.last_seen = now;
                Ok(())
            }
            Some(h) => Err(HeldByOther {
                executor: executor.to_owned(),
                holder: h.instance.clone(),
                why: "which registered its jobs".to_owned(),
                asker: Instance {
                    id: instance_id.to_owned(),
                    pid: 0,
                },
            }),
        }
    }

    /// Records that the holder opened its Watch stream (checked with [`Self::check`] first):
    /// from now on it is alive exactly while that stream is open.
    pub fn watch_opened(&self, executor: &str, instance_id: &str) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = table.get_mut(executor)
            && h.instance.id == instance_id
        {
            h.watched = true;
        }
    }

    /// Whether `executor`'s holder opened a Watch stream since it registered: a long-lived
    /// executor, whose pace [`crate::liveness`] judges.
    pub fn watched(&self, executor: &str) -> bool {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table.get(executor).is_some_and(|h| h.watched)
    }

    /// The instance that holds `executor`, if any.
    pub fn holder(&self, executor: &str) -> Option<Instance> {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table.get(executor).map(|h| h.instance.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(id: &str, pid: u32) -> Instance {
        Instance { id: id.into(), pid }
    }

    fn ok() -> Result<(), ()> {
        Ok(())
    }

    /// A claim that must succeed, by an instance no other holds alive.
    fn hold(t: &Executors, executor: &str, asker: Instance, now: Instant) {
        t.claim(executor, asker, now, |_| false, ok)
            .unwrap()
            .unwrap();
    }

    #[test]
    fn the_first_instance_claims_and_may_claim_again() {
        let t = Executors::new();
        let now = Instant::now();
        let r = t.claim("shim", inst("a", 1), now, |_| false, ok).unwrap();
        assert_eq!(r, Ok(((), None)));
        let r = t.claim("shim", inst("a", 1), now, |_| true, ok).unwrap();
        assert_eq!(r, Ok(((), None)));
        assert_eq!(t.holder("shim"), Some(inst("a", 1)));
    }

    #[test]
    fn a_second_instance_is_refused_while_the_holder_watches_and_named() {
        let t = Executors::new();
        let t0 = Instant::now();
        hold(&t, "shim", inst("a", 41), t0);
        t.watch_opened("shim", "a");
        // Hours later, still watching: still alive.
        let later = t0 + Duration::from_secs(7200);
        let e = t
            .claim("shim", inst("b", 42), later, |_| true, ok)
            .unwrap_err();
        assert_eq!(e.holder, inst("a", 41));
        let msg = e.to_string();
        assert!(
            msg.contains("pid 41") && msg.contains("Watch stream is open"),
            "{msg}"
        );
        assert!(t.check("shim", "b", later).is_err());
        assert!(t.check("shim", "a", later).is_ok());
    }

    #[test]
    fn a_holder_whose_watch_closed_is_taken_over_at_once() {
        let t = Executors::new();
        let t0 = Instant::now();
        hold(&t, "shim", inst("a", 1), t0);
        t.watch_opened("shim", "a");
        t.check("shim", "a", t0).unwrap();
        let r = t
            .claim("shim", inst("b", 2), t0, |_| false, ok)
            .unwrap()
            .unwrap();
        assert_eq!(
            r.1,
            Some(Takeover {
                previous: inst("a", 1)
            })
        );
        assert!(
            t.check("shim", "a", t0).is_err(),
            "the old instance is refused now"
        );
        // The new holder has not opened a stream yet: it is alive by being heard from.
        assert!(t.claim("shim", inst("a", 1), t0, |_| false, ok).is_err());
    }

    #[test]
    fn a_holder_without_a_watch_is_alive_until_silent_past_the_bound() {
        let t = Executors::new();
        let t0 = Instant::now();
        hold(&t, "gate", inst("a", 1), t0);
        let just_before = t0 + SILENCE_BOUND - Duration::from_millis(1);
        assert!(
            t.claim("gate", inst("b", 2), just_before, |_| false, ok)
                .is_err()
        );
        // Being heard from renews it.
        t.check("gate", "a", just_before).unwrap();
        assert!(
            t.claim("gate", inst("b", 2), t0 + SILENCE_BOUND, |_| false, ok)
                .is_err()
        );
        let past = just_before + SILENCE_BOUND;
        assert!(t.claim("gate", inst("b", 2), past, |_| false, ok).is_ok());
    }

    #[test]
    fn a_failed_registration_claims_nothing() {
        let t = Executors::new();
        let now = Instant::now();
        let r = t
            .claim(
                "shim",
                inst("a", 1),
                now,
                |_| false,
                || Err::<(), _>("taken"),
            )
            .unwrap();
        assert_eq!(r, Err("taken"));
        assert_eq!(t.holder("shim"), None);
        assert!(t.check("shim", "anyone", now).is_ok());
    }

    #[test]
    fn a_holder_reconnecting_is_alive_between_its_registration_and_its_new_stream() {
        let t = Executors::new();
        let t0 = Instant::now();
        hold(&t, "shim", inst("a", 1), t0);
        t.watch_opened("shim", "a");
        // Its stream broke and it registered again; the new stream is not open yet.
        hold(&t, "shim", inst("a", 1), t0);
        assert!(t.claim("shim", inst("b", 2), t0, |_| false, ok).is_err());
        t.watch_opened("shim", "a");
        assert!(t.claim("shim", inst("b", 2), t0, |_| true, ok).is_err());
        assert!(t.claim("shim", inst("b", 2), t0, |_| false, ok).is_ok());
    }
}
