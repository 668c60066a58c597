//! Run records in etcd ([`crate::lease::run_records`]): one plain key per run of a job with
//! `expect:`, beside the claims.
//!
//! ```text
//! <electionName>/runs/<scheduledAtMs, 20 digits>/<job>/<node>/<attempt>   the JSON record
//! ```
//!
//! Only the node that ran a run writes its key (a put at its start, replaced at its end). The
//! instant comes first and zero-padded, so a read of a span of instants is one range get and a
//! prune one range delete. The keys carry no etcd lease: they outlive the node that wrote them,
//! which is the point (the judge reads a dead holder's last run).

use etcd_client::{DeleteOptions, GetOptions};

use super::EtcdStore;
use crate::lease::LeaseError;
use crate::lease::run_records::{RunRecord, RunRecordStore};

impl EtcdStore {
    fn runs_prefix(&self) -> String {
        format!("{}/runs/", self.election_name)
    }

    /// The first key of the instant `scheduled_at_ms` (instants before 1970 sort first).
    fn runs_at(&self, scheduled_at_ms: i64) -> String {
        format!("{}{:020}/", self.runs_prefix(), scheduled_at_ms.max(0))
    }
}

#[tonic::async_trait]
impl RunRecordStore for EtcdStore {
    async fn put_run(&mut self, run: &RunRecord) -> Result<(), LeaseError> {
        let key = format!(
            "{}{}/{}/{}",
            self.runs_at(run.scheduled_at_ms),
            run.job,
            run.node,
            run.attempt
        );
        let body = serde_json::to_string(run).expect("a run record serialises");
        let mut client = self.client().await?;
        self.request("writing a run record", client.put(key, body, None))
            .await?;
        Ok(())
    }

    async fn runs_between(
        &mut self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<RunRecord>, LeaseError> {
        let (from, to) = (self.runs_at(from_ms), self.runs_at(to_ms.saturating_add(1)));
        let mut client = self.client().await?;
        let resp = self
            .request(
                "reading the run records",
                client.get(from, Some(GetOptions::new().with_range(to))),
            )
            .await?;
        Ok(resp
            .kvs()
            .iter()
            .filter_map(|kv| serde_json::from_slice(kv.value()).ok())
            .collect())
    }

    async fn prune_runs(&mut self, before_ms: i64) -> Result<usize, LeaseError> {
        let (from, to) = (self.runs_prefix(), self.runs_at(before_ms));
        let mut client = self.client().await?;
        let resp = self
            .request(
                "pruning old run records",
                client.delete(from, Some(DeleteOptions::new().with_range(to))),
            )
            .await?;
        Ok(usize::try_from(resp.deleted()).unwrap_or(0))
    }
}
