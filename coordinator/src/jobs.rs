//! The node's registered job set: what every executor on this node told the coordinator it runs.
//!
//! Each executor (a shim, a gate loader, a client in another language) registers its whole job
//! set and re-registers after every reload; a registration replaces that executor's previous
//! set. The node's job-set ID covers the union of every executor's jobs, because that is what
//! this node would run, and it is what peers compare.
//!
//! The current set is published on a `watch` channel as an immutable snapshot, so readers never
//! hold a lock while they work and Watch streams can notice a change of job-set ID.

use std::collections::BTreeMap;
use std::sync::Arc;

use cronstable_core::JobSpec;
use cronstable_core::fingerprint::{JobSetId, job_set_id};
use tokio::sync::watch;

/// One job and the executor that registered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredJob {
    /// The job as the executor parsed it.
    pub spec: JobSpec,
    /// The executor that runs it.
    pub executor_id: String,
}

/// An immutable snapshot of the node's job set.
#[derive(Debug, Clone)]
pub struct JobSet {
    /// Jobs by name.
    pub jobs: BTreeMap<String, RegisteredJob>,
    /// The fingerprint of every registered job.
    pub id: JobSetId,
}

impl Default for JobSet {
    fn default() -> Self {
        Self {
            jobs: BTreeMap::new(),
            id: job_set_id(&[]),
        }
    }
}

impl JobSet {
    /// A job by name.
    pub fn get(&self, name: &str) -> Option<&RegisteredJob> {
        self.jobs.get(name)
    }
}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The executor id is empty.
    #[error("executor_id must not be empty")]
    MissingExecutorId,
    /// Two jobs in one registration share a name.
    #[error("jobs[].name: job name {0:?} appears more than once in the registration")]
    DuplicateName(String),
    /// Another executor on this node already registered a job with this name.
    #[error(
        "job {job:?} is already registered by executor {other:?}; job names must be unique per node"
    )]
    TakenByOther {
        /// The job's name.
        job: String,
        /// The executor that holds it.
        other: String,
    },
}

/// The writer side of the job set. Cheap to clone; every clone writes the same channel.
#[derive(Debug, Clone)]
pub struct JobRegistry {
    tx: Arc<watch::Sender<Arc<JobSet>>>,
}

impl Default for JobRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl JobRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            tx: Arc::new(watch::Sender::new(Arc::new(JobSet::default()))),
        }
    }

    /// The current snapshot.
    pub fn current(&self) -> Arc<JobSet> {
        self.tx.borrow().clone()
    }

    /// A receiver that sees every new snapshot.
    pub fn subscribe(&self) -> watch::Receiver<Arc<JobSet>> {
        self.tx.subscribe()
    }

    /// Replaces `executor_id`'s jobs with `jobs` and returns the new snapshot.
    pub fn register(
        &self,
        executor_id: &str,
        jobs: Vec<JobSpec>,
    ) -> Result<Arc<JobSet>, RegisterError> {
        if executor_id.is_empty() {
            return Err(RegisterError::MissingExecutorId);
        }
        let mut outcome = Ok(());
        self.tx.send_if_modified(|current| {
            let mut next: BTreeMap<String, RegisteredJob> = current
                .jobs
                .iter()
                .filter(|(_, j)| j.executor_id != executor_id)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut own = BTreeMap::new();
            for spec in jobs {
                if let Some(other) = next.get(&spec.name) {
                    outcome = Err(RegisterError::TakenByOther {
                        job: spec.name.clone(),
                        other: other.executor_id.clone(),
                    });
                    return false;
                }
                let name = spec.name.clone();
                let job = RegisteredJob {
                    spec,
                    executor_id: executor_id.to_owned(),
                };
                if own.insert(name.clone(), job).is_some() {
                    outcome = Err(RegisterError::DuplicateName(name));
                    return false;
                }
            }
            next.extend(own);
            let id = job_set_id(next.values().map(|j| &j.spec));
            let changed = next != current.jobs;
            *current = Arc::new(JobSet { jobs: next, id });
            changed
        });
        outcome.map(|()| self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str) -> JobSpec {
        JobSpec::new(name, "* * * * *", "true")
    }

    #[test]
    fn a_registration_replaces_only_that_executors_jobs() {
        let r = JobRegistry::new();
        r.register("shim-1", vec![job("a"), job("b")]).unwrap();
        r.register("shim-2", vec![job("c")]).unwrap();
        let set = r.register("shim-1", vec![job("a")]).unwrap();
        let names: Vec<_> = set.jobs.keys().cloned().collect();
        assert_eq!(names, ["a", "c"]);
    }

    #[test]
    fn the_id_covers_the_union_of_every_executor() {
        let r = JobRegistry::new();
        r.register("shim-1", vec![job("a")]).unwrap();
        let set = r.register("shim-2", vec![job("c")]).unwrap();
        assert_eq!(set.id, job_set_id(&[job("c"), job("a")]));
    }

    #[test]
    fn a_name_held_by_another_executor_is_refused_and_nothing_changes() {
        let r = JobRegistry::new();
        r.register("shim-1", vec![job("a")]).unwrap();
        let before = r.current().id.clone();
        let err = r.register("shim-2", vec![job("b"), job("a")]).unwrap_err();
        assert!(matches!(err, RegisterError::TakenByOther { .. }), "{err}");
        assert_eq!(r.current().id, before);
        assert!(r.current().get("b").is_none());
    }

    #[test]
    fn duplicate_names_in_one_registration_are_refused() {
        let r = JobRegistry::new();
        let err = r.register("shim-1", vec![job("a"), job("a")]).unwrap_err();
        assert_eq!(err, RegisterError::DuplicateName("a".into()));
    }
}
