//! Handoff records in etcd: one plain key per handed-off firing, beside the election key.
//!
//! ```text
//! <electionName>/handoff/<job>/<scheduledAtMs>     the JSON record
//! ```
//!
//! The keys carry no etcd lease, so they outlive the node that wrote them. A claim is one
//! transaction, `mod_revision(key) == <revision seen by the scan>` → put the record marked with
//! the claim's token: exactly one claimer's transaction succeeds, a record rewritten after the
//! scan is not claimed on the strength of the older version, and a claimer that lost the answer
//! reads the key to learn whether its token holds it. Removing and releasing a claim compare the
//! claimed version's mod revision the same way, so neither can touch a newer record. This client has its own connection, separate from the
//! election's, so handoff traffic never delays a lease renewal.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};

use super::{EtcdAccess, EtcdCredentials};
use crate::config::cluster::EtcdConfig;
use crate::handoff::{
    HandoffError, HandoffRecord, HandoffStore, Handoffs, Pending, serialised_handoff_store,
};

/// The bound on one etcd request of the handoff client.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The handoff keys of one election.
pub struct EtcdHandoffs {
    endpoints: Vec<String>,
    prefix: String,
    credentials: EtcdCredentials,
    access: EtcdAccess,
    at: usize,
    client: Option<Client>,
}

fn fail(what: &str, e: impl std::fmt::Display) -> HandoffError {
    HandoffError::Store(format!("{what}: {e}"))
}

impl EtcdHandoffs {
    /// The handoff keys under `config.election_name`; `password` as for the election client.
    pub(crate) fn new(config: &EtcdConfig, credentials: EtcdCredentials) -> Self {
        Self {
            endpoints: config.endpoints.clone(),
            prefix: format!("{}/handoff/", config.election_name),
            access: credentials.resolve(),
            credentials,
            at: 0,
            client: None,
        }
    }

    /// The key of one firing's record.
    pub(crate) fn key(&self, job: &str, scheduled_at_ms: i64) -> String {
        format!("{}{job}/{scheduled_at_ms}", self.prefix)
    }

