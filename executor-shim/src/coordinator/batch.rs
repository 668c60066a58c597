//! Coalesces the shim's ShouldRun questions into `ShouldRunBatch` calls.
//!
//! When many jobs fall due at one instant, every firing task asks its question at the same
//! moment. Sent one by one, a thousand questions are a thousand HTTP/2 streams that the shim's
//! single thread has to write, flow-control and read back while it also starts processes; on a
//! loaded machine the last few hundred missed their one-second deadline, and their Leader jobs
//! were skipped under the no-manager rule although the coordinator was healthy (measured in
//! BENCHMARKS.md). So questions go through one queue: whatever is queued when the batcher runs
//! leaves as one call, and each firing gets its own answer (or its own error) back.
//!
//! A lone question is sent as a plain `ShouldRun`. A coordinator without `ShouldRunBatch`
//! (UNIMPLEMENTED, an older build) is asked one question at a time from then on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use cronstable_proto::v1 as pb;
use tokio::sync::{mpsc, oneshot};
use tonic::{Code, Status};

use crate::coordinator::call_error::CallError;
use crate::coordinator::channel::Client;

/// The most questions one call carries (the coordinator accepts up to 10,000).
const MAX_BATCH: usize = 2_000;

/// One queued question and where its answer goes.
struct Question {
    request: pb::ShouldRunRequest,
    reply: oneshot::Sender<Result<pb::ShouldRunResponse, CallError>>,
}

/// The shared question queue of one coordinator client. Cheap to clone; the batching task
/// starts with the first question.
#[derive(Debug, Clone, Default)]
pub struct Batcher {
    queue: Arc<OnceLock<mpsc::UnboundedSender<Question>>>,
    /// Set once the coordinator answered UNIMPLEMENTED to a batch.
    unbatched: Arc<AtomicBool>,
}

impl Batcher {
    /// Asks `request` on `client`, batched with whatever other questions are asked at the same
    /// moment. The answer comes within `deadline` or the call is `Unreachable`.
    pub async fn ask(
        &self,
        client: &Client,
        deadline: Duration,
        request: pb::ShouldRunRequest,
    ) -> Result<pb::ShouldRunResponse, CallError> {
        if self.unbatched.load(Ordering::Relaxed) {
            return ask_one(client.clone(), deadline, request).await;
        }
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            crate::spawn(batch_questions(
                rx,
                client.clone(),
                deadline,
                self.unbatched.clone(),
            ));
            tx
        });
        let (reply, answer) = oneshot::channel();
        if queue.send(Question { request, reply }).is_err() {
            return Err(CallError::Unreachable(
                "the shim's question queue has stopped".into(),
            ));
        }
        // The batch call is bounded by `deadline` itself; the margin only covers the hop
        // through the queue, so a wedged batch can never hold a firing past its deadline.
        match tokio::time::timeout(deadline + Duration::from_millis(200), answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(CallError::Unreachable(
                "the question was dropped unanswered".into(),
            )),
            Err(_) => Err(no_answer(deadline)),
        }
    }
}

fn no_answer(deadline: Duration) -> CallError {
    CallError::Unreachable(format!("no answer within {} ms", deadline.as_millis()))
}

/// Drains the queue: each wake-up takes every question queued by then and sends it as one call.
async fn batch_questions(
    mut queue: mpsc::UnboundedReceiver<Question>,
    client: Client,
    deadline: Duration,
    unbatched: Arc<AtomicBool>,
) {
    while let Some(first) = queue.recv().await {
        // Firings woken by the same timer tick are still queued to run: let them ask first.
        tokio::task::yield_now().await;
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(q) => batch.push(q),
                Err(_) => break,
            }
        }
        // Sent on its own task, so a slow call never holds up the next batch.
        crate::spawn(send(batch, client.clone(), deadline, unbatched.clone()));
    }
}

async fn ask_one(
    mut client: Client,
    deadline: Duration,
    request: pb::ShouldRunRequest,
) -> Result<pb::ShouldRunResponse, CallError> {
    let mut r = tonic::Request::new(request);
    r.set_timeout(deadline);
    match tokio::time::timeout(deadline, client.should_run(r)).await {
        Ok(Ok(answer)) => Ok(answer.into_inner()),
        Ok(Err(status)) => Err(CallError::from_status(status)),
        Err(_) => Err(no_answer(deadline)),
    }
}

async fn send(
    batch: Vec<Question>,
    mut client: Client,
    deadline: Duration,
    unbatched: Arc<AtomicBool>,
) {
    if batch.len() == 1 {
        let q = batch.into_iter().next().expect("one question");
        let _ = q.reply.send(ask_one(client, deadline, q.request).await);
        return;
    }
    let requests = batch.iter().map(|q| q.request.clone()).collect();
    let mut r = tonic::Request::new(pb::ShouldRunBatchRequest { requests });
    r.set_timeout(deadline);
    let outcome = tokio::time::timeout(deadline, client.should_run_batch(r)).await;
    match outcome {
        Ok(Ok(response)) => {
            let answers = response.into_inner().answers;
            if answers.len() != batch.len() {
                let message = format!(
                    "the coordinator answered {} of {} batched questions",
                    answers.len(),
                    batch.len()
                );
                for q in batch {
                    let _ = q.reply.send(Err(CallError::Refused {
                        code: Code::Internal,
                        message: message.clone(),
                    }));
                }
                return;
            }
            for (q, a) in batch.into_iter().zip(answers) {
                let _ = q.reply.send(one_answer(a));
            }
        }
        Ok(Err(status)) if status.code() == Code::Unimplemented => {
            tracing::info!("the coordinator has no ShouldRunBatch; asking one firing at a time");
            unbatched.store(true, Ordering::Relaxed);
            for q in batch {
                let client = client.clone();
                crate::spawn(async move {
                    let _ = q.reply.send(ask_one(client, deadline, q.request).await);
                });
            }
        }
        Ok(Err(status)) => {
            for q in batch {
                let _ = q.reply.send(Err(CallError::from_status(status.clone())));
            }
        }
        Err(_) => {
            for q in batch {
                let _ = q.reply.send(Err(no_answer(deadline)));
            }
        }
    }
}

/// One slot of a batch answer, as the plain ShouldRun call would have returned it.
fn one_answer(a: pb::ShouldRunBatchAnswer) -> Result<pb::ShouldRunResponse, CallError> {
    match a.result {
        Some(pb::should_run_batch_answer::Result::Answer(answer)) => Ok(answer),
        Some(pb::should_run_batch_answer::Result::Error(e)) => Err(CallError::from_status(
            Status::new(Code::from(e.code), e.message),
        )),
        None => Err(CallError::Refused {
            code: Code::Internal,
            message: "the coordinator sent an empty batch answer".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_error_keeps_its_code_so_not_found_still_re_registers() {
        let slot = |result| pb::ShouldRunBatchAnswer {
            result: Some(result),
        };
        let err = one_answer(slot(pb::should_run_batch_answer::Result::Error(
            pb::BatchError {
                code: Code::NotFound as i32,
                message: "no job named \"x\"".into(),
            },
        )))
        .unwrap_err();
        assert!(err.is_not_found(), "{err}");
        let ok = one_answer(slot(pb::should_run_batch_answer::Result::Answer(
            pb::ShouldRunResponse {
                node_name: "n1".into(),
                ..Default::default()
            },
        )))
        .unwrap();
        assert_eq!(ok.node_name, "n1");
        let empty = one_answer(pb::ShouldRunBatchAnswer { result: None }).unwrap_err();
        assert!(
            !empty.is_unreachable(),
            "an empty slot is a refusal: {empty}"
        );
    }
}
