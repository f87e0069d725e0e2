"""Routing a whole Arrow record batch: the one place Python touches each message.

The Spark job hands every partition to ``route_batch`` (through ``mapInArrow``). For each
record it builds a ``Message``, calls the processor once (or the batch processor once per
batch), decides the route and, for failures only, builds the new ``dlq.*`` headers. It hands
back only what the Kafka sink and the metrics need: the route, the key, the value to write,
the headers to write, the dead-letter reason and the retry lateness. The key column, and the
headers column when no record's headers change, are the input's own Arrow arrays (not copied);
every byte that crosses back to the JVM is one the sink writes.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dlq_engine.model.durations import format_ms
from dlq_engine.model.policy import DEFAULT_HEADER_PROFILES, BackoffSpec, DeadLetterPolicy, HeaderProfile
from dlq_engine.model.processor_api import Message
from dlq_engine.model.reasons import ORDERING_OVERFLOW, RETRY_TIMEOUT, TOO_LARGE, DeadLetterReason
from dlq_engine.processing import oversize
from dlq_engine.processing.time_limit import MAX_BATCH_CALL_MS, Raised, batch_call_limit_ms, map_with_limit
from dlq_engine.routing import headers as h
from dlq_engine.routing import retry_budget, stats
from dlq_engine.routing.backoff import delay_ms
from dlq_engine.routing.outcomes import (
    ACKNOWLEDGE,
    PUBLISH,
    RETRY,
    Decision,
    Failure,
    Result,
    Route,
    Rules,
    UnsupportedResult,
    Verdict,
    classify,
    dead_letter,
    decide,
    decide_all,
    frozen_names,
    item_result_or_failure,
    result_or_failure,
)
from dlq_engine.routing.record_size import RecordLimits

log = logging.getLogger("dlq_engine.processing")

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

#: An attempt count read from a header is clamped to this: a forged huge number must neither
#: overflow nor make the arithmetic misbehave; it still means "exhausted".
MAX_ATTEMPT_HEADER = 1_000_000

#: ``dlq.deliver.at`` is written no later than this (9999-12-31T23:59:59.999Z): a huge explicit
#: ``Retry(delay=...)`` still means "much later" but stays a number the delay stage can hold.
MAX_DELIVER_AT = 253_402_300_799_999


class StopPipeline(RuntimeError):
    """Raised on a worker when a dead letter meets the ``stop`` strategy. Its text starts with
    ``MARKER`` so the driver can find it inside Spark's wrapped error and print it alone."""

    MARKER = "DLQ-STOP:"


@dataclass(frozen=True, slots=True)
class RoutingSettings:
    """What a worker needs from the policy, in a small picklable value."""

    retry_topic: str
    policy: str
    subscription: str
    max_redeliver: int
    backoff: BackoffSpec
    strategy: str
    include_stack: bool
    has_output: bool
    mode: str
    non_retryable: frozenset[str] = field(default_factory=frozenset)
    #: ``retry.rules``: each rule's error classes, its redelivery limit, its backoff and its
    #: time budget.
    rule_errors: tuple[frozenset[str], ...] = ()
    rule_limits: tuple[int, ...] = ()
    rule_backoffs: tuple[BackoffSpec, ...] = ()
    rule_budgets: tuple[int, ...] = ()
    #: ``retry.maxRetryDuration``; 0: none.
    budget_ms: int = 0
    static_headers: tuple[tuple[str, str], ...] = ()
    header_profiles: tuple[HeaderProfile, ...] = DEFAULT_HEADER_PROFILES
    timeout_ms: int = 0  # processor.timeout; 0: none
    #: A retry routed more than this after its ``dlq.deliver.at`` counts as released late.
    late_after_ms: int = 0
    #: ``source.ordering: key``, ``ordering.onDeadLetter: block``, ``ordering.onOverflow: stop``.
    ordered: bool = False
    block_on_dead_letter: bool = False
    stop_on_overflow: bool = False
    #: A policy on Pulsar: offsets are packed message ids, the Java client's properties are
    #: written beside ``dlq.*`` (the pulsar profile) and its letters' ``RECONSUMETIMES`` counted.
    pulsar: bool = False
    #: What each topic the policy writes accepts (read when the query starts: ``job.record_limits``).
    limits: RecordLimits = field(default_factory=RecordLimits)
    #: The policy has a dead-letter table: a too-large dead letter's value is handed on for it
    #: (``table_value``) when the topic gets a stub.
    table: bool = False

    @property
    def rules(self) -> Rules:
        return Rules(self.max_redeliver, self.strategy, self.has_output, self.rule_limits)

    @classmethod
    def from_policy(cls, policy: DeadLetterPolicy, *, limits: RecordLimits | None = None) -> RoutingSettings:
        return cls(
            retry_topic=policy.retry_topic,
            policy=policy.qualified_name,
            subscription=policy.source.subscription,
            max_redeliver=policy.retry.max_redeliver_count,
            backoff=policy.retry.backoff,
            strategy=policy.dead_letter.strategy,
            include_stack=policy.dead_letter.include_stack_trace,
            has_output=bool(policy.output.topic),
            mode=policy.processor.mode,
            non_retryable=frozen_names(policy.retry.non_retryable_errors),
            rule_errors=tuple(frozen_names(rule.errors) for rule in policy.retry.rules),
            rule_limits=tuple(rule.max_redeliver_count for rule in policy.retry.rules),
            rule_backoffs=tuple(rule.backoff for rule in policy.retry.rules),
            rule_budgets=tuple(rule.max_retry_duration_ms for rule in policy.retry.rules),
            budget_ms=policy.retry.max_retry_duration_ms,
            static_headers=tuple(sorted(policy.dead_letter.headers.items())),
            header_profiles=_profiles(policy),
            timeout_ms=policy.processor.timeout_ms,
            late_after_ms=late_after_ms(policy.spark.trigger_ms),
            ordered=policy.source.ordering == "key",
            block_on_dead_letter=policy.ordering.on_dead_letter == "block",
            stop_on_overflow=policy.ordering.on_overflow == "stop",
            pulsar=policy.is_pulsar,
            limits=limits or RecordLimits(),
            table=policy.dead_letter.table is not None,
        )