    async fn client(&mut self) -> Result<Client, HandoffError> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        // A new connection reads the credentials again: files that appeared or were rotated.
        self.access = self.credentials.resolve();
        if let Some(why) = &self.access.unusable {
            return Err(HandoffError::Store(why.clone()));
        }
        if self.endpoints.is_empty() {
            return Err(HandoffError::Store(
                "cluster.etcd.endpoints is empty".into(),
            ));
        }
        let endpoint = self.endpoints[self.at % self.endpoints.len()].clone();
        let opts = self.access.options(&endpoint, REQUEST_TIMEOUT);
        let what = format!("connecting to {endpoint} for handoff records");
        let client = tokio::time::timeout(
            REQUEST_TIMEOUT,
            Client::connect([endpoint.as_str()], Some(opts)),
        )
        .await
        .map_err(|_| fail(&what, "timed out"))?
        .map_err(|e| fail(&what, e))?;
        self.client = Some(client.clone());
        Ok(client)
    }

    /// Forgets the connection after a failure and moves to the next endpoint.
    fn failed(&mut self) {
        self.client = None;
        self.at = self.at.wrapping_add(1);
    }

    async fn request<T>(
        &mut self,
        what: &str,
        fut: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, HandoffError> {
        match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                self.failed();
                Err(fail(what, e))
            }
            Err(_) => {
                self.failed();
                Err(fail(what, format!("no answer within {REQUEST_TIMEOUT:?}")))
            }
        }
    }

    pub(crate) async fn write(&mut self, record: &HandoffRecord) -> Result<(), HandoffError> {
        let key = self.key(&record.job, record.scheduled_at_ms);
        let body = serde_json::to_vec(record)
            .map_err(|e| fail(&format!("encoding the handoff record {key}"), e))?;
        let mut client = self.client().await?;
        let what = format!("writing the handoff record {key}");
        self.request(&what, client.put(key.clone(), body, None))
            .await
            .map(|_| ())
    }

    pub(crate) async fn pending(&mut self) -> Result<Vec<Pending>, HandoffError> {
        let mut client = self.client().await?;
        let prefix = self.prefix.clone();
        let what = format!("listing the handoff records under {prefix}");
        let got = self
            .request(
                &what,
                client.get(prefix.clone(), Some(GetOptions::new().with_prefix())),
            )
            .await?;
        let mut found = Vec::new();
        for kv in got.kvs() {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            match serde_json::from_slice::<HandoffRecord>(kv.value()) {
                Ok(record) => found.push(Pending {
                    record,
                    name: key,
                    revision: kv.mod_revision(),
                }),
                Err(e) => tracing::warn!(key, "ignoring an unreadable handoff record: {e}"),
            }
        }
        Ok(found)
    }

    /// Runs `then` when `key` is still at `revision`; whether it ran, and the txn's revision.
    async fn if_unchanged(
        &mut self,
        what: &str,
        key: &str,
        revision: i64,
        then: TxnOp,
    ) -> Result<(bool, i64), HandoffError> {
        let mut client = self.client().await?;
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, revision)])
            .and_then([then]);
        let r = self.request(what, client.txn(txn)).await?;
        let at = r.header().map_or(0, |h| h.revision());
        Ok((r.succeeded(), at))
    }

    pub(crate) async fn claim(
        &mut self,
        p: &Pending,
        token: &str,
        now_ms: i64,
    ) -> Result<Option<Pending>, HandoffError> {
        let record = p.record.claimed(token, now_ms);
        let body = serde_json::to_vec(&record)
            .map_err(|e| fail(&format!("encoding the claim on {}", p.name), e))?;
        let what = format!("claiming the handoff record {}", p.name);
        let put = TxnOp::put(p.name.clone(), body, None);
        let (won, revision) = self.if_unchanged(&what, &p.name, p.revision, put).await?;
        Ok(won.then(|| Pending {
            record,
            name: p.name.clone(),
            revision,
        }))
    }

    pub(crate) async fn find_claim(
        &mut self,
        p: &Pending,
        token: &str,
    ) -> Result<Option<Pending>, HandoffError> {
        let mut client = self.client().await?;
        let what = format!("reading the handoff record {}", p.name);
        let got = self
            .request(&what, client.get(p.name.clone(), None))
            .await?;
        Ok(got.kvs().first().and_then(|kv| {
            let record = serde_json::from_slice::<HandoffRecord>(kv.value()).ok()?;
            (record.claimed_by.as_deref() == Some(token)).then(|| Pending {
                record,
                name: p.name.clone(),
                revision: kv.mod_revision(),
            })
        }))
    }

    pub(crate) async fn remove(&mut self, p: &Pending) -> Result<bool, HandoffError> {
        let what = format!("removing the handoff record {}", p.name);
        let delete = TxnOp::delete(p.name.clone(), None);
        let (removed, _) = self
            .if_unchanged(&what, &p.name, p.revision, delete)
            .await?;
        Ok(removed)
    }

    pub(crate) async fn release(&mut self, claimed: &Pending) -> Result<(), HandoffError> {
        let body = serde_json::to_vec(&claimed.record.unclaimed())
            .map_err(|e| fail(&format!("encoding the handoff record {}", claimed.name), e))?;
        let what = format!("releasing the claim on {}", claimed.name);
        let put = TxnOp::put(claimed.name.clone(), body, None);
        self.if_unchanged(&what, &claimed.name, claimed.revision, put)
            .await
            .map(|_| ())
    }
}

// Calls on one client are serialised: it holds per-call state.
serialised_handoff_store!(EtcdHandoffs, "etcd");

impl EtcdHandoffs {
    /// The bounded handoffs in the etcd `config` names, with `credentials`.
    pub(crate) fn handoffs(config: &EtcdConfig, credentials: EtcdCredentials) -> Handoffs {
        Handoffs::new(tokio::sync::Mutex::new(Self::new(config, credentials)))
    }

    /// The same with `config`'s TLS files and no password (tests).
    pub fn without_password(config: &EtcdConfig) -> Handoffs {
        Self::handoffs(config, EtcdCredentials::fixed(config, None))
    }
}
