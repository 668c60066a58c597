//! The gRPC adapter: the `cronstable.v1.Executor` service over [`CoordinatorState`].
//!
//! Every error is a gRPC status with a readable message: an unknown job is `NOT_FOUND` naming
//! the job, a malformed request is `INVALID_ARGUMENT` naming the field (MN-10).

use std::pin::Pin;

use cronstable_core::FiringKind;
use cronstable_core::Verdict;
use cronstable_proto::convert::{
    FieldError, firing_from_wire, job_from_wire, kind_from_wire, policy_to_wire, reason_from_wire,
    reason_to_wire, stamp_to_wire, verdict_to_wire,
};
use cronstable_proto::v1 as pb;
use cronstable_proto::v1::executor_server::{Executor, ExecutorServer};
use tokio_stream::Stream;
use tonic::service::{Interceptor, interceptor::InterceptedService};
use tonic::{Request, Response, Status};

use crate::clock::{Now, now_ms};
use crate::executors::{HeldByOther, Instance, is_config_executor};
use crate::jobs::RegisterError;
use crate::ledger::{Event, Record, RunEnd};
use crate::state::{CoordinatorState, Instruction, ManualStartError};
use crate::token::AuthTokens;

/// The most firings one `ShouldRunBatch` call may carry.
const MAX_BATCH: usize = 10_000;

/// How long a DEFER asks the executor to wait before asking again.
const DEFER_HINT_MS: u64 = 1_000;

/// The tonic service for [`CoordinatorState`], behind `api.authToken` (the latest on `tokens`).
pub fn service(
    state: CoordinatorState,
    tokens: AuthTokens,
) -> InterceptedService<ExecutorServer<ExecutorService>, ApiAuth> {
    let auth = ApiAuth {
        tokens,
        metrics: state.metrics.clone(),
    };
    ExecutorServer::with_interceptor(ExecutorService { state }, auth)
}

/// Checks `api.authToken` before any call reaches the service: a call without the token, or
/// with another one, is `UNAUTHENTICATED` with a reason, counted in
/// `cronstable_api_unauthenticated_total{api="grpc"}`. With no token configured every call
/// passes (the API is then as open as its listener; `validate-config` warns when that is
/// beyond this host).
#[derive(Debug, Clone)]
pub struct ApiAuth {
    tokens: AuthTokens,
    metrics: crate::observe::metrics::Metrics,
}

impl Interceptor for ApiAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let refusal = {
            let token = self.tokens.borrow();
            let Some(token) = token.as_ref() else {
                return Ok(request);
            };
            match request
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(crate::token::bearer)
            {
                Some(presented) if token.matches(presented) => return Ok(request),
                Some(_) => "the bearer token is not this coordinator's api.authToken",
                None => {
                    "this coordinator's API needs api.authToken: send the metadata \
                     'authorization: Bearer <token>'"
                }
            }
        };
        self.metrics.unauthenticated("grpc");
        Err(Status::unauthenticated(refusal))
    }
}

/// Implements `cronstable.v1.Executor`.
#[derive(Debug, Clone)]
pub struct ExecutorService {
    state: CoordinatorState,
}

/// Another live process holds the executor id: the caller must run nothing.
impl From<HeldByOther> for Status {
    fn from(held: HeldByOther) -> Self {
        Status::failed_precondition(held.to_string())
    }
}

fn invalid(e: FieldError) -> Status {
    Status::invalid_argument(e.to_string())
}

fn require(value: &str, field: &str) -> Result<(), Status> {
    if value.is_empty() {
        Err(Status::invalid_argument(format!(
            "{field}: must not be empty"
        )))
    } else {
        Ok(())
    }
}

fn unknown_job(job: &str) -> Status {
    Status::not_found(format!(
        "no job named {job:?} is registered on this node; register it with RegisterJobs first"
    ))
}

impl ExecutorService {
    /// A request's `job` field must name a registered job.
    fn require_registered(&self, job: &str) -> Result<(), Status> {
        require(job, "job")?;
        match self.state.registry.current().get(job) {
            Some(_) => Ok(()),
            None => Err(unknown_job(job)),
        }
    }

