//! Handoff records on the Kubernetes backend (RTY-04, RTY-07): the retry sequences an old owner
//! handed to whichever node holds the election Lease.
//!
//! They live in an annotation, `cronstable.io/handoff-records`, on a second Lease object named
//! `<leaseName>-handoff` in the election's namespace, as one JSON object mapping
//! `<job>@<scheduledAtMs>` to the record. A separate object, not the election Lease itself,
//! because every handoff write bumps the object's resourceVersion: on the election Lease that
//! would make the holder's next renewal meet a 409 and lose its round. The object is created on
//! the first write (its `spec` stays empty: nobody holds it).
//!
//! Every change is a read-modify-write guarded by the resourceVersion the read returned; a 409
//! (someone else wrote in between) reads again and reapplies, so concurrent writers never undo
//! each other. A claim, removal or release acts only when the entry still is exactly the version
//! the caller saw (the record's content stands in for etcd's mod revision: every write of a
//! firing carries a new `createdAtMs`, every claim a new token). An entry that does not decode is
//! skipped with a WARNING and kept as it is; an annotation that is not a JSON object is treated
//! as no records. Annotations share a 256 KiB budget per object, so a write that would pass
//! [`MAX_BYTES`] is refused (the shim then abandons that retry with the reason).

use http::StatusCode;
use serde_json::{Map, Value, json};

use super::{Call, KubernetesStore};
use crate::config::cluster::KubernetesConfig;
use crate::handoff::{
    HandoffError, HandoffRecord, HandoffStore, Handoffs, Pending, serialised_handoff_store,
};
use crate::store::kubernetes::api::K8sEnv;

/// The annotation holding the records.
pub const ANNOTATION: &str = "cronstable.io/handoff-records";
/// Appended to `leaseName` for the records' object.
pub const OBJECT_SUFFIX: &str = "-handoff";
/// The largest annotation this store writes (the apiserver allows 256 KiB for all of them).
pub const MAX_BYTES: usize = 200 * 1024;
/// Read-modify-write attempts per change before giving up.
const ATTEMPTS: usize = 4;

/// The handoff records of one election, through their own apiserver client.
pub struct KubernetesHandoffs {
    store: KubernetesStore,
    connected: bool,
}

fn store_error(e: impl std::fmt::Display) -> HandoffError {
    HandoffError::Store(e.to_string())
}

/// The entry name of a firing's record.
fn entry_name(job: &str, scheduled_at_ms: i64) -> String {
    format!("{job}@{scheduled_at_ms}")
}

/// The entries of the records annotation on `object` (none when absent or not an object).
fn entries(object: Option<&Value>) -> Map<String, Value> {
    let Some(text) = object.and_then(|o| o["metadata"]["annotations"][ANNOTATION].as_str()) else {
        return Map::new();
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => m,
        _ => {
            tracing::warn!("ignoring the annotation {ANNOTATION}: it is not a JSON object");
            Map::new()
        }
    }
}

/// The record an entry holds, if it decodes.
fn decode(name: &str, value: &Value) -> Option<HandoffRecord> {
    match serde_json::from_value::<HandoffRecord>(value.clone()) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(entry = name, "ignoring an unreadable handoff record: {e}");
            None
        }
    }
}

fn encode(record: &HandoffRecord) -> Result<Value, HandoffError> {
    serde_json::to_value(record).map_err(|e| store_error(format!("cannot encode a record: {e}")))
}

/// Whether the entry `name` holds exactly `record`.
fn holds(map: &Map<String, Value>, name: &str, record: &HandoffRecord) -> bool {
    map.get(name)
        .and_then(|v| serde_json::from_value::<HandoffRecord>(v.clone()).ok())
        .is_some_and(|r| &r == record)
}

impl KubernetesHandoffs {
    /// The records for the election `config` describes, as `node_name`, reaching the apiserver
    /// as `env` says. Nothing is contacted before the first call.
    pub(crate) fn new(config: &KubernetesConfig, node_name: &str, env: K8sEnv) -> Self {
        let mut object = config.clone();
        object.lease_name = format!("{}{OBJECT_SUFFIX}", config.lease_name);
        Self {
            store: KubernetesStore::new(&object, node_name, env),
            connected: false,
        }
    }

    async fn ready(&mut self) -> Result<&mut KubernetesStore, HandoffError> {
        if !self.connected {
            self.store.connect().await.map_err(store_error)?;
            self.connected = true;
        }
        Ok(&mut self.store)
    }

    fn object(&self) -> String {
        format!("{}/{}", self.store.namespace, self.store.config.lease_name)
    }

    /// The records object, `None` when it does not exist yet.
    async fn read(&mut self) -> Result<Option<Value>, HandoffError> {
        let store = self.ready().await?;
        let (status, object) = store.send(Call::Get).await.map_err(store_error)?;
        match status {
            StatusCode::OK => Ok(Some(object)),
            StatusCode::NOT_FOUND => Ok(None),
            s => Err(store_error(store.refused(s, &object, "reading"))),
        }
    }

