"""The per-batch metrics summary that routing hands to the driver (``routing.stats``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from dlq_engine import Retry, Terminate
from dlq_engine.processing.batches import HEADER_TYPE, route_batch
from dlq_engine.processing.calls import TIMED_CALLS
from dlq_engine.routing.settings import RoutingSettings
from dlq_engine.routing.stats import (
    COUNTS,
    MAX_CLASSES_PER_BATCH,
    OTHER,
    attempt_label,
    histogram,
    observed_row,
    stats_column,
)
from tests.policy_builder import policy
from tests.unit.test_batches import POLICY as BATCHES_POLICY

NOW = 1_700_000_100_000
#: test_batches' policy under other names, with no static headers.
POLICY: dict[str, Any] = {
    **BATCHES_POLICY,
    "metadata.name": "p",
    "metadata.namespace": "ns",
    "spec.source.subscription": "sub",
    "spec.retry.topic": "retry",
    "spec.output.topic": "out",
    "spec.deadLetter.headers": {},
    "spec.spark.trigger": "1s",  # released late: more than 2 s past due
}
SETTINGS = RoutingSettings.from_policy(policy(POLICY))


def batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """Rows with ``value``; ``retry: (attempt, deliver_at)`` makes a retry record."""
    headers, topics = [], []
    for row in rows:
        if "retry" in row:
            attempt, due = row["retry"]
            headers.append(
                [
                    {"key": "dlq.attempt", "value": str(attempt).encode()},
                    {"key": "dlq.deliver.at", "value": str(due).encode()},
                ]
            )
            topics.append("retry")
        else:
            headers.append([])
            topics.append("orders")
    n = len(rows)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([b"k"] * n, pa.binary()),
            pa.array([r["value"] for r in rows], pa.binary()),
            pa.array(headers, HEADER_TYPE),
            pa.array(topics, pa.string()),
            pa.array([0] * n, pa.int32()),
            pa.array(list(range(n)), pa.int64()),
            pa.array([r.get("ts", NOW - 5000) * 1000 for r in rows], pa.timestamp("us", tz="UTC")),
        ],
        names=["key", "value", "headers", "topic", "partition", "offset", "timestamp"],
    )


class Boom(Exception):
    pass


def process(message: Any) -> Any:
    command = message.value.decode()
    if command == "ok":
        return b"done"
    if command == "conn":
        raise ConnectionError("down")
    if command == "retry":
        raise Retry("later", delay="1s")
    if command == "terminate":
        raise Terminate("no")
    if command == "key":
        raise KeyError("k")
    if command.startswith("class"):
        raise type(f"Error{command}", (Exception,), {})("dynamic")
    raise Boom(command)


def summary_of(rows: list[dict[str, Any]], settings: RoutingSettings = SETTINGS) -> dict[str, Any]:
    out = route_batch(batch(rows), settings, process, now_ms=lambda: NOW)
    column = out.column("stats").to_pylist()
    assert all(text is None for text in column[1:])
    parsed: dict[str, Any] = json.loads(column[0])
    return parsed


def test_failures_are_counted_by_outcome_reason_and_class() -> None:
    summary = summary_of(
        [
            *({"value": v} for v in (b"ok", b"conn", b"conn", b"terminate", b"key")),
            {"value": b"conn", "retry": (2, NOW - 100)},
        ]
    )
    assert sorted(map(tuple, summary["failures"])) == [
        ("dead_letter", "exhausted", "ConnectionError", 1),
        ("dead_letter", "non-retryable", "KeyError", 1),
        ("dead_letter", "terminated", "dlq_engine.model.processor_api.Terminate", 1),
        ("retry", "retry", "ConnectionError", 2),
    ]
    assert summary["attempts"] == {"1": 4, "3": 1}


def test_counts_by_route_and_reason_and_the_lateness_range_are_summed_per_micro_batch() -> None:
    rows = [
        *({"value": v} for v in (b"ok", b"ok", b"conn", b"terminate", b"key")),
        {"value": b"conn", "retry": (2, NOW - 100)},
        {"value": b"ok", "retry": (1, NOW - 700)},
    ]
    summary = summary_of(rows)
    assert summary["counts"] == {
        **dict.fromkeys(COUNTS, 0),
        "total": 7,
        "output": 3,
        "retried": 1,
        "dead": 3,
        "redelivered": 2,
        "dead_exhausted": 1,
        "dead_terminated": 1,
        "dead_non_retryable": 1,
    }
    assert (summary["max_lateness_ms"], summary["min_lateness_ms"]) == (700, 100)
    other = summary_of(
        [{"value": b"ok", "retry": (1, NOW - 50)}],
        RoutingSettings.from_policy(policy({**POLICY, "spec.deadLetter.strategy": "ignore"})),
    )
    row = observed_row([json.dumps(summary), json.dumps(other)])
    assert {k: row[k] for k in ("total", "output", "redelivered", "max_lateness_ms", "min_lateness_ms")} == {
        "total": 8,
        "output": 4,
        "redelivered": 3,
        "max_lateness_ms": 700,
        "min_lateness_ms": 50,
    }
    assert row["stats"] == [json.dumps(summary), json.dumps(other)]
    assert observed_row(None) == {
        **dict.fromkeys(COUNTS, 0),
        "max_lateness_ms": None,
        "min_lateness_ms": None,
        "stats": [],
    }


def test_classes_beyond_the_per_batch_bound_are_counted_as_other() -> None:
    rows = [{"value": f"class{i}".encode()} for i in range(MAX_CLASSES_PER_BATCH + 5)]
    summary = summary_of(rows)
    classes = {c for _, _, c, _ in summary["failures"]}
    assert len(classes) == MAX_CLASSES_PER_BATCH + 1
    other = [n for _, _, c, n in summary["failures"] if c == OTHER]
    assert other == [5]


def test_processor_latency_is_one_observation_per_message_in_message_mode() -> None:
    summary = summary_of([{"value": b"ok"}] * 7)
    assert summary["latency"]["count"] == 7
    assert sum(summary["latency"]["buckets"]) == 7
    assert summary["latency"]["sum"] > 0


def test_processor_latency_times_the_first_calls_of_a_large_batch() -> None:
    summary = summary_of([{"value": b"ok"}] * (TIMED_CALLS + 44))
    assert summary["latency"]["count"] == TIMED_CALLS


def test_processor_latency_is_one_observation_per_call_in_batch_mode() -> None:
    settings = dataclasses.replace(SETTINGS, mode="batch")
    out = route_batch(
        batch([{"value": b"ok"}] * 4), settings, lambda ms: [b"x"] * len(ms), now_ms=lambda: NOW
    )
    assert json.loads(out.column("stats")[0].as_py())["latency"]["count"] == 1


def test_released_retries_their_lateness_and_the_late_ones() -> None:
    summary = summary_of(
        [
            {"value": b"ok", "retry": (1, NOW - 300)},  # 0.3 s late
            {"value": b"ok", "retry": (1, NOW - 2500)},  # 2.5 s: past late_after_ms
            {"value": b"ok"},
        ]
    )
    assert summary["released"] == 2
    assert summary["late"] == 1
    assert summary["lateness"]["count"] == 2
    assert summary["lateness"]["sum"] == pytest.approx(2.8)


def test_oldest_source_timestamp_ignores_retry_records() -> None:
    summary = summary_of(
        [
            {"value": b"ok", "ts": NOW - 9000},
            {"value": b"ok", "ts": NOW - 1000},
            {"value": b"ok", "retry": (1, NOW), "ts": NOW - 60_000},
        ]
    )
    assert summary["oldest_source_ms"] == NOW - 9000
    assert summary_of([{"value": b"ok", "retry": (1, NOW)}])["oldest_source_ms"] is None


@pytest.mark.parametrize(
    ("values", "buckets"),
    [
        pytest.param([0.5, 1.0, 1.5, 9.0], [0, 2, 1, 1], id="le-is-inclusive"),
        pytest.param([], [0, 0, 0, 0], id="empty"),
    ],
)
def test_histogram_buckets_follow_prometheus_le(values: list[float], buckets: list[int]) -> None:
    h = histogram(np.array(values, dtype=np.float64), (0.1, 1.0, 2.0))
    assert h["buckets"] == buckets
    assert h["count"] == len(values)


@pytest.mark.parametrize(("failures", "label"), [(1, "1"), (9, "9"), (10, "10+"), (500, "10+")])
def test_attempt_labels_are_bounded(failures: int, label: str) -> None:
    assert attempt_label(failures) == label


def test_an_empty_batch_has_an_empty_stats_column() -> None:
    out = route_batch(batch([]), SETTINGS, process, now_ms=lambda: NOW)
    assert out.num_rows == 0
    assert out.column("stats").type == pa.string()


def test_the_summary_rides_on_the_first_row_only() -> None:
    column = stats_column(3, json.loads(json.dumps(summary_of([{"value": b"ok"}]))))
    assert column.null_count == 2
    assert column[0].as_py() is not None