def _profiles(policy: DeadLetterPolicy) -> tuple[HeaderProfile, ...]:
    """The policy's header profiles; on Pulsar the pulsar profile always, so that the Java
    client's retry and dead-letter consumers read our letters."""
    listed = policy.dead_letter.header_profiles
    return listed if not policy.is_pulsar or "pulsar" in listed else (*listed, "pulsar")


def late_after_ms(trigger_ms: int) -> int:
    """When a retry counts as released late: more than one trigger interval and a second past
    its due time (a retry is routed in the first micro-batch that starts after it is due)."""
    return trigger_ms + 1000


ProcessFn = Callable[..., Any]


#: The column of the ordering stage's note on a record it let go past a bound
#: (``job.ordering``): such a record is dead-lettered with reason ``ordering-overflow``.
ORDER_NOTE = "order_note"
OVERFLOW_REASON = ORDERING_OVERFLOW
OVERFLOW_ERROR = "OrderingOverflow"


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
    clock = now_ms or _now_ms
    if settings.mode == "arrow" and not settings.ordered:
        return _route_arrow(batch, settings, processor, clock, rand)
    n = batch.num_rows
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    topics = batch.column("topic").to_pylist()
    partitions = batch.column("partition").to_pylist()
    offsets = batch.column("offset").to_pylist()
    timestamps = _epoch_ms(batch.column("timestamp"))

    retry_topic = settings.retry_topic
    from_retry = [t == retry_topic for t in topics]
    header_column = batch.column("headers")
    flat = _FlatHeaders.of(header_column, settings.header_profiles)
    header_dicts, retry_headers = _headers(flat, from_retry)
    attempts = [_attempt(pairs) if pairs is not None else 0 for pairs in retry_headers]
    new = _new_message
    messages = [
        new(
            keys[i],
            values[i],
            header_dicts[i],
            topics[i],
            partitions[i],
            offsets[i],
            timestamps[i],
            attempts[i],
        )
        for i in range(n)
    ]
    notes = _notes(batch) if settings.ordered else None
    # Each failure's decision with its retry's due time, where decided while processing.
    decided: dict[int, tuple[Decision, int | None]] = {}
    if settings.ordered and settings.mode == "message":
        # A key's later messages are not processed once one fails in this task.
        results, durations, decided = _ordered_results(
            messages, notes, attempts, retry_headers, settings, processor, stopped or set(), clock, rand
        )
    elif notes is None:
        if settings.mode == "arrow":
            results, durations = _arrow_results(batch, attempts, settings, processor)
        else:
            results, durations = _results(messages, settings, processor)
    else:
        # Records the ordering stage let go past a bound are not processed.
        kept = [i for i in range(n) if notes[i] is None]
        if settings.mode == "arrow":
            done, durations = _arrow_results(
                batch.take(pa.array(kept, pa.int64())), [attempts[i] for i in kept], settings, processor
            )
        else:
            done, durations = _results([messages[i] for i in kept], settings, processor)
        results = [_overflow(note) for note in notes]
        for i, result in zip(kept, done, strict=True):
            results[i] = result

    now = clock()
    decisions = decide_all(results, attempts, settings.rules)
    if notes is not None:
        decisions = [
            _overflow_decision(settings, messages[i], note) if note is not None else decisions[i]
            for i, note in enumerate(notes)
        ]
    lateness = (
        [_lateness(pairs, now) if pairs is not None else None for pairs in retry_headers]
        if True in from_retry
        else [None] * n
    )
    # What is written: the result of a published message, nothing for an acknowledged one, the
    # original value (with this attempt's headers, ``changed``) for a retried or dead one. A
    # batch whose messages all succeeded alike (the usual case) is written as a whole.
    changed: dict[int, list[tuple[str, bytes]]] = {}
    routes: list[Route]
    reasons: list[str | None]
    out_values: list[Result]
    only = decisions[0] if n else ACKNOWLEDGE
    controls: list[tuple[bytes, str, str, str]] = []
    ordering = settings.ordered and (bool(stopped) or True in from_retry or notes is not None)
    if not ordering and (only is PUBLISH or only is ACKNOWLEDGE) and decisions.count(only) == n:
        routes, reasons = [only.route] * n, [None] * n
        out_values = results if only is PUBLISH else [None] * n
    else:
        # Each retry's due time, within its time budget (else it is dead-lettered instead).
        due: dict[int, int | None] = {}
        for i, result in enumerate(results):
            if type(result) is not Failure:
                continue
            if i in decided:
                decisions[i], due[i] = decided[i]
            elif decisions[i] is RETRY:
                decisions[i], due[i] = _scheduled(result, attempts[i], retry_headers[i], settings, now, rand)
        routes = [d.route for d in decisions]
        reasons = [d.reason for d in decisions]
        out_values = [r if d is PUBLISH else None for r, d in zip(results, decisions, strict=True)]
        parked: set[int] = set()
        if settings.ordered:
            controls, parked = _keep_key_order(
                messages, retry_headers, decisions, routes, reasons, out_values, changed, settings, stopped
            )
        for i, result in enumerate(results):
            if type(result) is Failure and i not in parked:
                out_values[i] = values[i]
                changed[i] = _failed(
                    messages[i],
                    retry_headers[i],
                    result,
                    decisions[i],
                    attempts[i] + 1,
                    settings,
                    now,
                    deliver_at=due.get(i),
                )

    route_column = pa.array(routes, type=pa.int8())
    value_column = pa.array(out_values, type=pa.binary())
    written = _written_headers(header_column, flat, changed)
    fitted = _fit(
        batch,
        settings,
        routes,
        reasons,
        results,
        attempts,
        retry_headers.__getitem__,
        messages.__getitem__,
        route_column,
        value_column,
        written,
        flat,
        now,
    )
    if fitted.converted:
        route_column = pa.array(routes, type=pa.int8())
        for i, before in fitted.converted.items():
            control = _too_large_control(settings, messages[i], retry_headers[i], before)
            if control is not None:
                controls.append(control)
    lateness_column = pa.array(lateness, type=pa.int64())
    summary = stats.summarize(
        batch,
        route_column,
        reasons,
        results,
        attempts,
        lateness_column,
        durations,
        from_retry,
        late_after_ms=settings.late_after_ms,
        blocked=sum(1 for control in controls if control[1] == h.CONTROL_BLOCK),
    )
    columns = [
        route_column,
        fitted.key,
        fitted.value,
        fitted.headers,
        pa.array(reasons, type=pa.string()),
        lateness_column,
    ]
    if controls:
        columns = _with_controls(columns, controls, header_column.type)
    if settings.table:
        columns.append(fitted.table_values(n + len(controls)))
    return pa.RecordBatch.from_arrays(
        [*columns, stats.stats_column(n + len(controls), summary)],
        schema=output_schema(batch.schema, table=settings.table),
    )


