"""The events a change of a policy's status announces (``policies.announcements``): one table by
condition type, each rule with the case that posts it and the cases that must not."""

from __future__ import annotations

from typing import Any

import pytest

from spark_dlq_operator.policies.announcements import ANNOUNCED, Announcement, announcements
from spark_dlq_operator.policies.status import CONDITION_TYPES
from spark_dlq_operator.reasons import EventReason, EventType, Reason
from spark_dlq_operator.topics import ready_report


def status(*conditions: tuple[str, str, str, str]) -> dict[str, Any]:
    """A status holding ``(type, status, reason, message)`` conditions."""
    return {"conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]}


def test_every_condition_type_has_its_entry() -> None:
    assert set(ANNOUNCED) == set(CONDITION_TYPES)


def test_every_event_reason_is_posted_by_a_rule() -> None:
    posted = {rule.reason for rules in ANNOUNCED.values() for rule in rules}
    assert set(EventReason) <= posted


OK = ("TopicsReady", "True", Reason.TOPICS_READY, "ready")
DOWN = ("TopicsReady", "False", Reason.BROKER_UNAVAILABLE, "no broker")
CLOSED = ("BreakerClosed", "True", Reason.BREAKER_CLOSED, "closed")
OPEN = ("BreakerClosed", "False", Reason.BREAKER_OPEN, "open")
HALF_OPEN = ("BreakerClosed", "False", Reason.BREAKER_HALF_OPEN, "probing")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            status(OK),
            status(DOWN),
            [("Warning", "BrokerUnavailable", "no broker")],
            id="problem-warns-its-reason",
        ),
        pytest.param(
            status(DOWN),
            status(("TopicsReady", "False", Reason.BROKER_UNAVAILABLE, "still no broker")),
            [("Warning", "BrokerUnavailable", "still no broker")],
            id="problem-with-a-new-message-warns-again",
        ),
        pytest.param(status(DOWN), status(DOWN), [], id="unchanged-posts-nothing"),
        pytest.param(
            status(),
            status(("TopicsReady", "False", Reason.WAITING_FOR_STRIMZI, "waiting")),
            [],
            id="false-for-a-reason-not-worth-a-warning",
        ),
        pytest.param(
            status(),
            status(("JobRunning", "False", Reason.ENGINE_STALLED, "stalled")),
            [("Warning", "EngineStalled", "stalled")],
            id="job-problem",
        ),
        pytest.param(
            status(),
            status(("Ready", "False", Reason.INVALID_SPEC, "spec.x: bad")),
            [("Warning", "InvalidSpec", "spec.x: bad")],
            id="ready-problem",
        ),
        pytest.param(
            status(("Ready", "False", Reason.PENDING, "")),
            status(("Ready", "True", Reason.READY, "all good")),
            [("Normal", "Ready", "all good")],
            id="ready-turned-true",
        ),
        pytest.param(
            status(),
            status(("Ready", "True", Reason.READY, "all good")),
            [("Normal", "Ready", "all good")],
            id="ready-true-at-first",
        ),
        pytest.param(
            status(("Ready", "True", Reason.READY, "old words")),
            status(("Ready", "True", Reason.READY, "new words")),
            [],
            id="ready-still-true",
        ),
        pytest.param(
            status(OK),
            status(("TopicsReady", "True", Reason.SHORT_RETENTION, "ready; drift: p; short retention: r")),
            [
                ("Warning", "TopicPartitionsDrift", "ready; drift: p; short retention: r"),
                ("Warning", "TopicRetentionShort", "ready; drift: p; short retention: r"),
            ],
            id="drift-and-short-retention-both",
        ),
        pytest.param(status(CLOSED), status(OPEN), [("Warning", "BreakerOpen", "open")], id="breaker-opens"),
        pytest.param(status(OPEN), status(HALF_OPEN), [], id="breaker-half-open"),
        pytest.param(status(HALF_OPEN), status(OPEN), [], id="breaker-open-again"),
        pytest.param(
            status(HALF_OPEN), status(CLOSED), [("Normal", "BreakerClosed", "closed")], id="breaker-closes"
        ),
        pytest.param(status(), status(CLOSED), [], id="breaker-closed-at-first"),
        pytest.param(
            status(),
            status(("BreakerClosed", "False", Reason.BREAKER_OPEN, "open")),
            [("Warning", "BreakerOpen", "open")],
            id="breaker-open-at-first",
        ),
    ],
)
def test_a_change_announces(
    old: dict[str, Any], new: dict[str, Any], expected: list[tuple[EventType, str, str]]
) -> None:
    assert announcements(old, new) == [Announcement(*event) for event in expected]


def test_the_drift_ready_report_writes_is_announced() -> None:
    report = ready_report(
        "topics exist", created=(), owned=(), drift=["'orders-retry' has 1 partition, wants 3"]
    )
    new = status(("TopicsReady", "True", report.reason, report.message))
    assert [event.reason for event in announcements(status(OK), new)] == ["TopicPartitionsDrift"]
