//! Credentials: kubeconfig files, in-cluster HTTPS with the service-account CA, and the
//! in-place rotation check (ROT-03), against the fake over real TLS.

use base64::Engine;

use super::*;
use crate::gossip::certgen::TestCa;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn write_kubeconfig(dir: &Path, server: &str, cluster_extra: &str, user: &str) -> PathBuf {
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: dev\nclusters:\n- name: c\n  cluster:\n    \
         server: {server}\n{cluster_extra}contexts:\n- name: dev\n  context:\n    cluster: c\n    \
         user: u\n    namespace: {NS}\nusers:\n- name: u\n  user:\n{user}"
    );
    let path = dir.join("config");
    std::fs::write(&path, text).unwrap();
    path
}

use std::path::PathBuf;

fn kube(path: PathBuf) -> KubernetesConfig {
    KubernetesConfig {
        kubeconfig: Some(path),
        ..KubernetesConfig::default()
    }
}

fn kube_with(path: PathBuf, lib: ClientLibrary) -> KubernetesConfig {
    KubernetesConfig {
        client_library: lib,
        ..kube(path)
    }
}

both_clients!(
    a_kubeconfig_gives_server_token_and_namespace,
    https_with_the_kubeconfig_ca_and_a_client_certificate,
    in_cluster_https_uses_the_service_variables_and_ca,
    a_rotated_ca_file_rebuilds_the_client_after_it_loads,
    a_rewritten_kubeconfig_is_picked_up,
);

async fn a_rewritten_kubeconfig_is_picked_up(lib: ClientLibrary) {
    let fake = FakeApiServer::start().await;
    fake.require_token("one");
    let dir = tempfile::tempdir().unwrap();
    let path = write_kubeconfig(dir.path(), &fake.url(), "", "    token: one\n");
    let mut s = KubernetesStore::new(&kube_with(path, lib), "a", K8sEnv::default()).with_timing(T);
    s.prepare().await.unwrap();
    assert!(s.campaign().await.unwrap().held_by_me);
    fake.require_token("two");
    assert!(s.campaign().await.is_err(), "the old token is refused");
    write_kubeconfig(dir.path(), &fake.url(), "", "    token: two\n");
    assert!(
        s.campaign().await.unwrap().held_by_me,
        "the new token is used"
    );
}

async fn a_kubeconfig_gives_server_token_and_namespace(lib: ClientLibrary) {
    let fake = FakeApiServer::start().await;
    fake.require_token("kc-token");
    let dir = tempfile::tempdir().unwrap();
    let path = write_kubeconfig(dir.path(), &fake.url(), "", "    token: kc-token\n");
    let mut s = KubernetesStore::new(&kube_with(path, lib), "a", K8sEnv::default()).with_timing(T);
    s.prepare().await.unwrap();
    assert!(s.campaign().await.unwrap().held_by_me);
    assert!(
        fake.lease(NS, NAME).is_some(),
        "the context's namespace is used"
    );
}

#[tokio::test]
async fn unsupported_kubeconfig_users_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let exec = "    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1\n";
    let path = write_kubeconfig(dir.path(), "https://127.0.0.1:6443", "", exec);
    let e = resolve(&kube(path), &K8sEnv::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("cluster.kubernetes.kubeconfig: "), "{e}");
    assert!(e.contains("exec plugin"), "{e}");
    let insecure = "    insecure-skip-tls-verify: true\n";
    let path = write_kubeconfig(
        dir.path(),
        "https://127.0.0.1:6443",
        insecure,
        "    token: x\n",
    );
    let e = resolve(&kube(path), &K8sEnv::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("insecure-skip-tls-verify"), "{e}");
    let path = write_kubeconfig(dir.path(), "https://127.0.0.1:6443", "", "    token: x\n");
    let e = resolve(&kube(path), &K8sEnv::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs a CA"), "{e}");
    let e = resolve(&kube(dir.path().join("nope")), &K8sEnv::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cluster.kubernetes.kubeconfig: cannot read "),
        "{e}"
    );
}

async fn https_with_the_kubeconfig_ca_and_a_client_certificate(lib: ClientLibrary) {
    let ca = TestCa::new("test-apiserver-ca");
    let (cert, key) = ca.issue("apiserver", &["127.0.0.1"]).unwrap();
    let fake = FakeApiServer::start_tls(&cert, &key).await;
    let dir = tempfile::tempdir().unwrap();
    let (ccert, ckey) = ca.issue("cronstable", &["cronstable"]).unwrap();
    let cluster = format!("    certificate-authority-data: {}\n", b64(ca.cert_pem()));
    let user = format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(&ccert),
        b64(&ckey)
    );
    let path = write_kubeconfig(dir.path(), &fake.url(), &cluster, &user);
    let mut s = KubernetesStore::new(&kube_with(path, lib), "a", K8sEnv::default()).with_timing(T);
    s.prepare().await.unwrap();
    assert!(s.campaign().await.unwrap().held_by_me);
    // Another CA does not verify this server.
    let other = TestCa::new("someone-else");
    let cluster = format!(
        "    certificate-authority-data: {}\n",
        b64(other.cert_pem())
    );
    let path = write_kubeconfig(dir.path(), &fake.url(), &cluster, "    token: x\n");
    let mut s = KubernetesStore::new(&kube_with(path, lib), "b", K8sEnv::default()).with_timing(T);
    s.prepare().await.unwrap();
    let e = s.campaign().await.unwrap_err();
    // (The REST client says "TLS handshake failed"; kube says "client error (Connect)".)
    assert!(matches!(&e, LeaseError::Store(_)), "{e:?}");
}