def _ordered_results(
    messages: Sequence[Message],
    notes: Sequence[str | None] | None,
    attempts: Sequence[int],
    retry_headers: Sequence[list[tuple[str, bytes | None]] | None],
    settings: RoutingSettings,
    processor: ProcessFn,
    stopped: set[bytes],
    now_ms: Callable[[], int],
    rand: Callable[[], float],
) -> tuple[list[Result], np.ndarray, dict[int, tuple[Decision, int | None]]]:
    """``source.ordering: key`` in message mode: the processor called in row order, and not
    for a message past a bound (its note) or of a key whose earlier message in this task went
    to retry or was blocked (``_keep_key_order`` parks those, by the same rule); those get a
    None result, never used. Each failure's decision (and its retry's due time) is taken here,
    once, and handed back: whether its key is held depends on it. The first ``TIMED_CALLS``
    calls are timed. With ``processor.timeout`` each call is handed to the helper thread on its
    own (``map_with_limit``), as the next call depends on this one's outcome."""
    clock = time.perf_counter
    non_retryable, with_stack, rules = settings.non_retryable, settings.include_stack, settings.rule_errors

    def direct(message: Message) -> Result:
        return result_or_failure(processor, message, non_retryable, with_stack=with_stack, rules=rules)

    def limited(message: Message) -> Result:
        [done] = map_with_limit(direct, [message], timeout_ms=settings.timeout_ms)
        if type(done) is Raised:
            return classify(done.error, non_retryable, with_stack=with_stack, rules=rules)
        result: Result = done
        return result

    call = limited if settings.timeout_ms > 0 else direct

    held = set(stopped)
    results: list[Result] = []
    durations: list[float] = []
    decided: dict[int, tuple[Decision, int | None]] = {}
    for i, message in enumerate(messages):
        key = message.key
        if (notes is not None and notes[i] is not None) or (key is not None and key in held):
            results.append(_overflow(notes[i]) if notes is not None else None)
            continue
        if len(durations) < TIMED_CALLS:
            started = clock()
            result = call(message)
            durations.append(clock() - started)
        else:
            result = call(message)
        if type(result) is Failure:
            decision, due = _decided(result, attempts[i], retry_headers[i], settings, now_ms(), rand)
            decided[i] = decision, due
            if key is not None and (
                decision.route is Route.RETRY
                or (settings.block_on_dead_letter and decision.route in (Route.DEAD, Route.IGNORED))
            ):
                held.add(key)
        results.append(result)
    return results, np.array(durations, dtype=np.float64), decided


def _decided(
    failure: Failure,
    attempt: int,
    retry_headers: list[tuple[str, bytes | None]] | None,
    settings: RoutingSettings,
    now: int,
    rand: Callable[[], float],
) -> tuple[Decision, int | None]:
    """A failure's decision, and its retry's due time when it goes to retry (``_scheduled``)."""
    decision = decide(failure, attempt + 1, settings.rules)
    if decision is not RETRY:
        return decision, None
    return _scheduled(failure, attempt, retry_headers, settings, now, rand)


