//! Benchmark: ShouldRun over loopback gRPC beside a bare tonic unary echo of a similar message.
//!
//! Both servers run in this process on 127.0.0.1 sockets with the same tonic settings; the
//! echo answers a `ShouldRunRequest` with a constant `ShouldRunResponse` (no lookup, no
//! decision, no ledger), which is the floor on this machine. Reports p50/p99 latency and calls
//! per second at concurrency 1 and 64.
//!
//! Run: `cargo run --release -p cronstable-coordinator --example bench_should_run [-- SECONDS]`

// A benchmark measures real elapsed time: std's Instant is the right clock here.
#![allow(clippy::disallowed_types)]

use std::time::{Duration, Instant};

use cronstable_coordinator::cluster::ClusterView;
use cronstable_coordinator::state::CoordinatorState;
use cronstable_core::JobSpec;
use cronstable_proto::v1 as pb;
use cronstable_proto::v1::executor_client::ExecutorClient;
use cronstable_proto::v1::executor_server::{Executor, ExecutorServer};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};

/// The floor: answers ShouldRun with a constant.
struct Echo;

#[tonic::async_trait]
impl Executor for Echo {
    async fn register_jobs(
        &self,
        _: Request<pb::RegisterJobsRequest>,
    ) -> Result<Response<pb::RegisterJobsResponse>, Status> {
        Err(Status::unimplemented("echo"))
    }
    async fn should_run(
        &self,
        r: Request<pb::ShouldRunRequest>,
    ) -> Result<Response<pb::ShouldRunResponse>, Status> {
        let r = r.into_inner();
        Ok(Response::new(pb::ShouldRunResponse {
            verdict: pb::Verdict::Run as i32,
            reason: pb::Reason::ElectionOff as i32,
            message: "leader election is off, so every node runs every job".into(),
            owner: "bench".into(),
            fence: None,
            retry_after_ms: 0,
            firing_id: format!("v1:0123456789abcdef:{}:{}", r.job, r.scheduled_at_ms),
            node_name: "bench".into(),
            election: Some(pb::ElectionStamp {
                mode: pb::ElectionMode::Off as i32,
                generation: 1,
            }),
        }))
    }
    async fn should_run_batch(
        &self,
        _: Request<pb::ShouldRunBatchRequest>,
    ) -> Result<Response<pb::ShouldRunBatchResponse>, Status> {
        Err(Status::unimplemented("echo"))
    }
    async fn report_run(
        &self,
        _: Request<pb::ReportRunRequest>,
    ) -> Result<Response<pb::ReportRunResponse>, Status> {
        Err(Status::unimplemented("echo"))
    }
    async fn handoff(
        &self,
        _: Request<pb::HandoffRequest>,
    ) -> Result<Response<pb::HandoffResponse>, Status> {
        Err(Status::unimplemented("echo"))
    }
    async fn start_job(
        &self,
        _: Request<pb::StartJobRequest>,
    ) -> Result<Response<pb::StartJobResponse>, Status> {
        Err(Status::unimplemented("echo"))
    }
    type WatchStream = tokio_stream::wrappers::ReceiverStream<Result<pb::Instruction, Status>>;
    async fn watch(
        &self,
        _: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        Err(Status::unimplemented("echo"))
    }
}

/// Serves `router` on a loopback port; returns its URL.
async fn serve(router: tonic::transport::server::Router) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let incoming = TcpIncoming::from(l).with_nodelay(Some(true));
    tokio::spawn(router.serve_with_incoming(incoming));
    format!("http://{addr}")
}

async fn measure(
    url: &str,
    token: Option<&'static str>,
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
                let mut req = tonic::Request::new(req);
                if let Some(token) = token {
                    let value = format!("Bearer {token}").parse().unwrap();
                    req.metadata_mut().insert("authorization", value);
                }
                let t = Instant::now();
                client.should_run(req).await.unwrap();
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

#[tokio::main]
async fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let (_tx, rx) = tokio::sync::watch::channel(ClusterView::election_off("bench"));
    let state = CoordinatorState::new(rx);
    state
        .registry
        .register(
            "bench",
            vec![JobSpec::new("charge-cards", "0 * * * *", "./charge.sh")],
        )
        .unwrap();
    let open = tokio::sync::watch::channel(None).1;
    let coordinator = serve(
        Server::builder().add_service(cronstable_coordinator::grpc::service(state.clone(), open)),
    )
    .await;
    // The same coordinator behind api.authToken: the token check's cost per call.
    const TOKEN: &str = "a-32-byte-api-token-for-the-bench";
    let guarded = tokio::sync::watch::channel(Some(std::sync::Arc::new(
        cronstable_coordinator::token::AuthToken::new(TOKEN),
    )))
    .1;
    let with_token =
        serve(Server::builder().add_service(cronstable_coordinator::grpc::service(state, guarded)))
            .await;
    let echo = serve(Server::builder().add_service(ExecutorServer::new(Echo))).await;
    println!("| server | concurrency | p50 | p99 | calls/s |");
    println!("|---|---|---|---|---|");
    for concurrency in [1, 64] {
        for (name, url, token) in [
            ("tonic echo", &echo, None),
            ("ShouldRun", &coordinator, None),
            ("ShouldRun + api.authToken", &with_token, Some(TOKEN)),
        ] {
            // Warm up the connection and allocator before measuring.
            measure(url, token, concurrency, Duration::from_millis(300)).await;
            let (p50, p99, rate) =
                measure(url, token, concurrency, Duration::from_secs(secs)).await;
            println!("| {name} | {concurrency} | {p50:?} | {p99:?} | {rate:.0} |");
        }
    }
}
