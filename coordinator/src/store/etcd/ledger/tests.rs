//! The etcd ledger's encoding, without an etcd. The checks against a real etcd are in
//! [`super::checks`], run by the integration tier (`tests/tests/integration/etcd_ledger.rs`).

use super::checks::record;
use super::*;
use crate::ledger::{Event, RunEnd};

#[test]
fn a_long_output_tail_is_cut_in_etcd_and_refused_batches_are_told_apart() {
    let long = "é".repeat(2_000);
    let r = record(
        "backup",
        1_000,
        Event::Finished(RunEnd {
            started_at_ms: 1_000,
            finished_at_ms: 2_000,
            duration_ms: 1_000,
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            output_tail: format!("start{long}end"),
        }),
    );
    let back = decode(&value_of(&r)).unwrap();
    let Event::Finished(RunEnd { output_tail, .. }) = back.event else {
        panic!("{back:?}")
    };
    assert!(output_tail.len() <= TAIL_IN_ETCD && output_tail.ends_with("end"));
    assert!(is_permanent("etcdserver: request is too large"));
    assert!(!is_permanent("connecting timed out"));
}