async fn in_cluster_https_uses_the_service_variables_and_ca(lib: ClientLibrary) {
    let ca = TestCa::new("cluster-ca");
    let (cert, key) = ca.issue("kubernetes", &["127.0.0.1"]).unwrap();
    let fake = FakeApiServer::start_tls(&cert, &key).await;
    fake.require_token("pod-token");
    let dir = sa_dir("pod-token");
    std::fs::write(dir.path().join("ca.crt"), ca.cert_pem()).unwrap();
    let pod = K8sEnv {
        service_host: Some("127.0.0.1".into()),
        service_port: Some(fake.port().to_string()),
        service_account_dir: dir.path().to_owned(),
    };
    let cfg = KubernetesConfig {
        client_library: lib,
        ..KubernetesConfig::default()
    };
    let mut s = KubernetesStore::new(&cfg, "a", pod).with_timing(T);
    s.prepare().await.unwrap();
    assert!(s.campaign().await.unwrap().held_by_me);
    if lib != ClientLibrary::Http {
        // The kube client re-reads a token file about once a minute, as client-go does.
        return;
    }
    // The kubelet rotates the token in place: the REST client's next request reads it.
    fake.require_token("rotated");
    std::fs::write(dir.path().join("token"), "rotated").unwrap();
    assert!(s.campaign().await.unwrap().held_by_me);
}

async fn a_rotated_ca_file_rebuilds_the_client_after_it_loads(lib: ClientLibrary) {
    let (old, new) = (TestCa::new("old"), TestCa::new("new"));
    let (cert, key) = new.issue("apiserver", &["127.0.0.1"]).unwrap();
    let fake = FakeApiServer::start_tls(&cert, &key).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, old.cert_pem()).unwrap();
    let cluster = "    certificate-authority: ca.pem\n";
    let path = write_kubeconfig(dir.path(), &fake.url(), cluster, "    token: x\n");
    let mut s = KubernetesStore::new(&kube_with(path, lib), "a", K8sEnv::default()).with_timing(T);
    s.prepare().await.unwrap();
    assert!(
        s.campaign().await.is_err(),
        "the old CA does not verify the server"
    );
    // Half-written: the dry run fails, the old client stays, and the next round retries.
    std::fs::write(&ca_file, "-----BEGIN CERTIFICATE-----\ntrunc").unwrap();
    assert!(s.campaign().await.is_err());
    assert!(s.rotation_warned);
    std::fs::write(&ca_file, new.cert_pem()).unwrap();
    assert!(
        s.campaign().await.unwrap().held_by_me,
        "ROT-03: rebuilt in place"
    );
    assert!(!s.rotation_warned);
}

#[tokio::test]
async fn backend_for_elects_through_the_lease_and_releases_on_shutdown() {
    use crate::cluster::{BackendContext, ClusterView};
    use crate::config::cluster::{Backend, ClusterConfig};
    let fake = FakeApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = write_kubeconfig(dir.path(), &fake.url(), "", "    token: t\n");
    let cluster = ClusterConfig {
        backend: Backend::Kubernetes,
        kubernetes: Some(kube(path)),
        ..ClusterConfig::default()
    };
    let backend = crate::store::for_cluster(&cluster, "a", &crate::Environment::default())
        .map(|s| s.backend)
        .expect("kubernetes is built in");
    assert_eq!(backend.name(), "kubernetes");
    let (tx, mut rx) = tokio::sync::watch::channel(ClusterView::election_off("a"));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (_job_tx, job_rx) = tokio::sync::watch::channel(std::sync::Arc::default());
    let ctx = BackendContext {
        reboot_ran: crate::reboot::ran::RebootRan::new(),
        view: tx,
        job_set: job_rx,
        ledger: crate::ledger::Ledger::new(),
        overdue: tokio::sync::watch::channel(None).1,
        shutdown: Box::pin(async move {
            let _ = stop_rx.await;
        }),
    };
    let task = tokio::spawn(backend.run(ctx));
    let view = rx
        .wait_for(|v| v.status.to_json("a")["is_leader"] == true)
        .await
        .unwrap()
        .clone();
    let status = view.status.to_json("a");
    assert_eq!(status["backend"], "kubernetes");
    assert_eq!(status["lease"]["holder"], "a");
    assert_eq!(status["lease"]["namespace"], NS);
    assert!(view.fence().is_some_and(|f| f.contains('@')));
    stop_tx.send(()).unwrap();
    task.await.unwrap();
    assert_eq!(
        fake.lease(NS, NAME).unwrap()["spec"]["holderIdentity"],
        "",
        "a graceful shutdown releases the lease (LSE-08)"
    );
}
