//! The etcd lease store (LSE-E-01..10) over etcd's native v3 gRPC API (`etcd-client`).
//!
//! One key, `electionName`, holds the leader's `nodeName`, bound to an etcd lease of `ttl`
//! seconds. A round:
//!
//! 1. keeps this node's etcd lease alive (granting one if it has none; a keepalive that reports
//!    TTL ≤ 0 means the lease is gone, so a fresh one is granted and the node campaigns anew,
//!    LSE-E-06);
//! 2. runs a create-if-absent transaction: `create_revision(key) == 0` → put the key bound to
//!    the lease, else read the key (LSE-E-01). This node leads only while the key is bound to
//!    *its own* lease id (LSE-E-02), whatever name the value carries;
//! 3. refuses to lead when the server granted a TTL under the 3 s floor (LSE-E-07), with one
//!    WARNING on the way down and one message on the way back.
//!
//! The server enforces the TTL and deletes the key when the holder's lease expires, so takeover
//! is judged on etcd's clock. The fence token is `lease:<id>@<create_revision>`: the revision the
//! key was created at, which changes on every takeover.
//!
//! Endpoints are tried in order (LSE-E-03): the store talks to one endpoint at a time and moves
//! to the next when a request to it fails. Every request is bounded by the per-request budget
//! `(ttl − ttl/3 − 1 s) / 5` (LSE-E-10). With `username`, the client authenticates at connect
//! and refreshes an expired token by itself; an authentication error also drops the connection,
//! so the next round authenticates afresh (LSE-E-04). A graceful release revokes the lease,
//! which deletes the key at once (LSE-E-08).
//!
//! `https://` endpoints use TLS (rustls with ring) with `cluster.etcd.tls.ca` as the only trust
//! root, and `cert`/`key` as the client certificate when set. This build has no system root
//! store, so an `https://` endpoint without `tls.ca` refuses to start, naming the key.

use std::time::Duration;

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, Identity, LeaseKeepAliveStream,
    LeaseKeeper, PutOptions, TlsOptions, Txn, TxnOp, TxnOpResponse,
};
use serde_json::{Map, Value};

use crate::clock;
use crate::config::cluster::EtcdConfig;
use crate::lease::{LeaseError, LeaseObservation, LeaseStore, LeaseTiming};

/// The TTL floor under which the fence collapses (LSE-E-07).
pub const TTL_FLOOR: i64 = 3;

/// The TLS settings for `https://` endpoints, read from `cluster.etcd.tls`; `Err` names the key.
pub(crate) fn tls_options(config: &EtcdConfig) -> Result<Option<TlsOptions>, String> {
    let https = config.endpoints.iter().any(|e| e.starts_with("https://"));
    let Some(tls) = config.tls.clone().or_else(|| https.then(Default::default)) else {
        return Ok(None);
    };
    let read = |key: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| {
            format!(
                "cluster.etcd.tls.{key}: cannot read {}: {e}",
                path.display()
            )
        })
    };
    let mut options = TlsOptions::new();
    match &tls.ca {
        Some(ca) => options = options.ca_certificate(Certificate::from_pem(read("ca", ca)?)),
        None if https => {
            return Err(
                "cluster.etcd.tls.ca is required for https:// endpoints: this build \
                        trusts only the CA it is given (no system root store)"
                    .to_owned(),
            );
        }
        None => {}
    }
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        options = options.identity(Identity::from_pem(read("cert", cert)?, read("key", key)?));
    }
    Ok(Some(options))
}

/// `cluster.etcd`'s credentials and TLS, resolved once for each client of that etcd (the
/// election, the handoff records).
pub(crate) struct EtcdAccess {
    user: Option<(String, String)>,
    /// TLS for `https://` endpoints.
    tls: Option<TlsOptions>,
    /// Why no client can connect at all (a secret that does not resolve, TLS files).
    pub(crate) unusable: Option<String>,
}

/// Where an etcd client's credentials come from. They are resolved again at every preparation
/// and every new connection, so a password file or TLS file that appears or is rotated after
/// the start is used without a restart (a secret volume mounted late, a renewed certificate).
#[derive(Debug, Clone)]
pub(crate) struct EtcdCredentials {
    config: EtcdConfig,
    password: PasswordSource,
}

