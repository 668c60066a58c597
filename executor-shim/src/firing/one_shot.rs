//! The shim's side of a deferred `@reboot` one-shot (a Leader or PreferLeader `@reboot` job):
//! what a reload means for a one-shot that is still waiting (RBT-07, RBT-08), and when the
//! coordinator may be asked about it at all.
//!
//! The "already ran" record a coordinator checks is scoped to a job-set ID (RBT-21). So the
//! one-shot is asked about only while the coordinator holds a registration of exactly the job
//! set the shim runs now. Otherwise a shim restarted with a changed job file, or a reload racing
//! its own re-registration, would be answered under the previous job set.

use std::sync::Arc;
use std::time::Duration;

use cronstable_core::fingerprint::JobSetId;
use cronstable_core::{ClusterPolicy, JobSpec};
use tokio::sync::watch;

use crate::schedule::source::LoadedJob;

/// How often a pending one-shot whose job left the job file looks for it again.
pub const PENDING_RECHECK: Duration = Duration::from_secs(2);

/// What a pending deferred @reboot one-shot does given the shim's current jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PendingReboot {
    /// The name is there and still a deferrable @reboot job: this (current) definition runs.
    Run(Arc<JobSpec>),
    /// The name is missing (a templating glitch, remove-then-re-add): stay pending (RBT-07).
    Wait,
    /// The name now belongs to an EveryNode or scheduled job: the one-shot is gone (RBT-08).
    Gone,
}

/// What the one-shot of `name` does now that the shim's jobs are `jobs`.
pub fn pending_reboot(jobs: &[LoadedJob], name: &str) -> PendingReboot {
    match jobs.iter().find(|j| j.spec.name == name) {
        None => PendingReboot::Wait,
        Some(j) if j.spec.is_reboot() && j.spec.cluster_policy != ClusterPolicy::EveryNode => {
            PendingReboot::Run(j.spec.clone())
        }
        Some(_) => PendingReboot::Gone,
    }
}

/// Waits until `registered` (the job-set ID of the shim's last successful registration) equals
/// `current` (the job-set ID of the shim's jobs now), for at most `patience`. True when they
/// match; false when the patience ran out (a coordinator that never answers leaves the one-shot
/// to the no-manager rule, which needs no registration).
///
/// Both can move while waiting: a reload changes `current` first and the session re-registers
/// shortly after, so the match is taken only when the two agree at the same moment.
pub async fn wait_registered(
    mut registered: watch::Receiver<Option<JobSetId>>,
    mut current: watch::Receiver<JobSetId>,
    patience: Duration,
) -> bool {
    let agree = async {
        loop {
            if registered.borrow_and_update().as_ref() == Some(&*current.borrow_and_update()) {
                return true;
            }
            tokio::select! {
                r = registered.changed() => if r.is_err() { return false },
                c = current.changed() => if c.is_err() { return false },
            }
        }
    };
    tokio::time::timeout(patience, agree).await.unwrap_or(false)
}

/// Whether the coordinator's registration still matches the shim's job set: checked again after
/// an answer, since a reload during the question means it was decided under the old set.
pub fn still_registered(
    registered: &watch::Receiver<Option<JobSetId>>,
    current: &watch::Receiver<JobSetId>,
) -> bool {
    registered.borrow().as_ref() == Some(&*current.borrow())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronstable_core::fingerprint::job_set_id;

    fn loaded(name: &str, schedule: &str, policy: ClusterPolicy, command: &str) -> LoadedJob {
        let mut spec = JobSpec::new(name, schedule, command);
        spec.cluster_policy = policy;
        LoadedJob {
            schedule: cronstable_core::schedule::Schedule::parse(schedule, None).unwrap(),
            spec: Arc::new(spec),
        }
    }

    #[test]
    fn rbt_07_08_a_pending_one_shot_follows_the_current_job_file() {
        use ClusterPolicy::{EveryNode, Leader, PreferLeader};
        let now = loaded("migrate", "@reboot", Leader, "./migrate v2");
        // The current definition runs, not the one captured at boot.
        assert_eq!(
            pending_reboot(std::slice::from_ref(&now), "migrate"),
            PendingReboot::Run(now.spec.clone())
        );
        let prefer = loaded("migrate", "@reboot", PreferLeader, "./migrate");
        assert!(matches!(
            pending_reboot(&[prefer], "migrate"),
            PendingReboot::Run(_)
        ));
        // Vanished: stays pending until the name returns.
        assert_eq!(pending_reboot(&[], "migrate"), PendingReboot::Wait);
        // Reused for a job that is not a deferrable @reboot: the one-shot is gone.
        let every = loaded("migrate", "@reboot", EveryNode, "./migrate");
        assert_eq!(pending_reboot(&[every], "migrate"), PendingReboot::Gone);
        let scheduled = loaded("migrate", "0 3 * * *", Leader, "./migrate");
        assert_eq!(pending_reboot(&[scheduled], "migrate"), PendingReboot::Gone);
    }

    fn id(command: &str) -> JobSetId {
        job_set_id(&[JobSpec::new("migrate", "@reboot", command)])
    }

    #[tokio::test(start_paused = true)]
    async fn rbt_21_a_reload_waits_for_its_own_registration() {
        let (old, new) = (id("./migrate v1"), id("./migrate v2"));
        let (registered_tx, registered) = watch::channel(Some(old.clone()));
        let (current_tx, current) = watch::channel(old.clone());
        assert!(
            wait_registered(registered.clone(), current.clone(), Duration::from_secs(30)).await
        );

        // A reload: the shim's set moves on while the coordinator still holds the old one.
        current_tx.send_replace(new.clone());
        assert!(!still_registered(&registered, &current));
        let waiting = tokio::spawn(wait_registered(
            registered.clone(),
            current.clone(),
            Duration::from_secs(30),
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            !waiting.is_finished(),
            "the old registration does not count"
        );
        registered_tx.send_replace(Some(new));
        assert!(waiting.await.unwrap(), "the new registration does");
        assert!(still_registered(&registered, &current));
    }

    #[tokio::test(start_paused = true)]
    async fn rbt_21_without_a_registration_the_wait_is_bounded() {
        let (_registered_tx, registered) = watch::channel(None);
        let (_current_tx, current) = watch::channel(id("./migrate"));
        let started = tokio::time::Instant::now();
        assert!(!wait_registered(registered, current, Duration::from_secs(30)).await);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }
}
