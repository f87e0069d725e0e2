"""Dead letters the broker no longer holds (the topic's retention, a deleteRecords): the offsets
a read of a Kafka topic found gone, as ``PARTITION/FIRST-LAST`` spans. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: Offsets ``first``..``last`` of a partition, inclusive.
Span = tuple[int, int]


def expired_spans(lows: Mapping[int, int], jumps: Mapping[int, Sequence[Span]]) -> dict[int, list[Span]]:
    """The offsets of the dead-letter topic the broker no longer holds, per partition: those
    before its first kept offset (``lows``, as the read ends), and of the offsets a read skipped
    (``jumps``) those below it (the rest are transaction markers or compacted away)."""
    found: dict[int, list[Span]] = {}
    for partition, low in sorted(lows.items()):
        spans = [(0, low - 1)] if low > 0 else []
        for first, last in jumps.get(partition, ()):
            if first < low and first > (spans[-1][1] if spans else -1):
                spans.append((first, min(last, low - 1)))
        if spans:
            found[partition] = spans
    return found


def describe_spans(spans: Mapping[int, Sequence[Span]], *, most: int = 5) -> str:
    """``0/0-2, 1/0-4`` (PARTITION/OFFSETS, as ``ls`` prints positions)."""
    parts = [
        f"{partition}/{first}" + (f"-{last}" if last > first else "")
        for partition, found in sorted(spans.items())
        for first, last in found
    ]
    more = f", and {len(parts) - most} more" if len(parts) > most else ""
    return ", ".join(parts[:most]) + more


def spans_total(spans: Mapping[int, Sequence[Span]]) -> int:
    return sum(last - first + 1 for found in spans.values() for first, last in found)