    /// A job an executor registered is decided only for that executor's live instance: a RUN
    /// answered to anyone else would be launched beside the executor's own run. Jobs from the
    /// coordinator's own `jobs:` file are run by crond through `cronstable-gate`, under the
    /// gate's executor id, so any executor may ask about those.
    fn require_executor_of(
        &self,
        job: &str,
        executor_id: &str,
        instance_id: &str,
    ) -> Result<(), Status> {
        let set = self.state.registry.current();
        let Some(registered) = set.get(job) else {
            return Err(unknown_job(job));
        };
        let owner = &registered.executor_id;
        if is_config_executor(owner) {
            return Ok(());
        }
        if owner != executor_id {
            return Err(Status::failed_precondition(format!(
                "job {job:?} is registered on this node by executor {owner:?}, so executor \
                 {executor_id:?} may not run it: a RUN answered to both would launch each \
                 firing twice"
            )));
        }
        self.state
            .executors
            .check(executor_id, instance_id, tokio::time::Instant::now())
            .map_err(Status::from)
    }
}

type InstructionStream = Pin<Box<dyn Stream<Item = Result<pb::Instruction, Status>> + Send>>;

#[tonic::async_trait]
impl Executor for ExecutorService {
    async fn register_jobs(
        &self,
        request: Request<pb::RegisterJobsRequest>,
    ) -> Result<Response<pb::RegisterJobsResponse>, Status> {
        let req = request.into_inner();
        require(&req.executor_id, "executor_id")?;
        let jobs = req
            .jobs
            .into_iter()
            .enumerate()
            .map(|(i, def)| job_from_wire(def, i))
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let count = jobs.len();
        let before = self.state.registry.current().id.clone();
        let asker = Instance {
            id: req.instance_id.clone(),
            pid: req.pid,
        };
        let claimed = self
            .state
            .executors
            .claim(
                &req.executor_id,
                asker.clone(),
                tokio::time::Instant::now(),
                |id| self.state.is_watching(id),
                || self.state.registry.register(&req.executor_id, jobs),
            )
            .map_err(|held| {
                tracing::warn!(
                    executor = req.executor_id,
                    holder = %held.holder,
                    refused = %held.asker,
                    "refused a second instance of an executor: {held}"
                );
                Status::from(held)
            })?;
        let (set, takeover) = claimed.map_err(|e| match e {
            RegisterError::TakenByOther { .. } => Status::already_exists(e.to_string()),
            other => Status::invalid_argument(other.to_string()),
        })?;
        // Its pace is judged from now: firings due before it registered were not its to ask.
        self.state.pace.registered(&req.executor_id, now_ms());
        if let Some(t) = takeover {
            tracing::warn!(
                executor = req.executor_id,
                previous = %t.previous,
                "{asker} takes over executor {:?} from {}, which is gone",
                req.executor_id,
                t.previous
            );
        }
        if set.id != before {
            tracing::info!(job_set_id = %set.id, jobs = set.jobs.len(), "job-set ID changed");
        }
        tracing::info!(
            executor = req.executor_id,
            jobs = count,
            "executor registered its jobs"
        );
        let election_on = !matches!(
            self.state.view.borrow().election,
            crate::cluster::Election::Off
        );
        let gossip = self.state.on_gossip();
        let no_claims = self.state.records_store().is_none();
        let now = crate::clock::now_utc();
        let (mut jobs, mut warnings) = (Vec::new(), Vec::new());
        for j in set
            .jobs
            .values()
            .filter(|j| j.executor_id == req.executor_id)
        {
            jobs.push(pb::EffectiveJob {
                name: j.spec.name.clone(),
                // With election off the policy is inert: every node runs every job.
                effective_policy: if election_on {
                    policy_to_wire(j.spec.cluster_policy) as i32
                } else {
                    pb::ClusterPolicy::EveryNode as i32
                },
            });
            let idle = cronstable_core::schedule::Schedule::parse(
                &j.spec.schedule,
                j.spec.timezone.as_deref(),
            )
            .ok()
            .and_then(|s| s.idle_warning(now));
            if let Some(why) = idle {
                warnings.push(format!(
                    "job {:?}: {why}; it is registered and will not run",
                    j.spec.name
                ));
            }
            if j.spec.catch_up.is_some() && election_on && no_claims && !gossip {
                warnings.push(format!(
                    "job {:?}: catchUp has no effect on this backend: it keeps no firing \
                     claims and exchanges no run summaries, so nothing tells a missed instant \
                     from one that ran (catch-up works on etcd and filesystem, and best effort \
                     on gossip)",
                    j.spec.name
                ));
            }
        }
        if set.id != before {
            for w in &warnings {
                tracing::warn!(executor = req.executor_id, "{w}");
            }
        }
        Ok(Response::new(pb::RegisterJobsResponse {
            job_set_id: set.id.to_string(),
            jobs,
            election: Some(stamp_to_wire(self.state.election_stamp())),
            warnings,
        }))
    }

