"""Where a redrive reads its dead letters and writes them, by broker: one ``RedriveTopic`` each.

A redrive (``job.redrive``) works on positions, one number per partition of the dead-letter topic,
and never on a broker's own terms: its snapshot (the topic's end when it started), where each
chunk starts and ends, what its progress file keeps. On Kafka a position is an offset: a chunk reads
``[start, end)``, offsets are contiguous, so a chunk's size is arithmetic and what the broker
deleted before it was read can be counted (``contiguous``). On Pulsar a position is the message id
of an entry packed into one number (``model.pulsar_ids.entry_position``; -1 before the first):
a chunk reads the entries after ``start`` up to ``end`` inclusive, the message ids are not
contiguous, so where a chunk of so many entries ends is asked of the broker (the connector's
``EntryLimit``, as a micro-batch's end), and nothing deleted can be counted. Either way a position
only grows as the partition's messages come, and ``start < end`` while something is left.

Both read with the engine's own connector (Spark's Kafka source; the JVM Pulsar connector's batch
read, non-durable readers: no consumer group joined, no subscription made or moved) into the Kafka
source's columns, and write with its sink: on Pulsar the retry topic's letters go with Pulsar's
delayed delivery at their ``dlq.deliver.at`` (``pulsar_connector.write_options``), as the engine
writes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any, Final, Protocol

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

from dlq_engine.job import pulsar_connector
from dlq_engine.job.pipeline import RunOptions, client_properties, kafka_options
from dlq_engine.job.preflight import admin_client
from dlq_engine.job.pulsar_topics import TOPICS_CLASS
from dlq_engine.model.policy import DeadLetterPolicy, pulsar_topic
from dlq_engine.model.pulsar_ids import BEFORE_FIRST_ENTRY, entry_layout, entry_positions

#: How long the broker may take to answer a look-up of the topic's end.
TIMEOUT_MS: Final = 15_000


class RedriveTopicError(RuntimeError):
    """The dead-letter topic cannot be read: the line to print."""


class RedriveTopic(Protocol):
    """A policy's dead-letter topic and where a redrive writes, on one broker."""

    #: Positions are offsets, one per record (Kafka): records the broker deleted leave a gap that
    #: can be counted, and a snapshot's size is known before it is read.
    contiguous: bool

    def open(self) -> AbstractContextManager[None]:
        """The clients ``snapshot`` and ``earliest`` need, while the context lasts."""
        ...

    def snapshot(self) -> tuple[dict[int, int], dict[int, int]]:
        """Each partition's first position to read from and its end now (the snapshot)."""
        ...

    def earliest(self, partitions: Sequence[int]) -> dict[int, int]:
        """Each partition's earliest offset now (``contiguous`` only): what lies below is gone."""
        ...

    def chunk_end(self, start: Mapping[int, int], end: Mapping[int, int], size: int) -> dict[int, int]:
        """Where a chunk from ``start`` towards ``end`` stops after about ``size`` records or
        entries in all, shared by the partitions."""
        ...

    def read(self, start: Mapping[int, int], end: Mapping[int, int]) -> DataFrame:
        """The records between ``start`` and ``end``, with the Kafka source's columns."""
        ...

    def write(self, records: DataFrame) -> None:
        """Write ``topic, key, value, headers`` rows; returns once the broker has stored them all."""
        ...


def redrive_topic(
    spark: SparkSession,
    policy: DeadLetterPolicy,
    *,
    kafka_client_dir: str | None = None,
    pulsar_client_dir: str | None = None,
) -> RedriveTopic:
    """The policy's dead-letter topic on its broker."""
    if policy.is_pulsar:
        return PulsarRedriveTopic(spark, policy, pulsar_client_dir)
    return KafkaRedriveTopic(spark, policy, kafka_client_dir)


def destination_topic(policy: DeadLetterPolicy, destination_type: str, topic: str) -> str:
    """The topic a redrive writes to: ``destination.topic`` for type ``topic``, else the policy's
    retry topic. On Pulsar ``destination.topic`` (a plain name) is in the tenant and namespace of
    the policy's dead-letter topic: a redrive writes nowhere else."""
    if destination_type != "topic":
        return policy.retry_topic
    if not policy.is_pulsar:
        return topic
    home = pulsar_topic(policy.dead_letter_topic)
    return f"persistent://{home.tenant}/{home.namespace}/{topic}"