def _scheduled(
    failure: Failure,
    attempt: int,
    retry_headers: list[tuple[str, bytes | None]] | None,
    settings: RoutingSettings,
    now: int,
    rand: Callable[[], float],
) -> tuple[Decision, int | None]:
    """A failure ``decide`` sends to retry: when its retry is due (the processor's
    ``Retry(delay=...)``, else the backoff of its rule or the policy), or, if that is past its
    time budget (``retry.maxRetryDuration``, its rule's), a ``retry-timeout`` dead letter."""
    backoff = settings.rule_backoffs[failure.rule] if failure.rule >= 0 else settings.backoff
    wait = failure.delay_ms if failure.delay_ms is not None else delay_ms(backoff, attempt + 1, rand())
    due = min(now + wait, MAX_DELIVER_AT)
    budget = (
        settings.rule_budgets[failure.rule]
        if failure.rule >= 0 and settings.rule_budgets
        else settings.budget_ms
    )
    if budget > 0 and not retry_budget.allows(retry_budget.started_at(retry_headers, now), due, budget):
        return dead_letter(RETRY_TIMEOUT, settings.rules), None
    return RETRY, due


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
    routes: list[Route] | np.ndarray,
    reasons: list[str | None],
    outcomes: list[Result],
    attempts: Sequence[int],
    retry_headers_of: Callable[[int], list[tuple[str, bytes | None]] | None],
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
    too_large = dead_letter(TOO_LARGE, settings.rules)
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
            return _failed(
                message_of(i),
                retry_headers_of(i),
                failure,
                too_large,
                attempts[i] + 1,
                settings,
                now,
                deliver_at=None,
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


def _too_large_control(
    settings: RoutingSettings,
    message: Message,
    retry_headers: list[tuple[str, bytes | None]] | None,
    before: Route,
) -> tuple[bytes, str, str, str] | None:
    """``source.ordering: key``: the control record a retry dead-lettered as too large needs,
    as ``_keep_key_order`` writes for any dead letter: ``block`` under ``onDeadLetter: block``,
    else ``release`` when it was its key's head (read from the retry topic)."""
    if not settings.ordered or before is not Route.RETRY or message.key is None:
        return None
    if settings.block_on_dead_letter:
        return (message.key, h.CONTROL_BLOCK, *_position(message, retry_headers))
    if retry_headers is not None:
        return (message.key, h.CONTROL_RELEASE, *_position(message, retry_headers))
    return None


def _notes(batch: pa.RecordBatch) -> list[str | None] | None:
    """The ordering stage's overflow notes, None when the batch has none."""
    if ORDER_NOTE not in batch.schema.names:
        return None
    column = batch.column(ORDER_NOTE)
    if column.null_count == len(column):
        return None
    notes: list[str | None] = column.to_pylist()
    return notes


def _overflow(note: str | None) -> Result:
    return Failure(Verdict.TERMINATED, OVERFLOW_ERROR, note or "") if note is not None else None


def _overflow_decision(settings: RoutingSettings, message: Message, note: str) -> Decision:
    """A record past an ordering bound: dead-lettered with reason ``ordering-overflow``, or,
    under ``onOverflow: stop``, the pipeline stops naming the bound."""
    if settings.stop_on_overflow:
        raise StopPipeline(
            f"{StopPipeline.MARKER} ordering.onOverflow stop: message {message.topic}[{message.partition}]@"
            f"{message.offset}: {note}"
        )
    return Decision(Route.IGNORED if settings.strategy == "ignore" else Route.DEAD, OVERFLOW_REASON)


def _position(message: Message, retry_headers: list[tuple[str, bytes | None]] | None) -> tuple[str, str]:
    """A message's source position as the ordering stage names it: the ``dlq.original.*``
    partition and offset a retry record carries, else its own."""
    partition, offset = str(message.partition), str(message.offset)
    if retry_headers is not None:
        carried_partition = h.first_header(retry_headers, h.ORIGINAL_PARTITION)
        carried_offset = h.first_header(retry_headers, h.ORIGINAL_OFFSET)
        if carried_partition is not None and carried_offset is not None:
            text_partition, text_offset = _text(carried_partition), _text(carried_offset)
            if text_partition.lstrip("-").isdigit() and text_offset.lstrip("-").isdigit():
                partition, offset = text_partition, text_offset
    return partition, offset


def _keep_key_order(
    messages: Sequence[Message],
    retry_headers: Sequence[list[tuple[str, bytes | None]] | None],
    decisions: Sequence[Decision],
    routes: list[Route],
    reasons: list[str | None],
    out_values: list[Result],
    changed: dict[int, list[tuple[str, bytes]]],
    settings: RoutingSettings,
    stopped: set[bytes] | None,
) -> tuple[list[tuple[bytes, str, str, str]], set[int]]:
    """``source.ordering: key``, in row order (the ordering stage hands a key's records on in
    source order): once a record of a key goes to retry (or is dead-lettered under ``block``),
    its key's later records are parked, unprocessed results dropped; a retried record that is
    done (published, acknowledged, or dead-lettered under ``skip``) writes a ``release`` control
    record, one dead-lettered under ``block`` a ``block`` record. Returns those control records
    ((key, control, partition, offset)) and the parked rows. Records with a null key are left
    alone."""
    held = stopped if stopped is not None else set()
    controls: list[tuple[bytes, str, str, str]] = []
    parked: set[int] = set()
    for i, message in enumerate(messages):
        key = message.key
        if key is None:
            continue
        if key in held:
            routes[i], reasons[i], out_values[i] = Route.PARKED, None, message.value
            changed[i] = _parked_headers(message, retry_headers[i])
            parked.add(i)
            continue
        route = decisions[i].route
        if route is Route.RETRY:
            held.add(key)
        elif route is Route.DEAD or route is Route.IGNORED:
            if settings.block_on_dead_letter and reasons[i] != OVERFLOW_REASON:
                held.add(key)
                controls.append((key, h.CONTROL_BLOCK, *_position(message, retry_headers[i])))
            elif retry_headers[i] is not None:
                controls.append((key, h.CONTROL_RELEASE, *_position(message, retry_headers[i])))
        elif retry_headers[i] is not None:
            controls.append((key, h.CONTROL_RELEASE, *_position(message, retry_headers[i])))
    return controls, parked


def _parked_headers(
    message: Message, retry_headers: list[tuple[str, bytes | None]] | None
) -> list[tuple[str, bytes]]:
    """``dlq.control: park`` and the record's source position (``dlq.original.*``)."""
    origin: dict[str, str] = {}
    if retry_headers is not None:
        for name in (h.ORIGINAL_TOPIC, h.ORIGINAL_PARTITION, h.ORIGINAL_OFFSET, h.ORIGINAL_TIMESTAMP):
            carried = h.first_header(retry_headers, name)
            if carried is not None:
                origin[name] = _text(carried)
    origin.setdefault(h.ORIGINAL_TOPIC, message.topic)
    origin.setdefault(h.ORIGINAL_PARTITION, str(message.partition))
    origin.setdefault(h.ORIGINAL_OFFSET, str(message.offset))
    origin.setdefault(h.ORIGINAL_TIMESTAMP, str(message.timestamp))
    return [(h.CONTROL, h.CONTROL_PARK.encode()), *((k, v.encode()) for k, v in origin.items())]


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


def _headers(
    flat: _FlatHeaders, from_retry: list[bool]
) -> tuple[list[dict[str, bytes]], list[list[tuple[str, bytes | None]] | None]]:
    """Each row's headers as the processor sees them (a dict: the first of repeated keys wins,
    a null value reads as b""), and, for retry records only, as the list of (key, value) pairs
    that attempts, lateness and carried headers are read from (None for other rows).

    Read from the flattened key and value columns, without building a dict per header entry."""
    n = len(from_retry)
    names, contents, bounds, valid = flat.names, flat.contents, flat.bounds, flat.valid
    dicts: list[dict[str, bytes]] = []
    pairs: list[list[tuple[str, bytes | None]] | None] = []
    for i in range(n):
        start, stop = bounds[i], bounds[i + 1]
        if start == stop or (valid is not None and not valid[i]):
            dicts.append({})
            pairs.append([] if from_retry[i] else None)
            continue
        if stop - start == 1:
            dicts.append({names[start]: contents[start] or b""})
        else:
            row: dict[str, bytes] = {}
            for j in range(start, stop):
                value = contents[j]
                row.setdefault(names[j], value if value is not None else b"")
            dicts.append(row)
        pairs.append(
            list(zip(names[start:stop], contents[start:stop], strict=True)) if from_retry[i] else None
        )
    return dicts, pairs


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


def _results(
    messages: Sequence[Message], settings: RoutingSettings, processor: ProcessFn
) -> tuple[list[Result], np.ndarray]:
    """The ``Result`` of each message, and how long the processor took, in seconds: per call (one per
    message, or one for a batch processor)."""
    clock = time.perf_counter
    if settings.mode == "batch":
        started = clock()
        results = _batch_results(messages, settings, processor)
        return results, np.array([clock() - started] if messages else [], dtype=np.float64)
    non_retryable, with_stack, rules = settings.non_retryable, settings.include_stack, settings.rule_errors
    if settings.timeout_ms <= 0:
        return _timed_calls(processor, messages, non_retryable, with_stack, rules)

    durations: list[float] = []
    took = durations.append

    def one(message: Message) -> Result:
        started = clock()
        try:
            return result_or_failure(processor, message, non_retryable, with_stack=with_stack, rules=rules)
        finally:
            took(clock() - started)

    done = map_with_limit(one, messages, timeout_ms=settings.timeout_ms)
    results = [
        classify(r.error, non_retryable, with_stack=with_stack, rules=rules) if type(r) is Raised else r
        for r in done
    ]
    return results, np.array(durations, dtype=np.float64)


#: How many calls of each Arrow batch are timed for the latency histogram (message mode, no
#: time limit): the batch's first ones, so every call of a small batch, and a bounded cost per
#: large batch (docs/monitoring.md has what timing every call cost).
TIMED_CALLS = 256


def _timed_calls(
    processor: ProcessFn,
    messages: Sequence[Message],
    non_retryable: frozenset[str],
    with_stack: bool,
    rules: tuple[frozenset[str], ...] = (),
) -> tuple[list[Result], np.ndarray]:
    """The processor called on each message, the first ``TIMED_CALLS`` timed by one clock read
    before each call (and one after the last): call ``i`` took ``stamps[i + 1] - stamps[i]``,
    the differences taken at once, vectorised. The read is in the comprehension's condition
    (always true: ``append`` returns None), as a comprehension appends its results faster
    than a loop."""
    clock = time.perf_counter
    stamps: list[float] = []
    stamp = stamps.append
    results = [
        result_or_failure(processor, message, non_retryable, with_stack=with_stack, rules=rules)
        for message in messages[:TIMED_CALLS]
        if not stamp(clock())
    ]
    stamp(clock())
    if len(messages) > TIMED_CALLS:
        results += [
            result_or_failure(processor, message, non_retryable, with_stack=with_stack, rules=rules)
            for message in messages[TIMED_CALLS:]
        ]
    return results, np.diff(np.array(stamps, dtype=np.float64))


def _batch_results(
    messages: Sequence[Message], settings: RoutingSettings, processor: ProcessFn
) -> list[Result]:
    """A batch processor takes the list of messages and returns one result or exception per
    message. If it raises (any ``BaseException``, as in message mode), or overruns
    ``processor.timeout`` times the number of messages, every message of the batch fails with
    that exception."""
    if not messages:
        return []
    n = len(messages)
    try:
        if settings.timeout_ms > 0:
            [answer] = map_with_limit(
                lambda batch: _batch_answer(processor, batch),
                [list(messages)],
                timeout_ms=batch_call_limit_ms(settings.timeout_ms, n),
                what=f"the batch processor ({n} messages)",
                limit=_batch_limit_text(settings.timeout_ms, n),
            )
            if type(answer) is Raised:
                raise answer.error
            results = answer
        else:
            results = _batch_answer(processor, list(messages))
    except BaseException as error:  # noqa: BLE001 - the team's code failed for the whole batch
        return [
            classify(
                error, settings.non_retryable, with_stack=settings.include_stack, rules=settings.rule_errors
            )
        ] * n
    if len(results) != len(messages):
        mismatch = ValueError(
            f"batch processor returned {len(results)} outcomes for {len(messages)} messages"
        )
        return [classify(mismatch, settings.non_retryable, with_stack=False)] * n
    non_retryable, with_stack, rules = settings.non_retryable, settings.include_stack, settings.rule_errors
    return [item_result_or_failure(r, non_retryable, with_stack=with_stack, rules=rules) for r in results]


def _batch_limit_text(timeout_ms: int, messages: int) -> str:
    """How a batch call's limit came about, for its TimeoutError."""
    text = f"processor.timeout {format_ms(timeout_ms)} per message"
    if batch_call_limit_ms(timeout_ms, messages) < timeout_ms * messages:
        text += f", at most {format_ms(MAX_BATCH_CALL_MS)}"
    return text


def _batch_answer(processor: ProcessFn, messages: list[Message]) -> list[Any]:
    """A batch processor's answer as a list (it may return any iterable but a str, bytes or dict)."""
    returned = processor(messages)
    if isinstance(returned, str | bytes | bytearray | dict) or not isinstance(returned, Iterable):
        raise UnsupportedResult(
            f"batch processor returned {type(returned).__name__}; return a list "
            f"with one result or exception per message"
        )
    return list(returned)


def _failed(
    message: Message,
    retry_headers: list[tuple[str, bytes | None]] | None,
    failure: Failure,
    decision: Decision,
    failures: int,
    settings: RoutingSettings,
    now: int,
    *,
    deliver_at: int | None,
) -> list[tuple[str, bytes]]:
    """The ``dlq.*`` headers a failed message leaves with (to the retry topic, due at
    ``deliver_at``, or the dead letters); a dead letter under the ``stop`` strategy stops the
    pipeline instead, one under ``ignore`` is logged. ``retry_headers`` are its headers when it
    came from the retry topic: the origin and first failure it carries are kept."""
    if decision.route is Route.DEAD and settings.strategy == "stop":
        raise StopPipeline(
            f"{StopPipeline.MARKER} strategy stop: message {message.topic}[{message.partition}]@"
            f"{message.offset} failed ({decision.reason}): {failure.error_class}: {failure.error_message}"
        )
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
    origin = {}
    if retry_headers is not None:
        for name in h.CARRIED:
            carried = h.first_header(retry_headers, name)
            if carried is not None:
                origin[name] = _text(carried)
        if settings.pulsar and h.ORIGINAL_TOPIC not in origin:
            origin.update(_java_origin(retry_headers))
    origin.setdefault(h.ORIGINAL_TOPIC, message.topic)
    origin.setdefault(h.ORIGINAL_PARTITION, str(message.partition))
    origin.setdefault(h.ORIGINAL_OFFSET, str(message.offset))
    origin.setdefault(h.ORIGINAL_TIMESTAMP, str(message.timestamp))
    origin.setdefault(h.FIRST_FAILURE_AT, str(now))
    assert (deliver_at is not None) == (decision.route is Route.RETRY), "a retry, and only a retry, is due"
    return h.failure_headers(
        origin=origin,
        attempt=failures,
        error_class=failure.error_class,
        error_message=failure.error_message,
        stacktrace=failure.stacktrace,
        policy=settings.policy,
        subscription=settings.subscription,
        failed_at=now,
        deliver_at=deliver_at,
        reason=decision.reason,
        static=dict(settings.static_headers) if decision.route is not Route.RETRY else None,
        rule=f"retry.rules[{failure.rule}]" if failure.rule >= 0 else None,
        profiles=settings.header_profiles,
        retry_topic=settings.retry_topic,
        pulsar_ids=settings.pulsar,
    )


def _java_origin(headers: list[tuple[str, bytes | None]]) -> dict[str, str]:
    """Where a retry letter of the Pulsar Java client (``reconsumeLater``) was first read:
    its ``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID``; empty when it has none."""
    topic = h.first_header(headers, h.PULSAR_REAL_TOPIC)
    if topic is None:
        return {}
    origin = {h.ORIGINAL_TOPIC: _text(topic)}
    for name in (h.PULSAR_ORIGIN_MESSAGE_ID_NEW, h.PULSAR_ORIGIN_MESSAGE_ID):
        parsed = h.parse_pulsar_message_id(_text(h.first_header(headers, name)))
        if parsed is not None:
            origin[h.ORIGINAL_PARTITION], origin[h.ORIGINAL_OFFSET] = str(parsed[0]), str(parsed[1])
            break
    return origin


def _attempt(headers: list[tuple[str, bytes | None]] | None) -> int:
    """Failed attempts so far: ``dlq.attempt``, else the Pulsar Java client's
    ``RECONSUMETIMES`` (its ``reconsumeLater`` counts the same way); 0 when neither is there."""
    raw = h.first_header(headers, h.ATTEMPT)
    if raw is None:
        raw = h.first_header(headers, h.PULSAR_RECONSUME_TIMES)
    try:
        value = int(_text(raw))
    except ValueError:
        return 0
    return min(max(value, 0), MAX_ATTEMPT_HEADER)


def _lateness(headers: list[tuple[str, bytes | None]] | None, now: int) -> int | None:
    """How late a retry is, from its ``dlq.deliver.at``; None when that is unreadable or out of
    range (the lateness column is an int64, and a forged header must not overflow it)."""
    try:
        due = int(_text(h.first_header(headers, h.DELIVER_AT)))
    except ValueError:
        return None
    if not 0 <= due <= MAX_DELIVER_AT:
        return None
    return now - due


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", "replace")


# --- mode: arrow ----------------------------------------------------------------------------------

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
ARROW_RESULT_HINT = (
    "return a pyarrow array of binary or string results, one per message (null: acknowledged), "
    "or (that array, {row: exception})"
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
            _epoch_ms_array(batch.column("timestamp")),
            attempt,
        ],
        schema=ARROW_INPUT,
    )