    async fn should_run(
        &self,
        request: Request<pb::ShouldRunRequest>,
    ) -> Result<Response<pb::ShouldRunResponse>, Status> {
        let req = request.into_inner();
        require(&req.job, "job")?;
        let firing = firing_from_wire(&req.job, req.scheduled_at_ms, req.kind, req.attempt)
            .map_err(invalid)?;
        self.require_executor_of(&req.job, &req.executor_id, &req.instance_id)?;
        let answer = self
            .state
            .should_run_as(&firing, Now::read(), &req.executor_id)
            .await
            .ok_or_else(|| unknown_job(&req.job))?;
        Ok(Response::new(answer_to_wire(
            answer,
            self.state.election_stamp(),
        )))
    }

    async fn should_run_batch(
        &self,
        request: Request<pb::ShouldRunBatchRequest>,
    ) -> Result<Response<pb::ShouldRunBatchResponse>, Status> {
        let requests = request.into_inner().requests;
        if requests.len() > MAX_BATCH {
            return Err(Status::invalid_argument(format!(
                "requests: {} firings in one batch; at most {MAX_BATCH} are accepted, split the \
                 batch",
                requests.len()
            )));
        }
        let mut answers = Vec::with_capacity(requests.len());
        // Decided one by one through ShouldRun itself, so a batched firing is decided and
        // recorded exactly as a single one would be.
        for req in requests {
            let result = match self.should_run(Request::new(req)).await {
                Ok(answer) => pb::should_run_batch_answer::Result::Answer(answer.into_inner()),
                Err(status) => pb::should_run_batch_answer::Result::Error(pb::BatchError {
                    code: status.code() as i32,
                    message: status.message().to_owned(),
                }),
            };
            answers.push(pb::ShouldRunBatchAnswer {
                result: Some(result),
            });
        }
        Ok(Response::new(pb::ShouldRunBatchResponse { answers }))
    }

    async fn report_run(
        &self,
        request: Request<pb::ReportRunRequest>,
    ) -> Result<Response<pb::ReportRunResponse>, Status> {
        let req = request.into_inner();
        self.require_registered(&req.job)?;
        let kind = kind_from_wire(req.kind, req.attempt.max(1)).map_err(invalid)?;
        let event = match req.event {
            Some(pb::report_run_request::Event::Started(s)) => Event::Started {
                at_ms: s.started_at_ms,
                pid: s.pid,
            },
            Some(pb::report_run_request::Event::Finished(f)) => Event::Finished(RunEnd {
                started_at_ms: f.started_at_ms,
                finished_at_ms: f.finished_at_ms,
                duration_ms: f.duration_ms,
                exit_code: f.exit_code,
                signal: f.signal,
                timed_out: f.timed_out,
                output_tail: f.output_tail,
            }),
            // A reason this coordinator does not know (a newer executor) is kept as unknown
            // rather than refused, so mixed versions lose no records.
            Some(pb::report_run_request::Event::Skipped(s)) => Event::Skipped {
                reason: reason_from_wire(s.reason),
                message: s.message,
            },
            None => {
                return Err(Status::invalid_argument(
                    "event: one of started, finished or skipped is required",
                ));
            }
        };
        log_report(&req.job, req.scheduled_at_ms, &event);
        self.state
            .launch_reported(
                (&req.job, req.scheduled_at_ms, kind),
                &req.executor_id,
                &event,
            )
            .await;
        // A skip the executor decided itself (its previous run still going, too late) is a
        // firing it kept up with, as much as a question is.
        if let Some(job) = self.state.registry.current().get(&req.job) {
            self.state
                .pace
                .heard(&job.executor_id, req.scheduled_at_ms, now_ms());
        }
        self.state.record(Record {
            job: req.job,
            scheduled_at_ms: req.scheduled_at_ms,
            kind,
            attempt: req.attempt.max(1),
            node: self.state.node_name(),
            recorded_at_ms: now_ms(),
            event,
        });
        Ok(Response::new(pb::ReportRunResponse {}))
    }

