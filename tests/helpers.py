"""Small helpers shared by integration and e2e tests: produce, consume, build policies."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from confluent_kafka import Consumer, Producer, TopicPartition

from tests import policy_builder

#: The environment of the drivers the local spark-operator runner starts for tests: a new driver
#: waits at most 6 s (not 30) for the checkpoint lease of one that ended without releasing it
#: (killed; a stopped one releases it, whether its SIGTERM reached the engine or its JVM); a
#: heartbeat every 2 s (not 10) brings a stall or the ordering state to the operator sooner.
FAST_DRIVER_ENV: Final = {"SPARK_DLQ_CHECKPOINT_LEASE": "6", "SPARK_DLQ_HEARTBEAT_INTERVAL": "2"}
#: For engines that never race another for their checkpoint (one at a time, or the next started
#: after the last stopped): the claim on the local disk is read back after 0.2 s, not 2 s.
QUICK_LEASE_ENV: Final = {"SPARK_DLQ_CHECKPOINT_SETTLE": "0.2"}

#: Delta Lake settings for the tests' drivers: a snapshot of a dead-letter table (read for each
#: idempotent write's transaction ids, and for each read) is rebuilt in 2 tasks, not Delta's
#: default 50, which on a 2-core local driver cost seconds per table write or read.
DELTA_TEST_CONF: Final = {"spark.databricks.delta.snapshotPartitions": "2"}


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value.decode() if value is not None else None
        return None


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    headers: list[tuple[str, bytes]] | None = None,
    partition: int | None = None,
) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    count = 0
    for key, value in records:
        kwargs: dict[str, Any] = {"key": key, "value": value, "headers": headers or []}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
        count += 1
    assert producer.flush(60) == 0
    return count


def read_all(
    bootstrap: str, topic: str, *, expect: int | None = None, timeout: float = 60.0, settle: float = 0.0
) -> list[Record]:
    """Every record of ``topic`` from the beginning (no consumer group offsets used). Waits until
    ``expect`` records are there (or ``timeout``), then ``settle`` seconds more for stragglers.
    Without ``expect``: every record up to the topic's end offsets now, a fact (after the writer
    stopped, ``[]`` proves that it wrote nothing), not what a first poll happened to fetch."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "spark-dlq-tests-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = [TopicPartition(topic, p, 0) for p in metadata.topics[topic].partitions]
        unread: dict[int, int] = {}  # partition: its end offset, until read to it
        if expect is None:
            for partition in partitions:
                low, high = consumer.get_watermark_offsets(partition, timeout=10)
                if high > low:
                    unread[partition.partition] = high
        consumer.assign(partitions)
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        settle_until: float | None = None
        while time.monotonic() < deadline:
            if expect is None and not unread:
                break
            message = consumer.poll(0.3)
            if message is not None and message.error() is None:
                records.append(
                    Record(
                        message.topic(),
                        message.partition(),
                        message.offset(),
                        message.key(),
                        message.value(),
                        list(message.headers() or []),
                    )
                )
                if message.partition() in unread and message.offset() + 1 >= unread[message.partition()]:
                    del unread[message.partition()]
                continue
            if message is None and unread:
                # A transaction's marker or a compacted gap can end a partition: its position,
                # not the last record's offset, says it was read to the end.
                for position in consumer.position([TopicPartition(topic, p) for p in unread]):
                    if position.offset >= unread[position.partition]:
                        del unread[position.partition]
            if expect is not None and len(records) >= expect:
                if settle_until is None:
                    settle_until = time.monotonic() + settle
                if time.monotonic() >= settle_until:
                    break
        if unread:
            raise AssertionError(f"{topic}: not read to its end offsets within {timeout}s: {unread}")
        return records
    finally:
        consumer.close()


BASE_POLICY: dict[str, Any] = {
    "apiVersion": "sparkdlq.io/v1alpha1",
    "kind": "DeadLetterPolicy",
    "metadata": {"name": "test-policy", "namespace": "tests"},
    "spec": {
        "source": {"topic": "", "subscription": "tests", "startingOffsets": "earliest"},
        "broker": {"bootstrapServers": ""},
        "processor": {"entrypoint": "tests.processors.scripted:process"},
        "retry": {"maxRedeliverCount": 2, "backoff": {"type": "fixed", "delay": "500ms"}},
        "spark": {"trigger": "500ms"},
    },
}


def engine_policy(names: Mapping[str, str], bootstrap: str, **spec: Any) -> dict[str, Any]:
    """A policy document for an engine test: ``names`` holds the source, retry, dlq and output
    topics; ``spec`` sections are merged as in ``policy_document``."""
    document = policy_document(**spec)
    s = document["spec"]
    s["source"]["topic"] = names["source"]
    s["broker"]["bootstrapServers"] = bootstrap
    s["retry"]["topic"] = names["retry"]
    s.setdefault("deadLetter", {})["topic"] = names["dlq"]
    s.setdefault("output", {})["topic"] = names["output"]
    return document


def pulsar_engine_policy(
    names: Mapping[str, str], pulsar: Any, *, tls: bool = False, **spec: Any
) -> dict[str, Any]:
    """``engine_policy`` on a Pulsar broker (a ``spark_dlq_devtools.pulsar.PulsarBroker``);
    ``tls``: its TLS listeners."""
    document = engine_policy(names, "", **spec)
    document["spec"]["broker"] = {
        "type": "pulsar",
        "serviceUrl": pulsar.service_url_tls if tls else pulsar.service_url,
        "adminUrl": pulsar.admin_url_tls if tls else pulsar.admin_url,
    }
    return document


def policy_document(**spec: Any) -> dict[str, Any]:
    """BASE_POLICY with top-level spec sections merged in (one level deep)."""
    return policy_builder.policy_document(base=BASE_POLICY, **spec)


def non_root_uid(user: str) -> bool:
    """Whether an image's USER (``uid`` or ``uid:gid``) lets ``runAsNonRoot`` admit a pod that
    names no user: the kubelet can only check a number, and it must not be 0."""
    uid = user.split(":")[0]
    return uid.isdigit() and int(uid) != 0
