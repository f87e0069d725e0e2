"""Routing a whole Arrow record batch: the one place Python touches each message.

The Spark job hands every partition to ``route_batches`` (through ``mapInArrow``). For each
record it builds a ``Message``, calls the processor once (or the batch processor once per
batch), decides the route and, for failures only, builds the new ``dlq.*`` headers. The input
columns pass through untouched (Arrow arrays are reused, not copied), and the job's column
expressions then pick the topic, value and headers for the Kafka sink.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dlq_engine.model.durations import format_ms
from dlq_engine.model.policy import BackoffSpec, DeadLetterPolicy
from dlq_engine.model.processor_api import Message
from dlq_engine.routing import headers as h
from dlq_engine.routing.backoff import delay_ms
from dlq_engine.routing.outcomes import (
    Decision,
    Outcome,
    Route,
    UnsupportedResult,
    classify,
    decide,
    frozen_names,
    item_result_or_failure,
    outcome_of,
    result_or_failure,
)
from dlq_engine.routing.time_limit import Raised, map_with_limit

log = logging.getLogger("dlq_engine.routing")

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
#: Columns ``route_batches`` adds to the input batch.
ADDED_FIELDS = [
    pa.field("route", pa.int8(), nullable=False),
    pa.field("out_value", pa.binary()),
    pa.field("dlq_headers", HEADER_TYPE),
    pa.field("attempt", pa.int32(), nullable=False),
    pa.field("lateness_ms", pa.int64()),
]

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
    static_headers: tuple[tuple[str, str], ...] = ()
    timeout_ms: int = 0  # processor.timeout; 0: none

    @classmethod
    def from_policy(cls, policy: DeadLetterPolicy) -> RoutingSettings:
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
            static_headers=tuple(sorted(policy.dead_letter.headers.items())),
            timeout_ms=policy.processor.timeout_ms,
        )


Processor = Callable[..., Any]


def route_batches(batches: Iterable[pa.RecordBatch], settings: RoutingSettings,
                  processor: Processor) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield route_batch(batch, settings, processor)


def route_batch(batch: pa.RecordBatch, settings: RoutingSettings, processor: Processor,
                *, now_ms: Callable[[], int] | None = None,
                rand: Callable[[], float] = random.random) -> pa.RecordBatch:
    clock = now_ms or _now_ms
    n = batch.num_rows
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    topics = batch.column("topic").to_pylist()
    partitions = batch.column("partition").to_pylist()
    offsets = batch.column("offset").to_pylist()
    timestamps = _epoch_ms(batch.column("timestamp"))

    retry_topic = settings.retry_topic
    from_retry = [t == retry_topic for t in topics]
    header_dicts, headers = _headers(batch.column("headers"), from_retry)
    attempts = [_attempt(hs) if hs is not None else 0 for hs in headers]  # hs: retry records only
    new = _new_message
    messages = [
        new(keys[i], values[i], header_dicts[i], topics[i], partitions[i], offsets[i], timestamps[i], attempts[i])
        for i in range(n)
    ]
    outcomes = _outcomes(messages, settings, processor)

    routes: list[int] = []
    out_values: list[bytes | None] = []
    new_headers: list[list[tuple[str, bytes]] | None] = []
    lateness: list[int | None] = []
    now = clock()
    output, ack = int(Route.OUTPUT), int(Route.ACK)
    success_route = output if settings.has_output else ack
    for i, outcome in enumerate(outcomes):
        lateness.append(_lateness(headers[i], now) if from_retry[i] else None)
        if not isinstance(outcome, Outcome):
            # A success: the encoded result, or None to acknowledge (``decide`` for RESULT/ACK).
            if outcome is None or success_route == ack:
                routes.append(ack)
                out_values.append(None)
            else:
                routes.append(output)
                out_values.append(outcome)
            new_headers.append(None)
            continue
        failures = attempts[i] + 1
        decision = decide(outcome, failures=failures, max_redeliver=settings.max_redeliver,
                          strategy=settings.strategy, has_output=settings.has_output)
        routes.append(int(decision.route))
        out_values.append(outcome.result if decision.route is Route.OUTPUT else None)
        if decision.route in (Route.OUTPUT, Route.ACK):
            new_headers.append(None)
            continue
        built = _failure_headers(messages[i], headers[i], from_retry[i], outcome, decision,
                                 failures, settings, now, rand)
        if decision.route is Route.DEAD and settings.strategy == "stop":
            m = messages[i]
            raise StopPipeline(
                f"{StopPipeline.MARKER} strategy stop: message {m.topic}[{m.partition}]@{m.offset} "
                f"failed ({decision.reason}): {outcome.error_class}: {outcome.error_message}"
            )
        if decision.route is Route.IGNORED:
            m = messages[i]
            log.warning("dead letter ignored (strategy ignore): %s[%s]@%s %s: %s: %s", m.topic,
                        m.partition, m.offset, decision.reason, outcome.error_class,
                        outcome.error_message)
        new_headers.append(built)

    added = [
        pa.array(routes, type=pa.int8()),
        pa.array(out_values, type=pa.binary()),
        pa.array([None if hs is None else [{"key": k, "value": v} for k, v in hs] for hs in new_headers],
                 type=HEADER_TYPE),
        pa.array(attempts, type=pa.int32()),
        pa.array(lateness, type=pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(
        list(batch.columns) + added, schema=_output_schema(batch.schema)
    )


def _headers(column: pa.Array, from_retry: list[bool]
             ) -> tuple[list[dict[str, bytes]], list[list[tuple[str, bytes | None]] | None]]:
    """Each row's headers as the processor sees them (a dict: the first of repeated keys wins,
    a null value reads as b""), and, for retry records only, as the list of (key, value) pairs
    that attempts, lateness and carried headers are read from (None for other rows).

    Read from the flattened key and value columns, without building a dict per header entry."""
    n = len(column)
    bounds = column.offsets.to_pylist()
    valid = column.is_valid().to_pylist() if column.null_count else None
    entries = column.values
    if len(entries):
        key_array, value_array = entries.flatten()
        names = key_array.to_pylist()
        contents = value_array.to_pylist()
        has_null_value = value_array.null_count > 0
    else:
        names, contents, has_null_value = [], [], False
    dicts: list[dict[str, bytes]] = []
    pairs: list[list[tuple[str, bytes | None]] | None] = []
    for i in range(n):
        start, stop = bounds[i], bounds[i + 1]
        if start == stop or (valid is not None and not valid[i]):
            dicts.append({})
            pairs.append([] if from_retry[i] else None)
            continue
        if stop - start == 1 and not has_null_value:
            dicts.append({names[start]: contents[start]})
        else:
            row: dict[str, bytes] = {}
            for j in range(start, stop):
                value = contents[j]
                row.setdefault(names[j], value if value is not None else b"")
            dicts.append(row)
        pairs.append(list(zip(names[start:stop], contents[start:stop], strict=True)) if from_retry[i] else None)
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
    setters = [getattr(Message, name).__set__ for name in fields]
    sk, sv, sh, st, sp, so, sts, sa = setters
    new = object.__new__

    def make(key: bytes | None, value: bytes | None, headers: dict[str, bytes], topic: str,
             partition: int, offset: int, timestamp: int, attempt: int) -> Message:
        m = new(Message)
        sk(m, key)
        sv(m, value)
        sh(m, headers)
        st(m, topic)
        sp(m, partition)
        so(m, offset)
        sts(m, timestamp)
        sa(m, attempt)
        return m

    return make


_new_message = _message_constructor()


def output_schema(input_schema: pa.Schema) -> pa.Schema:
    return _output_schema(input_schema)


def _output_schema(input_schema: pa.Schema) -> pa.Schema:
    schema = input_schema
    for f in ADDED_FIELDS:
        schema = schema.append(f)
    return schema


def _outcomes(messages: Sequence[Message], settings: RoutingSettings,
              processor: Processor) -> list[bytes | Outcome | None]:
    """One entry per message: the encoded result of a success (None acknowledges), or the
    ``Outcome`` of a failure."""
    if settings.mode == "batch":
        return _batch_outcomes(messages, settings, processor)
    non_retryable, with_stack = settings.non_retryable, settings.include_stack
    if settings.timeout_ms <= 0:
        return [result_or_failure(processor, m, non_retryable, with_stack=with_stack) for m in messages]

    def one(message: Message) -> bytes | Outcome | None:
        return result_or_failure(processor, message, non_retryable, with_stack=with_stack)

    results = map_with_limit(one, messages, timeout_ms=settings.timeout_ms)
    return [classify(r.error, non_retryable, with_stack=with_stack) if type(r) is Raised else r
            for r in results]


def _batch_outcomes(messages: Sequence[Message], settings: RoutingSettings,
                    processor: Processor) -> list[bytes | Outcome | None]:
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
                lambda batch: _batch_results(processor, batch), [list(messages)],
                timeout_ms=settings.timeout_ms * n, what=f"the batch processor ({n} messages)",
                limit=f"processor.timeout {format_ms(settings.timeout_ms)} per message")
            if type(answer) is Raised:
                raise answer.error
            results = answer
        else:
            results = _batch_results(processor, list(messages))
    except BaseException as error:  # noqa: BLE001 - the team's code failed for the whole batch
        return [outcome_of(error, settings.non_retryable, with_stack=settings.include_stack)] * len(messages)
    if len(results) != len(messages):
        mismatch = ValueError(f"batch processor returned {len(results)} outcomes for {len(messages)} messages")
        return [outcome_of(mismatch, settings.non_retryable, with_stack=False)] * len(messages)
    non_retryable, with_stack = settings.non_retryable, settings.include_stack
    return [item_result_or_failure(r, non_retryable, with_stack=with_stack) for r in results]


def _batch_results(processor: Processor, messages: list[Message]) -> list[Any]:
    """A batch processor's answer as a list (it may return any iterable but a str, bytes or dict)."""
    returned = processor(messages)
    if isinstance(returned, str | bytes | bytearray | dict) or not isinstance(returned, Iterable):
        raise UnsupportedResult(f"batch processor returned {type(returned).__name__}; return a list "
                                f"with one result or exception per message")
    return list(returned)


