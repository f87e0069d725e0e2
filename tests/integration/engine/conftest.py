"""An engine harness: run a policy on the shared SparkSession against the shared broker."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark import InheritableThread

from dlq_engine.job.metrics import EngineMetrics
from dlq_engine.job.pipeline import RunOptions
from dlq_engine.job.runner import Run
from dlq_engine.model.policy import DeadLetterPolicy, parse_policy
from spark_dlq_devtools.pulsar import PulsarBroker
from tests.helpers import engine_policy, pulsar_engine_policy
from tests.integration.engine.brokers import BrokerUnderTest


class Engine:
    """A running engine. ``status`` is set when the query ends (as the CLI's exit status)."""

    def __init__(
        self,
        spark: Any,
        policy: DeadLetterPolicy,
        checkpoint: Path,
        once: bool,
        metrics: EngineMetrics | None = None,
        pulsar_client_dir: Path | None = None,
    ) -> None:
        self.policy = policy
        options = RunOptions(
            checkpoint=str(checkpoint),
            once=once,
            pulsar_client_dir=str(pulsar_client_dir) if pulsar_client_dir else None,
        )
        self.run = Run(spark, policy, options, metrics)
        self.metrics = metrics
        self.status: int | None = None
        if metrics is not None:  # as the CLI does: the held retries, the dead-letter topic
            metrics.watch(spark, str(checkpoint), {})
        self.run.start()
        self._thread = InheritableThread(target=self._wait, daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        self.status = self.run.wait()

    def stop(self) -> int | None:
        self.run.stop()
        self._thread.join(60)
        if self.metrics is not None:
            self.metrics.close()
        return self.status

    def wait_for(self, timeout: float = 120.0, **counts: int) -> None:
        """Wait until the batches that finished so far add up to at least ``counts`` (e.g.
        ``total=2``). A batch is counted once its offsets are committed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            totals = self.run.totals.counts
            if all(totals[name] >= value for name, value in counts.items()):
                return
            if self.status is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"counts {self.run.totals.counts} never reached {counts} (status {self.status})")

    def rows_read(self, topic: str) -> int:
        """The records read from ``topic`` by the batches in the query's recent progress."""
        query = self.run.query
        if query is None:
            return 0
        return sum(
            int(source.numInputRows)
            for progress in query.recentProgress
            for source in progress.sources
            if f"[{topic}]" in source.description
        )

    def describe(self) -> str:
        """What the query is doing, for a failure message: its status, its last batches, its
        error and, if a batch is stuck, where the stream thread is."""
        query = self.run.query
        if query is None:
            return "no query"
        batches = [(p.batchId, p.numInputRows, dict(p.durationMs)) for p in query.recentProgress[-5:]]
        error = query.exception() if not query.isActive else None
        return (
            f"status {query.status}, exit status {self.status}, counts {self.run.totals.counts}, "
            f"last batches {batches}, error {error}"
        )

    def join(self, timeout: float) -> int | None:
        self._thread.join(timeout)
        return self.status


@pytest.fixture
def topics(make_topic: Callable[..., str]) -> Callable[..., dict[str, str]]:
    """Create source, retry, DLQ and output topics for one test."""

    def create(partitions: int = 1) -> dict[str, str]:
        source = make_topic("src", partitions=partitions)
        return {
            "source": source,
            "retry": make_topic("retry", partitions=partitions),
            "dlq": make_topic("dlq", partitions=partitions),
            "output": make_topic("out", partitions=partitions),
        }

    return create


@pytest.fixture
def engine(spark: Any, bootstrap_servers: str, tmp_path: Path) -> Iterator[Callable[..., Engine]]:
    started: list[Engine] = []

    def start(
        names: dict[str, str],
        *,
        once: bool = False,
        checkpoint: Path | None = None,
        metrics: Callable[[DeadLetterPolicy], EngineMetrics] | None = None,
        **spec: Any,
    ) -> Engine:
        policy = parse_policy(engine_policy(names, bootstrap_servers, **spec))
        running = Engine(
            spark, policy, checkpoint or tmp_path / "checkpoint", once, metrics(policy) if metrics else None
        )
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@pytest.fixture
def pulsar_topics(make_pulsar_topic: Callable[..., str]) -> Callable[..., dict[str, str]]:
    """Create source, retry, DLQ and output topics on the session's Pulsar broker for one test
    (``partitions=0``: non-partitioned)."""

    def create(partitions: int = 0) -> dict[str, str]:
        return {
            role: make_pulsar_topic(prefix, partitions=partitions)
            for role, prefix in (("source", "src"), ("retry", "retry"), ("dlq", "dlq"), ("output", "out"))
        }

    return create


@pytest.fixture
def pulsar_engine(spark: Any, pulsar: PulsarBroker, tmp_path: Path) -> Iterator[Callable[..., Engine]]:
    """``engine`` on the session's Pulsar broker; ``client_dir``: the client's settings (a
    mounted ``broker.secretRef``), with ``tls`` its TLS listener (``pulsar+ssl://``);
    ``document``: a whole policy document instead of the one made from ``names`` and ``spec``."""
    started: list[Engine] = []

    def start(
        names: dict[str, str],
        *,
        once: bool = False,
        checkpoint: Path | None = None,
        client_dir: Path | None = None,
        tls: bool = False,
        document: dict[str, Any] | None = None,
        **spec: Any,
    ) -> Engine:
        policy = parse_policy(document or pulsar_engine_policy(names, pulsar, tls=tls, **spec))
        running = Engine(
            spark, policy, checkpoint or tmp_path / "checkpoint", once, pulsar_client_dir=client_dir
        )
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@pytest.fixture(params=["kafka", "pulsar"])
def broker(request: pytest.FixtureRequest) -> BrokerUnderTest:
    """The test once on the session's Kafka and once on its Pulsar (``brokers.py``); a broker
    is started only when a test first asks for it."""
    if request.param == "kafka":
        return BrokerUnderTest(
            "kafka",
            request.getfixturevalue("topics"),
            request.getfixturevalue("engine"),
            bootstrap_servers=request.getfixturevalue("bootstrap_servers"),
        )
    return BrokerUnderTest(
        "pulsar",
        request.getfixturevalue("pulsar_topics"),
        request.getfixturevalue("pulsar_engine"),
        pulsar=request.getfixturevalue("pulsar"),
    )
