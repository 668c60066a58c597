from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClusterPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLUSTER_POLICY_UNSPECIFIED: _ClassVar[ClusterPolicy]
    CLUSTER_POLICY_LEADER: _ClassVar[ClusterPolicy]
    CLUSTER_POLICY_PREFER_LEADER: _ClassVar[ClusterPolicy]
    CLUSTER_POLICY_EVERY_NODE: _ClassVar[ClusterPolicy]

class FiringKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FIRING_KIND_UNSPECIFIED: _ClassVar[FiringKind]
    FIRING_KIND_SCHEDULED: _ClassVar[FiringKind]
    FIRING_KIND_REBOOT: _ClassVar[FiringKind]
    FIRING_KIND_RETRY: _ClassVar[FiringKind]
    FIRING_KIND_MANUAL: _ClassVar[FiringKind]
    FIRING_KIND_CATCH_UP: _ClassVar[FiringKind]

class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_UNSPECIFIED: _ClassVar[Verdict]
    VERDICT_RUN: _ClassVar[Verdict]
    VERDICT_SKIP: _ClassVar[Verdict]
    VERDICT_DEFER: _ClassVar[Verdict]

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASON_UNSPECIFIED: _ClassVar[Reason]
    REASON_ELECTION_OFF: _ClassVar[Reason]
    REASON_MANUAL: _ClassVar[Reason]
    REASON_EVERY_NODE: _ClassVar[Reason]
    REASON_NO_MANAGER: _ClassVar[Reason]
    REASON_CONFLICT: _ClassVar[Reason]
    REASON_NO_QUORUM: _ClassVar[Reason]
    REASON_LEADER: _ClassVar[Reason]
    REASON_NOT_LEADER: _ClassVar[Reason]
    REASON_OWNER: _ClassVar[Reason]
    REASON_NOT_OWNER: _ClassVar[Reason]
    REASON_CONVERGENCE_HOLD: _ClassVar[Reason]
    REASON_COORDINATOR_UNREACHABLE: _ClassVar[Reason]
    REASON_CONCURRENCY_POLICY: _ClassVar[Reason]
    REASON_TOO_LATE: _ClassVar[Reason]
    REASON_ALREADY_RAN: _ClassVar[Reason]
    REASON_STARTING: _ClassVar[Reason]
    REASON_STARTING_DEADLINE: _ClassVar[Reason]
    REASON_NOT_CAUGHT_UP: _ClassVar[Reason]
    REASON_NOT_LAUNCHED: _ClassVar[Reason]

class CatchUp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CATCH_UP_UNSPECIFIED: _ClassVar[CatchUp]
    CATCH_UP_NONE: _ClassVar[CatchUp]
    CATCH_UP_LATEST: _ClassVar[CatchUp]
    CATCH_UP_ALL: _ClassVar[CatchUp]

class ConcurrencyPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONCURRENCY_POLICY_UNSPECIFIED: _ClassVar[ConcurrencyPolicy]
    CONCURRENCY_POLICY_ALLOW: _ClassVar[ConcurrencyPolicy]
    CONCURRENCY_POLICY_FORBID: _ClassVar[ConcurrencyPolicy]
    CONCURRENCY_POLICY_REPLACE: _ClassVar[ConcurrencyPolicy]

class ElectionMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ELECTION_MODE_UNSPECIFIED: _ClassVar[ElectionMode]
    ELECTION_MODE_OFF: _ClassVar[ElectionMode]
    ELECTION_MODE_ON: _ClassVar[ElectionMode]