def _arrow_call(
    processor: ProcessFn, given: pa.RecordBatch, settings: RoutingSettings
) -> tuple[pa.Array | None, dict[int, Failure], float]:
    """Call an Arrow processor once on ``given``: its results as a binary array (None when the
    call failed as a whole) and the failed rows' ``Failure``; and how long the call took. If it
    raises, overruns ``processor.timeout`` times the number of rows, or returns anything but
    ``ARROW_RESULT_HINT`` says, every row fails with that error."""
    n = given.num_rows
    non_retryable, with_stack, rules = settings.non_retryable, settings.include_stack, settings.rule_errors
    started = time.perf_counter()
    try:
        if settings.timeout_ms > 0:
            [answer] = map_with_limit(
                lambda rows: _arrow_answer(processor, rows),
                [given],
                timeout_ms=batch_call_limit_ms(settings.timeout_ms, n),
                what=f"the arrow processor ({n} messages)",
                limit=_batch_limit_text(settings.timeout_ms, n),
            )
            if type(answer) is Raised:
                raise answer.error
        else:
            answer = _arrow_answer(processor, given)
        values, errors = answer
    except BaseException as error:  # noqa: BLE001 - the team's code failed for the whole batch
        failure = classify(error, non_retryable, with_stack=with_stack, rules=rules)
        return None, dict.fromkeys(range(n), failure), time.perf_counter() - started
    took = time.perf_counter() - started
    failures = {
        i: classify(error, non_retryable, with_stack=with_stack, rules=rules) for i, error in errors.items()
    }
    return values, failures, took