    async fn handoff(
        &self,
        request: Request<pb::HandoffRequest>,
    ) -> Result<Response<pb::HandoffResponse>, Status> {
        let req = request.into_inner();
        self.require_registered(&req.job)?;
        let stays_local = self
            .state
            .registry
            .current()
            .get(&req.job)
            .is_some_and(|j| {
                j.spec.cluster_policy == cronstable_core::ClusterPolicy::EveryNode
                    || j.spec.is_reboot()
            });
        let (transferred, message) = if stays_local {
            // RTY-06, checked here too so a client other than the shim cannot move one.
            (
                false,
                "EveryNode and @reboot retries never move between nodes, so the sequence is \
                 abandoned"
                    .to_owned(),
            )
        } else {
            let ask = crate::handoff::resume::HandoffAsk {
                job: req.job.clone(),
                scheduled_at_ms: req.scheduled_at_ms,
                next_attempt: req.next_attempt,
                remaining_attempts: req.remaining_attempts,
                next_attempt_at_ms: req.next_attempt_at_ms,
            };
            crate::handoff::resume::write_handoff(&self.state, &ask, now_ms()).await
        };
        self.state.record(Record {
            job: req.job.clone(),
            scheduled_at_ms: req.scheduled_at_ms,
            kind: FiringKind::Retry {
                attempt: req.next_attempt.max(2),
            },
            attempt: req.next_attempt.max(2),
            node: self.state.node_name(),
            recorded_at_ms: now_ms(),
            event: Event::HandedOff {
                remaining_attempts: req.remaining_attempts,
                transferred,
            },
        });
        Ok(Response::new(pb::HandoffResponse {
            transferred,
            message,
        }))
    }

    async fn start_job(
        &self,
        request: Request<pb::StartJobRequest>,
    ) -> Result<Response<pb::StartJobResponse>, Status> {
        let req = request.into_inner();
        require(&req.job, "job")?;
        match self.state.start_manually(&req.job, now_ms()) {
            Ok(request_id) => Ok(Response::new(pb::StartJobResponse { request_id })),
            Err(e @ ManualStartError::UnknownJob(_)) => Err(Status::not_found(e.to_string())),
            Err(e @ ManualStartError::ExecutorNotWatching { .. }) => {
                Err(Status::unavailable(e.to_string()))
            }
        }
    }

    type WatchStream = InstructionStream;

    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let req = request.into_inner();
        require(&req.executor_id, "executor_id")?;
        self.state.executors.check(
            &req.executor_id,
            &req.instance_id,
            tokio::time::Instant::now(),
        )?;
        let mut instructions = self.state.open_watch(&req.executor_id);
        self.state
            .executors
            .watch_opened(&req.executor_id, &req.instance_id);
        let mut job_sets = self.state.registry.subscribe();
        let hello = pb::Instruction {
            kind: Some(pb::instruction::Kind::Hello(pb::Hello {
                node_name: self.state.node_name(),
                job_set_id: job_sets.borrow_and_update().id.to_string(),
                election: Some(stamp_to_wire(self.state.election_stamp())),
            })),
        };
        let executor = req.executor_id;
        tracing::info!(executor, "executor opened its instruction stream");
        let stream = async_stream(hello, move |tx| async move {
            loop {
                let next = tokio::select! {
                    // The executor hung up: drop our end so the next manual start for it gets
                    // "not connected" instead of vanishing into an orphaned channel.
                    _ = tx.closed() => break,
                    i = instructions.recv() => match i {
                        Some(i) => i,
                        None => break, // replaced by a newer stream of the same executor
                    },
                    changed = job_sets.changed() => {
                        if changed.is_err() { break; }
                        let id = job_sets.borrow_and_update().id.to_string();
                        Instruction::JobSetChanged { job_set_id: id }
                    }
                };
                if tx.send(Ok(instruction_to_wire(next))).await.is_err() {
                    break; // the executor hung up
                }
            }
        });
        Ok(Response::new(stream))
    }
}

