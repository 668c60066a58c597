//! Schedule semantics: cronie/Vixie compatibility and DST, on the instants the shim fires at.

use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use cronstable_core::schedule::{Schedule, ScheduleError};
use proptest::prelude::*;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

/// The next `n` instants after `from`, rendered in `tz` with their offset.
fn next_n(expr: &str, tz: &str, from: DateTime<Utc>, n: usize) -> Vec<String> {
    let s = Schedule::parse(expr, Some(tz)).unwrap();
    let zone: Tz = tz.parse().unwrap();
    let mut out = Vec::new();
    let mut t = from;
    for _ in 0..n {
        t = s.next_after(t).unwrap();
        out.push(
            t.with_timezone(&zone)
                .format("%Y-%m-%d %H:%M:%S %:z")
                .to_string(),
        );
    }
    out
}

#[test]
fn weekdays_are_numbered_like_cron_with_0_and_7_both_sunday() {
    let thu = utc(2026, 3, 5, 0, 0, 0); // a Thursday
    let days = |expr: &str| {
        let s = Schedule::parse(expr, None).unwrap();
        let mut t = thu;
        (0..5)
            .map(|_| {
                t = s.next_after(t).unwrap();
                t.weekday().to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(days("0 9 * * 1-5"), ["Thu", "Fri", "Mon", "Tue", "Wed"]);
    assert_eq!(days("0 9 * * MON-FRI"), ["Thu", "Fri", "Mon", "Tue", "Wed"]);
    assert_eq!(days("0 0 * * 0"), ["Sun"; 5]);
    assert_eq!(days("0 0 * * 7"), ["Sun"; 5]);
    assert_eq!(days("0 0 * * sun"), ["Sun"; 5]);
}

#[test]
fn day_of_month_and_day_of_week_follow_vixie_or_and_and() {
    // Both restricted: OR (the 13th, or any Friday).
    let s = Schedule::parse("0 0 13 * 5", None).unwrap();
    let mut t = utc(2026, 3, 1, 0, 0, 0);
    let mut got = Vec::new();
    for _ in 0..4 {
        t = s.next_after(t).unwrap();
        got.push((t.day(), t.weekday().to_string()));
    }
    assert_eq!(
        got,
        [
            (6, "Fri".into()),
            (13, "Fri".into()),
            (20, "Fri".into()),
            (27, "Fri".into())
        ]
    );
    let t = s.next_after(utc(2026, 4, 11, 0, 0, 0)).unwrap();
    assert_eq!(
        (t.day(), t.weekday().to_string()),
        (13, "Mon".into()),
        "the 13th even on a Monday"
    );

    // One field starts with `*`: AND (cronie's rule), so only the 1st/15th that fall on a
    // weekday divisible by 3 (Sun, Wed, Sat).
    let s = Schedule::parse("0 0 1,15 * */3", None).unwrap();
    let mut t = utc(2026, 1, 1, 0, 0, 0);
    for _ in 0..6 {
        t = s.next_after(t).unwrap();
        assert!(t.day() == 1 || t.day() == 15, "{t}");
        assert!(
            matches!(t.weekday().num_days_from_sunday(), 0 | 3 | 6),
            "{t}"
        );
    }
    // A plain `*` day-of-month with a weekday list is just those weekdays.
    let s = Schedule::parse("0 0 * * 1", None).unwrap();
    assert_eq!(
        s.next_after(utc(2026, 3, 5, 0, 0, 0)).unwrap(),
        utc(2026, 3, 9, 0, 0, 0)
    );
}

#[test]
fn aliases_expand_as_in_cronie() {
    let from = utc(2026, 3, 5, 10, 30, 0);
    for (alias, expected) in [
        ("@yearly", utc(2027, 1, 1, 0, 0, 0)),
        ("@annually", utc(2027, 1, 1, 0, 0, 0)),
        ("@monthly", utc(2026, 4, 1, 0, 0, 0)),
        ("@weekly", utc(2026, 3, 8, 0, 0, 0)),
        ("@daily", utc(2026, 3, 6, 0, 0, 0)),
        ("@midnight", utc(2026, 3, 6, 0, 0, 0)),
        ("@HOURLY", utc(2026, 3, 5, 11, 0, 0)),
    ] {
        let s = Schedule::parse(alias, None).unwrap();
        assert_eq!(s.next_after(from), Some(expected), "{alias}");
    }
    let reboot = Schedule::parse("@reboot", None).unwrap();
    assert!(reboot.is_reboot());
    assert_eq!(reboot.next_after(from), None);
    assert!(matches!(
        Schedule::parse("@fortnightly", None),
        Err(ScheduleError::UnknownAlias(_))
    ));
}

#[test]
fn six_fields_put_seconds_first_and_seven_are_refused() {
    let s = Schedule::parse("*/10 * * * * *", None).unwrap();
    assert!(s.has_seconds());
    let t = utc(2026, 3, 5, 10, 0, 3);
    assert_eq!(s.next_after(t), Some(utc(2026, 3, 5, 10, 0, 10)));
    assert!(!Schedule::parse("* * * * *", None).unwrap().has_seconds());
    assert!(matches!(
        Schedule::parse("0 0 0 1 1 * 2030", None),
        Err(ScheduleError::FieldCount { count: 7, .. })
    ));
}

#[test]
fn errors_name_the_problem() {
    let e = Schedule::parse("61 * * * *", None).unwrap_err().to_string();
    assert!(e.contains("61 * * * *"), "{e}");
    let e = Schedule::parse("* * * * *", Some("Mars/Olympus"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("Mars/Olympus"), "{e}");
    assert_eq!(
        Schedule::parse("  ", None).unwrap_err(),
        ScheduleError::Empty
    );
}

#[test]
fn a_job_in_the_spring_forward_gap_runs_once_just_after_it() {
    // New York 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist that day.
    let got = next_n(
        "30 2 * * *",
        "America/New_York",
        utc(2026, 3, 7, 12, 0, 0),
        3,
    );
    assert_eq!(
        got,
        [
            "2026-03-08 03:00:00 -04:00",
            "2026-03-09 02:30:00 -04:00",
            "2026-03-10 02:30:00 -04:00"
        ]
    );
    let got = next_n("30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 12, 0, 0), 2);
    assert_eq!(
        got,
        ["2026-03-29 03:00:00 +02:00", "2026-03-30 02:30:00 +02:00"]
    );
}

#[test]
fn a_job_in_the_fall_back_overlap_runs_once() {
    // New York 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice on the wall.
    let got = next_n(
        "30 1 * * *",
        "America/New_York",
        utc(2026, 10, 31, 12, 0, 0),
        3,
    );
    assert_eq!(
        got,
        [
            "2026-11-01 01:30:00 -04:00",
            "2026-11-02 01:30:00 -05:00",
            "2026-11-03 01:30:00 -05:00"
        ]
    );
}

#[test]
fn a_frequent_job_across_the_overlap_fires_every_real_instant_in_order() {
    let got = next_n(
        "*/30 * * * *",
        "America/New_York",
        utc(2026, 11, 1, 4, 0, 0),
        6,
    );
    assert_eq!(
        got,
        [
            "2026-11-01 00:30:00 -04:00",
            "2026-11-01 01:00:00 -04:00",
            "2026-11-01 01:30:00 -04:00",
            "2026-11-01 01:00:00 -05:00",
            "2026-11-01 01:30:00 -05:00",
            "2026-11-01 02:00:00 -05:00",
        ]
    );
}

#[test]
fn instants_are_strictly_increasing_across_every_clock_change_of_the_year() {
    // The whole of 2026 in each zone, every instant of each schedule in turn.
    for tz in [
        "UTC",
        "America/New_York",
        "Europe/Berlin",
        "Australia/Lord_Howe",
        "Asia/Kolkata",
    ] {
        for expr in ["*/15 * * * *", "0 * * * *", "30 2 * * *", "30 1 * * 0"] {
            let s = Schedule::parse(expr, Some(tz)).unwrap();
            let (mut t, end) = (utc(2026, 1, 1, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0));
            while t < end {
                let next = s.next_after(t).unwrap();
                assert!(next > t, "{expr} in {tz}: {next} after {t}");
                t = next;
            }
        }
    }
}

fn expressions() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("* * * * *".to_owned()),
        Just("*/7 * * * *".to_owned()),
        Just("0 */3 * * 1-5".to_owned()),
        Just("15 4 1,15 * *".to_owned()),
        Just("0 0 13 * 5".to_owned()),
        Just("30 2 * * *".to_owned()),
        Just("*/20 * * * * *".to_owned()),
        Just("@weekly".to_owned()),
    ]
}

proptest! {
    #[test]
    fn latest_at_or_before_inverts_next_after(
        expr in expressions(),
        zone in prop_oneof![Just("UTC"), Just("America/New_York"), Just("Europe/Berlin")],
        secs in 1_767_225_600i64..1_798_761_600i64, // during 2026
    ) {
        let s = Schedule::parse(&expr, Some(zone)).unwrap();
        let at = DateTime::from_timestamp(secs, 0).unwrap();
        let latest = s.latest_at_or_before(at).unwrap();
        prop_assert!(latest <= at);
        // Nothing is due strictly between `latest` and `at`.
        let next = s.next_after(latest).unwrap();
        prop_assert!(next > at, "{expr} {zone}: {latest} then {next}, but at={at}");
        // And `latest` is itself a due instant.
        prop_assert_eq!(s.next_after(latest - chrono::TimeDelta::seconds(1)), Some(latest));
    }

    #[test]
    fn parsing_never_panics(text in "\\PC{0,40}", tz in proptest::option::of("[A-Za-z/_]{0,20}")) {
        let _ = Schedule::parse(&text, tz.as_deref());
    }

    #[test]
    fn five_field_instants_are_whole_minutes(expr in expressions(), secs in 1_767_225_600i64..1_798_761_600i64) {
        let s = Schedule::parse(&expr, None).unwrap();
        let t = s.next_after(DateTime::from_timestamp(secs, 0).unwrap()).unwrap();
        if !s.has_seconds() {
            prop_assert_eq!(t.second(), 0);
        }
    }
}

#[test]
fn a_schedule_that_cannot_fire_for_years_gets_a_warning_and_others_none() {
    let now = chrono::DateTime::parse_from_rfc3339("2026-12-06T10:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let warn = |expr: &str| Schedule::parse(expr, None).unwrap().idle_warning(now);
    for never in [
        "0 0 31 2 *",
        "0 0 30 2 *",
        "0 0 31 4,6,9,11 *",
        "0 0 31 2 */2",
    ] {
        let w = warn(never).unwrap_or_else(|| panic!("{never}: no warning"));
        assert!(w.contains("never fires"), "{never}: {w}");
    }
    // Sunday the 29th of February (AND rule: the weekday field starts with `*`): 2032 is the
    // next one, more than four years away.
    let sparse = warn("0 0 29 2 */7").expect("years away");
    assert!(
        sparse.contains("does not fire before 2032-02-29"),
        "{sparse}"
    );
    for fires in [
        "0 0 29 2 *",
        "0 0 31 * *",
        "0 0 13 * 5",
        "@yearly",
        "@reboot",
        "* * * * *",
    ] {
        assert_eq!(warn(fires), None, "{fires}");
    }
}
