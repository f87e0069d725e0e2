"""Nothing lost when a dead-letter write fails: the batch fails, its offsets stay uncommitted,
and once the topic takes writes again everything arrives.

The DLQ topic refuses the dead letters because each is larger than its ``max.message.bytes``
(a realistic outage: a team's dead letters, headers and stack traces included, outgrow the
topic). The limit stays above the producer's ``batch.size`` (16 KiB): below it, kafka-clients
3.9 re-splits a refused batch of small records into batches of the same size forever
(KAFKA-8350, fixed only in Kafka 4.2, which Spark 4.0's connector cannot load), and a
flush that waits for them never ends. docs/reliability.md ("DLQ outage") has the whole story,
including the data loss kafka-clients 3.9.0 caused here (fixed by pinning 3.9.2).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from dlq_engine.exits import EXIT_FAILED, EXIT_OK
from dlq_engine.job.metrics import EngineMetrics
from tests.helpers import produce, read_all


def _set_max_message_bytes(bootstrap: str, topic: str, value: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("max.message.bytes", str(value), incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    # The partition applies a config change some time after the controller accepts it (and
    # after DescribeConfigs shows it): probe with a real write until the log behaves as set.
    refuse = value < len(PROBE_VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        errors: list[Any] = []
        producer.produce(
            topic, key=PROBE, value=PROBE_VALUE, on_delivery=lambda e, m, sink=errors: sink.append(e)
        )
        producer.flush(10)
        refused = bool(errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE)
        if refused == refuse:
            return
        time.sleep(0.2)
    raise AssertionError(f"max.message.bytes={value} never took effect on {topic}")


PROBE = b"probe"
#: The DLQ's limit while it refuses: above the producer's batch.size (16384), below a dead letter.
LIMIT = 20_000
PROBE_VALUE = b"p" * (LIMIT + 4_000)
BIG = b"x" * 30_000
DEAD_LETTERS = 50


def test_unwritable_dead_letter_topic_fails_the_batch_and_loses_nothing(
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    names = topics()
    checkpoint = tmp_path / "cp"
    produce(bootstrap_servers, names["source"], [(b"a", b"ok:1"), (b"b", b"ok:2")])
    metrics: list[EngineMetrics] = []

    def with_metrics(policy: Any) -> EngineMetrics:
        metrics.append(EngineMetrics(policy))
        return metrics[-1]

    first = engine(names, checkpoint=checkpoint, metrics=with_metrics)
    first.wait_for(total=2)

    # The DLQ now refuses every dead letter: each is larger than its max.message.bytes.
    _set_max_message_bytes(bootstrap_servers, names["dlq"], LIMIT)
    doomed = [(b"dead-%03d" % i, b"terminate:%d " % i + BIG) for i in range(DEAD_LETTERS)]
    produce(bootstrap_servers, names["source"], [*doomed, (b"d", b"ok:3"), (b"f", b"ok:4")])
    assert first.join(180) == EXIT_FAILED
    failure = str(first.run.query.exception())
    assert "RecordTooLargeException" in failure, failure
    assert first.run.totals.counts["total"] == 2  # the failed batch was never committed
    # ... and the metrics count one failed Kafka write (the refusal names no topic).
    failures = {
        kind: metrics[0].registry.get_sample_value(
            "spark_dlq_sink_write_failures_total", {"policy": first.policy.qualified_name, "topic": kind}
        )
        for kind in ("dead_letter", "retry", "output", "unknown")
    }
    assert failures == {"dead_letter": 0, "retry": 0, "output": 0, "unknown": 1}

    _set_max_message_bytes(bootstrap_servers, names["dlq"], 1024 * 1024)
    second = engine(names, checkpoint=checkpoint, once=True)
    assert second.join(180) == EXIT_OK
    # Stopped: what the topics hold is all it wrote.
    dead = read_all(bootstrap_servers, names["dlq"])
    assert len(dead) >= DEAD_LETTERS + 1  # + probe
    output = read_all(bootstrap_servers, names["output"])
    # Every dead letter (at-least-once: one may arrive twice).
    assert sorted({r.key for r in dead if r.key != PROBE}) == [key for key, _ in doomed]
    # d and f may have been written before the failure and again after it (at-least-once).
    assert {r.value for r in output} == {b"1", b"2", b"3", b"4"}
