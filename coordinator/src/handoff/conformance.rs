//! The handoff-record checks every store passes (the lease conformance suite's habit for the
//! handoff store): a claim succeeds exactly once, and a claim whose answer was lost is resumed.
//! The coordinator's unit tests run them on the filesystem store; the integration tier runs
//! them on a real etcd through [`RealEtcd`].

use std::sync::Arc;
use std::time::Duration;

use cronstable_core::{FiringKind, JobSpec, Reason};

use super::resume::{InFlight, scan_once};
use super::{HandoffRecord, Handoffs};
use crate::cluster::{ClusterView, Election, ManagedView};
use crate::lease::conformance::{RealEtcd, etcd_config};
use crate::ledger::{Event, Record};
use crate::state::{CoordinatorState, Instruction};
use crate::store::etcd::handoff::EtcdHandoffs;

/// A handoff record of `job` at `scheduled_at_ms`, written at `created_at_ms`.
pub fn record(job: &str, scheduled_at_ms: i64, created_at_ms: i64) -> HandoffRecord {
    HandoffRecord {
        job: job.into(),
        job_set_id: "set-1".into(),
        scheduled_at_ms,
        next_attempt: 2,
        remaining_attempts: 3,
        not_before_ms: created_at_ms + 5_000,
        from_node: "n1".into(),
        created_at_ms,
        claimed_by: None,
        claimed_at_ms: None,
    }
}

/// What every store must do: a written record is listed as written; a rewrite of the same
/// firing replaces it; the first claim wins and every later one loses.
pub async fn claims_exactly_once(a: Handoffs, b: Handoffs) {
    assert!(a.pending().await.unwrap().is_empty());
    a.write(&record("backup", 1_000, 10)).await.unwrap();
    a.write(&record("report", 2_000, 10)).await.unwrap();
    let mut rewritten = record("backup", 1_000, 20);
    rewritten.next_attempt = 3;
    rewritten.remaining_attempts = 2;
    a.write(&rewritten).await.unwrap();

    let seen = b.pending().await.unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let backup = seen.iter().find(|p| p.record.job == "backup").unwrap();
    assert_eq!(backup.record, rewritten);
    // Two nodes race for the same record: one wins.
    let (x, y) = tokio::join!(a.claim(backup, "tok-a", 30), b.claim(backup, "tok-b", 30));
    let (x, y) = (x.unwrap(), y.unwrap());
    assert!(x.is_some() ^ y.is_some(), "exactly one claim must win");
    let (claimed, winner, loser) = match (x, y) {
        (Some(c), None) => (c, "tok-a", "tok-b"),
        (None, Some(c)) => (c, "tok-b", "tok-a"),
        _ => unreachable!(),
    };
    assert_eq!(claimed.record.claimed_by.as_deref(), Some(winner));
    assert!(a.claim(backup, "tok-c", 31).await.unwrap().is_none());
    // The claim stays in the store, marked, until it is removed or released.
    let seen = a.pending().await.unwrap();
    let held = seen.iter().find(|p| p.record.job == "backup").unwrap();
    assert_eq!(held.record.claimed_by.as_deref(), Some(winner));
    assert_eq!(held.record.unclaimed(), rewritten);
    // A claimer that lost the answer finds its own claim, and only its own.
    let found = b.find_claim(backup, winner).await.unwrap().unwrap();
    assert_eq!(found.name, claimed.name);
    assert_eq!(found.revision, claimed.revision);
    assert!(b.find_claim(backup, loser).await.unwrap().is_none());
    // Released: unclaimed again, and claimable.
    a.release(&claimed).await.unwrap();
    let seen = b.pending().await.unwrap();
    let again = seen.iter().find(|p| p.record.job == "backup").unwrap();
    assert_eq!(again.record, rewritten);
    let claimed = b.claim(again, "tok-d", 40).await.unwrap().unwrap();
    // Removed once acted on: gone, and a second removal reports nothing removed.
    assert!(a.remove(&claimed).await.unwrap());
    assert!(!b.remove(&claimed).await.unwrap());
    assert!(b.find_claim(again, "tok-d").await.unwrap().is_none());
    let left = a.pending().await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].record.job, "report");
}

