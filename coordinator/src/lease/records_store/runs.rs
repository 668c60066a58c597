//! The run records' writer: one task per process drains a bounded queue into the store in
//! order, so a run's end is written after its start, and prunes what is past keeping.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{Mutex, mpsc};

use super::{CALL_TIMEOUT, LeaseError, bounded};
use crate::lease::claims::PRUNE_EVERY;
use crate::lease::run_records::{MIN_KEPT, RunRecord, RunRecordStore};

/// The most records waiting to be written: a store that does not answer for a while costs
/// the newest ones past this (one WARNING), never memory without bound.
pub(super) const QUEUE: usize = 4096;

type Client = Arc<Mutex<Box<dyn RunRecordStore>>>;

/// The writer's handle.
pub(super) struct RunWriter {
    client: Client,
    queue: OnceLock<mpsc::Sender<(RunRecord, Duration)>>,
    /// Set once the queue was found full, so a long outage logs one line.
    overflowed: std::sync::atomic::AtomicBool,
}

impl RunWriter {
    pub(super) fn new(store: impl RunRecordStore) -> Self {
        Self {
            client: Arc::new(Mutex::new(Box::new(store))),
            queue: OnceLock::new(),
            overflowed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Queues one record; the writer task starts with the first (on the caller's runtime) and
    /// ends when this handle is dropped.
    pub(super) fn send(&self, run: RunRecord, keep: Duration) {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(write_all(self.client.clone(), rx));
            tx
        });
        let full = queue.try_send((run, keep)).is_err();
        let was = self
            .overflowed
            .swap(full, std::sync::atomic::Ordering::Relaxed);
        if full && !was {
            tracing::warn!(
                queue = QUEUE,
                "run records wait for the store past the queue's limit; new ones are dropped \
                 until it drains (expectations may then report a run elsewhere as missing)"
            );
        }
    }

    pub(super) async fn between(
        &self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<RunRecord>, LeaseError> {
        bounded("reading the run records", async {
            self.client.lock().await.runs_between(from_ms, to_ms).await
        })
        .await
    }
}

/// Writes records in order until the sender is dropped; prunes at most once a
/// [`PRUNE_EVERY`] what is older than the longest keep seen (at least [`MIN_KEPT`]).
async fn write_all(client: Client, mut rx: mpsc::Receiver<(RunRecord, Duration)>) {
    let mut last_error: Option<String> = None;
    let mut longest = MIN_KEPT;
    let mut pruned: Option<tokio::time::Instant> = None;
    while let Some((run, keep)) = rx.recv().await {
        longest = longest.max(keep);
        let written = bounded("writing a run record", async {
            client.lock().await.put_run(&run).await
        })
        .await;
        match (written, &last_error) {
            (Ok(()), Some(_)) => {
                tracing::info!("run records are written to the store again");
                last_error = None;
            }
            (Err(e), before) if before.as_deref() != Some(&e.to_string()) => {
                tracing::warn!(
                    "cannot write a run record ({e}); the judge of expectations may miss this \
                     run; later records are still tried"
                );
                last_error = Some(e.to_string());
            }
            _ => {}
        }
        let now = tokio::time::Instant::now();
        if pruned.is_none_or(|at| now >= at + PRUNE_EVERY) {
            pruned = Some(now);
            let before = crate::clock::now_ms() - longest.as_millis() as i64;
            let result = tokio::time::timeout(CALL_TIMEOUT, async {
                client.lock().await.prune_runs(before).await
            })
            .await;
            if let Ok(Err(e)) = result {
                tracing::debug!("could not prune old run records ({e}); tried again later");
            }
        }
    }
}
