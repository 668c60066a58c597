"""The client's own vocabulary: enums, job definitions, answers and instructions.

These mirror the wire types of cronstable.v1 but are plain Python values, so callers never
handle protobuf messages or their integer enums. Converting to and from the wire lives here
too, next to the types it converts.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
from collections.abc import Mapping

from ._proto import cronstable_pb2 as pb


class Verdict(enum.Enum):
    """What the coordinator says about one firing."""

    UNSPECIFIED = pb.VERDICT_UNSPECIFIED
    RUN = pb.VERDICT_RUN
    SKIP = pb.VERDICT_SKIP
    DEFER = pb.VERDICT_DEFER


class Reason(enum.Enum):
    """Why; a value this client does not know yet reads as UNSPECIFIED (the proto's rule)."""

    UNSPECIFIED = pb.REASON_UNSPECIFIED
    ELECTION_OFF = pb.REASON_ELECTION_OFF
    MANUAL = pb.REASON_MANUAL
    EVERY_NODE = pb.REASON_EVERY_NODE
    NO_MANAGER = pb.REASON_NO_MANAGER
    CONFLICT = pb.REASON_CONFLICT
    NO_QUORUM = pb.REASON_NO_QUORUM
    LEADER = pb.REASON_LEADER
    NOT_LEADER = pb.REASON_NOT_LEADER
    OWNER = pb.REASON_OWNER
    NOT_OWNER = pb.REASON_NOT_OWNER
    CONVERGENCE_HOLD = pb.REASON_CONVERGENCE_HOLD
    COORDINATOR_UNREACHABLE = pb.REASON_COORDINATOR_UNREACHABLE
    CONCURRENCY_POLICY = pb.REASON_CONCURRENCY_POLICY
    TOO_LATE = pb.REASON_TOO_LATE
    ALREADY_RAN = pb.REASON_ALREADY_RAN
    STARTING = pb.REASON_STARTING
    STARTING_DEADLINE = pb.REASON_STARTING_DEADLINE
    NOT_CAUGHT_UP = pb.REASON_NOT_CAUGHT_UP
    NOT_LAUNCHED = pb.REASON_NOT_LAUNCHED


class Policy(enum.Enum):
    """A job's cluster policy."""

    UNSPECIFIED = pb.CLUSTER_POLICY_UNSPECIFIED
    LEADER = pb.CLUSTER_POLICY_LEADER
    PREFER_LEADER = pb.CLUSTER_POLICY_PREFER_LEADER
    EVERY_NODE = pb.CLUSTER_POLICY_EVERY_NODE


class Kind(enum.Enum):
    """What kind of firing a question is about. UNSPECIFIED is refused by the coordinator."""

    UNSPECIFIED = pb.FIRING_KIND_UNSPECIFIED
    SCHEDULED = pb.FIRING_KIND_SCHEDULED
    REBOOT = pb.FIRING_KIND_REBOOT
    RETRY = pb.FIRING_KIND_RETRY
    MANUAL = pb.FIRING_KIND_MANUAL
    CATCH_UP = pb.FIRING_KIND_CATCH_UP


class CatchUp(enum.Enum):
    """Whether a missed instant of a Leader job still runs later (lease backends only)."""

    UNSPECIFIED = pb.CATCH_UP_UNSPECIFIED
    NONE = pb.CATCH_UP_NONE
    LATEST = pb.CATCH_UP_LATEST
    ALL = pb.CATCH_UP_ALL


class ElectionMode(enum.Enum):
    """Whether the coordinator elects, as it states it. UNSPECIFIED means unknown: an older
    coordinator that does not say, or a stopping one that cannot vouch for its next start.
    Only OFF lets an executor keep running Leader jobs while the coordinator is away."""

    UNSPECIFIED = pb.ELECTION_MODE_UNSPECIFIED
    OFF = pb.ELECTION_MODE_OFF
    ON = pb.ELECTION_MODE_ON


def _known(enum_type: type[enum.Enum], value: int) -> enum.Enum:
    try:
        return enum_type(value)
    except ValueError:
        return enum_type.UNSPECIFIED  # type: ignore[attr-defined]


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)

