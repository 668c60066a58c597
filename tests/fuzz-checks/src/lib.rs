//! What each fuzz target asserts about one input, in one place for two runners.
//!
//! The nightly fuzzer (`tests/fuzz/`, `cargo +nightly fuzz`) calls these functions with the
//! inputs libFuzzer invents; the stable test run replays every committed seed and every saved
//! crash through the same functions (`tests/replay.rs`). Keeping the assertions here, rather
//! than in the fuzz targets, is what makes a crash found once a regression test for ever:
//! a fixed crash's input goes to `tests/fuzz/regressions/TARGET/` and is replayed by every
//! `cargo test`, no nightly toolchain needed.
//!
//! Each check panics on a finding (that is how libFuzzer and the test harness both see one)
//! and returns quietly on an input the decoder is entitled to refuse.

use chrono::{TimeZone, Utc};
use cronstable_coordinator::config;
use cronstable_coordinator::gossip::node_stats::PeerNodeStats;
use cronstable_coordinator::gossip::wire;
use cronstable_core::schedule::Schedule;
use cronstable_core::{crontab as crontab_parser, jobfile as jobfile_parser};
use cronstable_proto::convert::{firing_from_wire, job_from_wire};
use cronstable_proto::v1 as pb;
use prost::Message;

/// One fuzz target's check: panics on a finding.
pub type Check = fn(&[u8]);

/// Every fuzz target by its name in `tests/fuzz/fuzz_targets/NAME.rs`, with its check. The
/// replay test holds this list against that directory, so a target cannot be added without
/// its seeds being replayed.
pub const TARGETS: &[(&str, Check)] = &[
    ("crontab", crontab),
    ("jobfile", jobfile),
    ("config", config),
    ("peer_body", peer_body),
    ("node_stats", node_stats),
    ("grpc_requests", grpc_requests),
];

/// The crontab parser (`--crontab`, `jobs.crontab`, `jobs.systemCrontab`): any bytes. It never
/// panics, every rejected line says why, and every job it loads has a schedule that parses
/// again and can be asked for its next instant.
pub fn crontab(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = crontab_parser::parse(&text, "fuzz.crontab");
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
}

/// The YAML job file parser (`--jobs`, `jobs.jobFile`): any bytes. It never panics, and every
/// rejection says what was wrong.
pub fn jobfile(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = jobfile_parser::parse(&text, "fuzz.yaml");
    for e in &parsed.errors {
        assert!(
            !e.message.trim().is_empty(),
            "a rejection without a reason: {e:?}"
        );
    }
    for entry in &parsed.entries {
        assert!(!entry.job.name.is_empty(), "a job without a name loaded");
    }
}

/// The coordinator's config loader (`--config`, `validate-config`): any text. It never panics,
/// and a refused file lists at least one error, each naming what was wrong.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A `jobs:` key would read the file it names: keep the check to the config itself.
    if text.contains("jobs") {
        return;
    }
    match config::parse(text, "fuzz.yaml") {
        Ok(loaded) => {
            for w in &loaded.warnings {
                assert!(!w.trim().is_empty(), "an empty warning");
            }
        }
        Err(errors) => {
            let report = errors.to_string();
            assert!(!report.trim().is_empty(), "a refusal without a reason");
        }
    }
}

/// A peer's `/peer` body (JSON, from the network, after mTLS): any bytes. It never panics; a
/// body that breaks a bound is "no data" with a reason.
pub fn peer_body(data: &[u8]) {
    match wire::decode(data) {
        // What was accepted passes the bounds again on its own.
        Ok(body) => wire::check(&body.report).expect("an accepted report passes its own check"),
        Err(e) => assert!(
            !e.to_string().trim().is_empty(),
            "a refusal without a reason"
        ),
    }
}

/// A peer's `X-Cronstable-Node-Stats` header: any bytes a header can carry. It never panics; an
/// accepted value is plausible and survives a round trip through the header form.
pub fn node_stats(data: &[u8]) {
    let Ok(value) = http::HeaderValue::from_bytes(data) else {
        return;
    };
    if let Some(stats) = PeerNodeStats::from_header(&value) {
        let again = stats.to_header().expect("an accepted value fits again");
        assert_eq!(PeerNodeStats::from_header(&again), Some(stats));
    }
}

/// The gRPC request conversions: protobuf bytes of `RegisterJobs`, `ShouldRun` and
/// `ShouldRunBatch` requests, as any executor may send them, the first byte choosing which.
/// Decoding and converting never panic, and every refusal names the field and what was wrong.
pub fn grpc_requests(data: &[u8]) {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            if let Ok(r) = pb::RegisterJobsRequest::decode(bytes) {
                for (i, def) in r.jobs.into_iter().enumerate() {
                    if let Err(e) = job_from_wire(def, i) {
                        assert!(e.field.starts_with(&format!("jobs[{i}].")), "{e:?}");
                        assert!(!e.reason.trim().is_empty(), "{e:?}");
                    }
                }
            }
        }
        1 => {
            if let Ok(r) = pb::ShouldRunRequest::decode(bytes) {
                ask(&r);
            }
        }
        _ => {
            if let Ok(r) = pb::ShouldRunBatchRequest::decode(bytes) {
                r.requests.iter().for_each(ask);
            }
        }
    }
}

fn ask(r: &pb::ShouldRunRequest) {
    if let Err(e) = firing_from_wire(&r.job, r.scheduled_at_ms, r.kind, r.attempt) {
        assert!(!e.field.is_empty() && !e.reason.trim().is_empty(), "{e:?}");
    }
}