/// A coordinator state for node `me` that leads a lease election for the next minute.
pub fn leading_state(me: &str) -> CoordinatorState {
    let view = ClusterView {
        node_name: me.into(),
        election: Election::Managed(ManagedView {
            quorate: true,
            leader: Some(me.into()),
            lead_until: Some(tokio::time::Instant::now() + Duration::from_secs(60)),
            ..ManagedView::default()
        }),
        status: Arc::default(),
    };
    let (tx, rx) = tokio::sync::watch::channel(view);
    std::mem::forget(tx); // the view never changes in these tests
    CoordinatorState::new(rx)
}

/// The record of a decided (RUN) retry, as an executor that acted on a resumed sequence leaves.
pub fn decided(job: &str, scheduled_at_ms: i64, attempt: u32, at_ms: i64) -> Record {
    Record {
        job: job.into(),
        scheduled_at_ms,
        kind: FiringKind::Retry { attempt },
        attempt,
        node: "n2".into(),
        recorded_at_ms: at_ms,
        event: Event::Decided {
            verdict: cronstable_core::Verdict::Run,
            reason: Reason::Leader,
        },
    }
}

/// One record for `backup` in `h` (written a second before "now"), and a leading node n2
/// whose executor registered `backup`; with that "now".
pub async fn a_backup_record_held_for_n2(h: &Handoffs) -> (CoordinatorState, i64) {
    let state = leading_state("n2");
    state
        .registry
        .register(
            "shim-n2",
            vec![JobSpec::new("backup", "* * * * *", "false")],
        )
        .unwrap();
    let now = 10_000_000;
    h.write(&record("backup", 1_000, now - 1_000))
        .await
        .unwrap();
    (state, now)
}

/// A claim whose answer was lost (the request timed out while the store completed it) is not a
/// lost sequence: the next pass finds the claim by its token and resumes it (RTY-04, RTY-07).
pub async fn a_claim_whose_answer_was_lost_is_resumed(h: Handoffs) {
    let (state, now) = a_backup_record_held_for_n2(&h).await;
    let scanned = h.pending().await.unwrap().remove(0);
    // The claim happened in the store; the claimer only knows it asked.
    assert!(
        h.claim(&scanned, "lost-answer", now)
            .await
            .unwrap()
            .is_some()
    );
    let mut in_flight = InFlight::default();
    in_flight.claim_unanswered(scanned, "lost-answer".into());

    let mut watch = state.open_watch("shim-n2");
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert!(matches!(
        watch.try_recv().unwrap(),
        Instruction::ResumeRetry {
            next_attempt: 2,
            scheduled_at_ms: 1_000,
            ..
        }
    ));
    assert!(watch.try_recv().is_err(), "sent once");
    assert_eq!((in_flight.len(), in_flight.unsure()), (1, 0));
    // The executor acts on it: the claimed record goes, with nothing written back.
    state.record(decided("backup", 1_000, 2, now));
    scan_once(&h, &state, now, &mut in_flight).await.unwrap();
    assert!(in_flight.is_empty());
    assert!(h.pending().await.unwrap().is_empty());
    assert!(watch.try_recv().is_err());
}

/// On etcd: records are keys, claimed once by their mod revision; a record rewritten after a
/// scan is not claimed on the strength of the old version.
pub async fn etcd_records_are_keys_claimed_once_by_mod_revision(etcd: &impl RealEtcd) {
    let config = etcd_config(vec![etcd.endpoint()], 6);
    claims_exactly_once(
        EtcdHandoffs::without_password(&config),
        EtcdHandoffs::without_password(&config),
    )
    .await;
    let h = EtcdHandoffs::without_password(&config);
    let left = h.pending().await.unwrap();
    assert_eq!(left[0].name, "cronstable/leader/handoff/report/2000");
    h.write(&record("report", 2_000, 99)).await.unwrap();
    assert!(h.claim(&left[0], "tok", 100).await.unwrap().is_none());
    assert_eq!(h.pending().await.unwrap()[0].record.created_at_ms, 99);
}

/// On etcd: a claim whose answer was lost is resumed.
pub async fn an_etcd_claim_whose_answer_was_lost_is_resumed(etcd: &impl RealEtcd) {
    a_claim_whose_answer_was_lost_is_resumed(EtcdHandoffs::without_password(&etcd_config(
        vec![etcd.endpoint()],
        6,
    )))
    .await;
}