Instant = int | _dt.datetime
"""A point in time: Unix epoch milliseconds, or a timezone-aware datetime."""


def to_ms(at: Instant) -> int:
    """Epoch milliseconds for `at`; a naive datetime is refused rather than guessed at."""
    if isinstance(at, _dt.datetime):
        if at.tzinfo is None:
            raise ValueError(
                f"scheduled time {at.isoformat()} has no timezone; pass an aware datetime "
                "(e.g. datetime.now(timezone.utc)) or epoch milliseconds"
            )
        # Integer arithmetic: a float timestamp times 1000 can land a millisecond short.
        return (at - _EPOCH) // _dt.timedelta(milliseconds=1)
    if isinstance(at, bool) or not isinstance(at, int):
        raise TypeError(f"expected epoch milliseconds or a datetime, got {at!r}")
    return at


@dataclasses.dataclass(frozen=True)
class Job:
    """One job as an executor announces it with `Client.register`."""

    name: str
    schedule: str
    command: str
    policy: Policy = Policy.LEADER
    timezone: str = ""
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)
    timeout_ms: int = 0
    retries: int = 0
    # How late a scheduled firing may still be asked about and start; 0 for the default (90 s).
    starting_deadline_ms: int = 0
    # Whether an instant nobody ran still runs on the job's owner while it is at most
    # catch_up_window_ms old (LATEST: the newest one; ALL: each, up to catch_up_limit, 0 for 10).
    catch_up: CatchUp = CatchUp.UNSPECIFIED
    catch_up_window_ms: int = 0
    catch_up_limit: int = 0
    # What every firing is expected to do, judged once for the cluster on the job's owner: a
    # run succeeded within expect_complete_within_ms of the instant (else "missed"), and none
    # ran longer than expect_max_duration_ms (else "too_long"); 0 for none.
    expect_complete_within_ms: int = 0
    expect_max_duration_ms: int = 0

    def to_wire(self) -> pb.JobDefinition:
        return pb.JobDefinition(
            name=self.name,
            schedule=self.schedule,
            command=self.command,
            cluster_policy=self.policy.value,
            timezone=self.timezone,
            environment=dict(self.environment),
            timeout_ms=self.timeout_ms,
            retries=self.retries,
            starting_deadline_ms=self.starting_deadline_ms,
            catch_up=self.catch_up.value,
            catch_up_window_ms=self.catch_up_window_ms,
            catch_up_limit=self.catch_up_limit,
            expect_complete_within_ms=self.expect_complete_within_ms,
            expect_max_duration_ms=self.expect_max_duration_ms,
        )


@dataclasses.dataclass(frozen=True)
class ElectionStamp:
    """The coordinator's election mode and the generation it was said in. Generations grow
    with every coordinator start and every change of mode (its farewell included): apply stamps
    in generation order, so a late answer from a process that has moved on changes nothing."""

    mode: ElectionMode = ElectionMode.UNSPECIFIED
    generation: int = 0

    @staticmethod
    def from_wire(s: pb.ElectionStamp) -> ElectionStamp:
        return ElectionStamp(_known(ElectionMode, s.mode), s.generation)  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class Registration:
    """RegisterJobs' answer: the job-set ID, each of this executor's effective policies, the
    coordinator's election mode, and one warning per job whose schedule will not fire for years
    or ever (the job is registered all the same)."""

    job_set_id: str
    effective_policies: Mapping[str, Policy]
    election: ElectionStamp = ElectionStamp()
    warnings: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Handoff:
    """Handoff's answer: whether another node will resume the retry sequence."""

    transferred: bool
    message: str


@dataclasses.dataclass(frozen=True)
class Answer:
    """A ShouldRun answer. `local` is True when the client decided it itself, by the
    no-manager rule, because the coordinator did not answer in time."""

    verdict: Verdict
    reason: Reason
    message: str
    owner: str = ""
    fence: str | None = None
    retry_after_ms: int = 0
    firing_id: str = ""
    node_name: str = ""
    local: bool = False
    election: ElectionStamp = ElectionStamp()

    @property
    def run(self) -> bool:
        return self.verdict is Verdict.RUN

    @staticmethod
    def from_wire(r: pb.ShouldRunResponse) -> Answer:
        return Answer(
            verdict=_known(Verdict, r.verdict),  # type: ignore[arg-type]
            reason=_known(Reason, r.reason),  # type: ignore[arg-type]
            message=r.message,
            owner=r.owner,
            fence=r.fence if r.HasField("fence") else None,
            retry_after_ms=r.retry_after_ms,
            firing_id=r.firing_id,
            node_name=r.node_name,
            election=ElectionStamp.from_wire(r.election),
        )


