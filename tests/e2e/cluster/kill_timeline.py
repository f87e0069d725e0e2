"""How a killed driver comes back, part by part (issue 28): what the cluster flow prints per kill.

Two ``kubectl get --watch`` (the SparkApplications and the pods of the namespace) record when
each change arrives; the new driver's log, read with the container runtime's timestamps, says
when its engine started its query and how its start-up went (``dlq-engine: query started ...``:
Spark session, checks, checkpoint lease and the wait for the killed holder in it); the new
executor's log when it registered with the driver and was given its first task; the test says
when it killed the driver and when the first order produced after the kill came out routed. One
clock: everything runs on this machine.
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_dlq_devtools.paths import kubernetes_bin

#: The engine's start-up line (``dlq_engine.cli``), after the runtime's timestamp.
ENGINE_LINE = re.compile(
    r"^(?P<at>\S+) dlq-engine: query started (?P<total>[\d.]+)s after the engine started: Spark session "
    r"(?P<session>[\d.]+)s, checks (?P<checks>[\d.]+)s, checkpoint lease (?P<lease>[\d.]+)s "
    r"\((?P<waited>[\d.]+)s waiting for the previous holder\), query (?P<query>[\d.]+)s"
)
#: The executor's own log lines (Spark's ``CoarseGrainedExecutorBackend``, INFO) after the
#: runtime's timestamp: registered with the driver, then given a task.
EXECUTOR_REGISTERED = re.compile(r"^(?P<at>\S+) .*Successfully registered with driver")
EXECUTOR_TASK = re.compile(r"^(?P<at>\S+) .*Got assigned task")


class Watch:
    """``kubectl get KIND --watch -o json`` in the background: every object it prints, with the
    time it arrived."""

    def __init__(self, kubeconfig: Path, kind: str, namespace: str) -> None:
        self.events: list[tuple[float, dict[str, Any]]] = []
        command = [str(kubernetes_bin("kubectl")), f"--kubeconfig={kubeconfig}", "get", kind]
        self._process = subprocess.Popen(
            [*command, "-n", namespace, "--watch", "-o", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self._process.stdout:  # pretty-printed: one object spans many lines
            buffer += line
            while buffer.strip():
                try:
                    obj, end = decoder.raw_decode(buffer.lstrip())
                except ValueError:
                    break
                self.events.append((time.time(), obj))
                buffer = buffer.lstrip()[end:]

    def first(self, after: float, predicate: Callable[[Mapping[str, Any]], bool]) -> float | None:
        """When the first object after ``after`` that matches arrived."""
        return next((at for at, obj in list(self.events) if at >= after and predicate(obj)), None)

    def new(self, after: float, predicate: Callable[[Mapping[str, Any]], bool]) -> float | None:
        """``first``, among the objects not seen before ``after`` (a new pod, not the killed one
        or its executors going)."""
        old = {obj["metadata"].get("uid") for at, obj in list(self.events) if at < after}
        return self.first(after, lambda obj: obj["metadata"].get("uid") not in old and predicate(obj))

    def close(self) -> None:
        self._process.terminate()
        self._process.wait(10)


def _rfc3339(text: str) -> float:
    """A runtime's RFC 3339 timestamp with nanoseconds, as seconds since the epoch."""
    head, _, fraction = text.rstrip("Z").partition(".")
    moment = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.UTC)
    return moment.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)


def _role(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get("spark-role", ""))


def pod_created(pods: Watch, after: float, role: str) -> float | None:
    """When a new pod of ``role`` (``driver``, ``executor``) was first seen after ``after``."""
    return pods.new(after, lambda o: _role(o) == role)


def new_pod_name(pods: Watch, after: float, role: str) -> str | None:
    """The name of the first new pod of ``role`` seen after ``after``."""
    old = {obj["metadata"].get("uid") for at, obj in list(pods.events) if at < after}
    return next(
        (
            str(obj["metadata"]["name"])
            for at, obj in list(pods.events)
            if at >= after and _role(obj) == role and obj["metadata"].get("uid") not in old
        ),
        None,
    )


def _first_at(log: str, pattern: re.Pattern[str], after: float | None = None) -> float | None:
    """When the first line of ``log`` matching ``pattern`` was written (after ``after``)."""
    times = (_rfc3339(m["at"]) for line in log.splitlines() if (m := pattern.match(line)))
    return next((at for at in times if after is None or at >= after), None)


def _running(obj: Mapping[str, Any]) -> bool:
    return (obj.get("status") or {}).get("phase") == "Running" and not obj["metadata"].get(
        "deletionTimestamp"
    )


