"""What one routed Arrow batch adds to the engine's metrics, as one small JSON text.

The metrics that need more than a count per route (failures by error class and attempt, the
processor's latency, the retry lateness, the age of the oldest source message) are aggregated
on the worker, once per Arrow batch: vectorised where the input is per row (latency, lateness,
timestamps), a loop over the failed rows only where it is not (error classes). The summary
rides in the ``stats`` column of the batch's first row, null on every other row; Spark's
observed metrics collect the non-null ones (a few per micro-batch) and the driver adds them up
(``dlq_engine.job.metrics``). So no message costs a Python call for its metrics, and no row
but one per batch carries a byte more to the JVM.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypedDict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dlq_engine.model.reasons import DEAD_LETTER_REASONS
from dlq_engine.routing.outcomes import Failure, Result, Route

#: Upper bounds (seconds) of the processor latency histogram's buckets.
LATENCY_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
#: Upper bounds (seconds) of the retry lateness histogram's buckets (how long after
#: ``dlq.deliver.at`` a retry was routed).
LATENESS_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
#: Failed attempts at or above this share one ``attempt`` label (``"10+"``).
MAX_ATTEMPT_LABEL: Final = 10
#: Distinct error classes one batch reports by name; the rest are counted as ``OTHER``.
MAX_CLASSES_PER_BATCH: Final = 32
OTHER: Final = "other"
#: Route names as metric label values (``spark_dlq_messages_total{outcome}``).
ROUTE_LABELS: Final = {
    int(Route.OUTPUT): "output",
    int(Route.ACK): "acked",
    int(Route.RETRY): "retry",
    int(Route.DEAD): "dead_letter",
    int(Route.IGNORED): "ignored",
}
#: The ``reason`` of a failure that is retried (dead letters carry their ``dlq.reason``).
RETRY_REASON: Final = "retry"
#: Dead letters (written or ignored) by ``dlq.reason``: count name -> reason
#: (``dead_exhausted``, ..., ``dead_retry_timeout``).
DEAD_REASONS: Final[dict[str, str]] = {
    f"dead_{reason.replace('-', '_')}": reason for reason in DEAD_LETTER_REASONS
}
#: A micro-batch's counts (``BatchStats.counts``, summed by ``observed_row``): routed messages
#: (``total``: not the parked and control records of ``source.ordering: key``) by route,
#: ``parked`` records, ``blocked`` keys, ``redelivered`` (retry records routed), and dead
#: letters by reason.
COUNTS: Final = (
    "total",
    "output",
    "acked",
    "retried",
    "dead",
    "ignored",
    "parked",
    "blocked",
    "redelivered",
    *DEAD_REASONS,
)
_ROUTE_COUNTS: Final = {
    int(Route.OUTPUT): "output",
    int(Route.ACK): "acked",
    int(Route.RETRY): "retried",
    int(Route.DEAD): "dead",
    int(Route.IGNORED): "ignored",
    int(Route.PARKED): "parked",
}


class Histogram(TypedDict):
    """Bucket counts (one per bound, then the overflow: not cumulative), their sum and count."""

    buckets: list[int]
    sum: float
    count: int


class BatchStats(TypedDict):
    """One Arrow batch's summary. ``counts``: ``COUNTS``; ``failures``: ``[outcome, reason,
    error class, count]``; ``attempts``: failures by attempt label; ``released``: retry records
    routed, ``late`` of them routed past the policy's lateness limit, ``max_lateness_ms`` and
    ``min_lateness_ms`` the latest and earliest of them; ``oldest_source_ms``: the earliest
    Kafka timestamp among the source records (None when there were none)."""

    counts: dict[str, int]
    max_lateness_ms: int | None
    min_lateness_ms: int | None
    failures: list[tuple[str, str, str, int]]
    attempts: dict[str, int]
    latency: Histogram
    lateness: Histogram
    released: int
    late: int
    oldest_source_ms: int | None


def attempt_label(failures: int) -> str:
    return str(failures) if failures < MAX_ATTEMPT_LABEL else f"{MAX_ATTEMPT_LABEL}+"


def histogram(values: np.ndarray, bounds: Sequence[float]) -> Histogram:
    """Prometheus-style buckets (``value <= bound``) of ``values``, vectorised."""
    if len(values) == 0:
        return {"buckets": [0] * (len(bounds) + 1), "sum": 0.0, "count": 0}
    index = np.searchsorted(np.asarray(bounds, dtype=np.float64), values, side="left")
    counts = np.bincount(index, minlength=len(bounds) + 1)
    return {"buckets": counts.tolist(), "sum": float(values.sum()), "count": len(values)}


def summarize(
    batch: pa.RecordBatch,
    routes: pa.Array,
    reasons: Sequence[str | None],
    outcomes: Sequence[Result],
    attempts: Sequence[int],
    lateness_ms: pa.Array,
    durations_s: np.ndarray,
    from_retry: Sequence[bool],
    *,
    late_after_ms: int,
    blocked: int = 0,
) -> BatchStats:
    """The summary of one routed batch: ``batch`` is its input, ``routes`` its route column
    (``Route`` values), ``outcomes[i]`` the ``Result`` of row i (a ``Failure`` for every failed row), ``lateness_ms``
    null for source records, ``durations_s`` the processor's call times, ``from_retry[i]``
    whether row ``i`` came from the retry topic, ``blocked`` the keys this batch blocked
    (``source.ordering: key``)."""
    failing = pc.and_(pc.greater_equal(routes, int(Route.RETRY)), pc.less_equal(routes, int(Route.IGNORED)))
    failed = pc.indices_nonzero(failing).to_pylist() if len(routes) else []
    tally: dict[tuple[str, str, str], int] = {}
    by_attempt: dict[str, int] = {}
    by_reason: dict[str, int] = {}
    classes: set[str] = set()
    route_values = routes.to_numpy(zero_copy_only=False) if failed else None
    for i in failed:
        assert route_values is not None
        outcome = outcomes[i]
        error_class = outcome.error_class if isinstance(outcome, Failure) else ""
        if error_class not in classes:
            if len(classes) >= MAX_CLASSES_PER_BATCH:
                error_class = OTHER
            else:
                classes.add(error_class)
        reason = reasons[i]
        if reason is not None:
            by_reason[reason] = by_reason.get(reason, 0) + 1
        key = (ROUTE_LABELS[int(route_values[i])], reason or RETRY_REASON, error_class)
        tally[key] = tally.get(key, 0) + 1
        label = attempt_label(attempts[i] + 1)
        by_attempt[label] = by_attempt.get(label, 0) + 1
    late = lateness_ms.drop_null() if lateness_ms.null_count else lateness_ms
    late_ms = late.to_numpy(zero_copy_only=False)
    late_values = late_ms.astype(np.float64) / 1000.0
    released = sum(from_retry)
    return {
        "counts": _counts(routes, by_reason, len(late_ms), blocked),
        "max_lateness_ms": int(late_ms.max()) if len(late_ms) else None,
        "min_lateness_ms": int(late_ms.min()) if len(late_ms) else None,
        "failures": [(o, r, c, n) for (o, r, c), n in sorted(tally.items())],
        "attempts": by_attempt,
        "latency": histogram(durations_s, LATENCY_BUCKETS),
        "lateness": histogram(late_values, LATENESS_BUCKETS),
        "released": int(released),
        "late": int(np.count_nonzero(late_values * 1000.0 > late_after_ms)),
        "oldest_source_ms": _oldest_ms(_source_rows(batch.column("timestamp"), from_retry, released)),
    }


def _counts(routes: pa.Array, by_reason: Mapping[str, int], redelivered: int, blocked: int) -> dict[str, int]:
    """``COUNTS`` of one batch: routes counted at once (``bincount``), reasons from its failures."""
    per_route = np.bincount(routes.to_numpy(zero_copy_only=False).astype(np.int64), minlength=len(Route))
    counts = dict.fromkeys(COUNTS, 0)
    for route, name in _ROUTE_COUNTS.items():
        counts[name] = int(per_route[route])
    counts["total"] = int(per_route[: int(Route.IGNORED) + 1].sum())
    counts["blocked"] = blocked
    counts["redelivered"] = redelivered
    for name, reason in DEAD_REASONS.items():
        counts[name] = by_reason.get(reason, 0)
    return counts


def observed_row(texts: Iterable[str] | None) -> dict[str, Any]:
    """A micro-batch's observed metrics as the driver reads them: the ``COUNTS`` summed over the
    routing tasks' summaries (``texts``, the collected ``stats`` column), the latest and
    earliest retry lateness, and the summaries' texts themselves under ``stats``."""
    texts = list(texts or [])
    counts = dict.fromkeys(COUNTS, 0)
    highs: list[int] = []
    lows: list[int] = []
    for summary in parse(texts):
        for name, count in summary["counts"].items():
            counts[name] = counts.get(name, 0) + int(count)
        if summary["max_lateness_ms"] is not None:
            highs.append(summary["max_lateness_ms"])
        if summary["min_lateness_ms"] is not None:
            lows.append(summary["min_lateness_ms"])
    return {
        **counts,
        "max_lateness_ms": max(highs, default=None),
        "min_lateness_ms": min(lows, default=None),
        "stats": texts,
    }