def no_manager_answer(policy: Policy, kind: Kind, why: str) -> Answer:
    """The decision table's "no manager" row, applied by the client when the coordinator cannot
    be reached: manual starts and EveryNode jobs run, PreferLeader jobs run, Leader jobs skip.
    This is the same rule the cronstable shim applies."""
    if kind is Kind.MANUAL:
        verdict, reason = Verdict.RUN, Reason.MANUAL
    elif policy is Policy.EVERY_NODE:
        verdict, reason = Verdict.RUN, Reason.EVERY_NODE
    elif policy is Policy.PREFER_LEADER:
        verdict, reason = Verdict.RUN, Reason.NO_MANAGER
    else:
        verdict, reason = Verdict.SKIP, Reason.COORDINATOR_UNREACHABLE
    return Answer(verdict=verdict, reason=reason, message=why, retry_after_ms=1000, local=True)


@dataclasses.dataclass(frozen=True)
class Hello:
    """First instruction on every Watch stream."""

    node_name: str
    job_set_id: str
    election: ElectionStamp = ElectionStamp()


@dataclasses.dataclass(frozen=True)
class Goodbye:
    """The last instruction of a coordinator that stops gracefully: the election mode an
    executor may keep remembering while it is away (OFF only when its next start keeps election
    off; UNSPECIFIED otherwise)."""

    election: ElectionStamp


@dataclasses.dataclass(frozen=True)
class ManualStart:
    """Run `job` now, ungated: an operator asked for it."""

    job: str
    requested_at_ms: int
    request_id: str


@dataclasses.dataclass(frozen=True)
class RunDeferred:
    """Run a deferred @reboot one-shot now."""

    job: str
    scheduled_at_ms: int


@dataclasses.dataclass(frozen=True)
class CatchUpRun:
    """Run a missed instant nobody ran: ask should_run with Kind.CATCH_UP and this instant
    first (the answer claims it), and run it marked as a catch-up."""

    job: str
    scheduled_at_ms: int


@dataclasses.dataclass(frozen=True)
class ResumeRetry:
    """Continue a retry sequence another node handed off."""

    job: str
    scheduled_at_ms: int
    next_attempt: int
    remaining_attempts: int
    not_before_ms: int


@dataclasses.dataclass(frozen=True)
class JobSetChanged:
    """The coordinator's job-set ID changed."""

    job_set_id: str


Instruction = Hello | ManualStart | RunDeferred | CatchUpRun | ResumeRetry | JobSetChanged | Goodbye


def instruction_from_wire(i: pb.Instruction) -> Instruction | None:
    """The instruction, or None for a kind this client does not know (skipped by callers)."""
    which = i.WhichOneof("kind")
    if which == "hello":
        return Hello(
            i.hello.node_name, i.hello.job_set_id, ElectionStamp.from_wire(i.hello.election)
        )
    if which == "manual_start":
        m = i.manual_start
        return ManualStart(m.job, m.requested_at_ms, m.request_id)
    if which == "run_deferred":
        return RunDeferred(i.run_deferred.job, i.run_deferred.scheduled_at_ms)
    if which == "catch_up":
        return CatchUpRun(i.catch_up.job, i.catch_up.scheduled_at_ms)
    if which == "resume_retry":
        r = i.resume_retry
        return ResumeRetry(
            r.job, r.scheduled_at_ms, r.next_attempt, r.remaining_attempts, r.not_before_ms
        )
    if which == "job_set_changed":
        return JobSetChanged(i.job_set_changed.job_set_id)
    if which == "goodbye":
        return Goodbye(ElectionStamp.from_wire(i.goodbye.election))
    return None