#[derive(Debug, Clone)]
enum PasswordSource {
    /// Resolved once by the caller (tests, embedders).
    Resolved(Option<Result<String, String>>),
    /// `cluster.etcd.password`'s source, read from this environment each time.
    Env(crate::Environment),
}

impl EtcdCredentials {
    /// `config`'s TLS files with a password the caller already resolved.
    pub(crate) fn fixed(config: &EtcdConfig, password: Option<Result<String, String>>) -> Self {
        Self {
            config: config.clone(),
            password: PasswordSource::Resolved(password),
        }
    }

    /// `config`'s TLS files and password source, read from `env` at each resolution.
    pub(crate) fn from_env(config: &EtcdConfig, env: &crate::Environment) -> Self {
        Self {
            config: config.clone(),
            password: PasswordSource::Env(env.clone()),
        }
    }

    /// The `cluster.etcd` settings these credentials belong to.
    pub(crate) fn config(&self) -> &EtcdConfig {
        &self.config
    }

    /// Reads the files and the secret now.
    pub(crate) fn resolve(&self) -> EtcdAccess {
        EtcdAccess::resolve(&self.config, self.password())
    }

    /// Reads `cluster.etcd.password` now: `None` when none is configured, `Some(Err)` naming
    /// what failed.
    pub(crate) fn password(&self) -> Option<Result<String, String>> {
        match &self.password {
            PasswordSource::Resolved(p) => p.clone(),
            PasswordSource::Env(env) => self.config.password.as_ref().map(|p| {
                p.resolve(&|k| env.get(k), &|f| std::fs::read_to_string(f))
                    .map_err(|e| e.to_string())
            }),
        }
    }
}

impl EtcdAccess {
    /// Resolves `config`'s TLS and `username` with `password` (the resolved
    /// `cluster.etcd.password`; `Err`: why it did not resolve).
    pub(crate) fn resolve(config: &EtcdConfig, password: Option<Result<String, String>>) -> Self {
        let mut unusable = None;
        let user = match (&config.username, password) {
            (Some(u), Some(Ok(p))) => Some((u.clone(), p)),
            (Some(_), Some(Err(why))) => {
                unusable = Some(format!("cluster.etcd.password: {why}"));
                None
            }
            _ => None,
        };
        let tls = tls_options(config).unwrap_or_else(|why| {
            unusable = Some(why);
            None
        });
        Self {
            user,
            tls,
            unusable,
        }
    }

    /// Connect options for `endpoint`, every request and the connect bounded by `timeout`.
    pub(crate) fn options(&self, endpoint: &str, timeout: Duration) -> ConnectOptions {
        let mut opts = ConnectOptions::new()
            .with_timeout(timeout)
            .with_connect_timeout(timeout)
            .with_auto_token_refresh(true);
        if let Some((u, p)) = &self.user {
            opts = opts.with_user(u.clone(), p.clone());
        }
        if endpoint.starts_with("https://")
            && let Some(tls) = &self.tls
        {
            opts = opts.with_tls(tls.clone());
        }
        opts
    }
}

/// Whether a failed request means etcd no longer has the lease (expired or revoked).
fn is_lease_gone(e: &LeaseError) -> bool {
    matches!(e, LeaseError::Store(m) if m.contains("lease not found"))
}

/// This node's etcd lease.
struct Granted {
    id: i64,
    /// The TTL the server granted (seconds).
    ttl: i64,
    /// The open keepalive stream; reopened when it breaks.
    keeper: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
}

/// An etcd lease contender.
pub struct EtcdStore {
    endpoints: Vec<String>,
    election_name: String,
    node_name: String,
    ttl: u64,
    budget: Duration,
    /// Where the credentials and TLS files come from.
    credentials: EtcdCredentials,
    /// Their latest resolution; why this store cannot run at all, if so.
    access: EtcdAccess,
    timing: LeaseTiming,
    /// The endpoint currently talked to.
    at: usize,
    client: Option<Client>,
    lease: Option<Granted>,
    below_floor: bool,
}

/// The cadence for a ttl: keepalive and campaign every ttl/3; a round may take that long.
pub fn timing(ttl_secs: u64) -> LeaseTiming {
    let ttl = Duration::from_secs(ttl_secs);
    LeaseTiming {
        round_every: ttl / 3,
        round_timeout: ttl / 3,
        duration: ttl,
    }
}

fn err(what: &str, e: impl std::fmt::Display) -> LeaseError {
    LeaseError::Store(format!("{what}: {e}"))
}

