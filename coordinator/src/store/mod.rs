//! The shared stores, one folder each. A store folder implements every aspect the coordinator
//! keeps in that store (the election's lease, the `@reboot` "already ran" records, retry
//! handoffs and, on etcd, the run ledger) and owns its connection, credentials, fake and tests.
//! The aspects' traits and store-independent logic live with the aspect ([`crate::lease`] for
//! the election, its `@reboot` records and handoffs; [`crate::ledger`] for the run ledger).

pub mod etcd;
pub mod filesystem;
pub mod kubernetes;

use std::sync::Arc;

use crate::cluster::ClusterBackend;
use crate::config::cluster::{Backend, ClusterConfig};
use crate::config::{Config, StateStore};
use crate::handoff::Handoffs;
use crate::lease::driver::LeaseBackend;
use crate::lease::records_store::RecordsStore;
use crate::ledger::LedgerStore;

/// Everything the coordinator keeps in the shared store one cluster section names, built (not
/// started) from one reading of its settings and credentials.
pub struct Stores {
    /// The lease election, as a cluster backend.
    pub backend: Box<dyn ClusterBackend>,
    /// The `@reboot` records' own client (etcd and filesystem; Kubernetes keeps them on the
    /// Lease the election reads, so its driver rounds handle them).
    pub records_store: Option<Arc<RecordsStore>>,
    /// The retry-handoff records (RTY-04).
    pub handoffs: Handoffs,
}

/// The stores for `cluster` on `node_name`: the one place that matches on the store kind.
/// `None` for a backend without a shared store (gossip), or a section whose store block is
/// missing (validation refuses that). Credentials are read through one source per store: the
/// etcd password's `fromEnvVar` and the Kubernetes in-cluster variables come from `env`, the
/// environment the binary passed in, and every client of the store shares that source.
pub fn for_cluster(
    cluster: &ClusterConfig,
    node_name: &str,
    env: &crate::Environment,
) -> Option<Stores> {
    match cluster.backend {
        Backend::Filesystem => {
            let fs = cluster.filesystem.as_ref()?;
            let records_store = RecordsStore::with_runs(
                filesystem::FilesystemStore::new(fs, node_name),
                filesystem::FilesystemStore::new(fs, node_name),
            );
            Some(Stores {
                backend: Box::new(
                    LeaseBackend::new(filesystem::FilesystemStore::new(fs, node_name), node_name)
                        .with_records_store(Some(records_store.clone()))
                        .with_leader_eligible(cluster.leader_eligible),
                ),
                records_store: Some(records_store),
                handoffs: filesystem::handoff::FilesystemHandoffs::handoffs(fs),
            })
        }
        Backend::Etcd => {
            let config = cluster.etcd.as_ref()?;
            let credentials = etcd::EtcdCredentials::from_env(config, env);
            let client =
                || etcd::EtcdStore::with_credentials(config, node_name, credentials.clone());
            let records_store = RecordsStore::with_runs(client(), client());
            Some(Stores {
                backend: Box::new(
                    LeaseBackend::new(client(), node_name)
                        .with_records_store(Some(records_store.clone()))
                        .with_leader_eligible(cluster.leader_eligible),
                ),
                records_store: Some(records_store),
                handoffs: etcd::handoff::EtcdHandoffs::handoffs(config, credentials.clone()),
            })
        }
        Backend::Kubernetes => {
            let config = cluster.kubernetes.as_ref()?;
            let api_env = kubernetes::api::K8sEnv {
                service_host: env.get("KUBERNETES_SERVICE_HOST"),
                service_port: env.get("KUBERNETES_SERVICE_PORT"),
                ..kubernetes::api::K8sEnv::default()
            };
            Some(Stores {
                backend: Box::new(
                    LeaseBackend::new(
                        kubernetes::KubernetesStore::new(config, node_name, api_env.clone()),
                        node_name,
                    )
                    .with_leader_eligible(cluster.leader_eligible),
                ),
                records_store: None,
                handoffs: kubernetes::handoff::KubernetesHandoffs::handoffs(
                    config, node_name, api_env,
                ),
            })
        }
        Backend::Gossip => None,
    }
}

/// Where the run ledger outlives the process, as `state` says: the `state.path` files, the
/// cluster's etcd (`state.store: etcd`, through the same credential source as every other
/// etcd client), or nowhere (`None`: history is kept in memory only). The one place that
/// matches on `state.store`.
pub fn ledger_for(config: &Config, env: &crate::Environment) -> Option<Box<dyn LedgerStore>> {
    match config.state.store {
        StateStore::File => {
            config.state.path.as_deref().map(|dir| {
                Box::new(crate::ledger::file::FileLedger::new(dir)) as Box<dyn LedgerStore>
            })
        }
        StateStore::Etcd => {
            let etcd = config.cluster.as_ref()?.etcd.as_ref()?;
            Some(Box::new(etcd::ledger::EtcdLedger::new(
                etcd::EtcdCredentials::from_env(etcd, env),
            )))
        }
    }
}
