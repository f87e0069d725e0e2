"""Running the query to its end: counts, the error window, signals and exit status.

The driver reads each batch's progress (polling the query, not through a callback) to add up the
observed metrics (outcome counts, retry lag) and to check the error window: when failures reach ``threshold`` of the last ``size`` messages the query is
stopped with that reason. The window is kept per micro-batch: a batch's messages all count
at once, and the oldest batch is scaled down to keep exactly ``size`` messages in view.
SIGTERM stops the query cleanly (exit 0), whether this process or the driver's JVM gets it. ``--once`` runs the normal trigger and stops after two
batches in a row that read nothing and routed nothing: Spark's available-now trigger never ends
while the delay stage has processing-time timers, and retries that are not due yet are not
"available" (they stay in the checkpointed state for the next run).
"""

from __future__ import annotations

import collections
import dataclasses
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import StreamingQueryProgress
from pyspark.sql.streaming.query import StreamingQuery

from dlq_engine.exits import EXIT_OK
from dlq_engine.failures import Ending, Failure, decode
from dlq_engine.job.breaker import BreakerControl
from dlq_engine.job.heartbeat import Liveness
from dlq_engine.job.metrics import EngineMetrics
from dlq_engine.job.ordering import ORDERING_METRICS, OrderingReports
from dlq_engine.job.pipeline import METRICS, STATS, RunOptions, start, wake_if_restarting
from dlq_engine.model.breaker import OPEN
from dlq_engine.model.policy import DeadLetterPolicy
from dlq_engine.routing import stats as routing_stats
from dlq_engine.routing.breaker import Transition
from dlq_engine.routing.stats import COUNTS, observed_row

#: The counts a batch's observed metrics add up to (``routing.stats.COUNTS``).
COUNTERS = COUNTS
#: Seconds between two reads of the query's progress, and with a breaker.
POLL_S = 1.0
BREAKER_POLL_S = 0.25


@dataclass
class FailureWindow:
    size: int
    threshold: float
    batches: collections.deque[tuple[int, int]] = field(default_factory=collections.deque)

    #: The failure share in view: of the last ``size`` messages, or of all seen while fewer
    #: (None until a message was seen, or when the window is off).
    ratio: float | None = None

    def add(self, total: int, failed: int) -> float | None:
        """Record a batch; return the failure share once it reaches the threshold."""
        if self.size <= 0 or total <= 0:
            return None
        self.batches.append((total, failed))
        seen = sum(t for t, _ in self.batches)
        while self.batches and seen - self.batches[0][0] >= self.size:
            seen -= self.batches.popleft()[0]
        if seen < self.size:
            self.ratio = sum(f for _, f in self.batches) / seen
            return None
        # Scale the oldest batch so that exactly `size` messages are in view.
        excess = seen - self.size
        oldest_total, oldest_failed = self.batches[0]
        failed_in_view = sum(f for _, f in self.batches) - oldest_failed * excess / oldest_total
        share = failed_in_view / self.size
        self.ratio = share
        return share if share >= self.threshold else None


@dataclass
class Totals:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    max_lateness_ms: int | None = None
    min_lateness_ms: int | None = None
    batches: int = 0

    def add(self, row: dict[str, Any]) -> None:
        self.batches += 1
        for name in COUNTERS:
            self.counts[name] += int(row.get(name) or 0)
        for name in ("max_lateness_ms", "min_lateness_ms"):
            value = row.get(name)
            if value is not None:
                current = getattr(self, name)
                pick = max if name.startswith("max") else min
                setattr(self, name, int(value) if current is None else pick(current, int(value)))

    def summary(self) -> str:
        c = self.counts
        text = (
            f"processed={c['total']} output={c['output']} acked={c['acked']} "
            f"retried={c['retried']} dead={c['dead']} ignored={c['ignored']} "
            f"redelivered={c['redelivered']}"
        )
        if self.max_lateness_ms is not None:
            text += f" retry_lateness_ms[min={self.min_lateness_ms},max={self.max_lateness_ms}]"
        return text


