//! Crontab schedule semantics: what a schedule expression means, and which instants it is due
//! at in a time zone, DST included. The syntax and the time-zone rules follow cronie/Vixie cron;
//! the calendar walk itself is [`calendar`].
//!
//! # Expressions
//!
//! The number of whitespace-separated fields decides the form, and nothing else does:
//! - **5 fields** `minute hour day-of-month month day-of-week`, as in a crontab. Each field is a
//!   comma list of `*`, `N`, `N-M`, `*/S` or `N-M/S`. Month (`jan`..`dec`) and weekday
//!   (`sun`..`sat`) names are case-insensitive and allowed only in their own field; weekdays
//!   are `0-7` with both `0` and `7` Sunday, so `1-5` is Monday to Friday.
//! - **6 fields**: the same with a seconds field first (`*/10 * * * * *` is every ten seconds),
//!   for sub-minute jobs.
//! - **7 fields** is refused: there is no year field.
//! - The aliases `@yearly` = `@annually` (`0 0 1 1 *`), `@monthly`, `@weekly` (`0 0 * * 0`),
//!   `@daily` = `@midnight` (`0 0 * * *`), `@hourly` and `@reboot`, case-insensitive.
//!
//! Like cronie, `5/10` (a step without a range), backwards ranges (`5-1`) and the
//! extensions some cron libraries take (`L`, `W`, `#`, `?`) are refused, with an error naming the field. A schedule that
//! can never fire (`0 0 30 2 *`) is accepted, as cronie accepts it (it is a known way to park a
//! job); it simply has no instants.
//!
//! Day-of-month and day-of-week follow Vixie: when either field *starts with* `*` a day must
//! match both (so `0 0 1,15 * */3` is the 1st and 15th only when they fall on Sun/Wed/Sat, and
//! `0 0 * * 1` is every Monday); otherwise a day matching either is enough (`0 0 13 * 5` is the
//! 13th and every Friday).
//!
//! # Time zones and DST
//!
//! A schedule is evaluated on the wall clock of its IANA zone (UTC when none). Vixie's rules for
//! clock changes decide what a wall-clock match becomes, keyed on whether the job is a
//! *wildcard* job (its minute or hour field, or its seconds field, starts with `*`, as cronie's
//! `MIN_STAR | HR_STAR`) or a *fixed-time* job (everything else, lists and ranges included):
//! - a wall time that a spring-forward skips runs a fixed-time job once, at the first instant
//!   after the gap (`30 2 * * *` runs at 03:00 on that day; several skipped times collapse into
//!   that one run), and is simply skipped for a wildcard job, whose next slot comes soon anyway;
//! - a wall time that a fall-back repeats runs a fixed-time job once, on its first occurrence,
//!   and a wildcard job on both (`*/30` fires at 01:00 and 01:30 EDT, then again EST).
//!
//! Cron libraries that apply DST rules themselves (croner among them) make that choice only for
//! single-valued fields, so `30 1,13 * * *` would run twice on a fall-back day there. This
//! module therefore walks the *wall clock* as a plain calendar ([`calendar`]) and maps each
//! wall-clock match to instants itself. The due instants form one set, so
//! [`Schedule::next_after`] and [`Schedule::latest_at_or_before`] always agree, and iterating `next_after` is strictly increasing.
//!
//! Nothing here reads a clock: every instant is an argument.

use std::fmt;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::{GapInfo, Tz};

mod calendar;

/// Why a schedule expression (or its time zone) cannot be used. Messages name the bad part.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum ScheduleError {
    /// The expression is empty or blank.
    #[error("the schedule is empty")]
    Empty,
    /// An `@` word that is not one of the aliases.
    #[error(
        "unknown schedule alias `{0}`: expected @yearly, @annually, @monthly, @weekly, @daily, \
         @midnight, @hourly or @reboot"
    )]
    UnknownAlias(String),
    /// Not five or six fields (seven, with a year, included).
    #[error("{}", field_count_message(expr, *count))]
    FieldCount {
        /// The expression as given.
        expr: String,
        /// How many fields it has.
        count: usize,
    },
    /// A number outside its field's range.
    #[error("{field} field `{value}` out of range {min}-{max} in schedule `{expr}`")]
    OutOfRange {
        /// The expression as given.
        expr: String,
        /// Which field: `second`, `minute`, `hour`, `day-of-month`, `month` or `day-of-week`.
        field: &'static str,
        /// The offending number as written.
        value: String,
        /// The smallest value the field takes.
        min: u32,
        /// The largest value the field takes.
        max: u32,
    },
    /// A field that does not follow the syntax.
    #[error("{field} field `{text}`: {reason} in schedule `{expr}`")]
    BadField {
        /// The expression as given.
        expr: String,
        /// Which field (see [`ScheduleError::OutOfRange::field`]).
        field: &'static str,
        /// The whole field as written.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The time zone is not an IANA name chrono-tz knows (names are case-sensitive).
    #[error("unknown time zone `{0}`: expected an IANA name such as Europe/Berlin or UTC")]
    UnknownTimeZone(String),
}

