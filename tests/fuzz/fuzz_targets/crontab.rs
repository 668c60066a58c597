//! The crontab parser (`--crontab`, `jobs.crontab`, `jobs.systemCrontab`): any bytes. It never
//! panics, every rejected line says why, and every job it loads has a schedule that parses
//! again and can be asked for its next instant.
//!
//! The assertions live in `cronstable_fuzz_checks::crontab`, which the stable test run also replays
//! every seed and saved crash through (`tests/fuzz-checks/tests/replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cronstable_fuzz_checks::crontab(data));
