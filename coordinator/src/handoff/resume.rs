//! Both ends of a retry handoff inside the coordinator: the old owner's `Handoff` write, and the
//! lease holder's task that finds records and resumes them on its own executors (RTY-04).
//!
//! The resume task runs beside the lease driver, not inside it (see [`crate::handoff`]). Every
//! [`SCAN_EVERY`], while this node leads, it lists the records and for each one:
//!
//! - older than [`RECORD_EXPIRY`], claimed or not: removes it, logs a WARNING and writes a
//!   cancelled record (a `Skipped` ledger event), so nothing waits forever;
//! - claimed: leaves it to its claimer;
//! - for a job one of this node's executors registered and whose Watch stream is open: claims
//!   it (marks it with a token of this claim) and sends that executor a `ResumeRetry`;
//! - otherwise: leaves it for a node that has the job.
//!
//! A claimed sequence stays *in flight*, and its claimed record in the store, until this node's
//! ledger shows the executor acting on it (any record of that firing at the resumed attempt or
//! later); then the claimed record is removed. If the executor's Watch stream closes first (the
//! shim restarted or died before it got going), the claim is released and the record offered
//! again on a later pass, so a shim restart loses no handed-off sequence. A claim whose answer
//! was lost is checked against the store on the next pass, so it is carried on if it happened
//! and forgotten if it did not. A coordinator that dies with a claim in flight leaves the
//! claimed record in the store, visible, until it expires with a WARNING.

use std::future::Future;

use cronstable_core::{FiringKind, Reason};

use super::{HandoffRecord, Handoffs, Pending, RECORD_EXPIRY, SCAN_EVERY, claim_token};
use crate::cluster::Election;
use crate::ledger::{Event, Record};
use crate::state::{CoordinatorState, Instruction};

/// What an executor asks to hand off: the rest of one retry sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffAsk {
    /// The job's name.
    pub job: String,
    /// The firing the sequence belongs to (Unix ms).
    pub scheduled_at_ms: i64,
    /// The attempt to run next (at least 2).
    pub next_attempt: u32,
    /// Attempts left, `next_attempt` included.
    pub remaining_attempts: u32,
    /// Not before this instant (Unix ms).
    pub next_attempt_at_ms: i64,
}

