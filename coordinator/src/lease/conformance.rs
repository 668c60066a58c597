//! The conformance suite every lease store passes (anchors habit 6): the same checks, through
//! the real [`driver`](super::driver) and the real decision table, against the in-memory store
//! (paused clock), the filesystem store and a real etcd (real clock).
//!
//! A store plugs in through a [`Harness`]: it makes contenders and can break and heal the store.
//! Every check waits on tokio time only, so the same code runs on a paused clock (memory) and on
//! the real one; a wait that runs out panics with what it was waiting for.

use std::time::Duration;

use cronstable_core::{ClusterPolicy, FiringKind, Reason, Verdict, decide};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::claims::FiringClaimStore;
use super::{LeaseStore, LeaseTiming, RebootRanStore, driver};
use crate::cluster::ClusterView;
use crate::config::cluster::{EtcdConfig, FilesystemConfig, Topology};

/// Serialises the real-clock suites (filesystem, etcd) within one test binary: on a small
/// machine, five suites racing for two cores would turn scheduling delay into false failovers.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// How a store under test is made and broken.
pub trait Harness {
    /// The store's client type.
    type Store: LeaseStore + RebootRanStore;
    /// A new contender (one "process") for node `name`.
    fn contender(&self, name: &str) -> Self::Store;
    /// Makes the store unreachable for every contender.
    fn break_store(&self);
    /// Makes it reachable again.
    fn heal_store(&self);
}

/// The etcd store config the store checks use: `endpoints`, election `cronstable/leader`, lease
/// `ttl` seconds, no auth, no TLS.
pub fn etcd_config(endpoints: Vec<String>, ttl: u64) -> EtcdConfig {
    EtcdConfig {
        endpoints,
        election_name: "cronstable/leader".into(),
        ttl,
        username: None,
        password: None,
        tls: None,
    }
}

/// The filesystem store config the store checks use: `path`, election `cluster/leader` under
/// deployment `prod`, lease ttl 3 s.
pub fn fs_config(path: &std::path::Path) -> FilesystemConfig {
    FilesystemConfig {
        path: path.to_owned(),
        election_name: "cluster/leader".into(),
        ttl: 3,
        deployment_id: Some("prod".into()),
        topology: Topology::SingleNode,
    }
}

/// A real etcd that checks outside the lease suite (the etcd ledger, handoff records) can stop
/// and start: the integration tier implements it over its test etcd process.
pub trait RealEtcd {
    /// Its client URL.
    fn endpoint(&self) -> String;
    /// Stops it; the data stays.
    fn stop(&self);
    /// Starts it again on the same ports and data, and waits until it serves.
    fn restart(&self);
}