fn field_count_message(expr: &str, count: usize) -> String {
    let hint = if count == 7 {
        ": a year field is not supported"
    } else {
        ""
    };
    format!(
        "schedule `{expr}` has {count} fields{hint}; expected 5 (minute hour day-of-month month \
         day-of-week), or 6 with seconds first"
    )
}

/// A parsed schedule: `@reboot`, or a recurring schedule in a time zone.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// `@reboot`: once when the executor starts; it has no instants.
    Reboot,
    /// Anything else.
    Cron(CronSchedule),
}

/// A recurring schedule bound to its time zone. Opaque: use the [`Schedule`] methods.
#[derive(Clone)]
pub struct CronSchedule {
    /// The wall-clock value sets, day-of-month and day-of-week combined as Vixie's `*` rule
    /// says.
    fields: calendar::Fields,
    tz: Tz,
    has_seconds: bool,
    /// Vixie's wildcard job (see the module docs): runs both passes of a repeated hour and
    /// skips a spring-forward gap; a fixed-time job does the opposite.
    wildcard: bool,
    /// No calendar date matches (e.g. `0 0 30 2 *`), so every search is skipped.
    never: bool,
    expr: String,
}

impl fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSchedule")
            .field("expr", &self.expr)
            .field("tz", &self.tz.name())
            .field("has_seconds", &self.has_seconds)
            .field("wildcard", &self.wildcard)
            .finish()
    }
}

// === field syntax ===

/// One field's name, range and value names (the index of a name plus `min` is its value).
struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const fn spec(name: &'static str, min: u32, max: u32, names: &'static [&'static str]) -> FieldSpec {
    FieldSpec {
        name,
        min,
        max,
        names,
    }
}

const SECOND: FieldSpec = spec("second", 0, 59, &[]);
const MINUTE: FieldSpec = spec("minute", 0, 59, &[]);
const HOUR: FieldSpec = spec("hour", 0, 23, &[]);
const DOM: FieldSpec = spec("day-of-month", 1, 31, &[]);
const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const MONTH: FieldSpec = spec("month", 1, 12, &MONTHS);
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const DOW: FieldSpec = spec("day-of-week", 0, 7, &DAYS);

/// A parsed field: the set of values (bit `v` for value `v`) and whether it starts with `*`,
/// which is what Vixie's day and DST rules look at.
struct Field {
    bits: u64,
    star: bool,
}

fn parse_field(spec: &FieldSpec, text: &str, expr: &str) -> Result<Field, ScheduleError> {
    let bad = |reason: String| ScheduleError::BadField {
        expr: expr.to_owned(),
        field: spec.name,
        text: text.to_owned(),
        reason,
    };
    let value = |word: &str, range_end: bool| -> Result<u32, ScheduleError> {
        if word.is_empty() {
            return Err(bad("a number is missing".to_owned()));
        }
        if let Some(v) = number(word) {
            if v < spec.min || v > spec.max {
                return Err(ScheduleError::OutOfRange {
                    expr: expr.to_owned(),
                    field: spec.name,
                    value: word.to_owned(),
                    min: spec.min,
                    max: spec.max,
                });
            }
            return Ok(v);
        }
        let lower = word.to_ascii_lowercase();
        match spec.names.iter().position(|n| *n == lower) {
            // `mon-sun` reads naturally as Monday to Sunday, so a range ending on Sunday ends
            // on 7 (cronie would refuse it as the backwards range 1-0).
            Some(0) if range_end && spec.max == 7 => Ok(7),
            Some(i) => Ok(spec.min + i as u32),
            None if spec.names.is_empty() => Err(bad(format!("`{word}` is not a number"))),
            None => Err(bad(format!(
                "`{word}` is not a number or a {} name ({})",
                spec.name,
                spec.names.join(" ")
            ))),
        }
    };

    let mut bits = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(bad("empty list item".to_owned()));
        }
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (item, None),
        };
        let step = match step.map(|s| (s, number(s))) {
            None => 1,
            Some((_, Some(n))) if n > 0 => n,
            Some((s, _)) => {
                return Err(bad(format!(
                    "step `{s}` must be a whole number, at least 1"
                )));
            }
        };
        let (lo, hi) = if range == "*" {
            (spec.min, spec.max)
        } else if let Some((a, b)) = range.split_once('-') {
            let (lo, hi) = (value(a, false)?, value(b, true)?);
            if lo > hi {
                return Err(bad(format!("range `{range}` is backwards")));
            }
            (lo, hi)
        } else {
            let v = value(range, false)?;
            if item.contains('/') {
                return Err(bad(format!(
                    "a step needs a range: write `{range}-{}/{step}` or `*/{step}`",
                    spec.max
                )));
            }
            (v, v)
        };
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v = v.saturating_add(step);
        }
    }
    Ok(Field {
        bits,
        star: text.starts_with('*'),
    })
}

