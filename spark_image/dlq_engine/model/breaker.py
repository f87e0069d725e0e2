"""The breaker's states and its report: what the engine's heartbeat carries and the operator reads.

The engine decides the state (``dlq_engine.routing.breaker``), labels its metric with it and
sends a ``BreakerReport`` in every heartbeat; the operator maps the report onto the policy's
``BreakerClosed`` condition. Both sides read the names from here, so they cannot drift apart.
"""

from __future__ import annotations

from typing import Final, Literal, TypedDict, TypeGuard, get_args

BreakerState = Literal["closed", "open", "half-open"]
#: Every state, in the order the metric lists them (``spark_dlq_breaker_state{state}``).
BREAKER_STATES: Final[tuple[BreakerState, ...]] = get_args(BreakerState)
CLOSED: Final[BreakerState] = "closed"
OPEN: Final[BreakerState] = "open"
HALF_OPEN: Final[BreakerState] = "half-open"


def is_state(value: object) -> TypeGuard[BreakerState]:
    """Whether ``value`` names a state (as read from a heartbeat, a local property, a metric)."""
    return value in BREAKER_STATES


class BreakerReport(TypedDict):
    """The heartbeat's ``breaker``: the state, since when (RFC 3339), why it last opened (empty
    before it ever did), how often it opened in this run, and when it lets probes through
    (RFC 3339; empty unless open)."""

    state: BreakerState
    since: str
    reason: str
    opens: int
    probeAt: str


#: The longest ``reason`` a report carries (the condition's message quotes it).
MAX_REASON_CHARS: Final = 1_000
