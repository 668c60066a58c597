"""The conformance cases of clients/conformance/cases.yaml, each under its id, against live
coordinator processes; and the check that every listed case is implemented here."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import grpc
import pytest
import yaml

from cronstable import (
    CatchUp,
    Client,
    CoordinatorError,
    ElectionMode,
    Goodbye,
    Hello,
    Job,
    JobSetChanged,
    Kind,
    ManualStart,
    Policy,
    Reason,
    Verdict,
)
from harness import Coordinator, free_port, logged_node_name, wait_for

CASES = Path(__file__).resolve().parents[2] / "conformance" / "cases.yaml"

# A whole-minute instant, as a cron firing would have: an hour ahead, so no question about it is
# ever past the job's start deadline (a scheduled firing asked about more than 90 s after its
# instant is skipped as late), however long the suite runs.
AT = (int(time.time()) // 60 + 60) * 60_000


def unique(prefix: str) -> str:
    """Job and executor names unique to one test, so cases sharing a coordinator do not meet."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def client_for(c: Coordinator, timeout: float = 2.0) -> Client:
    return Client(c.api, timeout=timeout, executor_id=unique("py-executor"))


def test_every_case_in_cases_yaml_is_implemented() -> None:
    listed = {case["id"] for case in yaml.safe_load(CASES.read_text())["cases"]}
    implemented = {
        name[len("test_") : len("test_CONF_NN")].replace("_", "-")
        for name in globals()
        if re.match(r"test_CONF_\d\d_", name)
    }
    assert listed, f"no cases in {CASES}"
    assert listed - implemented == set(), (
        f"cases without a Python test: {sorted(listed - implemented)}"
    )
    assert implemented - listed == set(), (
        f"tests for unlisted cases: {sorted(implemented - listed)}"
    )


def test_CONF_01_should_run_on_election_off_is_run(election_off: Coordinator) -> None:
    client = client_for(election_off)
    job = unique("conf01")
    client.register([Job(job, "* * * * *", "true", policy=Policy.LEADER)])
    answer = client.should_run(job, AT)
    assert (answer.verdict, answer.reason) == (Verdict.RUN, Reason.ELECTION_OFF), answer
    assert answer.message
    assert answer.node_name == logged_node_name(election_off)
    assert re.fullmatch(r"v1:[0-9a-f]{32}", answer.firing_id), answer.firing_id
    assert answer.fence is None
    assert not answer.local


def test_CONF_02_unknown_job_is_not_found(election_off: Coordinator) -> None:
    client = client_for(election_off)
    job = unique("no-such-job")
    with pytest.raises(CoordinatorError) as e:
        client.should_run(job, AT)
    assert e.value.code is grpc.StatusCode.NOT_FOUND
    assert job in e.value.message


def test_CONF_03_unspecified_kind_is_invalid_argument(election_off: Coordinator) -> None:
    client = client_for(election_off)
    job = unique("conf03")
    client.register([Job(job, "* * * * *", "true")])
    with pytest.raises(CoordinatorError) as e:
        client.should_run(job, AT, kind=Kind.UNSPECIFIED)
    assert e.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "kind" in e.value.message
    with pytest.raises(CoordinatorError) as e:
        client.should_run(job, AT, kind=Kind.RETRY, attempt=1)
    assert e.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "attempt" in e.value.message


def test_CONF_04_register_returns_the_job_set_id(election_off: Coordinator) -> None:
    client = client_for(election_off)
    leader, prefer = unique("conf04-leader"), unique("conf04-prefer")
    jobs = [
        Job(leader, "0 * * * *", "true", policy=Policy.LEADER),
        Job(prefer, "@daily", "true", policy=Policy.PREFER_LEADER),
    ]
    registration = client.register(jobs)
    assert re.fullmatch(r"v1:[0-9a-f]{64}", registration.job_set_id), registration
    status, body = election_off.http("GET", "/job-set-id") or (0, {})
    assert status == 200 and body["job_set_id"] == registration.job_set_id, body
    assert registration.effective_policies == {
        leader: Policy.EVERY_NODE,
        prefer: Policy.EVERY_NODE,
    }
    assert client.register(jobs).job_set_id == registration.job_set_id