CLUSTER_POLICY_UNSPECIFIED: ClusterPolicy
CLUSTER_POLICY_LEADER: ClusterPolicy
CLUSTER_POLICY_PREFER_LEADER: ClusterPolicy
CLUSTER_POLICY_EVERY_NODE: ClusterPolicy
FIRING_KIND_UNSPECIFIED: FiringKind
FIRING_KIND_SCHEDULED: FiringKind
FIRING_KIND_REBOOT: FiringKind
FIRING_KIND_RETRY: FiringKind
FIRING_KIND_MANUAL: FiringKind
FIRING_KIND_CATCH_UP: FiringKind
VERDICT_UNSPECIFIED: Verdict
VERDICT_RUN: Verdict
VERDICT_SKIP: Verdict
VERDICT_DEFER: Verdict
REASON_UNSPECIFIED: Reason
REASON_ELECTION_OFF: Reason
REASON_MANUAL: Reason
REASON_EVERY_NODE: Reason
REASON_NO_MANAGER: Reason
REASON_CONFLICT: Reason
REASON_NO_QUORUM: Reason
REASON_LEADER: Reason
REASON_NOT_LEADER: Reason
REASON_OWNER: Reason
REASON_NOT_OWNER: Reason
REASON_CONVERGENCE_HOLD: Reason
REASON_COORDINATOR_UNREACHABLE: Reason
REASON_CONCURRENCY_POLICY: Reason
REASON_TOO_LATE: Reason
REASON_ALREADY_RAN: Reason
REASON_STARTING: Reason
REASON_STARTING_DEADLINE: Reason
REASON_NOT_CAUGHT_UP: Reason
REASON_NOT_LAUNCHED: Reason
CATCH_UP_UNSPECIFIED: CatchUp
CATCH_UP_NONE: CatchUp
CATCH_UP_LATEST: CatchUp
CATCH_UP_ALL: CatchUp
CONCURRENCY_POLICY_UNSPECIFIED: ConcurrencyPolicy
CONCURRENCY_POLICY_ALLOW: ConcurrencyPolicy
CONCURRENCY_POLICY_FORBID: ConcurrencyPolicy
CONCURRENCY_POLICY_REPLACE: ConcurrencyPolicy
ELECTION_MODE_UNSPECIFIED: ElectionMode
ELECTION_MODE_OFF: ElectionMode
ELECTION_MODE_ON: ElectionMode

class JobDefinition(_message.Message):
    __slots__ = ("name", "schedule", "command", "stdin", "cluster_policy", "timezone", "environment", "timeout_ms", "retries", "retry_backoff_ms", "retry_backoff_max_ms", "concurrency_policy", "starting_deadline_ms", "catch_up", "catch_up_window_ms", "catch_up_limit", "expect_complete_within_ms", "expect_max_duration_ms")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_POLICY_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_MAX_MS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_POLICY_FIELD_NUMBER: _ClassVar[int]
    STARTING_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_WINDOW_MS_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_LIMIT_FIELD_NUMBER: _ClassVar[int]
    EXPECT_COMPLETE_WITHIN_MS_FIELD_NUMBER: _ClassVar[int]
    EXPECT_MAX_DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    schedule: str
    command: str
    stdin: str
    cluster_policy: ClusterPolicy
    timezone: str
    environment: _containers.ScalarMap[str, str]
    timeout_ms: int
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    concurrency_policy: ConcurrencyPolicy
    starting_deadline_ms: int
    catch_up: CatchUp
    catch_up_window_ms: int
    catch_up_limit: int
    expect_complete_within_ms: int
    expect_max_duration_ms: int
    def __init__(self, name: _Optional[str] = ..., schedule: _Optional[str] = ..., command: _Optional[str] = ..., stdin: _Optional[str] = ..., cluster_policy: _Optional[_Union[ClusterPolicy, str]] = ..., timezone: _Optional[str] = ..., environment: _Optional[_Mapping[str, str]] = ..., timeout_ms: _Optional[int] = ..., retries: _Optional[int] = ..., retry_backoff_ms: _Optional[int] = ..., retry_backoff_max_ms: _Optional[int] = ..., concurrency_policy: _Optional[_Union[ConcurrencyPolicy, str]] = ..., starting_deadline_ms: _Optional[int] = ..., catch_up: _Optional[_Union[CatchUp, str]] = ..., catch_up_window_ms: _Optional[int] = ..., catch_up_limit: _Optional[int] = ..., expect_complete_within_ms: _Optional[int] = ..., expect_max_duration_ms: _Optional[int] = ...) -> None: ...

class RegisterJobsRequest(_message.Message):
    __slots__ = ("executor_id", "jobs", "instance_id", "pid")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    jobs: _containers.RepeatedCompositeFieldContainer[JobDefinition]
    instance_id: str
    pid: int
    def __init__(self, executor_id: _Optional[str] = ..., jobs: _Optional[_Iterable[_Union[JobDefinition, _Mapping]]] = ..., instance_id: _Optional[str] = ..., pid: _Optional[int] = ...) -> None: ...

class RegisterJobsResponse(_message.Message):
    __slots__ = ("job_set_id", "jobs", "election", "warnings")
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    job_set_id: str
    jobs: _containers.RepeatedCompositeFieldContainer[EffectiveJob]
    election: ElectionStamp
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_set_id: _Optional[str] = ..., jobs: _Optional[_Iterable[_Union[EffectiveJob, _Mapping]]] = ..., election: _Optional[_Union[ElectionStamp, _Mapping]] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class ElectionStamp(_message.Message):
    __slots__ = ("mode", "generation")
    MODE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    mode: ElectionMode
    generation: int
    def __init__(self, mode: _Optional[_Union[ElectionMode, str]] = ..., generation: _Optional[int] = ...) -> None: ...

