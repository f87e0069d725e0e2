"""The ordering stage of ``source.ordering: key``: a key's records wait behind its retry.

    source ── key null ──────────────────────────────────────────┐
           └─ key set ─┐                                          │
                       ├─ order_by_key (state per Kafka key) ─────┼─ routing
    retry ─── key set, no control or park/release/block ─┘        │
           └─ the rest ── hold_until_due (state per due bucket) ──┘

Per key the stage keeps its head (the source position of the one message of the key in the
retry loop), the head's retry records until due, and every later record of the key, held in
source order (``io.sparkdlq.engine.OrderByKey``). Routing, which gets a key's records of a
batch in one task and in order, parks a key's later records once one of them goes to retry
(``dlq.control: park``, unprocessed) and writes a ``release`` or ``block`` control record for a
head that is done; the stage reads those from the retry topic in the next batch. So every
record of a key that is not done is, at the start of each batch, in the stage's checkpointed
state or in the retry topic past the committed offsets: a crash replays the batch from both.

The retry topic is read without ``maxOffsetsPerTrigger`` here: a head's retry record must be
read in the same batch as the source records written after it was routed, or those would pass.

The stage's state is kept per group of keys (``OrderByKey.GROUPS``), so that a group can count
what its keys hold (``maxHeldTotal`` is shared evenly by the groups). Each call of a group ends
with a report row: the group's held records, blocked keys and a few of their names. The reports
are taken out of the stream into the observed metric ``ordering`` before routing, and the driver
keeps the latest of each group (``OrderingReports``) for the metrics and the heartbeat.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dlq_engine.job.dead_letter_table import header_number, header_text
from dlq_engine.job.delay import (
    BUCKET_MS,
    DELIVER_AT_COLUMN,
    RECORD_COLUMNS,
    deliver_at_column,
    hold_until_due,
)
from dlq_engine.job.preflight import engine_class
from dlq_engine.model.heartbeat import ORDERING_SAMPLE, OrderingReport
from dlq_engine.model.policy import Ordering
from dlq_engine.processing.batches import ORDER_NOTE
from dlq_engine.routing import headers as h


class OrderKind(enum.IntEnum):
    """``OrderByKey``'s record kinds (the ``order_kind`` column), spelt there as its ``static
    final int`` constants of the same names (``tests/unit/test_ordering_contract.py`` compares
    them); REPORT rows never reach routing."""

    SOURCE = 0
    PARKED = 1
    RETRY = 2
    RELEASE = 3
    BLOCK = 4
    REPORT = 5


#: The kind of a keyed retry-topic record by its ``dlq.control`` (none: a retry).
KIND_OF_CONTROL: Final = {
    h.CONTROL_PARK: OrderKind.PARKED,
    h.CONTROL_RELEASE: OrderKind.RELEASE,
    h.CONTROL_BLOCK: OrderKind.BLOCK,
}
#: The column of a record's kind.
KIND_COLUMN: Final = "order_kind"
#: The JVM entry point (``spark_image/jvm``).
JVM_STAGE = "io.sparkdlq.engine.DelayStage"
ROUTED_COLUMNS = [*RECORD_COLUMNS, DELIVER_AT_COLUMN, ORDER_NOTE]
#: A report row's ``order_report``: one group of keys after one call of the stage.
REPORT_COLUMN = "order_report"
REPORT_TYPE = "struct<group: int, seq: bigint, held: bigint, blocked: bigint, blocked_keys: array<binary>>"
#: The observed metric with the batch's reports (in each batch's progress).
ORDERING_METRICS: Final = "ordering"
#: The most blocked keys a status names (each report names at most ``OrderByKey.SAMPLE``).
SAMPLE: Final = ORDERING_SAMPLE
#: The longest a blocked key's name is shown.
KEY_CHARS: Final = 100


def _stage_columns(frame: DataFrame) -> DataFrame:
    return (
        frame.withColumn("held_at", F.lit(None).cast("bigint"))
        .withColumn(ORDER_NOTE, F.lit(None).cast("string"))
        .withColumn(REPORT_COLUMN, F.lit(None).cast(REPORT_TYPE))
    )


def _keyed_source(source: DataFrame) -> DataFrame:
    frame = source.where(F.col("key").isNotNull()).select(
        *RECORD_COLUMNS,
        F.lit(None).cast("bigint").alias(DELIVER_AT_COLUMN),
        F.lit(int(OrderKind.SOURCE)).alias(KIND_COLUMN),
        F.col("partition").alias("order_partition"),
        F.col("offset").alias("order_offset"),
        F.lit(0).cast("bigint").alias("due"),
    )
    return _stage_columns(frame)


def _ours(control: Column) -> Column:
    """A retry-topic record the ordering stage reads: a keyed retry or one of its controls."""
    known = control.isin(*KIND_OF_CONTROL)
    return F.col("key").isNotNull() & (control.isNull() | F.coalesce(known, F.lit(False)))


def _keyed_retries(retries: DataFrame) -> DataFrame:
    """Keyed retry-topic records with their kind and source position; a parked record is
    given back its source topic, position and timestamp and loses its ``dlq.*`` headers, so
    routing treats it as the source record it is."""
    control = header_text(h.CONTROL)
    kind = F.lit(int(OrderKind.RETRY))
    for name, of_control in KIND_OF_CONTROL.items():
        kind = F.when(control == name, int(of_control)).otherwise(kind)
    partition = F.coalesce(header_number(h.ORIGINAL_PARTITION, "int"), F.col("partition"))
    offset = F.coalesce(header_number(h.ORIGINAL_OFFSET, "bigint"), F.col("offset"))
    timestamp = F.coalesce(
        F.timestamp_millis(header_number(h.ORIGINAL_TIMESTAMP, "bigint")), F.col("timestamp")
    )
    parked = F.col(KIND_COLUMN) == int(OrderKind.PARKED)
    frame = (
        retries.where(_ours(control))
        .withColumn(KIND_COLUMN, kind)
        .withColumn("order_partition", partition)
        .withColumn("order_offset", offset)
        .withColumn(
            DELIVER_AT_COLUMN, F.when(F.col(KIND_COLUMN) == int(OrderKind.RETRY), deliver_at_column())
        )
    )
    frame = frame.select(
        "key",
        "value",
        F.when(parked, F.expr(f"filter(headers, h -> NOT startswith(h.key, '{h.PREFIX}'))"))
        .otherwise(F.col("headers"))
        .alias("headers"),
        F.when(parked, F.coalesce(header_text(h.ORIGINAL_TOPIC), F.col("topic")))
        .otherwise(F.col("topic"))
        .alias("topic"),
        F.when(parked, F.col("order_partition")).otherwise(F.col("partition")).alias("partition"),
        F.when(parked, F.col("order_offset")).otherwise(F.col("offset")).alias("offset"),
        F.when(parked, timestamp).otherwise(F.col("timestamp")).alias("timestamp"),
        DELIVER_AT_COLUMN,
        KIND_COLUMN,
        "order_partition",
        "order_offset",
        F.coalesce(
            (F.ceil(F.col(DELIVER_AT_COLUMN) / BUCKET_MS) * BUCKET_MS).cast("bigint"), F.lit(0).cast("bigint")
        ).alias("due"),
    )
    return _stage_columns(frame)


def ordered_records(
    source: DataFrame, retries: DataFrame, ordering: Ordering, lookahead_ms: int
) -> DataFrame:
    """Source and retry records for routing (``ROUTED_COLUMNS``), with the records of each
    non-null key in per-key order (see the module's text)."""
    spark = source.sparkSession
    keyed = _keyed_source(source).unionByName(_keyed_retries(retries))
    stage = engine_class(spark, JVM_STAGE)
    staged = DataFrame(
        stage.orderByKey(
            keyed._jdf,
            int(lookahead_ms),
            ordering.on_dead_letter == "block",
            int(ordering.max_held_per_key),
            int(ordering.max_held_total),
            int(ordering.max_hold_ms),
        ),
        spark,
    )
    ordered = (
        staged.observe(ORDERING_METRICS, F.collect_list(F.col(REPORT_COLUMN)).alias("reports"))
        .where(F.col(KIND_COLUMN) != int(OrderKind.REPORT))
        .select(*ROUTED_COLUMNS)
    )
    note = F.lit(None).cast("string").alias(ORDER_NOTE)
    unordered_source = source.where(F.col("key").isNull()).select(
        *RECORD_COLUMNS, F.lit(None).cast("bigint").alias(DELIVER_AT_COLUMN), note
    )
    others = retries.where(~_ours(header_text(h.CONTROL))).select(*RECORD_COLUMNS)
    unordered_retries = hold_until_due(others, lookahead_ms).select(*RECORD_COLUMNS, DELIVER_AT_COLUMN, note)
    return unordered_source.unionByName(unordered_retries).unionByName(ordered)


@dataclass(frozen=True, slots=True)
class HeldKeys:
    """What the ordering stage holds, as of each group's last report."""

    #: Messages held behind a head (retrying or blocked) of their key.
    held: int
    #: Keys blocked by a dead letter under ``onDeadLetter: block``.
    blocked: int
    #: Some of the blocked keys (UTF-8, undecodable bytes replaced; at most ``SAMPLE``).
    blocked_sample: tuple[str, ...]

    def document(self) -> OrderingReport:
        """The heartbeat's ``ordering`` (the operator copies it to the policy's status)."""
        return {
            "heldMessages": self.held,
            "blockedKeys": self.blocked,
            "blockedKeySample": list(self.blocked_sample),
        }


class OrderingReports:
    """The latest report of each group of keys (by its sequence number, which the group keeps
    in its state across restarts). A group that has not reported since this driver started
    counts as holding nothing: a group that holds anything reports at least every 10 s."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[int, tuple[int, int, int, tuple[bytes, ...]]] = {}

    def add(self, reports: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            for report in reports:
                group, seq = int(report["group"]), int(report["seq"])
                if group in self._latest and self._latest[group][0] >= seq:
                    continue
                keys = tuple(bytes(k) for k in report["blocked_keys"] or ())
                self._latest[group] = (seq, int(report["held"]), int(report["blocked"]), keys)

    def state(self) -> HeldKeys:
        with self._lock:
            latest = list(self._latest.values())
        names = sorted({k.decode("utf-8", "replace")[:KEY_CHARS] for *_, keys in latest for k in keys})
        return HeldKeys(
            held=sum(held for _, held, _, _ in latest),
            blocked=sum(blocked for _, _, blocked, _ in latest),
            blocked_sample=tuple(names[:SAMPLE]),
        )
