//! A peer's `/peer` body (JSON, from the network, after mTLS): any bytes. It never panics; a
//! body that breaks a bound is "no data" with a reason.
//!
//! The assertions live in `cronstable_fuzz_checks::peer_body`, which the stable test run also replays
//! every seed and saved crash through (`tests/fuzz-checks/tests/replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cronstable_fuzz_checks::peer_body(data));
