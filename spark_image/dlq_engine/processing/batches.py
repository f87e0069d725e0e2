"""Routing a whole Arrow record batch: the one place Python touches each message.

The Spark job hands every partition to ``route_batch`` (through ``mapInArrow``). It reads what
routing needs from the batch (the retry records' headers, their attempts, the ordering stage's
notes), has the processor called (``processing.calls``, in any ``processor.mode``), takes each
failure's ``Decision`` (``routing.outcomes.decide``), holds keys back
(``routing.key_order``), builds the failed and parked records' headers (``routing.letters``),
makes every record fit its topic (``processing.oversize``), and assembles what the Kafka sink
and the metrics need: the route, the key, the value to write, the headers to write, the
dead-letter reason and the retry lateness. One pipeline for every mode: successes stay an Arrow
array (an Arrow processor's own answer, not copied), Python objects are made only for the
rows that need them (retry records, failures, parked records). The key column, and the headers
column when no record's headers change, are the input's own Arrow arrays (not copied); every
byte that crosses back to the JVM is one the sink writes.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dlq_engine.failures import Ending, EngineError
from dlq_engine.model.policy import DEFAULT_HEADER_PROFILES, HeaderProfile
from dlq_engine.model.processor_api import Message
from dlq_engine.model.reasons import TOO_LARGE, DeadLetterReason
from dlq_engine.processing import calls, oversize
from dlq_engine.processing.calls import ProcessFn
from dlq_engine.routing import headers as h
from dlq_engine.routing import key_order, letters, stats
from dlq_engine.routing.outcomes import (
    ACKNOWLEDGE,
    Decision,
    Failure,
    Result,
    Route,
    StopRule,
    dead_letter,
    decide,
    overflow,
    success_routes,
)
from dlq_engine.routing.record_size import Header
from dlq_engine.routing.settings import RoutingSettings

log = logging.getLogger("dlq_engine.processing")

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

#: The column of the ordering stage's note on a record it let go past a bound
#: (``job.ordering``): such a record is dead-lettered with reason ``ordering-overflow``.
ORDER_NOTE: Final = "order_note"


def route_batches(
    batches: Iterable[pa.RecordBatch], settings: RoutingSettings, processor: ProcessFn
) -> Iterator[pa.RecordBatch]:
    # The keys of this task whose message went to retry (or was blocked): their later records
    # in the task, in any later Arrow batch too, are parked (``source.ordering: key``).
    stopped: set[bytes] = set()
    for batch in batches:
        yield route_batch(batch, settings, processor, stopped=stopped)


def route_batch(
    batch: pa.RecordBatch,
    settings: RoutingSettings,
    processor: ProcessFn,
    *,
    now_ms: Callable[[], int] | None = None,
    rand: Callable[[], float] = random.random,
    stopped: set[bytes] | None = None,
) -> pa.RecordBatch:
    """Route one Arrow batch (``output_schema``). ``stopped``: the keys held in this task
    (``source.ordering: key``), updated; ``now_ms`` and ``rand``: the clock and the jitter's
    draws, for tests."""
    clock = now_ms or _now_ms
    classifier = settings.classifier
    n = batch.num_rows
    header_column = batch.column("headers")
    flat = _FlatHeaders.of(header_column, settings.header_profiles)
    retry_rows = _retry_rows(batch, settings.retry_topic)
    retry_headers: dict[int, list[Header]] = {i: flat.pairs(i) for i in retry_rows}
    attempts = [0] * n
    for i in retry_rows:
        attempts[i] = letters.attempt(retry_headers[i])
    notes = _notes(batch) if classifier.ordered else None
    held = stopped if stopped is not None else set()

    called = _call(batch, flat, attempts, retry_headers, notes, held, settings, processor, clock, rand)
    now = clock()
    failures = called.failures
    if notes is not None:
        failures.update({i: overflow(note) for i, note in enumerate(notes) if note is not None})
    decisions = {
        i: called.decided.get(i)
        or decide(
            failures[i], attempts[i] + 1, classifier, now=now, rand=rand, retry_headers=retry_headers.get(i)
        )
        for i in sorted(failures)
    }
    values = called.values
    routes = success_routes(values.is_valid().to_numpy(zero_copy_only=False), classifier)
    if not classifier.has_output:
        values = pa.nulls(n, pa.binary())
    reasons: list[str | None] = [None] * n
    for i, decision in decisions.items():
        routes[i], reasons[i] = decision.route, decision.reason

    keys: list[bytes | None] = batch.column("key").to_pylist() if classifier.ordered else []
    parked: list[int] = []
    controls: list[tuple[int, str]] = []
    if classifier.ordered and (held or retry_rows or decisions):
        parked, controls = key_order.park_and_release(
            keys, lambda i: decisions.get(i, ACKNOWLEDGE), set(retry_rows), held
        )
        for i in parked:
            decisions.pop(i, None)
            routes[i], reasons[i] = Route.PARKED, None

    where = _Positions(batch, attempts, [*decisions, *parked, *(i for i, _ in controls)])
    changed: dict[int, list[tuple[str, bytes]]] = {}
    for i, decision in sorted(decisions.items()):
        changed[i] = _failure_headers(
            where(i), retry_headers.get(i), failures[i], decision, attempts[i] + 1, settings, now
        )
    for i in parked:
        changed[i] = letters.parked_headers(where(i), retry_headers.get(i))
    if changed:
        mask = np.zeros(n, dtype=bool)
        mask[list(changed)] = True
        values = pc.if_else(pa.array(mask), batch.column("value"), values)

    outcomes: list[Result] = [None] * n
    for i, failure in failures.items():
        outcomes[i] = failure
    route_column = pa.array(routes, type=pa.int8())
    fitted = _fit(
        batch,
        settings,
        routes,
        reasons,
        outcomes,
        attempts,
        retry_headers.get,
        where,
        route_column,
        values,
        _written_headers(header_column, flat, changed),
        flat,
        now,
    )
    if fitted.converted:
        route_column = pa.array(routes, type=pa.int8())
        if classifier.ordered:
            too_large = dead_letter(TOO_LARGE, classifier)
            for i, before in sorted(fitted.converted.items()):
                control = key_order.control(too_large, retried=i in retry_headers)
                if before is Route.RETRY and keys[i] is not None and control is not None:
                    controls.append((i, control))
    records = [
        (cast(bytes, keys[i]), control, *letters.position(where(i), retry_headers.get(i)))
        for i, control in controls
    ]
    lateness: list[int | None] = [None] * n
    from_retry = [False] * n
    for i in retry_rows:
        lateness[i] = letters.lateness(retry_headers[i], now)
        from_retry[i] = True
    lateness_column = pa.array(lateness, type=pa.int64())
    summary = stats.summarize(
        batch,
        route_column,
        reasons,
        outcomes,
        attempts,
        lateness_column,
        called.durations,
        from_retry,
        late_after_ms=settings.late_after_ms,
        blocked=sum(1 for _, control in controls if control == h.CONTROL_BLOCK),
    )
    columns = [
        route_column,
        fitted.key,
        fitted.value,
        fitted.headers,
        pa.array(reasons, type=pa.string()),
        lateness_column,
    ]
    if records:
        columns = _with_controls(columns, records, header_column.type)
    if settings.table:
        columns.append(fitted.table_values(n + len(records)))
    return pa.RecordBatch.from_arrays(
        [*columns, stats.stats_column(n + len(records), summary)],
        schema=output_schema(batch.schema, table=settings.table),
    )


@dataclass(slots=True)
class _Called:
    """What the processor made of a batch: ``values``, one per row, a success's result (null:
    acknowledged, failed or not processed); the failed rows' ``Failure``; how long the calls
    took; and the decisions already taken while calling (``calls.in_key_order``)."""

    values: pa.Array
    failures: dict[int, Failure]
    durations: np.ndarray
    decided: dict[int, Decision] = field(default_factory=dict)


def _call(
    batch: pa.RecordBatch,
    flat: _FlatHeaders,
    attempts: list[int],
    retry_headers: Mapping[int, list[Header]],
    notes: Sequence[str | None] | None,
    held: set[bytes],
    settings: RoutingSettings,
    processor: ProcessFn,
    clock: Callable[[], int],
    rand: Callable[[], float],
) -> _Called:
    """The processor called on the batch's records, but not on those the ordering stage let go
    past a bound (``notes``): an Arrow processor on the batch's own arrays, the others on a
    ``Message`` per record."""
    n = batch.num_rows
    kept = None if notes is None else [i for i, note in enumerate(notes) if note is None]
    if settings.mode == "arrow":
        rows = batch if kept is None else batch.take(pa.array(kept, pa.int64()))
        given = arrow_input(
            rows, ([attempts[i] for i in kept] if kept is not None else attempts) if retry_headers else None
        )
        values, failures, took = calls.arrow_call(processor, given, settings)
        durations = np.array([took] if rows.num_rows else [], dtype=np.float64)
        if values is None:
            values = pa.nulls(rows.num_rows, pa.binary())
        if kept is None:
            return _Called(values, failures, durations)
        return _Called(_scatter(values, kept, n), {kept[j]: f for j, f in failures.items()}, durations)
    messages = _messages(batch, flat, attempts)
    decided: dict[int, Decision] = {}
    if settings.classifier.ordered and settings.mode == "message":
        skip = [note is not None for note in notes] if notes is not None else [False] * n
        done, durations, decided = calls.in_key_order(
            messages, skip, retry_headers, settings, processor, held, clock, rand
        )
    elif kept is None:
        done, durations = calls.results(messages, settings, processor)
    else:
        some, durations = calls.results([messages[i] for i in kept], settings, processor)
        done = [None] * n
        for i, result in zip(kept, some, strict=True):
            done[i] = result
    failed = [i for i, result in enumerate(done) if type(result) is Failure]
    failures = {i: cast(Failure, done[i]) for i in failed}
    if failed:
        done = list(done)
        for i in failed:
            done[i] = None
    return _Called(pa.array(done, type=pa.binary()), failures, durations, decided)


def _scatter(values: pa.Array, rows: Sequence[int], n: int) -> pa.Array:
    """``values`` (one per row of ``rows``) placed at those rows of an ``n``-row column, null
    elsewhere."""
    indices = np.full(n, len(values), dtype=np.int64)
    indices[list(rows)] = np.arange(len(rows), dtype=np.int64)
    return pa.concat_arrays([values, pa.nulls(1, values.type)]).take(pa.array(indices))


def _retry_rows(batch: pa.RecordBatch, retry_topic: str) -> list[int]:
    """The rows read from the retry topic."""
    if batch.num_rows == 0:
        return []
    retried = pc.equal(batch.column("topic"), retry_topic)
    return pc.indices_nonzero(retried).to_pylist() if pc.any(retried).as_py() else []


def _messages(batch: pa.RecordBatch, flat: _FlatHeaders, attempts: list[int]) -> list[Message]:
    """A ``Message`` per record, as a message or batch processor is given them."""
    return list(
        map(
            _new_message,
            batch.column("key").to_pylist(),
            batch.column("value").to_pylist(),
            _header_dicts(flat, batch.num_rows),
            batch.column("topic").to_pylist(),
            batch.column("partition").to_pylist(),
            batch.column("offset").to_pylist(),
            epoch_ms(batch.column("timestamp")).to_pylist(),
            attempts,
        )
    )


class _Positions:
    """Where the rows that need it were read, as a ``Message`` without key, value or headers
    (the failure and park headers name the source position): made for ``rows`` at once, for any
    other row when asked."""

    __slots__ = ("_attempts", "_batch", "_known")

    def __init__(self, batch: pa.RecordBatch, attempts: Sequence[int], rows: Iterable[int]) -> None:
        self._batch, self._attempts = batch, attempts
        self._known = self._read(sorted(set(rows)))

    def __call__(self, i: int) -> Message:
        known = self._known.get(i)
        return known if known is not None else self._read([i])[i]

    def _read(self, rows: list[int]) -> dict[int, Message]:
        if not rows:
            return {}
        picked = self._batch.take(pa.array(rows, pa.int64()))
        return {
            i: _new_message(None, None, {}, topic, partition, offset, timestamp, self._attempts[i])
            for i, topic, partition, offset, timestamp in zip(
                rows,
                picked.column("topic").to_pylist(),
                picked.column("partition").to_pylist(),
                picked.column("offset").to_pylist(),
                epoch_ms(picked.column("timestamp")).to_pylist(),
                strict=True,
            )
        }


def _failure_headers(
    message: Message,
    retry_headers: list[Header] | None,
    failure: Failure,
    decision: Decision,
    failures: int,
    settings: RoutingSettings,
    now: int,
) -> list[tuple[str, bytes]]:
    """``letters.failure_headers``, with the dead letter's strategy applied: under ``stop`` the
    pipeline stops instead, under ``ignore`` it is logged."""
    if decision.stop is not None:
        raise _stopped(decision, message, failure)
    if decision.route is Route.IGNORED:
        log.warning(
            "dead letter ignored (strategy ignore): %s[%s]@%s %s: %s: %s",
            message.topic,
            message.partition,
            message.offset,
            decision.reason,
            failure.error_class,
            failure.error_message,
        )
    return letters.failure_headers(message, retry_headers, failure, decision, failures, settings, now)


def _stopped(decision: Decision, message: Message, failure: Failure) -> EngineError:
    """The error that stops the pipeline on a dead letter (``Ending.STOP_STRATEGY``), naming the
    rule and the message."""
    rule = decision.stop
    assert rule is not None
    at = f"message {message.topic}[{message.partition}]@{message.offset}"
    if rule is StopRule.ON_OVERFLOW:
        return EngineError.of(Ending.STOP_STRATEGY, f"{rule.value}: {at}: {failure.error_message}")
    return EngineError.of(
        Ending.STOP_STRATEGY,
        f"{rule.value}: {at} failed ({decision.reason}): {failure.error_class}: {failure.error_message}",
    )


def _header_dicts(flat: _FlatHeaders, n: int) -> list[dict[str, bytes]]:
    """Each row's headers as the processor sees them: a dict, the first of repeated keys wins,
    a null value reads as b"". Read from the flattened key and value columns, without building
    a dict per header entry."""
    names, contents, bounds, valid = flat.names, flat.contents, flat.bounds, flat.valid
    dicts: list[dict[str, bytes]] = []
    for i in range(n):
        start, stop = bounds[i], bounds[i + 1]
        if start == stop or (valid is not None and not valid[i]):
            dicts.append({})
        elif stop - start == 1:
            dicts.append({names[start]: contents[start] or b""})
        else:
            row: dict[str, bytes] = {}
            for j in range(start, stop):
                value = contents[j]
                row.setdefault(names[j], value if value is not None else b"")
            dicts.append(row)
    return dicts


def epoch_ms(column: pa.Array) -> pa.Array:
    """A timestamp column (or an integer one) as int64 epoch milliseconds; null reads as 0."""
    raw = pc.fill_null(column.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    if pa.types.is_timestamp(column.type):
        unit = column.type.unit
        raw = raw * 1000 if unit == "s" else raw // {"ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    return pa.array(raw, type=pa.int64())


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class _Fitted:
    """The key, value and headers columns to write once every record fits its topic
    (``_fit``); ``converted``: the rows whose route changed (dead-lettered as too large), with
    the route each had;
    ``stubs``: the values of the rows written as stubs, for the dead-letter table."""

    key: pa.Array
    value: pa.Array
    headers: pa.Array
    converted: dict[int, Route] = field(default_factory=dict)
    stubs: dict[int, bytes] = field(default_factory=dict)

    def table_values(self, rows: int) -> pa.Array:
        """The ``table_value`` column (``rows`` long: control records come after the rows)."""
        if not self.stubs:
            return pa.nulls(rows, pa.binary())
        values: list[bytes | None] = [None] * rows
        for i, value in self.stubs.items():
            values[i] = value
        return pa.array(values, type=pa.binary())


def _fit(
    batch: pa.RecordBatch,
    settings: RoutingSettings,
    routes: np.ndarray,
    reasons: list[str | None],
    outcomes: list[Result],
    attempts: Sequence[int],
    retry_headers_of: Callable[[int], list[Header] | None],
    message_of: Callable[[int], Message],
    route_column: pa.Array,
    values: pa.Array,
    headers: pa.Array,
    flat: _FlatHeaders,
    now: int,
) -> _Fitted:
    """The records of a routed batch made to fit their topics' limits (``processing.oversize``):
    the rare row over its limit is refitted, and ``routes``, ``reasons`` and ``outcomes`` are
    updated for the rows dead-lettered as too large."""
    key = batch.column("key")
    over = oversize.over_limit(
        route_column.to_numpy(zero_copy_only=False), key, values, headers, settings.limits
    )
    fitted = _Fitted(key, values, headers)
    if not over:
        return fitted
    too_large = dead_letter(TOO_LARGE, settings.classifier)
    originals = batch.column("value")
    keys: dict[int, bytes | None] = {}
    written: dict[int, bytes | None] = {}
    rewritten: dict[int, list[dict[str, Any]]] = {}
    for i in over:
        route = Route(int(routes[i]))
        outcome = outcomes[i]
        row = oversize.Oversized(
            route=route,
            reason=cast(DeadLetterReason | None, reasons[i]),
            key=key[i].as_py(),
            value=values[i].as_py(),
            headers=[(entry["key"], entry["value"]) for entry in headers[i].as_py() or []],
            original=originals[i].as_py(),
            own=flat.own(i),
            failure=outcome if type(outcome) is Failure and route in (Route.RETRY, Route.DEAD) else None,
        )

        def dead_letter_headers(failure: Failure, i: int = i) -> list[tuple[str, bytes]]:
            return _failure_headers(
                message_of(i), retry_headers_of(i), failure, too_large, attempts[i] + 1, settings, now
            )

        refitted = oversize.refit(row, settings.limits, too_large, dead_letter_headers)
        if refitted.route is not route:
            fitted.converted[i] = route
        routes[i], reasons[i], outcomes[i] = refitted.route, refitted.reason, refitted.failure
        if refitted.key is not row.key:
            keys[i] = refitted.key
        written[i] = refitted.value
        rewritten[i] = [{"key": name, "value": value} for name, value in refitted.headers]
        if refitted.table_value is not None:
            fitted.stubs[i] = refitted.table_value
    fitted.key = _put(key, keys)
    fitted.value = _put(values, written)
    fitted.headers = _put(headers, rewritten)
    return fitted


def _put(column: pa.Array, rows: Mapping[int, Any]) -> pa.Array:
    """``column`` with the values of ``rows`` (row index -> value) put in their place."""
    if not rows:
        return column
    order = sorted(rows)
    n = len(column)
    indices = list(range(n))
    for position, row in enumerate(order):
        indices[row] = n + position
    added = pa.array([rows[row] for row in order], type=column.type)
    return pa.concat_arrays([column, added]).take(pa.array(indices, type=pa.int64()))


def _notes(batch: pa.RecordBatch) -> list[str | None] | None:
    """The ordering stage's overflow notes, None when the batch has none."""
    if ORDER_NOTE not in batch.schema.names:
        return None
    column = batch.column(ORDER_NOTE)
    if column.null_count == len(column):
        return None
    notes: list[str | None] = column.to_pylist()
    return notes


