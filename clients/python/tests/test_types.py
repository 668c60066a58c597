"""Unit tests of the client's own conversions, no coordinator needed: instants, unknown enum
values, and the no-manager table the client applies by itself."""

from __future__ import annotations

import datetime as dt

import pytest

from cronstable import ElectionMode, ElectionStamp, Kind, Policy, Reason, Verdict
from cronstable._proto import cronstable_pb2 as pb
from cronstable.types import Answer, no_manager_answer, to_ms


def test_aware_datetimes_convert_to_exact_milliseconds() -> None:
    at = dt.datetime(2026, 12, 3, 10, 0, 0, 123000, tzinfo=dt.UTC)
    assert to_ms(at) == 1_796_292_000_123
    assert to_ms(at.astimezone(dt.timezone(dt.timedelta(hours=5)))) == 1_796_292_000_123
    assert to_ms(42) == 42


def test_naive_datetimes_and_other_types_are_refused() -> None:
    with pytest.raises(ValueError, match="no timezone"):
        to_ms(dt.datetime(2026, 12, 3, 10, 0))
    with pytest.raises(TypeError):
        to_ms(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        to_ms(True)


def test_an_unknown_reason_reads_as_unspecified() -> None:
    wire = pb.ShouldRunResponse(verdict=pb.VERDICT_RUN, reason=999, message="from the future")
    answer = Answer.from_wire(wire)
    assert (answer.verdict, answer.reason, answer.fence) == (Verdict.RUN, Reason.UNSPECIFIED, None)


@pytest.mark.parametrize(
    ("policy", "kind", "verdict", "reason"),
    [
        (Policy.LEADER, Kind.SCHEDULED, Verdict.SKIP, Reason.COORDINATOR_UNREACHABLE),
        (Policy.UNSPECIFIED, Kind.SCHEDULED, Verdict.SKIP, Reason.COORDINATOR_UNREACHABLE),
        (Policy.LEADER, Kind.RETRY, Verdict.SKIP, Reason.COORDINATOR_UNREACHABLE),
        (Policy.PREFER_LEADER, Kind.REBOOT, Verdict.RUN, Reason.NO_MANAGER),
        (Policy.EVERY_NODE, Kind.SCHEDULED, Verdict.RUN, Reason.EVERY_NODE),
        (Policy.LEADER, Kind.MANUAL, Verdict.RUN, Reason.MANUAL),
    ],
)
def test_the_no_manager_table(policy: Policy, kind: Kind, verdict: Verdict, reason: Reason) -> None:
    answer = no_manager_answer(policy, kind, "no answer")
    assert (answer.verdict, answer.reason, answer.local) == (verdict, reason, True)


def test_an_older_coordinators_missing_stamp_or_a_future_mode_reads_as_unknown() -> None:
    unknown = ElectionStamp(ElectionMode.UNSPECIFIED, 0)
    assert Answer.from_wire(pb.ShouldRunResponse(verdict=pb.VERDICT_RUN)).election == unknown
    future = pb.ElectionStamp(mode=7, generation=5)
    assert ElectionStamp.from_wire(future) == ElectionStamp(ElectionMode.UNSPECIFIED, 5)
    off = pb.ElectionStamp(mode=pb.ELECTION_MODE_OFF, generation=5)
    assert ElectionStamp.from_wire(off) == ElectionStamp(ElectionMode.OFF, 5)
