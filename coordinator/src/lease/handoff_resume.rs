//! Both ends of a retry handoff inside the coordinator: the old owner's `Handoff` write, and the
//! lease holder's task that finds records and resumes them on its own executors (RTY-04).
//!
//! The resume task runs beside the lease driver, not inside it (see [`super::handoff`]). Every
//! [`SCAN_EVERY`], while this node leads, it lists the records and for each one:
//!
//! - older than [`RECORD_EXPIRY`]: claims it, logs a WARNING and writes a cancelled record
//!   (a `Skipped` ledger event), so nothing waits forever;
//! - for a job one of this node's executors registered and whose Watch stream is open: claims
//!   it and sends that executor a `ResumeRetry`. If the send fails after the claim, the record
//!   is written back for the next round;
//! - otherwise: leaves it for a node that has the job.
//!
//! A claimed sequence stays *in flight* until this node's ledger shows the executor acting on
//! it (any record of that firing at the resumed attempt or later). If the executor's Watch
//! stream closes first (the shim restarted or died before it got going), the record is written
//! back and offered again on a later pass, so a shim restart loses no handed-off sequence.
//! In-flight sequences live in this task's memory: a coordinator that dies in that moment
//! loses them, as it would the run itself.

use std::future::Future;

use cronstable_core::{FiringKind, Reason};
use cronstable_proto::v1 as pb;

use super::handoff::{HandoffRecord, Handoffs, Pending, RECORD_EXPIRY, SCAN_EVERY};
use crate::cluster::Election;
use crate::ledger::{Event, Record};
use crate::state::{CoordinatorState, Instruction};

/// Writes the handoff record for a `Handoff` request. Returns `transferred` and the message for
/// the shim: false (abandon) when there is no handoff store or the write failed or timed out.
pub async fn write_handoff(
    state: &CoordinatorState,
    req: &pb::HandoffRequest,
    now_ms: i64,
) -> (bool, String) {
    let Some(handoffs) = &state.handoffs else {
        return (
            false,
            "this node's cluster backend has no shared handoff store (only etcd and \
             filesystem have one), so the retry sequence cannot move to the new owner and is \
             abandoned"
                .to_owned(),
        );
    };
    let record = HandoffRecord {
        job: req.job.clone(),
        job_set_id: state.registry.current().id.to_string(),
        scheduled_at_ms: req.scheduled_at_ms,
        next_attempt: req.next_attempt.max(2),
        remaining_attempts: req.remaining_attempts,
        not_before_ms: req.next_attempt_at_ms,
        from_node: state.node_name(),
        created_at_ms: now_ms,
    };
    match handoffs.write(&record).await {
        Ok(()) => {
            tracing::info!(
                job = record.job,
                scheduled_at_ms = record.scheduled_at_ms,
                next_attempt = record.next_attempt,
                remaining = record.remaining_attempts,
                "retry sequence written to the shared store for the new owner"
            );
            (
                true,
                format!(
                    "the remaining {} attempt(s) were written to the shared store for the new owner",
                    record.remaining_attempts
                ),
            )
        }
        Err(e) => {
            tracing::warn!(job = record.job, "handoff record not written: {e}");
            (
                false,
                format!("the handoff record could not be written to the shared store ({e})"),
            )
        }
    }
}

/// Whether this node leads right now.
fn leading(state: &CoordinatorState) -> bool {
    let view = state.view.borrow();
    match &view.election {
        Election::Managed(m) => {
            m.leader_at(&view.node_name, tokio::time::Instant::now())
                == Some(view.node_name.as_str())
        }
        _ => false,
    }
}

/// Sequences sent to an executor that has not acted on them yet, with that executor.
#[derive(Debug, Default)]
pub struct InFlight(Vec<(HandoffRecord, String, i64)>);

