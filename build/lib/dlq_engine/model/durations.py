"""Durations as users write them in a policy (``500ms``, ``1s``, ``10m``, ``1h30m``).

Policies are YAML written by people, so a duration is a short string in the style of Go and
Kubernetes; the engine works in integer milliseconds. This module is the one place that turns
one into the other, and the one place that formats milliseconds back for messages.
"""

from __future__ import annotations

import math
import re

_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_WHOLE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$")


class DurationError(ValueError):
    """A duration string that cannot be read."""


def parse_duration_ms(value: object) -> int:
    """Return the duration in milliseconds.

    Accepts a string of one or more ``<number><unit>`` parts (units ms, s, m, h, d), or a plain
    non-negative number, taken as seconds (YAML turns ``delay: 5`` into an int).
    """
    if isinstance(value, bool):
        raise DurationError(f"must be a duration such as 500ms, 1s or 2m, got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise DurationError(f"must be a finite number of seconds, got {value!r}")
        if value < 0:
            raise DurationError(f"must not be negative, got {value!r}")
        return round(value * 1000)
    if not isinstance(value, str):
        raise DurationError(f"must be a duration such as 500ms, 1s or 2m, got {value!r}")
    text = value.strip()
    if text == "0":
        return 0
    if not _WHOLE.match(text):
        raise DurationError(f"must be a duration such as 500ms, 1s or 2m, got {value!r}")
    total = 0.0
    for number, unit in _PART.findall(text):
        total += float(number) * _UNIT_MS[unit]
    return round(total)


def format_ms(ms: int) -> str:
    """Format milliseconds as the shortest exact duration string (``90000`` -> ``1m30s``)."""
    if ms == 0:
        return "0s"
    parts: list[str] = []
    rest = ms
    for unit in ("d", "h", "m", "s", "ms"):
        size = _UNIT_MS[unit]
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
