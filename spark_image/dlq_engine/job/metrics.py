"""Prometheus metrics for a running engine, served when ``--metrics-port`` is given.

Everything is taken from the progress of each committed micro-batch (its observed metrics,
its sources' offsets and its duration), so the counters count messages whose routing is
durable, never a batch that failed and is replayed. The routing tasks send what needs more
than a count per route (failures by error class and attempt, the processor's latency, the
retry lateness) as one summary per Arrow batch (``routing.stats``); the driver adds them up
here. Two values need a look outside the batches and are read by ``probes`` on a thread:
the dead-letter topic's size and age, and the retries the delay stage held at start (read once
a batch this run planned itself has committed: beside the first batches after a restart, the
re-run of the batch the previous driver left uncommitted and the one with what came meanwhile,
that Spark job would hold the executor's task slot they need).

Every series carries ``policy`` (``namespace/name``). Error classes are bounded: the first
``max_error_classes`` seen keep their name, later ones are counted as ``other``. The list,
with labels and meaning, is in docs/monitoring.md.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from dlq_engine.job.driver_producer import Written
from dlq_engine.job.ordering import HeldKeys
from dlq_engine.job.pipeline import DEAD_REASONS, STATS
from dlq_engine.model.breaker import BREAKER_STATES, BreakerState
from dlq_engine.model.policy import DeadLetterPolicy
from dlq_engine.release import build_labels
from dlq_engine.routing import stats as routing_stats

log = logging.getLogger("dlq_engine.metrics")

ROUTES = {
    "output": "output",
    "acked": "acked",
    "retried": "retry",
    "dead": "dead_letter",
    "ignored": "ignored",
}
#: How many error classes keep their own ``error_class`` label (the rest: ``other``).
DEFAULT_MAX_ERROR_CLASSES: Final = 20
#: Upper bounds (seconds) of the micro-batch duration histogram's buckets.
BATCH_BUCKETS: Final = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: Batches whose retry deltas wait for the delay stage's first count; past this many the count
#: is given up (the read takes seconds; this is hours of batches).
MAX_PENDING_BATCHES: Final = 10_000
#: How often the dead-letter topic is probed, in seconds.
DEFAULT_PROBE_INTERVAL: Final = 30.0
#: Sink topic kinds a failed write is attributed to (``spark_dlq_sink_write_failures_total``).
SINK_TOPICS: Final = ("dead_letter", "retry", "output", "unknown")
_KAFKA_SUBSCRIBE = re.compile(r"Subscribe\[(.+?)\]")


class _Histograms(Collector):
    """Histograms fed with bucket counts that were aggregated elsewhere (prometheus_client's
    ``Histogram`` only takes one observation at a time)."""

    def __init__(self, policy: str) -> None:
        self._policy = policy
        self._lock = threading.Lock()
        self._families: dict[str, tuple[str, Sequence[float], list[int], list[float]]] = {}

    def declare(self, name: str, documentation: str, bounds: Sequence[float]) -> None:
        self._families[name] = (documentation, tuple(bounds), [0] * (len(bounds) + 1), [0.0])

    def add(self, name: str, histogram: routing_stats.Histogram) -> None:
        _, bounds, counts, total = self._families[name]
        if len(histogram["buckets"]) != len(bounds) + 1:
            raise ValueError(f"{name}: {len(histogram['buckets'])} buckets for {len(bounds)} bounds")
        with self._lock:
            for i, count in enumerate(histogram["buckets"]):
                counts[i] += int(count)
            total[0] += float(histogram["sum"])

    def observe(self, name: str, value: float) -> None:
        bounds = self._families[name][1]
        buckets = [0] * (len(bounds) + 1)
        buckets[next((i for i, bound in enumerate(bounds) if value <= bound), len(bounds))] = 1
        self.add(name, {"buckets": buckets, "sum": value, "count": 1})

    def collect(self) -> Iterable[HistogramMetricFamily]:
        with self._lock:
            snapshot = {name: (d, b, list(c), t[0]) for name, (d, b, c, t) in self._families.items()}
        for name, (documentation, bounds, counts, total) in snapshot.items():
            family = HistogramMetricFamily(name, documentation, labels=["policy"])
            cumulative, running = [], 0
            for bound, count in zip([*map(_le, bounds), "+Inf"], counts, strict=True):
                running += count
                cumulative.append((bound, float(running)))
            family.add_metric([self._policy], cumulative, total)
            yield family


def _le(bound: float) -> str:
    return repr(float(bound))


class ErrorClasses:
    """The ``error_class`` label: the first ``limit`` classes seen keep their name, so a
    processor raising ever new classes cannot grow the series without bound."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._known: set[str] = set()

    def label(self, error_class: str) -> str:
        if error_class in self._known:
            return error_class
        if len(self._known) < self.limit and error_class != routing_stats.OTHER:
            self._known.add(error_class)
            return error_class
        return routing_stats.OTHER