impl InFlight {
    /// How many are waiting for their executor.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Whether this node's ledger shows the executor acting on `r` since it was sent at
/// `sent_ms`: a decision, start or skip of that firing at the resumed attempt or later. Only
/// records made after the send count, so this node's own earlier records of the firing (it
/// handed the sequence off once itself) do not.
fn acted_on(state: &CoordinatorState, r: &HandoffRecord, sent_ms: i64) -> bool {
    state.ledger.inspect(&r.job, |records| {
        records.iter().any(|x| {
            x.scheduled_at_ms == r.scheduled_at_ms
                && x.attempt >= r.next_attempt
                && x.recorded_at_ms >= sent_ms
                && !matches!(x.event, Event::HandedOff { .. })
        })
    })
}

/// Drops in-flight sequences their executor acted on, and writes back those whose executor
/// stopped watching before it did.
async fn settle(
    handoffs: &Handoffs,
    state: &CoordinatorState,
    in_flight: &mut InFlight,
    now_ms: i64,
) -> Result<(), String> {
    let mut still = Vec::new();
    let mut entries = std::mem::take(&mut in_flight.0).into_iter();
    while let Some((r, executor, sent_ms)) = entries.next() {
        if acted_on(state, &r, sent_ms) {
            continue;
        }
        if now_ms.saturating_sub(r.created_at_ms) > RECORD_EXPIRY.as_millis() as i64 {
            // An executor that keeps watching but never acts (it refused the sequence, and
            // said why in its own log) must not hold it forever either.
            expire_record(
                state,
                &r,
                &format!("{}@{}", r.job, r.scheduled_at_ms),
                now_ms,
            );
            continue;
        }
        if state.is_watching(&executor) {
            still.push((r, executor, sent_ms));
            continue;
        }
        tracing::warn!(
            job = r.job,
            scheduled_at_ms = r.scheduled_at_ms,
            executor,
            "executor went away before resuming a handed-off retry; putting the record back"
        );
        if let Err(e) = handoffs.write(&r).await {
            // Kept, with every entry not visited yet, so the next pass tries again rather
            // than losing a sequence whose record is already gone from the store.
            still.push((r, executor, sent_ms));
            still.extend(entries);
            in_flight.0 = still;
            return Err(format!("could not put a handoff record back: {e}"));
        }
    }
    in_flight.0 = still;
    Ok(())
}

/// Runs until `stop` resolves, resuming handed-off sequences while this node leads.
pub async fn run(handoffs: Handoffs, state: CoordinatorState, stop: impl Future<Output = ()>) {
    tokio::pin!(stop);
    let mut last_error: Option<String> = None;
    let mut in_flight = InFlight::default();
    loop {
        tokio::select! {
            biased;
            () = &mut stop => return,
            () = tokio::time::sleep(SCAN_EVERY) => {}
        }
        if !leading(&state) {
            // Settled even when not leading: a sequence no executor took must go back to the
            // store for the new holder.
            if let Err(e) = settle(&handoffs, &state, &mut in_flight, crate::clock::now_ms()).await
            {
                tracing::warn!("handoff records: {e}");
            }
            continue;
        }
        match scan_once(&handoffs, &state, crate::clock::now_ms(), &mut in_flight).await {
            Ok(()) => last_error = None,
            Err(e) => {
                // Once per distinct error, not once a second.
                if last_error.as_deref() != Some(e.as_str()) {
                    tracing::warn!("handoff records: {e}");
                }
                last_error = Some(e);
            }
        }
    }
}

/// One pass over the store's records at `now_ms`.
pub async fn scan_once(
    handoffs: &Handoffs,
    state: &CoordinatorState,
    now_ms: i64,
    in_flight: &mut InFlight,
) -> Result<(), String> {
    settle(handoffs, state, in_flight, now_ms).await?;
    let pending = handoffs.pending().await.map_err(|e| e.to_string())?;
    for p in pending {
        let expiry_ms = RECORD_EXPIRY.as_millis() as i64;
        if now_ms.saturating_sub(p.record.created_at_ms) > expiry_ms {
            if handoffs.claim(&p).await.map_err(|e| e.to_string())? {
                expire(state, &p, now_ms);
            }
            continue;
        }
        let executor = match state.registry.current().get(&p.record.job) {
            Some(registered) => registered.executor_id.clone(),
            None => continue, // another node's job
        };
        if !state.is_watching(&executor) {
            continue;
        }
        if !handoffs.claim(&p).await.map_err(|e| e.to_string())? {
            continue; // another node claimed it first
        }
        let r = &p.record;
        let sent = state.send_to(
            &executor,
            Instruction::ResumeRetry {
                job: r.job.clone(),
                scheduled_at_ms: r.scheduled_at_ms,
                next_attempt: r.next_attempt,
                remaining_attempts: r.remaining_attempts,
                not_before_ms: r.not_before_ms,
            },
        );
        if sent {
            tracing::info!(
                job = r.job,
                scheduled_at_ms = r.scheduled_at_ms,
                next_attempt = r.next_attempt,
                remaining = r.remaining_attempts,
                from = r.from_node,
                executor,
                "resuming a handed-off retry sequence"
            );
            in_flight.0.push((r.clone(), executor, now_ms));
        } else {
            tracing::warn!(
                job = r.job,
                executor,
                "executor stopped watching while a handoff was claimed; putting the record back"
            );
            if let Err(e) = handoffs.write(r).await {
                // Kept in flight under no executor, so the next pass writes it back.
                in_flight.0.push((r.clone(), String::new(), now_ms));
                return Err(format!("could not put a handoff record back: {e}"));
            }
        }
    }
    Ok(())
}

/// Drops an expired record: WARNING plus a cancelled ledger record.
fn expire(state: &CoordinatorState, p: &Pending, now_ms: i64) {
    expire_record(state, &p.record, &p.name, now_ms);
}

fn expire_record(state: &CoordinatorState, r: &HandoffRecord, name: &str, now_ms: i64) {
    let message = format!(
        "retry abandoned: the handoff record {} from {} waited over {:?} for a node that has \
         job {:?} and was dropped",
        name, r.from_node, RECORD_EXPIRY, r.job
    );
    tracing::warn!(
        job = r.job,
        scheduled_at_ms = r.scheduled_at_ms,
        "{message}"
    );
    state.record(Record {
        job: r.job.clone(),
        scheduled_at_ms: r.scheduled_at_ms,
        kind: FiringKind::Retry {
            attempt: r.next_attempt,
        },
        attempt: r.next_attempt,
        node: state.node_name(),
        recorded_at_ms: now_ms,
        event: Event::Skipped {
            reason: Some(Reason::NotOwner),
            message,
        },
    });
}
