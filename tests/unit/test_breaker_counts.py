"""What the breaker counts from a committed batch (``job.breaker.failures_of``): the processor's
calls and its transient failures, a retry budget that ran out among them; and what a probe is
spared (``job.breaker.probing``): its redelivery limit, not its time budget."""

from __future__ import annotations

import pytest

from dlq_engine.job.breaker import NO_LIMIT, failures_of, probing
from dlq_engine.model import parse_policy
from dlq_engine.routing.settings import RoutingSettings
from tests.policy_builder import policy_document


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


def test_a_probe_has_no_redelivery_limit_but_keeps_its_retry_budget() -> None:
    """A failed probe goes back to the retry topic whatever redeliveries it has left; a time
    budget the policy set still applies (docs/engine.md, "The circuit breaker")."""
    document = policy_document(
        {
            "spec.retry.maxRetryDuration": "1m",
            "spec.retry.rules": [{"errors": ["KeyError"], "maxRedeliverCount": 2, "maxRetryDuration": "5s"}],
        }
    )
    settings = RoutingSettings.from_policy(parse_policy(document))
    probe = probing(settings).classifier
    assert (probe.max_redeliver, [rule.max_redeliver for rule in probe.rules]) == (NO_LIMIT, [NO_LIMIT])
    assert (probe.budget_ms, [rule.budget_ms for rule in probe.rules]) == (60_000, [5_000])
