//! Benchmark: ShouldRun latency on a lease backend beside election off.
//!
//! Two coordinator `Executor` services in this process on 127.0.0.1: one with election off,
//! one whose view is written by the real lease driver over the filesystem store (a temporary
//! directory, ttl 15 s), which this node holds, so Leader firings RUN with a fence token. The
//! driver keeps renewing and republishing the view while the calls run. Reports p50/p99 and
//! calls per second at concurrency 1 and 64.
//!
//! Run: `cargo run --release -p cronstable-coordinator --example bench_should_run_lease [-- SECONDS]`

// A benchmark measures real elapsed time: std's Instant is the right clock here.
#![allow(clippy::disallowed_types)]

use std::time::{Duration, Instant};

use cronstable_coordinator::cluster::{ClusterView, Election};
use cronstable_coordinator::config::cluster::{FilesystemConfig, Topology};
use cronstable_coordinator::lease::driver;
use cronstable_coordinator::state::CoordinatorState;
use cronstable_coordinator::store::filesystem::FilesystemStore;
use cronstable_core::JobSpec;
use cronstable_proto::v1 as pb;
use cronstable_proto::v1::executor_client::ExecutorClient;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};

async fn serve(state: CoordinatorState) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let incoming = TcpIncoming::from(l).with_nodelay(Some(true));
    let svc = cronstable_coordinator::grpc::service(state, tokio::sync::watch::channel(None).1);
    tokio::spawn(
        Server::builder()
            .add_service(svc)
            .serve_with_incoming(incoming),
    );
    format!("http://{addr}")
}

async fn measure(
    url: &str,
    concurrency: usize,
    for_how_long: Duration,
) -> (Duration, Duration, f64) {
    let channel = Channel::from_shared(url.to_owned())
        .unwrap()
        .tcp_nodelay(true)
        .connect()
        .await
        .unwrap();
    let start = Instant::now();
    // Fresh instants (this second onwards): a question past the job's start deadline would
    // measure the late-question skip instead of the gate.
    let base = cronstable_coordinator::clock::now_ms() / 1000 * 1000;
    let mut tasks = Vec::new();
    for w in 0..concurrency {
        let mut client = ExecutorClient::new(channel.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut n = 0i64;
            while start.elapsed() < for_how_long {
                let req = pb::ShouldRunRequest {
                    executor_id: "bench".into(),
                    job: "charge-cards".into(),
                    scheduled_at_ms: base + n * 1000 + w as i64,
                    kind: pb::FiringKind::Scheduled as i32,
                    attempt: 1,
                    ..Default::default()
                };
                let t = Instant::now();
                let r = client.should_run(req).await.unwrap().into_inner();
                assert_eq!(r.verdict, pb::Verdict::Run as i32);
                samples.push(t.elapsed());
                n += 1;
            }
            samples
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let elapsed = start.elapsed();
    all.sort();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    (
        pct(0.50),
        pct(0.99),
        all.len() as f64 / elapsed.as_secs_f64(),
    )
}

fn state_with(view: tokio::sync::watch::Receiver<ClusterView>) -> CoordinatorState {
    let state = CoordinatorState::new(view);
    state
        .registry
        .register(
            "bench",
            vec![JobSpec::new("charge-cards", "0 * * * *", "./charge.sh")],
        )
        .unwrap();
    state
}

#[tokio::main]
async fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let (_off_tx, off_rx) = tokio::sync::watch::channel(ClusterView::election_off("bench"));
    let off = serve(state_with(off_rx)).await;

    let dir = tempfile::tempdir().unwrap();
    let config = FilesystemConfig {
        path: dir.path().to_owned(),
        election_name: "cluster/leader".into(),
        ttl: 15,
        deployment_id: None,
        topology: Topology::SingleNode,
    };
    let (mut lease_rx, _stop, _task) =
        driver::spawn(FilesystemStore::new(&config, "bench"), "bench");
    lease_rx
        .wait_for(|v| matches!(&v.election, Election::Managed(m) if m.fence.is_some()))
        .await
        .unwrap();
    let lease = serve(state_with(lease_rx)).await;

    println!("| view | concurrency | p50 | p99 | calls/s |");
    println!("|---|---|---|---|---|");
    for concurrency in [1, 64] {
        for (name, url) in [("election off", &off), ("filesystem lease, holder", &lease)] {
            measure(url, concurrency, Duration::from_millis(300)).await;
            let (p50, p99, rate) = measure(url, concurrency, Duration::from_secs(secs)).await;
            println!("| {name} | {concurrency} | {p50:?} | {p99:?} | {rate:.0} |");
        }
    }
}
