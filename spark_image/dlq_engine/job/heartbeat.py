"""The engine's liveness, written where the operator reads it.

A driver pod can be Running while its query is dead or stuck in a micro-batch
(kubeflow/spark-operator#1309), and neither Kubernetes nor the spark-operator can tell. So the
driver reports, every ``interval`` seconds, in the annotation ``sparkdlq.io/heartbeat`` of its
policy's Lease (``coordination.k8s.io/v1``; ``--heartbeat-lease NAMESPACE/NAME``; the operator
lists those Leases on every resync): the time of the report, whether the query is active, and
when the query last made progress (a finished micro-batch, or Spark's idle progress report,
which it posts every 10 s while no data arrives; the query's start before the first); and, for
``source.ordering: key``, what the ordering stage holds (``ordering``: held messages, blocked
keys and a few of their names), which the operator puts in the policy's status; and, with
``retry.breaker``, the breaker's state, since when and why it opened (``breaker``), which the
operator maps onto the policy's ``BreakerClosed`` condition.

The Lease is the one object the driver's service account may write (a Role limited to it by
name), so no policy's driver can forge another's heartbeat or touch any ConfigMap. The report is
a merge patch of the annotation only: the Lease's ``spec`` (holder, renew time) is left to a
holder that writes it with its ``resourceVersion``, such as a lease on the checkpoint.

The report goes to the Kubernetes API as the pod's service account (``kube_api``). A report
that fails is logged and the next one tried; the heartbeat never stops the engine, and a driver
with no Kubernetes API at all (a local run) runs without one, with a warning on stderr.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from dlq_engine.job.kube_api import ServiceAccountApi
from dlq_engine.model.breaker import BreakerReport
from dlq_engine.model.heartbeat import ANNOTATION, OrderingReport
from dlq_engine.model.heartbeat import Heartbeat as HeartbeatDocument

log = logging.getLogger("dlq_engine.heartbeat")

DEFAULT_INTERVAL_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class Liveness:
    """What one report says. Times are seconds since the epoch."""

    query_active: bool
    last_progress: float
    batch_id: int | None
    #: ``source.ordering: key`` only: ``HeldKeys.document()`` of the ordering stage's reports.
    ordering: OrderingReport | None = None
    #: ``retry.breaker`` only: the breaker's report (``model.breaker.BreakerReport``).
    breaker: BreakerReport | None = None

    def document(self, now: float) -> str:
        """The annotation's text: the model's heartbeat document, which the operator reads."""
        return HeartbeatDocument(
            time=_utc(now),
            query_active=self.query_active,
            last_progress=_utc(self.last_progress),
            batch_id=self.batch_id,
            ordering=self.ordering,
            breaker=self.breaker,
        ).to_json()


def _utc(epoch: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC)


class HeartbeatError(ValueError):
    """The heartbeat cannot be set up (a bad target, no service account)."""


class Heartbeat:
    """Reports ``liveness()`` every ``interval`` seconds to a Lease's annotation."""

    def __init__(
        self, target: str, liveness: Callable[[], Liveness], *, interval: float = DEFAULT_INTERVAL_S
    ) -> None:
        namespace, _, name = target.partition("/")
        if not namespace or not name or "/" in name:
            raise HeartbeatError(f"--heartbeat-lease must be NAMESPACE/NAME, got {target!r}")
        if interval <= 0:
            raise HeartbeatError(f"--heartbeat-interval must be positive, got {interval}")
        self._api = ServiceAccountApi()
        #: Why no heartbeat can be sent from here (no Kubernetes API: a local run), else None.
        self.unavailable = self._api.unavailable
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.url = self._api.url(self._path)
        self._liveness = liveness
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def report(self, now: float) -> None:
        """Write one heartbeat; raises OSError when the API refuses it or cannot be reached."""
        body = json.dumps(
            {"metadata": {"annotations": {ANNOTATION: self._liveness().document(now)}}}
        ).encode()
        self._api.call("PATCH", self._path, body=body, content_type="application/merge-patch+json")

    def start(self) -> None:
        if self.unavailable is not None:
            log.warning("no heartbeat to %s: %s", self.url, self.unavailable)
            return

        def loop() -> None:
            import time

            while True:
                try:
                    self.report(time.time())
                    if self._failing:
                        log.warning("heartbeat to %s written again", self.url)
                    self._failing = False
                except (OSError, urllib.error.URLError) as error:
                    if not self._failing:  # once per outage, not every interval
                        log.warning("heartbeat to %s failed: %s", self.url, error)
                    self._failing = True
                if self._stop.wait(self.interval):
                    return

        self._thread = threading.Thread(target=loop, name="heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
