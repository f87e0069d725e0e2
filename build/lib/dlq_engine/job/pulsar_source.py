"""Apache Pulsar for Spark: a Python Data Source (``pyspark.sql.datasource``) the engine reads
its source and retry topics with and writes its output, retry and dead-letter topics with, on
``pulsar-client`` (no Spark 4.0 Pulsar connector is published).

Reading (``spark.readStream.format("spark-dlq-pulsar")``): a micro-batch reads, for each
partition of the topic, the messages after the start position up to the end position, both
``[ledger, entry]`` message-id positions kept in Spark's checkpoint as the batch's offsets.
Executors read with non-durable readers; the driver holds one consumer per partition on the
durable subscription named by ``subscription`` (Exclusive, no prefetch) and acknowledges the
end position cumulatively only when Spark commits the batch. So the subscription holds every
message the checkpoint has not committed (the broker keeps them), its backlog is the engine's
lag, and a restart from the checkpoint reads exactly from the last committed position.

The rows have the Kafka source's columns: ``key`` (the partition key, UTF-8), ``value``,
``headers`` (the message properties, values UTF-8), ``topic`` (the topic as named in the
options), ``partition`` (-1 for a non-partitioned topic), ``offset`` (the message id packed
into a long by ``routing.headers.pulsar_offset``: ordered as the ids are) and ``timestamp``
(the publish time).

Writing (``writeStream``/``write.format("spark-dlq-pulsar")``, columns ``topic, key, value,
headers``): each task sends its rows and waits until the broker has stored every one; a failed
send fails the task, so the micro-batch fails and its offsets stay uncommitted (at-least-once,
as the Kafka sink). Producers batch, except on the topics named by ``unbatchedTopics`` (the
retry and dead-letter topics: a negative acknowledgement of a batched message sends the whole
batch to a dead-letter topic, apache/pulsar#5891). On the topics named by ``delayedTopics`` a
message with a ``dlq.deliver.at`` property is sent with Pulsar's delayed delivery at that time,
so a Shared consumer of the Java client sees a retry letter no earlier than the engine would.

Connections are opened lazily, in the process that uses them (the reader object is pickled
into Spark's Python workers), and never pickled.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dlq_engine.job.preflight import PreflightError
from dlq_engine.model.policy import DeadLetterPolicy, pulsar_topic
from dlq_engine.model.topics import pulsar_subscriptions, wanted_topics
from dlq_engine.routing.headers import DELIVER_AT, pulsar_offset

#: The format name the engine registers the data source under.
FORMAT = "spark-dlq-pulsar"
#: How long a reading task waits for a message it knows is there (the end position came from
#: the broker) before it fails the batch.
READ_TIMEOUT_MS = 30_000
#: How long a producer waits for the broker to store a message before the send fails.
SEND_TIMEOUT_MS = 30_000
#: ``[ledger, entry]`` before every message of a partition (``startingOffsets: earliest``).
BEFORE_ALL = (-1, -1)
Position = tuple[int, int]

SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
    ]
)


class PulsarError(RuntimeError):
    """A Pulsar read or write failed; the text names the topic and what failed."""


def full_topic(name: str) -> str:
    """``persistent://<tenant>/<namespace>/<name>`` of a policy's topic name (``public/default``
    when the name has none)."""
    return pulsar_topic(name).full_name


def partition_index(partition_topic: str) -> int:
    """``-partition-<n>`` of a partition's topic name; -1 for a non-partitioned topic."""
    head, _, tail = partition_topic.rpartition("-partition-")
    return int(tail) if head and tail.isdigit() else -1


def _client(service_url: str) -> Any:
    import pulsar

    return pulsar.Client(
        service_url,
        operation_timeout_seconds=30,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    )


def _partitions(client: Any, topic: str) -> list[str]:
    try:
        return list(client.get_topic_partitions(full_topic(topic)))
    except Exception as error:  # noqa: BLE001 - the client raises one class per broker error
        raise PulsarError(
            f"Pulsar topic {topic!r}: cannot look it up: {type(error).__name__}: {error}"
        ) from None


_OPTION_NAMES = (
    "serviceUrl",
    "topic",
    "subscription",
    "startingOffsets",
    "maxEntriesPerTrigger",
    "unbatchedTopics",
    "delayedTopics",
)