def _with_controls(
    columns: list[pa.Array], controls: Sequence[tuple[bytes, str, str, str]], header_type: pa.DataType
) -> list[pa.Array]:
    """The routed columns with the control records appended (route ``CONTROL``, the key, no
    value, ``dlq.control`` and the position in headers, the control in ``reason``)."""
    m = len(controls)
    headers = pa.array(
        [
            [
                {"key": h.CONTROL, "value": control.encode()},
                {"key": h.ORIGINAL_PARTITION, "value": partition.encode()},
                {"key": h.ORIGINAL_OFFSET, "value": offset.encode()},
            ]
            for _, control, partition, offset in controls
        ],
        type=header_type,
    )
    route, key, value, written, reason, lateness = columns
    return [
        pa.concat_arrays([route, pa.array([int(Route.CONTROL)] * m, type=pa.int8())]),
        pa.concat_arrays([key, pa.array([c[0] for c in controls], type=key.type)]),
        pa.concat_arrays([value, pa.nulls(m, pa.binary())]),
        pa.concat_arrays([written, headers]),
        pa.concat_arrays([reason, pa.array([c[1] for c in controls], type=pa.string())]),
        pa.concat_arrays([lateness, pa.nulls(m, pa.int64())]),
    ]


def _written_headers(
    column: pa.Array, flat: _FlatHeaders, changed: Mapping[int, Sequence[tuple[str, bytes]]]
) -> pa.Array:
    """The headers each record is written with: its own less any ``dlq.*`` header or other
    listed profile's header (``flat.stale``: a record leaves with this attempt's or none), then ``changed[row]`` for the rows
    that failed. The input array itself when no row changes, as in a batch of successes;
    otherwise only the rows that change are rebuilt (from flat key and value lists) and put in
    place with one ``take``."""
    names, contents, bounds, valid, stale = flat.names, flat.contents, flat.bounds, flat.valid, flat.stale
    if not stale and not changed and valid is None:
        return column
    wanted = set(changed)
    wanted.update(bisect.bisect_right(bounds, j) - 1 for j in stale)
    if valid is not None:
        wanted.update(i for i, present in enumerate(valid) if not present)
    rows = sorted(wanted)
    dropped = set(stale)
    keys: list[str] = []
    values: list[bytes | None] = []
    offsets = [0]
    for i in rows:
        if valid is None or valid[i]:
            for j in range(bounds[i], bounds[i + 1]):
                if j not in dropped:
                    keys.append(names[j])
                    values.append(contents[j])
        for key, value in changed.get(i, ()):
            keys.append(key)
            values.append(value)
        offsets.append(len(keys))
    entry = column.type.value_type
    replaced = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.StructArray.from_arrays(
            [pa.array(keys, entry.field(0).type), pa.array(values, entry.field(1).type)], fields=list(entry)
        ),
        type=column.type,
    )
    n = len(column)
    indices = list(range(n))
    for position, row in enumerate(rows):
        indices[row] = n + position
    return pa.concat_arrays([column, replaced]).take(pa.array(indices, type=pa.int64()))