class EffectiveJob(_message.Message):
    __slots__ = ("name", "effective_policy")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_POLICY_FIELD_NUMBER: _ClassVar[int]
    name: str
    effective_policy: ClusterPolicy
    def __init__(self, name: _Optional[str] = ..., effective_policy: _Optional[_Union[ClusterPolicy, str]] = ...) -> None: ...

class ShouldRunRequest(_message.Message):
    __slots__ = ("executor_id", "job", "scheduled_at_ms", "kind", "attempt", "instance_id")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    job: str
    scheduled_at_ms: int
    kind: FiringKind
    attempt: int
    instance_id: str
    def __init__(self, executor_id: _Optional[str] = ..., job: _Optional[str] = ..., scheduled_at_ms: _Optional[int] = ..., kind: _Optional[_Union[FiringKind, str]] = ..., attempt: _Optional[int] = ..., instance_id: _Optional[str] = ...) -> None: ...

class ShouldRunResponse(_message.Message):
    __slots__ = ("verdict", "reason", "message", "owner", "fence", "retry_after_ms", "firing_id", "node_name", "election")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    FIRING_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    verdict: Verdict
    reason: Reason
    message: str
    owner: str
    fence: str
    retry_after_ms: int
    firing_id: str
    node_name: str
    election: ElectionStamp
    def __init__(self, verdict: _Optional[_Union[Verdict, str]] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., owner: _Optional[str] = ..., fence: _Optional[str] = ..., retry_after_ms: _Optional[int] = ..., firing_id: _Optional[str] = ..., node_name: _Optional[str] = ..., election: _Optional[_Union[ElectionStamp, _Mapping]] = ...) -> None: ...

class ShouldRunBatchRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[ShouldRunRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[ShouldRunRequest, _Mapping]]] = ...) -> None: ...

class ShouldRunBatchResponse(_message.Message):
    __slots__ = ("answers",)
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[ShouldRunBatchAnswer]
    def __init__(self, answers: _Optional[_Iterable[_Union[ShouldRunBatchAnswer, _Mapping]]] = ...) -> None: ...

class ShouldRunBatchAnswer(_message.Message):
    __slots__ = ("answer", "error")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    answer: ShouldRunResponse
    error: BatchError
    def __init__(self, answer: _Optional[_Union[ShouldRunResponse, _Mapping]] = ..., error: _Optional[_Union[BatchError, _Mapping]] = ...) -> None: ...

class BatchError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ReportRunRequest(_message.Message):
    __slots__ = ("executor_id", "job", "scheduled_at_ms", "attempt", "kind", "started", "finished", "skipped")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    job: str
    scheduled_at_ms: int
    attempt: int
    kind: FiringKind
    started: RunStarted
    finished: RunFinished
    skipped: RunSkipped
    def __init__(self, executor_id: _Optional[str] = ..., job: _Optional[str] = ..., scheduled_at_ms: _Optional[int] = ..., attempt: _Optional[int] = ..., kind: _Optional[_Union[FiringKind, str]] = ..., started: _Optional[_Union[RunStarted, _Mapping]] = ..., finished: _Optional[_Union[RunFinished, _Mapping]] = ..., skipped: _Optional[_Union[RunSkipped, _Mapping]] = ...) -> None: ...

class RunStarted(_message.Message):
    __slots__ = ("started_at_ms", "pid")
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    started_at_ms: int
    pid: int
    def __init__(self, started_at_ms: _Optional[int] = ..., pid: _Optional[int] = ...) -> None: ...

