"""How many bytes a Kafka record takes, and how its failure headers are cut to fit a budget.

A record the broker or the producer refuses fails the whole micro-batch's write, and every
restart replays it: one record would stall the pipeline. So routing measures each record before
the sink, as the producer does: ``record_size`` is Kafka's own upper bound
(``AbstractRecords.estimateSizeInBytesUpperBound`` for the v2 format, uncompressed: a batch
header of 61 bytes, at most 21 bytes of record overhead, a length varint per key, value, header
name and header value, each counted here at its widest, 5 bytes). The producer compares that
bound with its ``max.request.size``; the broker compares the batch it receives (never larger,
for a record alone in its batch) with the topic's ``max.message.bytes``. A record within
``limit`` by this count is accepted by both.

``shrink`` cuts the long texts among a record's headers (the failure's stack traces and error
messages, under every header profile's name) so that the headers fit a byte budget: each text
longer than a common cap is cut to it, a stack trace keeping its end (the raise site), a
message its start, and every cut text says so (``TRUNCATED``). Nothing else is touched.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

#: ``DefaultRecordBatch.RECORD_BATCH_OVERHEAD``: the batch header around a record.
BATCH_OVERHEAD: Final = 61
#: ``DefaultRecord.MAX_RECORD_OVERHEAD``: a record's length, attributes, timestamp and offset
#: deltas at their widest.
RECORD_OVERHEAD: Final = 21
#: The widest varint (a length or a count).
VARINT: Final = 5
#: What a record with a null key, a null value and no header takes.
EMPTY_RECORD: Final = BATCH_OVERHEAD + RECORD_OVERHEAD + 3 * VARINT
#: What each header adds beside its name's UTF-8 bytes and its value's bytes.
HEADER_OVERHEAD: Final = 2 * VARINT

#: Appended to a cut message, put before a cut stack trace: ``{}`` is the text's size in bytes.
TRUNCATED: Final = "...(truncated from {} bytes to fit the record's limit)"

Header = tuple[str, bytes | None]


def record_size(key: int, value: int, headers: Sequence[Header]) -> int:
    """The most bytes a record with a key of ``key`` bytes, a value of ``value`` bytes (-1 or 0
    for null) and ``headers`` takes in a batch of its own."""
    return EMPTY_RECORD + max(key, 0) + max(value, 0) + headers_size(headers)


def headers_size(headers: Sequence[Header]) -> int:
    """What ``headers`` add to a record."""
    return sum(
        HEADER_OVERHEAD + len(name.encode("utf-8")) + (len(value) if value is not None else 0)
        for name, value in headers
    )


def shrink(
    headers: Sequence[Header],
    budget: int,
    *,
    keep_end: Collection[str],
    keep_start: Collection[str],
) -> list[Header] | None:
    """``headers`` with the values of the ``keep_end`` and ``keep_start`` names cut so that
    ``headers_size`` is at most ``budget`` bytes; ``headers`` itself (as a list) when it fits
    already; None when it cannot fit even with every such value cut to its marker alone.

    The cut is even: one cap for every cuttable value (the largest that fits), so a short
    message keeps its text while a long stack trace gives way."""
    listed = list(headers)
    if headers_size(listed) <= budget:
        return listed
    cuttable = [
        i for i, (name, value) in enumerate(listed) if value and (name in keep_end or name in keep_start)
    ]
    fixed = headers_size([entry for i, entry in enumerate(listed) if i not in set(cuttable)])
    fixed += sum(HEADER_OVERHEAD + len(listed[i][0].encode("utf-8")) for i in cuttable)
    sizes = [len(listed[i][1] or b"") for i in cuttable]
    floor = [min(size, _marker_size(size)) for size in sizes]
    if fixed + sum(floor) > budget:
        return None
    cap = _cap(sizes, budget - fixed)
    shrunk = list(listed)
    for i, size in zip(cuttable, sizes, strict=True):
        if size > cap:
            name, value = listed[i]
            assert value is not None
            shrunk[i] = (name, _cut(value, cap, from_end=name in keep_end))
    return shrunk


def _cap(sizes: Sequence[int], room: int) -> int:
    """The largest cap with ``sum(min(size, max(cap, marker)))`` within ``room`` (a cut text is
    never shorter than its marker)."""
    low, high = 0, max(sizes, default=0)
    while low < high:
        middle = (low + high + 1) // 2
        used = sum(size if size <= middle else max(middle, _marker_size(size)) for size in sizes)
        if used <= room:
            low = middle
        else:
            high = middle - 1
    return low


def _marker_size(size: int) -> int:
    return len(TRUNCATED.format(size))


def _cut(value: bytes, cap: int, *, from_end: bool) -> bytes:
    """``value`` cut to at most ``cap`` bytes (its marker's size at least) with the marker,
    never splitting a UTF-8 character."""
    marker = TRUNCATED.format(len(value)).encode()
    room = max(cap - len(marker), 0)
    if from_end:
        kept = value[len(value) - room :] if room else b""
        return marker + kept.decode("utf-8", "ignore").encode("utf-8")
    return value[:room].decode("utf-8", "ignore").encode("utf-8") + marker


#: The sink producer's ``max.request.size`` (``job.pipeline.SINK_OPTIONS``): no record larger
#: than this by ``record_size`` is sent, whatever the topic allows.
PRODUCER_MAX_REQUEST_SIZE: Final = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limit:
    """The most bytes (``record_size``) a record may take on ``topic``, and where that comes
    from, in words (``max.message.bytes of topic 'orders-out'``)."""

    bytes: int
    source: str
    topic: str = ""


#: No topic limit known: the producer's alone.
PRODUCER_LIMIT: Final = Limit(PRODUCER_MAX_REQUEST_SIZE, "max.request.size of the sink's producer")


@dataclass(frozen=True, slots=True)
class RecordLimits:
    """What each topic a policy writes accepts: the output topic (its results), the retry topic
    (retry letters, and with ``source.ordering: key`` the parked and control records), the
    dead-letter topic."""

    output: Limit = PRODUCER_LIMIT
    retry: Limit = PRODUCER_LIMIT
    dead_letter: Limit = PRODUCER_LIMIT