/// One running contender.
pub struct Node {
    /// Its node name.
    pub name: String,
    /// Its published view.
    pub view: watch::Receiver<ClusterView>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Node {
    /// Starts a contender of `h` named `name`.
    pub fn start<H: Harness>(h: &H, name: &str) -> Node {
        let (view, stop, task) = driver::spawn(h.contender(name), name);
        Node {
            name: name.to_owned(),
            view,
            stop: Some(stop),
            task,
        }
    }

    /// A contender already spawned with [`driver::spawn`].
    pub fn from_parts(
        name: &str,
        view: watch::Receiver<ClusterView>,
        stop: oneshot::Sender<()>,
        task: JoinHandle<()>,
    ) -> Node {
        Node {
            name: name.to_owned(),
            view,
            stop: Some(stop),
            task,
        }
    }

    /// Whether a scheduled Leader firing runs here now because this node leads (not because
    /// election is off, as it is before the driver's first publish).
    pub fn leads(&self) -> bool {
        let view = self.view.borrow();
        let d = decide(
            ClusterPolicy::Leader,
            FiringKind::Scheduled,
            view.gate_for("job", Instant::now()),
        );
        d.verdict == Verdict::Run && d.reason == Reason::Leader
    }

    /// The verdict for a scheduled firing of a job with `policy`, now.
    pub fn verdict(&self, policy: ClusterPolicy) -> Verdict {
        let view = self.view.borrow();
        decide(
            policy,
            FiringKind::Scheduled,
            view.gate_for("job", Instant::now()),
        )
        .verdict
    }

    /// The fence a RUN of a Leader job carries now, as `CoordinatorState::should_run` computes it.
    pub fn run_fence(&self) -> Option<String> {
        let view = self.view.borrow();
        let d = decide(
            ClusterPolicy::Leader,
            FiringKind::Scheduled,
            view.gate_for("job", Instant::now()),
        );
        let run = d.verdict == Verdict::Run && d.reason == Reason::Leader;
        run.then(|| view.fence().map(str::to_owned)).flatten()
    }

    /// Graceful stop: releases the lease, then returns.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// Sudden death: the task is dropped mid-flight, nothing is released.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// Polls `cond` every 50 ms of tokio time until it holds; returns how long that took, or panics
/// naming `what` after `limit`.
pub async fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if cond() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() <= limit,
            "timed out after {limit:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// [`wait_until`] over `nodes`, dumping their `/cluster` blocks if it runs out.
pub async fn wait_nodes(
    what: &str,
    limit: Duration,
    nodes: &[Node],
    mut cond: impl FnMut(&[Node]) -> bool,
) -> Duration {
    let start = Instant::now();
    loop {
        if cond(nodes) {
            return start.elapsed();
        }
        if start.elapsed() > limit {
            let dump: Vec<String> = nodes
                .iter()
                .map(|n| format!("{}: {}", n.name, n.view.borrow().status.to_json(&n.name)))
                .collect();
            panic!(
                "timed out after {limit:?} waiting until {what}; views:\n{}",
                dump.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn leaders(nodes: &[Node]) -> Vec<&str> {
    nodes
        .iter()
        .filter(|n| n.leads())
        .map(|n| n.name.as_str())
        .collect()
}

/// Waits until exactly one of `nodes` leads and returns its index.
pub async fn one_leader(nodes: &[Node], timing: LeaseTiming) -> usize {
    let limit = timing.duration * 2 + timing.round_every * 2;
    wait_until("exactly one node leads", limit, || {
        leaders(nodes).len() == 1
    })
    .await;
    nodes.iter().position(Node::leads).unwrap_or_default()
}

/// Three contenders: exactly one leads, and for two lease durations never more than one.
pub async fn single_holder<H: Harness>(h: &H, timing: LeaseTiming) {
    let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| Node::start(h, n)).collect();
    let first = one_leader(&nodes, timing).await;
    let until = Instant::now() + timing.duration * 2;
    while Instant::now() < until {
        let now = leaders(&nodes);
        assert!(now.len() <= 1, "two leaders at once: {now:?}");
        assert!(
            now.is_empty() || now == [nodes[first].name.as_str()],
            "leadership moved without a failure: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for n in nodes {
        n.stop().await;
    }
}

/// A RUN carries the store's fence token, and a takeover changes it.
pub async fn fence_on_run_changes_on_takeover<H: Harness>(h: &H, timing: LeaseTiming) {
    let mut nodes: Vec<Node> = ["a", "b"].iter().map(|n| Node::start(h, n)).collect();
    let first = one_leader(&nodes, timing).await;
    let before = nodes[first]
        .run_fence()
        .expect("the leader's RUN carries a fence token");
    let other = 1 - first;
    assert_eq!(
        nodes[other].run_fence(),
        None,
        "a follower hands out no fence"
    );
    let dead = nodes.remove(first);
    dead.kill().await;
    let limit = timing.duration + Duration::from_secs(3);
    wait_nodes("the survivor leads", limit, &nodes, |n| n[0].leads()).await;
    let after = nodes[0]
        .run_fence()
        .expect("the new leader's RUN carries a fence");
    assert_ne!(before, after, "a takeover changes the fence token");
    for n in nodes {
        n.stop().await;
    }
}

/// A graceful stop releases the lease: a survivor leads within about one round.
pub async fn release_gives_immediate_takeover<H: Harness>(h: &H, timing: LeaseTiming) -> Duration {
    let mut nodes: Vec<Node> = ["a", "b"].iter().map(|n| Node::start(h, n)).collect();
    let first = one_leader(&nodes, timing).await;
    nodes.remove(first).stop().await;
    // One round cadence plus a round's latency: far less than the ttl a dead holder costs.
    let limit = timing.round_every + Duration::from_millis(500);
    assert!(
        limit < timing.duration,
        "the test needs round_every < duration"
    );
    let took = wait_nodes("the survivor leads after a release", limit, &nodes, |n| {
        n[0].leads()
    })
    .await;
    for n in nodes {
        n.stop().await;
    }
    took
}

/// A holder whose executor is overdue (wedged or gone) stops leading and gives the lease up
/// at once, so another node leads within about one round; it does not take the lease back while
/// the executor stays overdue, not even when the lease is free; once the executor keeps up it
/// campaigns again and leads only when the lease is free.
pub async fn overdue_holder_hands_over<H: Harness>(h: &H, timing: LeaseTiming) -> Duration {
    let (tx, rx) = watch::channel(None);
    let (view, stop, task) = driver::spawn_with_overdue(h.contender("a"), "a", rx);
    let a = Node::from_parts("a", view, stop, task);
    wait_until("a leads", timing.duration * 2, || a.leads()).await;
    let b = Node::start(h, "b");
    let overdue = crate::liveness::Overdue {
        executor: "shim".into(),
        job: "tick".into(),
        due_ms: crate::clock::now_ms(),
    };
    tx.send_replace(Some(overdue.clone()));
    let limit = timing.round_every + Duration::from_millis(500);
    let took = wait_until("b leads after a's executor fell behind", limit, || {
        b.leads() && !a.leads()
    })
    .await;
    let status = a.view.borrow().status.to_json("a");
    let why = status["last_error"].as_str().unwrap_or_default().to_owned();
    assert!(
        why.contains("standing down") && why.contains("\"tick\""),
        "{status}"
    );
    // b stops and releases: the lease is free, and a still must not take it.
    b.stop().await;
    tokio::time::sleep(timing.round_every * 2).await;
    assert!(
        !a.leads(),
        "a took the lease while its executor was overdue"
    );
    // Its executor keeps up again: it campaigns and leads.
    tx.send_replace(None);
    wait_until(
        "a leads again",
        timing.duration + timing.round_every * 2,
        || a.leads(),
    )
    .await;
    a.stop().await;
    took
}

/// A holder that dies without releasing is replaced within ttl + 2 s (plus 300 ms for this
/// check's own polling and scheduling: the filesystem's worst case at ttl 3 is exactly ttl + 2 s,
/// a renew just before the death, the 1 s challenger margin, and a 1 s round cadence).
pub async fn dead_holder_is_replaced<H: Harness>(h: &H, timing: LeaseTiming) -> Duration {
    let mut nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| Node::start(h, n)).collect();
    let first = one_leader(&nodes, timing).await;
    nodes.remove(first).kill().await;
    let limit = timing.duration + Duration::from_millis(2_300);
    let took = wait_nodes(
        "a survivor leads after the holder died",
        limit,
        &nodes,
        |n| leaders(n).len() == 1,
    )
    .await;
    for n in nodes {
        n.stop().await;
    }
    took
}

/// A store outage: within one duration (plus a round) nobody is quorate, Leader skips and
/// PreferLeader runs everywhere; when the store returns, one node leads again.
pub async fn outage_fails_closed_then_recovers<H: Harness>(h: &H, timing: LeaseTiming) {
    let nodes: Vec<Node> = ["a", "b"].iter().map(|n| Node::start(h, n)).collect();
    one_leader(&nodes, timing).await;
    h.break_store();
    let limit = timing.duration + timing.round_timeout + Duration::from_millis(500);
    wait_nodes("every node is not quorate", limit, &nodes, |nodes| {
        nodes.iter().all(|n| {
            n.verdict(ClusterPolicy::Leader) == Verdict::Skip
                && n.verdict(ClusterPolicy::PreferLeader) == Verdict::Run
                && n.verdict(ClusterPolicy::EveryNode) == Verdict::Run
        })
    })
    .await;
    h.heal_store();
    one_leader(&nodes, timing).await;
    let follower = nodes.iter().find(|n| !n.leads()).expect("two nodes");
    wait_until(
        "the follower defers PreferLeader again",
        timing.duration,
        || follower.verdict(ClusterPolicy::PreferLeader) == Verdict::Skip,
    )
    .await;
    for n in nodes {
        n.stop().await;
    }
}

/// RBT-21: "already ran" records read back under their job-set ID only, survive the writer (a
/// new store instance reads them), and two nodes recording at once both land.
pub async fn reboot_records_round_trip<H: Harness>(h: &H) {
    use std::collections::BTreeSet;
    let set = |names: &[&str]| {
        names
            .iter()
            .map(|s| (*s).to_owned())
            .collect::<BTreeSet<_>>()
    };
    // Prepared contenders, as the driver makes them; `a` campaigns once so the Lease exists
    // on stores that keep the record on it (Kubernetes).
    async fn ready<H: Harness>(h: &H, name: &str) -> H::Store {
        let mut s = h.contender(name);
        s.prepare().await.expect("the store prepares");
        s
    }
    let mut a = ready(h, "a").await;
    a.campaign().await.expect("a first round");
    a.record_reboot_ran("v1:one", &set(&["migrate"]))
        .await
        .expect("recording works");
    assert_eq!(
        a.read_reboot_ran("v1:one").await.unwrap(),
        set(&["migrate"])
    );
    assert!(
        a.read_reboot_ran("v1:two").await.unwrap().is_empty(),
        "another job set's records are not returned"
    );
    drop(a);
    let (mut b, mut c) = (ready(h, "b").await, ready(h, "c").await);
    assert_eq!(
        b.read_reboot_ran("v1:one").await.unwrap(),
        set(&["migrate"]),
        "records outlive the store instance that wrote them"
    );
    let (warm, seed) = (set(&["warm"]), set(&["seed"]));
    let (rb, rc) = tokio::join!(
        b.record_reboot_ran("v1:one", &warm),
        c.record_reboot_ran("v1:one", &seed)
    );
    rb.expect("b records");
    rc.expect("c records");
    assert_eq!(
        ready(h, "d").await.read_reboot_ran("v1:one").await.unwrap(),
        set(&["migrate", "seed", "warm"]),
        "concurrent writers both land"
    );
}

/// Run records (jobs with `expect:`): a run's end replaces its start, whichever instance
/// reads; a span read returns every node's records of its instants, bounds included; pruning
/// removes exactly the records before its bound. Kubernetes keeps none.
pub async fn run_records_round_trip<H: Harness>(h: &H)
where
    H::Store: super::run_records::RunRecordStore,
{
    use super::run_records::{RunRecord, RunRecordStore};
    let run = |node: &str, at: i64, attempt: u32| RunRecord {
        job: "report".into(),
        scheduled_at_ms: at,
        node: node.into(),
        attempt,
        started_at_ms: at + 100,
        ended_at_ms: None,
        duration_ms: None,
        succeeded: None,
    };
    let (mut a, mut b) = (h.contender("a"), h.contender("b"));
    a.prepare().await.expect("the store prepares");
    b.prepare().await.expect("the store prepares");
    a.put_run(&run("a", 60_000, 1)).await.unwrap();
    let ended = RunRecord {
        ended_at_ms: Some(60_900),
        duration_ms: Some(800),
        succeeded: Some(true),
        ..run("a", 60_000, 1)
    };
    a.put_run(&ended).await.unwrap();
    b.put_run(&run("b", 60_000, 1)).await.unwrap();
    b.put_run(&run("b", 60_000, 2)).await.unwrap();
    b.put_run(&run("b", 120_000, 1)).await.unwrap();
    let odd = RunRecord {
        job: "nightly.report-eu".into(),
        ..run("b", 180_000, 1)
    };
    b.put_run(&odd).await.unwrap();
    let sorted = |mut v: Vec<RunRecord>| {
        v.sort_by_key(|r| (r.scheduled_at_ms, r.node.clone(), r.attempt));
        v
    };
    assert_eq!(
        sorted(a.runs_between(60_000, 120_000).await.unwrap()),
        [
            ended.clone(),
            run("b", 60_000, 1),
            run("b", 60_000, 2),
            run("b", 120_000, 1)
        ],
        "the end replaced the start; every node's records, bounds included"
    );
    assert_eq!(
        sorted(b.runs_between(120_001, 180_000).await.unwrap()),
        [odd]
    );
    assert!(b.runs_between(200_000, 300_000).await.unwrap().is_empty());
    assert_eq!(a.prune_runs(120_000).await.unwrap(), 3);
    assert_eq!(
        sorted(b.runs_between(0, 300_000).await.unwrap()).len(),
        2,
        "only the records before the bound are pruned"
    );
}

/// Per-firing claims: the first claim of a firing is created and every later one finds it,
/// whichever instance asks; of two racing claimers exactly one creates it; a claim outlives the
/// instance that wrote it; pruning removes exactly the claims before its bound; a claim is given
/// back only by the node and fence that made it. Kubernetes
/// keeps no claims, so its store is not held to this.
pub async fn firing_claims_once<H: Harness>(h: &H)
where
    H::Store: FiringClaimStore,
{
    use super::claims::{ClaimWrite, FiringClaim};
    let claim = |node: &str, at: i64| FiringClaim {
        job: "report".into(),
        scheduled_at_ms: at,
        node: node.into(),
        fence: format!("fence-{node}"),
        claimed_at_ms: at + 20,
        catch_up: false,
    };
    async fn ready<H: Harness>(h: &H, name: &str) -> H::Store {
        let mut s = h.contender(name);
        s.prepare().await.expect("the store prepares");
        s
    }
    let mut a = ready(h, "a").await;
    a.campaign().await.expect("a first round");
    assert_eq!(
        a.create_claim(&claim("a", 60_000)).await.unwrap(),
        ClaimWrite::Created
    );
    drop(a);
    let (mut b, mut c) = (ready(h, "b").await, ready(h, "c").await);
    assert_eq!(
        b.create_claim(&claim("b", 60_000)).await.unwrap(),
        ClaimWrite::Exists(Some(claim("a", 60_000))),
        "a claim outlives the instance that wrote it"
    );
    let (from_b, from_c) = (claim("b", 120_000), claim("c", 120_000));
    let (rb, rc) = tokio::join!(b.create_claim(&from_b), c.create_claim(&from_c));
    let created = [rb.unwrap(), rc.unwrap()]
        .iter()
        .filter(|w| **w == ClaimWrite::Created)
        .count();
    assert_eq!(
        created, 1,
        "exactly one of two racing claimers creates the claim"
    );
    assert_eq!(b.prune_claims(100_000).await.unwrap(), 1);
    assert_eq!(
        c.create_claim(&claim("c", 60_000)).await.unwrap(),
        ClaimWrite::Created,
        "a pruned claim is gone"
    );
    assert!(matches!(
        c.create_claim(&claim("c", 120_000)).await.unwrap(),
        ClaimWrite::Exists(Some(_))
    ));
    // What catch-up reads: every claim of a span of instants, bounds included, whoever wrote it.
    let odd = FiringClaim {
        job: "nightly report/eu".into(),
        catch_up: true,
        ..claim("b", 180_000)
    };
    assert_eq!(b.create_claim(&odd).await.unwrap(), ClaimWrite::Created);
    claims_read_by_span(&mut c, &odd).await;
    // Giving a claim back: only the node and fence that made it remove it, whoever else asks,
    // and the instant is then free to claim again.
    let other_fence = FiringClaim {
        fence: "fence-b-later".into(),
        ..odd.clone()
    };
    assert!(!c.release_claim(&claim("c", 180_000)).await.unwrap());
    assert!(!b.release_claim(&other_fence).await.unwrap());
    assert!(
        !b.release_claim(&claim("b", 240_000)).await.unwrap(),
        "nothing to give back"
    );
    let plain = FiringClaim {
        catch_up: false,
        ..odd.clone()
    };
    assert!(
        c.release_claim(&plain).await.unwrap(),
        "any instance gives back the claim of its node and fence, whichever kind made it"
    );
    assert!(!c.release_claim(&plain).await.unwrap(), "given back once");
    assert_eq!(
        c.claimed_between(180_000, 180_000).await.unwrap(),
        Vec::<(String, i64)>::new()
    );
    let again = FiringClaim {
        job: "nightly report/eu".into(),
        ..claim("c", 180_000)
    };
    assert_eq!(c.create_claim(&again).await.unwrap(), ClaimWrite::Created);
}

/// [`firing_claims_once`]'s reads: every claim of a span of instants by name (catch-up), and
/// one job's claims with their bodies (the timeline). The store holds `report` at 60 000
/// (by c) and 120 000, and `odd`.
async fn claims_read_by_span<S: FiringClaimStore>(c: &mut S, odd: &super::claims::FiringClaim) {
    let mut seen = c.claimed_between(60_000, 180_000).await.unwrap();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("nightly report/eu".to_owned(), 180_000),
            ("report".to_owned(), 60_000),
            ("report".to_owned(), 120_000),
        ]
    );
    // What the timeline reads: one job's claims with their bodies.
    let mut bodies = c.claims_of("report", 60_000, 180_000).await.unwrap();
    bodies.sort_by_key(|b| b.scheduled_at_ms);
    assert_eq!(
        bodies
            .iter()
            .map(|b| (b.scheduled_at_ms, b.node.as_str()))
            .collect::<Vec<_>>(),
        [(60_000, "c"), (120_000, bodies[1].node.as_str())],
        "{bodies:?}"
    );
    assert_eq!(
        c.claims_of("nightly report/eu", 0, 300_000).await.unwrap(),
        std::slice::from_ref(odd)
    );
    let mut inner = c.claimed_between(60_001, 179_999).await.unwrap();
    inner.sort();
    assert_eq!(inner, [("report".to_owned(), 120_000)]);
    assert!(
        c.claimed_between(200_000, 300_000)
            .await
            .unwrap()
            .is_empty()
    );
}