class _FlatHeaders:
    """A batch's headers column read once: ``names[j]`` and ``contents[j]`` for every header
    entry, row ``i`` holding entries ``bounds[i]`` to ``bounds[i + 1]``; ``valid`` is None when
    no row's headers are null. ``names`` and ``contents`` are made into Python lists only when
    first used: an Arrow batch of successes without ``dlq.*`` headers (``mode: arrow``) never
    needs them."""

    __slots__ = ("_contents", "_entries", "_names", "bounds", "stale", "valid")

    def __init__(
        self,
        entries: tuple[pa.Array, pa.Array] | None,
        bounds: list[int],
        valid: list[bool] | None,
        stale: list[int],
    ) -> None:
        self._entries = entries  # the entries' key and value arrays
        self._names: list[str] | None = None
        self._contents: list[bytes | None] | None = None
        self.bounds = bounds
        self.valid = valid
        self.stale = stale  # the entries written by a listed profile (``dlq.*``, ...; headers.owned)

    @property
    def names(self) -> list[str]:
        if self._names is None:
            self._names = self._entries[0].to_pylist() if self._entries is not None else []
        return self._names

    @property
    def contents(self) -> list[bytes | None]:
        if self._contents is None:
            self._contents = self._entries[1].to_pylist() if self._entries is not None else []
        return self._contents

    def pairs(self, i: int) -> list[tuple[str, bytes | None]]:
        """Row ``i``'s headers as (key, value) pairs, in order."""
        if self.valid is not None and not self.valid[i]:
            return []
        start, stop = self.bounds[i], self.bounds[i + 1]
        return list(zip(self.names[start:stop], self.contents[start:stop], strict=True))

    def own(self, i: int) -> list[tuple[str, bytes | None]]:
        """Row ``i``'s headers less the ``stale`` ones: what a record of it keeps of its own."""
        if self.valid is not None and not self.valid[i]:
            return []
        stale = set(self.stale)
        return [
            (self.names[j], self.contents[j])
            for j in range(self.bounds[i], self.bounds[i + 1])
            if j not in stale
        ]

    @classmethod
    def of(
        cls, column: pa.Array, profiles: Sequence[HeaderProfile] = DEFAULT_HEADER_PROFILES
    ) -> _FlatHeaders:
        # A sliced column (release_when_due yields slices) keeps its parent's whole child array
        # and absolute offsets: read only this slice's entries, and count from its first.
        offsets = column.offsets.to_pylist()
        first, last = offsets[0], offsets[-1]
        bounds = [o - first for o in offsets] if first else offsets
        entries = column.values.slice(first, last - first)
        stale: list[int] = []
        flat = None
        if len(entries):
            key_array, value_array = entries.flatten()
            flat = (key_array, value_array)
            prefixes, exact = h.owned(profiles)
            # ``dlq.*`` always: every policy lists spark-dlq (policy.REQUIRED_HEADER_PROFILE).
            ours = pc.starts_with(key_array, pattern=h.PREFIX)
            for prefix in (p for p in prefixes if p != h.PREFIX):
                ours = pc.or_(ours, pc.starts_with(key_array, pattern=prefix))
            if exact:
                ours = pc.or_(ours, pc.is_in(key_array, value_set=pa.array(exact, key_array.type)))
            stale = pc.indices_nonzero(ours).to_pylist() if pc.any(ours).as_py() else []
        return cls(
            flat,
            bounds,
            column.is_valid().to_pylist() if column.null_count else None,
            stale,
        )