/// The wire form of the gate's answer, with the coordinator's election stamp.
pub fn answer_to_wire(
    answer: crate::state::Answer,
    election: cronstable_core::mode::ElectionStamp,
) -> pb::ShouldRunResponse {
    let decision = answer.decision;
    pb::ShouldRunResponse {
        verdict: verdict_to_wire(decision.verdict) as i32,
        reason: reason_to_wire(decision.reason) as i32,
        message: answer.message,
        owner: answer.owner.unwrap_or_default(),
        fence: answer.fence,
        retry_after_ms: if decision.verdict == Verdict::Defer {
            DEFER_HINT_MS
        } else {
            0
        },
        firing_id: answer.firing_id,
        node_name: answer.node,
        election: Some(stamp_to_wire(election)),
    }
}

/// A stream that yields `first`, then whatever `body` sends, until `body` returns.
fn async_stream<F, Fut>(first: pb::Instruction, body: F) -> InstructionStream
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<pb::Instruction, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let fut = body(tx.clone());
    crate::spawn(async move {
        if tx.send(Ok(first)).await.is_ok() {
            fut.await;
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

fn instruction_to_wire(i: Instruction) -> pb::Instruction {
    let kind = match i {
        Instruction::ManualStart {
            job,
            requested_at_ms,
            request_id,
        } => pb::instruction::Kind::ManualStart(pb::ManualStart {
            job,
            requested_at_ms,
            request_id,
        }),
        Instruction::JobSetChanged { job_set_id } => {
            pb::instruction::Kind::JobSetChanged(pb::JobSetChanged { job_set_id })
        }
        Instruction::Goodbye { election } => pb::instruction::Kind::Goodbye(pb::Goodbye {
            election: Some(stamp_to_wire(election)),
        }),
        Instruction::RunDeferred {
            job,
            scheduled_at_ms,
        } => pb::instruction::Kind::RunDeferred(pb::RunDeferred {
            job,
            scheduled_at_ms,
        }),
        Instruction::CatchUp {
            job,
            scheduled_at_ms,
        } => pb::instruction::Kind::CatchUp(pb::CatchUpRun {
            job,
            scheduled_at_ms,
        }),
        Instruction::ResumeRetry {
            job,
            scheduled_at_ms,
            next_attempt,
            remaining_attempts,
            not_before_ms,
        } => pb::instruction::Kind::ResumeRetry(pb::ResumeRetry {
            job,
            scheduled_at_ms,
            next_attempt,
            remaining_attempts,
            not_before_ms,
        }),
    };
    pb::Instruction { kind: Some(kind) }
}

fn log_report(job: &str, scheduled_at_ms: i64, event: &Event) {
    match event {
        Event::Started { pid, .. } => tracing::info!(job, scheduled_at_ms, pid, "run started"),
        Event::Finished(RunEnd {
            exit_code,
            signal,
            timed_out,
            duration_ms,
            ..
        }) => tracing::info!(
            job,
            scheduled_at_ms,
            exit_code = ?exit_code,
            signal = ?signal,
            timed_out,
            duration_ms,
            "run finished"
        ),
        Event::Skipped { reason, message } => {
            tracing::info!(
                job,
                scheduled_at_ms,
                reason = reason.map_or("unknown", |r| r.code()),
                message,
                "firing skipped by executor"
            )
        }
        Event::Decided { .. } | Event::HandedOff { .. } => {}
    }
}
