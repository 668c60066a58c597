//! The breaches of jobs' expectations this node found ([`crate::observe::expectations`]), kept
//! for `GET /jobs`, `GET /jobs/{name}` and the dashboard: the newest [`KEPT`] per job.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cronstable_core::expect::Breach;

/// The breaches kept per job.
pub const KEPT: usize = 20;

/// One breach as `GET /jobs` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreachNote {
    /// Which expectation failed.
    pub breach: Breach,
    /// The firing's nominal instant (Unix ms).
    pub scheduled_at_ms: i64,
    /// Its firing ID.
    pub firing_id: String,
    /// When this node found it (Unix ms).
    pub found_at_ms: i64,
    /// Why.
    pub why: String,
}

/// The breaches this node found, newest last, per job: what `GET /jobs` shows.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    notes: Arc<Mutex<HashMap<String, VecDeque<BreachNote>>>>,
    generation: Arc<AtomicU64>,
}

impl Findings {
    /// Bumped by every breach found, so a cached `GET /jobs` body knows it is stale.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Keeps one breach of `job`.
    pub fn add(&self, job: &str, note: BreachNote) {
        self.generation.fetch_add(1, Ordering::Release);
        let mut all = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = all.entry(job.to_owned()).or_default();
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(note);
    }

    /// The breaches found of `job`, oldest first.
    pub fn of(&self, job: &str) -> Vec<BreachNote> {
        let all = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        all.get(job)
            .map(|k| k.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Forgets jobs that left the set.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut all = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|job, _| keep(job));
    }
}
