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
"""

from __future__ import annotations

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
from dlq_engine.model.policy import Ordering
from dlq_engine.processing.batches import ORDER_NOTE
from dlq_engine.routing import headers as h

#: ``OrderByKey``'s record kinds (the ``order_kind`` column).
SOURCE, PARKED, RETRY, RELEASE, BLOCK = 0, 1, 2, 3, 4
#: The JVM entry point (``spark_image/jvm``).
JVM_STAGE = "io.sparkdlq.engine.DelayStage"
ROUTED_COLUMNS = [*RECORD_COLUMNS, DELIVER_AT_COLUMN, ORDER_NOTE]


def _stage_columns(frame: DataFrame) -> DataFrame:
    return frame.withColumn("held_at", F.lit(None).cast("bigint")).withColumn(
        ORDER_NOTE, F.lit(None).cast("string")
    )


def _keyed_source(source: DataFrame) -> DataFrame:
    frame = source.where(F.col("key").isNotNull()).select(
        *RECORD_COLUMNS,
        F.lit(None).cast("bigint").alias(DELIVER_AT_COLUMN),
        F.lit(SOURCE).alias("order_kind"),
        F.col("partition").alias("order_partition"),
        F.col("offset").alias("order_offset"),
        F.lit(0).cast("bigint").alias("due"),
    )
    return _stage_columns(frame)


def _ours(control: Column) -> Column:
    """A retry-topic record the ordering stage reads: a keyed retry or one of its controls."""
    known = control.isin(h.CONTROL_PARK, h.CONTROL_RELEASE, h.CONTROL_BLOCK)
    return F.col("key").isNotNull() & (control.isNull() | F.coalesce(known, F.lit(False)))


def _keyed_retries(retries: DataFrame) -> DataFrame:
    """Keyed retry-topic records with their kind and source position; a parked record is
    given back its source topic, position and timestamp and loses its ``dlq.*`` headers, so
    routing treats it as the source record it is."""
    control = header_text(h.CONTROL)
    kind = (
        F.when(control == h.CONTROL_PARK, PARKED)
        .when(control == h.CONTROL_RELEASE, RELEASE)
        .when(control == h.CONTROL_BLOCK, BLOCK)
        .otherwise(RETRY)
    )
    partition = F.coalesce(header_number(h.ORIGINAL_PARTITION, "int"), F.col("partition"))
    offset = F.coalesce(header_number(h.ORIGINAL_OFFSET, "bigint"), F.col("offset"))
    timestamp = F.coalesce(
        F.timestamp_millis(header_number(h.ORIGINAL_TIMESTAMP, "bigint")), F.col("timestamp")
    )
    parked = F.col("order_kind") == PARKED
    frame = (
        retries.where(_ours(control))
        .withColumn("order_kind", kind)
        .withColumn("order_partition", partition)
        .withColumn("order_offset", offset)
        .withColumn(DELIVER_AT_COLUMN, F.when(F.col("order_kind") == RETRY, deliver_at_column()))
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
        "order_kind",
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
    ordered = DataFrame(
        stage.orderByKey(
            keyed._jdf,
            int(lookahead_ms),
            ordering.on_dead_letter == "block",
            int(ordering.max_held_per_key),
            int(ordering.max_hold_ms),
        ),
        spark,
    ).select(*ROUTED_COLUMNS)
    note = F.lit(None).cast("string").alias(ORDER_NOTE)
    unordered_source = source.where(F.col("key").isNull()).select(
        *RECORD_COLUMNS, F.lit(None).cast("bigint").alias(DELIVER_AT_COLUMN), note
    )
    others = retries.where(~_ours(header_text(h.CONTROL))).select(*RECORD_COLUMNS)
    unordered_retries = hold_until_due(others, lookahead_ms).select(*RECORD_COLUMNS, DELIVER_AT_COLUMN, note)
    return unordered_source.unionByName(unordered_retries).unionByName(ordered)