def _named(given: dict[str, str]) -> dict[str, str]:
    """The options under their names here: Spark hands a data source its options' names in
    lower case."""
    by_lower = {name.lower(): name for name in _OPTION_NAMES}
    return {by_lower.get(key.lower(), key): value for key, value in given.items()}


@dataclass(frozen=True, slots=True)
class ReadOptions:
    service_url: str
    topic: str
    subscription: str
    starting: str  # earliest | latest
    max_entries: int  # per micro-batch and partition's worth, summed; 0: no limit

    @classmethod
    def of(cls, given: dict[str, str]) -> ReadOptions:
        options = _named(given)
        missing = [name for name in ("serviceUrl", "topic", "subscription") if not options.get(name)]
        if missing:
            raise ValueError(f"{FORMAT}: missing option(s) {', '.join(missing)}")
        starting = options.get("startingOffsets", "latest")
        if starting not in ("earliest", "latest"):
            raise ValueError(f"{FORMAT}: startingOffsets must be earliest or latest, not {starting!r}")
        return cls(
            service_url=options["serviceUrl"],
            topic=options["topic"],
            subscription=options["subscription"],
            starting=starting,
            max_entries=int(options.get("maxEntriesPerTrigger", "0") or 0),
        )


class PulsarDataSource(DataSource):
    """``spark-dlq-pulsar``: see the module's documentation."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PulsarStreamReader(ReadOptions.of(dict(self.options)))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return PulsarStreamWriter(WriteOptions.of(dict(self.options)))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return PulsarBatchWriter(WriteOptions.of(dict(self.options)))


@dataclass(frozen=True, slots=True)
class TopicRange(InputPartition):
    """One partition's messages of a micro-batch: after ``start``, up to ``end`` inclusive."""

    service_url: str
    topic: str  # as named in the options: the rows' ``topic``
    partition_topic: str
    start: tuple[int, int]
    end: tuple[int, int]


Offsets = dict[str, list[int]]


class PulsarStreamReader(DataSourceStreamReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._client: Any = None
        self._consumers: dict[str, Any] = {}
        self._last: Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_client": None, "_consumers": {}, "_last": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # -- driver ------------------------------------------------------------------------------

    def _consumer(self, partition_topic: str) -> Any:
        """The driver's consumer of the durable subscription on one partition (created on
        first use: Exclusive, no prefetch, from the earliest message if the subscription is
        new, so that it holds what the engine has not committed yet)."""
        consumer = self._consumers.get(partition_topic)
        if consumer is None:
            import pulsar

            if self._client is None:
                self._client = _client(self.options.service_url)
            try:
                consumer = self._client.subscribe(
                    partition_topic,
                    self.options.subscription,
                    consumer_type=pulsar.ConsumerType.Exclusive,
                    receiver_queue_size=0,
                    initial_position=pulsar.InitialPosition.Earliest,
                )
            except Exception as error:  # noqa: BLE001 - the client raises one class per broker error
                raise PulsarError(
                    f"Pulsar topic {partition_topic}: cannot subscribe {self.options.subscription!r}: "
                    f"{type(error).__name__}: {error}"
                ) from None
            self._consumers[partition_topic] = consumer
        return consumer

    def _ends(self) -> Offsets:
        if self._client is None:
            self._client = _client(self.options.service_url)
        ends: Offsets = {}
        for name in _partitions(self._client, self.options.topic):
            last = self._consumer(name).get_last_message_id()
            ledger, entry = last.ledger_id(), last.entry_id()
            ends[name] = [ledger, entry] if entry >= 0 else list(BEFORE_ALL)
        return ends

    def initialOffset(self) -> dict[str, Any]:
        if self.options.starting == "latest":
            start = self._ends()
        else:
            if self._client is None:
                self._client = _client(self.options.service_url)
            start = {name: list(BEFORE_ALL) for name in _partitions(self._client, self.options.topic)}
            for name in start:
                self._consumer(name)  # the subscription exists, and holds, from now on
        # Spark asks for the initial offset when it plans the first batch, after its
        # ``latestOffset``: what that returned stays the last end.
        if self._last is None:
            self._last = start
        return start

    def latestOffset(self) -> dict[str, Any]:
        """Each partition's last position, at most ``maxEntriesPerTrigger`` entries past the
        end this reader returned last, and never before it. A reader does not know where a
        restarted query's checkpoint left off, so the first batch of each run is not limited."""
        ends = self._ends()
        last = self._last or {}
        limit = self.options.max_entries
        if limit and self._last is not None:
            url = self.options.service_url
            ends = _limited(self._last, ends, limit, lambda name, at: next_position(url, name, at))
        ends = {name: max(end, last.get(name, end)) for name, end in ends.items()}
        self._last = {**last, **ends}
        return ends

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        ranges = []
        for name, last in end.items():
            first = tuple(start.get(name, BEFORE_ALL))
            if tuple(last) > first:
                ranges.append(
                    TopicRange(
                        self.options.service_url,
                        self.options.topic,
                        name,
                        (int(first[0]), int(first[1])),
                        (int(last[0]), int(last[1])),
                    )
                )
        return ranges

    def commit(self, end: dict[str, Any]) -> None:
        """Acknowledge each partition's end position on the durable subscription."""
        import pulsar

        for name, (ledger, entry) in end.items():
            if entry < 0:
                continue
            message_id = pulsar.MessageId(partition_index(name), ledger, entry, -1)
            self._consumer(name).acknowledge_cumulative(message_id)

    def stop(self) -> None:
        for consumer in self._consumers.values():
            with contextlib.suppress(Exception):  # closing on the way out
                consumer.close()
        self._consumers = {}
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- executors ---------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, TopicRange)
        return read_range(partition)