/// A plain decimal number; `None` for anything else. Too many digits read as `u32::MAX`, which
/// is out of every range.
fn number(s: &str) -> Option<u32> {
    let digits = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| s.parse().unwrap_or(u32::MAX))
}

/// The five-field text an alias stands for; `None` if `expr` is not an alias.
fn expand_alias(expr: &str) -> Result<Option<&'static str>, ScheduleError> {
    if !expr.starts_with('@') {
        return Ok(None);
    }
    Ok(Some(match expr.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return Err(ScheduleError::UnknownAlias(expr.to_owned())),
    }))
}

// === impl Schedule ===

impl Schedule {
    /// Parses `expr` as written (see the module docs for the forms) for evaluation in
    /// `timezone`, an IANA name such as `Europe/Berlin`, or UTC when `None`.
    pub fn parse(expr: &str, timezone: Option<&str>) -> Result<Schedule, ScheduleError> {
        let expr = expr.trim();
        if expr.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let tz: Tz = match timezone {
            None => Tz::UTC,
            Some(name) => name
                .parse()
                .map_err(|_| ScheduleError::UnknownTimeZone(name.to_owned()))?,
        };
        if expr.eq_ignore_ascii_case("@reboot") {
            return Ok(Schedule::Reboot);
        }
        let text = expand_alias(expr)?.unwrap_or(expr);
        let fields: Vec<&str> = text.split_whitespace().collect();
        let (has_seconds, rest) = match fields.len() {
            5 => (false, &fields[..]),
            6 => (true, &fields[1..]),
            count => {
                return Err(ScheduleError::FieldCount {
                    expr: expr.to_owned(),
                    count,
                });
            }
        };
        let second = if has_seconds {
            parse_field(&SECOND, fields[0], expr)?
        } else {
            Field {
                bits: 1,
                star: false,
            }
        };
        let minute = parse_field(&MINUTE, rest[0], expr)?;
        let hour = parse_field(&HOUR, rest[1], expr)?;
        let dom = parse_field(&DOM, rest[2], expr)?;
        let month = parse_field(&MONTH, rest[3], expr)?;
        let mut dow = parse_field(&DOW, rest[4], expr)?;
        if dow.bits & (1 << 7) != 0 {
            dow.bits = (dow.bits & !(1 << 7)) | 1;
        }

        let both_days = dom.star || dow.star;
        // With AND, some month must have one of the days; every (month, day) pair that exists
        // falls on every weekday within a few decades, so that is the whole test. With OR a
        // weekday always matches.
        let longest = [0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let never = both_days
            && !(1..=12).any(|m| {
                month.bits & (1 << m) != 0 && (1..=longest[m]).any(|d| dom.bits & (1 << d) != 0)
            });
        Ok(Schedule::Cron(CronSchedule {
            fields: calendar::Fields {
                second: second.bits,
                minute: minute.bits,
                hour: hour.bits,
                dom: dom.bits,
                month: month.bits,
                dow: dow.bits,
                dom_and_dow: both_days,
            },
            tz,
            has_seconds,
            wildcard: minute.star || hour.star || (has_seconds && second.star),
            never,
            expr: expr.to_owned(),
        }))
    }

    /// A sentence for a schedule that will not fire in the next [`IDLE_HORIZON_DAYS`] after
    /// `now`: one that can never fire (`0 0 31 2 *`: no month has the day it names), or one
    /// whose next instant is years away (a Sunday the 29th of February). Cron accepts both and
    /// so do we: the job registers and simply does not run, so this is a warning, not an
    /// error. `None` for `@reboot` and for any schedule that fires within the horizon.
    pub fn idle_warning(&self, now: DateTime<Utc>) -> Option<String> {
        let Schedule::Cron(c) = self else {
            return None;
        };
        if c.never {
            return Some(format!(
                "schedule {:?} never fires: none of its months has the day of the month it \
                 names",
                c.expr
            ));
        }
        let horizon = now + chrono::TimeDelta::days(IDLE_HORIZON_DAYS);
        match self.next_after(now) {
            Some(t) if t <= horizon => None,
            Some(t) => Some(format!(
                "schedule {:?} does not fire before {}",
                c.expr,
                t.format("%Y-%m-%d")
            )),
            None => Some(format!(
                "schedule {:?} does not fire before the year 5000",
                c.expr
            )),
        }
    }

    /// True for `@reboot`.
    pub fn is_reboot(&self) -> bool {
        matches!(self, Schedule::Reboot)
    }

    /// True for the six-field form, whose instants may fall on any second.
    pub fn has_seconds(&self) -> bool {
        matches!(self, Schedule::Cron(c) if c.has_seconds)
    }

    /// The first due instant strictly after `after`; `None` for `@reboot`, for a schedule that
    /// never fires, or past the year 5000 (the calendar's limit).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron(c) if !c.never => c.next_after(whole_second(after)),
            _ => None,
        }
    }

    /// The most recent due instant at or before `at`: the greatest `t <= at` with
    /// `next_after(t - 1s) == t`. `None` for `@reboot`, for a schedule that never fires, or
    /// before the year 1. The search is cheap: no schedule that can fire goes more than a few
    /// decades between instants (a Sunday the 29th of February is the sparsest), and the
    /// calendar walk jumps whole days and months at a time.
    pub fn latest_at_or_before(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron(c) if !c.never => c.latest_at_or_before(whole_second(at)),
            _ => None,
        }
    }
}