def test_CONF_05_reports_are_accepted(election_off: Coordinator) -> None:
    client = client_for(election_off)
    job = unique("conf05")
    client.register([Job(job, "* * * * *", "true")])
    started = int(time.time() * 1000)
    client.report_started(job, AT, started_at=started, pid=4242)
    client.report_finished(job, AT, started_at=started, exit_code=3)
    election_off.wait_log(f'job="{job}"')
    wait_for(
        "the start in the log",
        lambda: election_off.log_lines(job, "run started", "pid=4242") or None,
    )
    wait_for(
        "the finish in the log",
        lambda: election_off.log_lines(job, "run finished", "exit_code=Some(3)") or None,
    )
    with pytest.raises(CoordinatorError) as e:
        client.report_started(unique("unregistered"), AT)
    assert e.value.code is grpc.StatusCode.NOT_FOUND


def test_CONF_06_unreachable_coordinator_applies_the_no_manager_rule() -> None:
    client = Client(f"http://127.0.0.1:{free_port()}", timeout=0.5)
    # Register cannot reach it either; the policies then come from the caller.
    with pytest.raises(CoordinatorError) as e:
        client.register([Job("leader-job", "* * * * *", "true")])
    assert e.value.unreachable
    cases = [
        ("leader-job", Policy.LEADER, Kind.SCHEDULED, Verdict.SKIP, Reason.COORDINATOR_UNREACHABLE),
        ("prefer-job", Policy.PREFER_LEADER, Kind.SCHEDULED, Verdict.RUN, Reason.NO_MANAGER),
        ("every-job", Policy.EVERY_NODE, Kind.SCHEDULED, Verdict.RUN, Reason.EVERY_NODE),
        ("leader-job", Policy.LEADER, Kind.MANUAL, Verdict.RUN, Reason.MANUAL),
    ]
    for job, policy, kind, verdict, reason in cases:
        began = time.monotonic()
        answer = client.should_run(job, AT, kind=kind, policy=policy)
        assert time.monotonic() - began < client.timeout + 1.0, f"{job} took too long"
        assert (answer.verdict, answer.reason) == (verdict, reason), (job, kind, answer)
        assert answer.local, answer
    # Without a policy the job is treated as Leader: the safe default.
    assert client.should_run("unknown-policy", AT).verdict is Verdict.SKIP


def test_CONF_07_watch_starts_with_hello(election_off: Coordinator) -> None:
    client = client_for(election_off)
    job = unique("conf07")
    registration = client.register([Job(job, "* * * * *", "true")])
    with client.watch(timeout=10) as stream:
        first = next(iter(stream))
    assert isinstance(first, Hello), first
    assert (first.node_name, first.job_set_id) == (
        logged_node_name(election_off),
        registration.job_set_id,
    ), first
    assert first.election == registration.election, first


def test_CONF_08_manual_start_arrives_on_watch(election_off: Coordinator) -> None:
    client = client_for(election_off)
    job = unique("conf08")
    client.register([Job(job, "@yearly", "true")])
    with client.watch(timeout=20) as stream:
        instructions = iter(stream)
        assert isinstance(next(instructions), Hello)
        status, body = election_off.http("POST", f"/jobs/{job}/start") or (0, {})
        assert status == 202, body
        for instruction in instructions:
            if isinstance(instruction, JobSetChanged):
                continue
            assert instruction == ManualStart(
                job, instruction.requested_at_ms, body["request_id"]
            ), instruction
            assert instruction.requested_at_ms > 0
            break
        else:
            pytest.fail("the stream ended before the manual start")


def settled_answers(leader: Coordinator, follower: Coordinator, job: str):
    """Both nodes' answers for one firing, once the follower has seen who leads (right after an
    election it may still be reading the store)."""
    clients = [client_for(leader), client_for(follower)]
    for c in clients:
        c.register([Job(job, "* * * * *", "true", policy=Policy.LEADER)])

    def both():
        answers = [c.should_run(job, AT) for c in clients]
        return answers if answers[1].owner == leader.name else None

    return clients, wait_for("the follower to see the leader", both)


def test_CONF_09_lease_leader_runs_fenced_and_the_other_skips(
    lease_pair: tuple[Coordinator, Coordinator],
) -> None:
    leader, follower = lease_pair
    _, (lead, other) = settled_answers(leader, follower, unique("conf09"))
    assert (lead.verdict, lead.reason) == (Verdict.RUN, Reason.LEADER), lead
    assert re.fullmatch(r"fence:\d+", lead.fence or ""), lead
    assert lead.owner == leader.name and lead.node_name == leader.name, lead
    assert (other.verdict, other.reason) == (Verdict.SKIP, Reason.NOT_LEADER), other
    assert other.owner == leader.name and other.fence is None, other
    assert lead.firing_id == other.firing_id


