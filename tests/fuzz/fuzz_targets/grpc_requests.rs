//! The gRPC request conversions: protobuf bytes of `RegisterJobs`, `ShouldRun` and
//! `ShouldRunBatch` requests, as any executor may send them. Decoding and converting never
//! panic, and every refusal names the field and what was wrong with it.
//!
//! The assertions live in `cronstable_fuzz_checks::grpc_requests`, which the stable test run also replays
//! every seed and saved crash through (`tests/fuzz-checks/tests/replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cronstable_fuzz_checks::grpc_requests(data));