impl EtcdStore {
    /// A contender for `node_name` configured by `config`. `password` is the resolved
    /// `cluster.etcd.password` (`Err`: why it did not resolve; the store then refuses to start).
    pub fn new(
        config: &EtcdConfig,
        node_name: &str,
        password: Option<Result<String, String>>,
    ) -> Self {
        Self::with_credentials(config, node_name, EtcdCredentials::fixed(config, password))
    }

    /// A contender whose password source and TLS files are read from `env` and the disk again
    /// at every preparation and every new connection.
    pub fn from_env(config: &EtcdConfig, node_name: &str, env: &crate::Environment) -> Self {
        Self::with_credentials(config, node_name, EtcdCredentials::from_env(config, env))
    }

    /// A contender reading its password and TLS files through `credentials` (shared with the
    /// store's other clients).
    pub(crate) fn with_credentials(
        config: &EtcdConfig,
        node_name: &str,
        credentials: EtcdCredentials,
    ) -> Self {
        Self {
            endpoints: config.endpoints.clone(),
            election_name: config.election_name.clone(),
            node_name: node_name.to_owned(),
            ttl: config.ttl,
            budget: config.renew_request_budget(),
            access: credentials.resolve(),
            credentials,
            timing: timing(config.ttl),
            at: 0,
            client: None,
            lease: None,
            below_floor: false,
        }
    }

    /// The lease id this node holds now, if any.
    pub fn lease_id(&self) -> Option<i64> {
        self.lease.as_ref().map(|g| g.id)
    }

