//! The crontab parser (`--crontab`, `jobs.crontab`, `jobs.systemCrontab`): any bytes. It never
//! panics, every rejected line says why, and every job it loads has a schedule that parses
//! again and can be asked for its next instant.
#![no_main]

use chrono::{TimeZone, Utc};
use cronstable_core::crontab;
use cronstable_core::schedule::Schedule;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parsed = crontab::parse(&text, "fuzz.crontab");
    for e in &parsed.errors {
        assert!(
            !e.message.trim().is_empty(),
            "a rejection without a reason: {e:?}"
        );
        assert!(e.line >= 1, "a rejection without a line: {e:?}");
    }
    let now = Utc.with_ymd_and_hms(2026, 12, 6, 10, 0, 0).unwrap();
    for entry in &parsed.entries {
        let job = &entry.job;
        let schedule =
            Schedule::parse(&job.schedule, job.timezone.as_deref()).unwrap_or_else(|e| {
                panic!(
                    "a loaded job's schedule {:?} no longer parses: {e}",
                    job.schedule
                )
            });
        let _ = schedule.next_after(now);
        let _ = schedule.idle_warning(now);
    }
});
