//! Handing a retry sequence to the job's new owner (RTY-04..06): when a retry's gate says
//! another node owns the job, the remaining attempts go to the coordinator's `Handoff`, which
//! writes them to a shared store for the new owner's shim. Without a shared store (gossip,
//! election off, a failed write) the sequence is abandoned, visibly: a WARNING and a cancelled
//! run-history record naming the reason, never a silent drop.

use cronstable_core::{ClusterPolicy, FiringKind, JobSpec, Reason};

use crate::clock;
use crate::coordinator::client::{CallError, Coordinator};

/// A retry learned that another node owns the job: hand the rest of the sequence over, or,
/// without a shared store, abandon it with a WARNING and a cancelled record (RTY-04, RTY-05).
pub(crate) async fn hand_off(
    coordinator: &Coordinator,
    job: &JobSpec,
    at_ms: i64,
    attempt: u32,
    max_attempts: u32,
) {
    // EveryNode and @reboot retries never move between nodes (RTY-06). EveryNode is never told
    // "not owner"; an @reboot job's retries are abandoned here rather than handed off.
    if job.cluster_policy == ClusterPolicy::EveryNode || job.is_reboot() {
        return;
    }
    let remaining = max_attempts.saturating_sub(attempt) + 1;
    // The relaunch this sequence was about to make has already waited out its backoff (the
    // shim pauses before it asks), so the next attempt is due now on the new owner, not one
    // more backoff later.
    let next_at = clock::now_ms();
    let transferred = match coordinator
        .handoff(&job.name, at_ms, attempt, remaining, next_at)
        .await
    {
        Ok(r) if r.transferred => {
            tracing::info!(
                job = job.name,
                attempt,
                remaining,
                "retry sequence handed off"
            );
            return;
        }
        Ok(r) => r.message,
        Err(CallError::Unreachable(m)) | Err(CallError::Refused { message: m, .. }) => m,
    };
    let msg = format!("retry abandoned: another node owns the job and {transferred}");
    tracing::warn!(job = job.name, attempt, remaining, "{msg}");
    coordinator
        .report_skip_logged(
            &job.name,
            at_ms,
            FiringKind::Retry { attempt },
            Reason::NotOwner,
            msg,
        )
        .await;
}
