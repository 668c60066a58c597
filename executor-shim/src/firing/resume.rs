//! Resuming a retry sequence another node handed off (RTY-04): the coordinator that now owns
//! the job sends `ResumeRetry` over Watch, and this shim runs the remaining attempts of the
//! named job's *current* definition through the same loop a local firing uses
//! ([`crate::firing::run_sequence`]), so every attempt re-asks ShouldRun as a retry, reports
//! its attempt number, and can be handed off again.

use std::sync::Arc;
use std::time::Duration;

use cronstable_core::{ClusterPolicy, FiringKind, JobSpec};
use cronstable_proto::v1 as pb;
use tokio::sync::watch;

use crate::clock;
use crate::firing::{FiringContext, run_sequence};
use crate::schedule::source::{LoadedJob, job_named};

/// What a `ResumeRetry` runs: the job, the first attempt number and the last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumePlan {
    /// The job's current definition.
    pub job: Arc<JobSpec>,
    /// The attempt to run first.
    pub first_attempt: u32,
    /// The last attempt the sequence may run.
    pub last_attempt: u32,
}

/// Works out what `r` asks of this shim's `jobs`, or why it cannot be done.
pub fn plan(jobs: &[LoadedJob], r: &pb::ResumeRetry) -> Result<ResumePlan, String> {
    let job = job_named(jobs, &r.job)
        .ok_or_else(|| format!("job {:?} is not in this shim's job file", r.job))?;
    // These never move between nodes (RTY-06); a coordinator should not send them.
    if job.cluster_policy == ClusterPolicy::EveryNode || job.is_reboot() {
        return Err(format!(
            "job {:?} is an EveryNode or @reboot job, whose retries stay on their node",
            r.job
        ));
    }
    if r.remaining_attempts == 0 || r.next_attempt < 2 {
        return Err(format!(
            "the handoff of job {:?} has no attempts left (next {}, remaining {})",
            r.job, r.next_attempt, r.remaining_attempts
        ));
    }
    Ok(ResumePlan {
        job,
        first_attempt: r.next_attempt,
        last_attempt: r.next_attempt.saturating_add(r.remaining_attempts - 1),
    })
}

/// Starts the resumed sequence in its own task.
pub fn resume(
    ctx: &FiringContext,
    jobs: &watch::Receiver<Arc<Vec<LoadedJob>>>,
    r: pb::ResumeRetry,
) {
    let planned = plan(&jobs.borrow(), &r);
    let p = match planned {
        Ok(p) => p,
        Err(why) => {
            tracing::warn!(job = r.job, "cannot resume a handed-off retry: {why}");
            return;
        }
    };
    let Some(scheduled_at) = chrono::DateTime::from_timestamp_millis(r.scheduled_at_ms) else {
        tracing::warn!(
            job = r.job,
            "cannot resume a handed-off retry: bad scheduled_at_ms"
        );
        return;
    };
    tracing::info!(
        job = r.job,
        scheduled_at = %scheduled_at,
        first_attempt = p.first_attempt,
        last_attempt = p.last_attempt,
        not_before_ms = r.not_before_ms,
        "resuming a retry sequence handed off by another node"
    );
    let ctx = ctx.clone();
    crate::spawn(async move {
        // The backoff the old owner had still to wait.
        let wait =
            Duration::from_millis(r.not_before_ms.saturating_sub(clock::now_ms()).max(0) as u64);
        let mut stopping = ctx.stopping.clone();
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stopping.wait_for(|s| *s) => return,
        }
        run_sequence(
            ctx,
            p.job,
            scheduled_at,
            FiringKind::Retry {
                attempt: p.first_attempt,
            },
            p.first_attempt,
            p.last_attempt,
        )
        .await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(name: &str, schedule: &str, policy: ClusterPolicy) -> LoadedJob {
        let mut spec = JobSpec::new(name, schedule, "true");
        spec.cluster_policy = policy;
        LoadedJob {
            schedule: cronstable_core::schedule::Schedule::parse(schedule, None).unwrap(),
            spec: Arc::new(spec),
        }
    }

    fn resume_retry(job: &str, next: u32, remaining: u32) -> pb::ResumeRetry {
        pb::ResumeRetry {
            job: job.into(),
            scheduled_at_ms: 1_000,
            next_attempt: next,
            remaining_attempts: remaining,
            not_before_ms: 0,
        }
    }

    #[test]
    fn rty_04_a_resume_runs_the_remaining_attempts_of_the_current_job() {
        let jobs = [loaded("backup", "0 3 * * *", ClusterPolicy::Leader)];
        let p = plan(&jobs, &resume_retry("backup", 2, 3)).unwrap();
        assert_eq!((p.first_attempt, p.last_attempt), (2, 4));
        assert_eq!(p.job, jobs[0].spec);
        let p = plan(&jobs, &resume_retry("backup", 4, 1)).unwrap();
        assert_eq!((p.first_attempt, p.last_attempt), (4, 4));
    }

    #[test]
    fn rty_06_every_node_reboot_unknown_and_empty_resumes_are_refused() {
        let jobs = [
            loaded("everywhere", "0 3 * * *", ClusterPolicy::EveryNode),
            loaded("boot", "@reboot", ClusterPolicy::Leader),
            loaded("backup", "0 3 * * *", ClusterPolicy::Leader),
        ];
        assert!(plan(&jobs, &resume_retry("everywhere", 2, 1)).is_err());
        assert!(plan(&jobs, &resume_retry("boot", 2, 1)).is_err());
        let e = plan(&jobs, &resume_retry("gone", 2, 1)).unwrap_err();
        assert!(e.contains("\"gone\""), "{e}");
        assert!(plan(&jobs, &resume_retry("backup", 2, 0)).is_err());
        assert!(plan(&jobs, &resume_retry("backup", 1, 2)).is_err());
    }
}
