//! Kubernetes store tests: the client-go rule as a table (paused clock), the fake apiserver
//! itself, the store against the fake over real loopback sockets (real clock: tokio's paused
//! clock would fire request timeouts while a socket waits), and the conformance suite.

use std::path::Path;
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::*;
use crate::cluster::Election;
use crate::lease::conformance::{self, Harness, Node, wait_until};
use crate::store::kubernetes::api::{ApiClient, K8sEnv, resolve};
use crate::store::kubernetes::fake::FakeApiServer;

const NS: &str = "jobs";
const NAME: &str = "cronstable-leader";

/// Sub-second rounds so the real-clock tests stay short: renewDeadline 1 s, lease 3 s.
const T: LeaseTiming = LeaseTiming {
    round_every: Duration::from_millis(500),
    round_timeout: Duration::from_secs(1),
    duration: Duration::from_secs(3),
};

fn observed(holder: Option<&str>, rv: &str, at: Instant, secs: Option<u64>) -> Observed {
    Observed {
        holder: holder.map(str::to_owned),
        renew_time: Some("2026-01-01T00:00:00.000000Z".into()),
        resource_version: rv.into(),
        duration_secs: secs,
        at,
    }
}

// === the rule ===

#[tokio::test(start_paused = true)]
async fn a_live_holder_is_followed_until_a_whole_duration_passes_on_our_clock() {
    let seen = Instant::now();
    let obs = observed(Some("a#111111111111"), "7", seen, Some(15));
    let d = Duration::from_secs(15);
    assert_eq!(decide(&obs, "b#2", seen, d), Action::Follow);
    let almost = seen + Duration::from_millis(14_999);
    assert_eq!(decide(&obs, "b#2", almost, d), Action::Follow);
    assert_eq!(
        decide(&obs, "b#2", seen + d, d),
        Action::TakeOver,
        "unchanged for leaseDurationSeconds by the challenger's clock"
    );
}

#[tokio::test(start_paused = true)]
async fn the_records_own_duration_counts_and_ours_is_the_fallback() {
    let seen = Instant::now();
    let obs = observed(Some("a#1"), "7", seen, Some(30));
    let at20 = seen + Duration::from_secs(20);
    assert_eq!(
        decide(&obs, "b#2", at20, Duration::from_secs(15)),
        Action::Follow
    );
    let none = observed(Some("a#1"), "7", seen, None);
    assert_eq!(
        decide(&none, "b#2", at20, Duration::from_secs(15)),
        Action::TakeOver
    );
}

#[tokio::test(start_paused = true)]
async fn mine_is_renewed_free_is_taken_and_a_namesake_is_someone_else() {
    let now = Instant::now();
    let d = Duration::from_secs(15);
    assert_eq!(
        decide(&observed(Some("a#1"), "1", now, Some(15)), "a#1", now, d),
        Action::Renew
    );
    assert_eq!(
        decide(&observed(None, "1", now, Some(1)), "a#1", now, d),
        Action::TakeOver
    );
    // LSE-03: the same identity with another token (a restarted pod) must wait like anyone.
    let other = observed(Some("a#222222222222"), "1", now, Some(15));
    assert_eq!(decide(&other, "a#111111111111", now, d), Action::Follow);
}

#[test]
fn tokens_are_stripped_for_display_and_times_are_micro_times() {
    assert_eq!(strip_token("web-0#0123456789ab"), "web-0");
    assert_eq!(strip_token("plain"), "plain");
    let t = token();
    assert_eq!(t.len(), 12);
    assert!(t.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(t, token());
    assert_eq!(micro_time(1_767_225_600_123), "2026-01-01T00:00:00.123000Z");
}

#[test]
fn timing_follows_the_three_settings() {
    let k = KubernetesConfig::default();
    assert_eq!(
        timing(&k),
        LeaseTiming {
            round_every: Duration::from_secs(2),
            round_timeout: Duration::from_secs(10),
            duration: Duration::from_secs(15),
        }
    );
}

/// Runs a test body, `async fn name(lib: ClientLibrary)`, once per client: the kube crate
/// (`library`) and the built-in REST client (`http`).
macro_rules! both_clients {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn library() {
                super::$name(ClientLibrary::Library).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn http() {
                super::$name(ClientLibrary::Http).await;
            }
        }
    )*};
}

