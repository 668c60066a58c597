//! `GET /cluster` and `GET /jobs` say what the gate does (issue 28, item 4). An operator alerts
//! on `quorate` and on more than one `clusterOwner` per job across the fleet (the seed's spread
//! check); both must come from the computation that answers `ShouldRun`, or an isolated node
//! names itself owner of every Leader job while its gate answers `no_quorum`, and a starting
//! node reads quorate while its gate still refuses.
//!
//! Three gossip nodes on loopback, through their start, the isolation of one of them (the
//! other two stopped with SIGSTOP) and the heal. Node n1 is sampled throughout: `/cluster`, a
//! `ShouldRun` for a Leader job, `/jobs`, `/cluster` again; a sample whose two `/cluster` reads
//! differ straddled a view change and is left out.

// Real processes on the real clock: a paused tokio clock cannot pace them.
#![allow(clippy::disallowed_types)]

use std::time::{Duration, Instant};

use cronstable_proto::v1 as pb;
use cronstable_tests::gossip::{ClusterFiles, ClusterPlan};
use cronstable_tests::{Coordinator, http};
use serde_json::Value;

const EXECUTOR: &str = "signals-probe";

fn job() -> pb::JobDefinition {
    pb::JobDefinition {
        name: "tick".into(),
        schedule: "0 3 * * *".into(),
        command: "true".into(),
        cluster_policy: pb::ClusterPolicy::Leader as i32,
        ..Default::default()
    }
}

/// What n1 said, and what its gate answered in between.
#[derive(Debug)]
struct Sample {
    at_ms: u128,
    quorate: bool,
    is_leader: bool,
    reason: String,
    owner: Option<String>,
}

struct Probe {
    rt: tokio::runtime::Runtime,
    client: pb::executor_client::ExecutorClient<tonic::transport::Channel>,
    next_instant: i64,
}

impl Probe {
    fn new(node: &Coordinator) -> Self {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let client = rt.block_on(async {
            let mut c = pb::executor_client::ExecutorClient::connect(node.api.clone())
                .await
                .unwrap();
            c.register_jobs(pb::RegisterJobsRequest {
                executor_id: EXECUTOR.into(),
                jobs: vec![job()],
                instance_id: "probe".into(),
                pid: std::process::id(),
            })
            .await
            .unwrap();
            c
        });
        Probe {
            rt,
            client,
            // Fresh instants: a question past its start deadline would be skipped as late.
            next_instant: cronstable_tests::now_ms() / 1000 * 1000,
        }
    }

    fn reason(&mut self) -> Option<String> {
        self.next_instant += 1000;
        let req = pb::ShouldRunRequest {
            executor_id: EXECUTOR.into(),
            job: "tick".into(),
            scheduled_at_ms: self.next_instant,
            kind: pb::FiringKind::Scheduled as i32,
            attempt: 1,
            instance_id: "probe".into(),
        };
        let answer = self
            .rt
            .block_on(self.client.should_run(req))
            .ok()?
            .into_inner();
        Some(
            pb::Reason::try_from(answer.reason)
                .map(|r| r.as_str_name().to_owned())
                .unwrap_or_default(),
        )
    }
}

fn register_everywhere(nodes: &[Coordinator]) -> Probe {
    for node in &nodes[1..] {
        drop(Probe::new(node));
    }
    Probe::new(&nodes[0])
}

fn signals(v: &Value) -> (bool, bool) {
    (v["quorate"] == true, v["is_leader"] == true)
}

fn sample(node: &Coordinator, probe: &mut Probe, start: Instant) -> Option<Sample> {
    let before = http(node.web, "GET", "/cluster").ok()?.json();
    let reason = probe.reason()?;
    let jobs = http(node.web, "GET", "/jobs").ok()?.json();
    let after = http(node.web, "GET", "/cluster").ok()?.json();
    if signals(&before) != signals(&after) || before["manager"] != after["manager"] {
        return None;
    }
    let (quorate, is_leader) = signals(&before);
    let owner = jobs["jobs"]
        .as_array()?
        .iter()
        .find(|j| j["name"] == "tick")?
        .get("clusterOwner")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Some(Sample {
        at_ms: start.elapsed().as_millis(),
        quorate,
        is_leader,
        reason,
        owner,
    })
}

/// Every way a sample's signals can disagree with its gate answer.
fn disagreements(s: &Sample, spread: bool) -> Vec<String> {
    let mut out = Vec::new();
    let decided = [
        "REASON_NO_QUORUM",
        "REASON_LEADER",
        "REASON_NOT_LEADER",
        "REASON_OWNER",
        "REASON_NOT_OWNER",
    ];
    if decided.contains(&s.reason.as_str()) && s.quorate != (s.reason != "REASON_NO_QUORUM") {
        out.push(format!(
            "quorate {} but the gate said {}",
            s.quorate, s.reason
        ));
    }
    if !spread && s.is_leader != (s.reason == "REASON_LEADER") {
        out.push(format!(
            "is_leader {} but the gate said {}",
            s.is_leader, s.reason
        ));
    }
    if spread && (s.owner.as_deref() == Some("n1")) != (s.reason == "REASON_OWNER") {
        out.push(format!(
            "clusterOwner {:?} but the gate said {}",
            s.owner, s.reason
        ));
    }
    out
}

fn run(spread: bool, subnet: u8) {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(3, subnet);
    if spread {
        plan.extra = "  distribution: spread\n".into();
    }
    let files = ClusterFiles::write(dir.path(), &plan);
    let start = Instant::now();
    let nodes: Vec<Coordinator> = (0..3).map(|i| files.start(i)).collect();
    let mut probe = register_everywhere(&nodes);
    let mut samples = Vec::new();
    let mut phase = |what: &str, probe: &mut Probe, until: &dyn Fn(&[Sample]) -> bool| {
        let limit = Instant::now() + Duration::from_secs(40);
        let first = samples.len();
        loop {
            if let Some(s) = sample(&nodes[0], probe, start) {
                samples.push(s);
            }
            if until(&samples[first..]) {
                return;
            }
            assert!(
                Instant::now() < limit,
                "{what}: never reached; samples {:?}",
                &samples[first..]
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Start: until n1 has been quorate for a while (spread: and owns the job or not).
    phase("n1 quorate", &mut probe, &|s| {
        s.iter().filter(|s| s.quorate).count() >= 50
    });
    // n1 alone: the other two stop answering.
    for node in &nodes[1..] {
        node.proc.signal(19);
    }
    phase("n1 isolated and not quorate", &mut probe, &|s| {
        s.iter().filter(|s| !s.quorate).count() >= 50
    });
    for node in &nodes[1..] {
        node.proc.signal(18);
    }
    phase("n1 quorate again", &mut probe, &|s| {
        s.iter().filter(|s| s.quorate).count() >= 50
    });
    let bad: Vec<String> = samples
        .iter()
        .flat_map(|s| {
            disagreements(s, spread)
                .into_iter()
                .map(move |d| format!("at {} ms: {d}", s.at_ms))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} samples disagree with the gate, e.g. {:?}",
        bad.len(),
        samples.len(),
        &bad[..bad.len().min(8)]
    );
}

#[test]
fn cluster_quorate_and_is_leader_agree_with_the_gate_through_a_partition() {
    run(false, 75);
}

#[test]
fn spread_cluster_owner_agrees_with_the_gate_through_a_partition() {
    run(true, 76);
}