class Run:
    """One run of the engine on a session: start, watch, stop, explain."""

    def __init__(
        self,
        spark: SparkSession,
        policy: DeadLetterPolicy,
        options: RunOptions,
        metrics: EngineMetrics | None = None,
    ) -> None:
        self.spark = spark
        self.policy = policy
        self.options = options
        self.totals = Totals()
        self.window = FailureWindow(policy.error_window.size, policy.error_window.threshold)
        self.metrics = metrics
        self.stop_reason: str | None = None
        #: Why the checkpoint's lease was lost (the query is stopped then), None while held.
        self.lease_lost: str | None = None
        self.once_done = False
        self.query: StreamingQuery | None = None
        self._last_progress: tuple[int, str] | None = None  # (batchId, timestamp) accounted last
        self._empty_batches = 0
        self._stop_requested = False
        #: When the query last reported progress (a batch, or Spark's idle report), on this
        #: clock; its start before the first. Read by the heartbeat's thread.
        self.last_progress_at = time.time()
        self.last_batch_id: int | None = None
        #: ``source.ordering: key``: the ordering stage's latest reports (None otherwise).
        self.ordering = OrderingReports() if policy.source.ordering == "key" else None
        #: ``retry.breaker``: its state machine and gate (None without one).
        self.breaker = BreakerControl(spark, policy) if policy.retry.breaker is not None else None
        #: How often the progress is read: with a breaker a committed batch's failures should
        #: close the gate before the batch after next is planned (docs/engine.md).
        self._poll_s = BREAKER_POLL_S if self.breaker is not None else POLL_S
        if self.breaker is not None and metrics is not None:
            metrics.breaker_state(self.breaker.state)

    def on_batch(self, row: dict[str, Any]) -> None:
        self.totals.add(row)
        failed = int(row.get("retried") or 0) + int(row.get("dead") or 0) + int(row.get("ignored") or 0)
        share = self.window.add(int(row.get("total") or 0), failed)
        if self.metrics is not None:
            self.metrics.error_window(self.window.ratio)
        if share is not None and self.stop_reason is None:
            self.stop_reason = (
                f"error window: {share:.0%} of the last {self.window.size} messages failed "
                f"(threshold {self.policy.error_window.threshold:.0%})"
            )
            self.stop()

    def lose_lease(self, reason: str) -> None:
        """Another engine took the checkpoint over: stop at once, before it is written twice."""
        self.lease_lost = reason
        self.stop()

    def start(self) -> StreamingQuery:
        options = self.options
        if self.breaker is not None:
            options = dataclasses.replace(options, breaker_gate=self.breaker.gate)
        woken = wake_if_restarting(self.spark, self.policy, options)
        if woken is not None and self.metrics is not None:
            self.metrics.woken(woken)
        self.query = start(self.spark, self.policy, options)
        self.last_progress_at = time.time()
        if self._stop_requested:  # stopped (the lease lost) while the query was being started
            self.query.stop()
        return self.query

    def liveness(self) -> Liveness:
        query = self.query
        active = bool(query is not None and query.isActive and not self._stop_requested)
        return Liveness(
            query_active=active,
            last_progress=self.last_progress_at,
            batch_id=self.last_batch_id,
            ordering=self.ordering.state().document() if self.ordering is not None else None,
            breaker=self.breaker.report() if self.breaker is not None else None,
        )

    def _drain_progress(self) -> None:
        """Account for every batch progress not seen yet."""
        for progress in self._new_progress():
            metrics = progress.observedMetrics.get(METRICS)
            row = observed_row(metrics[STATS]) if metrics is not None else {}
            if row:
                self.on_batch(row)
            if self.metrics is not None:
                self.metrics.add_progress(progress, row)
            if self.breaker is not None:
                summaries = routing_stats.parse(row.get(STATS) or []) if row else []
                self._breaker_moved(self.breaker.observe(progress, row, summaries))
            reports = progress.observedMetrics.get(ORDERING_METRICS)
            if self.ordering is not None and reports is not None:
                self.ordering.add(reports.asDict(recursive=True).get("reports") or [])
                if self.metrics is not None:
                    self.metrics.held_keys(self.ordering.state())
            empty = int(progress.numInputRows) == 0 and int(row.get("total") or 0) == 0
            self._empty_batches = self._empty_batches + 1 if empty else 0
            # Two in a row: after a restart Spark first re-runs the last uncommitted batch with
            # the offsets it had planned, which may be empty although new data is waiting.
            if self.options.once and self.stop_reason is None and self._empty_batches >= 2:
                self.once_done = True
                self.stop()

    def _new_progress(self) -> list[StreamingQueryProgress]:
        """The batch progresses not accounted for yet, oldest first.

        Spark keeps the last 100 (``spark.sql.streaming.numRecentProgressUpdates``), and
        PySpark's ``recentProgress`` converts every one with a few dozen py4j calls plus, per
        observed metric, a class lookup through every jar on the classpath. Polled every second,
        that took 8% of the JVM's CPU samples in a profile of the throughput benchmark (the
        driver and the executor share the JVM in local mode). So the newest progress is
        looked at first, and only those after the last one accounted for are converted. (A batch
        re-run after a restart repeats its id, not its timestamp.)"""
        assert self.query is not None
        jquery = self.query._jsq
        newest = jquery.lastProgress()
        if newest is None or _progress_key(newest) == self._last_progress:
            return []
        fresh = []
        for jprogress in reversed(list(jquery.recentProgress())):
            key = _progress_key(jprogress)
            if key == self._last_progress:
                break
            fresh.append(jprogress)
        if not fresh:
            return []
        self._last_progress = _progress_key(fresh[0])
        self.last_progress_at = time.time()
        self.last_batch_id = self._last_progress[0]
        return [StreamingQueryProgress.fromJObject(p) for p in reversed(fresh)]

    def _breaker_moved(self, moved: Transition | None) -> None:
        if moved is not None and self.metrics is not None:
            self.metrics.breaker_state(moved.state, opened=moved.state == OPEN)

    def stop(self) -> None:
        self._stop_requested = True
        if self.query is not None and self.query.isActive:
            self.query.stop()

    def wait(self) -> int:
        """Block until the query ends; return the exit status and print why on stderr."""
        try:
            return self._wait()
        finally:
            if self.breaker is not None:
                self.breaker.close()

    def _wait(self) -> int:
        assert self.query is not None
        terminated = False
        while not terminated:
            try:
                # PySpark takes seconds as a float too (it waits int(timeout * 1000) ms).
                terminated = bool(self.query.awaitTermination(self._poll_s))  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 - the reason is read from query.exception()
                terminated = True
            self._drain_progress()
            if self.breaker is not None:
                self._breaker_moved(self.breaker.tick())
        ending = self._ending()
        if ending is None:
            return EXIT_OK
        print(ending.message, file=sys.stderr)
        return ending.exit_status

    def _ending(self) -> Failure | None:
        """Why the query ended (None: cleanly): the one dispatch on ``Ending``'s sources."""
        assert self.query is not None
        if self.lease_lost is not None:
            return Failure(Ending.LEASE_LOST, self.lease_lost)
        if self.stop_reason is not None:
            return Failure(Ending.ERROR_WINDOW, self.stop_reason)
        error = self.query.exception()
        if error is None:
            return None
        text = str(error)
        if self._stop_requested and _INTERRUPTED.search(text):
            # Stopped while a foreachBatch sink (a dead-letter table) ran a Spark job: Spark
            # recognises the interruption of its own sinks, not one passed back through Python.
            # The batch was not committed; it is replayed on the next start, as after any stop.
            return None
        if self.metrics is not None:
            self.metrics.sink_failed(text)
        return decode(text) or Failure(Ending.QUERY_FAILED, first_line(text))


