//! The Kubernetes lease store (LSE-K-01..10): one `coordination.k8s.io/v1` Lease, contended
//! for with the client-go leader-election algorithm.
//!
//! A round (client-go `tryAcquireOrRenew`):
//!
//! 1. GET the Lease `leaseName` in `leaseNamespace` (or the pod's namespace). A 404 → POST a
//!    new one naming this process; a 409 AlreadyExists means another replica created it first,
//!    so this node stands down for the round.
//! 2. Remember when the record last *changed* (holder, renewTime or resourceVersion), on this
//!    node's monotonic clock: client-go's `observedTime` (LSE-K-02). The remote `renewTime` is
//!    never compared with the local wall clock, so a skewed clock cannot steal a live lease.
//! 3. Held by another holder and changed less than `leaseDurationSeconds` ago → follow. Free
//!    (holder cleared) or unchanged for that long → take it over (`leaseTransitions` + 1). Held
//!    by this process → renew (`renewTime` = now).
//! 4. Every write is a PUT carrying the observed `metadata.resourceVersion`: a 409 Conflict
//!    means another writer got in first and this node stands down this round (LSE-K-03).
//!
//! The holder written is `<identity>#<token>`, the token 12 random hex digits per process
//! (LSE-K-04, LSE-K-10), so a duplicate identity or a restarted pod is a different holder
//! (LSE-03); `/cluster` shows it with the token stripped. The fence a RUN carries is
//! `<token>@<resourceVersion>` of this node's last successful write. A graceful release PUTs
//! the holder cleared (LSE-K-05, best effort: a racing write makes the handover wait out the
//! lease).
//!
//! Timing: rounds every `retryPeriodSeconds`, each bounded by `renewDeadlineSeconds` (a renew
//! that cannot finish by then fails the round), lease duration `leaseDurationSeconds`.
//!
//! Two clients speak to the apiserver: the kube crate (`clientLibrary: library`, and `auto`,
//! since it is built in; [`api::library`]) and a small built-in REST client
//! (`http`; [`api`]). Both use the same credentials and the same algorithm.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::clock;
use crate::config::cluster::{ClientLibrary, KubernetesConfig};
use crate::lease::{LeaseError, LeaseObservation, LeaseStore, LeaseTiming};
use api::library::LibraryClient;
use api::{ApiClient, K8sEnv, resolve};

pub use rules::{Action, Observed, decide, strip_token, timing};

/// One request of the algorithm.
#[derive(Clone, Copy)]
enum Call<'a> {
    Get,
    Post(&'a Value),
    Put(&'a Value),
}

impl Call<'_> {
    fn verb(self) -> &'static str {
        match self {
            Call::Get => "reading",
            Call::Post(_) => "creating",
            Call::Put(_) => "updating",
        }
    }
}

/// A per-process holder token: 12 hex digits (the filesystem store's format, LSE-K-10).
fn token() -> String {
    let mut b = [0u8; 6];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness: the pid and the time still differ per process.
        let seed = (u64::from(std::process::id()) << 32) ^ clock::now_ms().unsigned_abs();
        b.copy_from_slice(&seed.to_be_bytes()[2..]);
    }
    hex::encode(b)
}

/// `metav1.MicroTime` for the wall-clock instant `ms`: RFC 3339 UTC with microseconds.
fn micro_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// The `message` of a Kubernetes `Status` body, or the raw body.
fn status_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect())
}

/// A Kubernetes Lease contender.
pub struct KubernetesStore {
    config: KubernetesConfig,
    env: K8sEnv,
    identity: String,
    token: String,
    holder: String,
    timing: LeaseTiming,
    api: Option<ApiClient>,
    /// The kube client, when `clientLibrary` is `library` or `auto`; else requests go through
    /// [`ApiClient`] itself.
    library: Option<LibraryClient>,
    namespace: String,
    observed: Option<Observed>,
    /// Whether a write naming this process may have landed: release then has work to do.
    may_hold: bool,
    rotation_warned: bool,
}

