//! Per-firing claims in etcd ([`crate::lease::claims`]): one plain key per claimed firing,
//! beside the election key.
//!
//! ```text
//! <electionName>/claims/<scheduledAtMs, 20 digits>/<job>    the JSON claim
//! ```
//!
//! A claim is one transaction, `create_revision(key) == 0` → put, else get: exactly one of two
//! claimers creates the key, and the other reads whose it is. The keys carry no etcd lease, so
//! they outlive the holder that wrote them. The instant comes first and zero-padded, so the
//! keys sort by instant and pruning is one range delete up to the bound.

use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp, TxnOpResponse};

use super::EtcdStore;
use crate::lease::LeaseError;
use crate::lease::claims::{ClaimWrite, FiringClaim, FiringClaimStore};

impl EtcdStore {
    fn claims_prefix(&self) -> String {
        format!("{}/claims/", self.election_name)
    }

    /// The key of every claim of the instant `scheduled_at_ms` (instants before 1970 sort
    /// first).
    fn claims_at(&self, scheduled_at_ms: i64) -> String {
        format!("{}{:020}/", self.claims_prefix(), scheduled_at_ms.max(0))
    }
}

#[tonic::async_trait]
impl FiringClaimStore for EtcdStore {
    async fn create_claim(&mut self, claim: &FiringClaim) -> Result<ClaimWrite, LeaseError> {
        let key = format!("{}{}", self.claims_at(claim.scheduled_at_ms), claim.job);
        let body = serde_json::to_string(claim).expect("a claim serialises");
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), body, None)])
            .or_else([TxnOp::get(key, None)]);
        let mut client = self.client().await?;
        let resp = self.request("claiming a firing", client.txn(txn)).await?;
        if resp.succeeded() {
            return Ok(ClaimWrite::Created);
        }
        let existing = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.value().to_vec()),
            _ => None,
        });
        // Deleted between the compare and the get (pruned): it existed, so it still counts.
        Ok(ClaimWrite::Exists(
            existing.and_then(|v| serde_json::from_slice(&v).ok()),
        ))
    }

    async fn release_claim(&mut self, claim: &FiringClaim) -> Result<bool, LeaseError> {
        let key = format!("{}{}", self.claims_at(claim.scheduled_at_ms), claim.job);
        let mut client = self.client().await?;
        let got = self
            .request("reading a claim", client.get(key.clone(), None))
            .await?;
        let Some(kv) = got.kvs().first() else {
            return Ok(false);
        };
        let mine = serde_json::from_slice::<FiringClaim>(kv.value())
            .is_ok_and(|c| crate::lease::claims::is_mine(&c, claim));
        if !mine {
            return Ok(false);
        }
        // Deleted only as read: whatever happened to the key since is not undone.
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                kv.mod_revision(),
            )])
            .and_then([TxnOp::delete(key, None)]);
        let resp = self.request("giving a claim back", client.txn(txn)).await?;
        Ok(resp.succeeded())
    }

    async fn prune_claims(&mut self, before_ms: i64) -> Result<usize, LeaseError> {
        let (from, to) = (self.claims_prefix(), self.claims_at(before_ms));
        let mut client = self.client().await?;
        let resp = self
            .request(
                "pruning old claims",
                client.delete(from, Some(DeleteOptions::new().with_range(to))),
            )
            .await?;
        Ok(usize::try_from(resp.deleted()).unwrap_or(0))
    }

    async fn claimed_between(
        &mut self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(String, i64)>, LeaseError> {
        let (from, to) = (
            self.claims_at(from_ms),
            self.claims_at(to_ms.saturating_add(1)),
        );
        let mut client = self.client().await?;
        let resp = self
            .request(
                "reading the claims",
                client.get(
                    from,
                    Some(GetOptions::new().with_range(to).with_keys_only()),
                ),
            )
            .await?;
        let prefix = self.claims_prefix();
        Ok(resp
            .kvs()
            .iter()
            .filter_map(|kv| {
                let rest = kv.key_str().ok()?.strip_prefix(&prefix)?;
                let (at, job) = rest.split_once('/')?;
                Some((job.to_owned(), at.parse().ok()?))
            })
            .collect())
    }

    async fn claims_of(
        &mut self,
        job: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<FiringClaim>, LeaseError> {
        let (from, to) = (
            self.claims_at(from_ms),
            self.claims_at(to_ms.saturating_add(1)),
        );
        let mut client = self.client().await?;
        let resp = self
            .request(
                "reading the claims",
                client.get(from, Some(GetOptions::new().with_range(to))),
            )
            .await?;
        Ok(resp
            .kvs()
            .iter()
            .filter_map(|kv| serde_json::from_slice::<FiringClaim>(kv.value()).ok())
            .filter(|c| c.job == job)
            .collect())
    }
}