def _message_constructor() -> Callable[..., Message]:
    """``Message(key, value, headers, topic, partition, offset, timestamp, attempt)``, built
    the fast way: a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, which costs more than the rest of routing a message; setting the
    slots directly makes the very same object (same type, equal, still frozen). Used only
    while ``Message`` is a plain slotted dataclass with exactly these fields and no
    ``__post_init__``; otherwise it is simply ``Message``."""
    fields = ("key", "value", "headers", "topic", "partition", "offset", "timestamp", "attempt")
    declared = tuple(f.name for f in dataclasses.fields(Message))
    if declared != fields or hasattr(Message, "__post_init__") or not hasattr(Message, "__slots__"):
        return Message
    set_key, set_value, set_headers, set_topic, set_partition, set_offset, set_timestamp, set_attempt = (
        getattr(Message, name).__set__ for name in fields
    )
    new = object.__new__

    def make(
        key: bytes | None,
        value: bytes | None,
        headers: dict[str, bytes],
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        attempt: int,
    ) -> Message:
        message = new(Message)
        set_key(message, key)
        set_value(message, value)
        set_headers(message, headers)
        set_topic(message, topic)
        set_partition(message, partition)
        set_offset(message, offset)
        set_timestamp(message, timestamp)
        set_attempt(message, attempt)
        return message

    return make