def _failure_headers(message: Message, headers: list[tuple[str, bytes | None]] | None, from_retry: bool,
                     outcome: Outcome, decision: Decision, failures: int,
                     settings: RoutingSettings, now: int,
                     rand: Callable[[], float]) -> list[tuple[str, bytes]]:
    if from_retry:
        origin = {name: _text(h.first_header(headers, name)) for name in h.CARRIED
                  if h.first_header(headers, name) is not None}
    else:
        origin = {}
    origin.setdefault(h.ORIGINAL_TOPIC, message.topic)
    origin.setdefault(h.ORIGINAL_PARTITION, str(message.partition))
    origin.setdefault(h.ORIGINAL_OFFSET, str(message.offset))
    origin.setdefault(h.ORIGINAL_TIMESTAMP, str(message.timestamp))
    origin.setdefault(h.FIRST_FAILURE_AT, str(now))
    deliver_at = None
    if decision.route is Route.RETRY:
        wait = outcome.delay_ms if outcome.delay_ms is not None else delay_ms(settings.backoff, failures, rand())
        deliver_at = min(now + wait, MAX_DELIVER_AT)
    built = h.failure_headers(
        origin=origin, attempt=failures, error_class=outcome.error_class,
        error_message=outcome.error_message, stacktrace=outcome.stacktrace,
        policy=settings.policy, subscription=settings.subscription, failed_at=now,
        deliver_at=deliver_at, reason=decision.reason,
        static=dict(settings.static_headers) if decision.route is not Route.RETRY else None,
    )
    return built


def _attempt(headers: list[tuple[str, bytes | None]] | None) -> int:
    raw = h.first_header(headers, h.ATTEMPT)
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


def _epoch_ms(column: pa.Array) -> list[int]:
    if pa.types.is_timestamp(column.type):
        unit = column.type.unit
        divisor = {"s": 1 / 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
        raw = column.cast(pa.int64()).to_pylist()
        return [0 if v is None else int(v // divisor) for v in raw]
    return [0 if v is None else int(v) for v in column.to_pylist()]


def _now_ms() -> int:
    return int(time.time() * 1000)
