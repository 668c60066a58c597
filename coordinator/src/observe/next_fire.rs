//! Each job's parsed schedule and next fire, remembered until they change.
//!
//! The displays that show a `nextFire` for every job (`GET /jobs`, the gossip run summaries)
//! would otherwise parse and search every schedule on every rebuild, although a job's next fire
//! only changes when it passes: cheap for one job, not for 10,000 every round. This memo
//! searches again only then, or when the clock went backwards, or the job set changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use cronstable_core::schedule::Schedule;

use crate::jobs::JobSet;

/// Parsed schedules of the current job set, so `/jobs` over a thousand jobs does not parse a
/// thousand cron expressions per request (and the gossip run summaries not per round). Rebuilt when the job-set ID changes.
#[derive(Debug, Default)]
pub struct ScheduleCache {
    /// The job-set ID the schedules were parsed for, and the schedules.
    parsed: Mutex<Option<(String, Schedules)>>,
}

/// Each job's parsed schedule; `None` where it does not parse (the shim reported that).
pub type Schedules = Arc<HashMap<String, Option<Schedule>>>;

impl ScheduleCache {
    /// The parsed schedules of `set`, parsed only when its ID differs from the last one.
    pub fn for_set(&self, set: &JobSet) -> Schedules {
        let id = set.id.as_str();
        let mut cached = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((cached_id, map)) = cached.as_ref()
            && cached_id == id
        {
            return map.clone();
        }
        let map: Arc<HashMap<_, _>> = Arc::new(
            set.jobs
                .iter()
                .map(|(name, job)| {
                    let spec = &job.spec;
                    let parsed = Schedule::parse(&spec.schedule, spec.timezone.as_deref()).ok();
                    (name.clone(), parsed)
                })
                .collect(),
        );
        *cached = Some((id.to_owned(), map.clone()));
        map
    }
}

/// One job's remembered answer.
#[derive(Debug, Clone, Copy)]
struct Remembered {
    /// When it was computed (Unix ms); an earlier `now` means the clock stepped back.
    computed_at_ms: i64,
    /// The next fire in Unix ms; `None` for a schedule that never fires again (`@reboot`).
    next_ms: Option<i64>,
}

/// Next fires of the jobs of one job set.
#[derive(Debug, Default)]
pub struct NextFires {
    job_set_id: String,
    jobs: HashMap<String, Remembered>,
}

impl NextFires {
    /// An empty memo.
    pub fn new() -> Self {
        Self::default()
    }

    /// The job's next fire after `now_ms` under `schedule` (Unix ms), searched only when the
    /// remembered one has passed. `job_set_id` scopes the memo: a new set forgets everything,
    /// since a job's schedule can only change with the set.
    pub fn next_after(
        &mut self,
        job_set_id: &str,
        job: &str,
        schedule: Option<&Schedule>,
        now_ms: i64,
    ) -> Option<i64> {
        if self.job_set_id != job_set_id {
            self.jobs.clear();
            job_set_id.clone_into(&mut self.job_set_id);
        }
        if let Some(r) = self.jobs.get(job)
            && now_ms >= r.computed_at_ms
            && r.next_ms.is_none_or(|next| now_ms < next)
        {
            return r.next_ms;
        }
        let now = DateTime::<Utc>::from_timestamp_millis(now_ms)?;
        let next_ms = schedule
            .and_then(|s| s.next_after(now))
            .map(|t| t.timestamp_millis());
        self.jobs.insert(
            job.to_owned(),
            Remembered {
                computed_at_ms: now_ms,
                next_ms,
            },
        );
        next_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60_000;
    /// 2023-11-14T22:14:00Z, a whole minute.
    const T0: i64 = 1_700_000_040_000;

    #[test]
    fn a_next_fire_is_searched_again_only_once_it_passed() {
        let every_minute = Schedule::parse("* * * * *", None).unwrap();
        let hourly = Schedule::parse("0 * * * *", None).unwrap();
        let mut memo = NextFires::new();
        let next =
            |memo: &mut NextFires, s: &Schedule, now| memo.next_after("a", "job", Some(s), now);
        assert_eq!(next(&mut memo, &every_minute, T0), Some(T0 + MINUTE));
        // A different schedule under the same set and name proves the memo answered.
        assert_eq!(next(&mut memo, &hourly, T0 + 30_000), Some(T0 + MINUTE));
        assert_ne!(
            next(&mut memo, &hourly, T0 + MINUTE),
            Some(T0 + MINUTE),
            "passed"
        );
        // The clock stepped back: searched again.
        assert_eq!(next(&mut memo, &every_minute, T0 - 30_000), Some(T0));
        // A new job set forgets.
        assert_eq!(
            memo.next_after("b", "job", Some(&every_minute), T0 - 30_000),
            Some(T0)
        );
        let reboot = Schedule::parse("@reboot", None).unwrap();
        assert_eq!(memo.next_after("b", "boot", Some(&reboot), T0), None);
        assert_eq!(memo.next_after("b", "boot", None, T0), None);
    }
}
