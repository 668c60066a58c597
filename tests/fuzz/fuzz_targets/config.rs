//! The coordinator's config loader (`--config`, `validate-config`): any text. It never panics,
//! and a refused file lists at least one error, each naming what was wrong.
//!
//! The assertions live in `cronstable_fuzz_checks::config`, which the stable test run also replays
//! every seed and saved crash through (`tests/fuzz-checks/tests/replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cronstable_fuzz_checks::config(data));