// === helpers ===

/// A service-account directory with `token` and `namespace`.
fn sa_dir(token: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("token"), token).unwrap();
    std::fs::write(d.path().join("namespace"), format!("{NS}\n")).unwrap();
    d
}

fn env(dir: &Path) -> K8sEnv {
    K8sEnv {
        service_host: None,
        service_port: None,
        service_account_dir: dir.to_owned(),
    }
}

fn config(url: &str, lib: ClientLibrary) -> KubernetesConfig {
    KubernetesConfig {
        api_server: Some(url.to_owned()),
        client_library: lib,
        ..KubernetesConfig::default()
    }
}

async fn store(
    fake: &FakeApiServer,
    dir: &Path,
    name: &str,
    lib: ClientLibrary,
) -> KubernetesStore {
    let mut s = KubernetesStore::new(&config(&fake.url(), lib), name, env(dir)).with_timing(T);
    s.prepare().await.unwrap();
    s
}

fn raw_client(fake: &FakeApiServer, dir: &Path) -> ApiClient {
    resolve(&config(&fake.url(), ClientLibrary::Http), &env(dir)).unwrap()
}

fn lease_url(name: &str) -> String {
    format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{name}")
}

async fn call(c: &ApiClient, m: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let a = c
        .send(
            m,
            path,
            body.map(|b| b.to_string().into_bytes()),
            Duration::from_secs(2),
        )
        .await
        .unwrap();
    (a.status, serde_json::from_slice(&a.body).unwrap())
}

// === the fake itself ===

