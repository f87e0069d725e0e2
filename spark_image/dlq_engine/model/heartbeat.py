"""The heartbeat document: what the engine's driver writes on its policy's Lease and the operator
reads, as one type with its JSON form.

The driver (``dlq_engine.job.heartbeat``) sends a ``Heartbeat`` every few seconds in the Lease's
annotation ``ANNOTATION``; the operator (``spark_dlq_operator.policies.supervision``) reads it
back to judge the driver (stalled, breaker open) and to fill ``status.ordering``. Both go
through ``to_json`` and ``from_json`` here, so a key renamed on one side fails the round-trip
test (tests/unit/test_heartbeat.py) instead of silently blinding the operator. ``from_json``
reads what a driver wrote as untrusted: anything not as the engine writes it is None (the whole
document) or left out (its ``ordering`` or ``breaker``), and strings are bounded.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypedDict, TypeGuard

from dlq_engine.model.breaker import MAX_REASON_CHARS, BreakerReport, is_state

#: The Lease annotation the heartbeat is written in.
ANNOTATION: Final = "sparkdlq.io/heartbeat"

#: The most blocked keys a report names, and the longest name it keeps (the CRD's
#: ``status.ordering`` allows as many; the engine sends no more).
ORDERING_SAMPLE: Final = 10
ORDERING_KEY_CHARS: Final = 100

_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"


class OrderingReport(TypedDict):
    """``ordering``: what the ordering stage of ``source.ordering: key`` holds (the operator
    copies it to the policy's ``status.ordering``)."""

    heldMessages: int
    blockedKeys: int
    blockedKeySample: list[str]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One liveness report of the driver (times as the driver's clock has them, to the second)."""

    time: datetime.datetime
    query_active: bool
    #: When the query last made progress (a finished micro-batch, or Spark's idle report).
    last_progress: datetime.datetime
    batch_id: int | None = None
    #: ``source.ordering: key``: the ordering stage's report; None without one (or unreadable).
    ordering: OrderingReport | None = None
    #: ``retry.breaker``: the breaker's report; None without one (or unreadable).
    breaker: BreakerReport | None = None

    def to_json(self) -> str:
        """The annotation's text."""
        document: dict[str, Any] = {
            "time": rfc3339(self.time),
            "queryActive": self.query_active,
            "lastProgressTime": rfc3339(self.last_progress),
            "batchId": self.batch_id,
        }
        if self.ordering is not None:
            document["ordering"] = dict(self.ordering)
        if self.breaker is not None:
            document["breaker"] = dict(self.breaker)
        return json.dumps(document, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Heartbeat | None:
        """The heartbeat in ``text``, None when it is not one as the engine writes it."""
        try:
            raw = json.loads(text)
            at, progress = time_of(raw["time"]), time_of(raw["lastProgressTime"])
            active = raw["queryActive"]
        except (ValueError, KeyError, TypeError):
            return None
        if at is None or progress is None or not isinstance(active, bool):
            return None
        batch = raw.get("batchId")
        return cls(
            at,
            active,
            progress,
            batch if _count(batch) else None,
            _ordering_of(raw.get("ordering")),
            _breaker_of(raw.get("breaker")),
        )


def rfc3339(moment: datetime.datetime) -> str:
    """``moment`` as the heartbeat writes times (UTC, to the second)."""
    return moment.astimezone(datetime.UTC).strftime(_TIME_FORMAT)


def time_of(value: object) -> datetime.datetime | None:
    """An RFC 3339 time, or None."""
    if not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _ordering_of(raw: object) -> OrderingReport | None:
    """The heartbeat's ``ordering``, None when absent or not as the engine writes it."""
    if not isinstance(raw, Mapping):
        return None
    held, blocked, sample = raw.get("heldMessages"), raw.get("blockedKeys"), raw.get("blockedKeySample")
    if not (_count(held) and _count(blocked)) or not isinstance(sample, list):
        return None
    if not all(isinstance(k, str) for k in sample):
        return None
    return {
        "heldMessages": int(held),
        "blockedKeys": int(blocked),
        "blockedKeySample": [str(k)[:ORDERING_KEY_CHARS] for k in sample[:ORDERING_SAMPLE]],
    }


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _breaker_of(raw: object) -> BreakerReport | None:
    """The heartbeat's ``breaker``, None when absent or not as the engine writes it."""
    if not isinstance(raw, Mapping):
        return None
    state, since, reason, opens, probe_at = (
        raw.get(key) for key in ("state", "since", "reason", "opens", "probeAt")
    )
    if not is_state(state) or time_of(since) is None or not _count(opens):
        return None
    if not isinstance(reason, str) or not isinstance(probe_at, str):
        return None
    return {
        "state": state,
        "since": str(since),
        "reason": reason[:MAX_REASON_CHARS],
        "opens": int(opens),
        "probeAt": probe_at if time_of(probe_at) is not None else "",
    }
