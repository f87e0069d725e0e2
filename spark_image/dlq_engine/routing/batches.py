"""Routing a whole Arrow record batch: the one place Python touches each message.

The Spark job hands every partition to ``route_batches`` (through ``mapInArrow``). For each
record it builds a ``Message``, calls the processor once (or the batch processor once per
batch), decides the route and, for failures only, builds the new ``dlq.*`` headers. The input
columns pass through untouched (Arrow arrays are reused, not copied), and the job's column
expressions then pick the topic, value and headers for the Kafka sink.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dlq_engine.model.policy import BackoffSpec, DeadLetterPolicy
from dlq_engine.model.processor_api import Message
from dlq_engine.routing import headers as h
from dlq_engine.routing.backoff import delay_ms
from dlq_engine.routing.outcomes import (
    Decision,
    Outcome,
    Route,
    decide,
    frozen_names,
    invoke,
    outcome_of,
)

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
    header_lists = batch.column("headers").to_pylist()
    topics = batch.column("topic").to_pylist()
    partitions = batch.column("partition").to_pylist()
    offsets = batch.column("offset").to_pylist()
    timestamps = _epoch_ms(batch.column("timestamp"))

    headers: list[list[tuple[str, bytes | None]]] = [
        [(e["key"], e["value"]) for e in hl] if hl else [] for hl in header_lists
    ]
    from_retry = [t == settings.retry_topic for t in topics]
    attempts = [_attempt(hs) if r else 0 for hs, r in zip(headers, from_retry, strict=True)]
    messages = [
        Message(key=keys[i], value=values[i], headers=_header_dict(headers[i]), topic=topics[i],
                partition=partitions[i], offset=offsets[i], timestamp=timestamps[i],
                attempt=attempts[i])
        for i in range(n)
    ]
    outcomes = _outcomes(messages, settings, processor)

    routes: list[int] = []
    out_values: list[bytes | None] = []
    new_headers: list[list[tuple[str, bytes]] | None] = []
    lateness: list[int | None] = []
    now = clock()
    for i, outcome in enumerate(outcomes):
        failures = attempts[i] + 1
        decision = decide(outcome, failures=failures, max_redeliver=settings.max_redeliver,
                          strategy=settings.strategy, has_output=settings.has_output)
        routes.append(int(decision.route))
        out_values.append(outcome.result if decision.route is Route.OUTPUT else None)
        lateness.append(_lateness(headers[i], now) if from_retry[i] else None)
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


def output_schema(input_schema: pa.Schema) -> pa.Schema:
    return _output_schema(input_schema)


def _output_schema(input_schema: pa.Schema) -> pa.Schema:
    schema = input_schema
    for f in ADDED_FIELDS:
        schema = schema.append(f)
    return schema


def _outcomes(messages: Sequence[Message], settings: RoutingSettings, processor: Processor) -> list[Outcome]:
    if settings.mode == "batch":
        return _batch_outcomes(messages, settings, processor)
    return [invoke(processor, m, settings.non_retryable, with_stack=settings.include_stack)
            for m in messages]


def _batch_outcomes(messages: Sequence[Message], settings: RoutingSettings,
                    processor: Processor) -> list[Outcome]:
    """A batch processor takes the list of messages and returns one result or exception per
    message. If it raises, every message of the batch fails with that exception."""
    if not messages:
        return []
    try:
        results = list(processor(list(messages)))
    except Exception as error:  # noqa: BLE001 - the team's code failed for the whole batch
        return [outcome_of(error, settings.non_retryable, with_stack=settings.include_stack)] * len(messages)
    if len(results) != len(messages):
        mismatch = ValueError(f"batch processor returned {len(results)} outcomes for {len(messages)} messages")
        return [outcome_of(mismatch, settings.non_retryable, with_stack=False)] * len(messages)
    return [outcome_of(r, settings.non_retryable, with_stack=settings.include_stack) for r in results]


def _failure_headers(message: Message, headers: list[tuple[str, bytes | None]], from_retry: bool,
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
        deliver_at = now + wait
    built = h.failure_headers(
        origin=origin, attempt=failures, error_class=outcome.error_class,
        error_message=outcome.error_message, stacktrace=outcome.stacktrace,
        policy=settings.policy, subscription=settings.subscription, failed_at=now,
        deliver_at=deliver_at, reason=decision.reason,
        static=dict(settings.static_headers) if decision.route is not Route.RETRY else None,
    )
    return built


def _attempt(headers: list[tuple[str, bytes | None]]) -> int:
    raw = h.first_header(headers, h.ATTEMPT)
    try:
        value = int(_text(raw))
    except ValueError:
        return 0
    return min(max(value, 0), MAX_ATTEMPT_HEADER)


def _lateness(headers: list[tuple[str, bytes | None]], now: int) -> int | None:
    try:
        return now - int(_text(h.first_header(headers, h.DELIVER_AT)))
    except ValueError:
        return None


def _header_dict(headers: list[tuple[str, bytes | None]]) -> dict[str, bytes]:
    result: dict[str, bytes] = {}
    for key, value in headers:
        result.setdefault(key, value if value is not None else b"")
    return result


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
