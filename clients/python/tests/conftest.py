"""Fixtures: the live coordinators the conformance cases run against (one per setup named in
clients/conformance/cases.yaml), started once per test session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import Coordinator, coordinator_binary, lease_yaml, lonely_gossip_yaml, wait_for


def pytest_configure(config: pytest.Config) -> None:
    # Fail the whole run up front, loudly, instead of erroring test by test.
    try:
        coordinator_binary()
    except RuntimeError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.fixture(scope="session")
def election_off(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    c = Coordinator(tmp_path_factory.mktemp("election-off"), "election-off")
    yield c
    c.stop()


@pytest.fixture(scope="session")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    """An election-off coordinator whose API needs the token "conformance-token"."""
    c = Coordinator(
        tmp_path_factory.mktemp("guarded"),
        "guarded",
        api_yaml="  authToken:\n    value: conformance-token\n",
    )
    yield c
    c.stop()


@pytest.fixture(scope="session")
def lease_pair(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Coordinator, Coordinator]]:
    """(leader, follower): two filesystem-lease coordinators on one store, once one leads."""
    directory: Path = tmp_path_factory.mktemp("lease-pair")
    store = directory / "store"
    store.mkdir()
    nodes = [
        Coordinator(directory, name, lambda n=name: lease_yaml(n, store)) for name in ("a", "b")
    ]
    try:

        def one_leader() -> tuple[Coordinator, Coordinator] | None:
            leading = [
                n for n in nodes if (n.http("GET", "/cluster") or (0, {}))[1].get("is_leader")
            ]
            if len(leading) != 1:
                return None
            other = next(n for n in nodes if n is not leading[0])
            return leading[0], other

        yield wait_for("exactly one of the lease pair to lead", one_leader)
    finally:
        for n in nodes:
            n.stop()


@pytest.fixture(scope="session")
def lonely_gossip(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    """Gossip node n1 without a quorum, once its manager reports so on GET /cluster."""
    directory: Path = tmp_path_factory.mktemp("lonely-gossip")
    c = Coordinator(directory, "n1", lambda: lonely_gossip_yaml(directory))
    try:

        def without_quorum() -> bool | None:
            body = (c.http("GET", "/cluster") or (0, {}))[1]
            return True if body.get("enabled") and body.get("quorate") is False else None

        wait_for("n1's gossip manager to report no quorum", without_quorum)
        yield c
    finally:
        c.stop()
