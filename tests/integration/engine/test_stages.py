"""The engine's Java stages, run in-process on Spark's memory stream (no broker, no routing):
the delay stage (``HoldUntilDue``) hands a retry on once its release time (its due time less the
lookahead) has come, never before, and a record added later to a held bucket leaves with it;
the ordering stage (``OrderByKey``) keeps a key's records behind its message in the retry loop,
lets other keys pass, and hands the held records on in source order once the key is released.

The sink records beside each record the time of the micro-batch it left in (Spark's batch time,
``current_timestamp()`` in a stream: the clock the stages' processing-time timers run on); the
query's progress tells when a record was read."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from dlq_engine.job.delay import DELIVER_AT_COLUMN, hold_until_due
from dlq_engine.job.ordering import ordered_records
from dlq_engine.routing import headers as h
from tests.conftest import unique
from tests.policy_builder import policy

#: A record as a JSON line: Kafka's columns, with text for bytes and headers as a map.
LINE = "struct<key: string, value: string, headers: map<string, string>, partition: int, offset: bigint>"
TRIGGER = "200 milliseconds"


class Records:
    """Kafka-shaped records of ``topic`` fed through a ``MemoryStream`` (added as JSON lines)."""

    def __init__(self, spark: SparkSession, topic: str) -> None:
        self.spark, self.topic = spark, topic
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        memory = jvm.org.apache.spark.sql.execution.streaming.runtime.MemoryStream
        self._stream = memory.apply(spark._jsparkSession, jvm.org.apache.spark.sql.Encoders.STRING())

    def frame(self) -> DataFrame:
        line = F.from_json("value", LINE)
        return (
            DataFrame(self._stream.toDF(), self.spark)
            .select(line.alias("r"))
            .select(
                F.encode("r.key", "UTF-8").alias("key"),
                F.encode("r.value", "UTF-8").alias("value"),
                F.expr(
                    "transform(map_entries(coalesce(r.headers, map())), "
                    "h -> named_struct('key', h.key, 'value', encode(h.value, 'UTF-8')))"
                ).alias("headers"),
                F.lit(self.topic).alias("topic"),
                F.col("r.partition").alias("partition"),
                F.col("r.offset").alias("offset"),
                F.current_timestamp().alias("timestamp"),
            )
        )

    def add(self, *records: Mapping[str, Any]) -> None:
        lines = self._jvm.java.util.ArrayList()
        for record in records:
            lines.add(json.dumps({"partition": 0, "value": "", **record}))
        self._stream.addData(self._jvm.scala.jdk.javaapi.CollectionConverters.asScala(lines).toSeq())


class Sink:
    """A query writing ``frame`` to a memory table, with each row's micro-batch time (``at``, ms)."""

    def __init__(self, frame: DataFrame, checkpoint: Path) -> None:
        self.spark = frame.sparkSession
        self.name = unique("stage").replace("-", "_")
        stamped = frame.select(
            F.col("key").cast("string").alias("key"),
            "offset",
            DELIVER_AT_COLUMN,
            F.unix_millis(F.current_timestamp()).alias("at"),
        )
        self.query: StreamingQuery = (
            stamped.writeStream.format("memory")
            .queryName(self.name)
            .outputMode("append")
            .trigger(processingTime=TRIGGER)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )

    def rows(self) -> list[Row]:
        return self.spark.table(self.name).collect()

    def wait(self, until: Callable[[list[Row]], bool], *, timeout: float = 60.0) -> list[Row]:
        deadline = time.monotonic() + timeout
        while True:
            rows = self.rows()
            if until(rows):
                return rows
            error = self.query.exception()
            if error is not None or time.monotonic() > deadline:
                raise AssertionError(f"rows so far {rows}; query error {error}")
            time.sleep(0.1)

    def wait_read(self, before: int, *, timeout: float = 60.0) -> int:
        """Wait until a micro-batch read more than ``before`` records in all; its time (ms)."""
        deadline = time.monotonic() + timeout
        while True:
            total = 0
            for progress in self.query.recentProgress:
                total += int(progress.numInputRows)
                if total > before:
                    return int(datetime.datetime.fromisoformat(progress.timestamp).timestamp() * 1000)
            error = self.query.exception()
            if error is not None or time.monotonic() > deadline:
                raise AssertionError(f"{total} records read, not more than {before}; query error {error}")
            time.sleep(0.05)


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[Callable[[DataFrame], Sink]]:
    started: list[Sink] = []

    def start(frame: DataFrame) -> Sink:
        started.append(Sink(frame, tmp_path / f"checkpoint-{len(started)}"))
        return started[-1]

    yield start
    for each in started:
        each.query.stop()
        each.spark.catalog.dropTempView(each.name)


