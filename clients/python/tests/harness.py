"""Starts real `cronstable coordinator` processes on free loopback ports for the conformance
tests, captures their logs, and talks to their HTTP API.

The binary comes from CRONSTABLE_BIN (clients/run-tests.sh sets it); without it the suite
stops with a message rather than skipping, so a CI run cannot pass by testing nothing.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# How long any wait may take before the test fails; a healthy run is far quicker.
PATIENCE_S = 30.0


def coordinator_binary() -> Path:
    value = os.environ.get("CRONSTABLE_BIN")
    if not value:
        raise RuntimeError(
            "CRONSTABLE_BIN is not set: point it at the cronstable binary "
            "(cargo build -p cronstable-coordinator; clients/run-tests.sh does this)"
        )
    path = Path(value)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise RuntimeError(f"CRONSTABLE_BIN={value} is not an executable file")
    return path


# How often a coordinator start is retried with fresh ports after losing a port race.
BIND_ATTEMPTS = 3

_handed_out: set[int] = set()


def free_port() -> int:
    """A port that was free a moment ago (bound, then released): the coordinator's config
    refuses port 0, so the test picks one. Never the same port twice in one run, since the
    ports of one config are all picked before any is bound."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def wait_for(what: str, check: Callable[[], T | None], patience: float = PATIENCE_S) -> T:
    """Polls `check` until it returns something other than None, or fails naming `what`."""
    deadline = time.monotonic() + patience
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {patience}s waiting for {what}")
        time.sleep(0.05)


class Coordinator:
    """One coordinator process, killed by `stop`.

    `cluster_yaml` gives the config's cluster section; it is called again, with fresh ports
    picked, when a start loses a port race ("Address already in use") to another process."""

    def __init__(
        self,
        directory: Path,
        name: str,
        cluster_yaml: Callable[[], str] = lambda: "",
        api_yaml: str = "",
    ) -> None:
        self.name = name
        for attempt in range(1, BIND_ATTEMPTS + 1):
            self._spawn(directory, cluster_yaml(), api_yaml)
            try:
                self.wait_log("coordinator listening")
                break
            except AssertionError:
                self.stop()
                if attempt == BIND_ATTEMPTS or "Address already in use" not in self.log():
                    raise
        try:
            wait_for(f"{name}'s HTTP API", lambda: self.http("GET", "/healthz"))
        except BaseException:
            self.stop()
            raise

    def _spawn(self, directory: Path, cluster_yaml: str, api_yaml: str = "") -> None:
        self.api_port, self.web_port = free_port(), free_port()
        self.api = f"http://127.0.0.1:{self.api_port}"
        config = directory / f"{self.name}.yaml"
        config.write_text(
            f"api:\n  listen: 127.0.0.1:{self.api_port}\n{api_yaml}"
            f"web:\n  listen: 127.0.0.1:{self.web_port}\n{cluster_yaml}"
        )
        self._log: list[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [str(coordinator_binary()), "coordinator", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "RUST_LOG": "info"},
        )
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self._log.append(line)

    def log(self) -> str:
        with self._lock:
            return "".join(self._log)

    def wait_log(self, needle: str) -> None:
        def seen() -> bool | None:
            if needle in self.log():
                return True
            if self.proc.poll() is not None:
                self._drainer.join(timeout=5)  # the whole log, up to its last line
                raise AssertionError(
                    f"coordinator {self.name} exited ({self.proc.returncode}) before logging "
                    f"{needle!r}; its log:\n{self.log()}"
                )
            return None

        try:
            wait_for(f"coordinator {self.name} to log {needle!r}", seen)
        except AssertionError as e:
            if "its log:" in str(e):
                raise
            raise AssertionError(f"{e}; its log:\n{self.log()}") from None

    def log_lines(self, *needles: str) -> list[str]:
        """Log lines containing every one of `needles`."""
        return [line for line in self.log().splitlines() if all(n in line for n in needles)]

    def http(self, method: str, path: str) -> tuple[int, dict] | None:
        """(status, JSON body), or None while the listener does not answer."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.web_port}{path}",
            method=method,
            data=b"" if method == "POST" else None,
        )
        try:
            with urllib.request.urlopen(request, timeout=2) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def terminate(self) -> int:
        """Stops it gracefully (SIGTERM), as a service manager would; returns its exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout=60)
        self._drainer.join(timeout=5)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._drainer.join(timeout=5)


def lease_yaml(name: str, store: Path) -> str:
    """The cluster section of a filesystem-lease coordinator named `name` on `store`."""
    return (
        f"cluster:\n  nodeName: {name}\n  backend: filesystem\n"
        f"  filesystem:\n    path: {store}\n    ttl: 3\n    topology: single-node\n"
    )


def logged_node_name(coordinator: Coordinator) -> str:
    """The node name the coordinator announced in its "coordinator listening" line."""
    for line in coordinator.log_lines("coordinator listening"):
        m = re.search(r'node="([^"]*)"', line)
        if m:
            return m.group(1)
    raise AssertionError(f"no node name in the log of {coordinator.name}:\n{coordinator.log()}")


GOSSIP_CERTS = Path(__file__).resolve().parents[2] / "conformance" / "gossip-certs.sh"


def lonely_gossip_yaml(directory: Path) -> str:
    """The cluster section of gossip node n1 in a three-node cluster whose two other members
    do not exist (nothing listens on their ports), so it never sees a quorum."""
    tls = directory / "tls"
    subprocess.run([str(GOSSIP_CERTS), str(tls), "n1", "127.0.0.1"], check=True)
    peers = "".join(f'    - host: "127.0.0.1:{free_port()}"\n' for _ in range(2))
    return (
        "cluster:\n  nodeName: n1\n  electLeader: true\n  interval: 1s\n  connectTimeout: 1s\n"
        f'  listen: "127.0.0.1:{free_port()}"\n'
        f"  tls:\n    ca: {tls / 'ca.pem'}\n    cert: {tls / 'n1.pem'}\n"
        f"    key: {tls / 'n1-key.pem'}\n"
        f"  peers:\n{peers}"
    )
