//! The config file as written: serde structs that mirror the YAML keys one to one.
//!
//! Only the shape is checked here (unknown keys, value types, enum spellings): that is serde's
//! part, and its first error stops the load, reported with path and line by
//! [`cronstable_core::yaml`]. Everything that is a *rule* (address formats, blank paths, timing
//! orders, size) is checked afterwards by [`super::validate`], which collects every violation.
//! So addresses and paths are plain strings here, and every key is optional: whether a key is
//! required, and what its default is, is decided there.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor, value::MapAccessDeserializer};

use super::cluster::{Backend, ClientLibrary, Distribution, Topology};
pub(crate) use super::secret::RawSecret;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawConfig {
    pub(crate) api: Option<RawApi>,
    pub(crate) web: Option<RawWeb>,
    pub(crate) cluster: Option<RawCluster>,
    pub(crate) notify: Option<super::notify::RawNotify>,
    pub(crate) statsd: Option<super::statsd::RawStatsd>,
    pub(crate) state: Option<RawState>,
    pub(crate) jobs: Option<RawJobs>,
}

/// `state:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawState {
    pub(crate) path: Option<String>,
    pub(crate) store: Option<String>,
}

/// `jobs:`: exactly one of the three file keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawJobs {
    pub(crate) crontab: Option<String>,
    pub(crate) system_crontab: Option<String>,
    pub(crate) job_file: Option<String>,
}

/// `api:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawApi {
    pub(crate) listen: Option<String>,
    pub(crate) auth_token: Option<RawSecret>,
}

/// `web:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawWeb {
    pub(crate) listen: Option<String>,
    pub(crate) auth_token: Option<RawSecret>,
}

/// `tls:` (gossip, observability mesh, etcd).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawTls {
    pub(crate) ca: Option<String>,
    pub(crate) cert: Option<String>,
    pub(crate) key: Option<String>,
}

/// One `peers:` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawPeer {
    pub(crate) host: String,
}

/// `cluster:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawCluster {
    pub(crate) backend: Option<Backend>,
    pub(crate) node_name: Option<String>,
    pub(crate) elect_leader: Option<bool>,
    pub(crate) leader_eligible: Option<bool>,
    pub(crate) distribution: Option<Distribution>,
    pub(crate) listen: Option<String>,
    pub(crate) tls: Option<RawTls>,
    pub(crate) peers: Option<Vec<RawPeer>>,
    #[serde(deserialize_with = "cronstable_core::duration::deserialize_option")]
    pub(crate) interval: Option<Duration>,
    pub(crate) drift_after: Option<u32>,
    #[serde(deserialize_with = "cronstable_core::duration::deserialize_option")]
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) observability: Option<RawObservability>,
    pub(crate) kubernetes: Option<RawKubernetes>,
    pub(crate) etcd: Option<RawEtcd>,
    pub(crate) filesystem: Option<RawFilesystem>,
}

/// `cluster.observability:` is either a bool (the gossip opt-in marker) or a mapping (the
/// dedicated mesh of a lease backend, or `{enabled: ...}`).
#[derive(Debug, Default)]
pub(crate) struct RawObservability {
    pub(crate) enabled: Option<bool>,
    pub(crate) listen: Option<String>,
    pub(crate) tls: Option<RawTls>,
    pub(crate) peers: Option<Vec<RawPeer>>,
    pub(crate) interval: Option<Duration>,
}

/// The mapping form of [`RawObservability`].
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
struct RawObservabilityMap {
    enabled: Option<bool>,
    listen: Option<String>,
    tls: Option<RawTls>,
    peers: Option<Vec<RawPeer>>,
    #[serde(deserialize_with = "cronstable_core::duration::deserialize_option")]
    interval: Option<Duration>,
}

impl<'de> Deserialize<'de> for RawObservability {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawObservability;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false, or a mapping with listen, tls, peers and interval")
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(RawObservability {
                    enabled: Some(v),
                    ..RawObservability::default()
                })
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                // Deserializing through the same MapAccess keeps serde-saphyr's locations and
                // the key path for errors inside the mapping.
                let m = RawObservabilityMap::deserialize(MapAccessDeserializer::new(map))?;
                Ok(RawObservability {
                    enabled: m.enabled,
                    listen: m.listen,
                    tls: m.tls,
                    peers: m.peers,
                    interval: m.interval,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// `cluster.kubernetes:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawKubernetes {
    pub(crate) lease_name: Option<String>,
    pub(crate) lease_namespace: Option<String>,
    pub(crate) lease_duration_seconds: Option<u64>,
    pub(crate) renew_deadline_seconds: Option<u64>,
    pub(crate) retry_period_seconds: Option<u64>,
    pub(crate) client_library: Option<ClientLibrary>,
    pub(crate) identity: Option<String>,
    pub(crate) kubeconfig: Option<String>,
    pub(crate) api_server: Option<String>,
}

/// `cluster.etcd:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawEtcd {
    pub(crate) endpoints: Option<Vec<String>>,
    pub(crate) election_name: Option<String>,
    pub(crate) ttl: Option<u64>,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<RawSecret>,
    pub(crate) tls: Option<RawTls>,
}

/// `cluster.filesystem:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawFilesystem {
    pub(crate) path: Option<String>,
    pub(crate) election_name: Option<String>,
    pub(crate) ttl: Option<u64>,
    pub(crate) deployment_id: Option<String>,
    pub(crate) topology: Option<Topology>,
}
