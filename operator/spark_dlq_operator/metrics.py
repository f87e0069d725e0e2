"""Prometheus metrics of the operator's reconciles, served on ``--metrics-port``.

How many reconciles ran and how they ended (``ok``, ``invalid``, ``waiting`` for topics,
``error``), which errors, and how long they took: enough to alert on a stuck or failing
operator. The collectors are module-level (Prometheus' registry is process-wide); the HTTP
server is started at operator start-up and stopped at clean-up.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

from prometheus_client import Counter, Histogram, start_http_server

Result = Literal["ok", "invalid", "waiting", "error"]

RECONCILES = Counter(
    "spark_dlq_operator_reconciles_total",
    "Reconciles of DeadLetterPolicies, by how they ended.",
    ["trigger", "result"],
)
ERRORS = Counter(
    "spark_dlq_operator_reconcile_errors_total",
    "Reconciles that failed or had to wait, by reason (BrokerUnavailable, InvalidSpec, ...).",
    ["reason"],
)
DURATION = Histogram(
    "spark_dlq_operator_reconcile_duration_seconds",
    "How long one reconcile of a DeadLetterPolicy took.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)


class Outcome:
    """Filled in by the reconcile: how it ended and why."""

    def __init__(self) -> None:
        self.result: Result = "error"
        self.reason = ""


@contextlib.contextmanager
def observe(trigger: str) -> Iterator[Outcome]:
    """Time one reconcile and count its outcome (``error`` unless the body sets another, also
    when it then raises: a reconcile that waits for topics raises after setting ``waiting``)."""
    outcome = Outcome()
    started = time.perf_counter()
    try:
        yield outcome
    except BaseException as error:
        outcome.reason = outcome.reason or type(error).__name__
        raise
    finally:
        DURATION.observe(time.perf_counter() - started)
        RECONCILES.labels(trigger=trigger, result=outcome.result).inc()
        if outcome.result != "ok":
            ERRORS.labels(reason=outcome.reason or outcome.result).inc()


class MetricsServer:
    """The /metrics HTTP endpoint, in its own thread."""

    def __init__(self, port: int) -> None:
        server: Any
        thread: threading.Thread
        server, thread = start_http_server(port)
        self._server = server
        self._thread = thread

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
