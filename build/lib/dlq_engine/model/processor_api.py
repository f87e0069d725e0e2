"""What a team's processor sees and may raise: ``Message``, ``Retry`` and ``Terminate``.

These three names are the processor contract (``from dlq_engine import Message, Retry,
Terminate``). They are plain Python so a processor can be unit-tested without Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dlq_engine.model.durations import parse_duration_ms


@dataclass(frozen=True, slots=True)
class Message:
    """One record as the processor sees it. ``attempt`` is 0 on the first delivery."""

    key: bytes | None
    value: bytes | None
    headers: Mapping[str, bytes] = field(default_factory=dict)
    topic: str = ""
    partition: int = 0
    offset: int = 0
    timestamp: int = 0
    attempt: int = 0


class Retry(Exception):
    """Retry this message later. ``delay`` (``"30s"``, or seconds as a number) overrides the
    policy's backoff for this attempt, like Pulsar's ``reconsumeLater``."""

    def __init__(self, reason: str = "", *, delay: str | float | None = None) -> None:
        super().__init__(reason or "retry requested")
        self.delay_ms: int | None = None if delay is None else parse_duration_ms(delay)


class Terminate(Exception):
    """Dead-letter this message now, with no retries (Pulsar's terminal nack, PIP-367)."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason or "terminated by the processor")
