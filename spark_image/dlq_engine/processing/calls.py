"""Calling the team's processor on one Arrow batch's messages, in each ``processor.mode``.

``message``: once per message (the first ``TIMED_CALLS`` timed), each call on the helper
thread with ``processor.timeout``; ``batch``: once with the list of messages, answered by one
result or exception per message; ``arrow``: once with the batch's own arrays
(``batches.arrow_input``), answered by a binary array and the failed rows' exceptions. Under
``source.ordering: key`` in message mode the calls go in row order and a key held by an earlier
message's decision (``routing.key_order``) is not processed. Whatever the processor does becomes
a ``Result`` per message (``routing.outcomes``): nothing the team's code raises escapes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np
import pyarrow as pa

from dlq_engine.model.durations import format_ms
from dlq_engine.model.processor_api import Message
from dlq_engine.processing.time_limit import MAX_BATCH_CALL_MS, Raised, batch_call_limit_ms, map_with_limit
from dlq_engine.routing.key_order import KeyHold
from dlq_engine.routing.outcomes import (
    Decision,
    Failure,
    Result,
    UnsupportedResult,
    classify,
    decide,
    item_result_or_failure,
    result_or_failure,
)
from dlq_engine.routing.record_size import Header
from dlq_engine.routing.settings import RoutingSettings

ProcessFn = Callable[..., Any]

#: How many calls of each Arrow batch are timed for the latency histogram (message mode, no
#: time limit): the batch's first ones, so every call of a small batch, and a bounded cost per
#: large batch (docs/monitoring.md has what timing every call cost).
TIMED_CALLS: Final = 256

ARROW_RESULT_HINT: Final = (
    "return a pyarrow array of binary or string results, one per message (null: acknowledged), "
    "or (that array, {row: exception})"
)


def results(
    messages: Sequence[Message], settings: RoutingSettings, processor: ProcessFn
) -> tuple[list[Result], np.ndarray]:
    """The ``Result`` of each message, and how long the processor took, in seconds: per call (one per
    message, or one for a batch processor)."""
    clock = time.perf_counter
    if settings.mode == "batch":
        started = clock()
        done = _batch_results(messages, settings, processor)
        return done, np.array([clock() - started] if messages else [], dtype=np.float64)
    classifier = settings.classifier
    non_retryable, with_stack, rules = (
        classifier.non_retryable,
        classifier.include_stack,
        classifier.rule_errors,
    )
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

    limited = map_with_limit(one, messages, timeout_ms=settings.timeout_ms)
    return [classifier.failure(r.error) if type(r) is Raised else r for r in limited], np.array(
        durations, dtype=np.float64
    )


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
    done = [
        result_or_failure(processor, message, non_retryable, with_stack=with_stack, rules=rules)
        for message in messages[:TIMED_CALLS]
        if not stamp(clock())
    ]
    stamp(clock())
    if len(messages) > TIMED_CALLS:
        done += [
            result_or_failure(processor, message, non_retryable, with_stack=with_stack, rules=rules)
            for message in messages[TIMED_CALLS:]
        ]
    return done, np.diff(np.array(stamps, dtype=np.float64))


def in_key_order(
    messages: Sequence[Message],
    skip: Sequence[bool],
    retry_headers: Mapping[int, list[Header]],
    settings: RoutingSettings,
    processor: ProcessFn,
    held: set[bytes],
    now_ms: Callable[[], int],
    rand: Callable[[], float],
) -> tuple[list[Result], np.ndarray, dict[int, Decision]]:
    """``source.ordering: key`` in message mode: the processor called in row order, and not
    for a message to ``skip`` (past an ordering bound) or of a key whose earlier message in this
    task holds it (``KeyHold``, on a copy of ``held``); those get a None result, never used. Each
    failure's decision is taken here, once, and handed back: whether its key is held depends on
    it. The first ``TIMED_CALLS`` calls are timed. With ``processor.timeout`` each call is
    handed to the helper thread on its own (``map_with_limit``), as the next call depends on
    this one's outcome."""
    clock = time.perf_counter
    classifier = settings.classifier
    non_retryable, with_stack, rules = (
        classifier.non_retryable,
        classifier.include_stack,
        classifier.rule_errors,
    )

    def direct(message: Message) -> Result:
        return result_or_failure(processor, message, non_retryable, with_stack=with_stack, rules=rules)

    def limited(message: Message) -> Result:
        [done] = map_with_limit(direct, [message], timeout_ms=settings.timeout_ms)
        if type(done) is Raised:
            return classifier.failure(done.error)
        result: Result = done
        return result

    call = limited if settings.timeout_ms > 0 else direct

    hold = KeyHold(set(held))
    done: list[Result] = []
    durations: list[float] = []
    decided: dict[int, Decision] = {}
    for i, message in enumerate(messages):
        key = message.key
        if skip[i] or hold.parks(key):
            done.append(None)
            continue
        if len(durations) < TIMED_CALLS:
            started = clock()
            result = call(message)
            durations.append(clock() - started)
        else:
            result = call(message)
        if type(result) is Failure:
            decision = decide(
                result,
                message.attempt + 1,
                classifier,
                now=now_ms(),
                rand=rand,
                retry_headers=retry_headers.get(i),
            )
            decided[i] = decision
            hold.after(key, decision)
        done.append(result)
    return done, np.array(durations, dtype=np.float64), decided


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
    classifier = settings.classifier
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
            returned = answer
        else:
            returned = _batch_answer(processor, list(messages))
    except BaseException as error:  # noqa: BLE001 - the team's code failed for the whole batch
        return [classifier.failure(error)] * n
    if len(returned) != len(messages):
        mismatch = ValueError(
            f"batch processor returned {len(returned)} outcomes for {len(messages)} messages"
        )
        return [classify(mismatch, classifier.non_retryable, with_stack=False)] * n
    non_retryable, with_stack, rules = (
        classifier.non_retryable,
        classifier.include_stack,
        classifier.rule_errors,
    )
    return [item_result_or_failure(r, non_retryable, with_stack=with_stack, rules=rules) for r in returned]


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


def arrow_call(
    processor: ProcessFn, given: pa.RecordBatch, settings: RoutingSettings
) -> tuple[pa.Array | None, dict[int, Failure], float]:
    """Call an Arrow processor once on ``given``: its results as a binary array (None when the
    call failed as a whole) and the failed rows' ``Failure``; and how long the call took. If it
    raises, overruns ``processor.timeout`` times the number of rows, or returns anything but
    ``ARROW_RESULT_HINT`` says, every row fails with that error."""
    n = given.num_rows
    classifier = settings.classifier
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
        failure = classifier.failure(error)
        return None, dict.fromkeys(range(n), failure), time.perf_counter() - started
    took = time.perf_counter() - started
    return values, {i: classifier.failure(error) for i, error in errors.items()}, took


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