def _arrow_answer(
    processor: ProcessFn, given: pa.RecordBatch
) -> tuple[pa.Array, Mapping[int, BaseException]]:
    """An Arrow processor's answer checked: a binary array of one result per row, and the failed
    rows' exceptions by row index. Raises ``UnsupportedResult`` naming what is wrong."""
    n = given.num_rows
    returned = processor(given)
    errors: object = {}
    values: object = returned
    if isinstance(returned, tuple) and len(returned) == 2:
        values, errors = returned
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        raise UnsupportedResult(f"arrow processor returned {type(values).__name__}; {ARROW_RESULT_HINT}")
    written: pa.Array = values
    kind = written.type
    if pa.types.is_null(kind):
        written = pa.nulls(len(written), pa.binary())
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
        written = written.cast(pa.binary())
    elif not pa.types.is_binary(kind):
        raise UnsupportedResult(f"arrow processor returned an array of {kind}; {ARROW_RESULT_HINT}")
    if len(written) != n:
        raise UnsupportedResult(f"arrow processor returned {len(written)} results for {n} messages")
    if not isinstance(errors, Mapping):
        raise UnsupportedResult(
            f"arrow processor returned errors as {type(errors).__name__}; {ARROW_RESULT_HINT}"
        )
    for row, error in errors.items():
        if type(row) is not int or not 0 <= row < n or not isinstance(error, BaseException):
            raise UnsupportedResult(
                f"arrow processor returned the error entry {row!r}: {type(error).__name__}; "
                f"rows are 0..{n - 1}, each mapped to an exception"
            )
    return written, errors