    /// Applies `change` to the entries and, when it says so, writes them back under the read's
    /// resourceVersion, reading again after a conflict.
    async fn update<T>(
        &mut self,
        what: &str,
        mut change: impl FnMut(&mut Map<String, Value>) -> Result<(bool, T), HandoffError>,
    ) -> Result<T, HandoffError> {
        for _ in 0..ATTEMPTS {
            let object = self.read().await?;
            let mut map = entries(object.as_ref());
            let (write, out) = change(&mut map)?;
            if !write {
                return Ok(out);
            }
            let text = Value::Object(map).to_string();
            if text.len() > MAX_BYTES {
                return Err(store_error(format!(
                    "{what}: the annotation {ANNOTATION} on lease {} would grow past {MAX_BYTES} \
                     bytes (too many pending handoff records)",
                    self.object()
                )));
            }
            let store = self.ready().await?;
            let (status, answer) = match object {
                Some(mut o) => {
                    let meta = &mut o["metadata"];
                    if !meta["annotations"].is_object() {
                        meta["annotations"] = json!({});
                    }
                    meta["annotations"][ANNOTATION] = Value::String(text);
                    store.send(Call::Put(&o)).await
                }
                None => {
                    let o = json!({
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {
                            "name": store.config.lease_name,
                            "namespace": store.namespace,
                            "annotations": { ANNOTATION: text },
                        },
                        "spec": {},
                    });
                    store.send(Call::Post(&o)).await
                }
            }
            .map_err(store_error)?;
            match status {
                StatusCode::OK | StatusCode::CREATED => return Ok(out),
                // Written (or created, or deleted) by someone else since the read: again.
                StatusCode::CONFLICT | StatusCode::NOT_FOUND => {}
                s => return Err(store_error(store.refused(s, &answer, "updating"))),
            }
        }
        Err(store_error(format!(
            "{what} on lease {}: lost the write race {ATTEMPTS} times",
            self.object()
        )))
    }

    pub(crate) async fn write(&mut self, record: &HandoffRecord) -> Result<(), HandoffError> {
        let name = entry_name(&record.job, record.scheduled_at_ms);
        let value = encode(record)?;
        self.update("writing a handoff record", |map| {
            map.insert(name.clone(), value.clone());
            Ok((true, ()))
        })
        .await
    }

    pub(crate) async fn pending(&mut self) -> Result<Vec<Pending>, HandoffError> {
        let map = entries(self.read().await?.as_ref());
        Ok(map
            .iter()
            .filter_map(|(name, v)| {
                decode(name, v).map(|record| Pending {
                    record,
                    name: name.clone(),
                    revision: 0,
                })
            })
            .collect())
    }

    pub(crate) async fn claim(
        &mut self,
        p: &Pending,
        token: &str,
        now_ms: i64,
    ) -> Result<Option<Pending>, HandoffError> {
        let claimed = p.record.claimed(token, now_ms);
        let value = encode(&claimed)?;
        let won = self
            .update("claiming a handoff record", |map| {
                if p.record.claimed_by.is_some() || !holds(map, &p.name, &p.record) {
                    return Ok((false, false));
                }
                map.insert(p.name.clone(), value.clone());
                Ok((true, true))
            })
            .await?;
        Ok(won.then(|| Pending {
            record: claimed,
            name: p.name.clone(),
            revision: 0,
        }))
    }

    pub(crate) async fn find_claim(
        &mut self,
        p: &Pending,
        token: &str,
    ) -> Result<Option<Pending>, HandoffError> {
        let map = entries(self.read().await?.as_ref());
        Ok(map
            .get(&p.name)
            .and_then(|v| decode(&p.name, v))
            .filter(|r| r.claimed_by.as_deref() == Some(token))
            .map(|record| Pending {
                record,
                name: p.name.clone(),
                revision: 0,
            }))
    }

    pub(crate) async fn remove(&mut self, p: &Pending) -> Result<bool, HandoffError> {
        self.update("removing a handoff record", |map| {
            if !holds(map, &p.name, &p.record) {
                return Ok((false, false));
            }
            map.remove(&p.name);
            Ok((true, true))
        })
        .await
    }

    pub(crate) async fn release(&mut self, claimed: &Pending) -> Result<(), HandoffError> {
        let value = encode(&claimed.record.unclaimed())?;
        self.update("releasing a handoff claim", |map| {
            if !holds(map, &claimed.name, &claimed.record) {
                return Ok((false, ()));
            }
            map.insert(claimed.name.clone(), value.clone());
            Ok((true, ()))
        })
        .await
    }
}

// Calls on one client are serialised: it holds per-call state.
serialised_handoff_store!(KubernetesHandoffs, "kubernetes");

impl KubernetesHandoffs {
    /// The bounded handoffs on the Lease `config` names, for `node_name`.
    pub fn handoffs(config: &KubernetesConfig, node_name: &str, env: K8sEnv) -> Handoffs {
        Handoffs::new(tokio::sync::Mutex::new(Self::new(config, node_name, env)))
    }
}
