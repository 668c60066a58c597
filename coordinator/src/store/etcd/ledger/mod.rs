//! The run ledger in etcd (`state.store: etcd`), for a cluster that elects through etcd and
//! has no durable local disk: run history survives a coordinator restart, and a pod that is
//! rescheduled to another machine finds its history again.
//!
//! Each node writes its own records under `<electionName>/ledger/<node>/<key>`, one key per
//! record, in the same JSON format as the `state.path` file. The key is the record's
//! recording time (20-digit Unix ms) and a per-process counter, so keys sort by time across
//! restarts without a read before the first write. A record's output tail is cut to its last
//! 1 KiB in etcd, and each node keeps its newest 5,000 records, so the ledger stays a few MB
//! of the etcd the election depends on (run etcd with `--auto-compaction-retention`, as for
//! any etcd that sees steady writes, so old revisions are reclaimed). A single writer task drains the ledger's
//! sink and puts batches in one transaction each; while etcd is unreachable it keeps its batch
//! and retries with backoff (the sink's bounded queue drops the excess with a WARNING, as the
//! file writer does), so a store outage never slows a ShouldRun answer.
//!
//! At start the node's keys are read back page by page (bounded by [`LOAD_TIMEOUT`]: a store
//! that does not answer costs the history, never the start). The prefix is pruned to the
//! newest [`KEEP`] records.

use std::time::Duration;

use etcd_client::{Client, DeleteOptions, GetOptions, SortOrder, SortTarget, Txn, TxnOp};
use tokio::sync::mpsc;

use crate::config::cluster::EtcdConfig;
use crate::ledger::codec::{decode, encode};
use crate::ledger::{Ledger, LedgerStore, LedgerStoreError, Record, RunEnd};
use crate::store::etcd::EtcdCredentials;

/// How long the start waits for the history.
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Records kept per node in etcd (the in-memory ledger keeps 200 per job). With values capped
/// near [`TAIL_IN_ETCD`] this is a few MB per node, far inside etcd's space quota, which the
/// election shares.
pub const KEEP: i64 = 5_000;
/// The most output-tail bytes a record keeps in etcd (the file ledger keeps the whole tail).
pub const TAIL_IN_ETCD: usize = 1024;
/// Records per transaction: well inside etcd's default 128 operations per txn.
const BATCH: usize = 64;
/// Keys read per page at start, so no response nears the client's message limit.
const PAGE: i64 = 500;
/// Records waiting for the writer (as the file writer).
const QUEUE: usize = 16 * 1024;
/// How often (in records written) the prefix is pruned.
const PRUNE_EVERY: u64 = 1_000;

/// The value stored for `record`: the file format, with the output tail cut to its last
/// [`TAIL_IN_ETCD`] bytes.
fn value_of(record: &Record) -> Vec<u8> {
    if let crate::ledger::Event::Finished(RunEnd { output_tail, .. }) = &record.event
        && output_tail.len() > TAIL_IN_ETCD
    {
        let mut short = record.clone();
        if let crate::ledger::Event::Finished(RunEnd { output_tail, .. }) = &mut short.event {
            let mut cut = output_tail.len() - TAIL_IN_ETCD;
            while !output_tail.is_char_boundary(cut) {
                cut += 1;
            }
            *output_tail = output_tail[cut..].to_owned();
        }
        return encode(&short);
    }
    encode(record)
}

/// Whether a failed write will fail again however often it is retried (the batch, not the
/// store, is the problem).
fn is_permanent(why: &str) -> bool {
    [
        "request is too large",
        "permission denied",
        "invalid auth token",
    ]
    .iter()
    .any(|m| why.contains(m))
}

/// Why the etcd ledger cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerEtcdError {
    /// The etcd connection settings do not work (TLS files, a password that does not resolve).
    #[error("state.store etcd: {0}")]
    Settings(String),
}

/// Where one node's records live.
#[derive(Debug, Clone)]
pub struct EtcdLedgerPlace {
    /// `<electionName>/ledger/<node>/`.
    pub prefix: String,
}

impl EtcdLedgerPlace {
    /// The prefix of `node`'s records under `election_name`.
    pub fn new(election_name: &str, node: &str) -> Self {
        Self {
            prefix: format!("{election_name}/ledger/{node}/"),
        }
    }

    fn key(&self, record: &Record, n: u64) -> String {
        format!(
            "{}{:020}-{n:010}",
            self.prefix,
            record.recorded_at_ms.max(0)
        )
    }

    /// The first key after every key of the prefix (its range end).
    fn end(&self) -> String {
        let mut end = self.prefix.clone().into_bytes();
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        String::from_utf8(end).unwrap_or_default()
    }
}