def test_CONF_10_firing_wrapper_runs_only_on_run_and_reports(
    election_off: Coordinator, lease_pair: tuple[Coordinator, Coordinator]
) -> None:
    client = client_for(election_off)
    ok, failing = unique("conf10-ok"), unique("conf10-fail")
    client.register([Job(ok, "* * * * *", "true"), Job(failing, "* * * * *", "true")])
    ran = []
    with client.firing(ok, AT) as f:
        assert f.run
        ran.append(ok)
    with pytest.raises(RuntimeError, match="the job failed"), client.firing(failing, AT) as f:
        assert f.run
        ran.append(failing)
        raise RuntimeError("the job failed")
    assert ran == [ok, failing]
    for job, code in ((ok, 0), (failing, 1)):
        started = f'job="{job}"', "run started"
        finished = f'job="{job}"', "run finished", f"exit_code=Some({code})"
        wait_for(f"{job}'s start", lambda s=started: election_off.log_lines(*s) or None)
        wait_for(f"{job}'s finish", lambda f=finished: election_off.log_lines(*f) or None)

    # The decorator form, on the lease pair's follower: it must not run the body.
    leader, follower = lease_pair
    job = unique("conf10-skip")
    (_, on_follower), _ = settled_answers(leader, follower, job)

    @on_follower.job(job)
    def body() -> str:
        ran.append(job)
        return "ran"

    assert body(scheduled_at=AT) is None
    assert job not in ran
    assert follower.log_lines(f'job="{job}"', "run started") == []


def test_CONF_11_no_quorum_skips_leader_firings_and_defers_retries(
    lonely_gossip: Coordinator,
) -> None:
    client = client_for(lonely_gossip)
    leader, every = unique("conf11-leader"), unique("conf11-every")
    registration = client.register(
        [
            Job(leader, "* * * * *", "true"),
            Job(every, "* * * * *", "true", policy=Policy.EVERY_NODE),
        ]
    )
    assert registration.effective_policies == {leader: Policy.LEADER, every: Policy.EVERY_NODE}
    asked = [
        (leader, Kind.SCHEDULED, 1, Verdict.SKIP, Reason.NO_QUORUM),
        (leader, Kind.RETRY, 2, Verdict.DEFER, Reason.NO_QUORUM),
        (leader, Kind.MANUAL, 1, Verdict.RUN, Reason.MANUAL),
        (every, Kind.SCHEDULED, 1, Verdict.RUN, Reason.EVERY_NODE),
    ]
    for job, kind, attempt, verdict, reason in asked:
        answer = client.should_run(job, AT, kind=kind, attempt=attempt)
        assert (answer.verdict, answer.reason) == (verdict, reason), (job, kind, answer)
        assert answer.node_name == "n1" and not answer.local, answer
        if verdict is Verdict.DEFER:
            assert answer.retry_after_ms > 0, answer


def test_CONF_12_handoff_without_a_shared_store_is_not_transferred(
    election_off: Coordinator,
) -> None:
    client = client_for(election_off)
    job = unique("conf12")
    client.register([Job(job, "* * * * *", "false", retries=2)])
    handoff = client.handoff(
        job, AT, remaining_attempts=2, next_attempt=2, next_attempt_at=AT + 1000
    )
    assert not handoff.transferred
    assert "abandoned" in handoff.message, handoff
    with pytest.raises(CoordinatorError) as e:
        client.handoff(unique("unregistered"), AT, 2, 2, AT + 1000)
    assert e.value.code is grpc.StatusCode.NOT_FOUND


def test_CONF_13_a_second_instance_of_an_executor_is_refused(election_off: Coordinator) -> None:
    first = client_for(election_off)
    second = Client(election_off.api, timeout=2.0, executor_id=first.executor_id)
    job = unique("conf13")
    first.register([Job(job, "* * * * *", "true")])
    with pytest.raises(CoordinatorError) as e:
        second.register([Job(job, "* * * * *", "true")])
    assert e.value.code is grpc.StatusCode.FAILED_PRECONDITION
    assert first.instance_id in e.value.message, e.value.message
    with pytest.raises(CoordinatorError) as e:
        second.should_run(job, AT)
    assert e.value.code is grpc.StatusCode.FAILED_PRECONDITION
    assert first.should_run(job, AT).verdict is Verdict.RUN