/// Writes the handoff record for a `Handoff` request. Returns `transferred` and the message for
/// the shim: false (abandon) when there is no handoff store or the write failed or timed out.
pub async fn write_handoff(
    state: &CoordinatorState,
    req: &HandoffAsk,
    now_ms: i64,
) -> (bool, String) {
    let Some(handoffs) = state.handoffs() else {
        return (
            false,
            "this node's cluster backend has no shared handoff store (gossip and an election \
             that is off have none; the etcd, kubernetes and filesystem backends do), so the \
             retry sequence cannot move to the new owner and is abandoned"
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
        claimed_by: None,
        claimed_at_ms: None,
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

/// A claimed sequence sent to an executor that has not acted on it yet.
#[derive(Debug)]
struct Sent {
    /// The claimed version of the record, as the store holds it.
    claimed: Pending,
    /// The executor it was sent to; empty when the send itself failed.
    executor: String,
    /// When it was sent (Unix ms).
    sent_ms: i64,
}

/// What this node's resume task holds between passes: sequences sent but not acted on yet, and
/// claims whose outcome the store did not report (the request failed or timed out).
#[derive(Debug, Default)]
pub struct InFlight {
    sent: Vec<Sent>,
    unsure: Vec<(Pending, String)>,
}

impl InFlight {
    /// How many are waiting for their executor.
    pub fn len(&self) -> usize {
        self.sent.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    /// How many claims are waiting to learn whether they happened.
    pub fn unsure(&self) -> usize {
        self.unsure.len()
    }

    /// Notes a claim on `p` by `token` whose answer never came (tests stand in for a timeout).
    #[cfg(any(test, feature = "testkit"))]
    pub fn claim_unanswered(&mut self, p: Pending, token: String) {
        self.unsure.push((p, token));
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

fn expired(r: &HandoffRecord, now_ms: i64) -> bool {
    now_ms.saturating_sub(r.created_at_ms) > RECORD_EXPIRY.as_millis() as i64
}

/// Removes the claimed records their executor acted on, releases those whose executor stopped
/// watching before it did, and expires those an executor never acts on. An entry whose store
/// operation fails stays for the next pass; the first error is returned.
async fn settle(
    handoffs: &Handoffs,
    state: &CoordinatorState,
    in_flight: &mut InFlight,
    now_ms: i64,
) -> Result<(), String> {
    let mut still = Vec::new();
    let mut first_error = None;
    for sent in std::mem::take(&mut in_flight.sent) {
        let r = &sent.claimed.record;
        let done = if acted_on(state, r, sent.sent_ms) {
            handoffs.remove(&sent.claimed).await.map(|_| ())
        } else if expired(r, now_ms) {
            // An executor that keeps watching but never acts (it refused the sequence, and
            // said why in its own log) must not hold it forever either.
            let removed = handoffs.remove(&sent.claimed).await;
            if removed.is_ok() {
                expire_record(state, r, &sent.claimed.name, now_ms);
            }
            removed.map(|_| ())
        } else if !sent.executor.is_empty() && state.is_watching(&sent.executor) {
            still.push(sent);
            continue;
        } else {
            tracing::warn!(
                job = r.job,
                scheduled_at_ms = r.scheduled_at_ms,
                executor = sent.executor,
                "executor went away before resuming a handed-off retry; releasing the record"
            );
            handoffs.release(&sent.claimed).await
        };
        if let Err(e) = done {
            first_error.get_or_insert_with(|| {
                format!("handoff record {} not settled: {e}", sent.claimed.name)
            });
            still.push(sent);
        }
    }
    in_flight.sent = still;
    first_error.map_or(Ok(()), Err)
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
        let now_ms = crate::clock::now_ms();
        let pass = if leading(&state) {
            scan_once(&handoffs, &state, now_ms, &mut in_flight).await
        } else {
            // Settled even when not leading: a sequence no executor took must go back to the
            // store for the new holder, and an unsure claim must be resolved.
            match settle(&handoffs, &state, &mut in_flight, now_ms).await {
                Ok(()) => resolve_unsure(&handoffs, &state, now_ms, &mut in_flight, false).await,
                e => e,
            }
        };
        match pass {
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

/// Asks the store about every claim whose outcome was lost: one that happened is carried on
/// (sent when `leading`, else released); one that did not is forgotten, since its record is
/// either still unclaimed for the next scan or another node's.
async fn resolve_unsure(
    handoffs: &Handoffs,
    state: &CoordinatorState,
    now_ms: i64,
    in_flight: &mut InFlight,
    leading: bool,
) -> Result<(), String> {
    let mut first_error = None;
    for (p, token) in std::mem::take(&mut in_flight.unsure) {
        match handoffs.find_claim(&p, &token).await {
            Ok(Some(claimed)) if leading => send(state, claimed, now_ms, in_flight),
            Ok(Some(claimed)) => in_flight.sent.push(Sent {
                claimed,
                executor: String::new(),
                sent_ms: now_ms,
            }),
            Ok(None) => {}
            Err(e) => {
                first_error.get_or_insert_with(|| {
                    format!(
                        "could not learn whether the claim on {} happened: {e}",
                        p.name
                    )
                });
                in_flight.unsure.push((p, token));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Sends a claimed sequence to the executor that registered its job. If the executor is not
/// watching any more, the claim is kept under no executor, so the next settle releases it.
fn send(state: &CoordinatorState, claimed: Pending, now_ms: i64, in_flight: &mut InFlight) {
    let r = &claimed.record;
    let executor = state
        .registry
        .current()
        .get(&r.job)
        .map(|registered| registered.executor_id.clone())
        .unwrap_or_default();
    let sent = !executor.is_empty()
        && state.send_to(
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
    } else {
        tracing::warn!(
            job = r.job,
            executor,
            "executor stopped watching while a handoff was claimed; releasing the record"
        );
    }
    in_flight.sent.push(Sent {
        claimed,
        executor: if sent { executor } else { String::new() },
        sent_ms: now_ms,
    });
}

/// One pass over the store's records at `now_ms`.
pub async fn scan_once(
    handoffs: &Handoffs,
    state: &CoordinatorState,
    now_ms: i64,
    in_flight: &mut InFlight,
) -> Result<(), String> {
    // A store error on one entry must not stop the others: the first is reported.
    let mut first_error = settle(handoffs, state, in_flight, now_ms).await.err();
    if let Err(e) = resolve_unsure(handoffs, state, now_ms, in_flight, true).await {
        first_error.get_or_insert(e);
    }
    let pending = handoffs.pending().await.map_err(|e| e.to_string())?;
    for p in pending {
        if expired(&p.record, now_ms) {
            // Claimed or not: a claim this old belongs to a claimer that died before its
            // executor acted, or after (it cannot tell), so it is dropped, not offered again.
            if in_flight.sent.iter().any(|s| s.claimed.name == p.name) {
                continue; // this node's own claim: settle expires it
            }
            match handoffs.remove(&p).await {
                Ok(true) => expire(state, &p, now_ms),
                Ok(false) => {}
                Err(e) => {
                    first_error.get_or_insert_with(|| format!("expiring {}: {e}", p.name));
                }
            }
            continue;
        }
        if p.record.claimed_by.is_some() {
            continue; // being resumed, here or by the node that claimed it
        }
        let executor = match state.registry.current().get(&p.record.job) {
            Some(registered) => registered.executor_id.clone(),
            None => continue, // another node's job
        };
        if !state.is_watching(&executor) {
            continue;
        }
        let token = claim_token(&state.node_name(), now_ms);
        match handoffs.claim(&p, &token, now_ms).await {
            Ok(Some(claimed)) => send(state, claimed, now_ms, in_flight),
            Ok(None) => {} // another node claimed it first
            Err(e) => {
                first_error.get_or_insert_with(|| format!("claim on {} unanswered: {e}", p.name));
                in_flight.unsure.push((p, token));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
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
