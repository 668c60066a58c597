//! The wall-clock calendar walk: the first date and time at or after (or the last at or before)
//! a wall-clock reading whose second, minute, hour, month and day are in a schedule's sets.
//!
//! It works on a plain calendar (no time zone, no clock changes): the schedule module maps each
//! wall-clock match to instants by Vixie's DST rules. The sets are six bitsets, 48 bytes a
//! schedule, and a search jumps field by field to the next set bit, carrying into the next
//! hour, day, month or year when a field runs out, so even the sparsest schedule (a Sunday the
//! 29th of February) takes a few dozen steps. A general cron library's matcher is the other
//! choice: croner's holds a byte per possible year (about 5 KB a schedule) and costs about a
//! tenth of a millisecond to build, which at 10,000 jobs is seconds of parsing at start and
//! megabytes kept (BENCHMARKS.md, "10,000 jobs from one shim").

use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};

/// The years searched, as cron implementations bound them: nothing before year 1 or after 5000.
const FIRST_YEAR: i32 = 1;
const LAST_YEAR: i32 = 5000;

/// A schedule's value sets: bit `v` is set when value `v` matches. Day-of-week uses 0-6 with 0
/// Sunday (7 is folded into 0 by the parser).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fields {
    pub(super) second: u64,
    pub(super) minute: u64,
    pub(super) hour: u64,
    pub(super) dom: u64,
    pub(super) month: u64,
    pub(super) dow: u64,
    /// Day-of-month and day-of-week must both match (Vixie's `*` rule); otherwise either.
    pub(super) dom_and_dow: bool,
}

/// A position in the walk. Fields may run one past their range (hour 24, day 0, month 13):
/// the next step finds no value there and carries into the field above.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    year: i32,
    month: i32,
    day: i32,
    hour: i32,
    minute: i32,
    second: i32,
}

impl Cursor {
    fn at(t: NaiveDateTime) -> Self {
        Self {
            year: t.year(),
            month: t.month() as i32,
            day: t.day() as i32,
            hour: t.hour() as i32,
            minute: t.minute() as i32,
            second: t.second() as i32,
        }
    }

    /// The first second of a day (forward walk) or its last (backward walk).
    fn day_start(&mut self, forward: bool) {
        (self.hour, self.minute, self.second) = if forward { (0, 0, 0) } else { (23, 59, 59) };
    }

    fn reading(self) -> Option<NaiveDateTime> {
        NaiveDate::from_ymd_opt(self.year, self.month as u32, self.day as u32)?.and_hms_opt(
            self.hour as u32,
            self.minute as u32,
            self.second as u32,
        )
    }
}

/// The smallest value in `bits` within `from..=max`.
fn first_from(bits: u64, from: i32, max: i32) -> Option<i32> {
    if !(0..=max).contains(&from) {
        return None;
    }
    let window = bits & (!0u64 << from) & ((2u64 << max) - 1);
    (window != 0).then(|| window.trailing_zeros() as i32)
}

/// The largest value in `bits` within `0..=from`.
fn last_until(bits: u64, from: i32) -> Option<i32> {
    if !(0..=62).contains(&from) {
        return None;
    }
    let window = bits & ((2u64 << from) - 1);
    (window != 0).then(|| 63 - window.leading_zeros() as i32)
}

fn days_in_month(year: i32, month: i32) -> i32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if NaiveDate::from_ymd_opt(year, 2, 29).is_some() => 29,
        2 => 28,
        _ => 31,
    }
}