    async fn client(&mut self) -> Result<Client, LeaseError> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        // A new connection reads the credentials again: a rotated password or certificate.
        self.access = self.credentials.resolve();
        if let Some(why) = &self.access.unusable {
            return Err(LeaseError::Store(why.clone()));
        }
        let endpoint = self.endpoints[self.at].clone();
        let opts = self.access.options(&endpoint, self.budget);
        let connect = Client::connect([endpoint.as_str()], Some(opts));
        let client = tokio::time::timeout(self.budget, connect)
            .await
            .map_err(|_| err(&format!("connecting to {endpoint}"), "timed out"))?
            .map_err(|e| err(&format!("connecting to {endpoint}"), e))?;
        self.client = Some(client.clone());
        Ok(client)
    }

    /// Forgets the connection after a failed request, and moves on to the next endpoint.
    fn failed(&mut self, e: &etcd_client::Error) {
        self.client = None;
        if let Some(g) = &mut self.lease {
            g.keeper = None;
        }
        let text = e.to_string();
        if text.contains("lease not found") {
            // The server dropped our lease: grant a new one next round (LSE-E-06).
            self.lease = None;
        }
        if !self.endpoints.is_empty() {
            self.at = (self.at + 1) % self.endpoints.len();
        }
    }

    async fn request<T>(
        &mut self,
        what: &str,
        fut: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, LeaseError> {
        let endpoint = self.endpoints[self.at].clone();
        match tokio::time::timeout(self.budget, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                self.failed(&e);
                Err(err(&format!("{what} on {endpoint}"), e))
            }
            Err(_) => {
                self.client = None;
                if let Some(g) = &mut self.lease {
                    g.keeper = None;
                }
                self.at = (self.at + 1) % self.endpoints.len();
                Err(err(
                    &format!("{what} on {endpoint}"),
                    format!(
                        "no answer within the per-request budget of {:?}",
                        self.budget
                    ),
                ))
            }
        }
    }

    /// Keeps this node's lease alive, granting a fresh one when it has none or lost it.
    /// Returns the lease id and the TTL the server honours.
    async fn keep_lease(&mut self, client: &mut Client) -> Result<(i64, i64), LeaseError> {
        if let Some(mut g) = self.lease.take() {
            let alive = self.keepalive(client, &mut g).await;
            match alive {
                Ok(ttl) if ttl > 0 => {
                    g.ttl = ttl;
                    let out = (g.id, g.ttl);
                    self.lease = Some(g);
                    return Ok(out);
                }
                Ok(_) => tracing::info!(
                    lease = g.id,
                    "cluster: etcd lease expired or was revoked; granting a new one and \
                     campaigning again"
                ),
                Err(e) => {
                    // Keep the lease: it may still be alive on the server.
                    self.lease = Some(g);
                    return Err(e);
                }
            }
        }
        let ttl = i64::try_from(self.ttl).unwrap_or(i64::MAX);
        let granted = self
            .request("granting a lease", client.lease_grant(ttl, None))
            .await?;
        self.lease = Some(Granted {
            id: granted.id(),
            ttl: granted.ttl(),
            keeper: None,
        });
        Ok((granted.id(), granted.ttl()))
    }

    async fn keepalive(&mut self, client: &mut Client, g: &mut Granted) -> Result<i64, LeaseError> {
        if g.keeper.is_none() {
            let id = g.id;
            match self
                .request("opening the lease keepalive", client.lease_keep_alive(id))
                .await
            {
                Ok(pair) => g.keeper = Some(pair),
                // The server no longer knows the lease: report it gone (TTL 0).
                Err(e) if is_lease_gone(&e) => return Ok(0),
                Err(e) => return Err(e),
            }
        }
        let Some((keeper, stream)) = g.keeper.as_mut() else {
            return Err(LeaseError::Store("no keepalive stream".into()));
        };
        let sent = tokio::time::timeout(self.budget, keeper.keep_alive()).await;
        let answer = match sent {
            Ok(Ok(())) => tokio::time::timeout(self.budget, stream.message()).await,
            Ok(Err(e)) => Ok(Err(e)),
            Err(elapsed) => Err(elapsed),
        };
        match answer {
            Ok(Ok(Some(resp))) => Ok(resp.ttl()),
            Ok(Ok(None)) => {
                g.keeper = None;
                Err(LeaseError::Store(
                    "the lease keepalive stream closed".into(),
                ))
            }
            Ok(Err(e)) => {
                g.keeper = None;
                if e.to_string().contains("lease not found") {
                    return Ok(0);
                }
                self.failed(&e);
                Err(err("keeping the lease alive", e))
            }
            Err(_) => {
                g.keeper = None;
                self.client = None;
                Err(err(
                    "keeping the lease alive",
                    format!("no answer within {:?}", self.budget),
                ))
            }
        }
    }

    async fn round(&mut self) -> Result<LeaseObservation, LeaseError> {
        let mut client = self.client().await?;
        let (id, ttl) = self.keep_lease(&mut client).await?;
        // LSE-E-07: under the floor the local deadline (ttl - 1 s) leaves no window to lead in.
        if ttl < TTL_FLOOR {
            if !self.below_floor {
                tracing::warn!(
                    "cluster: etcd granted a lease TTL of {ttl} s, below the {TTL_FLOOR} s floor: \
                     the fence collapses, so Leader jobs fail closed until the TTL recovers \
                     (check etcd's --min-lease-ttl and load)"
                );
                self.below_floor = true;
            }
            return Err(LeaseError::StandDown(format!(
                "etcd granted a lease TTL of {ttl} s, below the {TTL_FLOOR} s floor"
            )));
        }
        if self.below_floor {
            tracing::info!("cluster: etcd lease TTL is {ttl} s again, at or above the floor");
            self.below_floor = false;
        }
        let key = self.election_name.clone();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                self.node_name.clone(),
                Some(PutOptions::new().with_lease(id)),
            )])
            .or_else([TxnOp::get(key, None)]);
        let resp = self
            .request("the campaign transaction", client.txn(txn))
            .await?;
        let (held, holder, revision, renewal) = if resp.succeeded() {
            let rev = resp.header().map_or(0, |h| h.revision());
            (true, Some(self.node_name.clone()), rev, Some(rev))
        } else {
            let kv = resp.op_responses().into_iter().find_map(|r| match r {
                TxnOpResponse::Get(g) => g.kvs().first().cloned(),
                _ => None,
            });
            match kv {
                // Deleted between the compare and the get: nobody holds it this instant.
                None => (false, None, 0, None),
                Some(kv) => (
                    kv.lease() == id,
                    kv.value_str().ok().map(str::to_owned),
                    kv.create_revision(),
                    Some(kv.mod_revision()),
                ),
            }
        };
        if held && !resp.succeeded() {
            self.show_renewal(&mut client, id).await?;
        }
        Ok(self.observation(held, holder, id, revision, ttl, renewal))
    }

    /// Rewrites the election key, unchanged and still bound to this node's lease, so its
    /// `mod_revision` moves: a keepalive alone leaves no trace a follower can read, and a
    /// follower that sees no change for the silence bound runs PreferLeader itself. Guarded by
    /// the lease, so a key another node has taken meanwhile is left alone.
    async fn show_renewal(&mut self, client: &mut Client, id: i64) -> Result<(), LeaseError> {
        let key = self.election_name.clone();
        let txn = Txn::new()
            .when([Compare::lease(key.clone(), CompareOp::Equal, id)])
            .and_then([TxnOp::put(
                key,
                self.node_name.clone(),
                Some(PutOptions::new().with_lease(id)),
            )]);
        self.request("rewriting the election key", client.txn(txn))
            .await
            .map(|_| ())
    }

    /// A round that only reads the election key: it neither grants, keeps alive nor takes a
    /// lease (the driver calls it while this node must not hold).
    async fn follow_round(&mut self) -> Result<LeaseObservation, LeaseError> {
        let mut client = self.client().await?;
        let key = self.election_name.clone();
        let resp = self
            .request("reading the election key", client.get(key, None))
            .await?;
        let kv = resp.kvs().first();
        let holder = kv.and_then(|kv| kv.value_str().ok().map(str::to_owned));
        let renewal = kv.map(|kv| kv.mod_revision());
        let ttl = i64::try_from(self.ttl).unwrap_or(i64::MAX);
        Ok(self.observation(false, holder, 0, 0, ttl, renewal))
    }

    /// What a round saw, as the driver and `GET /cluster` take it.
    fn observation(
        &self,
        held: bool,
        holder: Option<String>,
        id: i64,
        revision: i64,
        ttl: i64,
        renewal: Option<i64>,
    ) -> LeaseObservation {
        let ttl_d = Duration::from_secs(ttl.unsigned_abs());
        let expiry_ms = held.then(|| clock::now_ms() + (ttl * 1000));
        let mut block = Map::new();
        block.insert(
            "electionName".into(),
            Value::String(self.election_name.clone()),
        );
        block.insert("identity".into(), Value::String(self.node_name.clone()));
        block.insert(
            "holder".into(),
            holder.clone().map_or(Value::Null, Value::String),
        );
        block.insert(
            "leaseId".into(),
            if held { Value::from(id) } else { Value::Null },
        );
        block.insert(
            "expiry".into(),
            expiry_ms
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map_or(Value::Null, |t| Value::String(t.to_rfc3339())),
        );
        LeaseObservation {
            held_by_me: held,
            holder,
            fence: held.then(|| format!("lease:{id}@{revision}")),
            expiry_ms,
            renewal,
            block,
            valid_for: Some(ttl_d),
        }
    }
}

