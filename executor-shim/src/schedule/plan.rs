//! Pure planning of due instants: which firings to launch now, which were missed.
//!
//! The scheduler sleeps until the earliest next due instant and then asks [`plan`] what to do,
//! so it never misses a firing for loop granularity (Chronos's 60 s schedule horizon, MN-08):
//! every due instant up to `now` is either launched or reported as missed, never dropped
//! silently. When the loop wakes late (a stall, a suspended machine, a clock jump forward),
//! only the newest due instant still inside the lateness bound runs; the older ones are
//! reported missed. Coming back never launches a burst of catch-up runs of one job (MN-09).

use chrono::{DateTime, TimeDelta, Utc};
use cronstable_core::schedule::Schedule;

/// Missed instants listed one by one before the rest are only counted.
pub const MISSED_LISTED: usize = 100;

/// What to do for one job at `now`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The due instant to launch now: the newest one within the lateness bound.
    pub fire: Option<DateTime<Utc>>,
    /// Due instants that are too late to run, oldest first (at most [`MISSED_LISTED`]).
    pub missed: Vec<DateTime<Utc>>,
    /// Total number of missed instants, including those not listed (a floor past about
    /// 20,000: counting further would stall the loop).
    pub missed_total: u64,
    /// The next due instant after `now`, if the schedule has one.
    pub next: Option<DateTime<Utc>>,
}

/// Plans the firings of `schedule` whose due instants lie in `[next_due, now]`.
pub fn plan(
    schedule: &Schedule,
    next_due: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    max_lateness: TimeDelta,
) -> Plan {
    let mut out = Plan::default();
    let mut cursor = next_due;
    let cutoff = now - max_lateness;
    while let Some(t) = cursor {
        if t > now {
            break;
        }
        if t < cutoff {
            // Count the missed instants up to the cutoff, then jump: a day of suspend with a
            // per-second job must not cost a day's worth of iterations.
            out.missed_total += 1;
            if out.missed.len() < MISSED_LISTED {
                out.missed.push(t);
                cursor = schedule.next_after(t);
            } else {
                // The last instant strictly before the cutoff: everything up to it is missed.
                let jump_from = schedule
                    .latest_at_or_before(cutoff - TimeDelta::milliseconds(1))
                    .unwrap_or(t);
                if jump_from > t {
                    out.missed_total += count_between(schedule, t, jump_from);
                }
                cursor = schedule.next_after(jump_from.max(t));
            }
            continue;
        }
        // Within the bound: a newer due instant supersedes an older one.
        if let Some(older) = out.fire.replace(t) {
            out.missed_total += 1;
            if out.missed.len() < MISSED_LISTED {
                out.missed.push(older);
            }
        }
        cursor = schedule.next_after(t);
    }
    out.next = cursor;
    out
}

/// Counts due instants in `(from, to]`, giving up after a bound (the count is then a floor):
/// this runs on the scheduler's loop, so a week-long suspend of a per-second job must not
/// stall it for long.
fn count_between(schedule: &Schedule, from: DateTime<Utc>, to: DateTime<Utc>) -> u64 {
    const BOUND: u64 = 20_000;
    let mut n = 0;
    let mut cursor = schedule.next_after(from);
    while let Some(t) = cursor {
        if t > to || n >= BOUND {
            break;
        }
        n += 1;
        cursor = schedule.next_after(t);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 5, h, m, s).unwrap()
    }

    fn every_minute() -> Schedule {
        Schedule::parse("* * * * *", None).unwrap()
    }

    #[test]
    fn fires_the_instant_that_is_due_and_points_at_the_next() {
        let p = plan(
            &every_minute(),
            Some(at(10, 0, 0)),
            at(10, 0, 0),
            TimeDelta::seconds(30),
        );
        assert_eq!(p.fire, Some(at(10, 0, 0)));
        assert_eq!(p.next, Some(at(10, 1, 0)));
        assert!(p.missed.is_empty());
    }

    #[test]
    fn nothing_happens_before_the_due_instant() {
        let p = plan(
            &every_minute(),
            Some(at(10, 1, 0)),
            at(10, 0, 59),
            TimeDelta::seconds(30),
        );
        assert_eq!(
            p,
            Plan {
                next: Some(at(10, 1, 0)),
                ..Plan::default()
            }
        );
    }

    #[test]
    fn a_short_stall_runs_only_the_newest_due_instant_and_reports_the_rest() {
        let s = Schedule::parse("* * * * * *", None).unwrap();
        let p = plan(&s, Some(at(10, 0, 0)), at(10, 0, 3), TimeDelta::seconds(30));
        assert_eq!(p.fire, Some(at(10, 0, 3)));
        assert_eq!(p.missed, vec![at(10, 0, 0), at(10, 0, 1), at(10, 0, 2)]);
        assert_eq!(p.missed_total, 3);
        assert_eq!(p.next, Some(at(10, 0, 4)));
    }

    #[test]
    fn instants_older_than_the_bound_are_reported_missed_not_run() {
        let p = plan(
            &every_minute(),
            Some(at(10, 0, 0)),
            at(10, 5, 10),
            TimeDelta::seconds(30),
        );
        assert_eq!(
            p.missed,
            vec![
                at(10, 0, 0),
                at(10, 1, 0),
                at(10, 2, 0),
                at(10, 3, 0),
                at(10, 4, 0)
            ]
        );
        assert_eq!(p.missed_total, 5);
        assert_eq!(p.fire, Some(at(10, 5, 0)));
        assert_eq!(p.next, Some(at(10, 6, 0)));
    }

    #[test]
    fn a_long_suspend_counts_every_missed_instant_without_listing_them_all() {
        let s = Schedule::parse("* * * * * *", None).unwrap();
        let now = at(12, 0, 0);
        let p = plan(&s, Some(at(10, 0, 0)), now, TimeDelta::seconds(10));
        assert_eq!(p.missed.len(), MISSED_LISTED);
        // Two hours of seconds: every one but the newest is missed, and that one runs.
        assert_eq!(p.missed_total, 7200);
        assert_eq!(p.fire, Some(at(12, 0, 0)));
        assert_eq!(p.next, Some(at(12, 0, 1)));
    }

    #[test]
    fn reboot_schedules_plan_nothing() {
        let s = Schedule::parse("@reboot", None).unwrap();
        assert_eq!(
            plan(&s, None, at(10, 0, 0), TimeDelta::seconds(30)),
            Plan::default()
        );
    }
}
