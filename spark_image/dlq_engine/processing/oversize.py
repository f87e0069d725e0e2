"""Records too large for the topic they are meant for, found before the sink.

The Kafka sink writes a micro-batch as a whole: one record the producer (``max.request.size``)
or the broker (the topic's ``max.message.bytes``) refuses fails the batch, its offsets are not
committed, and every restart replays it, so one message stops the pipeline. Routing therefore
measures every record it hands to the sink (``over_limit``: Kafka's own size bound, vectorised
over the Arrow batch) against its topic's limit (``RecordLimits``, read when the query starts),
and ``refit`` turns each one over it into something that can be written:

1. a retry letter or dead letter whose failure headers push it over keeps its value: the
   failure's stack traces and messages are cut (marked) until it fits;
2. otherwise the message is dead-lettered with reason ``too-large``: its own value and headers,
   the failure's headers (the processor's error, or ``RecordTooLarge`` for a result or a parked
   record) and ``dlq.record.size``/``limit``/``destination``, if that fits the dead-letter topic;
3. otherwise as a stub of at most ``STUB_MAX_BYTES``: its origin, key (or the key's digest when
   longer than ``STUB_MAX_KEY_BYTES``), the same headers, and ``dlq.value.omitted``, the value's
   size and SHA-256 digest instead of the value. The value itself goes to the dead-letter table
   where the policy has one (``table_value``).

Under the ``ignore`` strategy the message is counted and logged instead (its dead letter is not
written), under ``stop`` the pipeline stops naming it, as for any other dead letter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dlq_engine.model.policy import MIN_MAX_MESSAGE_BYTES
from dlq_engine.model.reasons import TOO_LARGE, DeadLetterReason
from dlq_engine.routing import headers as h
from dlq_engine.routing.outcomes import Decision, Failure, Route, Verdict
from dlq_engine.routing.record_size import (
    EMPTY_RECORD,
    HEADER_OVERHEAD,
    Header,
    Limit,
    RecordLimits,
    record_size,
)

#: The most a stub takes: within the least ``max.message.bytes`` a policy may give its
#: dead-letter topic, so a stub always fits a topic the operator made.
STUB_MAX_BYTES: Final = MIN_MAX_MESSAGE_BYTES - 384
#: A longer key is left out of a stub (``dlq.key.omitted``, its size and digest).
STUB_MAX_KEY_BYTES: Final = 1_024
#: The error class of a dead letter whose record was too large without any failure of the
#: processor: a result too large for the output topic, or a parked record for the retry topic.
RECORD_TOO_LARGE: Final = "RecordTooLarge"


def sizes(key: pa.Array, value: pa.Array, headers: pa.Array) -> np.ndarray:
    """``record_size`` of every row, vectorised: key, value and headers as Arrow columns (the
    headers a list of key/value structs, as the Kafka source gives them)."""
    total = np.full(len(key), EMPTY_RECORD, dtype=np.int64)
    total += _lengths(key)
    total += _lengths(value)
    if len(headers) == 0:
        return total
    offsets = headers.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    if last > first:
        # A sliced column keeps its parent's whole child array and absolute offsets.
        names, contents = headers.values.slice(first, last - first).flatten()
        per_entry = HEADER_OVERHEAD + _lengths(names) + _lengths(contents)
        running = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(per_entry, dtype=np.int64)])
        total += running[offsets[1:] - first] - running[offsets[:-1] - first]
    return total


def _lengths(column: pa.Array) -> np.ndarray:
    """Bytes of each value of a binary or string column; 0 for null."""
    return np.asarray(
        pc.fill_null(pc.binary_length(column), 0).to_numpy(zero_copy_only=False), dtype=np.int64
    )


def limit_for(route: Route, limits: RecordLimits) -> Limit | None:
    """The limit of the topic a record of ``route`` is written to; None when it is not written."""
    if route is Route.OUTPUT:
        return limits.output
    if route in (Route.RETRY, Route.PARKED, Route.CONTROL):
        return limits.retry
    if route is Route.DEAD:
        return limits.dead_letter
    return None


def over_limit(
    routes: np.ndarray, key: pa.Array, value: pa.Array, headers: pa.Array, limits: RecordLimits
) -> list[int]:
    """The rows whose record is larger than its topic allows (``routes``: ``Route`` values)."""
    if len(routes) == 0:
        return []
    unbounded = np.iinfo(np.int64).max
    by_route = np.array(
        [(limit.bytes if (limit := limit_for(route, limits)) is not None else unbounded) for route in Route],
        dtype=np.int64,
    )
    over = sizes(key, value, headers) > by_route[routes.astype(np.int64)]
    return np.flatnonzero(over).tolist() if over.any() else []


@dataclass(frozen=True, slots=True)
class Oversized:
    """One record over its topic's limit, as routing meant to write it."""

    route: Route
    reason: DeadLetterReason | None
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    #: The message as it was read: its value, and its headers less any ``dlq.*`` or listed
    #: profile's ones (``_FlatHeaders.stale``).
    original: bytes | None
    own: list[Header]
    #: The processor's failure of this message (a retry letter or a dead letter), else None.
    failure: Failure | None