def _source_rows(column: pa.Array, from_retry: Sequence[bool], released: int) -> pa.Array:
    """The source records' values of ``column``. A batch holds source records only or retry
    records only as a rule (the two streams are a union of partitions), so the mask is built
    only for a mixed one."""
    if released == 0:
        return column
    if released == len(column):
        return column.slice(0, 0)
    return column.filter(pa.array([not retry for retry in from_retry], pa.bool_()))


def _oldest_ms(timestamps: pa.Array) -> int | None:
    """The earliest Kafka timestamp, in epoch milliseconds."""
    if len(timestamps) == 0 or timestamps.null_count == len(timestamps):
        return None
    if not pa.types.is_timestamp(timestamps.type):
        return int(pc.min(timestamps).as_py())
    raw = int(pc.min(timestamps.cast(pa.int64())).as_py())
    unit = timestamps.type.unit
    return raw * 1000 if unit == "s" else raw // {"ms": 1, "us": 1000, "ns": 1_000_000}[unit]


def stats_column(rows: int, stats: BatchStats) -> pa.Array:
    """The ``stats`` column: the summary as JSON on the first row, null on the others."""
    if rows == 0:
        return pa.nulls(0, pa.string())
    text = pa.array([json.dumps(stats, separators=(",", ":"))], pa.string())
    return pa.concat_arrays([text, pa.nulls(rows - 1, pa.string())]) if rows > 1 else text


def parse(texts: Iterable[str]) -> list[BatchStats]:
    """The summaries collected from a micro-batch's ``stats`` column."""
    return [json.loads(text) for text in texts]


def merge_counts(into: dict[str, int], counts: Mapping[str, int]) -> None:
    for key, value in counts.items():
        into[key] = into.get(key, 0) + int(value)
