"""Which events a change of a policy's status announces: one table, by condition type.

A condition that changed (its status, reason or message) is matched against the rules of its
type in ``ANNOUNCED``; every rule that matches is one event. A condition that turned False for a
reason worth a Warning (``reasons.WARNING``) posts a Warning of that reason; Ready turning True
a Normal ``Ready``; TopicsReady that finds partition drift or short retention a Warning of each;
the breaker a Warning when it opens and a Normal when it closes, none while it goes between
open and half-open. Pure: ``announcements`` takes the old and new status and returns the
events; ``status_writer`` posts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from spark_dlq_operator.policies.status import ConditionStatus, ConditionType
from spark_dlq_operator.reasons import WARNING, EventReason, EventType, Reason

#: What ``topics.ready_report`` writes into TopicsReady's message before the drift it found.
DRIFT_MARK: Final = "drift:"


@dataclass(frozen=True, slots=True)
class Rule:
    """One event a changed condition of a type posts, and when."""

    type: EventType
    #: The event's reason; None: the condition's own reason.
    reason: EventReason | Reason | None = None
    #: The condition's status now, and its reason now, for the rule to apply (None: any).
    status: ConditionStatus | None = None
    reasons: frozenset[Reason] | None = None
    #: Only when the status changed; only when it was this status before (None: any).
    turned: bool = False
    was: ConditionStatus | None = None
    #: Only when the condition's message holds this.
    mentions: str = ""

    def applies(self, previous: Mapping[str, Any], condition: Mapping[str, Any]) -> bool:
        status = condition.get("status")
        return (
            (self.status is None or status == self.status)
            and (self.reasons is None or condition.get("reason") in self.reasons)
            and not (self.turned and previous.get("status") == status)
            and (self.was is None or previous.get("status") == self.was)
            and self.mentions in condition.get("message", "")
        )


@dataclass(frozen=True, slots=True)
class Announcement:
    """An event to post on the policy."""

    type: EventType
    reason: str
    message: str


#: A condition that turned False for a reason worth a Warning: a Warning of that reason.
_PROBLEM: Final = Rule("Warning", status="False", reasons=WARNING)

#: The rules of each condition type (tests/unit/test_announcements.py: every type has its entry).
ANNOUNCED: Final[Mapping[ConditionType, tuple[Rule, ...]]] = {
    "Ready": (_PROBLEM, Rule("Normal", EventReason.READY, status="True", turned=True)),
    "TopicsReady": (
        _PROBLEM,
        Rule("Warning", EventReason.TOPIC_PARTITIONS_DRIFT, status="True", mentions=DRIFT_MARK),
        Rule("Warning", EventReason.TOPIC_RETENTION_SHORT, reasons=frozenset({Reason.SHORT_RETENTION})),
    ),
    "JobRunning": (_PROBLEM,),
    "BreakerClosed": (
        Rule(
            "Warning",
            Reason.BREAKER_OPEN,
            status="False",
            reasons=frozenset({Reason.BREAKER_OPEN}),
            turned=True,
        ),
        Rule("Normal", EventReason.BREAKER_CLOSED, status="True", was="False"),
    ),
}


def announcements(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Announcement]:
    """The events for each condition of ``new`` that differs from its namesake in ``old``."""
    before = {c.get("type"): c for c in old.get("conditions") or []}
    found: list[Announcement] = []
    for condition in new.get("conditions") or []:
        previous = before.get(condition["type"]) or {}
        if all(previous.get(k) == condition.get(k) for k in ("status", "reason", "message")):
            continue
        message = condition.get("message", "")
        for rule in ANNOUNCED.get(condition["type"], ()):
            if rule.applies(previous, condition):
                found.append(Announcement(rule.type, rule.reason or condition.get("reason", ""), message))
    return found
