//! Schedule properties, checked against a naive oracle: a minute-by-minute walk of real
//! instants that applies Vixie's rules directly (match the wall clock; a repeated wall time
//! runs once unless the job is a wildcard job; a fixed-time job skipped by a gap runs at the
//! first instant after it). The oracle shares no code with the module: it has its own field
//! matcher for the expressions the generator writes, and asks chrono-tz about offsets.

use chrono::{DateTime, Datelike, LocalResult, NaiveDateTime, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use cronstable_core::schedule::Schedule;
use proptest::prelude::*;

/// Does `field` (the generator's grammar: `*`, `*/S`, `A-B`, `N`, comma lists) hold `v`?
fn field_matches(field: &str, v: u32, min: u32, max: u32) -> bool {
    field.split(',').any(|item| {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, s.parse::<u32>().unwrap()),
            None => (item, 1),
        };
        let (lo, hi) = match range.split_once('-') {
            _ if range == "*" => (min, max),
            Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
            None => (range.parse().unwrap(), range.parse().unwrap()),
        };
        v >= lo && v <= hi && (v - lo).is_multiple_of(step)
    })
}

/// The oracle's reading of a five-field expression at a wall-clock minute.
fn wall_matches(fields: &[&str; 5], w: NaiveDateTime) -> bool {
    let dow = w.weekday().num_days_from_sunday();
    let dom_ok = field_matches(fields[2], w.day(), 1, 31);
    let dow_ok =
        field_matches(fields[4], dow, 0, 7) || (dow == 0 && field_matches(fields[4], 7, 0, 7));
    let days = if fields[2].starts_with('*') || fields[4].starts_with('*') {
        dom_ok && dow_ok
    } else {
        dom_ok || dow_ok
    };
    w.second() == 0
        && field_matches(fields[0], w.minute(), 0, 59)
        && field_matches(fields[1], w.hour(), 0, 23)
        && field_matches(fields[3], w.month(), 1, 12)
        && days
}

/// Every due instant in `(from, to]`, one real minute at a time.
fn oracle(expr: &str, tz: Tz, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let fields: Vec<&str> = expr.split(' ').collect();
    let fields: [&str; 5] = fields.try_into().unwrap();
    let wildcard = fields[0].starts_with('*') || fields[1].starts_with('*');
    let minute = TimeDelta::minutes(1);
    let mut due = Vec::new();
    let mut t = from + minute;
    while t <= to {
        let wall = t.with_timezone(&tz).naive_local();
        let prev_wall = (t - minute).with_timezone(&tz).naive_local();
        let second_pass =
            matches!(tz.from_local_datetime(&wall), LocalResult::Ambiguous(_, l) if l == t);
        let mut hit = wall_matches(&fields, wall) && (wildcard || !second_pass);
        // The clock jumped forward onto `t`: the skipped wall minutes run now, for a
        // fixed-time job.
        let mut skipped = prev_wall + minute;
        while !wildcard && !hit && skipped < wall {
            hit = wall_matches(&fields, skipped);
            skipped += minute;
        }
        if hit {
            due.push(t);
        }
        t += minute;
    }
    due
}

fn field(choices: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    proptest::sample::select(choices)
}

/// Five-field expressions that stress the DST rules: hours around the changes, fixed and
/// wildcard jobs, and both day-matching modes.
fn expressions() -> impl Strategy<Value = String> {
    (
        field(&["0", "30", "*", "*/15", "*/20", "0,30", "15-17", "45", "59"]),
        field(&["*", "0", "1", "2", "1,2", "1-3", "*/2", "0,2,3", "23"]),
        field(&["*", "*", "1,15", "4,5", "*/2", "8"]),
        field(&["*", "*", "*", "3,4", "10-11"]),
        field(&["*", "*", "0", "1-5", "*/3", "6,0", "7"]),
    )
        .prop_map(|(a, b, c, d, e)| format!("{a} {b} {c} {d} {e}"))
}

const ZONES: [&str; 6] = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "America/Havana",
    "Asia/Kolkata",
];

/// The 2026 clock changes (UTC) of each zone in [`ZONES`], to aim windows at.
fn changes(zone: &str) -> Vec<DateTime<Utc>> {
    let at = |m, d, h, mi| Utc.with_ymd_and_hms(2026, m, d, h, mi, 0).unwrap();
    match zone {
        "America/New_York" => vec![at(3, 8, 7, 0), at(11, 1, 6, 0)],
        "Europe/Berlin" => vec![at(3, 29, 1, 0), at(10, 25, 1, 0)],
        "Australia/Lord_Howe" => vec![at(4, 4, 15, 0), at(10, 3, 15, 30)],
        "America/Havana" => vec![at(3, 8, 5, 0), at(11, 1, 5, 0)],
        _ => vec![],
    }
}

/// A zone and a start instant: mostly from 30 hours before to 3 hours after one of the zone's
/// clock changes (so a 36-hour window spans it, and some starts fall inside a repeated hour),
/// otherwise anywhere in 2026.
fn zone_and_start() -> impl Strategy<Value = (&'static str, DateTime<Utc>)> {
    (
        proptest::sample::select(&ZONES[..]),
        any::<proptest::sample::Index>(),
        -3 * 3600..30 * 3600i64,
        1_767_225_600i64..1_798_761_600,
        0..4u8,
    )
        .prop_map(|(zone, which, before, anywhere, dice)| {
            let near = changes(zone);
            let start = if near.is_empty() || dice == 0 {
                DateTime::from_timestamp(anywhere, 0).unwrap()
            } else {
                near[which.index(near.len())] - TimeDelta::seconds(before)
            };
            (zone, start)
        })
}

