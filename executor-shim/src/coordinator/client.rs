//! The shim's gRPC client for its coordinator.
//!
//! Every call has a deadline. A coordinator that cannot be reached in time is not an error the
//! shim stops on: the caller applies the seed's "no manager" row (Leader skips, PreferLeader and
//! EveryNode run), so a dead coordinator never wedges the shim.

use std::sync::Arc;
use std::time::Duration;

use cronstable_core::mode::ElectionStamp;
use cronstable_core::{FiringKind, JobSpec, Reason, Verdict};
use cronstable_proto::convert::{
    job_to_wire, kind_to_wire, reason_from_wire, reason_to_wire, stamp_from_wire, verdict_from_wire,
};
use cronstable_proto::v1 as pb;
use tonic::Status;

pub use crate::coordinator::channel::AddressError;
use crate::coordinator::channel::Client;
use crate::coordinator::token::ApiToken;

pub use crate::coordinator::call_error::CallError;

/// What the coordinator answered to a registration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registration {
    /// The job-set ID the coordinator computed.
    pub job_set_id: String,
    /// The coordinator's election mode (unknown from an older coordinator).
    pub election: ElectionStamp,
}

/// The client deadline of a `Handoff` call: the coordinator's 3 s store write, plus 1 s.
pub const HANDOFF_DEADLINE: Duration = Duration::from_secs(4);
/// A ShouldRun answer, in domain terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Run, skip or defer.
    pub verdict: Verdict,
    /// Why; `None` if the coordinator sent a reason this shim does not know.
    pub reason: Option<Reason>,
    /// A readable sentence.
    pub message: String,
    /// The node that owns the firing, when known.
    pub owner: String,
    /// The fencing token, on backends that have one.
    pub fence: Option<String>,
    /// When to ask again, for a deferral.
    pub retry_after: Duration,
    /// The cluster-wide firing key.
    pub firing_id: String,
    /// The coordinator's election mode when it answered (unknown from an older coordinator).
    pub election: ElectionStamp,
    /// The answering coordinator's node name (empty when the shim decided alone).
    pub node_name: String,
    /// Who decided: the coordinator, or the shim alone.
    pub decided_by: DecidedBy,
}

/// Who made a firing's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecidedBy {
    /// The coordinator answered `ShouldRun`.
    Coordinator,
    /// The shim decided alone: no coordinator answer (its memory or the no-manager rule), or a
    /// job that left the job file while it was being asked about.
    Shim,
}

impl Answer {
    /// A decision the shim made alone, for a firing with the cluster-wide key `firing_id`.
    pub fn decided_here(
        verdict: Verdict,
        reason: Reason,
        message: String,
        firing_id: String,
        retry_after: Duration,
    ) -> Self {
        Self {
            verdict,
            reason: Some(reason),
            message,
            owner: String::new(),
            fence: None,
            retry_after,
            firing_id,
            election: ElectionStamp::default(),
            node_name: String::new(),
            decided_by: DecidedBy::Shim,
        }
    }

    /// The coordinator's answer as the shim reads it off the wire: anything this shim does
    /// not understand is treated as "do not run", and a deferral is asked again after at least
    /// 100 ms.
    pub fn from_wire(r: pb::ShouldRunResponse) -> Self {
        Self {
            verdict: verdict_from_wire(r.verdict).unwrap_or(Verdict::Skip),
            reason: reason_from_wire(r.reason),
            message: r.message,
            owner: r.owner,
            fence: r.fence,
            retry_after: Duration::from_millis(r.retry_after_ms.max(100)),
            firing_id: r.firing_id,
            node_name: r.node_name,
            election: stamp_from_wire(r.election.as_ref()),
            decided_by: DecidedBy::Coordinator,
        }
    }

    /// The shim decided alone, without a coordinator's answer.
    pub fn is_local(&self) -> bool {
        self.decided_by == DecidedBy::Shim
    }

    /// Why, as the shim acts on it: a reason newer than this shim counts as "no manager".
    pub fn why(&self) -> Reason {
        self.reason.unwrap_or(Reason::NoManager)
    }
}

/// A handle on the coordinator. Cheap to clone; clones share one lazily-connected channel.
#[derive(Debug, Clone)]
pub struct Coordinator {
    client: Client,
    /// Coalesces ShouldRun questions asked at the same moment (see [`crate::coordinator::batch`]).
    questions: crate::coordinator::batch::Batcher,
    executor_id: String,
    /// This process's instance id: one live instance holds an executor id on a node.
    instance_id: Arc<str>,
    deadline: Duration,
}

impl Coordinator {
    /// A client for `addr` (`http://host:port` or `unix:/path`) that sends `token` with every
    /// call. Connects lazily, so a coordinator that starts after the shim is picked up on the
    /// first call that reaches it.
    pub fn new(
        addr: &str,
        executor_id: String,
        deadline: Duration,
        token: Option<ApiToken>,
    ) -> Result<Self, AddressError> {
        Ok(Self {
            client: super::channel::connect(addr, deadline, token)?,
            questions: crate::coordinator::batch::Batcher::default(),
            executor_id,
            instance_id: cronstable_proto::new_instance_id().into(),
            deadline,
        })
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.set_timeout(self.deadline);
        r
    }

