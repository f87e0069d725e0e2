"""The time budget of a message's retries (``retry.maxRetryDuration``, per rule too).

A retry count bounds how often a message is tried, not for how long: with exponential backoff
sixteen redeliveries can take hours. With a budget, a retry is made only if it falls due within
the budget from the message's first failure; otherwise the message is dead-lettered with reason
``retry-timeout``, whatever redeliveries remain. Deciding on the next due time (as Spring
Kafka's retry-topic timeout does), not on the age alone, means no message waits out a backoff
only to be dead-lettered when it comes back.

The budget runs from ``dlq.first.failure.at``, carried from the first failure on every retry
record, or from ``dlq.redrive.at`` when the message was redriven since: a redrive is a fresh
start. On a source record (its first failure now) both are ignored: headers on the source topic
are not the engine's.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlq_engine.routing.headers import FIRST_FAILURE_AT, REDRIVE_AT, first_header


def started_at(retry_headers: Sequence[tuple[str, bytes | None]] | None, now_ms: int) -> int:
    """When the budget of a message started: the later of the first failure and the latest
    redrive its retry headers carry (None: a source record), else ``now_ms``. An unreadable or
    future time counts as now: a forged header never extends the budget past what it would be
    for a message failing now."""
    if retry_headers is None:
        return now_ms
    headers = list(retry_headers)
    times = [_millis(first_header(headers, name)) for name in (FIRST_FAILURE_AT, REDRIVE_AT)]
    known = [t for t in times if t is not None]
    return min(max(known), now_ms) if known else now_ms


def allows(started_ms: int, due_ms: int, budget_ms: int) -> bool:
    """Whether a retry due at ``due_ms`` is within a budget of ``budget_ms`` that started at
    ``started_ms``; a budget of 0 or less is no budget."""
    return budget_ms <= 0 or due_ms - started_ms <= budget_ms


def _millis(raw: bytes | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