def _state(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("status") or {}).get("applicationState") or {}).get("state", ""))


@dataclass(frozen=True)
class KillTimeline:
    """One kill: when each part was reached, in seconds after the kill, and durations: the
    engine's own start-up, and the least wait the restart policy allowed."""

    number: int
    marks: Mapping[str, float | None]
    durations: Mapping[str, float]

    @property
    def routed_s(self) -> float:
        routed = self.marks["first order routed"]
        assert routed is not None
        return routed

    @property
    def lease_wait_s(self) -> float:
        return self.durations["waited"]

    def line(self) -> str:
        marks = ", ".join(
            f"{name} +{at:.1f}s" if at is not None else f"{name} ?" for name, at in self.marks.items()
        )
        e = self.durations
        return (
            f"kill {self.number}: routing again {self.routed_s:.1f}s after the kill: {marks}; the engine: "
            f"Spark session {e['session']:.1f}s, checks {e['checks']:.1f}s, checkpoint lease {e['lease']:.1f}s "
            f"(waiting for the killed holder {e['waited']:.1f}s), query start {e['query']:.1f}s; the "
            f"spark-operator's restart policy let it resubmit {e['retry wait']:.1f}s after the kill at the earliest"
        )


def kill_timeline(
    number: int,
    *,
    killed_at: float,
    routed_at: float,
    apps: Watch,
    pods: Watch,
    driver_log: str,
    executor_log: str = "",
) -> KillTimeline:
    """The parts of one kill, from the watches, the new driver's and executor's ``kubectl logs
    --timestamps`` and the test's own times."""
    found = [m for line in driver_log.splitlines() if (m := ENGINE_LINE.match(line))]
    assert found, f"no start-up line in the new driver's log:\n{driver_log[-3000:]}"
    match = found[-1]
    durations = {key: float(match[key]) for key in ("total", "session", "checks", "lease", "waited", "query")}
    query_at = _rfc3339(match["at"])

    def since(at: float | None) -> float | None:
        return None if at is None else at - killed_at

    before = [obj for at, obj in list(apps.events) if at < killed_at]
    marks: dict[str, float | None] = {
        "spark-operator noticed": since(apps.first(killed_at, lambda o: _state(o) not in ("", "RUNNING"))),
        "resubmitted": since(apps.first(killed_at, lambda o: _state(o) == "SUBMITTED")),
        "driver pod created": since(pod_created(pods, killed_at, "driver")),
        "driver pod running": since(pods.new(killed_at, lambda o: _role(o) == "driver" and _running(o))),
        "engine started": query_at - durations["total"] - killed_at,
        "executor pod running": since(pods.new(killed_at, lambda o: _role(o) == "executor" and _running(o))),
        "executor registered": since(_first_at(executor_log, EXECUTOR_REGISTERED)),
        "query started": query_at - killed_at,
        # The warm-up's task (dlq_engine.job.warm_up), then the first of the routing query's.
        "executor's first task": since(_first_at(executor_log, EXECUTOR_TASK)),
        "query's first task": since(_first_at(executor_log, EXECUTOR_TASK, after=query_at)),
        "first order routed": routed_at - killed_at,
    }
    durations["retry wait"] = _retry_wait(before[-1], killed_at) if before else 0.0
    return KillTimeline(number, marks, durations)


def _retry_wait(app: Mapping[str, Any], killed_at: float) -> float:
    """How long after the kill the spark-operator's restart policy let it resubmit at the
    earliest: it waits its retry interval times the submissions so far, from the last one."""
    status = app.get("status") or {}
    interval = float(((app.get("spec") or {}).get("restartPolicy") or {}).get("onFailureRetryInterval") or 0)
    last = status.get("lastSubmissionAttemptTime")
    if not last:
        return 0.0
    due = _rfc3339(str(last)) + interval * int(status.get("submissionAttempts") or 0)
    return max(0.0, due - killed_at)


def summary(kills: Sequence[KillTimeline]) -> list[str]:
    """Per part, its range over the kills."""
    lines = []
    for name in kills[0].marks:
        values = [at for kill in kills if (at := kill.marks[name]) is not None]
        if values:
            lines.append(f"{name}: +{min(values):.1f}s to +{max(values):.1f}s")
    for key, name in (
        ("session", "Spark session"),
        ("lease", "checkpoint lease"),
        ("waited", "lease wait"),
        ("retry wait", "restart policy's wait"),
    ):
        values = [kill.durations[key] for kill in kills]
        lines.append(f"{name}: {min(values):.1f}s to {max(values):.1f}s")
    return lines
