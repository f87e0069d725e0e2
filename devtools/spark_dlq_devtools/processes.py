"""Starting and stopping the test bed's server processes, and cleaning up after them.

Every service runs in its own process group with its output in a log file, so it can be
stopped with everything it started, and a failed start can show the end of its log. An
``atexit`` hook stops whatever is still running if the caller forgets or crashes.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

_running: list[Service] = []

#: JVM options for JIT compilation by C1 only. A JVM that lives for seconds to a minute (the
#: nodes of a cluster a fault test kills and restarts, an engine a crash test kills) spends most
#: of its CPU in its start-up, where C2's compiles compete with every other JVM on two cores;
#: what it does in that time needs no C2 code.
QUICK_JIT = ("-XX:TieredStopAtLevel=1",)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServiceError(RuntimeError):
    pass


class Service:
    """One server process with a log file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.env = env
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        _running.append(self)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_until(self, ready: Callable[[], bool], *, timeout: float, what: str) -> None:
        """Poll ``ready`` until it is true; fail early, with the log's tail, if the process dies."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise ServiceError(f"{self.name} exited while waiting for {what}:\n{self.tail()}")
            try:
                if ready():
                    return
            except Exception:  # noqa: BLE001 - not ready yet, whatever the reason
                pass
            time.sleep(0.2)
        raise ServiceError(f"{self.name}: no {what} after {timeout:.0f}s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL the whole process group (a crash, for fault tests)."""
        if self.process is not None and self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the process group, then SIGKILL whatever is left after ``timeout``."""
        if self.process is None:
            return
        if self.alive():
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            except ProcessLookupError:
                pass
        # Children that outlived the leader.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self in _running:
            _running.remove(self)


@atexit.register
def _stop_all() -> None:
    for service in reversed(list(_running)):
        service.stop(timeout=5)