impl LeaseStore for EtcdStore {
    fn backend_name(&self) -> &'static str {
        "etcd"
    }

    fn timing(&self) -> LeaseTiming {
        self.timing
    }

    async fn prepare(&mut self) -> Result<(), String> {
        // Read again at every retry, so files that appear after the start are used.
        self.access = self.credentials.resolve();
        if let Some(why) = &self.access.unusable {
            return Err(format!("cluster.backend etcd: cannot start: {why}"));
        }
        tracing::info!(
            "cluster: etcd election at {} (election={}, identity={}, ttl={}s, per-request budget \
             {:?})",
            self.endpoints.join(", "),
            self.election_name,
            self.node_name,
            self.ttl,
            self.budget
        );
        Ok(())
    }

    async fn campaign(&mut self) -> Result<LeaseObservation, LeaseError> {
        self.round().await
    }

    async fn follow(&mut self) -> Result<LeaseObservation, LeaseError> {
        self.follow_round().await
    }

    async fn release(&mut self) -> Result<(), LeaseError> {
        let Some(g) = self.lease.take() else {
            return Ok(());
        };
        let mut client = self.client().await?;
        self.request("revoking the lease", client.lease_revoke(g.id))
            .await
            .map(|_| ())
    }
}

mod claims;
mod reboot;
mod runs;

// Most of the store's tests need a real etcd (and one of them root and network namespaces):
// they are in the integration tier, `tests/tests/integration/etcd_store.rs` and
// `tests/tests/lab/etcd_cluster.rs`, so the coordinator's unit tests run without either;
// `tests` holds what runs without one.

// Retry handoffs in etcd (RTY-04).
pub mod handoff;
// The run ledger in etcd (`state.store: etcd`).
pub mod ledger;

#[cfg(test)]
mod tests;