/// How far ahead [`Schedule::idle_warning`] looks: four years, so a yearly February 29th
/// still counts as firing.
pub const IDLE_HORIZON_DAYS: i64 = 4 * 366;

/// Due instants are whole seconds, so `t > after` is `t > floor(after)`.
fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    t.with_nanosecond(0).unwrap_or(t)
}

/// Guards the walks below against looping. Each step past the first skips a whole gap or
/// overlap, so real zones need two or three.
const MAX_STEPS: usize = 64;

// === impl CronSchedule ===

impl CronSchedule {
    /// The next wall-clock match after (or at) `wall`, on a plain calendar.
    fn next_wall(&self, wall: NaiveDateTime, inclusive: bool) -> Option<NaiveDateTime> {
        let from = if inclusive {
            wall
        } else {
            wall.checked_add_signed(TimeDelta::seconds(1))?
        };
        self.fields.next(from)
    }

    /// The last wall-clock match before (or at) `wall`, on a plain calendar.
    fn prev_wall(&self, wall: NaiveDateTime, inclusive: bool) -> Option<NaiveDateTime> {
        let from = if inclusive {
            wall
        } else {
            wall.checked_sub_signed(TimeDelta::seconds(1))?
        };
        self.fields.previous(from)
    }

    /// The instants a wall-clock match is due at, by Vixie's rules (module docs).
    fn due(&self, wall: NaiveDateTime) -> [Option<DateTime<Utc>>; 2] {
        match self.tz.from_local_datetime(&wall) {
            LocalResult::Single(t) => [Some(t.to_utc()), None],
            LocalResult::Ambiguous(first, second) => {
                [Some(first.to_utc()), self.wildcard.then(|| second.to_utc())]
            }
            LocalResult::None if self.wildcard => [None, None],
            LocalResult::None => [gap_end(&wall, self.tz).map(|t| t.to_utc()), None],
        }
    }

