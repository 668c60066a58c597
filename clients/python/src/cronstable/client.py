"""`Client`: calls a cronstable coordinator's executor API with a deadline on every call.

A coordinator that does not answer in time is not an error for ShouldRun: the client applies
the "no manager" rule itself (Leader jobs skip, PreferLeader and EveryNode jobs run), as the
cronstable shim does, so a dead coordinator never wedges a job runner. Every other refusal
(an unknown job, a malformed request) raises `CoordinatorError` with the coordinator's message.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Self, TypeVar

import grpc

from ._proto import cronstable_pb2 as pb
from ._proto import cronstable_pb2_grpc as pb_grpc
from .types import (
    Answer,
    ElectionStamp,
    Handoff,
    Instant,
    Instruction,
    Job,
    Kind,
    Policy,
    Reason,
    Registration,
    instruction_from_wire,
    no_manager_answer,
    to_ms,
)

log = logging.getLogger("cronstable")

# Codes that mean "no answer", not "the coordinator said no": the same set the shim treats as
# unreachable.
_UNREACHABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNKNOWN,
    }
)

F = TypeVar("F", bound=Callable[..., Any])


class CoordinatorError(Exception):
    """A call the coordinator refused or could not answer. `code` is the gRPC status code."""

    def __init__(self, method: str, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{method}: {code.name}: {message}")
        self.method = method
        self.code = code
        self.message = message

    @property
    def unreachable(self) -> bool:
        """True when the coordinator did not answer at all (in time)."""
        return self.code in _UNREACHABLE


def _channel_target(target: str) -> str:
    """grpc's target syntax from the shim's: `http://host:port` or `unix:/path`."""
    for prefix in ("http://", "grpc://"):
        if target.startswith(prefix):
            return target[len(prefix) :].rstrip("/")
    if target.startswith("https://"):
        raise ValueError(f"coordinator address {target!r}: TLS is not supported on api.listen")
    return target


class Client:
    """A connection to one coordinator (usually the one on the same node).

    `target` is `http://host:port`, `host:port` or `unix:/path`; `timeout` is the deadline in
    seconds for each unary call (ShouldRun is answered locally, so about a second is safe).
    `executor_id` must be stable for this process and unique per node; by default it is
    `python-<host>-<pid>`. `instance_id` is new for every Client: the coordinator lets one live
    instance hold an executor id, and refuses another (FAILED_PRECONDITION, naming the holder).
    `token` is the coordinator's `api.authToken`, sent with every call as
    `authorization: Bearer <token>`; a guarded coordinator refuses a call without it
    (UNAUTHENTICATED, raised as CoordinatorError: a refusal is not "unreachable", so the
    no-manager rule does not apply).
    """

    def __init__(
        self,
        target: str,
        timeout: float = 1.0,
        executor_id: str | None = None,
        token: str | None = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._metadata = (("authorization", f"Bearer {token.strip()}"),) if token else ()
        self.executor_id = executor_id or f"python-{socket.gethostname()}-{os.getpid()}"
        self.instance_id = secrets.token_hex(16)
        self._channel = grpc.insecure_channel(_channel_target(target))
        self._stub = pb_grpc.ExecutorStub(self._channel)
        self._policies: dict[str, Policy] = {}

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self._stub, method)(
                request, timeout=self.timeout, metadata=self._metadata
            )
        except grpc.RpcError as e:
            raise CoordinatorError(method, e.code(), e.details() or "") from None

    def register(self, jobs: Iterable[Job]) -> Registration:
        """Announces this executor's whole job set (replacing its previous one)."""
        jobs = list(jobs)
        r = self._call(
            "RegisterJobs",
            pb.RegisterJobsRequest(
                executor_id=self.executor_id,
                jobs=[j.to_wire() for j in jobs],
                instance_id=self.instance_id,
                pid=os.getpid(),
            ),
        )
        self._policies = {j.name: j.policy for j in jobs}
        return Registration(
            job_set_id=r.job_set_id,
            effective_policies={e.name: Policy(e.effective_policy) for e in r.jobs},
            election=ElectionStamp.from_wire(r.election),
            warnings=tuple(r.warnings),
        )

    def should_run(
        self,
        job: str,
        scheduled_at: Instant,
        kind: Kind = Kind.SCHEDULED,
        attempt: int = 1,
        policy: Policy | None = None,
    ) -> Answer:
        """Asks whether this node runs one firing. When the coordinator cannot be reached, the
        no-manager rule decides, from `policy` or else the policy the job was registered with
        (Leader if neither is known, the safe default: it never runs twice)."""
        request = pb.ShouldRunRequest(
            executor_id=self.executor_id,
            job=job,
            scheduled_at_ms=to_ms(scheduled_at),
            kind=kind.value,
            attempt=attempt,
            instance_id=self.instance_id,
        )
        try:
            return Answer.from_wire(self._call("ShouldRun", request))
        except CoordinatorError as e:
            if not e.unreachable:
                raise
            policy = policy or self._policies.get(job, Policy.LEADER)
            answer = no_manager_answer(policy, kind, str(e))
            log.warning(
                "job %s: no answer from the coordinator at %s (%s); no-manager rule: %s",
                job,
                self.target,
                e,
                answer.verdict.name,
            )
            return answer

    def _report(self, job: str, scheduled_at: Instant, kind: Kind, attempt: int, **event: Any):
        self._call(
            "ReportRun",
            pb.ReportRunRequest(
                executor_id=self.executor_id,
                job=job,
                scheduled_at_ms=to_ms(scheduled_at),
                kind=kind.value,
                attempt=attempt,
                **event,
            ),
        )

    def report_started(
        self,
        job: str,
        scheduled_at: Instant,
        started_at: Instant | None = None,
        pid: int | None = None,
        kind: Kind = Kind.SCHEDULED,
        attempt: int = 1,
    ) -> None:
        """Records that a run began (by default now, in this process)."""
        started = pb.RunStarted(
            started_at_ms=_now_ms() if started_at is None else to_ms(started_at),
            pid=os.getpid() if pid is None else pid,
        )
        self._report(job, scheduled_at, kind, attempt, started=started)

    def report_finished(
        self,
        job: str,
        scheduled_at: Instant,
        started_at: Instant,
        exit_code: int | None = 0,
        finished_at: Instant | None = None,
        signal: int | None = None,
        timed_out: bool = False,
        output_tail: str = "",
        kind: Kind = Kind.SCHEDULED,
        attempt: int = 1,
    ) -> None:
        """Records how a run ended: its exit code, or the signal that ended it."""
        start_ms = to_ms(started_at)
        end_ms = _now_ms() if finished_at is None else to_ms(finished_at)
        finished = pb.RunFinished(
            started_at_ms=start_ms,
            finished_at_ms=end_ms,
            exit_code=exit_code,
            signal=signal,
            timed_out=timed_out,
            output_tail=output_tail,
            duration_ms=max(0, end_ms - start_ms),
        )
        self._report(job, scheduled_at, kind, attempt, finished=finished)

    def report_skipped(
        self,
        job: str,
        scheduled_at: Instant,
        reason: Reason,
        message: str = "",
        kind: Kind = Kind.SCHEDULED,
        attempt: int = 1,
    ) -> None:
        """Records a skip this executor decided on its own."""
        skipped = pb.RunSkipped(reason=reason.value, message=message)
        self._report(job, scheduled_at, kind, attempt, skipped=skipped)

    def handoff(
        self,
        job: str,
        scheduled_at: Instant,
        remaining_attempts: int,
        next_attempt: int,
        next_attempt_at: Instant,
    ) -> Handoff:
        """Hands the rest of a retry sequence to the cluster, after a ShouldRun answer said
        another node now owns the job. `transferred` False means nobody will resume it (no
        shared store): the caller abandons the sequence and says so in its own log."""
        r = self._call(
            "Handoff",
            pb.HandoffRequest(
                executor_id=self.executor_id,
                job=job,
                scheduled_at_ms=to_ms(scheduled_at),
                remaining_attempts=remaining_attempts,
                next_attempt_at_ms=to_ms(next_attempt_at),
                next_attempt=next_attempt,
            ),
        )
        return Handoff(transferred=r.transferred, message=r.message)

    def watch(self, timeout: float | None = None) -> Watch:
        """Opens this executor's instruction stream (Hello first). `timeout` bounds the whole
        stream; None keeps it open until `Watch.close`."""
        call = self._stub.Watch(
            pb.WatchRequest(executor_id=self.executor_id, instance_id=self.instance_id),
            timeout=timeout,
            metadata=self._metadata,
        )
        return Watch(call)

    @contextlib.contextmanager
    def firing(
        self,
        job: str,
        scheduled_at: Instant,
        kind: Kind = Kind.SCHEDULED,
        attempt: int = 1,
        policy: Policy | None = None,
    ) -> Iterator[Firing]:
        """Asks about one firing; the body checks `.run`. When it runs, the start is reported
        on entry and the finish on exit: exit code 0, or 1 when the body raised (the exception
        propagates). A report the coordinator does not take is logged, never raised: the job
        runs (or ran) all the same."""
        answer = self.should_run(job, scheduled_at, kind, attempt, policy)
        firing = Firing(job, to_ms(scheduled_at), answer)
        if not answer.run:
            yield firing
            return
        started = _now_ms()
        self._best_effort(self.report_started, job, scheduled_at, started, None, kind, attempt)
        exit_code = 1
        try:
            yield firing
            exit_code = 0
        finally:
            self._best_effort(
                self.report_finished,
                job,
                scheduled_at,
                started,
                exit_code,
                kind=kind,
                attempt=attempt,
            )

    def _best_effort(self, report: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        try:
            report(*args, **kwargs)
        except CoordinatorError as e:
            log.warning("could not report to the coordinator at %s: %s", self.target, e)

    def job(self, name: str, policy: Policy | None = None) -> Callable[[F], F]:
        """Decorates a job function: calling it with `scheduled_at=` (epoch ms or an aware
        datetime; default the current minute, so every node names the same firing) runs it
        only when this node should, and returns its result, or None when the firing is
        skipped or deferred."""

        def wrap(fn: F) -> F:
            @functools.wraps(fn)
            def run(*args: Any, scheduled_at: Instant | None = None, **kwargs: Any) -> Any:
                at = _current_minute_ms() if scheduled_at is None else scheduled_at
                with self.firing(name, at, policy=policy) as f:
                    if f.run:
                        return fn(*args, **kwargs)
                    log.info(
                        "job %s skipped: %s (%s)", name, f.answer.reason.name, f.answer.message
                    )
                    return None

            return run  # type: ignore[return-value]

        return wrap


class Firing:
    """One firing inside `Client.firing`: its answer, and whether to run."""

    def __init__(self, job: str, scheduled_at_ms: int, answer: Answer) -> None:
        self.job = job
        self.scheduled_at_ms = scheduled_at_ms
        self.answer = answer

    @property
    def run(self) -> bool:
        return self.answer.run


class Watch:
    """An open instruction stream; iterate it for instructions, `close()` to hang up."""

    def __init__(self, call: Any) -> None:
        self._call = call

    def __iter__(self) -> Iterator[Instruction]:
        try:
            for wire in self._call:
                instruction = instruction_from_wire(wire)
                if instruction is not None:
                    yield instruction
        except grpc.RpcError as e:
            if e.code() is grpc.StatusCode.CANCELLED and self._call.cancelled():
                return
            raise CoordinatorError("Watch", e.code(), e.details() or "") from None

    def close(self) -> None:
        self._call.cancel()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _current_minute_ms() -> int:
    now = _now_ms()
    return now - now % 60_000