impl KubernetesStore {
    /// A contender for `node_name` (the identity unless `identity` is set), reaching the
    /// apiserver as `config` and `env` say. Nothing is read until [`LeaseStore::prepare`].
    pub fn new(config: &KubernetesConfig, node_name: &str, env: K8sEnv) -> Self {
        let identity = config
            .identity
            .clone()
            .unwrap_or_else(|| node_name.to_owned());
        let token = token();
        Self {
            holder: format!("{identity}#{token}"),
            identity,
            token,
            timing: timing(config),
            config: config.clone(),
            env,
            api: None,
            library: None,
            namespace: config.lease_namespace.clone().unwrap_or_default(),
            observed: None,
            may_hold: false,
            rotation_warned: false,
        }
    }

    /// The same store on another cadence (tests run on sub-second rounds).
    pub fn with_timing(mut self, timing: LeaseTiming) -> Self {
        self.timing = timing;
        self
    }

    /// This process's holder string, `<identity>#<token>`.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    fn lease_path(&self) -> String {
        format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
            self.namespace, self.config.lease_name
        )
    }

    /// Each request gets half the round, so a slow GET still leaves the write its turn.
    fn request_budget(&self) -> Duration {
        self.timing.round_timeout / 2
    }

    /// Whether this store talks through the kube crate (`library`, `auto`) or its own REST
    /// client (`http`).
    fn uses_library(&self) -> bool {
        self.config.client_library != ClientLibrary::Http
    }

    /// One request, through whichever client is in use. Success carries the Lease as JSON; an
    /// apiserver error carries its `Status` message, for the caller to judge by status code.
    async fn send(&self, call: Call<'_>) -> Result<(StatusCode, Value), LeaseError> {
        let budget = self.request_budget();
        if let Some(lib) = &self.library {
            let (ns, name) = (self.namespace.as_str(), self.config.lease_name.as_str());
            let what = format!("{} lease {ns}/{name}", call.verb());
            let fut = async {
                match call {
                    Call::Get => lib.get(ns, name).await,
                    Call::Post(b) => lib.create(ns, b).await,
                    Call::Put(b) => lib.replace(ns, name, b).await,
                }
            };
            return match tokio::time::timeout(budget, fut).await {
                Ok(Ok(a)) => Ok(a),
                Ok(Err(e)) => Err(LeaseError::Store(format!("{what}: {e}"))),
                Err(_) => Err(LeaseError::Store(format!(
                    "{what}: no answer within {budget:?}"
                ))),
            };
        }
        let api = self
            .api
            .as_ref()
            .ok_or_else(|| LeaseError::Store("the apiserver client is not set up".into()))?;
        let (method, path, body) = match call {
            Call::Get => (Method::GET, self.lease_path(), None),
            Call::Post(b) => (
                Method::POST,
                format!(
                    "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
                    self.namespace
                ),
                Some(b),
            ),
            Call::Put(b) => (Method::PUT, self.lease_path(), Some(b)),
        };
        let body = body.map(|b| b.to_string().into_bytes());
        let answer = api
            .send(method, &path, body, budget)
            .await
            .map_err(LeaseError::Store)?;
        let value = if answer.status.is_success() {
            serde_json::from_slice(&answer.body).map_err(|e| {
                LeaseError::Store(format!("{path}: the apiserver answered with no Lease: {e}"))
            })?
        } else {
            Value::String(status_message(&answer.body))
        };
        Ok((answer.status, value))
    }

    fn observe(&mut self, lease: &Value, now: Instant) -> Observed {
        let spec = &lease["spec"];
        let mut seen = Observed {
            holder: spec["holderIdentity"]
                .as_str()
                .filter(|h| !h.is_empty())
                .map(str::to_owned),
            renew_time: spec["renewTime"].as_str().map(str::to_owned),
            resource_version: lease["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            duration_secs: spec["leaseDurationSeconds"].as_u64(),
            at: now,
        };
        // Unchanged since last time: keep the instant it was first seen in this state.
        if let Some(prev) = &self.observed
            && prev.same_record(&seen)
        {
            seen.at = prev.at;
        }
        self.observed = Some(seen.clone());
        seen
    }

    fn observation(&self, lease: &Value, held: bool) -> LeaseObservation {
        let spec = &lease["spec"];
        let holder = spec["holderIdentity"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map(|h| strip_token(h).to_owned());
        let now_ms = clock::now_ms();
        let duration_ms = i64::try_from(self.timing.duration.as_millis()).unwrap_or(i64::MAX);
        // Shown only: the holder's renewTime on its clock plus its duration.
        let expiry_ms = if held {
            Some(now_ms.saturating_add(duration_ms))
        } else if holder.is_some() {
            // The record's values are the remote writer's: saturate rather than trust them.
            let secs = spec["leaseDurationSeconds"]
                .as_i64()
                .unwrap_or(duration_ms / 1000);
            spec["renewTime"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| {
                    t.timestamp_millis()
                        .saturating_add(secs.saturating_mul(1000))
                })
        } else {
            None
        };
        let rv = lease["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        let mut block = Map::new();
        block.insert("name".into(), Value::String(self.config.lease_name.clone()));
        block.insert("namespace".into(), Value::String(self.namespace.clone()));
        block.insert("identity".into(), Value::String(self.identity.clone()));
        block.insert(
            "holder".into(),
            holder.clone().map_or(Value::Null, Value::String),
        );
        block.insert(
            "expiry".into(),
            expiry_ms
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map_or(Value::Null, |t| Value::String(t.to_rfc3339())),
        );
        // The holder rewrites renewTime at every renewal (its clock, compared only with itself).
        let renewal = holder.as_ref().and_then(|_| {
            spec["renewTime"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp_micros())
        });
        LeaseObservation {
            held_by_me: held,
            holder,
            fence: held.then(|| format!("{}@{rv}", self.token)),
            expiry_ms,
            renewal,
            block,
            valid_for: None,
        }
    }

    /// POSTs a new Lease naming this process (the GET found none).
    async fn create(&mut self) -> Result<LeaseObservation, LeaseError> {
        let now = micro_time(clock::now_ms());
        let body = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.config.lease_name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.holder,
                "leaseDurationSeconds": self.timing.duration.as_secs(),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        });
        self.may_hold = true;
        let (status, lease) = self.send(Call::Post(&body)).await?;
        match status {
            StatusCode::CREATED | StatusCode::OK => {
                self.observe(&lease, Instant::now());
                Ok(self.observation(&lease, true))
            }
            StatusCode::CONFLICT => Err(LeaseError::StandDown(format!(
                "another replica created the lease first: {}",
                lease.as_str().unwrap_or_default()
            ))),
            s => Err(self.refused(s, &lease, "creating")),
        }
    }

    /// PUTs `lease` back with this process as holder, carrying the resourceVersion it was read
    /// at: the apiserver refuses it with 409 if anyone wrote in between.
    async fn write(
        &mut self,
        mut lease: Value,
        takeover: bool,
    ) -> Result<LeaseObservation, LeaseError> {
        let now = micro_time(clock::now_ms());
        let spec = lease
            .as_object_mut()
            .map(|o| o.entry("spec").or_insert_with(|| json!({})))
            .ok_or_else(|| LeaseError::Store("the Lease is not a JSON object".into()))?;
        spec["holderIdentity"] = Value::String(self.holder.clone());
        spec["leaseDurationSeconds"] = json!(self.timing.duration.as_secs());
        spec["renewTime"] = Value::String(now.clone());
        if takeover {
            spec["acquireTime"] = Value::String(now);
            let n = spec["leaseTransitions"].as_u64().unwrap_or(0);
            spec["leaseTransitions"] = json!(n + 1);
        }
        self.may_hold = true;
        let (status, answer) = self.send(Call::Put(&lease)).await?;
        match status {
            StatusCode::OK | StatusCode::CREATED => {
                self.observe(&answer, Instant::now());
                Ok(self.observation(&answer, true))
            }
            StatusCode::CONFLICT | StatusCode::NOT_FOUND => {
                // Someone wrote (or deleted) the Lease since our GET: re-read next round.
                self.observed = None;
                Err(LeaseError::StandDown(format!(
                    "lost the write race on lease {}/{}: {}",
                    self.namespace,
                    self.config.lease_name,
                    answer.as_str().unwrap_or_default()
                )))
            }
            s => Err(self.refused(s, &answer, "updating")),
        }
    }

    fn refused(&self, status: StatusCode, answer: &Value, what: &str) -> LeaseError {
        let hint = match status {
            StatusCode::UNAUTHORIZED => " (check the service-account token or kubeconfig user)",
            StatusCode::FORBIDDEN => {
                " (RBAC: the Role needs get+update on this lease and create on leases)"
            }
            _ => "",
        };
        LeaseError::Store(format!(
            "{what} lease {}/{}: HTTP {status}: {}{hint}",
            self.namespace,
            self.config.lease_name,
            answer.as_str().unwrap_or_default()
        ))
    }

    /// ROT-03: rebuilds the client when a CA or client-certificate file changed in place, after
    /// a dry-run load (a half-written file keeps the old client and is retried next round).
    fn check_rotation(&mut self) {
        let Some(api) = &self.api else { return };
        let changed = api
            .tls_files
            .iter()
            .any(|(p, old)| std::fs::read(p).is_ok_and(|now| &now != old));
        if !changed {
            return;
        }
        let fresh = resolve(&self.config, &self.env).map_err(|e| e.to_string());
        let library = match &fresh {
            Ok(api) if self.uses_library() => {
                LibraryClient::new(api, self.request_budget()).map(Some)
            }
            Ok(_) => Ok(None),
            Err(e) => Err(e.clone()),
        };
        match fresh.and_then(|api| library.map(|lib| (api, lib))) {
            Ok((fresh, library)) => {
                tracing::info!(
                    "cluster: kubernetes credential files changed on disk; the apiserver client was \
                     rebuilt ({})",
                    fresh.source
                );
                self.api = Some(fresh);
                self.library = library;
                self.rotation_warned = false;
            }
            Err(e) if !self.rotation_warned => {
                tracing::warn!(
                    "cluster: kubernetes credential files changed but do not load yet ({e}); keeping \
                     the previous client and retrying"
                );
                self.rotation_warned = true;
            }
            Err(_) => {}
        }
    }

    async fn round(&mut self) -> Result<LeaseObservation, LeaseError> {
        self.check_rotation();
        let (status, lease) = self.send(Call::Get).await?;
        match status {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => return self.create().await,
            s => return Err(self.refused(s, &lease, "reading")),
        }
        let now = Instant::now();
        let seen = self.observe(&lease, now);
        match decide(&seen, &self.holder, now, self.timing.duration) {
            Action::Follow => Ok(self.observation(&lease, false)),
            Action::Renew => self.write(lease, false).await,
            Action::TakeOver => {
                if let Some(h) = &seen.holder {
                    tracing::info!(
                        "cluster: kubernetes lease {}/{} unchanged for {:?} by this node's \
                         clock; taking it over from {}",
                        self.namespace,
                        self.config.lease_name,
                        now.saturating_duration_since(seen.at),
                        strip_token(h)
                    );
                }
                self.write(lease, true).await
            }
        }
    }

    /// Resolves the credentials and builds the client; returns which client is in use.
    pub(crate) async fn connect(&mut self) -> Result<&'static str, String> {
        let (config, env) = (self.config.clone(), self.env.clone());
        let api = tokio::task::spawn_blocking(move || resolve(&config, &env))
            .await
            .map_err(|e| format!("cluster.backend kubernetes: cannot start: {e}"))?
            .map_err(|e| format!("cluster.backend kubernetes: cannot start: {e}"))?;
        if self.namespace.is_empty() {
            self.namespace = api.default_namespace.clone();
        }
        let client = if self.uses_library() {
            self.library = Some(
                LibraryClient::new(&api, self.request_budget())
                    .map_err(|e| format!("cluster.backend kubernetes: cannot start: {e}"))?,
            );
            "the kube client library"
        } else {
            "the built-in REST client"
        };
        self.api = Some(api);
        Ok(client)
    }
}