def _spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


class EngineMetrics:
    def __init__(
        self,
        policy: DeadLetterPolicy | str,
        *,
        max_error_classes: int = DEFAULT_MAX_ERROR_CLASSES,
        probe_interval: float = DEFAULT_PROBE_INTERVAL,
    ) -> None:
        self.registry = CollectorRegistry()
        self.model = policy if isinstance(policy, DeadLetterPolicy) else None
        self.policy = policy.qualified_name if isinstance(policy, DeadLetterPolicy) else policy
        self.probe_interval = probe_interval
        self.error_classes = ErrorClasses(max_error_classes)
        registry, p = self.registry, ["policy"]
        self.build_info = Gauge(
            "spark_dlq_build_info",
            "1, labelled with the engine's version, its Python and its Spark (present from the "
            "start: the chart's target-absent alert looks for it)",
            ["policy", "version", "python", "spark"],
            registry=registry,
        )
        self.build_info.labels(policy=self.policy, spark=_spark_version(), **build_labels()).set(1)
        self.messages = Counter(
            "spark_dlq_messages", "Messages routed, by outcome", ["policy", "outcome"], registry=registry
        )
        self.dead_letters = Counter(
            "spark_dlq_dead_letters",
            "Dead letters (written or ignored), by dlq.reason",
            ["policy", "reason"],
            registry=registry,
        )
        self.redelivered = Counter(
            "spark_dlq_redelivered_messages",
            "Retry records processed after their delay",
            p,
            registry=registry,
        )
        self.lateness = Gauge(
            "spark_dlq_retry_lateness_max_seconds",
            "Largest lateness past dlq.deliver.at in the last batch with retries",
            p,
            registry=registry,
        )
        self.batches = Counter("spark_dlq_batches", "Committed micro-batches", p, registry=registry)
        # source.ordering: key only (zero otherwise).
        self.parked = Counter(
            "spark_dlq_ordering_parked_messages",
            "Messages parked behind a retry of their key (written to the retry topic unprocessed)",
            p,
            registry=registry,
        )
        self.blocked = Counter(
            "spark_dlq_ordering_blocked_keys",
            "Keys blocked by a dead letter under ordering.onDeadLetter block",
            p,
            registry=registry,
        )
        self.ordering_held = Gauge(
            "spark_dlq_ordering_held_messages",
            "Messages held behind a retrying or blocked message of their key (as of the ordering "
            "stage's last reports)",
            p,
            registry=registry,
        )
        self.ordering_blocked = Gauge(
            "spark_dlq_ordering_blocked_keys_current",
            "Keys blocked now by a dead letter under ordering.onDeadLetter block (as of the "
            "ordering stage's last reports)",
            p,
            registry=registry,
        )
        self.messages_in = Counter(
            "spark_dlq_messages_in",
            "Messages handed to the processor, by where they came from (source: the source "
            "topic; retry: a retry released by the delay stage)",
            ["policy", "source"],
            registry=registry,
        )
        self.failures = Counter(
            "spark_dlq_failures",
            "Failed messages by outcome (retry, dead_letter, ignored), reason (retry, or the "
            "dlq.reason) and exception class (the first classes seen; the rest: other)",
            ["policy", "outcome", "reason", "error_class"],
            registry=registry,
        )
        self.failures_by_attempt = Counter(
            "spark_dlq_failures_by_attempt",
            "Failed messages by failed attempts so far (dlq.attempt: 1 is the first delivery; "
            f"{routing_stats.MAX_ATTEMPT_LABEL}+ for the rest)",
            ["policy", "attempt"],
            registry=registry,
        )
        self.released_late = Counter(
            "spark_dlq_retry_released_late",
            "Retries routed more than one trigger interval and a second after dlq.deliver.at",
            p,
            registry=registry,
        )
        self.held = Gauge(
            "spark_dlq_retry_held",
            "Retries waiting in the delay stage for dlq.deliver.at (as of the last committed batch)",
            p,
            registry=registry,
        )
        self.lag_messages = Gauge(
            "spark_dlq_source_lag_messages",
            "Records in the topic past what the last batch read (source: the source topic; "
            "retry: the retry topic, not yet in the delay stage)",
            ["policy", "source"],
            registry=registry,
        )
        self.lag_seconds = Gauge(
            "spark_dlq_source_lag_seconds",
            "Age of the oldest source message the last batch routed when it finished "
            "(0 once nothing is behind)",
            p,
            registry=registry,
        )
        self.last_batch = Gauge(
            "spark_dlq_last_batch_timestamp_seconds",
            "When the last committed micro-batch finished (Unix time)",
            p,
            registry=registry,
        )
        self.window_ratio = Gauge(
            "spark_dlq_error_window_ratio",
            "Share of failures among the last errorWindow.size messages (fewer until that many were seen)",
            p,
            registry=registry,
        )
        self.window_threshold = Gauge(
            "spark_dlq_error_window_threshold",
            "errorWindow.threshold: the job stops when the ratio reaches it",
            p,
            registry=registry,
        )
        self.dead_letter_records = Gauge(
            "spark_dlq_dead_letter_topic_messages",
            "Records retained in the dead-letter topic (latest minus earliest offsets)",
            p,
            registry=registry,
        )
        self.dead_letter_age = Gauge(
            "spark_dlq_dead_letter_oldest_age_seconds",
            "Age of the oldest record retained in the dead-letter topic (0 when it is empty)",
            p,
            registry=registry,
        )
        self.sink_failures = Counter(
            "spark_dlq_sink_write_failures",
            "Micro-batches that failed because a Kafka write failed, by the topic named in the "
            "error (dead_letter, retry, output, or unknown); the batch is not committed",
            ["policy", "topic"],
            registry=registry,
        )
        # retry.breaker only (absent otherwise).
        self.breaker = Gauge(
            "spark_dlq_breaker_state",
            "The circuit breaker's state: 1 for the current one of closed, open and half-open",
            ["policy", "state"],
            registry=registry,
        )
        self.breaker_opens = Counter(
            "spark_dlq_breaker_opens",
            "Times the circuit breaker opened (tripped while closed, or probes failed while half-open)",
            p,
            registry=registry,
        )
        self.probe_errors = Counter(
            "spark_dlq_probe_errors",
            "Failed reads of the dead-letter topic's size or the delay stage's state",
            ["policy", "probe"],
            registry=registry,
        )
        self.histograms = _Histograms(self.policy)
        self.histograms.declare(
            "spark_dlq_processor_duration_seconds",
            "Processor call duration: per message (mode message; the first 256 calls of each Arrow "
            "batch), per batch (mode batch)",
            routing_stats.LATENCY_BUCKETS,
        )
        self.histograms.declare(
            "spark_dlq_retry_lateness_seconds",
            "How long after dlq.deliver.at a retry was routed",
            routing_stats.LATENESS_BUCKETS,
        )
        self.histograms.declare(
            "spark_dlq_batch_duration_seconds", "Micro-batch duration (triggerExecution)", BATCH_BUCKETS
        )
        registry.register(self.histograms)
        # Series that exist from the start, at zero, so that rate() and absent() work at once.
        for outcome in ROUTES.values():
            self.messages.labels(self.policy, outcome)
        for reason in DEAD_REASONS.values():
            self.dead_letters.labels(self.policy, reason)
        for source in ("source", "retry"):
            self.messages_in.labels(self.policy, source)
        for topic in SINK_TOPICS:
            self.sink_failures.labels(self.policy, topic)
        self.redelivered.labels(self.policy)
        self.batches.labels(self.policy)
        self.parked.labels(self.policy)
        self.blocked.labels(self.policy)
        if self.model is not None and self.model.source.ordering == "key":
            self.ordering_held.labels(self.policy).set(0)
            self.ordering_blocked.labels(self.policy).set(0)
        self.released_late.labels(self.policy)
        if self.model is not None and self.model.error_window.size > 0:
            self.window_threshold.labels(self.policy).set(self.model.error_window.threshold)
        # The delay stage's count: the base is read from the checkpoint at start (``watch``);
        # each batch after it adds its retry input and subtracts what it released. Until the
        # base is known the batches' deltas wait in ``_pending`` (by batch id).
        self._held_lock = threading.Lock()
        self._held: int | None = None
        self._last_batch = -1
        self._pending: dict[int, int] = {}
        self._held_failed = False
        #: The restart's wake record (``pipeline.wake``): read from the retry topic like a
        #: retry, but dropped before the delay stage, so not held.
        self._wake: Written | None = None
        #: Set when a batch this run planned itself has committed (or the metrics close): one
        #: after ``_replayed``, the batch the previous run may have planned and left uncommitted,
        #: which Spark re-runs first (-1 until ``watch`` knows the checkpoint's last commit).
        self._own_batch = threading.Event()
        self._replayed = -1
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def serve(self, port: int, host: str = "0.0.0.0") -> None:
        start_http_server(port, addr=host, registry=self.registry)

    # --- per batch ---------------------------------------------------------------------------

    def add(self, row: Mapping[str, Any], summaries: Sequence[routing_stats.BatchStats] = ()) -> None:
        """One committed batch's observed metrics (``pipeline.observed``) and the routing
        tasks' summaries in them."""
        self.batches.labels(self.policy).inc()
        for name, outcome in ROUTES.items():
            self.messages.labels(self.policy, outcome).inc(int(row.get(name) or 0))
        for name, reason in DEAD_REASONS.items():
            self.dead_letters.labels(self.policy, reason).inc(int(row.get(name) or 0))
        self.redelivered.labels(self.policy).inc(int(row.get("redelivered") or 0))
        self.parked.labels(self.policy).inc(int(row.get("parked") or 0))
        self.blocked.labels(self.policy).inc(int(row.get("blocked") or 0))
        if row.get("max_lateness_ms") is not None:
            self.lateness.labels(self.policy).set(int(row["max_lateness_ms"]) / 1000)
        released = sum(int(s["released"]) for s in summaries)
        self.messages_in.labels(self.policy, "source").inc(max(0, int(row.get("total") or 0) - released))
        self.messages_in.labels(self.policy, "retry").inc(released)
        for summary in summaries:
            for outcome, reason, error_class, count in summary["failures"]:
                label = self.error_classes.label(error_class or "unknown")
                self.failures.labels(self.policy, outcome, reason, label).inc(int(count))
            for attempt, count in summary["attempts"].items():
                self.failures_by_attempt.labels(self.policy, attempt).inc(int(count))
            self.released_late.labels(self.policy).inc(int(summary["late"]))
            self.histograms.add("spark_dlq_processor_duration_seconds", summary["latency"])
            self.histograms.add("spark_dlq_retry_lateness_seconds", summary["lateness"])

    def add_progress(self, progress: Any, row: Mapping[str, Any]) -> None:
        """One committed batch's progress (a ``StreamingQueryProgress``): its observed metrics
        (``row``, empty when it routed nothing), its sources' offsets and its duration."""
        summaries = routing_stats.parse(row.get(STATS) or []) if row else []
        if row:
            self.add(row, summaries)
        finished = _finished_at(progress)
        self.last_batch.labels(self.policy).set(finished)
        duration_ms = (progress.durationMs or {}).get("triggerExecution")
        if duration_ms is not None:
            self.histograms.observe("spark_dlq_batch_duration_seconds", int(duration_ms) / 1000)
        behind: dict[str, int] = {}
        retry_in = 0
        for source in progress.sources:
            kind = self._source_kind(_topic(source.description))
            if kind is None:
                continue
            behind[kind] = behind.get(kind, 0) + _offsets_behind(source.endOffset, source.latestOffset)
            if kind == "retry":
                retry_in += int(source.numInputRows)
                if self._wake is not None and _read(self._wake, source.startOffset, source.endOffset):
                    retry_in -= 1
                    self._wake = None
        for kind, count in behind.items():
            self.lag_messages.labels(self.policy, kind).set(count)
        oldest_ms = min(
            (s["oldest_source_ms"] for s in summaries if s["oldest_source_ms"] is not None), default=None
        )
        if oldest_ms is not None:
            self.lag_seconds.labels(self.policy).set(max(0.0, finished - oldest_ms / 1000))
        elif behind.get("source", 0) == 0:
            self.lag_seconds.labels(self.policy).set(0)
        released = sum(int(s["released"]) for s in summaries)
        self._held_batch(int(progress.batchId), retry_in - released)
        if int(progress.batchId) > self._replayed:
            self._own_batch.set()

    def _source_kind(self, topic: str | None) -> str | None:
        if self.model is None or topic is None:
            return None
        if topic == self.model.source.topic:
            return "source"
        if topic == self.model.retry_topic:
            return "retry"
        return None

    def held_keys(self, state: HeldKeys) -> None:
        """What the ordering stage holds (``source.ordering: key``), after a batch's reports."""
        self.ordering_held.labels(self.policy).set(state.held)
        self.ordering_blocked.labels(self.policy).set(state.blocked)

    def breaker_state(self, state: BreakerState, *, opened: bool = False) -> None:
        """The breaker is in ``state`` (it has just ``opened``, when it has)."""
        for each in BREAKER_STATES:
            self.breaker.labels(self.policy, each).set(1 if each == state else 0)
        counter = self.breaker_opens.labels(self.policy)
        if opened:
            counter.inc()

    def error_window(self, ratio: float | None) -> None:
        if ratio is not None:
            self.window_ratio.labels(self.policy).set(ratio)

    def sink_failed(self, error_text: str) -> str | None:
        """Count a query failure caused by a failed Kafka write; its topic kind, or None when
        the failure was something else."""
        kind = sink_failure(error_text, self.model)
        if kind is not None:
            self.sink_failures.labels(self.policy, kind).inc()
        return kind

    # --- the retries held in the delay stage -------------------------------------------------

    def _held_batch(self, batch_id: int, delta: int) -> None:
        with self._held_lock:
            if self._held_failed:
                return
            if self._held is None:
                self._pending[batch_id] = delta  # a batch re-run after a restart keeps its id
                if len(self._pending) > MAX_PENDING_BATCHES:
                    self._held_failed = True  # the base never came: stop keeping deltas
                    self._pending.clear()
                return
            if batch_id <= self._last_batch:
                return  # already counted (in the base, or before)
            self._last_batch = batch_id
            self._held += delta
            self.held.labels(self.policy).set(max(0, self._held))

    def held_base(self, base_batch: int | None, held: int) -> None:
        """The delay stage's count as of ``base_batch`` (None: no batch was committed yet)."""
        with self._held_lock:
            base = -1 if base_batch is None else base_batch
            later = {b: d for b, d in self._pending.items() if b > base}
            self._held = held + sum(later.values())
            self._last_batch = max([base, *later])
            self._pending.clear()
            self.held.labels(self.policy).set(max(0, self._held))

    def woken(self, wake: Written) -> None:
        """The restart wrote its wake record here: the batch that reads it does not hold it."""
        self._wake = wake

    def held_unknown(self) -> None:
        """The base cannot be read: the gauge stays absent."""
        with self._held_lock:
            self._held_failed = True
            self._pending.clear()

    # --- probes ------------------------------------------------------------------------------

    def watch(self, spark: Any, checkpoint: str, client: dict[str, str]) -> None:
        """Before the query starts: note the checkpoint's last committed batch, then, once a
        batch this run planned has committed, read the delay stage's state as of the noted batch (the
        later batches' deltas wait in ``_pending``, so the count is exact whenever it is read),
        and probe the dead-letter topic every ``probe_interval`` seconds, on daemon threads."""
        from dlq_engine.job import probes

        try:
            base_batch = probes.last_committed_batch(spark, checkpoint)
        except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
            log.warning("cannot list the checkpoint's commits: %s", error)
            self.probe_errors.labels(self.policy, "held").inc()
            self.held_unknown()
            base_batch = None
            read_held = False
        else:
            read_held = True
            if base_batch is not None:
                self._replayed = base_batch + 1

        def read_base() -> None:
            if base_batch is not None:
                self._own_batch.wait()
                if self._stop.is_set():
                    return
            try:
                held = 0 if base_batch is None else probes.held_retries(spark, checkpoint, base_batch)
            except Exception as error:  # noqa: BLE001 - the metric stays absent, the job runs on
                log.warning("cannot read the delay stage's state: %s", str(error).splitlines()[0][:300])
                self.probe_errors.labels(self.policy, "held").inc()
                self.held_unknown()
                return
            self.held_base(base_batch, held)

        if read_held:
            self._thread(read_base, "spark-dlq-held")
        # The dead-letter topic probe reads Kafka (a Pulsar write failure fails the batch as well).
        if self.model is not None and self.model.dead_letter.strategy == "topic" and not self.model.is_pulsar:
            topic, bootstrap = self.model.dead_letter_topic, self.model.broker.bootstrap_servers
            self._thread(lambda: self._probe_loop(spark, bootstrap, client, topic), "spark-dlq-probe")

    def _probe_loop(self, spark: Any, bootstrap: str, client: dict[str, str], topic: str) -> None:
        from dlq_engine.job import probes

        probe: probes.TopicProbe | None = None
        try:
            while not self._stop.is_set():
                try:
                    probe = probe or probes.TopicProbe(spark, bootstrap, client)
                    self.topic_size(probe.size(topic))
                except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
                    log.warning("cannot probe %s: %s", topic, str(error).splitlines()[0][:300])
                    self.probe_errors.labels(self.policy, "dead_letter_topic").inc()
                self._stop.wait(self.probe_interval)
        finally:
            if probe is not None:
                with contextlib.suppress(Exception):  # the JVM may be gone at shutdown
                    probe.close()

    def topic_size(self, size: Any, *, now: float | None = None) -> None:
        self.dead_letter_records.labels(self.policy).set(size.records)
        age = 0.0 if size.oldest_ms is None else max(0.0, (now or time.time()) - size.oldest_ms / 1000)
        self.dead_letter_age.labels(self.policy).set(age)

    def _thread(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def close(self) -> None:
        self._stop.set()
        self._own_batch.set()
        for thread in self._threads:
            thread.join(timeout=5)


def _topic(description: str) -> str | None:
    """The topic of a Kafka source's description (``KafkaV2[Subscribe[orders]]``)."""
    match = _KAFKA_SUBSCRIBE.search(description or "")
    return match.group(1) if match else None


def _read(record: Written, start: str | None, end: str | None) -> bool:
    """Whether a batch that read from ``start`` to ``end`` (a Kafka source's offsets in the
    progress, JSON ``{"topic": {"0": 42}}``; no ``start`` in a query's very first batch) read
    ``record``."""
    try:
        starts, ends = json.loads(start or "{}"), json.loads(end or "{}")
    except ValueError:
        return False
    partition = str(record.partition)
    until = (ends.get(record.topic) or {}).get(partition)
    since = (starts.get(record.topic) or {}).get(partition)
    return until is not None and (since is None or int(since) <= record.offset) and record.offset < int(until)


def _offsets_behind(end: str | None, latest: str | None) -> int:
    """Records between a batch's end offsets and the latest offsets, over partitions (JSON
    ``{"topic": {"0": 42}}`` as in the progress)."""
    if not end or not latest:
        return 0
    try:
        ends, latests = json.loads(end), json.loads(latest)
    except ValueError:
        return 0
    behind = 0
    for topic, partitions in latests.items():
        for partition, offset in partitions.items():
            done = (ends.get(topic) or {}).get(partition)
            if done is not None:
                behind += max(0, int(offset) - int(done))
    return behind


def _finished_at(progress: Any) -> float:
    """When a batch finished: its start (``timestamp``) plus its duration, Unix seconds."""
    started = datetime.datetime.fromisoformat(str(progress.timestamp).replace("Z", "+00:00")).timestamp()
    return started + int((progress.durationMs or {}).get("triggerExecution") or 0) / 1000


#: Kafka client errors that mean a write failed (the producer's; a timeout only when it is the
#: producer's "Expiring N record(s)"). Spark's Kafka sink fails the task with one of them.
_WRITE_ERRORS = re.compile(
    r"org\.apache\.kafka\.common\.errors\.(RecordTooLarge|RecordBatchTooLarge|NotEnoughReplicas"
    r"|NotEnoughReplicasAfterAppend|TopicAuthorization|InvalidRecord|InvalidTopic|PolicyViolation"
    r"|UnknownTopicOrPartition)Exception"
    r"|org\.apache\.kafka\.common\.errors\.TimeoutException: Expiring \d+ record"
)


def sink_failure(error_text: str, policy: DeadLetterPolicy | None) -> str | None:
    """Which sink topic a query failure's text blames for a failed write, None when it is not
    a write failure. A producer error names the partition it failed on (``topic-0``) only
    sometimes (a timeout does, a refused record does not): then ``unknown``."""
    if not _WRITE_ERRORS.search(error_text):
        return None
    if policy is None:
        return "unknown"
    for kind, topic in (
        ("dead_letter", policy.dead_letter_topic),
        ("retry", policy.retry_topic),
        ("output", policy.output.topic),
    ):
        if topic and re.search(rf"(?<![\w.-]){re.escape(topic)}-\d+(?![\w.-])", error_text):
            return kind
    return "unknown"
