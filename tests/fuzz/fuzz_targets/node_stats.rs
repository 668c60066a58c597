//! A peer's `X-Cronstable-Node-Stats` header: any bytes a header can carry. It never panics; an
//! accepted value is plausible and survives a round trip through the header form.
//!
//! The assertions live in `cronstable_fuzz_checks::node_stats`, which the stable test run also replays
//! every seed and saved crash through (`tests/fuzz-checks/tests/replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cronstable_fuzz_checks::node_stats(data));
