"""The dead-letter table (``spec.deadLetter.table``): every dead letter, one typed row each.

The pipeline calls :func:`append` inside its ``foreachBatch`` sink, after the batch's Kafka
records were written and before Spark commits the batch, so:

- a row is only ever written for a record the dead-letter topic already received;
- if the table write fails, the batch fails and nothing of it is committed (its offsets and
  delay state stay where they were); the restart replays it;
- a replayed batch does not add its rows twice. Delta: each write carries the writer options
  ``txnAppId`` (the streaming query's id) and ``txnVersion`` (the batch id), and Delta skips a
  write whose version that app id has already committed. Parquet: each batch is written into its
  own partition ``query_id=<id>/batch_id=<n>`` with dynamic partition overwrite, so a replayed
  batch replaces its own rows.

The query's id (``StreamingQuery.id``) is kept in the checkpoint: the same across restarts from
it, a new one when the checkpoint is new. Keying on it rather than on the checkpoint's path means
a checkpoint that is deleted and started afresh at the same path (batch ids from 0 again) can
neither be skipped by Delta nor overwrite the earlier run's Parquet partitions.

The columns come from the record and its ``dlq.*`` headers (``model.headers``), read with
``try_cast`` and range checks: a header forged on the retry topic yields a null, never a failed
batch. The session needs Delta's SQL extension and catalog for the delta format even for
path-based writes (Delta 4.0 refuses them otherwise): ``job.session`` sets them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dlq_engine.model import headers as h
from dlq_engine.model.policy import DeadLetterTable
from dlq_engine.processing.batches import TABLE_VALUE
from dlq_engine.routing.outcomes import MAX_DELIVER_AT, Route

#: The table's columns in order, with their Spark SQL types (docs/reference.md, "The
#: dead-letter table"; the Parquet format keeps ``query_id`` and ``batch_id`` as partition
#: folders, whose types a reader infers).
COLUMNS: Final = (
    ("original_topic", "string"),
    ("original_partition", "int"),
    ("original_offset", "bigint"),
    ("original_timestamp", "timestamp"),
    ("key", "binary"),
    ("value", "binary"),
    ("headers", "map<string,binary>"),
    ("error_class", "string"),
    ("error_message", "string"),
    ("stacktrace", "string"),
    ("reason", "string"),
    ("attempts", "int"),
    ("first_failure_at", "timestamp"),
    ("failed_at", "timestamp"),
    ("policy", "string"),
    ("subscription", "string"),
    ("redrive_count", "int"),
    ("query_id", "string"),
    ("batch_id", "bigint"),
)
#: The Parquet format's partition columns: a folder per micro-batch of one query.
PARTITION_COLUMNS: Final = ("query_id", "batch_id")


def header_text(name: str, headers: str = "headers") -> Column:
    """The first value of header ``name`` in the Kafka headers column ``headers``, as text
    (Kafka allows repeated keys; the first wins, as in ``model.headers.first_header``); null
    when absent."""
    return F.expr(f"cast(get(filter({headers}, h -> h.key = '{name}'), 0).value as string)")


def header_number(name: str, kind: str, headers: str = "headers") -> Column:
    """``header_text`` as a number of Spark type ``kind``; null when it is not one."""
    return F.expr(
        f"try_cast(cast(get(filter({headers}, h -> h.key = '{name}'), 0).value as string) as {kind})"
    )


def header_time(name: str, headers: str = "headers") -> Column:
    """An epoch-milliseconds header as a timestamp; null when absent, unreadable or outside
    0 .. 9999-12-31 (``timestamp_millis`` would overflow and fail the batch)."""
    millis = header_number(name, "bigint", headers)
    return F.when(millis.between(0, MAX_DELIVER_AT), F.timestamp_millis(millis))


def first_text(names: Sequence[str], headers: str = "headers") -> Column:
    """``header_text`` of the first of ``names`` present (``model.headers.READ_*``)."""
    return F.coalesce(*(header_text(name, headers) for name in names))


def first_number(sources: Sequence[tuple[str, int]], kind: str, headers: str = "headers") -> Column:
    """``model.headers.read_number`` in Spark: the first of ``sources`` present and readable,
    decimal text (width 0) or a big-endian binary number of ``width`` bytes, as ``kind``."""
    values = []
    for name, width in sources:
        if not width:
            values.append(header_number(name, kind, headers))
            continue
        raw = f"get(filter({headers}, h -> h.key = '{name}'), 0).value"
        # conv reads the hex digits as unsigned: a negative number (never a record position)
        # comes out too large for ``kind`` and try_cast makes it null.
        values.append(
            F.expr(f"CASE WHEN length({raw}) = {width} THEN try_cast(conv(hex({raw}), 16, 10) AS {kind}) END")
        )
    return F.coalesce(*values)


def own_headers(headers: str = "headers") -> Column:
    """The record's own headers (every one not starting with ``dlq.``: those are the engine's,
    and are columns here) as a map; of a repeated key the first value."""
    return F.expr(
        f"map_from_entries(filter({headers}, (h, i) -> NOT startswith(h.key, '{h.PREFIX}') "
        f"AND NOT exists(slice({headers}, 1, i), p -> p.key = h.key)))"
    )


def rows(batch: DataFrame, *, query_id: str, batch_id: int) -> DataFrame:
    """The table's rows of one routed micro-batch (``pipeline.routed``): its dead letters."""
    redrives = header_number(h.REDRIVE_COUNT, "int")
    values = {
        "original_topic": header_text(h.ORIGINAL_TOPIC),
        "original_partition": header_number(h.ORIGINAL_PARTITION, "int"),
        "original_offset": header_number(h.ORIGINAL_OFFSET, "bigint"),
        "original_timestamp": header_time(h.ORIGINAL_TIMESTAMP),
        "key": F.col("key"),
        # A stub's value is not in the topic's record (processing.oversize): it is here.
        "value": F.coalesce(F.col(TABLE_VALUE), F.col("value")),
        "headers": own_headers(),
        "error_class": header_text(h.ERROR_CLASS),
        "error_message": header_text(h.ERROR_MESSAGE),
        "stacktrace": header_text(h.ERROR_STACKTRACE),
        "reason": F.col("reason"),
        "attempts": header_number(h.ATTEMPT, "int"),
        "first_failure_at": header_time(h.FIRST_FAILURE_AT),
        "failed_at": header_time(h.FAILED_AT),
        "policy": header_text(h.POLICY),
        "subscription": header_text(h.SUBSCRIPTION),
        # Absent: never redriven. Present but unreadable: null.
        "redrive_count": F.when(header_text(h.REDRIVE_COUNT).isNull(), F.lit(0)).otherwise(redrives),
        "query_id": F.lit(query_id),
        "batch_id": F.lit(batch_id).cast("bigint"),
    }
    return batch.where(F.col("route") == int(Route.DEAD)).select(
        *(values[name].cast(kind).alias(name) for name, kind in COLUMNS)
    )


def append(batch: DataFrame, table: DeadLetterTable, *, query_id: str, batch_id: int) -> None:
    """Write the dead letters of one micro-batch to the table, once per batch however often the
    batch is replayed. ``batch`` should be persisted: this runs its own Spark jobs on it."""
    dead = rows(batch, query_id=query_id, batch_id=batch_id)
    if dead.isEmpty():
        return  # no commit (Delta) or folder (Parquet) for a batch without dead letters
    if table.format == "delta":
        (
            dead.write.format("delta")
            .mode("append")
            .option("txnAppId", f"spark-dlq-{query_id}")
            .option("txnVersion", str(batch_id))
            .save(table.path)
        )
    else:
        (
            dead.write.format("parquet")
            .mode("overwrite")
            .option("partitionOverwriteMode", "dynamic")
            .partitionBy(*PARTITION_COLUMNS)
            .save(table.path)
        )
