"""The delay stage: retry records wait in checkpointed state until ``dlq.deliver.at``.

Records read from the retry topic are grouped by their due time, rounded up to
``BUCKET_MS``. A group that falls due within the next ``lookahead_ms`` (one trigger interval
plus ``RELEASE_MARGIN_MS``) passes on in this micro-batch; the others are appended to the
group's list state with a processing-time timer at ``due - lookahead``. When the timer fires
the records are emitted into the same micro-batch as the source records, those not yet due in
due order (``InDueOrder``: the routing task waits for each in turn). The stateful part is Java
(``spark_image/jvm``: ``io.sparkdlq.engine.HoldUntilDue``), so no Python worker runs for it.

Released records carry their exact ``deliver_at``, and :func:`release_when_due` (run in the
routing task, just before the processor) holds each one back until that moment. So a retry is
never processed early, yet it does not wait for the micro-batch *after* its due time: a
timer that only fired then would make every retry about a whole batch late, and a batch of
this pipeline costs about a second on two cores even when it is empty. Releasing one
trigger interval plus that cost ahead lets the batch that starts before a retry's due time
carry it. The price is that a routing task may sleep up to ``lookahead_ms`` (bounded by
``MAX_WAIT_MS``), which stretches a micro-batch that holds early retries to about that long.

Nothing is re-published while it waits and nothing polls the broker; the state is part of
the checkpoint, so pending retries survive a crash (the retry topic's offsets are committed
together with the state that holds its records; a record released into a batch that then
fails is still in the last committed state).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dlq_engine.job.preflight import engine_class
from dlq_engine.routing.headers import CONTROL, DELIVER_AT, PULSAR_DELAY_TIME
from dlq_engine.routing.outcomes import MAX_DELIVER_AT

BUCKET_MS = 100
RECORD_COLUMNS = ["key", "value", "headers", "topic", "partition", "offset", "timestamp"]
#: The exact due time of a released retry (epoch ms); null for source records.
DELIVER_AT_COLUMN = "deliver_at"
#: The longest a routing task waits for one released record (a guard against clock skew
#: between the driver, whose clock fires the timers, and the executor).
MAX_WAIT_MS = 5_000
#: Released this much earlier than one trigger interval ahead: about what a micro-batch costs
#: before its routing tasks run (0.3-0.6 s measured on two cores; 2 s and 1 s gave later
#: retries, as the routing tasks' waits then stretched every batch: bench/analysis.md).
RELEASE_MARGIN_MS = 500


def deliver_at_column() -> Column:
    """``dlq.deliver.at`` as a long; without it, a retry letter of the Pulsar Java client
    (``reconsumeLater``) is due at its publish time plus its ``DELAY_TIME``; a missing or
    unreadable header means due now (0). A forged value is clamped to 0 .. 9999-12-31, so the
    bucket arithmetic cannot overflow (ANSI mode would fail the query, on every restart)."""
    raw = f"get(filter(headers, h -> h.key = '{DELIVER_AT}'), 0).value"
    java_delay = f"get(filter(headers, h -> h.key = '{PULSAR_DELAY_TIME}'), 0).value"
    java_due = F.expr(f"try_add(unix_millis(timestamp), try_cast(cast({java_delay} as string) as bigint))")
    parsed = F.coalesce(
        F.expr(f"try_cast(cast({raw} as string) as bigint)"), java_due, F.lit(0).cast("bigint")
    )
    return F.least(F.greatest(parsed, F.lit(0).cast("bigint")), F.lit(MAX_DELIVER_AT).cast("bigint"))


def control_record() -> Column:
    """True for an engine control record on the retry topic (a ``dlq.control`` header): it
    moves the retry topic's offsets on, and is dropped before the delay stage."""
    return F.coalesce(F.exists("headers", lambda h: h["key"] == CONTROL), F.lit(False))


def lookahead(trigger_ms: int) -> int:
    """How far ahead of its due time a retry is released: one trigger interval plus
    ``RELEASE_MARGIN_MS``, at most ``MAX_WAIT_MS``."""
    return max(0, min(trigger_ms + RELEASE_MARGIN_MS, MAX_WAIT_MS))


#: The JVM side of the delay stage (``spark_image/jvm``): a ``StatefulProcessor`` in Java, so
#: that a micro-batch runs no Python worker for the delay stage's stateful tasks.
JVM_DELAY_STAGE = "io.sparkdlq.engine.DelayStage"


def hold_until_due(retries: DataFrame, lookahead_ms: int) -> DataFrame:
    """The retry stream, each record released no earlier than ``lookahead_ms`` before its
    ``dlq.deliver.at``, with that time in a ``deliver_at`` column."""
    with_due = retries.where(~control_record()).select(
        *RECORD_COLUMNS, deliver_at_column().alias(DELIVER_AT_COLUMN)
    )
    with_due = with_due.withColumn(
        "due", (F.ceil(F.col(DELIVER_AT_COLUMN) / BUCKET_MS) * BUCKET_MS).cast("bigint")
    )
    spark = with_due.sparkSession
    stage = engine_class(spark, JVM_DELAY_STAGE)
    # Those not yet due leave in due order (io.sparkdlq.engine.InDueOrder): release_when_due
    # waits for each record in turn.
    held = DataFrame(stage.holdUntilDue(with_due._jdf, "due", DELIVER_AT_COLUMN, int(lookahead_ms)), spark)
    return held.select(*RECORD_COLUMNS, DELIVER_AT_COLUMN)


def release_when_due(
    batches: Iterable[pa.RecordBatch],
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    max_wait_ms: int = MAX_WAIT_MS,
) -> Iterator[pa.RecordBatch]:
    """The batches again, cut so that no record is handed on before its ``deliver_at``.

    A slice is yielded as soon as every record in it is due; the generator sleeps before the
    next record that is not (records leave the delay stage in due order: ``hold_until_due``).
    Batches with no future due time (all source batches) pass through untouched."""
    max_wait = max_wait_ms / 1000.0
    for batch in batches:
        if DELIVER_AT_COLUMN not in batch.schema.names or batch.num_rows == 0:
            yield batch
            continue
        column = batch.column(DELIVER_AT_COLUMN)
        now_ms = clock() * 1000.0
        if column.null_count == len(column) or _max(column) <= now_ms:
            yield batch
            continue
        dues = column.to_pylist()
        start = 0
        for i, due in enumerate(dues):
            if due is None:
                continue
            wait = min((due - clock() * 1000.0) / 1000.0, max_wait)
            if wait > 0:
                if i > start:
                    yield batch.slice(start, i - start)
                    start = i
                sleep(wait)
        yield batch.slice(start)


def _max(column: pa.Array) -> float:
    import pyarrow.compute as pc

    value = pc.max(column).as_py()
    return float("-inf") if value is None else float(value)