def keyed(rows: list[Row], key: str) -> list[Row]:
    return [r for r in rows if r.key == key]


def test_the_delay_stage_hands_a_retry_on_at_its_release_time_never_before(
    spark: SparkSession, sink: Callable[[DataFrame], Sink]
) -> None:
    lookahead = 300
    retries = Records(spark, "orders-RETRY")
    retries.add(
        {"key": "due", "offset": 0, "headers": {h.DELIVER_AT: str(int(time.time() * 1000) - 1_000)}},
        {"key": "control", "offset": 1, "headers": {h.CONTROL: h.CONTROL_RELEASE}},
    )
    held = sink(hold_until_due(retries.frame(), lookahead))
    held.wait(lambda rows: bool(keyed(rows, "due")))

    due = int(time.time() * 1000) + 3_000
    retries.add({"key": "later", "offset": 2, "headers": {h.DELIVER_AT: str(due)}})
    later_read = held.wait_read(2)
    # Read in a later batch into the bucket that waits: it leaves with the bucket.
    retries.add({"key": "also", "offset": 3, "headers": {h.DELIVER_AT: str(due)}})
    also_read = held.wait_read(3)
    rows = held.wait(lambda rows: bool(keyed(rows, "later")) and bool(keyed(rows, "also")))

    [later], [also] = keyed(rows, "later"), keyed(rows, "also")
    assert keyed(rows, "control") == [], "a control record is dropped before the stage"
    assert later.at > later_read, "not held"
    assert min(later.at, also.at) >= due - lookahead, "handed on before its release time"
    assert (later[DELIVER_AT_COLUMN], also[DELIVER_AT_COLUMN]) == (due, due)
    if also_read < due - lookahead:  # read while the bucket waited (the machine kept up)
        assert also.at == later.at


def test_the_ordering_stage_holds_a_key_behind_its_retry_and_keeps_its_order(
    spark: SparkSession, sink: Callable[[DataFrame], Sink]
) -> None:
    lookahead = 300
    ordering = policy({"spec.source.ordering": "key"}).ordering
    source, retries = Records(spark, "orders"), Records(spark, "orders-RETRY")
    source.add({"key": "b", "offset": 0})
    ordered = sink(ordered_records(source.frame(), retries.frame(), ordering, lookahead))
    ordered.wait(lambda rows: bool(keyed(rows, "b")))

    # a@1 went to retry: its retry record is read, then the source records written after it.
    due = int(time.time() * 1000) + 3_000
    head = {h.ORIGINAL_PARTITION: "0", h.ORIGINAL_OFFSET: "1"}
    retries.add({"key": "a", "offset": 0, "headers": {**head, h.DELIVER_AT: str(due)}})
    ordered.wait_read(1)
    source.add({"key": "a", "offset": 3}, {"key": "b", "offset": 4}, {"key": "a", "offset": 2})
    ordered.wait_read(2)

    rows = ordered.wait(lambda rows: bool(keyed(rows, "a")))
    [retry] = keyed(rows, "a")
    assert retry[DELIVER_AT_COLUMN] == due
    assert retry.at >= due - lookahead, "the head's retry was handed on before its release time"
    assert [r.offset for r in keyed(rows, "b")] == [0, 4]
    assert keyed(rows, "b")[1].at < retry.at, "another key waited"

    # a@5 is read; then a@1 is done and routing writes its release (read with a@5, or after
    # it): the key's held records and a@5 leave together, in source order.
    source.add({"key": "a", "offset": 5})
    retries.add({"key": "a", "offset": 1, "headers": {**head, h.CONTROL: h.CONTROL_RELEASE}})
    rows = ordered.wait(lambda rows: len(keyed(rows, "a")) == 4)
    released = [r for r in keyed(rows, "a") if r[DELIVER_AT_COLUMN] is None]
    assert [r.offset for r in released] == [2, 3, 5], "not in source order"
    assert len({r.at for r in released}) == 1
    assert released[0].at > retry.at, "handed on before the key was released"
