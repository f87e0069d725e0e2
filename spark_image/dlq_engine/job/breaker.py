"""The breaker on Spark: the gate on the source, what each micro-batch's tasks see, the driver's side.

A Structured Streaming query cannot pause its Kafka source, and stopping the query would stop
the delay stage's timers, the metrics and the heartbeat with it. So the query keeps running
and every micro-batch is *planned* under the breaker's state (docs/engine.md, "The circuit
breaker"):

- the source topic is read through ``io.sparkdlq.engine.breaker.GatedSource``: when Spark asks
  for the next batch's end offsets, it answers with the start while the breaker is open (no new
  message is read, so none is committed unprocessed), with at most ``probes`` new messages
  while half-open, and with Kafka's own answer while closed;
- the same call puts the state in the stream thread's local properties, which Spark hands to
  every task of the batch: the delay stage (``HoldUntilDue``) releases no retry while open and
  at most ``probes`` per task while half-open, and routing (``for_this_task``) lets a failed
  probe go back to the retry topic whatever redeliveries it has left;
- on the driver, ``BreakerControl`` feeds each committed batch's calls and transient failures,
  and the state the batch ran under (the source's progress metric), to the state machine
  (``routing.breaker``), advances it with time, and sets the gate.

The retry topic is read as always: new retry records go into the delay stage's state, which
holds them. Nothing but the gate's answer changes in the checkpoint: a restart, or a policy
without a breaker, reads and commits exactly as before.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from pyspark import TaskContext
from pyspark.sql import SparkSession

from dlq_engine.job.preflight import engine_class
from dlq_engine.model import reasons
from dlq_engine.model.breaker import CLOSED, HALF_OPEN, BreakerReport, BreakerState, is_state
from dlq_engine.model.policy import DeadLetterPolicy
from dlq_engine.routing import stats as routing_stats
from dlq_engine.routing.breaker import Breaker, Transition
from dlq_engine.routing.settings import RoutingSettings

log = logging.getLogger("dlq_engine.breaker")

#: The JVM side (``spark_image/jvm``, package ``io.sparkdlq.engine.breaker``).
GATE_CLASS: Final = "io.sparkdlq.engine.breaker.BreakerGate"
GATED_SOURCE: Final = "io.sparkdlq.engine.breaker.GatedSource"
#: GatedSource's options and progress metric, and BreakerGate's local property (the Java
#: constants of the same names; tests/integration/engine/test_breaker.py reads them through py4j).
INNER_OPTION: Final = "spark-dlq.inner"
GATE_OPTION: Final = "spark-dlq.gate"
STATE_METRIC: Final = "sparkDlqBreaker"
STATE_PROPERTY: Final = "spark-dlq.breaker"
#: The redelivery limit of a half-open micro-batch: none (a failed probe is retried whatever
#: its count; ``dlq.attempt`` is clamped far below this).
NO_LIMIT: Final = 2**62
#: The dead-letter reasons of transient failures (with the retries, what the breaker counts): a
#: failure whose retry budget (``retry.maxRetryDuration``) ran out failed transiently too.
TRANSIENT_REASONS: Final = frozenset({routing_stats.RETRY_REASON, reasons.EXHAUSTED, reasons.RETRY_TIMEOUT})


def source_options(inner: str, gate: str | None) -> tuple[str, dict[str, str]]:
    """The format and extra options a source is read with: ``inner`` as it is without a gate,
    else through ``GatedSource``."""
    if gate is None:
        return inner, {}
    return GATED_SOURCE, {INNER_OPTION: inner, GATE_OPTION: gate}


def task_state() -> BreakerState:
    """The state the running task's micro-batch was planned under (closed outside a task, with
    no breaker, and in a batch replayed after a restart, which is planned before the gate is)."""
    context = TaskContext.get()
    value = context.getLocalProperty(STATE_PROPERTY) if context is not None else None
    return value if is_state(value) else CLOSED


def for_this_task(settings: RoutingSettings) -> RoutingSettings:
    """``settings`` for the running routing task: in a half-open micro-batch no redelivery limit
    applies (a failed probe goes back to the retry topic, it is never dead-lettered as exhausted
    while the breaker probes)."""
    if task_state() != HALF_OPEN:
        return settings
    return probing(settings)


def probing(settings: RoutingSettings) -> RoutingSettings:
    return dataclasses.replace(settings, classifier=settings.classifier.with_redelivery_limit(NO_LIMIT))


def ran_as(progress: Any) -> BreakerState:
    """The state a committed batch's routing ran under: the gated source's progress metric
    (closed when it has none: a batch replayed after a restart)."""
    for source in progress.sources:
        value = (source.metrics or {}).get(STATE_METRIC)
        if is_state(value):
            return value
    return CLOSED


def failures_of(
    row: Mapping[str, Any], summaries: Sequence[routing_stats.BatchStats]
) -> tuple[int, int, dict[str, int]]:
    """A committed batch's processor calls, transient failures, and those by error class (from
    its observed row and the routing tasks' summaries in it)."""
    calls = int(row.get("total") or 0)
    failed = sum(int(row.get(column) or 0) for column in ("retried", "dead_exhausted", "dead_retry_timeout"))
    classes: collections.Counter[str] = collections.Counter()
    for summary in summaries:
        for _, reason, error_class, count in summary["failures"]:
            if reason in TRANSIENT_REASONS:
                classes[error_class] += int(count)
    return calls, failed, dict(classes)


class BreakerControl:
    """The driver's side of one engine's breaker: its state machine and its gate."""

    def __init__(
        self,
        spark: SparkSession,
        policy: DeadLetterPolicy,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        spec = policy.retry.breaker
        assert spec is not None
        self.policy = policy.qualified_name
        self.machine = Breaker(spec, clock=clock)
        #: This run's gate (a new one per run: an old query of the same policy in the same JVM,
        #: as in the tests, keeps its own).
        self.gate = f"{policy.qualified_name}/{uuid.uuid4().hex}"
        self._gate = engine_class(spark, GATE_CLASS)
        self._apply()

    @property
    def state(self) -> BreakerState:
        return self.machine.state

    def observe(
        self, progress: Any, row: Mapping[str, Any], summaries: Sequence[routing_stats.BatchStats]
    ) -> Transition | None:
        """One committed batch: its progress, its observed row and the summaries in it."""
        calls, failed, classes = failures_of(row, summaries)
        return self._after(self.machine.record(ran_as(progress), calls, failed, classes))

    def tick(self) -> Transition | None:
        return self._after(self.machine.tick())

    def report(self) -> BreakerReport:
        return self.machine.report()

    def close(self) -> None:
        self._gate.remove(self.gate)

    def _after(self, moved: Transition | None) -> Transition | None:
        if moved is not None:
            self._apply()
            log.warning("breaker of %s is %s: %s", self.policy, moved.state, moved.reason)
        return moved

    def _apply(self) -> None:
        self._gate.set(self.gate, self.machine.state, self.machine.spec.probes)
