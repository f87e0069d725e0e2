"""What the breaker counts from a committed batch (``job.breaker.failures_of``): the processor's
calls and its transient failures, a retry budget that ran out among them."""

from __future__ import annotations

import pytest

from dlq_engine.job.breaker import failures_of


@pytest.mark.parametrize(
    ("row", "failures", "failed", "classes"),
    [
        pytest.param(
            {"total": 10, "retried": 3},
            [("t", "retry", "TimeoutError", 3)],
            3,
            {"TimeoutError": 3},
            id="retried",
        ),
        pytest.param(
            {"total": 10, "retried": 1, "dead_exhausted": 2, "dead_retry_timeout": 4},
            [
                ("t", "retry", "ConnectionError", 1),
                ("t", "exhausted", "ConnectionError", 2),
                ("t", "retry-timeout", "ConnectionError", 4),
            ],
            7,
            {"ConnectionError": 7},
            id="budget-ran-out",
        ),
        pytest.param(
            {"total": 10, "dead_non_retryable": 2, "dead_terminated": 1, "dead_too_large": 1},
            [("t", "non-retryable", "KeyError", 2), ("t", "terminated", "Terminate", 1)],
            0,
            {},
            id="the-downstream-answered",
        ),
    ],
)
def test_transient_failures_are_counted(
    row: dict[str, int], failures: list[tuple[str, str, str, int]], failed: int, classes: dict[str, int]
) -> None:
    summaries = [{"failures": failures}]
    assert failures_of(row, summaries) == (10, failed, classes)  # type: ignore[arg-type]
