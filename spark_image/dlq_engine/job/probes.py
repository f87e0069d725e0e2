"""What the query's progress does not say, read on the driver for the metrics.

Two questions need a look outside the micro-batches. How many dead letters are in the
dead-letter topic, and how old is the oldest: the Kafka admin client that ships with the
connector (as in ``preflight``) lists the topic's earliest and latest offsets, and the offset
for timestamp 0, whose answer carries the earliest record's timestamp (no record is fetched).
And how many retries the delay stage held when this driver started: Spark's state data source
counts the held list state of the last committed batch in the checkpoint; from then on the
count is kept from each batch's progress (``metrics``), without reading the state again.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from dlq_engine.job.preflight import TIMEOUT_MS

log = logging.getLogger("dlq_engine.metrics")

#: The delay stage's list state (``HoldUntilDue`` in ``spark_image/jvm``).
HELD_STATE = "held"


@dataclass(frozen=True, slots=True)
class TopicSize:
    """Records retained in a topic, and the Kafka timestamp of its earliest (None: empty)."""

    records: int
    oldest_ms: int | None


class TopicProbe:
    """A Kafka admin client on the driver's JVM, kept open between probes."""

    def __init__(self, spark: SparkSession, bootstrap: str, client: dict[str, str]) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        props = jvm.java.util.Properties()
        for key, value in client.items():
            props.put(key, value)
        props.put("bootstrap.servers", bootstrap)
        props.put("request.timeout.ms", str(TIMEOUT_MS))
        props.put("default.api.timeout.ms", str(TIMEOUT_MS))
        props.put("client.id", "spark-dlq-metrics")
        self._admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(props)

    def size(self, topic: str) -> TopicSize:
        jvm, admin = self._jvm, self._admin
        unit = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
        names = jvm.java.util.ArrayList()
        names.add(topic)
        described = admin.describeTopics(names).allTopicNames().get(TIMEOUT_MS, unit).get(topic)
        partitions = [
            jvm.org.apache.kafka.common.TopicPartition(topic, info.partition())
            for info in described.partitions()
        ]
        spec = jvm.org.apache.kafka.clients.admin.OffsetSpec
        earliest = self._offsets(partitions, spec.earliest())
        latest = self._offsets(partitions, spec.latest())
        first = self._offsets(partitions, spec.forTimestamp(0))
        records = 0
        oldest: int | None = None
        for tp in partitions:
            start, end = earliest[tp.partition()][0], latest[tp.partition()][0]
            records += max(0, end - start)
            offset, timestamp = first[tp.partition()]
            if end > start and offset >= 0 and timestamp >= 0:
                oldest = timestamp if oldest is None else min(oldest, timestamp)
        return TopicSize(records, oldest)

    def _offsets(self, partitions: list[Any], spec: Any) -> dict[int, tuple[int, int]]:
        """partition -> (offset, timestamp) for one kind of offset query."""
        jvm = self._jvm
        query = jvm.java.util.HashMap()
        for tp in partitions:
            query.put(tp, spec)
        unit = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
        answer = self._admin.listOffsets(query).all().get(TIMEOUT_MS, unit)
        return {
            tp.partition(): (int(answer.get(tp).offset()), int(answer.get(tp).timestamp()))
            for tp in partitions
        }

    def close(self) -> None:
        self._admin.close()


def last_committed_batch(spark: SparkSession, checkpoint: str) -> int | None:
    """The id of the last batch committed in ``checkpoint`` (its ``commits`` log), None when
    there is none. Listed through Hadoop's file system API, so any checkpoint URI works."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(posixpath.join(checkpoint, "commits"))
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return None
    ids = [
        int(name) for name in (status.getPath().getName() for status in fs.listStatus(path)) if name.isdigit()
    ]
    return max(ids) if ids else None


def held_retries(spark: SparkSession, checkpoint: str, batch_id: int) -> int:
    """Retries held in the delay stage's state as of ``batch_id`` (a Spark job: seconds)."""
    # The state reader's stores report to the StateStoreCoordinator, which the session's
    # streaming query manager registers when it is first made: made here, the read does not
    # depend on whether the query has started yet (without it, every store load fails).
    spark.streams.active  # noqa: B018 - for its effect
    reader = spark.read.format("statestore").option("path", checkpoint).option("stateVarName", HELD_STATE)
    return int(reader.option("batchId", batch_id).load().count())
