//! Caches behind `GET /jobs`, the dashboard's most frequent and largest poll.
//!
//! With a thousand jobs the list is hundreds of kilobytes of JSON, and building it means a
//! thousand ledger summaries and a thousand next-fire computations. Nearly every poll asks for
//! the same answer as the one before, so the serialised body is kept and served again until
//! something it shows can have changed: the job set, any ledger record, the cluster facts
//! (election mode, spread owners), or the clock passing the earliest `nextFire` in it.

use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;

use crate::jobs::JobSet;

/// What the cluster view says about policies and owners, read once per request (see
/// `jobs::view_facts`). Part of the cached `/jobs` body's key: a change of owner or of election
/// mode rebuilds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ViewFacts {
    pub(super) election: bool,
    pub(super) spread: bool,
    pub(super) owners: std::collections::BTreeMap<String, Option<String>>,
}

/// Everything the `/jobs` body depends on apart from the clock.
#[derive(Debug, Clone)]
pub(crate) struct ListKey {
    /// The registered set itself, compared by identity: the registry publishes a new snapshot
    /// on every registration, so a change the job-set ID does not cover (a job moving to
    /// another executor) still misses. Holding it keeps the pointer from being reused.
    pub job_set: Arc<JobSet>,
    pub job_set_id: String,
    /// [`crate::ledger::Ledger::generation`] read *before* the body is built, so a record
    /// appended while building leaves the cached body keyed as stale.
    pub ledger_generation: u64,
    /// [`crate::observe::expectations::Findings::generation`], read before the body is built.
    pub breaches_generation: u64,
    pub facts: ViewFacts,
}

impl PartialEq for ListKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.job_set, &other.job_set)
            && self.job_set_id == other.job_set_id
            && self.ledger_generation == other.ledger_generation
            && self.breaches_generation == other.breaches_generation
            && self.facts == other.facts
    }
}

#[derive(Debug)]
struct CachedList {
    key: ListKey,
    /// Unix ms when it was built; an earlier `now` means the clock stepped back, and the
    /// body's `nextFire` values may be wrong.
    built_at_ms: i64,
    /// Unix ms at which the earliest `nextFire` in the body passes; the body is stale from
    /// then on.
    valid_until_ms: i64,
    body: Bytes,
}

/// The last `/jobs` body and what it was built from.
#[derive(Debug, Default)]
pub(crate) struct ListCache {
    last: Mutex<Option<CachedList>>,
}

impl ListCache {
    /// The cached body when `key` matches and `now_ms` is before its expiry; otherwise
    /// `build(&key)` (returning the body and the Unix ms of its earliest `nextFire`), cached.
    ///
    /// Two requests that miss at once both build, and the later one wins: cheaper than making
    /// one wait on the other, and both answers are correct.
    pub(crate) fn get_or_build(
        &self,
        key: ListKey,
        now_ms: i64,
        build: impl FnOnce(&ListKey) -> (Bytes, i64),
    ) -> Bytes {
        {
            let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(c) = last.as_ref()
                && c.key == key
                && (c.built_at_ms..c.valid_until_ms).contains(&now_ms)
            {
                return c.body.clone();
            }
        }
        let (body, valid_until_ms) = build(&key);
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(CachedList {
            key,
            built_at_ms: now_ms,
            valid_until_ms,
            body: body.clone(),
        });
        body
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn key(generation: u64) -> ListKey {
        static SET: std::sync::OnceLock<Arc<JobSet>> = std::sync::OnceLock::new();
        ListKey {
            job_set: SET.get_or_init(|| Arc::new(JobSet::default())).clone(),
            job_set_id: "set".into(),
            ledger_generation: generation,
            breaches_generation: 0,
            facts: ViewFacts {
                election: false,
                spread: false,
                owners: BTreeMap::new(),
            },
        }
    }

    #[test]
    fn a_body_is_reused_until_its_key_changes_or_its_next_fire_passes() {
        let cache = ListCache::default();
        let mut builds = 0;
        let mut get = |k: ListKey, now: i64| {
            cache.get_or_build(k, now, |_| {
                builds += 1;
                (Bytes::from(format!("body {builds}")), 1_000)
            })
        };
        assert_eq!(get(key(1), 0), "body 1");
        assert_eq!(get(key(1), 999), "body 1", "same key, before the next fire");
        assert_eq!(get(key(2), 999), "body 2", "a new ledger record");
        assert_eq!(get(key(2), 1_000), "body 3", "the earliest nextFire passed");
        let mut spread = key(2);
        spread.facts.spread = true;
        assert_eq!(
            get(spread.clone(), 1_000),
            "body 4",
            "the cluster facts changed"
        );
        assert_eq!(get(spread.clone(), 999), "body 5", "the clock stepped back");
        let mut moved = spread;
        moved.job_set = Arc::new(JobSet::default());
        assert_eq!(get(moved, 999), "body 6", "a new registration");
    }
}
