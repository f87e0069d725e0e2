"""The error window (``job.runner.FailureWindow``): the failure share of the last ``size``
messages, kept per micro-batch, and the run it stops once the share reaches the threshold."""

from __future__ import annotations

from typing import Any, cast

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from dlq_engine.job.metrics import EngineMetrics
from dlq_engine.job.pipeline import RunOptions
from dlq_engine.job.runner import FailureWindow, Run
from tests.policy_builder import policy


def fed(window: FailureWindow, *batches: tuple[int, int]) -> list[float | None]:
    """What ``add`` returned for each batch (total, failed)."""
    return [window.add(total, failed) for total, failed in batches]


def test_a_window_of_size_zero_is_off() -> None:
    window = FailureWindow(0, 0.5)
    assert fed(window, (10, 10), (100, 100)) == [None, None]
    assert window.ratio is None


def test_a_batch_that_read_nothing_changes_nothing() -> None:
    window = FailureWindow(10, 0.5)
    assert fed(window, (4, 1), (0, 0)) == [None, None]
    assert (list(window.batches), window.ratio) == ([(4, 1)], 0.25)


def test_until_size_messages_were_seen_it_reports_their_share_and_never_stops() -> None:
    window = FailureWindow(10, 0.5)
    assert window.ratio is None
    assert fed(window, (3, 3), (6, 6)) == [None, None]
    assert window.ratio == 1.0


@pytest.mark.parametrize(
    ("failed", "stops"),
    [
        pytest.param(4, None, id="below-threshold"),
        pytest.param(5, 0.5, id="at-threshold"),
        pytest.param(10, 1.0, id="all-failed"),
    ],
)
def test_once_full_it_returns_the_share_that_reaches_the_threshold(failed: int, stops: float | None) -> None:
    window = FailureWindow(10, 0.5)
    assert fed(window, (4, 0), (6, failed)) == [None, stops]
    assert window.ratio == failed / 10


def test_older_batches_leave_the_view_and_the_oldest_is_scaled_to_size() -> None:
    window = FailureWindow(10, 0.6)
    # 12 seen: the oldest batch keeps 2 of its 4 in view, so 2 of its 4 failures count
    # (scaled), with 0 and 2 of the others: 4 of 10.
    assert fed(window, (4, 4), (4, 0), (4, 2)) == [None, None, None]
    assert window.ratio == pytest.approx(0.4)
    # Two batches leave (the rest cover 10): 2 + 6 of 10.
    assert fed(window, (6, 6)) == [pytest.approx(0.8)]
    assert list(window.batches) == [(4, 2), (6, 6)]


def test_a_batch_bigger_than_the_window_counts_its_share() -> None:
    window = FailureWindow(10, 0.5)
    assert fed(window, (30, 15)) == [pytest.approx(0.5)]
    window = FailureWindow(10, 0.5)
    assert fed(window, (30, 12)) == [None]
    assert window.ratio == pytest.approx(0.4)


def test_a_healthy_stretch_clears_an_early_burst() -> None:
    window = FailureWindow(10, 0.5)
    assert fed(window, (5, 5), (10, 0), (5, 2)) == [None, None, None]
    assert window.ratio == pytest.approx(0.2)


def ratio_metric(metrics: EngineMetrics) -> float | None:
    text = generate_latest(metrics.registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "spark_dlq_error_window_ratio":
                return float(sample.value)
    return None


def test_the_run_reports_the_ratio_each_batch_and_stops_with_the_window_s_reason() -> None:
    settings = policy({"spec.errorWindow": {"size": 10, "threshold": 0.5}})
    metrics = EngineMetrics(settings)
    # No query is started and no breaker is set: the session is never used.
    run = Run(cast(SparkSession, None), settings, RunOptions(checkpoint="/unused"), metrics)
    batch: dict[str, Any] = {"total": 6, "output": 4, "retried": 1, "dead": 1}
    run.on_batch(batch)
    assert (run.stop_reason, ratio_metric(metrics)) == (None, pytest.approx(2 / 6))

    run.on_batch({"total": 4, "retried": 2, "dead": 1, "ignored": 1})
    assert run.stop_reason == "error window: 60% of the last 10 messages failed (threshold 50%)"
    assert ratio_metric(metrics) == pytest.approx(0.6)
    assert run.totals.counts["total"] == 10
    # Stopping once is enough: a later batch keeps the first reason.
    run.on_batch({"total": 10, "dead": 10})
    assert run.stop_reason == "error window: 60% of the last 10 messages failed (threshold 50%)"
