//! The etcd store's "already ran" records for deferred `@reboot` one-shots (RBT-21).
//!
//! The seed names no key, so this store picks sibling keys of the election key:
//!
//! ```text
//! <electionName>/reboot-ran/<jobSetId>/<job>   value: the node that recorded it
//! ```
//!
//! They are put without an etcd lease, so they outlive the holder that wrote them; a read is one
//! prefix get on `<electionName>/reboot-ran/<jobSetId>/`. Two nodes recording at once write
//! different keys (or the same key with the same meaning), so neither write is lost. To keep the
//! records bounded, a write that leaves more than [`MAX_KEYS`] record keys deletes the oldest
//! keys of *other* job sets (by modification revision) until it is back under the bound; records
//! of the live job set are never pruned.

use std::collections::BTreeSet;

use etcd_client::{DeleteOptions, GetOptions};

use super::EtcdStore;
use crate::lease::{LeaseError, RebootRanStore};

/// The most record keys kept across all job sets.
pub(super) const MAX_KEYS: usize = 512;

impl EtcdStore {
    fn reboot_prefix(&self) -> String {
        format!("{}/reboot-ran/", self.election_name)
    }
}

#[tonic::async_trait]
impl RebootRanStore for EtcdStore {
    /// The jobs recorded under `job_set_id`.
    async fn read_reboot_ran(&mut self, job_set_id: &str) -> Result<BTreeSet<String>, LeaseError> {
        let prefix = format!("{}{job_set_id}/", self.reboot_prefix());
        let mut client = self.client().await?;
        let answer = self
            .request(
                "reading the @reboot records",
                client.get(
                    prefix.as_str(),
                    Some(GetOptions::new().with_prefix().with_keys_only()),
                ),
            )
            .await?;
        Ok(answer
            .kvs()
            .iter()
            .filter_map(|kv| kv.key_str().ok())
            .filter_map(|k| k.strip_prefix(prefix.as_str()))
            .filter(|job| !job.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// Puts one key per job under `job_set_id`, then prunes other job sets' keys past
    /// [`MAX_KEYS`].
    async fn record_reboot_ran(
        &mut self,
        job_set_id: &str,
        jobs: &BTreeSet<String>,
    ) -> Result<(), LeaseError> {
        let live = format!("{}{job_set_id}/", self.reboot_prefix());
        let node = self.node_name.clone();
        for job in jobs {
            let mut client = self.client().await?;
            let key = format!("{live}{job}");
            self.request(
                "recording an @reboot run",
                client.put(key, node.as_str(), None),
            )
            .await?;
        }
        let all = self.reboot_prefix();
        let mut client = self.client().await?;
        let answer = self
            .request(
                "listing the @reboot records",
                client.get(
                    all.as_str(),
                    Some(GetOptions::new().with_prefix().with_keys_only()),
                ),
            )
            .await?;
        let total = answer.kvs().len();
        if total <= MAX_KEYS {
            return Ok(());
        }
        let mut others: Vec<(i64, String)> = answer
            .kvs()
            .iter()
            .filter_map(|kv| Some((kv.mod_revision(), kv.key_str().ok()?.to_owned())))
            .filter(|(_, k)| !k.starts_with(live.as_str()))
            .collect();
        others.sort();
        for (_, key) in others.into_iter().take(total - MAX_KEYS) {
            let mut client = self.client().await?;
            self.request(
                "pruning old @reboot records",
                client.delete(key, None::<DeleteOptions>),
            )
            .await?;
        }
        Ok(())
    }
}