fn walk_forward(s: &Schedule, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    let mut t = from;
    while let Some(next) = s.next_after(t).filter(|n| *n <= to) {
        out.push(next);
        t = next;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn next_after_finds_exactly_the_oracles_instants(
        expr in expressions(),
        (zone, from) in zone_and_start(),
    ) {
        let tz: Tz = zone.parse().unwrap();
        let s = Schedule::parse(&expr, Some(zone)).unwrap();
        let from = from.with_second(0).unwrap();
        let to = from + TimeDelta::hours(36);
        prop_assert_eq!(walk_forward(&s, from, to), oracle(&expr, tz, from, to), "{} in {}", expr, zone);
    }

    #[test]
    fn latest_at_or_before_is_the_greatest_due_instant_at_or_before(
        expr in expressions(),
        (zone, at) in zone_and_start(),
        nanos in 0u32..1_000_000_000,
    ) {
        let s = Schedule::parse(&expr, Some(zone)).unwrap();
        let at = at + TimeDelta::nanoseconds(i64::from(nanos));
        let latest = s.latest_at_or_before(at).expect("every generated expression fires");
        prop_assert!(latest <= at);
        // `latest` is due (next_after from just before it lands on it)...
        prop_assert_eq!(s.next_after(latest - TimeDelta::seconds(1)), Some(latest));
        // ...and nothing is due in (latest, at].
        prop_assert!(s.next_after(latest).unwrap() > at, "{} in {}: {} then {:?}", expr, zone, latest, s.next_after(latest));
    }

    #[test]
    fn walking_back_visits_the_same_instants_as_walking_forward(
        expr in expressions(),
        (zone, from) in zone_and_start(),
    ) {
        let s = Schedule::parse(&expr, Some(zone)).unwrap();
        let to = from + TimeDelta::hours(30);
        let forward = walk_forward(&s, from, to);
        let mut back = Vec::new();
        let mut t = to;
        while let Some(prev) = s.latest_at_or_before(t).filter(|p| *p > from) {
            back.push(prev);
            t = prev - TimeDelta::seconds(1);
        }
        back.reverse();
        prop_assert_eq!(back, forward);
    }

    #[test]
    fn nothing_panics_on_field_like_garbage_or_extreme_instants(
        text in "[0-9*/,a-zA-Z@? -]{0,30}",
        zone in proptest::option::of(proptest::sample::select(&ZONES[..])),
        secs in proptest::num::i64::ANY,
    ) {
        if let Ok(s) = Schedule::parse(&text, zone) {
            let secs = secs.clamp(DateTime::<Utc>::MIN_UTC.timestamp(), DateTime::<Utc>::MAX_UTC.timestamp());
            let t = DateTime::from_timestamp(secs, 0).unwrap();
            if let Some(n) = s.next_after(t) {
                prop_assert!(n > t);
            }
            if let Some(p) = s.latest_at_or_before(t) {
                prop_assert!(p <= t);
            }
        }
    }
}

#[test]
fn the_ends_of_time_give_none_rather_than_panic() {
    // The calendar searches the years 1 to 5000; beyond them there is nothing, and chrono's own
    // extremes (where a local reading overflows) must not panic either.
    let year = |y: i32| Utc.with_ymd_and_hms(y, 6, 1, 0, 0, 0).unwrap();
    for expr in ["* * * * *", "*/10 * * * * *", "0 0 29 2 *", "@yearly"] {
        for zone in ZONES {
            let s = Schedule::parse(expr, Some(zone)).unwrap();
            for t in [DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC] {
                let _ = (s.next_after(t), s.latest_at_or_before(t));
            }
            assert_eq!(s.next_after(year(6000)), None, "{expr} {zone}");
            assert_eq!(s.latest_at_or_before(year(-5)), None, "{expr} {zone}");
            assert!(s.next_after(year(2999)).is_some(), "{expr} {zone}");
            assert!(s.latest_at_or_before(year(2999)).is_some(), "{expr} {zone}");
        }
    }
}

#[test]
fn every_second_schedules_and_sparse_schedules_stay_cheap() {
    // Sundays the 29th of February are decades apart; the search still takes a few walks.
    let s = Schedule::parse("0 0 29 2 */7", Some("Europe/Berlin")).unwrap();
    let t = Utc.with_ymd_and_hms(2026, 3, 5, 0, 0, 0).unwrap();
    assert_eq!(s.next_after(t).unwrap().year(), 2032);
    assert_eq!(s.latest_at_or_before(t).unwrap().year(), 2004);
    // Every second across a whole repeated hour: 7,200 instants, each the next one.
    let s = Schedule::parse("* * * * * *", Some("America/New_York")).unwrap();
    let from = Utc.with_ymd_and_hms(2026, 11, 1, 5, 0, 0).unwrap();
    let instants = walk_forward(&s, from, from + TimeDelta::hours(2));
    assert_eq!(instants.len(), 7200);
    assert!(
        instants
            .windows(2)
            .all(|w| w[1] - w[0] == TimeDelta::seconds(1))
    );
}