def _arrow_results(
    batch: pa.RecordBatch, attempts: Sequence[int], settings: RoutingSettings, processor: ProcessFn
) -> tuple[list[Result], np.ndarray]:
    """``mode: arrow`` as a ``Result`` per row, for the general path (``source.ordering: key``)."""
    values, failures, took = _arrow_call(processor, arrow_input(batch, attempts), settings)
    results: list[Result] = values.to_pylist() if values is not None else [None] * batch.num_rows
    for i, failure in failures.items():
        results[i] = failure
    return results, np.array([took] if batch.num_rows else [], dtype=np.float64)


def _route_arrow(
    batch: pa.RecordBatch,
    settings: RoutingSettings,
    processor: ProcessFn,
    clock: Callable[[], int],
    rand: Callable[[], float],
) -> pa.RecordBatch:
    """``route_batch`` for an Arrow processor (``mode: arrow``, no ``source.ordering``): the
    processor gets the batch's own arrays, and what it returns is written as it is. Python
    objects are made only for the rows that need them: retry records (their ``dlq.*`` headers)
    and failures (their new headers)."""
    n = batch.num_rows
    header_column = batch.column("headers")
    flat = _FlatHeaders.of(header_column, settings.header_profiles)
    retried = pc.equal(batch.column("topic"), settings.retry_topic)
    retry_rows: list[int] = pc.indices_nonzero(retried).to_pylist() if pc.any(retried).as_py() else []
    retry_headers: dict[int, list[tuple[str, bytes | None]]] = {i: flat.pairs(i) for i in retry_rows}
    attempts = [0] * n
    for i in retry_rows:
        attempts[i] = _attempt(retry_headers[i])
    values, failures, took = _arrow_call(
        processor, arrow_input(batch, attempts if retry_rows else None), settings
    )
    now = clock()
    rules = settings.rules
    if values is None:
        values = pa.nulls(n, pa.binary())
    success = Route.OUTPUT if rules.has_output else Route.ACK
    routes = np.where(values.is_valid().to_numpy(zero_copy_only=False), success, Route.ACK).astype(np.int8)
    reasons: list[str | None] = [None] * n
    outcomes: list[Result] = [None] * n
    changed: dict[int, list[tuple[str, bytes]]] = {}
    if failures:
        failed = sorted(failures)
        picked = batch.take(pa.array(failed, pa.int64()))
        positions = zip(
            picked.column("topic").to_pylist(),
            picked.column("partition").to_pylist(),
            picked.column("offset").to_pylist(),
            _epoch_ms(picked.column("timestamp")),
            strict=True,
        )
        for i, (topic, partition, offset, timestamp) in zip(failed, positions, strict=True):
            failure = failures[i]
            decision, due = _decided(failure, attempts[i], retry_headers.get(i), settings, now, rand)
            routes[i], reasons[i], outcomes[i] = decision.route, decision.reason, failure
            where = _new_message(None, None, {}, topic, partition, offset, timestamp, attempts[i])
            changed[i] = _failed(
                where, retry_headers.get(i), failure, decision, attempts[i] + 1, settings, now, deliver_at=due
            )
        mask = np.zeros(n, dtype=bool)
        mask[failed] = True
        values = pc.if_else(pa.array(mask), batch.column("value"), values)
    lateness: list[int | None] = [None] * n
    for i in retry_rows:
        lateness[i] = _lateness(retry_headers[i], now)
    route_column = pa.array(routes, type=pa.int8())
    fitted = _fit(
        batch,
        settings,
        routes,
        reasons,
        outcomes,
        attempts,
        retry_headers.get,
        lambda i: _message_at(batch, i, attempts[i]),
        route_column,
        values,
        _written_headers(header_column, flat, changed),
        flat,
        now,
    )
    if fitted.converted:
        route_column = pa.array(routes, type=pa.int8())
    lateness_column = pa.array(lateness, type=pa.int64())
    from_retry = [False] * n
    for i in retry_rows:
        from_retry[i] = True
    summary = stats.summarize(
        batch,
        route_column,
        reasons,
        outcomes,
        attempts,
        lateness_column,
        np.array([took] if n else [], dtype=np.float64),
        from_retry,
        late_after_ms=settings.late_after_ms,
    )
    return pa.RecordBatch.from_arrays(
        [
            route_column,
            fitted.key,
            fitted.value,
            fitted.headers,
            pa.array(reasons, type=pa.string()),
            lateness_column,
            *([fitted.table_values(n)] if settings.table else []),
            stats.stats_column(n, summary),
        ],
        schema=output_schema(batch.schema, table=settings.table),
    )