/// Connects with `cluster.etcd`'s endpoints, TLS files and password, all read now (a rotated
/// certificate or password is used by the next connection).
async fn connect(credentials: &EtcdCredentials, timeout: Duration) -> Result<Client, String> {
    let config = credentials.config();
    let access = credentials.resolve();
    if let Some(why) = &access.unusable {
        return Err(why.clone());
    }
    let https = config.endpoints.iter().find(|e| e.starts_with("https://"));
    let opts = access.options(https.map_or("", String::as_str), timeout);
    tokio::time::timeout(
        timeout,
        Client::connect(config.endpoints.clone(), Some(opts)),
    )
    .await
    .map_err(|_| "connecting timed out".to_owned())?
    .map_err(|e| e.to_string())
}

/// Reads `place`'s records into `ledger`, oldest first; returns how many loaded and skipped.
async fn load(
    client: &mut Client,
    place: &EtcdLedgerPlace,
    ledger: &Ledger,
) -> Result<(usize, usize), String> {
    let (mut loaded, mut skipped) = (0, 0);
    let mut from = place.prefix.clone();
    loop {
        let opts = GetOptions::new()
            .with_range(place.end())
            .with_sort(SortTarget::Key, SortOrder::Ascend)
            .with_limit(PAGE);
        let page = client
            .get(from.clone(), Some(opts))
            .await
            .map_err(|e| e.to_string())?;
        let kvs = page.kvs();
        for kv in kvs {
            match decode(kv.value()) {
                Some(r) => {
                    ledger.restore(r);
                    loaded += 1;
                }
                None => skipped += 1,
            }
        }
        match kvs.last() {
            Some(last) if page.more() => {
                let mut next = last.key().to_vec();
                next.push(0);
                from = String::from_utf8(next).map_err(|e| e.to_string())?;
            }
            _ => return Ok((loaded, skipped)),
        }
    }
}

/// The ledger kept in the etcd the cluster elects through, one prefix per node.
#[derive(Debug, Clone)]
pub struct EtcdLedger {
    credentials: EtcdCredentials,
}

impl EtcdLedger {
    /// The ledger in `cluster.etcd`'s etcd, reached with `credentials` (the store's one
    /// source of its TLS files and password).
    pub(crate) fn new(credentials: EtcdCredentials) -> Self {
        Self { credentials }
    }

    /// The same with `config`'s TLS files and no password (tests).
    pub fn without_password(config: &EtcdConfig) -> Self {
        Self::new(EtcdCredentials::fixed(config, None))
    }
}

#[tonic::async_trait]
impl LedgerStore for EtcdLedger {
    fn store_name(&self) -> &'static str {
        "etcd"
    }

    async fn open(&self, node: &str, ledger: &Ledger) -> Result<(), LedgerStoreError> {
        open(&self.credentials, node, ledger)
            .await
            .map_err(|e| LedgerStoreError::from(Box::new(e) as Box<_>))
    }
}

/// Loads `node`'s history from etcd into `ledger` (bounded by [`LOAD_TIMEOUT`]) and starts
/// the writer task that stores every later record. Call before anything records. Only
/// unusable settings are an error; an unreachable etcd is a WARNING.
async fn open(
    credentials: &EtcdCredentials,
    node: &str,
    ledger: &Ledger,
) -> Result<(), LedgerEtcdError> {
    let config = credentials.config();
    // TLS files or a password that do not resolve at the start are a settings error; later
    // they are read again at every connection, so rotated ones are used.
    if let Some(why) = credentials.resolve().unusable {
        return Err(LedgerEtcdError::Settings(why));
    }
    let place = EtcdLedgerPlace::new(&config.election_name, node);
    let budget = config.renew_request_budget().max(Duration::from_secs(1));
    let loading = async {
        let mut client = connect(credentials, budget).await?;
        load(&mut client, &place, ledger).await
    };
    match tokio::time::timeout(LOAD_TIMEOUT, loading).await {
        Ok(Ok((loaded, skipped))) => {
            if skipped > 0 {
                tracing::warn!(
                    prefix = place.prefix,
                    skipped,
                    "ledger: skipped unreadable records in etcd; the rest is loaded"
                );
            }
            tracing::info!(
                prefix = place.prefix,
                records = loaded,
                "ledger: history loaded from etcd"
            );
        }
        Ok(Err(why)) => tracing::warn!(
            prefix = place.prefix,
            "ledger: could not read the history from etcd ({why}); starting without it, new records are still stored"
        ),
        Err(_) => tracing::warn!(
            prefix = place.prefix,
            "ledger: etcd did not return the history within {LOAD_TIMEOUT:?}; starting without it, new records are still stored"
        ),
    }
    let (tx, rx) = mpsc::channel(QUEUE);
    ledger.set_sink(tx);
    crate::spawn(write_all(credentials.clone(), place, budget, rx));
    Ok(())
}