@dataclass(frozen=True, slots=True)
class Refitted:
    """What is written instead (``route`` IGNORED: nothing); ``table_value`` is a stub's value,
    for the dead-letter table; ``failure`` is what the metrics count the message under."""

    route: Route
    reason: DeadLetterReason | None
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    failure: Failure | None
    table_value: bytes | None = None


def refit(
    row: Oversized,
    limits: RecordLimits,
    dead_letter: Decision,
    dead_letter_headers: Callable[[Failure], Sequence[Header]],
) -> Refitted:
    """What becomes of ``row`` (see the module's steps). ``dead_letter`` is the decision for a
    too-large dead letter under the policy's strategy; ``dead_letter_headers`` gives the
    failure headers of one (the ``dlq.*`` headers, every profile's, the static ones) and
    applies the strategy (``ignore`` logs, ``stop`` raises)."""
    limit = limit_for(row.route, limits)
    assert limit is not None, f"a record of route {row.route!r} is not written"
    key_size, value_size = _size(row.key), _size(row.value)
    size = record_size(key_size, value_size, row.headers)
    if row.failure is not None and row.route in (Route.RETRY, Route.DEAD):
        cut = h.bounded(row.headers, limit.bytes - record_size(key_size, value_size, []))
        if cut is not None:
            return Refitted(row.route, row.reason, row.key, row.value, cut, row.failure)
    failure = row.failure or Failure(
        Verdict.TERMINATED,
        RECORD_TOO_LARGE,
        f"the record ({size} bytes with its headers) is larger than the {limit.source} ({limit.bytes} bytes)",
    )
    failed = list(dead_letter_headers(failure))
    if dead_letter.route is not Route.DEAD:
        return Refitted(dead_letter.route, TOO_LARGE, row.key, None, [], failure)
    sized = _utf8(
        (h.RECORD_SIZE, str(size)), (h.RECORD_LIMIT, str(limit.bytes)), (h.RECORD_DESTINATION, limit.topic)
    )
    whole = h.bounded(
        [*row.own, *failed, *sized],
        limits.dead_letter.bytes - record_size(key_size, _size(row.original), []),
    )
    if whole is not None:
        return Refitted(Route.DEAD, TOO_LARGE, row.key, row.original, whole, failure)
    return _stub(row, failed, sized, min(limits.dead_letter.bytes, STUB_MAX_BYTES), failure)


def _stub(
    row: Oversized, failed: list[Header], sized: list[Header], bound: int, failure: Failure
) -> Refitted:
    """``row`` as a stub within ``bound`` bytes: no value, a long key left out, its own headers
    left out (and counted) when they do not fit beside the rest."""
    key = row.key if row.key is None or len(row.key) <= STUB_MAX_KEY_BYTES else None
    omitted = [] if key is row.key else _omitted(h.KEY_OMITTED, h.KEY_SIZE, h.KEY_DIGEST, row.key)
    if row.original is not None:
        omitted += _omitted(h.VALUE_OMITTED, h.VALUE_SIZE, h.VALUE_DIGEST, row.original)
    tail = [*failed, *sized, *omitted]
    room = bound - record_size(_size(key), -1, [])
    headers = h.bounded([*row.own, *tail], room)
    if headers is None:
        dropped = [*tail, *_utf8((h.HEADERS_OMITTED, str(len(row.own))))]
        headers = h.bounded(dropped, room) or dropped  # static headers beyond a stub: written as is
    return Refitted(Route.DEAD, TOO_LARGE, key, None, headers, failure, table_value=row.original)


def _omitted(flag: str, size: str, digest: str, value: bytes | None) -> list[Header]:
    data = value or b""
    return _utf8(
        (flag, "true"), (size, str(len(data))), (digest, f"sha256:{hashlib.sha256(data).hexdigest()}")
    )


def _size(value: bytes | None) -> int:
    return -1 if value is None else len(value)


def _utf8(*pairs: tuple[str, str]) -> list[Header]:
    return [(name, text.encode("utf-8")) for name, text in pairs]
