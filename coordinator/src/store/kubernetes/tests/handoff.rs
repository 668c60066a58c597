//! The handoff records on the `<leaseName>-handoff` Lease against the fake apiserver: a claim
//! that succeeds exactly once through either client library, a lost claim answer, write races
//! and an apiserver that is down (RTY-04, RTY-05).

use std::time::Duration;

use crate::handoff::conformance::{
    a_claim_whose_answer_was_lost_is_resumed, claims_exactly_once, record,
};
use crate::store::kubernetes::handoff::KubernetesHandoffs;

/// A service-account directory and a Kubernetes config for the fake apiserver at `url`.
fn k8s_setup(
    url: &str,
    lib: crate::config::cluster::ClientLibrary,
) -> (
    tempfile::TempDir,
    crate::config::cluster::KubernetesConfig,
    crate::store::kubernetes::api::K8sEnv,
) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "t").unwrap();
    std::fs::write(dir.path().join("namespace"), "jobs\n").unwrap();
    let config = crate::config::cluster::KubernetesConfig {
        api_server: Some(url.to_owned()),
        client_library: lib,
        ..Default::default()
    };
    let env = crate::store::kubernetes::api::K8sEnv {
        service_host: None,
        service_port: None,
        service_account_dir: dir.path().to_owned(),
    };
    (dir, config, env)
}

async fn kubernetes_records_are_claimed_once(lib: crate::config::cluster::ClientLibrary) {
    let fake = crate::store::kubernetes::fake::FakeApiServer::start().await;
    let (_dir, config, env) = k8s_setup(&fake.url(), lib);
    let a = KubernetesHandoffs::handoffs(&config, "n1", env.clone());
    let b = KubernetesHandoffs::handoffs(&config, "n2", env);
    claims_exactly_once(a.clone(), b).await;
    // The documented object and annotation, beside (not on) the election Lease.
    let object = fake.lease("jobs", "cronstable-leader-handoff").unwrap();
    let text = object["metadata"]["annotations"]["cronstable.io/handoff-records"]
        .as_str()
        .unwrap();
    let map: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(map["report@2000"]["job"], "report");
    assert_eq!(map["report@2000"]["nextAttempt"], 2);
    assert!(fake.lease("jobs", "cronstable-leader").is_none());
    // An entry that does not decode is skipped and kept; the others still work.
    fake.edit("jobs", "cronstable-leader-handoff", |o| {
        let mut m: serde_json::Value = serde_json::from_str(
            o["metadata"]["annotations"]["cronstable.io/handoff-records"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        m["junk@1"] = serde_json::json!({"job": 7});
        o["metadata"]["annotations"]["cronstable.io/handoff-records"] =
            serde_json::Value::String(m.to_string());
    });
    let seen = a.pending().await.unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(a.remove(&seen[0]).await.unwrap());
    let object = fake.lease("jobs", "cronstable-leader-handoff").unwrap();
    assert!(
        object["metadata"]["annotations"]["cronstable.io/handoff-records"]
            .as_str()
            .unwrap()
            .contains("junk@1")
    );
}

#[tokio::test]
async fn rty_04_kubernetes_records_are_claimed_once_through_the_rest_client() {
    kubernetes_records_are_claimed_once(crate::config::cluster::ClientLibrary::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rty_04_kubernetes_records_are_claimed_once_through_the_kube_library() {
    kubernetes_records_are_claimed_once(crate::config::cluster::ClientLibrary::Library).await;
}

#[tokio::test]
async fn rty_04_a_kubernetes_claim_whose_answer_was_lost_is_resumed() {
    let fake = crate::store::kubernetes::fake::FakeApiServer::start().await;
    let (_dir, config, env) = k8s_setup(&fake.url(), crate::config::cluster::ClientLibrary::Http);
    a_claim_whose_answer_was_lost_is_resumed(KubernetesHandoffs::handoffs(&config, "n2", env))
        .await;
}

/// A write that races another writer (a 409 between the read and the write) reads again and
/// keeps both records; an apiserver that is down fails the write within its bound.
#[tokio::test]
async fn rty_05_kubernetes_writes_survive_a_race_and_fail_in_time_when_down() {
    let fake = crate::store::kubernetes::fake::FakeApiServer::start().await;
    let (_dir, config, env) = k8s_setup(&fake.url(), crate::config::cluster::ClientLibrary::Http);
    let h = KubernetesHandoffs::handoffs(&config, "n1", env);
    h.write(&record("backup", 1_000, 10)).await.unwrap();
    fake.race_next_get();
    h.write(&record("report", 2_000, 10)).await.unwrap();
    let names: Vec<_> = h
        .pending()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(
        names,
        vec!["backup@1000".to_owned(), "report@2000".to_owned()]
    );
    fake.set_down(true);
    let took = tokio::time::Instant::now();
    let e = h.write(&record("late", 3_000, 10)).await.unwrap_err();
    assert!(took.elapsed() <= crate::handoff::WRITE_TIMEOUT + Duration::from_millis(500));
    assert!(!e.to_string().is_empty());
}
