//! Benchmark: what a per-firing claim adds to `ShouldRun` on a lease holder, with the real
//! binary on a filesystem store and on a real etcd.
//!
//! One coordinator holds the lease; a client asks about N distinct instants of a Leader job
//! (each answer RUN writes one claim) and of a PreferLeader job (the same gate, no claim), one
//! call at a time, and prints p50 and p99 of each. The claims written are counted in the store.
//!
//! Run: `cargo run --release -p cronstable-tests --example claim_cost [-- N]` (1,000 by
//! default).

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::path::Path;
use std::time::{Duration, Instant};

use cronstable_proto::v1 as pb;
use cronstable_tests::etcd::Etcd;
use cronstable_tests::lease::{Store, backend_yaml, wait_one_leader};
use cronstable_tests::{Coordinator, now_ms};

const CRON_D: &str = "\
# cronstable: name=report clusterPolicy=Leader
* * * * * root true
# cronstable: name=notes clusterPolicy=PreferLeader
* * * * * root true
";

fn holder(dir: &Path, store: &Store) -> Coordinator {
    let jobs = dir.join("app.cron");
    std::fs::write(&jobs, CRON_D).unwrap();
    let backend = backend_yaml(store, 3);
    let node = Coordinator::start_named(
        dir,
        "a",
        &format!(
            "jobs:\n  systemCrontab: {}\ncluster:\n  nodeName: a\n{backend}",
            jobs.display()
        ),
    );
    node.proc.wait_log("registered the config's job file");
    wait_one_leader(&[node.web], Duration::from_secs(15)).expect("it leads");
    node
}

/// p50 and p99 of `n` sequential ShouldRun calls about distinct instants of `job`.
async fn latencies(
    client: &mut pb::executor_client::ExecutorClient<tonic::transport::Channel>,
    job: &str,
    n: usize,
) -> (Duration, Duration) {
    let base = now_ms() - 10_000;
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let started = Instant::now();
        let r = client
            .should_run(pb::ShouldRunRequest {
                executor_id: "bench".into(),
                job: job.into(),
                scheduled_at_ms: base + i as i64,
                kind: pb::FiringKind::Scheduled as i32,
                attempt: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        took.push(started.elapsed());
        assert_eq!(r.verdict(), pb::Verdict::Run, "{}", r.message);
    }
    took.sort();
    (took[n / 2], took[n * 99 / 100])
}

fn measure(name: &str, store: &Store, n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let node = holder(dir.path(), store);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut client = pb::executor_client::ExecutorClient::connect(node.api.clone())
            .await
            .unwrap();
        // Warm the connection and the coordinator's caches.
        latencies(&mut client, "notes", 50).await;
        let (p50, p99) = latencies(&mut client, "notes", n).await;
        println!("| {name} | PreferLeader (no claim) | {p50:?} | {p99:?} |");
        let (p50, p99) = latencies(&mut client, "report", n).await;
        println!("| {name} | Leader (one claim each) | {p50:?} | {p99:?} |");
    });
    if let Store::Filesystem(path) = store {
        let claims = std::fs::read_dir(path.join("default/cluster/claims"))
            .map(|d| d.count())
            .unwrap_or(0);
        println!("  {claims} claim files for {n} Leader firings");
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);
    println!("| store | job | p50 | p99 |");
    println!("|---|---|---|---|");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    std::fs::create_dir(&path).unwrap();
    measure("filesystem", &Store::Filesystem(path), n);
    let etcd = Etcd::start();
    measure("etcd", &Store::Etcd(etcd.endpoint()), n);
}
