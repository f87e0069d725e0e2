"""A record's size as Kafka bounds it, and failure headers cut to fit a byte budget."""

from __future__ import annotations

import pytest

from dlq_engine.routing import headers as h
from dlq_engine.routing.record_size import (
    EMPTY_RECORD,
    HEADER_OVERHEAD,
    TRUNCATED,
    headers_size,
    record_size,
    shrink,
)

STACK = h.ERROR_STACKTRACE
MESSAGE = h.ERROR_MESSAGE


def cut(headers: list[tuple[str, bytes | None]], budget: int) -> list[tuple[str, bytes | None]] | None:
    return h.bounded(headers, budget)


def test_a_record_counts_its_key_value_and_each_header_at_kafkas_upper_bound() -> None:
    assert record_size(-1, -1, []) == EMPTY_RECORD == 97
    assert record_size(3, 10, [("h", b"12"), ("é", None)]) == 97 + 3 + 10 + (10 + 1 + 2) + (10 + 2)


def test_headers_that_fit_are_left_as_they_are() -> None:
    headers: list[tuple[str, bytes | None]] = [("trace", b"t"), (STACK, b"x" * 100)]
    assert cut(headers, headers_size(headers)) == headers


def test_the_longest_texts_give_way_first_and_evenly() -> None:
    headers: list[tuple[str, bytes | None]] = [
        ("trace", b"t" * 50),
        (MESSAGE, b"m" * 300),
        (STACK, b"s" * 5_000),
        (h.SPRING_EXCEPTION_STACKTRACE, b"s" * 5_000),
    ]
    budget = headers_size(headers) - 6_000
    shrunk = cut(headers, budget)
    assert shrunk is not None
    assert headers_size(shrunk) <= budget
    values = dict(shrunk)
    assert values["trace"] == b"t" * 50  # not a failure text: never cut
    assert values[MESSAGE] == b"m" * 300  # shorter than the cap: kept whole
    assert len(values[STACK] or b"") == len(values[h.SPRING_EXCEPTION_STACKTRACE] or b"")
    assert budget - headers_size(shrunk) < 4  # as much kept as fits


def test_a_stack_trace_keeps_its_end_and_a_message_its_start_each_marked() -> None:
    headers: list[tuple[str, bytes | None]] = [
        (MESSAGE, b"begin" + b"m" * 2_000),
        (STACK, b"s" * 2_000 + b"raise here"),
    ]
    shrunk = dict(cut(headers, 600) or [])
    message, stack = shrunk[MESSAGE] or b"", shrunk[STACK] or b""
    assert message.startswith(b"begin")
    assert message.endswith(TRUNCATED.format(2_005).encode())
    assert stack.startswith(TRUNCATED.format(2_010).encode())
    assert stack.endswith(b"raise here")


def test_a_cut_never_splits_a_utf8_character() -> None:
    text = ("é" * 1_000).encode()
    shrunk = dict(cut([(MESSAGE, text), (STACK, text)], 700) or [])
    for value in shrunk.values():
        (value or b"").decode("utf-8")  # raises if a character was split


def test_headers_that_cannot_fit_even_cut_to_their_markers_are_none() -> None:
    headers: list[tuple[str, bytes | None]] = [("big", b"x" * 1_000), (STACK, b"s" * 1_000)]
    assert cut(headers, 1_000) is None
    assert shrink(headers, 1_000 + 2 * HEADER_OVERHEAD + 200, keep_end={STACK}, keep_start=()) is not None


@pytest.mark.parametrize("profiles", [("spark-dlq",), ("spark-dlq", "spring", "connect")])
def test_the_headers_of_one_failure_take_at_most_32_kib(profiles: tuple[str, ...]) -> None:
    written = h.failure_headers(
        origin={name: "1" for name in (h.ORIGINAL_TOPIC, h.ORIGINAL_PARTITION, h.ORIGINAL_OFFSET)},
        attempt=1,
        error_class="ValueError",
        error_message="é" * 2_000,  # 4,000 bytes
        stacktrace="é" * 8_000,  # 16,000 bytes
        policy="ns/p",
        subscription="s",
        failed_at=1,
        profiles=profiles,  # type: ignore[arg-type]
    )
    size = headers_size(list(written))
    assert size <= h.MAX_FAILURE_HEADER_BYTES
    stacks = [value for name, value in written if name in h.CUT_KEEPING_END]
    if len(profiles) == 1:
        assert stacks == ["é".encode() * 8_000]  # one profile fits whole
    else:
        assert all(value.startswith(b"...(truncated from 16000 bytes") for value in stacks)
