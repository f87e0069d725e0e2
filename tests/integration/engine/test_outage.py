"""Nothing lost when a dead-letter write fails: the batch fails, its offsets stay uncommitted,
and once the topic takes writes again everything arrives."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from dlq_engine.job.runner import EXIT_FAILED, EXIT_OK
from tests.helpers import produce, read_all


def _set_max_message_bytes(bootstrap: str, topic: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("max.message.bytes", value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    # The partition applies a config change some time after the controller accepts it (and
    # after DescribeConfigs shows it): probe with a real write until the log behaves as set.
    refuse = int(value) < 100
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        errors: list[Any] = []
        producer.produce(topic, key=PROBE, value=b"probe" * 10, on_delivery=lambda e, m, sink=errors: sink.append(e))
        producer.flush(10)
        refused = bool(errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE)
        if refused == refuse:
            return
        time.sleep(0.2)
    raise AssertionError(f"max.message.bytes={value} never took effect on {topic}")


PROBE = b"probe"


def test_unwritable_dead_letter_topic_fails_the_batch_and_loses_nothing(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    names = topics()
    checkpoint = tmp_path / "cp"
    produce(bootstrap_servers, names["source"], [(b"a", b"ok:1"), (b"b", b"ok:2")])
    first = engine(names, checkpoint=checkpoint)
    first.wait_for(total=2)

    # The DLQ now refuses every record: too large for its max.message.bytes.
    _set_max_message_bytes(bootstrap_servers, names["dlq"], "16")
    produce(bootstrap_servers, names["source"],
            [(b"c", b"terminate:x"), (b"d", b"ok:3"), (b"e", b"terminate:y"), (b"f", b"ok:4")])
    assert first.join(300) == EXIT_FAILED
    assert "RecordTooLarge" in str(first.run.query.exception())
    assert first.run.totals.counts["total"] == 2  # the failed batch was never committed

    _set_max_message_bytes(bootstrap_servers, names["dlq"], str(1024 * 1024))
    second = engine(names, checkpoint=checkpoint, once=True)
    assert second.join(180) == EXIT_OK
    dead = read_all(bootstrap_servers, names["dlq"], expect=3, timeout=30, settle=1)  # + 1 probe
    output = read_all(bootstrap_servers, names["output"], expect=4, timeout=30, settle=1)
    assert sorted(r.key for r in dead if r.key != PROBE) == [b"c", b"e"]
    # d and f may have been written before the failure and again after it (at-least-once).
    assert {r.value for r in output} == {b"1", b"2", b"3", b"4"}
