"""Timed runs on a SparkSession: the engine's first pass over a topic, and a plain Spark copy
(straight, or through an identity ``mapInArrow``).

Both are timed the same way: from just before the query starts to the end of the micro-batch
that brings the count to N, as Spark reports it in the batch's progress (its start plus its
``triggerExecution`` duration). So query start-up is included for both, and the driver's
polling interval is not.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import batch_end, create_topics, log, progress_summary, unique
from dlq_engine.job.pipeline import RunOptions
from dlq_engine.job.runner import Run
from dlq_engine.model.policy import parse_policy

PRODUCER_OPTIONS = {"kafka.acks": "all", "kafka.enable.idempotence": "true"}


def policy_document(
    *,
    name: str,
    bootstrap: str,
    source: str,
    retry: str,
    dlq: str,
    output: str,
    entrypoint: str,
    mode: str,
    trigger: str,
    max_redeliver: int,
    backoff: dict[str, Any],
) -> dict[str, Any]:
    return {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterPolicy",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {
            "source": {"topic": source, "subscription": "bench", "startingOffsets": "earliest"},
            "broker": {"bootstrapServers": bootstrap},
            "processor": {"entrypoint": entrypoint, "mode": mode},
            "output": {"topic": output},
            "retry": {"topic": retry, "maxRedeliverCount": max_redeliver, "backoff": backoff},
            "deadLetter": {"topic": dlq, "strategy": "topic", "includeStackTrace": True},
            "spark": {"trigger": trigger},
        },
    }


def engine_topics(bootstrap: str, partitions: int) -> dict[str, str]:
    names = {kind: unique(kind) for kind in ("retry", "dlq", "out")}
    create_topics(bootstrap, names.values(), partitions)
    return names


class EngineRun:
    """The engine on ``spark``, started in the background (as the CLI runs it, minus signals)."""

    def __init__(
        self,
        spark: Any,
        bootstrap: str,
        source: str,
        *,
        partitions: int,
        entrypoint: str,
        mode: str,
        checkpoint: Path,
        trigger: str = "500ms",
        max_redeliver: int = 2,
        backoff: dict[str, Any] | None = None,
        ordering: str = "none",
        broker: dict[str, str] | None = None,
        topics: dict[str, str] | None = None,
    ) -> None:
        # ``broker`` and ``topics``: another broker's ``spec.broker`` and the retry, dlq and out
        # topics made there (bench/pulsar_throughput.py); else this Kafka broker's new topics.
        self.topics = topics or engine_topics(bootstrap, partitions)
        document = policy_document(
            name=unique("engine"),
            bootstrap=bootstrap,
            source=source,
            retry=self.topics["retry"],
            dlq=self.topics["dlq"],
            output=self.topics["out"],
            entrypoint=entrypoint,
            mode=mode,
            trigger=trigger,
            max_redeliver=max_redeliver,
            backoff=backoff or {"type": "fixed", "delay": "200ms"},
        )
        if ordering != "none":
            document["spec"]["source"]["ordering"] = ordering
        if broker is not None:
            document["spec"]["broker"] = broker
        self.policy = parse_policy(document)
        self.run = Run(spark, self.policy, RunOptions(checkpoint=str(checkpoint)))
        self.status: int | None = None
        self.started = 0.0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from pyspark import InheritableThread

        self.started = time.time()
        self.run.start()
        self._thread = InheritableThread(target=self._wait, daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        self.status = self.run.wait()

    def counts(self) -> dict[str, int]:
        return dict(self.run.totals.counts)

    def source_done(self) -> int:
        """Source messages routed so far in committed batches (redeliveries not counted)."""
        c = self.run.totals.counts
        return c["total"] - c["redelivered"]

    def wait_source(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.source_done() < n:
            if self.status is not None:
                raise RuntimeError(f"the engine stopped (status {self.status}) at {self.counts()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the engine routed {self.source_done()} of {n} in {timeout:.0f}s")
            time.sleep(0.1)

    def first_pass_end(self, n: int) -> tuple[float, list[dict[str, Any]]]:
        """When the batch that brought the source count to ``n`` ended (epoch s)."""
        from dlq_engine.job.pipeline import METRICS, STATS
        from dlq_engine.routing.stats import observed_row

        assert self.run.query is not None
        progresses = sorted(self.run.query.recentProgress, key=lambda p: int(p.batchId))
        seen = 0
        for p in progresses:
            metrics = p.observedMetrics.get(METRICS)
            if metrics is None:
                continue
            row = observed_row(metrics[STATS])
            seen += int(row.get("total") or 0) - int(row.get("redelivered") or 0)
            if seen >= n:
                return batch_end(p), progress_summary(progresses)
        raise RuntimeError(f"no batch progress brought the count to {n} (saw {seen})")

    def stop(self) -> None:
        self.run.stop()
        if self._thread is not None:
            self._thread.join(120)


def engine_first_pass(
    spark: Any,
    bootstrap: str,
    source: str,
    n: int,
    *,
    partitions: int,
    mode: str,
    entrypoint: str,
    checkpoint: Path,
    timeout: float = 1800.0,
    ordering: str = "none",
    broker: dict[str, str] | None = None,
    topics: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Messages per second of the engine's first pass over the ``n`` messages of ``source``."""
    engine = EngineRun(
        spark,
        bootstrap,
        source,
        partitions=partitions,
        entrypoint=entrypoint,
        mode=mode,
        checkpoint=checkpoint,
        ordering=ordering,
        broker=broker,
        topics=topics,
    )
    try:
        engine.start()
        engine.wait_source(n, timeout)
        end, batches = engine.first_pass_end(n)
        counts = engine.counts()
    finally:
        engine.stop()
    seconds = end - engine.started
    return {
        "seconds": seconds,
        "rate": n / seconds,
        "counts": counts,
        "batches": batches,
        "topics": engine.topics,
    }


def _identity(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches


def spark_copy(
    spark: Any,
    bootstrap: str,
    source: str,
    n: int,
    *,
    partitions: int,
    checkpoint: Path,
    through_arrow: bool = False,
) -> dict[str, Any]:
    """A plain Kafka-to-Kafka copy (key, value, headers) with the available-now trigger.

    ``through_arrow``: every row goes to a Python worker and back through an identity
    ``mapInArrow`` (Spark's Arrow batches, unchanged): the least any PySpark router pays, so
    the ceiling of what routing in Python can reach on the same session."""
    target = unique("copy")
    create_topics(bootstrap, [target], partitions)
    frame = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
        .load()
        .select("key", "value", "headers")
    )
    if through_arrow:
        frame = frame.mapInArrow(_identity, frame.schema)
    writer = (
        frame.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**PRODUCER_OPTIONS)
        .option("topic", target)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    started = time.time()
    query = writer.start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the Spark copy failed: {query.exception()}")
    progresses = sorted(query.recentProgress, key=lambda p: int(p.batchId))
    copied = sum(int(p.numInputRows) for p in progresses)
    if copied < n:
        raise RuntimeError(f"the Spark copy read {copied} of {n} messages")
    end = max(batch_end(p) for p in progresses if int(p.numInputRows) > 0)
    seconds = end - started
    log(f"spark copy{' through mapInArrow' if through_arrow else ''}: {n} in {seconds:.2f}s")
    return {
        "seconds": seconds,
        "rate": n / seconds,
        "counts": {"copied": copied},
        "batches": progress_summary(progresses),
        "topics": {"copy": target},
    }
