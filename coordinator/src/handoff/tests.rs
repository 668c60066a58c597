//! The lease holder's resume pass over handoff records (RTY-04, RTY-07), on the filesystem
//! store in a temporary directory. Each store's own handoff tests are in its folder under
//! `crate::store`; the same checks on a real etcd run in the integration tier
//! (`tests/tests/integration/etcd_handoff.rs`).

use cronstable_core::{FiringKind, Reason};

use super::conformance::{a_backup_record_held_for_n2, record};
use super::resume::{InFlight, scan_once};
use super::{Handoffs, RECORD_EXPIRY};
use crate::lease::conformance::fs_config;
use crate::ledger::{Event, Record};
use crate::state::{CoordinatorState, Instruction};
use crate::store::filesystem::handoff::FilesystemHandoffs;

/// A store in `dir` holding one record for `backup` (written a second before "now"), and a
/// leading node n2 whose executor registered `backup`; with that "now".
async fn holder_with_a_backup_record(dir: &std::path::Path) -> (Handoffs, CoordinatorState, i64) {
    let h = FilesystemHandoffs::handoffs(&fs_config(dir));
    let (state, now) = a_backup_record_held_for_n2(&h).await;
    (h, state, now)
}

#[tokio::test]
async fn rty_04_the_holder_resumes_its_own_jobs_leaves_others_and_expires_old_records() {
    let dir = tempfile::tempdir().unwrap();
    let (h, state, now) = holder_with_a_backup_record(dir.path()).await;
    h.write(&record("elsewhere", 1_000, now - 1_000))
        .await
        .unwrap();
    let old = now - RECORD_EXPIRY.as_millis() as i64 - 1;
    h.write(&record("backup", 500, old)).await.unwrap();

    // Not watching yet: the record of its own job waits too (only the expired one goes).
    let mut in_flight = InFlight::default();
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    let left: Vec<_> = h.pending().await.unwrap();
    assert_eq!(left.len(), 2, "{left:?}");
    let cancelled = state
        .ledger
        .inspect("backup", |r| r.iter().cloned().collect::<Vec<_>>());
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].kind, FiringKind::Retry { attempt: 2 });
    assert!(matches!(
        &cancelled[0].event,
        Event::Skipped { reason: Some(Reason::NotOwner), message } if message.contains("retry abandoned")
    ));

    let mut watch = state.open_watch("shim-n2");
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert_eq!(
        watch.try_recv().unwrap(),
        Instruction::ResumeRetry {
            job: "backup".into(),
            scheduled_at_ms: 1_000,
            next_attempt: 2,
            remaining_attempts: 3,
            not_before_ms: now + 4_000,
        }
    );
    // The resumed record stays, claimed, until the executor acts on it.
    let left = h.pending().await.unwrap();
    assert_eq!(left.len(), 2, "{left:?}");
    let backup = left.iter().find(|p| p.record.job == "backup").unwrap();
    assert!(backup.record.claimed_by.is_some());
    let elsewhere = left.iter().find(|p| p.record.job == "elsewhere").unwrap();
    assert!(elsewhere.record.claimed_by.is_none());
}

/// A shim restart loses no handed-off sequence: one sent to an executor whose Watch stream
/// closes before it acted goes back to the store and is offered again; one it acted on does not.
#[tokio::test]
async fn rty_04_a_sequence_its_executor_never_acted_on_goes_back_to_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (h, state, now) = holder_with_a_backup_record(dir.path()).await;
    let mut in_flight = InFlight::default();

    let watch = state.open_watch("shim-n2");
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    let held = h.pending().await.unwrap();
    assert!(held[0].record.claimed_by.is_some(), "claimed: {held:?}");
    assert_eq!(in_flight.len(), 1);
    drop(watch); // the shim died before it asked about attempt 2
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert!(in_flight.is_empty());
    let back = h.pending().await.unwrap();
    assert_eq!(back.len(), 1, "released: {back:?}");
    assert_eq!(back[0].record.next_attempt, 2);
    assert!(back[0].record.claimed_by.is_none(), "released: {back:?}");

    // The restarted shim watches again: offered again, and this time it acts on it.
    let mut watch = state.open_watch("shim-n2");
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert!(matches!(
        watch.try_recv().unwrap(),
        Instruction::ResumeRetry {
            next_attempt: 2,
            ..
        }
    ));
    state.record(Record {
        job: "backup".into(),
        scheduled_at_ms: 1_000,
        kind: FiringKind::Retry { attempt: 2 },
        attempt: 2,
        node: "n2".into(),
        recorded_at_ms: now,
        event: Event::Decided {
            verdict: cronstable_core::Verdict::Run,
            reason: Reason::Leader,
        },
    });
    drop(watch);
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert!(in_flight.is_empty());
    assert!(
        h.pending().await.unwrap().is_empty(),
        "acted on: not written back"
    );
}

/// Another claimer's claim is left alone (it may be resuming it right now); once the record is
/// past its expiry, the claimer is taken to be gone and the record is dropped with a cancelled
/// record instead of being run again.
#[tokio::test]
async fn rty_04_another_claimers_record_is_left_alone_until_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let (h, state, now) = holder_with_a_backup_record(dir.path()).await;
    let scanned = h.pending().await.unwrap().remove(0);
    h.claim(&scanned, "n3-dead", now).await.unwrap().unwrap();

    let mut watch = state.open_watch("shim-n2");
    let mut in_flight = InFlight::default();
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert!(
        watch.try_recv().is_err(),
        "another node's claim is not resumed here"
    );
    assert_eq!(h.pending().await.unwrap().len(), 1);

    let later = now + RECORD_EXPIRY.as_millis() as i64;
    scan_once(&h, &state, later, &mut in_flight).await.unwrap();
    assert!(
        watch.try_recv().is_err(),
        "an expired claim is not run again"
    );
    assert!(h.pending().await.unwrap().is_empty());
    let cancelled = state
        .ledger
        .inspect("backup", |r| r.iter().cloned().collect::<Vec<_>>());
    assert!(
        matches!(
            &cancelled[..],
            [Record { event: Event::Skipped { message, .. }, .. }] if message.contains("retry abandoned")
        ),
        "{cancelled:?}"
    );
}