class RunFinished(_message.Message):
    __slots__ = ("started_at_ms", "finished_at_ms", "exit_code", "signal", "timed_out", "output_tail", "duration_ms")
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    started_at_ms: int
    finished_at_ms: int
    exit_code: int
    signal: int
    timed_out: bool
    output_tail: str
    duration_ms: int
    def __init__(self, started_at_ms: _Optional[int] = ..., finished_at_ms: _Optional[int] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., timed_out: _Optional[bool] = ..., output_tail: _Optional[str] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class RunSkipped(_message.Message):
    __slots__ = ("reason", "message")
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    reason: Reason
    message: str
    def __init__(self, reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ...) -> None: ...

class ReportRunResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HandoffRequest(_message.Message):
    __slots__ = ("executor_id", "job", "scheduled_at_ms", "remaining_attempts", "next_attempt_at_ms", "next_attempt")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REMAINING_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    job: str
    scheduled_at_ms: int
    remaining_attempts: int
    next_attempt_at_ms: int
    next_attempt: int
    def __init__(self, executor_id: _Optional[str] = ..., job: _Optional[str] = ..., scheduled_at_ms: _Optional[int] = ..., remaining_attempts: _Optional[int] = ..., next_attempt_at_ms: _Optional[int] = ..., next_attempt: _Optional[int] = ...) -> None: ...

class HandoffResponse(_message.Message):
    __slots__ = ("transferred", "message")
    TRANSFERRED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    transferred: bool
    message: str
    def __init__(self, transferred: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("executor_id", "instance_id")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    instance_id: str
    def __init__(self, executor_id: _Optional[str] = ..., instance_id: _Optional[str] = ...) -> None: ...

class Instruction(_message.Message):
    __slots__ = ("hello", "manual_start", "run_deferred", "resume_retry", "job_set_changed", "goodbye", "catch_up")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    MANUAL_START_FIELD_NUMBER: _ClassVar[int]
    RUN_DEFERRED_FIELD_NUMBER: _ClassVar[int]
    RESUME_RETRY_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_CHANGED_FIELD_NUMBER: _ClassVar[int]
    GOODBYE_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    manual_start: ManualStart
    run_deferred: RunDeferred
    resume_retry: ResumeRetry
    job_set_changed: JobSetChanged
    goodbye: Goodbye
    catch_up: CatchUpRun
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., manual_start: _Optional[_Union[ManualStart, _Mapping]] = ..., run_deferred: _Optional[_Union[RunDeferred, _Mapping]] = ..., resume_retry: _Optional[_Union[ResumeRetry, _Mapping]] = ..., job_set_changed: _Optional[_Union[JobSetChanged, _Mapping]] = ..., goodbye: _Optional[_Union[Goodbye, _Mapping]] = ..., catch_up: _Optional[_Union[CatchUpRun, _Mapping]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("node_name", "job_set_id", "election")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    job_set_id: str
    election: ElectionStamp
    def __init__(self, node_name: _Optional[str] = ..., job_set_id: _Optional[str] = ..., election: _Optional[_Union[ElectionStamp, _Mapping]] = ...) -> None: ...

class Goodbye(_message.Message):
    __slots__ = ("election",)
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    election: ElectionStamp
    def __init__(self, election: _Optional[_Union[ElectionStamp, _Mapping]] = ...) -> None: ...

class ManualStart(_message.Message):
    __slots__ = ("job", "requested_at_ms", "request_id")
    JOB_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job: str
    requested_at_ms: int
    request_id: str
    def __init__(self, job: _Optional[str] = ..., requested_at_ms: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class RunDeferred(_message.Message):
    __slots__ = ("job", "scheduled_at_ms")
    JOB_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    job: str
    scheduled_at_ms: int
    def __init__(self, job: _Optional[str] = ..., scheduled_at_ms: _Optional[int] = ...) -> None: ...

class CatchUpRun(_message.Message):
    __slots__ = ("job", "scheduled_at_ms")
    JOB_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    job: str
    scheduled_at_ms: int
    def __init__(self, job: _Optional[str] = ..., scheduled_at_ms: _Optional[int] = ...) -> None: ...

class ResumeRetry(_message.Message):
    __slots__ = ("job", "scheduled_at_ms", "next_attempt", "remaining_attempts", "not_before_ms")
    JOB_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REMAINING_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    job: str
    scheduled_at_ms: int
    next_attempt: int
    remaining_attempts: int
    not_before_ms: int
    def __init__(self, job: _Optional[str] = ..., scheduled_at_ms: _Optional[int] = ..., next_attempt: _Optional[int] = ..., remaining_attempts: _Optional[int] = ..., not_before_ms: _Optional[int] = ...) -> None: ...

class JobSetChanged(_message.Message):
    __slots__ = ("job_set_id",)
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    job_set_id: str
    def __init__(self, job_set_id: _Optional[str] = ...) -> None: ...

class StartJobRequest(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: str
    def __init__(self, job: _Optional[str] = ...) -> None: ...

class StartJobResponse(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    def __init__(self, request_id: _Optional[str] = ...) -> None: ...