impl Fields {
    fn day_matches(&self, year: i32, month: i32, day: i32) -> bool {
        let Some(date) = NaiveDate::from_ymd_opt(year, month as u32, day as u32) else {
            return false;
        };
        let dom = self.dom & (1 << day) != 0;
        let dow = self.dow & (1 << date.weekday().num_days_from_sunday()) != 0;
        if self.dom_and_dow {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first matching reading at or after `from` (whole seconds; a fraction is ignored).
    pub(super) fn next(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut c = Cursor::at(from);
        if c.year < FIRST_YEAR {
            c = Cursor::at(NaiveDate::from_ymd_opt(FIRST_YEAR, 1, 1)?.and_hms_opt(0, 0, 0)?);
        }
        // Each pass either returns or moves the cursor forward by at least one field value;
        // the year bound ends every walk.
        while c.year <= LAST_YEAR {
            let Some(month) = first_from(self.month, c.month, 12) else {
                (c.year, c.month, c.day) = (c.year + 1, 1, 1);
                c.day_start(true);
                continue;
            };
            if month != c.month {
                (c.month, c.day) = (month, 1);
                c.day_start(true);
            }
            let last_day = days_in_month(c.year, c.month);
            let Some(day) = (c.day..=last_day).find(|&d| self.day_matches(c.year, c.month, d))
            else {
                (c.month, c.day) = (c.month + 1, 1);
                c.day_start(true);
                continue;
            };
            if day != c.day {
                c.day = day;
                c.day_start(true);
            }
            let Some(hour) = first_from(self.hour, c.hour, 23) else {
                c.day += 1;
                c.day_start(true);
                continue;
            };
            if hour != c.hour {
                (c.hour, c.minute, c.second) = (hour, 0, 0);
            }
            let Some(minute) = first_from(self.minute, c.minute, 59) else {
                (c.hour, c.minute, c.second) = (c.hour + 1, 0, 0);
                continue;
            };
            if minute != c.minute {
                (c.minute, c.second) = (minute, 0);
            }
            let Some(second) = first_from(self.second, c.second, 59) else {
                (c.minute, c.second) = (c.minute + 1, 0);
                continue;
            };
            c.second = second;
            return c.reading();
        }
        None
    }

    /// The last matching reading at or before `from` (whole seconds; a fraction is ignored).
    pub(super) fn previous(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut c = Cursor::at(from);
        if c.year > LAST_YEAR {
            c = Cursor::at(NaiveDate::from_ymd_opt(LAST_YEAR, 12, 31)?.and_hms_opt(23, 59, 59)?);
        }
        while c.year >= FIRST_YEAR {
            let Some(month) = last_until(self.month, c.month) else {
                (c.year, c.month, c.day) = (c.year - 1, 12, 31);
                c.day_start(false);
                continue;
            };
            if month != c.month {
                (c.month, c.day) = (month, 31);
                c.day_start(false);
            }
            // A day past the month's end only comes from the line above, whose time is
            // already the day's last second.
            let start = c.day.min(days_in_month(c.year, c.month));
            let Some(day) = (1..=start)
                .rev()
                .find(|&d| self.day_matches(c.year, c.month, d))
            else {
                (c.month, c.day) = (c.month - 1, 31);
                c.day_start(false);
                continue;
            };
            if day != c.day {
                c.day = day;
                c.day_start(false);
            }
            let Some(hour) = last_until(self.hour, c.hour) else {
                c.day -= 1;
                c.day_start(false);
                continue;
            };
            if hour != c.hour {
                (c.hour, c.minute, c.second) = (hour, 59, 59);
            }
            let Some(minute) = last_until(self.minute, c.minute) else {
                (c.hour, c.minute, c.second) = (c.hour - 1, 59, 59);
                continue;
            };
            if minute != c.minute {
                (c.minute, c.second) = (minute, 59);
            }
            let Some(second) = last_until(self.second, c.second) else {
                (c.minute, c.second) = (c.minute - 1, 59);
                continue;
            };
            c.second = second;
            return c.reading();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    fn bits(values: impl IntoIterator<Item = u32>) -> u64 {
        values.into_iter().fold(0, |b, v| b | 1 << v)
    }

    /// Every minute of every day (the seconds field is just 0).
    fn every_minute() -> Fields {
        Fields {
            second: 1,
            minute: bits(0..60),
            hour: bits(0..24),
            dom: bits(1..32),
            month: bits(1..13),
            dow: bits(0..7),
            dom_and_dow: true,
        }
    }

    #[test]
    fn the_walk_carries_into_each_field_above() {
        let f = every_minute();
        assert_eq!(
            f.next(at("2026-12-31 23:59:01")),
            Some(at("2027-01-01 00:00:00"))
        );
        assert_eq!(
            f.next(at("2026-12-31 23:59:00")),
            Some(at("2026-12-31 23:59:00"))
        );
        assert_eq!(
            f.previous(at("2027-01-01 00:00:59")),
            Some(at("2027-01-01 00:00:00"))
        );
        assert_eq!(
            f.previous(at("2027-01-01 00:00:00")),
            Some(at("2027-01-01 00:00:00"))
        );
        let f = Fields {
            minute: 1,
            hour: 1,
            dom: bits([31]),
            ..every_minute()
        };
        // The 31st: March after February (which has none), January before March.
        assert_eq!(
            f.next(at("2026-02-01 00:00:00")),
            Some(at("2026-03-31 00:00:00"))
        );
        assert_eq!(
            f.previous(at("2026-03-30 00:00:00")),
            Some(at("2026-01-31 00:00:00"))
        );
    }

    #[test]
    fn day_of_month_and_weekday_combine_as_asked() {
        // The 13th that is a Friday (AND) and the 13th or any Friday (OR).
        let and = Fields {
            minute: 1,
            hour: 1,
            dom: bits([13]),
            dow: bits([5]),
            ..every_minute()
        };
        assert_eq!(
            and.next(at("2026-01-01 00:00:00")),
            Some(at("2026-02-13 00:00:00"))
        );
        assert_eq!(
            and.previous(at("2026-02-12 00:00:00")),
            Some(at("2025-06-13 00:00:00"))
        );
        let or = Fields {
            dom_and_dow: false,
            ..and
        };
        assert_eq!(
            or.next(at("2026-01-01 00:00:00")),
            Some(at("2026-01-02 00:00:00"))
        );
        assert_eq!(
            or.previous(at("2026-01-14 00:00:00")),
            Some(at("2026-01-13 00:00:00"))
        );
    }

    #[test]
    fn the_sparsest_schedule_is_found_and_the_years_end_the_search() {
        // Sunday the 29th of February.
        let f = Fields {
            minute: 1,
            hour: 1,
            dom: bits([29]),
            month: bits([2]),
            dow: bits([0]),
            ..every_minute()
        };
        assert_eq!(
            f.next(at("2026-03-05 00:00:00")),
            Some(at("2032-02-29 00:00:00"))
        );
        assert_eq!(
            f.previous(at("2026-03-05 00:00:00")),
            Some(at("2004-02-29 00:00:00"))
        );
        assert_eq!(f.next(at("4990-01-01 00:00:00")), None);
        assert_eq!(f.previous(at("0004-02-28 00:00:00")), None);
        // From far outside the years, the search starts at their edge rather than walk there.
        let before_year_one = NaiveDate::from_ymd_opt(-400, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0);
        assert_eq!(
            f.next(before_year_one.unwrap()),
            Some(at("0004-02-29 00:00:00"))
        );
        assert_eq!(
            f.previous(at("9000-01-01 00:00:00")),
            Some(at("4984-02-29 00:00:00"))
        );
    }
}
