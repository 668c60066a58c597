//! The YAML job file parser (`--jobs`, `jobs.jobFile`): any bytes. It never panics, and every
//! rejection says what was wrong.
#![no_main]

use cronstable_core::jobfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parsed = jobfile::parse(&text, "fuzz.yaml");
    for e in &parsed.errors {
        assert!(
            !e.message.trim().is_empty(),
            "a rejection without a reason: {e:?}"
        );
    }
    for entry in &parsed.entries {
        assert!(!entry.job.name.is_empty(), "a job without a name loaded");
    }
});