#[tokio::test]
async fn the_fake_speaks_the_lease_api_with_real_status_bodies() {
    let fake = FakeApiServer::start().await;
    let dir = sa_dir("t0k");
    fake.require_token("t0k");
    let c = raw_client(&fake, dir.path());
    let (s, body) = call(&c, Method::GET, &lease_url("x"), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "leases.coordination.k8s.io \"x\" not found", "reason": "NotFound",
            "details": {"name": "x", "group": "coordination.k8s.io", "kind": "leases"},
            "code": 404})
    );
    let new = json!({"metadata": {"name": "x"}, "spec": {"holderIdentity": "a#1"}});
    let collection = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases");
    let (s, created) = call(&c, Method::POST, &collection, Some(new.clone())).await;
    assert_eq!(s, StatusCode::CREATED);
    let rv1: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let (s, dup) = call(&c, Method::POST, &collection, Some(new)).await;
    assert_eq!(
        (s, dup["reason"].as_str()),
        (StatusCode::CONFLICT, Some("AlreadyExists"))
    );
    assert_eq!(dup["code"], 409);
    // A PUT at the current resourceVersion wins and moves it up; the same PUT again is stale.
    let (s, updated) = call(&c, Method::PUT, &lease_url("x"), Some(created.clone())).await;
    assert_eq!(s, StatusCode::OK);
    let rv2: u64 = updated["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);
    let (s, stale) = call(&c, Method::PUT, &lease_url("x"), Some(created)).await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(stale["reason"], "Conflict");
    assert_eq!(stale["details"]["kind"], "leases");
    assert!(
        stale["message"]
            .as_str()
            .unwrap()
            .contains("the object has been modified")
    );
    let ghost = json!({"metadata": {"name": "y", "resourceVersion": "1"}, "spec": {}});
    let (s, _) = call(&c, Method::PUT, &lease_url("y"), Some(ghost)).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    fake.require_token("another");
    let (s, unauth) = call(&c, Method::GET, &lease_url("x"), None).await;
    assert_eq!(
        (s, unauth["reason"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("Unauthorized"))
    );
}

#[tokio::test]
async fn the_fake_can_be_down_and_slow() {
    let fake = FakeApiServer::start().await;
    let dir = sa_dir("t");
    let c = raw_client(&fake, dir.path());
    fake.set_down(true);
    let e = c
        .send(Method::GET, &lease_url("x"), None, Duration::from_secs(2))
        .await;
    assert!(e.is_err(), "a down fake answers nothing: {e:?}");
    fake.set_down(false);
    fake.set_delay(Duration::from_millis(400));
    let e = c
        .send(
            Method::GET,
            &lease_url("x"),
            None,
            Duration::from_millis(100),
        )
        .await;
    assert!(e.unwrap_err().contains("no answer within"));
    let ok = c
        .send(Method::GET, &lease_url("x"), None, Duration::from_secs(2))
        .await;
    assert_eq!(ok.unwrap().status, StatusCode::NOT_FOUND);
}

// === the store against the fake, through both clients ===

both_clients!(
    create_follow_renew_with_token_holders_and_fences,
    a_409_race_has_exactly_one_winner,
    a_lost_write_stands_down_one_round_and_stays_quorate,
    takeover_waits_a_whole_lease_duration_on_the_challengers_clock,
    release_clears_the_holder_and_another_takes_over_at_once,
    a_slow_apiserver_fails_the_round_within_the_renew_deadline,
);

async fn create_follow_renew_with_token_holders_and_fences(lib: ClientLibrary) {
    let fake = FakeApiServer::start().await;
    let dir = sa_dir("sa-token");
    fake.require_token("sa-token");
    let mut a = store(&fake, dir.path(), "a", lib).await;
    let mut b = store(&fake, dir.path(), "b", lib).await;
    let won = a.campaign().await.unwrap();
    assert!(won.held_by_me);
    // The namespace came from the service-account file; the holder carries the token.
    let stored = fake.lease(NS, NAME).unwrap();
    assert_eq!(stored["spec"]["holderIdentity"], a.holder());
    assert!(a.holder().starts_with("a#"));
    assert_eq!(stored["spec"]["leaseDurationSeconds"], 3);
    assert_eq!(stored["spec"]["leaseTransitions"], 0);
    let rv = stored["metadata"]["resourceVersion"].as_str().unwrap();
    let fence = won.fence.clone().unwrap();
    assert_eq!(fence, format!("{}@{rv}", &a.holder()[2..]));
    assert_eq!(won.holder.as_deref(), Some("a"));
    let keys: Vec<&str> = won.block.keys().map(String::as_str).collect();
    assert_eq!(keys, ["expiry", "holder", "identity", "name", "namespace"]);
    assert_eq!(won.block["namespace"], NS);
    assert_eq!(won.block["holder"], "a", "the token is stripped (LSE-K-04)");

    let lost = b.campaign().await.unwrap();
    assert!(!lost.held_by_me);
    assert_eq!(lost.holder.as_deref(), Some("a"));
    assert_eq!(lost.fence, None);
    assert_eq!(lost.block["identity"], "b");

    let renewed = a.campaign().await.unwrap();
    assert!(renewed.held_by_me);
    let after = fake.lease(NS, NAME).unwrap();
    assert_ne!(after["spec"]["renewTime"], stored["spec"]["renewTime"]);
    assert_eq!(after["spec"]["acquireTime"], stored["spec"]["acquireTime"]);
    assert_eq!(after["spec"]["leaseTransitions"], 0);
}

async fn a_409_race_has_exactly_one_winner(lib: ClientLibrary) {
    // LSE-K-03: both challengers read the same resourceVersion (every answer held back 300 ms
    // so the two GETs are in flight together); both PUT on it; the apiserver takes one.
    let fake = FakeApiServer::start().await;
    let dir = sa_dir("t");
    let mut a = store(&fake, dir.path(), "a", lib).await;
    let mut b = store(&fake, dir.path(), "b", lib).await;
    let mut gone = store(&fake, dir.path(), "gone", lib).await;
    gone.campaign().await.unwrap();
    gone.release().await.unwrap();
    fake.set_delay(Duration::from_millis(300));
    let (ra, rb) = tokio::join!(a.campaign(), b.campaign());
    let won = [&ra, &rb]
        .iter()
        .filter(|r| matches!(r, Ok(o) if o.held_by_me))
        .count();
    assert_eq!(won, 1, "a: {ra:?}\nb: {rb:?}");
    let loser = if ra.is_ok() { rb } else { ra };
    let Err(LeaseError::StandDown(why)) = loser else {
        panic!("the loser stands down: {loser:?}")
    };
    assert!(why.contains("the object has been modified"), "{why}");
    assert_eq!(fake.lease(NS, NAME).unwrap()["spec"]["leaseTransitions"], 1);
}

async fn a_lost_write_stands_down_one_round_and_stays_quorate(lib: ClientLibrary) {
    let fake = FakeApiServer::start().await;
    let dir = sa_dir("t");
    let s = store(&fake, dir.path(), "a", lib).await;
    let node = DriverNode::start(s);
    wait_until("a leads", T.duration, || node.leads()).await;
    fake.race_next_get();
    // Caught the moment it is published: the next round renews and clears it.
    let mut status = Value::Null;
    wait_until("the renew after the raced GET fails", T.duration, || {
        status = node.status();
        status["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("lost the write race"))
    })
    .await;
    assert_eq!(
        status["quorate"], true,
        "a 409 is contact, not an outage: {status}"
    );
    assert_eq!(status["is_leader"], false, "{status}");
    wait_until("a leads again next round", T.duration, || node.leads()).await;
    node.stop().await;
}

async fn takeover_waits_a_whole_lease_duration_on_the_challengers_clock(lib: ClientLibrary) {
    let fake = FakeApiServer::start().await;
    let dir = sa_dir("t");
    let mut a = store(&fake, dir.path(), "a", lib).await;
    let mut b = store(&fake, dir.path(), "b", lib).await;
    a.campaign().await.unwrap();
    // The holder's clock is an hour slow: its renewTime looks long expired to anyone who
    // compares it with their own wall clock. The challenger must not.
    fake.edit(NS, NAME, |l| {
        let old = micro_time(clock::now_ms() - 3_600_000);
        l["spec"]["renewTime"] = Value::String(old);
    });
    let first = Instant::now();
    assert!(!b.campaign().await.unwrap().held_by_me);
    let took = loop {
        if b.campaign().await.unwrap().held_by_me {
            break first.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        took >= T.duration,
        "took over after {took:?}, under the lease duration"
    );
    assert!(took < T.duration + Duration::from_millis(800), "{took:?}");
    let l = fake.lease(NS, NAME).unwrap();
    assert_eq!(l["spec"]["holderIdentity"], b.holder());
    assert_eq!(l["spec"]["leaseTransitions"], 1);
    // The old holder now follows.
    let seen = a.campaign().await.unwrap();
    assert_eq!(
        (seen.held_by_me, seen.holder.as_deref()),
        (false, Some("b"))
    );
}

async fn release_clears_the_holder_and_another_takes_over_at_once(lib: ClientLibrary) {
    let fake = FakeApiServer::start().await;
    let dir = sa_dir("t");
    let mut a = store(&fake, dir.path(), "a", lib).await;
    let mut b = store(&fake, dir.path(), "b", lib).await;
    a.campaign().await.unwrap();
    assert!(!b.campaign().await.unwrap().held_by_me);
    a.release().await.unwrap();
    let l = fake.lease(NS, NAME).unwrap();
    assert_eq!(l["spec"]["holderIdentity"], "", "LSE-K-05");
    assert_eq!(l["spec"]["leaseDurationSeconds"], 1);
    let taken = b.campaign().await.unwrap();
    assert!(taken.held_by_me, "no wait after a release");
    assert_eq!(fake.lease(NS, NAME).unwrap()["spec"]["leaseTransitions"], 1);
    // A release by a non-holder writes nothing.
    let before = fake.requests();
    let mut c = store(&fake, dir.path(), "c", lib).await;
    c.release().await.unwrap();
    assert_eq!(fake.requests(), before);
}

async fn a_slow_apiserver_fails_the_round_within_the_renew_deadline(lib: ClientLibrary) {
    let fake = FakeApiServer::start().await;
    let dir = sa_dir("t");
    let mut a = store(&fake, dir.path(), "a", lib).await;
    a.campaign().await.unwrap();
    fake.set_delay(T.round_timeout);
    let start = Instant::now();
    let e = a.campaign().await.unwrap_err();
    assert!(
        matches!(e, LeaseError::Store(ref m) if m.contains("no answer within")),
        "{e:?}"
    );
    assert!(start.elapsed() < T.round_timeout + Duration::from_millis(200));
}

#[tokio::test]
async fn start_refusals_name_the_key() {
    let dir = sa_dir("t");
    let e = KubernetesStore::new(&KubernetesConfig::default(), "a", env(dir.path()))
        .prepare()
        .await
        .unwrap_err();
    assert!(e.contains("KUBERNETES_SERVICE_HOST is unset"), "{e}");
    let no_sa = env(&dir.path().join("missing"));
    let e = KubernetesStore::new(
        &config("http://127.0.0.1:1", ClientLibrary::Http),
        "a",
        no_sa,
    )
    .prepare()
    .await
    .unwrap_err();
    assert!(e.contains("token"), "{e}");
    // In a pod, the URL comes from the service variables and needs the CA to verify it.
    let pod = K8sEnv {
        service_host: Some("10.0.0.1".into()),
        service_port: Some("443".into()),
        ..env(dir.path())
    };
    let e = KubernetesStore::new(&KubernetesConfig::default(), "a", pod)
        .prepare()
        .await
        .unwrap_err();
    assert!(e.contains("ca.crt"), "{e}");
}

#[tokio::test]
async fn a_token_file_ending_in_a_newline() {
    // The REST client trims it; the kube client would send it, so it is refused at start.
    let fake = FakeApiServer::start().await;
    fake.require_token("t");
    let dir = sa_dir("t\n");
    let mut http = store(&fake, dir.path(), "a", ClientLibrary::Http).await;
    assert!(http.campaign().await.unwrap().held_by_me);
    let cfg = config(&fake.url(), ClientLibrary::Library);
    let e = KubernetesStore::new(&cfg, "b", env(dir.path()))
        .prepare()
        .await
        .unwrap_err();
    assert!(e.contains("clientLibrary: http"), "{e}");
}

#[tokio::test]
async fn a_refused_start_publishes_no_manager() {
    // No service-account token where in-cluster credentials should be.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("http://127.0.0.1:1", ClientLibrary::Auto);
    let s = KubernetesStore::new(&cfg, "a", env(dir.path()));
    let (mut rx, stop, task) = crate::lease::driver::spawn(s, "a");
    let view = rx
        .wait_for(|v| !matches!(v.election, Election::Off))
        .await
        .unwrap()
        .clone();
    let Election::NoManager { reason } = &view.election else {
        panic!("expected NoManager, got {:?}", view.election)
    };
    assert!(
        reason.starts_with("cluster.backend kubernetes: cannot start: "),
        "{reason}"
    );
    assert!(reason.contains("token"), "{reason}");
    stop.send(()).unwrap();
    task.await.unwrap();
}

mod kubeconfig;

// === a driver-run node, for the tests that watch the published view ===

struct DriverNode {
    view: tokio::sync::watch::Receiver<crate::cluster::ClusterView>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl DriverNode {
    fn start(s: KubernetesStore) -> Self {
        let (view, stop, task) = crate::lease::driver::spawn(s, "a");
        Self { view, stop, task }
    }
    fn status(&self) -> Value {
        self.view.borrow().status.to_json("a")
    }
    fn leads(&self) -> bool {
        self.status()["is_leader"] == true
    }
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

mod suite;

mod handoff;
