//! Wake-ups for deferred `@reboot` one-shots: the coordinator's `RunDeferred` instruction
//! arrives on the Watch stream (the session) and must reach the firing task that is waiting
//! to ask again.
//!
//! Each waiting one-shot registers a [`Notify`] under (job, scheduled instant) for as long as
//! it waits; a push for a one-shot nobody waits on is dropped. `notify_one` keeps a permit, so
//! a push that lands between the DEFER answer and the wait is not lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

type Key = (String, i64);

/// The registry of waiting one-shots. Cheap to clone; clones share it.
#[derive(Debug, Clone, Default)]
pub struct DeferredWakeups {
    waiting: Arc<Mutex<HashMap<Key, Arc<Notify>>>>,
}

impl DeferredWakeups {
    /// Nobody waiting.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the one-shot of `job` at `scheduled_at_ms`; it stays registered until the
    /// returned guard drops.
    pub fn register(&self, job: &str, scheduled_at_ms: i64) -> WakeupGuard {
        let key = (job.to_owned(), scheduled_at_ms);
        let notify = Arc::new(Notify::new());
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), notify.clone());
        WakeupGuard {
            owner: self.clone(),
            key,
            notify,
        }
    }

    /// Wakes the one-shot of `job` at `scheduled_at_ms`; false when none is waiting.
    pub fn wake(&self, job: &str, scheduled_at_ms: i64) -> bool {
        let waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        match waiting.get(&(job.to_owned(), scheduled_at_ms)) {
            Some(n) => {
                n.notify_one();
                true
            }
            None => false,
        }
    }
}

/// A registered one-shot; unregisters on drop.
#[derive(Debug)]
pub struct WakeupGuard {
    owner: DeferredWakeups,
    key: Key,
    notify: Arc<Notify>,
}

impl WakeupGuard {
    /// Resolves at the next wake-up (or at once, when one came since the last).
    pub async fn woken(&self) {
        self.notify.notified().await;
    }
}

impl Drop for WakeupGuard {
    fn drop(&mut self) {
        let mut waiting = self
            .owner
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Only our own entry: a newer registration under the same key stays.
        if waiting
            .get(&self.key)
            .is_some_and(|n| Arc::ptr_eq(n, &self.notify))
        {
            waiting.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `guard` has a wake-up ready, polling it once.
    async fn ready(guard: &WakeupGuard) -> bool {
        tokio::select! {
            biased;
            () = guard.woken() => true,
            () = std::future::ready(()) => false,
        }
    }

    #[tokio::test]
    async fn a_push_reaches_only_the_one_shot_it_names_and_is_kept_until_awaited() {
        let wakeups = DeferredWakeups::new();
        let guard = wakeups.register("migrate", 1_000);
        assert!(!wakeups.wake("migrate", 2_000), "another instant");
        assert!(!wakeups.wake("other", 1_000), "another job");
        // Delivered before anyone waits: the permit is kept.
        assert!(wakeups.wake("migrate", 1_000));
        assert!(ready(&guard).await, "the kept wake-up resolves at once");
        assert!(!ready(&guard).await, "one push, one wake-up");
        drop(guard);
        assert!(!wakeups.wake("migrate", 1_000), "unregistered on drop");
    }

    #[test]
    fn dropping_an_old_guard_keeps_a_newer_registration() {
        let wakeups = DeferredWakeups::new();
        let old = wakeups.register("migrate", 1_000);
        let new = wakeups.register("migrate", 1_000);
        drop(old);
        assert!(wakeups.wake("migrate", 1_000));
        drop(new);
        assert!(!wakeups.wake("migrate", 1_000));
    }
}