def _limited(
    last: Offsets, ends: Offsets, limit: int, after: Callable[[str, Position], Position | None]
) -> Offsets:
    """At most ``limit`` entries past ``last`` in all, shared evenly by the partitions that have
    some. ``after(partition, position)`` is the first message's position after ``position``:
    entry ids are consecutive within a ledger from there, so ``share`` entries from it hold at
    least that message, and at most ``share`` (a ledger closes when the next one opens)."""
    behind = {name: end for name, end in ends.items() if tuple(end) > tuple(last.get(name, BEFORE_ALL))}
    if not behind:
        return ends
    share = max(1, limit // len(behind))
    capped = dict(ends)
    for name, end in behind.items():
        known = last.get(name, list(BEFORE_ALL))
        found = after(name, (known[0], known[1]))
        if found is None:
            continue
        ledger, entry = found
        capped[name] = (
            [ledger, min(end[1], entry - 1 + share)] if end[0] == ledger else [ledger, entry - 1 + share]
        )
    return capped


def next_position(service_url: str, partition_topic: str, position: Position) -> Position | None:
    """The position of the partition's first message after ``position``; None when none is."""
    import pulsar

    client = _client(service_url)
    try:
        start = (
            pulsar.MessageId.earliest
            if position == BEFORE_ALL
            else pulsar.MessageId(partition_index(partition_topic), position[0], position[1], -1)
        )
        # Not 1: a reader of pulsar-client 3.13 with a queue of one, started at a message id,
        # never receives a message (measured here; 2 and more do).
        reader = client.create_reader(partition_topic, start, receiver_queue_size=10)
        while reader.has_message_available():
            ident = reader.read_next(READ_TIMEOUT_MS).message_id()
            if (ident.ledger_id(), ident.entry_id()) > position:
                return (ident.ledger_id(), ident.entry_id())
        return None
    finally:
        client.close()


def read_range(partition: TopicRange) -> Iterator[tuple[Any, ...]]:
    """The rows of one partition's range (see ``TopicRange``)."""
    import pulsar

    client = _client(partition.service_url)
    try:
        if partition.start == BEFORE_ALL:
            start = pulsar.MessageId.earliest
        else:
            start = pulsar.MessageId(partition_index(partition.partition_topic), *partition.start, -1)
        try:
            reader = client.create_reader(partition.partition_topic, start, receiver_queue_size=1000)
        except Exception as error:  # noqa: BLE001 - the client raises one class per broker error
            raise PulsarError(
                f"Pulsar topic {partition.partition_topic}: cannot read: {type(error).__name__}: {error}"
            ) from None
        index = partition_index(partition.partition_topic)
        while True:
            try:
                message = reader.read_next(READ_TIMEOUT_MS)
            except Exception as error:  # noqa: BLE001 - pulsar.Timeout and connection errors
                raise PulsarError(
                    f"Pulsar topic {partition.partition_topic}: no message up to "
                    f"{partition.end[0]}:{partition.end[1]} after {READ_TIMEOUT_MS} ms "
                    f"(read from {partition.start[0]}:{partition.start[1]}): {type(error).__name__}: {error}"
                ) from None
            ident = message.message_id()
            position = (ident.ledger_id(), ident.entry_id())
            if position > partition.end:
                break
            if position > partition.start:
                yield _row(partition.topic, index, message, ident)
            if position == partition.end and not reader.has_message_available():
                break
        reader.close()
    finally:
        client.close()


def _row(topic: str, index: int, message: Any, ident: Any) -> tuple[Any, ...]:
    key = message.partition_key()
    properties = message.properties()
    return (
        key.encode("utf-8") if key else None,
        message.data(),
        [(name, value.encode("utf-8")) for name, value in properties.items()],
        topic,
        index,
        pulsar_offset(ident.ledger_id(), ident.entry_id(), ident.batch_index()),
        datetime.fromtimestamp(message.publish_timestamp() / 1000, tz=UTC),
    )


# -- writing ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriteOptions:
    service_url: str
    unbatched: frozenset[str]
    delayed: frozenset[str]

    @classmethod
    def of(cls, given: dict[str, str]) -> WriteOptions:
        options = _named(given)
        if not options.get("serviceUrl"):
            raise ValueError(f"{FORMAT}: missing option serviceUrl")

        def names(option: str) -> frozenset[str]:
            return frozenset(n.strip() for n in options.get(option, "").split(",") if n.strip())

        return cls(options["serviceUrl"], names("unbatchedTopics"), names("delayedTopics"))


@dataclass(frozen=True, slots=True)
class Written(WriterCommitMessage):
    count: int


def write_rows(options: WriteOptions, rows: Iterator[Any]) -> Written:
    """Send every row to its ``topic`` and wait until the broker has stored each; raise on the
    first failed send (the task, then the micro-batch, fails)."""
    client = _client(options.service_url)
    producers: dict[str, Any] = {}
    failures: list[str] = []
    pending = threading.Semaphore(0)
    sent = 0

    def done(result: Any, _message_id: Any, topic: str) -> None:
        import pulsar

        if result != pulsar.Result.Ok:
            failures.append(f"{topic}: {result}")
        pending.release()

    try:
        for row in rows:
            topic = row["topic"]
            producer = producers.get(topic)
            if producer is None:
                producer = _producer(client, options, topic)
                producers[topic] = producer
            properties = {
                name: (value or b"").decode("utf-8", "replace") for name, value in (row["headers"] or ())
            }
            extra: dict[str, Any] = {}
            key = row["key"]
            if key is not None:
                extra["partition_key"] = bytes(key).decode("utf-8", "replace")
            if topic in options.delayed and DELIVER_AT in properties:
                with contextlib.suppress(ValueError):  # unreadable: sent at once
                    extra["deliver_at"] = int(properties[DELIVER_AT])
            producer.send_async(
                bytes(row["value"] or b""),
                lambda result, ident, t=topic: done(result, ident, t),
                properties=properties,
                **extra,
            )
            sent += 1
            if failures:
                break
        for producer in producers.values():
            producer.flush()
        for _ in range(sent):
            pending.acquire()
        if failures:
            raise PulsarError(f"Pulsar write failed for {len(failures)} message(s), first: {failures[0]}")
        return Written(sent)
    finally:
        for producer in producers.values():
            with contextlib.suppress(Exception):  # closing on the way out
                producer.close()
        client.close()


def _producer(client: Any, options: WriteOptions, topic: str) -> Any:
    batching = topic not in options.unbatched
    try:
        return client.create_producer(
            full_topic(topic),
            batching_enabled=batching,
            batching_max_publish_delay_ms=5,
            block_if_queue_full=True,
            send_timeout_millis=SEND_TIMEOUT_MS,
            max_pending_messages=5000,
        )
    except Exception as error:  # noqa: BLE001 - the client raises one class per broker error
        raise PulsarError(
            f"Pulsar topic {topic!r}: cannot create a producer: {type(error).__name__}: {error}"
        ) from None


class PulsarStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task has had each of its messages stored: nothing is left to do."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """What the tasks sent stays sent; the batch is read and written again (at-least-once)."""


class PulsarBatchWriter(DataSourceWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_rows(self.options, iterator)


def register(spark: Any) -> None:
    """Make ``FORMAT`` known to the session (idempotent)."""
    spark.dataSource.register(PulsarDataSource)


# -- before a run ------------------------------------------------------------------------------


def _names(policy: DeadLetterPolicy) -> list[tuple[str, str]]:
    named = [
        ("spec.source.topic", policy.source.topic),
        ("spec.retry.topic", policy.retry_topic),
    ]
    if policy.dead_letter.strategy == "topic":
        named.append(("spec.deadLetter.topic", policy.dead_letter_topic))
    if policy.output.topic:
        named.append(("spec.output.topic", policy.output.topic))
    return named


def check_topics(policy: DeadLetterPolicy) -> None:
    """Every topic the policy names exists on the Pulsar cluster; else ``PreflightError``
    naming the missing ones (or the unreachable broker)."""
    client = _client(policy.broker.service_url)
    try:
        missing = []
        for path, name in _names(policy):
            try:
                client.get_topic_partitions(full_topic(name))
            except Exception as error:  # noqa: BLE001 - the client raises one class per broker error
                if type(error).__name__ != "TopicNotFound":
                    raise PreflightError(
                        f"cannot reach the Pulsar broker at {policy.broker.service_url} "
                        f"(spec.broker.serviceUrl): {type(error).__name__}: {error}"
                    ) from None
                missing.append(f"{full_topic(name)} ({path})")
    finally:
        client.close()
    if missing:
        raise PreflightError(
            f"topics missing on {policy.broker.service_url}: {', '.join(missing)} (the operator creates "
            "the retry and dead-letter topics; run with --create-topics to create them here)"
        )


def create_topics(policy: DeadLetterPolicy) -> list[str]:
    """Create the retry and dead-letter topics that are missing through the admin REST API
    (``spec.broker.adminUrl``), partitioned as ``wanted_topics`` says, and the durable
    subscriptions the operator would (``pulsar_subscriptions``). One line per step."""
    import urllib.error
    import urllib.request

    admin = policy.broker.admin_url.rstrip("/")
    if not admin:
        raise PreflightError("--create-topics on Pulsar needs spec.broker.adminUrl (the admin REST API)")

    def call(method: str, path: str, body: str | None = None) -> str:
        request = urllib.request.Request(
            admin + path,
            data=None if body is None else body.encode(),
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return str(answer.read().decode())

    def partitions_of(name: str) -> int | None:
        try:
            found = json.loads(call("GET", f"/admin/v2/{pulsar_topic(name).rest_path}/partitions"))
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise
        return int(found.get("partitions", 0))

    try:
        exists = set(json.loads(call("GET", f"/admin/v2/namespaces/{_namespace(policy.source.topic)}/")))
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise PreflightError(
            f"cannot reach the Pulsar admin API at {admin} (spec.broker.adminUrl): {error}"
        ) from None
    source_partitions = (
        partitions_of(policy.source.topic) if full_topic(policy.source.topic) in exists else None
    )
    report = []
    for want in wanted_topics(policy, source_partitions=source_partitions):
        name = full_topic(want.name)
        if name in exists or any(t.startswith(f"{name}-partition-") for t in exists):
            report.append(f"topic {name!r} exists, left as it is")
            continue
        path = f"/admin/v2/{pulsar_topic(want.name).rest_path}"
        try:
            if want.partitions:
                call("PUT", f"{path}/partitions", str(want.partitions))
            else:
                call("PUT", path)
        except urllib.error.HTTPError as error:
            raise PreflightError(
                f"creating topic {name!r} through {admin} failed: HTTP {error.code}: {error.read().decode(errors='replace')}"
            ) from None
        report.append(f"created topic {name!r} ({want.partitions or 'not'} partitioned)")
    import pulsar

    client = _client(policy.broker.service_url)
    try:
        for keep in pulsar_subscriptions(policy):
            client.subscribe(
                full_topic(keep.topic), keep.subscription, initial_position=pulsar.InitialPosition.Earliest
            ).close()
            report.append(f"subscription {keep.subscription!r} on {full_topic(keep.topic)!r}")
    finally:
        client.close()
    return report


def _namespace(name: str) -> str:
    parts = pulsar_topic(name)
    return f"{parts.tenant}/{parts.namespace}"
