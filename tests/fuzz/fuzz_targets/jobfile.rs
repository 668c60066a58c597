//! The YAML job file parser (`--jobs`, `jobs.jobFile`): any bytes. It never panics, and every
//! rejection says what was wrong.
//!
//! The assertions live in `cronstable_fuzz_checks::jobfile`, which the stable test run also replays
//! every seed and saved crash through (`tests/fuzz-checks/tests/replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cronstable_fuzz_checks::jobfile(data));