impl LeaseStore for KubernetesStore {
    fn backend_name(&self) -> &'static str {
        "kubernetes"
    }

    fn timing(&self) -> LeaseTiming {
        self.timing
    }

    async fn prepare(&mut self) -> Result<(), String> {
        let client = self.connect().await?;
        let api = self.api.as_ref().map(|a| (a.url.clone(), a.source.clone()));
        let (url, source) = api.unwrap_or_default();
        tracing::info!(
            "cluster: kubernetes election on lease {}/{} at {url} via {source} with {client} \
             (identity={}, leaseDuration={}s, renewDeadline={}s, retryPeriod={}s)",
            self.namespace,
            self.config.lease_name,
            self.holder,
            self.timing.duration.as_secs(),
            self.timing.round_timeout.as_secs(),
            self.timing.round_every.as_secs()
        );
        Ok(())
    }

    async fn campaign(&mut self) -> Result<LeaseObservation, LeaseError> {
        self.round().await
    }

    async fn follow(&mut self) -> Result<LeaseObservation, LeaseError> {
        self.check_rotation();
        let (status, lease) = self.send(Call::Get).await?;
        match status {
            StatusCode::OK => {
                // Kept current, so a takeover after this node may hold again counts the
                // record's age from when it last changed, not from now.
                self.observe(&lease, Instant::now());
                Ok(self.observation(&lease, false))
            }
            StatusCode::NOT_FOUND => Ok(self.observation(&Value::Null, false)),
            s => Err(self.refused(s, &lease, "reading")),
        }
    }

    async fn release(&mut self) -> Result<(), LeaseError> {
        if !self.may_hold || self.api.is_none() {
            return Ok(());
        }
        // Re-read rather than trust the cached resourceVersion: a renew whose answer was lost
        // may have moved it.
        let (status, mut lease) = self.send(Call::Get).await?;
        if status != StatusCode::OK {
            return Ok(());
        }
        if lease["spec"]["holderIdentity"].as_str() != Some(self.holder.as_str()) {
            return Ok(());
        }
        // client-go's release: holder cleared, a 1 s duration, renewTime now.
        let now = micro_time(clock::now_ms());
        let spec = &mut lease["spec"];
        spec["holderIdentity"] = Value::String(String::new());
        spec["leaseDurationSeconds"] = json!(1);
        spec["renewTime"] = Value::String(now.clone());
        spec["acquireTime"] = Value::String(now);
        let (status, answer) = self.send(Call::Put(&lease)).await?;
        if status.is_success() {
            self.may_hold = false;
            Ok(())
        } else {
            Err(LeaseError::Store(format!(
                "releasing lease {}/{}: HTTP {status}: {}; the lease expires by itself",
                self.namespace,
                self.config.lease_name,
                answer.as_str().unwrap_or_default()
            )))
        }
    }
}

pub mod rules;

pub mod reboot;

pub mod handoff;

#[cfg(test)]
mod tests;

// The Kubernetes API client: in-cluster or kubeconfig credentials, the Lease calls.
pub mod api;
// An in-process API server for tests.
#[cfg(any(test, feature = "testkit"))]
pub mod fake;
