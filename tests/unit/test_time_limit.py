"""The processor's time limit: calls that overrun ``processor.timeout`` fail, the rest go on."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest

from dlq_engine import Message
from dlq_engine.processing.batches import route_batch
from dlq_engine.processing.time_limit import (
    MAX_BATCH_CALL_MS,
    MAX_HUNG_CALLS,
    HungCalls,
    Raised,
    abandoned_threads,
    batch_call_limit_ms,
    map_with_limit,
    worker_must_retire,
)
from dlq_engine.routing.outcomes import Route
from tests.unit.test_batches import ORDERED, SETTINGS, batch, route, settings_for


def wait_until(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def spin_forever(_: object) -> None:
    while True:
        pass


def test_results_come_back_in_order_from_one_helper_thread() -> None:
    threads: set[int] = set()

    def double(x: int) -> int:
        threads.add(threading.get_ident())
        return 2 * x

    assert map_with_limit(double, [1, 2, 3], timeout_ms=5_000) == [2, 4, 6]
    assert len(threads) == 1
    assert threading.get_ident() not in threads


def test_exceptions_of_every_kind_come_back_in_their_place() -> None:
    errors: list[BaseException] = [ValueError("v"), SystemExit(3), KeyboardInterrupt()]

    def fail(i: int) -> int:
        if i < len(errors):
            raise errors[i]
        return i

    results = map_with_limit(fail, [0, 1, 2, 3], timeout_ms=5_000)
    assert [r.error if isinstance(r, Raised) else r for r in results] == [*errors, 3]


def test_an_overrunning_call_fails_with_a_timeout_naming_the_limit_and_the_rest_go_on() -> None:
    def work(x: str) -> str:
        if x == "spin":
            spin_forever(x)
        return x.upper()

    started = time.monotonic()
    results = map_with_limit(work, ["a", "spin", "b"], timeout_ms=300)
    elapsed = time.monotonic() - started

    assert results[0] == "A"
    assert results[2] == "B"
    error = results[1].error
    assert type(error) is TimeoutError
    assert str(error) == "the processor did not return within 300ms (processor.timeout)"
    assert "in spin_forever" in error.__notes__[0]
    assert 0.3 <= elapsed < 10
    # The abandoned thread looped in Python code: asked to stop, it ends.
    assert wait_until(lambda: abandoned_threads() == 0)


def test_a_call_blocked_in_c_code_is_abandoned_and_ends_when_it_returns() -> None:
    release = threading.Event()
    ended = threading.Event()

    def block(_: object) -> str:
        try:
            release.wait()  # blocks in C: the request to stop waits for it
            return "late"
        finally:
            ended.set()

    assert wait_until(lambda: abandoned_threads() == 0)
    (result,) = map_with_limit(block, [None], timeout_ms=200)
    assert type(result.error) is TimeoutError
    assert abandoned_threads() == 1
    assert not ended.is_set()
    release.set()
    assert ended.wait(10)
    assert wait_until(lambda: abandoned_threads() == 0)


def test_the_limit_applies_to_each_call_not_to_their_sum() -> None:
    # Six calls of 150 ms take 900 ms in all, over the 750 ms limit; none of them overruns.
    results = map_with_limit(lambda x: time.sleep(0.15) or x, [1, 2, 3, 4, 5, 6], timeout_ms=750)
    assert results == [1, 2, 3, 4, 5, 6]


def test_with_no_limit_the_processor_runs_on_the_routing_thread() -> None:
    threads: list[int] = []
    route([{}, {}], lambda m: threads.append(threading.get_ident()))
    assert threads == [threading.get_ident()] * 2


@pytest.mark.parametrize(
    ("non_retryable", "attempt_header", "route_to", "reason"),
    [
        pytest.param(frozenset(), None, Route.RETRY, None, id="first-overrun-retries"),
        pytest.param(frozenset(), b"2", Route.DEAD, "exhausted", id="last-overrun-exhausted"),
        pytest.param(frozenset({"TimeoutError"}), None, Route.DEAD, "non-retryable", id="listed"),
    ],
)
def test_a_message_that_overruns_is_routed_as_a_timeout_error(
    non_retryable: frozenset[str], attempt_header: bytes | None, route_to: Route, reason: str | None
) -> None:
    settings = settings_for(
        {"spec.retry.nonRetryableErrors": sorted(non_retryable), "spec.deadLetter.includeStackTrace": True},
        timeout_ms=200,
    )
    headers = [] if attempt_header is None else [("dlq.attempt", attempt_header)]
    topic = "orders" if attempt_header is None else SETTINGS.retry_topic

    def processor(m: Message) -> bytes:
        if m.value == b"hang":
            spin_forever(m)
        return b"done"

    rows = route(
        [{"value": b"hang", "topic": topic, "headers": headers}, {"value": b"next"}], processor, settings
    )
    assert rows[0]["route"] == route_to
    assert rows[0]["dlq"]["dlq.error.class"] == "TimeoutError"
    assert (
        rows[0]["dlq"]["dlq.error.message"] == "the processor did not return within 200ms (processor.timeout)"
    )
    assert "in spin_forever" in rows[0]["dlq"]["dlq.error.stacktrace"]
    assert rows[0]["dlq"].get("dlq.reason") == reason
    assert (rows[1]["route"], rows[1]["value"]) == (Route.OUTPUT, b"done")


def test_in_batch_mode_the_limit_is_the_timeout_times_the_number_of_messages() -> None:
    settings = dataclasses.replace(SETTINGS, mode="batch", timeout_ms=250)

    def slow(messages: list[Message]) -> list[object]:
        time.sleep(0.4)  # over one message's 250 ms, within 4 x 250 ms
        return [m.value for m in messages]

    rows = route([{"value": b"a"}, {"value": b"b"}, {"value": b"c"}, {"value": b"d"}], slow, settings)
    assert [r["value"] for r in rows] == [b"a", b"b", b"c", b"d"]

    def hung(messages: list[Message]) -> list[object]:
        spin_forever(messages)
        return []

    rows = route([{"value": b"a"}, {"value": b"b"}], hung, settings)
    assert [r["route"] for r in rows] == [Route.RETRY, Route.RETRY]
    assert rows[0]["dlq"]["dlq.error.class"] == "TimeoutError"
    assert rows[0]["dlq"]["dlq.error.message"] == (
        "the batch processor (2 messages) did not return within 500ms (processor.timeout 250ms per message)"
    )


def test_the_batch_after_an_overrun_is_routed_on_a_fresh_helper_thread() -> None:
    settings = dataclasses.replace(SETTINGS, timeout_ms=200)
    route([{"value": b"x"}], spin_forever, settings)
    threads: set[int] = set()

    def record(m: Message) -> bytes:
        threads.add(threading.get_ident())
        return b"ok"

    out = route_batch(batch([{}, {}, {}]), settings, record).to_pylist()
    assert [r["value"] for r in out] == [b"ok"] * 3
    assert len(threads) == 1


def test_a_batch_call_gets_at_most_four_minutes_unless_the_limit_itself_is_longer() -> None:
    assert batch_call_limit_ms(250, 4) == 1_000
    assert batch_call_limit_ms(30_000, 10_000) == MAX_BATCH_CALL_MS == 240_000
    assert batch_call_limit_ms(600_000, 10) == 600_000


def test_while_too_many_abandoned_calls_still_run_no_call_is_started_and_the_worker_retires() -> None:
    release = threading.Event()
    called: list[object] = []

    def block(x: object) -> object:
        called.append(x)
        release.wait()  # blocks in C: abandoned, it keeps its thread
        return x

    assert wait_until(lambda: abandoned_threads() == 0)
    assert not worker_must_retire()
    try:
        results = map_with_limit(block, list(range(MAX_HUNG_CALLS + 3)), timeout_ms=50)
        assert called == list(range(MAX_HUNG_CALLS))
        assert [type(r.error) for r in results] == [TimeoutError] * MAX_HUNG_CALLS + [HungCalls] * 3
        assert str(results[-1].error) == (
            f"the processor was not called: {MAX_HUNG_CALLS} earlier calls in this Python worker overran "
            "processor.timeout and are still running; the worker is replaced after this task"
        )
        assert abandoned_threads() == MAX_HUNG_CALLS
        assert worker_must_retire()
    finally:
        release.set()
    assert wait_until(lambda: abandoned_threads() == 0)
    assert not worker_must_retire()
    assert map_with_limit(lambda x: x, [1], timeout_ms=1_000) == [1]


def test_ordered_with_a_limit_a_keys_later_messages_are_still_not_processed() -> None:
    settings = dataclasses.replace(ORDERED, timeout_ms=200)
    seen: list[bytes | None] = []

    def first_hangs(message: Message) -> bytes | None:
        seen.append(message.value)
        if message.value == b"a0":
            spin_forever(message)
        return message.value

    rows = [{"key": b"a", "value": b"a0"}, {"key": b"a", "value": b"a1"}, {"key": b"b", "value": b"b0"}]
    out = route_batch(batch(rows), settings, first_hangs).to_pylist()
    assert seen == [b"a0", b"b0"]
    assert [r["route"] for r in out] == [Route.RETRY, Route.PARKED, Route.OUTPUT]