def test_CONF_14_the_election_mode_is_stated_and_a_graceful_stop_says_goodbye(
    tmp_path: Path,
) -> None:
    coordinator = Coordinator(tmp_path, "conf14")
    try:
        client = client_for(coordinator)
        job = unique("conf14")
        off = client.register([Job(job, "* * * * *", "true")]).election
        assert off.mode is ElectionMode.OFF and off.generation > 0, off
        assert client.should_run(job, AT).election == off
        rest = []
        with client.watch(timeout=30) as stream:
            instructions = iter(stream)
            hello = next(instructions)
            assert isinstance(hello, Hello) and hello.election == off, hello
            assert coordinator.terminate() == 0, coordinator.log()
            try:
                rest.extend(instructions)
            except CoordinatorError as e:
                # The connection may go before the stream's trailers; what came first counts.
                assert e.code is grpc.StatusCode.UNAVAILABLE, e
        assert rest and isinstance(rest[-1], Goodbye), rest
        goodbye = rest[-1].election
        assert goodbye.mode is ElectionMode.OFF, goodbye
        assert goodbye.generation > off.generation, (goodbye, off)
    finally:
        coordinator.stop()


def test_CONF_15_a_call_without_the_api_token_is_refused_unauthenticated(
    guarded: Coordinator,
) -> None:
    job = unique("conf15")
    for token in (None, "wrong-token"):
        client = Client(guarded.api, timeout=2.0, executor_id=unique("py-executor"), token=token)
        for call in (
            lambda c=client: c.register([Job(job, "* * * * *", "true")]),
            lambda c=client: c.should_run(job, AT),
        ):
            with pytest.raises(CoordinatorError) as refused:
                call()
            assert refused.value.code is grpc.StatusCode.UNAUTHENTICATED, refused.value
            assert "api.authToken" in refused.value.message, refused.value
            assert not refused.value.unreachable
        client.close()


def test_CONF_16_a_client_given_the_api_token_is_served(guarded: Coordinator) -> None:
    client = Client(
        guarded.api, timeout=2.0, executor_id=unique("py-executor"), token="conformance-token"
    )
    job = unique("conf16")
    client.register([Job(job, "* * * * *", "true")])
    answer = client.should_run(job, AT)
    assert (answer.verdict, answer.reason) == (Verdict.RUN, Reason.ELECTION_OFF), answer
    assert not answer.local, answer
    with client.watch(timeout=10) as stream:
        assert isinstance(next(iter(stream)), Hello)
    client.close()


def test_CONF_17_a_job_that_can_never_fire_registers_with_a_warning(
    election_off: Coordinator,
) -> None:
    client = client_for(election_off)
    parked, ticking = unique("conf17-parked"), unique("conf17")
    registration = client.register(
        [Job(parked, "0 0 31 2 *", "true"), Job(ticking, "* * * * *", "true")]
    )
    assert len(registration.warnings) == 1, registration
    assert parked in registration.warnings[0], registration
    assert "never fires" in registration.warnings[0], registration
    assert client.should_run(parked, AT).verdict is Verdict.RUN


def test_CONF_18_a_catch_up_question_runs_only_inside_its_window_where_claims_are_kept(
    election_off: Coordinator, lease_pair: tuple[Coordinator, Coordinator]
) -> None:
    leader, follower = lease_pair
    settled_answers(leader, follower, unique("conf18-plain"))
    name = unique("conf18")
    job = Job(name, "* * * * *", "true", catch_up=CatchUp.ALL, catch_up_window_ms=600_000)
    short = Job(
        unique("conf18-short"), "* * * * *", "true", catch_up=CatchUp.ALL, catch_up_window_ms=5_000
    )
    on_leader = client_for(leader)
    with pytest.raises(CoordinatorError) as e:
        on_leader.register([short])
    assert e.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "catch_up_window_ms" in e.value.message
    on_leader.register([job])
    past = (int(time.time()) // 60 - 3) * 60_000
    caught = on_leader.should_run(name, past, kind=Kind.CATCH_UP)
    assert (caught.verdict, caught.reason) == (Verdict.RUN, Reason.LEADER), caught
    assert caught.fence, caught
    old = on_leader.should_run(name, past - 8 * 60_000, kind=Kind.CATCH_UP)
    assert (old.verdict, old.reason) == (Verdict.SKIP, Reason.NOT_CAUGHT_UP), old
    off = client_for(election_off)
    off.register([job])
    answer = off.should_run(name, past, kind=Kind.CATCH_UP)
    assert (answer.verdict, answer.reason) == (Verdict.SKIP, Reason.NOT_CAUGHT_UP), answer