class KafkaRedriveTopic:
    """A Kafka dead-letter topic: offsets from the connector's admin client, read with Spark's
    Kafka batch source, written with its sink (all in-sync replicas, idempotent)."""

    contiguous = True

    def __init__(self, spark: SparkSession, policy: DeadLetterPolicy, client_dir: str | None) -> None:
        self.spark, self.policy = spark, policy
        self.options = kafka_options(policy, RunOptions(checkpoint="", kafka_client_dir=client_dir))
        self.client = client_properties(client_dir)
        self._admin: Any = None

    @contextmanager
    def open(self) -> Iterator[None]:
        with ExitStack() as stack:
            self._admin = stack.enter_context(admin_client(self.spark, self.policy, dict(self.client)))
            stack.callback(setattr, self, "_admin", None)
            yield

    def _jvm(self) -> Any:
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        return jvm

    def snapshot(self) -> tuple[dict[int, int], dict[int, int]]:
        jvm, topic = self._jvm(), self.policy.dead_letter_topic
        unit = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
        try:
            description = (
                self._admin.describeTopics(jvm.java.util.List.of(topic)).allTopicNames().get(15_000, unit)
            )
        except Exception:  # noqa: BLE001 - py4j wraps every Java exception
            raise RedriveTopicError(
                f"the dead-letter topic {topic!r} does not exist on {self.policy.broker.bootstrap_servers}"
            ) from None
        partitions = [int(p.partition()) for p in description.get(topic).partitions()]
        specs = jvm.org.apache.kafka.clients.admin.OffsetSpec
        earliest = self._offsets(partitions, specs.earliest())
        end = self._offsets(partitions, specs.latest())
        return {p: min(earliest.get(p, 0), end[p]) for p in end}, end

    def earliest(self, partitions: Sequence[int]) -> dict[int, int]:
        return self._offsets(partitions, self._jvm().org.apache.kafka.clients.admin.OffsetSpec.earliest())

    def _offsets(self, partitions: Sequence[int], spec: Any) -> dict[int, int]:
        """The offset ``spec`` (``OffsetSpec.earliest()``, ``latest()``) of each of ``partitions``."""
        jvm, topic = self._jvm(), self.policy.dead_letter_topic
        wanted = jvm.java.util.HashMap()
        for p in partitions:
            wanted.put(jvm.org.apache.kafka.common.TopicPartition(topic, p), spec)
        result = (
            self._admin.listOffsets(wanted).all().get(15_000, jvm.java.util.concurrent.TimeUnit.MILLISECONDS)
        )
        return {int(tp.partition()): int(info.offset()) for tp, info in result.items()}

    def chunk_end(self, start: Mapping[int, int], end: Mapping[int, int], size: int) -> dict[int, int]:
        share = max(1, size // max(1, len(start)))
        return {p: min(end[p], start[p] + share) for p in start}

    def read(self, start: Mapping[int, int], end: Mapping[int, int]) -> DataFrame:
        topic = self.policy.dead_letter_topic
        wanted = [p for p in start if end[p] > start[p]]
        return (
            self.spark.read.format("kafka")
            .options(**self.options)
            .option("assign", json.dumps({topic: wanted}))
            .option("startingOffsets", json.dumps({topic: {str(p): start[p] for p in wanted}}))
            .option("endingOffsets", json.dumps({topic: {str(p): end[p] for p in wanted}}))
            .option("includeHeaders", "true")
            .option("failOnDataLoss", "false")
            .load()
        )

    def write(self, records: DataFrame) -> None:
        records.write.format("kafka").options(**self.options).option("kafka.acks", "all").option(
            "kafka.enable.idempotence", "true"
        ).save()


class PulsarRedriveTopic:
    """A Pulsar dead-letter topic, through the engine's JVM connector with the policy's client
    settings (``client_dir``, a mounted ``broker.secretRef``): the snapshot is each partition's
    last entry (``PulsarTopics.lastPositions``), a chunk's end is capped by entries
    (``PulsarTopics.chunkEnds``), and both, like the batch read, use non-durable readers."""

    contiguous = False

    def __init__(self, spark: SparkSession, policy: DeadLetterPolicy, client_dir: str | None) -> None:
        self.spark, self.policy = spark, policy
        self.client_dir = client_dir
        self.full_name = pulsar_topic(policy.dead_letter_topic).full_name
        self.broker = pulsar_connector.broker_options(policy, client_dir)

    @contextmanager
    def open(self) -> Iterator[None]:
        yield  # the connector keeps one client per broker in the JVM

    def _topics(self) -> Any:
        found: Any = self.spark.sparkContext._jvm
        for part in TOPICS_CLASS.split("."):
            found = getattr(found, part)
        return found

    def _to_java(self, positions: Mapping[int, int]) -> str:
        return json.dumps(entry_layout(self.full_name, positions))

    @staticmethod
    def _from_java(text: str) -> dict[int, int]:
        return entry_positions(json.loads(text))

    def _call(self, what: str, method: str, *args: Any) -> str:
        try:
            return str(
                getattr(self._topics(), method)(
                    self.broker["serviceUrl"], self.broker.get("clientDir", ""), *args
                )
            )
        except Py4JJavaError as error:
            said = str(error.java_exception.getMessage())
            if "NotFound" in said or "TopicDoesNotExist" in said:
                raise RedriveTopicError(
                    f"the dead-letter topic {self.full_name!r} does not exist on {self.policy.broker.service_url}"
                ) from None
            raise RedriveTopicError(f"{what} of {self.full_name!r}: {said}") from None

    def snapshot(self) -> tuple[dict[int, int], dict[int, int]]:
        end = self._from_java(
            self._call("the end", "lastPositions", self.policy.dead_letter_topic, TIMEOUT_MS)
        )
        return dict.fromkeys(end, BEFORE_FIRST_ENTRY), end

    def earliest(self, partitions: Sequence[int]) -> dict[int, int]:
        raise NotImplementedError("a Pulsar topic's message ids are not contiguous")

    def chunk_end(self, start: Mapping[int, int], end: Mapping[int, int], size: int) -> dict[int, int]:
        capped = self._from_java(
            self._call("a chunk's end", "chunkEnds", self._to_java(start), self._to_java(end), size)
        )
        return {p: min(end[p], capped.get(p, end[p])) for p in start}

    def read(self, start: Mapping[int, int], end: Mapping[int, int]) -> DataFrame:
        wanted = [p for p in start if end[p] > start[p]]
        return (
            self.spark.read.format(pulsar_connector.FORMAT)
            .options(**self.broker)
            .option("topic", self.policy.dead_letter_topic)
            .option("startingPositions", self._to_java({p: start[p] for p in wanted}))
            .option("endingPositions", self._to_java({p: end[p] for p in wanted}))
            .load()
        )

    def write(self, records: DataFrame) -> None:
        options = pulsar_connector.write_options(self.policy, self.client_dir)
        records.write.format(pulsar_connector.FORMAT).options(**options).mode("append").save()