    fn next_after(&self, a: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let wall_a = local_wall(a, self.tz)?;
        // Walk wall times after `a`'s own. The first match with an instant after `a` gives the
        // earliest such instant: a later wall time maps to an earlier instant only inside a
        // repeated hour, and there the earlier pass is tried first.
        let mut best = None;
        let (mut wall, mut inclusive) = (wall_a, false);
        for _ in 0..MAX_STEPS {
            let Some(m) = self.next_wall(wall, inclusive) else {
                break;
            };
            best = self.due(m).into_iter().flatten().filter(|t| *t > a).min();
            if best.is_some() {
                break;
            }
            // Nothing due at `m`: it sits in a gap (wildcard job) or in the second pass of a
            // repeated hour (fixed-time job). Resume past that stretch rather than walk it.
            (wall, inclusive) = (m, false);
            match self.tz.from_local_datetime(&m) {
                LocalResult::None => {
                    if let Some(end) = gap_end(&m, self.tz) {
                        (wall, inclusive) = (end.naive_local(), true);
                    }
                }
                LocalResult::Ambiguous(first, second) => {
                    let t = transition(self.tz, first.to_utc(), second.to_utc());
                    if let Some(end) = wall_of(t, first.offset().fix().local_minus_utc()) {
                        (wall, inclusive) = (end, true);
                    }
                }
                LocalResult::Single(_) => {}
            }
        }
        // If `a` is in the first pass of a repeated hour, the wall times up to `a`'s come
        // round again after the change, and a wildcard job is due on them.
        if self.wildcard
            && let LocalResult::Ambiguous(first, second) = self.tz.from_local_datetime(&wall_a)
            && first.to_utc() == a
        {
            let t = transition(self.tz, a, second.to_utc());
            let repeat_from = t.with_timezone(&self.tz).naive_local();
            if let Some(m) = self.next_wall(repeat_from, true)
                && m <= wall_a
                && let LocalResult::Ambiguous(_, again) = self.tz.from_local_datetime(&m)
            {
                let again = again.to_utc();
                best = Some(best.map_or(again, |b| b.min(again)));
            }
        }
        best
    }

    fn latest_at_or_before(&self, a: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let wall_a = local_wall(a, self.tz)?;
        // The mirror image of `next_after`: walk wall times back from `a`'s own.
        let mut best = None;
        let (mut wall, mut inclusive) = (wall_a, true);
        for _ in 0..MAX_STEPS {
            let Some(m) = self.prev_wall(wall, inclusive) else {
                break;
            };
            best = self.due(m).into_iter().flatten().filter(|t| *t <= a).max();
            if best.is_some() {
                break;
            }
            (wall, inclusive) = (m, false);
            // Only a wildcard job's gap can come up empty here: skip to the gap's start.
            if let Some((start, _)) = GapInfo::new(&m, &self.tz).and_then(|g| g.begin) {
                wall = start;
            }
        }
        // If `a` is in the second pass of a repeated hour, the first pass also ran the wall
        // times after `a`'s, before the change.
        if let LocalResult::Ambiguous(first, second) = self.tz.from_local_datetime(&wall_a)
            && second.to_utc() == a
        {
            let t = transition(self.tz, first.to_utc(), a);
            if let Some(first_pass_end) = wall_of(t, first.offset().fix().local_minus_utc())
                && let Some(m) = self.prev_wall(first_pass_end, false)
                && m > wall_a
                && let LocalResult::Ambiguous(earlier, _) = self.tz.from_local_datetime(&m)
            {
                let earlier = earlier.to_utc();
                best = Some(best.map_or(earlier, |b| b.max(earlier)));
            }
        }
        best
    }
}

/// The wall-clock reading of `t` in `tz`; `None` at the very ends of chrono's range, where
/// `DateTime::naive_local` would panic.
fn local_wall(t: DateTime<Utc>, tz: Tz) -> Option<NaiveDateTime> {
    wall_of(
        t,
        tz.offset_from_utc_datetime(&t.naive_utc())
            .fix()
            .local_minus_utc(),
    )
}

/// The first instant after the spring-forward gap that `wall` falls in.
fn gap_end(wall: &NaiveDateTime, tz: Tz) -> Option<DateTime<Tz>> {
    GapInfo::new(wall, &tz).and_then(|g| g.end)
}

/// The wall-clock reading of instant `t` at UTC offset `offset_secs`.
fn wall_of(t: DateTime<Utc>, offset_secs: i32) -> Option<NaiveDateTime> {
    t.naive_utc()
        .checked_add_signed(TimeDelta::seconds(i64::from(offset_secs)))
}

/// The clock change between `lo` and `hi` (the two readings of one repeated wall time): the
/// first instant after `lo` whose UTC offset differs from `lo`'s. chrono-tz does not expose
/// its transition table, so this bisects on offsets; the bracket is at most a few hours.
fn transition(tz: Tz, lo: DateTime<Utc>, hi: DateTime<Utc>) -> DateTime<Utc> {
    let offset = |secs: i64| {
        DateTime::from_timestamp(secs, 0).map(|t| {
            tz.offset_from_utc_datetime(&t.naive_utc())
                .fix()
                .local_minus_utc()
        })
    };
    let before = offset(lo.timestamp());
    let (mut l, mut h) = (lo.timestamp(), hi.timestamp());
    while h - l > 1 {
        let mid = l + (h - l) / 2;
        if offset(mid) == before {
            l = mid;
        } else {
            h = mid;
        }
    }
    DateTime::from_timestamp(h, 0).unwrap_or(hi)
}