    async fn bounded<F, T>(&self, call: F) -> Result<T, CallError>
    where
        F: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        self.bounded_by(self.deadline, call).await
    }

    async fn bounded_by<F, T>(&self, deadline: Duration, call: F) -> Result<T, CallError>
    where
        F: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        // The request timeout covers the server side; this one also covers connecting.
        match tokio::time::timeout(deadline, call).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(CallError::from_status(s)),
            Err(_) => Err(CallError::Unreachable(format!(
                "no answer within {} ms",
                deadline.as_millis()
            ))),
        }
    }

    /// Registers the whole job set; returns the coordinator's job-set ID.
    pub async fn register(&self, jobs: &[JobSpec]) -> Result<Registration, CallError> {
        let req = pb::RegisterJobsRequest {
            executor_id: self.executor_id.clone(),
            jobs: jobs.iter().map(job_to_wire).collect(),
            instance_id: self.instance_id.to_string(),
            pid: std::process::id(),
        };
        let mut c = self.client.clone();
        let r = self.bounded(c.register_jobs(self.request(req))).await?;
        Ok(Registration {
            election: stamp_from_wire(r.election.as_ref()),
            job_set_id: r.job_set_id,
        })
    }

    /// Asks whether to run one firing; batched with the questions other firings ask at the
    /// same moment.
    pub async fn should_run(
        &self,
        job: &str,
        scheduled_at_ms: i64,
        kind: FiringKind,
        attempt: u32,
    ) -> Result<Answer, CallError> {
        let req = pb::ShouldRunRequest {
            executor_id: self.executor_id.clone(),
            job: job.to_owned(),
            scheduled_at_ms,
            kind: kind_to_wire(kind) as i32,
            attempt,
            instance_id: self.instance_id.to_string(),
        };
        let r = self.questions.ask(&self.client, self.deadline, req).await?;
        Ok(Answer::from_wire(r))
    }

    /// Reports a skip the shim decided itself. A report the coordinator does not take is
    /// logged at debug and dropped: the skip stands either way.
    pub async fn report_skip_logged(
        &self,
        job: &str,
        at_ms: i64,
        kind: FiringKind,
        reason: Reason,
        msg: String,
    ) {
        if let Err(e) = self
            .report_skip(job, at_ms, kind, kind.attempt(), reason, msg)
            .await
        {
            tracing::debug!(job, error = %e, "could not report a skip");
        }
    }

    /// Reports a run event; errors are returned for logging only.
    pub async fn report(
        &self,
        job: &str,
        scheduled_at_ms: i64,
        kind: FiringKind,
        attempt: u32,
        event: pb::report_run_request::Event,
    ) -> Result<(), CallError> {
        let req = pb::ReportRunRequest {
            executor_id: self.executor_id.clone(),
            job: job.to_owned(),
            scheduled_at_ms,
            attempt,
            kind: kind_to_wire(kind) as i32,
            event: Some(event),
        };
        let mut c = self.client.clone();
        self.bounded(c.report_run(self.request(req)))
            .await
            .map(|_| ())
    }

    /// Reports a firing this shim skipped on its own.
    pub async fn report_skip(
        &self,
        job: &str,
        scheduled_at_ms: i64,
        kind: FiringKind,
        attempt: u32,
        reason: Reason,
        message: String,
    ) -> Result<(), CallError> {
        let event = pb::report_run_request::Event::Skipped(pb::RunSkipped {
            reason: reason_to_wire(reason) as i32,
            message,
        });
        self.report(job, scheduled_at_ms, kind, attempt, event)
            .await
    }

    /// Hands the rest of a retry sequence to the cluster; returns whether it was transferred.
    pub async fn handoff(
        &self,
        job: &str,
        scheduled_at_ms: i64,
        next_attempt: u32,
        remaining_attempts: u32,
        next_attempt_at_ms: i64,
    ) -> Result<pb::HandoffResponse, CallError> {
        let req = pb::HandoffRequest {
            executor_id: self.executor_id.clone(),
            job: job.to_owned(),
            scheduled_at_ms,
            remaining_attempts,
            next_attempt_at_ms,
            next_attempt,
        };
        let mut c = self.client.clone();
        // The coordinator may take up to 3 s to make the record durable: a shorter client
        // deadline would abandon (and record a cancellation for) a sequence the new owner then
        // runs. The ask timeout still bounds it when it is longer.
        let deadline = self.deadline.max(HANDOFF_DEADLINE);
        let mut request = tonic::Request::new(req);
        request.set_timeout(deadline);
        self.bounded_by(deadline, c.handoff(request)).await
    }

    /// Opens the instruction stream. Only the open is bounded by the deadline; the stream
    /// itself lives until either side closes it.
    pub async fn watch(&self) -> Result<tonic::Streaming<pb::Instruction>, CallError> {
        let req = pb::WatchRequest {
            executor_id: self.executor_id.clone(),
            instance_id: self.instance_id.to_string(),
        };
        let mut c = self.client.clone();
        match tokio::time::timeout(self.deadline, c.watch(tonic::Request::new(req))).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(CallError::from_status(s)),
            Err(_) => Err(CallError::Unreachable("watch did not open in time".into())),
        }
    }
}
