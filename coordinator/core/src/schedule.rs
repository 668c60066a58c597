//! Crontab schedule semantics on top of croner: what a schedule expression means, and its due
//! instants in a time zone, DST included.
//!
//! Accepted expressions:
//! - five fields (`minute hour day-of-month month day-of-week`), cronie/Vixie compatible: lists,
//!   ranges, steps, month and day names, 0 and 7 both Sunday;
//! - six fields with seconds first (`*/10 * * * * *`), for sub-minute jobs;
//! - the aliases `@yearly @annually @monthly @weekly @daily @midnight @hourly` and `@reboot`
//!   (case-insensitive).
//!
//! Day-of-month and day-of-week follow Vixie cron: a day matches when either field matches
//! (OR) if both are restricted, and both must match (AND) when either field starts with `*`
//! (so `0 0 1,15 * */3` is "the 1st and 15th, when also a matching weekday", as in cronie).
//!
//! Time zones follow Vixie's DST rules as croner implements them: an instant that falls in a
//! spring-forward gap runs once, just after the gap; an instant repeated by a fall-back runs once.
//! Every function takes the time as an argument; nothing here reads a clock.

use std::fmt;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// A schedule expression that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The expression is empty.
    #[error("the schedule is empty")]
    Empty,
    /// An `@` word that is not an alias.
    #[error(
        "unknown schedule alias {0:?}: expected @yearly, @annually, @monthly, @weekly, @daily, \
         @midnight, @hourly or @reboot"
    )]
    UnknownAlias(String),
    /// Not five or six fields.
    #[error("schedule {expr:?} has {count} fields: expected 5, or 6 with seconds first")]
    FieldCount {
        /// The expression.
        expr: String,
        /// How many fields it has.
        count: usize,
    },
    /// croner rejected a field.
    #[error("invalid schedule {expr:?}: {reason}")]
    Invalid {
        /// The expression.
        expr: String,
        /// croner's reason.
        reason: String,
    },
    /// The time zone is not in the IANA database.
    #[error("unknown time zone {0:?}: expected an IANA name such as Europe/Berlin")]
    UnknownTimeZone(String),
}

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// `@reboot`: once when the executor starts, never on a schedule.
    Reboot,
    /// A recurring schedule (boxed: croner's parsed pattern is large next to `Reboot`).
    Cron(Box<CronSchedule>),
}

/// A recurring schedule in a time zone.
#[derive(Clone)]
pub struct CronSchedule {
    cron: Cron,
    tz: Tz,
    seconds: bool,
    expr: String,
}

impl fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSchedule")
            .field("expr", &self.expr)
            .field("tz", &self.tz.name())
            .field("seconds", &self.seconds)
            .finish()
    }
}

fn expand_alias(expr: &str) -> Result<Option<&'static str>, ScheduleError> {
    if !expr.starts_with('@') {
        return Ok(None);
    }
    let five = match expr.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return Err(ScheduleError::UnknownAlias(expr.to_owned())),
    };
    Ok(Some(five))
}

impl Schedule {
    /// Parses `expr` for evaluation in `timezone` (an IANA name; `None` for UTC).
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
        let (seconds, dom, dow) = match fields.len() {
            5 => (false, fields[2], fields[4]),
            6 => (true, fields[3], fields[5]),
            count => {
                return Err(ScheduleError::FieldCount {
                    expr: expr.to_owned(),
                    count,
                });
            }
        };
        let parser = CronParser::builder()
            .seconds(if seconds {
                Seconds::Required
            } else {
                Seconds::Disallowed
            })
            .year(Year::Disallowed)
            // Vixie: AND when either day field starts with `*`, OR otherwise.
            .dom_and_dow(dom.starts_with('*') || dow.starts_with('*'))
            .build();
        let cron = parser.parse(text).map_err(|e| ScheduleError::Invalid {
            expr: expr.to_owned(),
            reason: e.to_string(),
        })?;
        Ok(Schedule::Cron(Box::new(CronSchedule {
            cron,
            tz,
            seconds,
            expr: expr.to_owned(),
        })))
    }

    /// True for `@reboot`.
    pub fn is_reboot(&self) -> bool {
        matches!(self, Schedule::Reboot)
    }

    /// True for a six-field schedule with seconds.
    pub fn has_seconds(&self) -> bool {
        matches!(self, Schedule::Cron(c) if c.seconds)
    }

    /// The first due instant strictly after `after`; `None` for `@reboot` or when the
    /// schedule has no further instant.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let Schedule::Cron(c) = self else {
            return None;
        };
        let local = after.with_timezone(&c.tz);
        c.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// The most recent due instant at or before `at`; `None` for `@reboot` or when there is
    /// none.
    pub fn latest_at_or_before(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let Schedule::Cron(c) = self else {
            return None;
        };
        let local = at.with_timezone(&c.tz);
        c.cron
            .find_previous_occurrence(&local, true)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }
}
