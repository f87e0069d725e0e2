"""The Python side alone: CPU microseconds per message of ``route_batch`` on an Arrow batch.

No Spark and no broker: the same 10,000-row record batch the Spark job hands to ``mapInArrow``
(key, ~200-byte value, one header, topic, partition, offset, timestamp) is routed with the
benchmark processors, and the CPU time (``time.process_time``, best of several rounds) is
divided by the rows. CPU time, not wall-clock time, so other load on the machine matters little.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from bench.common import source_value
from bench.processors import MIXES, entrypoint
from dlq_engine.job.processors import load_processor
from dlq_engine.model.policy import BackoffSpec
from dlq_engine.processing.batches import HEADER_TYPE, RoutingSettings, route_batch

ROWS = 10_000


def record_batch(rows: int = ROWS, *, retry_topic: str = "retry") -> pa.RecordBatch:
    filler = b"x" * 300
    headers = [[{"key": "trace", "value": b"0123456789abcdef"}] for _ in range(rows)]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([b"k%d" % i for i in range(rows)], pa.binary()),
            pa.array([source_value(i, filler) for i in range(rows)], pa.binary()),
            pa.array(headers, HEADER_TYPE),
            pa.array(["source"] * rows, pa.string()),
            pa.array([i % 2 for i in range(rows)], pa.int32()),
            pa.array(list(range(rows)), pa.int64()),
            pa.array([1_700_000_000_000_000 + i for i in range(rows)], pa.timestamp("us", tz="UTC")),
        ],
        names=["key", "value", "headers", "topic", "partition", "offset", "timestamp"],
    )


def settings(mode: str) -> RoutingSettings:
    return RoutingSettings(
        retry_topic="retry",
        policy="bench/routing",
        subscription="bench",
        max_redeliver=2,
        backoff=BackoffSpec(type="fixed", delay_ms=200),
        strategy="topic",
        include_stack=True,
        has_output=True,
        mode=mode,
    )


def measure(mode: str, mix: str, batch: pa.RecordBatch, rounds: int = 7) -> float:
    processor = load_processor(entrypoint(mode, mix))
    routing = settings(mode)
    route_batch(batch, routing, processor)  # warm: imports, caches
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        route_batch(batch, routing, processor)
        best = min(best, time.process_time() - start)
    rows: int = batch.num_rows
    return best / rows * 1e6


def run(
    mixes: list[str] | None = None, modes: tuple[str, ...] = ("message", "batch", "arrow")
) -> dict[str, Any]:
    batch = record_batch()
    rows = []
    for mix in mixes or list(MIXES):
        for mode in modes:
            us = measure(mode, mix, batch)
            rows.append(
                {
                    "mode": mode,
                    "mix": mix,
                    "cpu_us_per_message": round(us, 2),
                    "messages_per_cpu_second": round(1e6 / us),
                }
            )
    return {"rows_per_batch": batch.num_rows, "runs": rows}
