//! The gRPC request conversions: protobuf bytes of `RegisterJobs`, `ShouldRun` and
//! `ShouldRunBatch` requests, as any executor may send them. Decoding and converting never
//! panic, and every refusal names the field and what was wrong with it.
#![no_main]

use cronstable_proto::convert::{firing_from_wire, job_from_wire};
use cronstable_proto::v1 as pb;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn ask(r: &pb::ShouldRunRequest) {
    if let Err(e) = firing_from_wire(&r.job, r.scheduled_at_ms, r.kind, r.attempt) {
        assert!(!e.field.is_empty() && !e.reason.trim().is_empty(), "{e:?}");
    }
}

fuzz_target!(|data: &[u8]| {
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
});