/// The writer: batches of records, one transaction each, retried until they land. Ends when
/// the ledger (and with it the sender) is dropped.
async fn write_all(
    credentials: EtcdCredentials,
    place: EtcdLedgerPlace,
    budget: Duration,
    mut rx: mpsc::Receiver<Record>,
) {
    let mut client: Option<Client> = None;
    let mut n: u64 = 0;
    let mut since_prune: u64 = 0;
    let mut failing = false;
    let mut batch: Vec<(String, Vec<u8>)> = Vec::new();
    loop {
        if batch.is_empty() {
            let Some(first) = rx.recv().await else { return };
            batch.push((place.key(&first, n), value_of(&first)));
            n += 1;
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(r) => {
                        batch.push((place.key(&r, n), value_of(&r)));
                        n += 1;
                    }
                    Err(_) => break,
                }
            }
        }
        let result = async {
            if client.is_none() {
                client = Some(connect(&credentials, budget).await?);
            }
            let c = client.as_mut().expect("connected above");
            let ops: Vec<TxnOp> = batch
                .iter()
                .map(|(k, v)| TxnOp::put(k.clone(), v.clone(), None))
                .collect();
            tokio::time::timeout(budget, c.txn(Txn::new().and_then(ops)))
                .await
                .map_err(|_| "the write timed out".to_owned())?
                .map_err(|e| e.to_string())?;
            Ok::<(), String>(())
        }
        .await;
        match result {
            Ok(()) => {
                if failing {
                    tracing::info!(prefix = place.prefix, "ledger: writing to etcd again");
                    failing = false;
                }
                since_prune += batch.len() as u64;
                batch.clear();
                if since_prune >= PRUNE_EVERY
                    && let Some(c) = client.as_mut()
                {
                    since_prune = 0;
                    if let Err(why) = prune(c, &place, budget, KEEP).await {
                        tracing::warn!(
                            prefix = place.prefix,
                            "ledger: pruning old records in etcd failed: {why}"
                        );
                    }
                }
            }
            Err(why) if is_permanent(&why) => {
                tracing::warn!(
                    prefix = place.prefix,
                    first_key = batch.first().map(|(k, _)| k.as_str()).unwrap_or_default(),
                    records = batch.len(),
                    "ledger: etcd refused these records ({why}); they are kept in memory only"
                );
                batch.clear();
            }
            Err(why) => {
                if !failing {
                    tracing::warn!(
                        prefix = place.prefix,
                        "ledger: cannot write to etcd ({why}); keeping the records in memory and retrying"
                    );
                    failing = true;
                }
                client = None;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Deletes all but the newest `keep` records of `place`.
async fn prune(
    client: &mut Client,
    place: &EtcdLedgerPlace,
    budget: Duration,
    keep: i64,
) -> Result<(), String> {
    let count = tokio::time::timeout(
        budget,
        client.get(
            place.prefix.clone(),
            Some(GetOptions::new().with_range(place.end()).with_count_only()),
        ),
    )
    .await
    .map_err(|_| "timed out".to_owned())?
    .map_err(|e| e.to_string())?
    .count();
    let excess = count - keep;
    if excess <= 0 {
        return Ok(());
    }
    // The first key to keep: the excess-th key in order, by key ascending.
    let first_kept = tokio::time::timeout(
        budget,
        client.get(
            place.prefix.clone(),
            Some(
                GetOptions::new()
                    .with_range(place.end())
                    .with_sort(SortTarget::Key, SortOrder::Ascend)
                    .with_keys_only()
                    .with_limit(excess + 1),
            ),
        ),
    )
    .await
    .map_err(|_| "timed out".to_owned())?
    .map_err(|e| e.to_string())?;
    let Some(kv) = first_kept.kvs().last() else {
        return Ok(());
    };
    let upto = kv.key().to_vec();
    tokio::time::timeout(
        budget,
        client.delete(
            place.prefix.clone(),
            Some(DeleteOptions::new().with_range(upto)),
        ),
    )
    .await
    .map_err(|_| "timed out".to_owned())?
    .map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests;

/// The checks against a real etcd, run by the integration tier.
#[cfg(any(test, feature = "testkit"))]
pub mod checks;