#: A stop interrupting the stream thread, as seen inside a wrapped error.
_INTERRUPTED = re.compile(
    r"java\.lang\.InterruptedException|java\.io\.InterruptedIOException"
    r"|java\.nio\.channels\.ClosedByInterruptException"
)


def _progress_key(jprogress: Any) -> tuple[int, str]:
    return int(jprogress.batchId()), str(jprogress.timestamp())


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:500]
    return text[:500]


def install_sigterm(run: Run) -> None:
    """SIGTERM and SIGINT stop the query cleanly, whichever of the driver's two processes gets
    them: this Python process, or its JVM (``_JvmSigterm``)."""

    def stop_soon() -> None:
        threading.Thread(target=run.stop, daemon=True).start()

    def handle(signum: int, frame: Any) -> None:
        stop_soon()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    _JvmSigterm.install(run.spark, stop_soon)


class _JvmSigterm:
    """The driver JVM's SIGTERM handler: it calls back into this process to stop the query,
    instead of shutting the JVM down under it.

    In a driver pod the container's init (tini) passes the pod's SIGTERM to the JVM only
    (spark-submit's; this Python process is its child), and the stand-in spark-operator signals
    both; the JVM's default would run its shutdown hooks (the SparkContext stopped, Hadoop's file
    systems closed) while the query still runs, so the engine could neither stop cleanly nor
    delete its checkpoint lease, and the next driver had to take the lease over. Through this
    handler (a py4j proxy: the callback server is started for it) the JVM stays up until the
    query has stopped and the lease is released; it then ends with this process, as it does
    after any run. A JVM that refuses the handler keeps its default, with a warning."""

    def __init__(self, action: Callable[[], None]) -> None:
        self._action = action

    def handle(self, signal: object) -> None:
        self._action()

    class Java:
        implements: ClassVar[list[str]] = ["sun.misc.SignalHandler"]

    @staticmethod
    def install(spark: SparkSession, action: Callable[[], None]) -> None:
        from pyspark.java_gateway import ensure_callback_server_started

        context = spark.sparkContext
        jvm = context._jvm
        assert jvm is not None
        try:
            ensure_callback_server_started(context._gateway)  # type: ignore[no-untyped-call]
            jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal("TERM"), _JvmSigterm(action))
        except Exception as error:  # noqa: BLE001 - the JVM's default then stays
            print(f"dlq-engine: the driver JVM keeps its own SIGTERM handling: {error}", file=sys.stderr)
