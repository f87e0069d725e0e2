"""The delay stage: retry records wait in checkpointed state until ``dlq.deliver.at``.

Records read from the retry topic are grouped by their due time, rounded up to
``BUCKET_MS``; a record that is already due passes straight through, the others are appended
to the group's list state with a processing-time timer at the group's due time. When the
timer fires the records are emitted into the same micro-batch as the source records and
processed. Nothing is re-published while it waits and nothing polls the broker; the state is
part of the checkpoint, so pending retries survive a crash (the retry topic's offsets are
committed together with the state that holds its records).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import StructType

from dlq_engine.routing.headers import DELIVER_AT

BUCKET_MS = 100
RECORD_COLUMNS = ["key", "value", "headers", "topic", "partition", "offset", "timestamp"]


def deliver_at_column() -> Column:
    """``dlq.deliver.at`` as a long; a missing or unreadable header means due now (0)."""
    raw = f"filter(headers, h -> h.key = '{DELIVER_AT}')[0].value"
    return F.coalesce(F.expr(f"try_cast(cast({raw} as string) as bigint)"), F.lit(0).cast("bigint"))


class HoldUntilDue(StatefulProcessor):
    def __init__(self, record_schema: StructType) -> None:
        self.record_schema = record_schema

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.held = handle.getListState("held", self.record_schema)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        now = timerValues.getCurrentProcessingTimeInMs()
        due_at = int(key[0])
        waiting = False
        for frame in rows:
            if due_at <= now:
                yield frame[RECORD_COLUMNS]
            else:
                self.held.appendList(frame)
                waiting = True
        if waiting:
            self.handle.registerTimer(due_at)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:
        rows = list(self.held.get())
        self.held.clear()
        if rows:
            frame = pd.DataFrame(rows, columns=self.record_schema.fieldNames())
            yield frame[RECORD_COLUMNS]

    def close(self) -> None:
        pass


def hold_until_due(retries: DataFrame) -> DataFrame:
    """The retry stream, each record released no earlier than its ``dlq.deliver.at``."""
    with_due = retries.select(*RECORD_COLUMNS, deliver_at_column().alias("deliver_at"))
    with_due = with_due.withColumn(
        "due", (F.ceil(F.col("deliver_at") / BUCKET_MS) * BUCKET_MS).cast("bigint"))
    output_schema = retries.select(*RECORD_COLUMNS).schema
    return with_due.groupBy("due").transformWithStateInPandas(
        HoldUntilDue(with_due.schema), outputStructType=output_schema,
        outputMode="Append", timeMode="ProcessingTime",
    )