def _message_at(batch: pa.RecordBatch, i: int, attempt: int) -> Message:
    """Row ``i``'s position as a ``Message`` (no key, value or headers): where it was read."""
    row = batch.slice(i, 1)
    [timestamp] = _epoch_ms(row.column("timestamp"))
    return _new_message(
        None,
        None,
        {},
        row.column("topic")[0].as_py(),
        row.column("partition")[0].as_py(),
        row.column("offset")[0].as_py(),
        timestamp,
        attempt,
    )


def _epoch_ms_array(column: pa.Array) -> pa.Array:
    """A timestamp column as int64 epoch milliseconds, as ``_epoch_ms`` reads it (null: 0)."""
    raw = pc.fill_null(column.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    if pa.types.is_timestamp(column.type):
        unit = column.type.unit
        raw = raw * 1000 if unit == "s" else raw // {"ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    return pa.array(raw, type=pa.int64())


def _epoch_ms(column: pa.Array) -> list[int]:
    if pa.types.is_timestamp(column.type):
        unit = column.type.unit
        divisor = {"s": 1 / 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
        raw = column.cast(pa.int64()).to_pylist()
        return [0 if v is None else int(v // divisor) for v in raw]
    return [0 if v is None else int(v) for v in column.to_pylist()]


def _now_ms() -> int:
    return int(time.time() * 1000)