_new_message = _message_constructor()


#: The column of a too-large dead letter's value when the topic gets a stub without it: for the
#: dead-letter table (only with one).
TABLE_VALUE = "table_value"


def output_schema(input_schema: pa.Schema, *, table: bool = False) -> pa.Schema:
    """What ``route_batch`` returns: ``route`` (a ``Route``), the ``key``, ``value`` and
    ``headers`` to write, the dead-letter ``reason`` (dead and ignored records only), for
    redelivered records ``lateness_ms`` (how long after ``dlq.deliver.at`` it was routed), with
    a dead-letter ``table`` the ``table_value`` of a stub (``processing.oversize``), and the
    batch's metrics summary in ``stats`` (first row only: ``routing.stats``)."""
    return pa.schema(
        [
            pa.field("route", pa.int8(), nullable=False),
            input_schema.field("key"),
            pa.field("value", pa.binary()),
            input_schema.field("headers"),
            pa.field("reason", pa.string()),
            pa.field("lateness_ms", pa.int64()),
            *([pa.field(TABLE_VALUE, pa.binary())] if table else []),
            pa.field("stats", pa.string()),
        ]
    )


#: The columns an Arrow processor (``mode: arrow``) is given, in this order: ``Message``'s fields
#: as Arrow arrays (``timestamp`` in epoch milliseconds, ``attempt`` 0 on the first delivery).
ARROW_INPUT = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADER_TYPE),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.int64()),
        pa.field("attempt", pa.int32()),
    ]
)


def arrow_input(batch: pa.RecordBatch, attempts: Sequence[int] | None) -> pa.RecordBatch:
    """What an Arrow processor is given for ``batch``: its own key, value, headers, topic,
    partition and offset arrays (not copied), the timestamp in epoch milliseconds and the
    attempt (``attempts``; None: 0 for every row)."""
    n = batch.num_rows
    attempt = (
        pa.array(np.zeros(n, dtype=np.int32)) if attempts is None else pa.array(attempts, type=pa.int32())
    )
    return pa.RecordBatch.from_arrays(
        [
            batch.column("key"),
            batch.column("value"),
            batch.column("headers"),
            batch.column("topic"),
            batch.column("partition"),
            batch.column("offset"),
            epoch_ms(batch.column("timestamp")),
            attempt,
        ],
        schema=ARROW_INPUT,
    )
