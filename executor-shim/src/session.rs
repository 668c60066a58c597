//! The shim's session with its coordinator: register the job set, keep the Watch stream open,
//! and act on the instructions it carries. Reconnects with backoff whenever the coordinator
//! restarts or the stream breaks, and re-registers each time (a restarted coordinator has
//! forgotten every registration).

use std::sync::Arc;
use std::time::Duration;

use cronstable_core::{FiringKind, JobSpec};
use cronstable_proto::convert::stamp_from_wire;
use cronstable_proto::v1 as pb;
use tokio::sync::watch;

use crate::clock;
use crate::firing::{FiringContext, fire};
use crate::schedule::source::{LoadedJob, job_named};

const BACKOFF_START: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How often a shim in standby (another live process holds its executor id) asks to take over.
const STANDBY_RETRY: Duration = Duration::from_secs(1);

/// Keeps the session alive until the shim stops.
pub async fn maintain(ctx: FiringContext, mut jobs: watch::Receiver<Arc<Vec<LoadedJob>>>) {
    let mut backoff = BACKOFF_START;
    let mut stopping = ctx.stopping.clone();
    loop {
        if *stopping.borrow() {
            return;
        }
        let specs: Vec<JobSpec> = jobs
            .borrow_and_update()
            .iter()
            .map(|j| (*j.spec).clone())
            .collect();
        match ctx.register(&specs).await {
            // In standby (see FiringContext::register): ask again to take over.
            Err(e) if e.is_held_elsewhere() => {
                if !sleep_or_stop(&mut stopping, STANDBY_RETRY).await {
                    return;
                }
                continue;
            }
            Ok(registration) => {
                tracing::info!(
                    jobs = specs.len(),
                    job_set_id = registration.job_set_id,
                    "registered with the coordinator"
                );
                backoff = BACKOFF_START;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "cannot register with the coordinator");
                if !sleep_or_stop(&mut stopping, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        }
        let mut stream = match ctx.coordinator.watch().await {
            Ok(s) => s,
            Err(e) if e.is_held_elsewhere() => {
                ctx.enter_standby(&e.to_string());
                if !sleep_or_stop(&mut stopping, STANDBY_RETRY).await {
                    return;
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot open the instruction stream");
                if !sleep_or_stop(&mut stopping, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        // Serve the stream until it breaks or the job set changes (then re-register).
        loop {
            tokio::select! {
                msg = stream.message() => match msg {
                    Ok(Some(instruction)) => handle(&ctx, &jobs, instruction),
                    Ok(None) | Err(_) => {
                        tracing::warn!("instruction stream closed; reconnecting");
                        break;
                    }
                },
                changed = jobs.changed() => {
                    if changed.is_err() { return; }
                    break;
                }
                _ = ctx.reregister.notified() => break,
                _ = stopping.wait_for(|s| *s) => return,
            }
        }
        if !sleep_or_stop(&mut stopping, BACKOFF_START).await {
            return;
        }
    }
}

async fn sleep_or_stop(stopping: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = stopping.wait_for(|s| *s) => false,
    }
}

fn handle(ctx: &FiringContext, jobs: &watch::Receiver<Arc<Vec<LoadedJob>>>, i: pb::Instruction) {
    match i.kind {
        Some(pb::instruction::Kind::Hello(h)) => {
            tracing::info!(
                node = h.node_name,
                job_set_id = h.job_set_id,
                "coordinator connected"
            );
            let stamp = stamp_from_wire(h.election.as_ref());
            ctx.remember(|m, now| m.heard(stamp, now));
        }
        Some(pb::instruction::Kind::Goodbye(g)) => {
            let stamp = stamp_from_wire(g.election.as_ref());
            tracing::info!(
                election_mode = stamp.mode.as_str(),
                "the coordinator is stopping"
            );
            ctx.remember(|m, now| m.heard(stamp, now));
        }
        Some(pb::instruction::Kind::ManualStart(m)) => {
            let Some(job) = job_named(&jobs.borrow(), &m.job) else {
                tracing::warn!(
                    job = m.job,
                    "manual start for a job this shim does not have"
                );
                return;
            };
            tracing::info!(job = m.job, request_id = m.request_id, "manual start");
            let at = chrono::DateTime::from_timestamp_millis(m.requested_at_ms)
                .unwrap_or_else(clock::now);
            crate::spawn(fire(ctx.clone(), job, at, FiringKind::Manual));
        }
        Some(pb::instruction::Kind::JobSetChanged(c)) => {
            tracing::debug!(job_set_id = c.job_set_id, "coordinator job set changed");
        }
        Some(pb::instruction::Kind::ResumeRetry(r)) => crate::firing::resume::resume(ctx, jobs, r),
        Some(pb::instruction::Kind::RunDeferred(d))
            if !ctx.wakeups.wake(&d.job, d.scheduled_at_ms) =>
        {
            tracing::debug!(
                job = d.job,
                scheduled_at_ms = d.scheduled_at_ms,
                "RunDeferred for a one-shot that is no longer waiting"
            );
        }
        Some(pb::instruction::Kind::RunDeferred(_)) => {}
        Some(pb::instruction::Kind::CatchUp(c)) => crate::firing::catch_up::offered(ctx, jobs, c),
        None => {}
    }
}
