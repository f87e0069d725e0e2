"""Times as ``kubectl dlq`` reads and prints them (ISO-8601, UTC when no zone is given), and the
window of failure times a command looks at (``--since``, ``--after``, ``--before``).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Final

from dlq_engine.model.durations import DurationError, parse_duration_ms
from spark_dlq_operator.kubectl_dlq.errors import BadInput

#: Shown for a missing key, header or value, as kubectl shows a missing field.
NONE: Final = "<none>"
#: Dead letters are written after their ``dlq.failed.at`` is taken, so a record's Kafka timestamp
#: is at least its failure time; a time range is sought from this much before its start, which
#: covers clock skew between the engine's executors and the broker (LogAppendTime topics).
SEEK_MARGIN_MS: Final = 5 * 60_000


def parse_time(text: str, *, flag: str) -> int:
    """An ISO-8601 time (``2026-11-24T10:15:00Z``, ``2026-11-24``) as epoch milliseconds; a time
    without a zone is UTC, as every time this command prints is."""
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(
            f"{flag}: must be an ISO-8601 time such as 2026-11-24T10:15:00Z, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return round(moment.timestamp() * 1000)


def format_time(ms: int | None, *, precise: bool = False) -> str:
    """Epoch milliseconds as ISO-8601 UTC: seconds for tables, milliseconds when ``precise``."""
    if ms is None:
        return NONE
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    if precise:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Window:
    """The failure times a command looks at: ``after`` inclusive, ``before`` exclusive, epoch ms;
    ``None`` is open."""

    after: int | None = None
    before: int | None = None

    def __contains__(self, ms: object) -> bool:
        """An open window holds every record, even one without a time."""
        if self.after is None and self.before is None:
            return True
        if not isinstance(ms, int):
            return False
        return (self.after is None or ms >= self.after) and (self.before is None or ms < self.before)


def parse_window(since: str | None, after: str | None, before: str | None, *, now_ms: int) -> Window:
    """The window of ``--since DURATION`` or ``--after TIME``, and ``--before TIME``."""
    if since is not None and after is not None:
        raise BadInput("give --since or --after, not both")
    start = None
    if since is not None:
        try:
            span = parse_duration_ms(since)
        except DurationError as error:
            raise BadInput(f"--since: {error}") from None
        if span <= 0:
            raise BadInput(f"--since: must be longer than 0, got {since!r}")
        start = now_ms - span
    elif after is not None:
        start = parse_time(after, flag="--after")
    end = parse_time(before, flag="--before") if before is not None else None
    if start is not None and end is not None and start >= end:
        raise BadInput(f"the range is empty: {format_time(start)} is not before {format_time(end)}")
    return Window(start, end)
