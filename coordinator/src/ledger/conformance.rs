//! What every [`LedgerStore`] must do, one suite for all of them: the coordinator's unit tests
//! run it on the `state.path` file ([`super::file::FileLedger`]); the integration tier runs it
//! on a real etcd ([`crate::store::etcd::ledger::EtcdLedger`]).
//!
//! - history survives a restart: what one process recorded, the next one under the same node
//!   name reads back, in order, record for record; another node's records stay its own;
//! - a reopened ledger goes on after its history: records appended after a restart follow the
//!   old ones on the next start;
//! - the in-memory bound holds on a read back: a job with more than [`Ledger::PER_JOB`] records
//!   comes back with its newest ones.
//!
//! Stores write asynchronously (a writer thread or task drains the ledger's sink), so the
//! checks poll a fresh open until it sees what was written, within [`READ_BACK_WITHIN`].

use std::time::Duration;

use cronstable_core::{FiringKind, Reason, Verdict};

use super::{Event, Ledger, LedgerStore, Record, RunEnd};

/// How long a store may take to make an appended record readable by the next open.
pub const READ_BACK_WITHIN: Duration = Duration::from_secs(15);

/// One record of every event kind, of job `backup` on node n1, recorded at 1001 ms.
pub fn records() -> Vec<Record> {
    let base = |event| Record {
        job: "backup".into(),
        scheduled_at_ms: 1_000,
        kind: FiringKind::Retry { attempt: 2 },
        attempt: 2,
        node: "n1".into(),
        recorded_at_ms: 1_001,
        event,
    };
    vec![
        base(Event::Decided {
            verdict: Verdict::Defer,
            reason: Reason::NoQuorum,
        }),
        base(Event::Started { at_ms: 5, pid: 42 }),
        base(Event::Finished(RunEnd {
            started_at_ms: 5,
            finished_at_ms: 9,
            duration_ms: 4,
            exit_code: None,
            signal: Some(9),
            timed_out: true,
            output_tail: "line\nwith \"quotes\"".into(),
        })),
        base(Event::Skipped {
            reason: Some(Reason::TooLate),
            message: "late".into(),
        }),
        base(Event::HandedOff {
            remaining_attempts: 3,
            transferred: false,
        }),
    ]
}

/// `records()` recorded one millisecond apart from `from_ms` on, as a running coordinator
/// writes them (stores may order by recording time).
fn recorded_from(from_ms: i64) -> Vec<Record> {
    (0..)
        .zip(records())
        .map(|(i, r)| Record {
            recorded_at_ms: from_ms + i,
            ..r
        })
        .collect()
}

/// Opens `node`'s ledger on `store` until `job`'s records satisfy `done` (or
/// [`READ_BACK_WITHIN`] passed), and returns them.
async fn read_back_until(
    store: &impl LedgerStore,
    node: &str,
    job: &str,
    done: impl Fn(&[Record]) -> bool,
) -> Vec<Record> {
    let deadline = tokio::time::Instant::now() + READ_BACK_WITHIN;
    loop {
        let fresh = Ledger::new();
        store.open(node, &fresh).await.expect("open a ledger store");
        let got = fresh.records(job);
        if done(&got) || tokio::time::Instant::now() >= deadline {
            return got;
        }
        // Polling a store that writes in the background; the deadline bounds it.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// [`read_back_until`] `job` has `len` records.
async fn read_back(store: &impl LedgerStore, node: &str, job: &str, len: usize) -> Vec<Record> {
    read_back_until(store, node, job, |r| r.len() >= len).await
}

/// What one process recorded, the next one under the same node name reads back; another node's
/// records stay its own.
pub async fn history_is_read_back_by_the_next_start(store: &impl LedgerStore) {
    let first = Ledger::new();
    store.open("n1", &first).await.unwrap();
    let other = Ledger::new();
    store.open("n2", &other).await.unwrap();
    let written = recorded_from(10_000);
    for r in &written {
        first.append(r.clone());
    }
    other.append(Record {
        job: "report".into(),
        node: "n2".into(),
        ..written[0].clone()
    });

    let back = read_back(store, "n1", "backup", written.len()).await;
    assert_eq!(back, written, "{}: n1's history", store.store_name());
    assert_eq!(
        read_back(store, "n2", "report", 1).await.len(),
        1,
        "{}: n2's history",
        store.store_name()
    );
    let n1 = Ledger::new();
    store.open("n1", &n1).await.unwrap();
    assert!(
        n1.records("report").is_empty(),
        "{}: n2's records are n2's",
        store.store_name()
    );
}

/// Records appended after a restart follow the history on the next start.
pub async fn a_reopened_ledger_goes_on_after_its_history(store: &impl LedgerStore) {
    let before = recorded_from(20_000);
    let first = Ledger::new();
    store.open("n1", &first).await.unwrap();
    for r in &before {
        first.append(r.clone());
    }
    assert_eq!(read_back(store, "n1", "backup", before.len()).await, before);
    drop(first);

    let after = recorded_from(30_000);
    let second = Ledger::new();
    store.open("n1", &second).await.unwrap();
    assert_eq!(second.records("backup"), before, "{}", store.store_name());
    for r in &after {
        second.append(r.clone());
    }
    let all: Vec<Record> = before.into_iter().chain(after).collect();
    assert_eq!(
        read_back(store, "n1", "backup", all.len()).await,
        all,
        "{}: the history, then what came after the restart",
        store.store_name()
    );
}

/// A job with more records than the in-memory bound comes back with its newest ones.
pub async fn a_read_back_keeps_the_newest_records_per_job(store: &impl LedgerStore) {
    let many = Ledger::PER_JOB + 20;
    let first = Ledger::new();
    store.open("n1", &first).await.unwrap();
    let written: Vec<Record> = (0..many as i64)
        .map(|i| Record {
            scheduled_at_ms: 1_000 * i,
            recorded_at_ms: 40_000 + i,
            ..records()[1].clone()
        })
        .collect();
    for r in &written {
        first.append(r.clone());
    }
    // The read back is full as soon as PER_JOB records are there; wait for the newest one.
    let back = read_back_until(store, "n1", "backup", |r| r.last() == written.last()).await;
    assert_eq!(
        back,
        written[many - Ledger::PER_JOB..],
        "{}: the newest {} records",
        store.store_name(),
        Ledger::PER_JOB
    );
}
