//! The Kubernetes store's "already ran" records for deferred `@reboot` one-shots (RBT-21).
//!
//! The seed names no annotation, so this store uses `cronstable.io/reboot-ran` on the election
//! Lease itself, holding JSON: a list of the newest [`MAX_JOB_SETS`] job sets, newest last,
//! `[{"jobSetId": "...", "jobs": ["..."]}]`. Keeping it on the Lease means the record rides the
//! same object every campaign reads, and the holder's renewals carry it along unchanged (they
//! PUT back the Lease as read). A record write is a read-modify-write with the resourceVersion
//! precondition: a 409 (anyone wrote in between) re-reads and retries, so two nodes recording
//! at once both land.

use std::collections::BTreeSet;

use http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Call, KubernetesStore};
use crate::lease::{LeaseError, RebootRanStore};

/// The annotation holding the records.
pub const ANNOTATION: &str = "cronstable.io/reboot-ran";
/// How many job sets' records the annotation keeps.
pub const MAX_JOB_SETS: usize = 4;
/// Read-modify-write attempts per record write before giving up until the next round.
const ATTEMPTS: usize = 3;

/// One job set's records in the annotation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSetRecord {
    /// The job-set ID.
    pub job_set_id: String,
    /// The jobs whose one-shot ran under it.
    pub jobs: BTreeSet<String>,
}

/// The records on `lease`; an absent or unreadable annotation is no records.
pub fn records_of(lease: &Value) -> Vec<JobSetRecord> {
    lease["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// The jobs recorded on `lease` under `job_set_id`.
pub fn jobs_on(lease: &Value, job_set_id: &str) -> BTreeSet<String> {
    records_of(lease)
        .into_iter()
        .filter(|r| r.job_set_id == job_set_id)
        .flat_map(|r| r.jobs)
        .collect()
}

/// `records` with `jobs` added under `job_set_id` (moved to the newest place), bounded.
fn merged(
    mut records: Vec<JobSetRecord>,
    job_set_id: &str,
    jobs: &BTreeSet<String>,
) -> Vec<JobSetRecord> {
    let mut mine = JobSetRecord {
        job_set_id: job_set_id.to_owned(),
        jobs: jobs.clone(),
    };
    records.retain(|r| {
        if r.job_set_id == job_set_id {
            mine.jobs.extend(r.jobs.iter().cloned());
            false
        } else {
            true
        }
    });
    records.push(mine);
    let excess = records.len().saturating_sub(MAX_JOB_SETS);
    records.drain(..excess);
    records
}

#[tonic::async_trait]
impl RebootRanStore for KubernetesStore {
    /// The jobs recorded under `job_set_id` (no Lease yet: none).
    async fn read_reboot_ran(&mut self, job_set_id: &str) -> Result<BTreeSet<String>, LeaseError> {
        let (status, lease) = self.send(Call::Get).await?;
        match status {
            StatusCode::OK => Ok(jobs_on(&lease, job_set_id)),
            StatusCode::NOT_FOUND => Ok(BTreeSet::new()),
            s => Err(self.refused(s, &lease, "reading")),
        }
    }

    /// Adds `jobs` under `job_set_id` to the annotation, retrying lost write races.
    async fn record_reboot_ran(
        &mut self,
        job_set_id: &str,
        jobs: &BTreeSet<String>,
    ) -> Result<(), LeaseError> {
        for _ in 0..ATTEMPTS {
            let (status, mut lease) = self.send(Call::Get).await?;
            if status != StatusCode::OK {
                return Err(self.refused(status, &lease, "reading"));
            }
            let current = records_of(&lease);
            if current
                .iter()
                .any(|r| r.job_set_id == job_set_id && jobs.is_subset(&r.jobs))
            {
                return Ok(());
            }
            let text = serde_json::to_string(&merged(current, job_set_id, jobs))
                .map_err(|e| LeaseError::Store(format!("cannot encode {ANNOTATION}: {e}")))?;
            let metadata = lease
                .as_object_mut()
                .map(|o| o.entry("metadata").or_insert_with(|| serde_json::json!({})))
                .ok_or_else(|| LeaseError::Store("the Lease is not a JSON object".into()))?;
            if !metadata["annotations"].is_object() {
                metadata["annotations"] = serde_json::json!({});
            }
            metadata["annotations"][ANNOTATION] = Value::String(text);
            let (status, answer) = self.send(Call::Put(&lease)).await?;
            match status {
                StatusCode::OK | StatusCode::CREATED => return Ok(()),
                // Someone wrote the Lease since the GET: read it again and merge anew.
                StatusCode::CONFLICT => {}
                s => return Err(self.refused(s, &answer, "updating")),
            }
        }
        Err(LeaseError::Store(format!(
            "recording @reboot runs on lease {}/{}: lost the write race {ATTEMPTS} times; \
             retrying next round",
            self.namespace, self.config.lease_name
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rbt_21_annotation_merges_per_job_set_and_keeps_the_newest_few() {
        let one = |j: &str| [j.to_owned()].into_iter().collect::<BTreeSet<_>>();
        let mut records = Vec::new();
        for i in 0..6 {
            records = merged(records, &format!("v1:{i}"), &one("a"));
        }
        records = merged(records, "v1:5", &one("b"));
        assert_eq!(records.len(), MAX_JOB_SETS);
        assert_eq!(records[0].job_set_id, "v1:2");
        let lease = serde_json::json!({"metadata": {"annotations": {
            ANNOTATION: serde_json::to_string(&records).unwrap()
        }}});
        assert_eq!(jobs_on(&lease, "v1:5").len(), 2);
        assert!(jobs_on(&lease, "v1:0").is_empty());
        assert!(jobs_on(&serde_json::json!({}), "v1:5").is_empty());
    }
}
