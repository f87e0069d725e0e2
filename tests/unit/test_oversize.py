"""Records too large for their topic are found before the sink and made to fit: failure text
cut, a too-large dead letter, or a stub; the rest of the batch is routed as always."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from dlq_engine import Message, Terminate
from dlq_engine.failures import EngineError
from dlq_engine.processing import oversize
from dlq_engine.processing.batches import route_batch
from dlq_engine.routing import headers as h
from dlq_engine.routing.outcomes import Route
from dlq_engine.routing.record_size import Limit, RecordLimits, record_size
from tests.unit.test_batches import KEYED, NOW, SETTINGS, batch, fail, settings_for

LIMITS = RecordLimits(
    output=Limit(4_000, "max.message.bytes of topic 'out'", "out"),
    retry=Limit(6_000, "max.message.bytes of topic 'retry'", "retry"),
    dead_letter=Limit(20_000, "max.message.bytes of topic 'dlq'", "dlq"),
)
STACKED: dict[str, Any] = {"spec.deadLetter.includeStackTrace": True}
FITTED = settings_for(STACKED, limits=LIMITS)


def routed(rows: list[dict[str, Any]], processor: Any, settings: Any = FITTED) -> list[dict[str, Any]]:
    out = route_batch(batch(rows), settings, processor, now_ms=lambda: NOW, rand=lambda: 0.5).to_pylist()
    for row in out:
        row["by_name"] = {entry["key"]: entry["value"] for entry in row["headers"] or []}
    return out


def size_of(row: dict[str, Any]) -> int:
    key, value = row["key"], row["value"]
    headers = [(entry["key"], entry["value"]) for entry in row["headers"] or []]
    return record_size(-1 if key is None else len(key), -1 if value is None else len(value), headers)


def counts(row: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in json.loads(row["stats"])["counts"].items() if v}


def test_sizes_are_record_size_row_for_row_also_on_a_slice_and_null_headers() -> None:
    rows = [
        {"key": None, "value": b"x" * 10, "headers": [("a", b"1"), ("é", None)]},
        {"key": b"k", "value": None, "headers": []},
        {"key": b"kk", "value": b"", "headers": [("z", b"z" * 100)]},
    ]
    source = batch(rows)
    headers = source.column("headers")
    with_null = pa.array([None, *headers.to_pylist()[1:]], headers.type)
    for key, value, column in (
        (source.column("key"), source.column("value"), headers),
        (source.column("key").slice(1), source.column("value").slice(1), headers.slice(1)),
        (source.column("key"), source.column("value"), with_null),
    ):
        expected = [
            record_size(
                -1 if k is None else len(k),
                -1 if v is None else len(v),
                [(e["key"], e["value"]) for e in hs or []],
            )
            for k, v, hs in zip(key.to_pylist(), value.to_pylist(), column.to_pylist(), strict=True)
        ]
        assert oversize.sizes(key, value, column).tolist() == expected


def test_each_route_is_held_to_its_own_topics_limit_and_unwritten_ones_to_none() -> None:
    value = pa.array([b"x" * 5_000] * 5, pa.binary())
    key = pa.array([None] * 5, pa.binary())
    headers = batch([{"headers": []}] * 5).column("headers")
    routes = np.array([Route.OUTPUT, Route.RETRY, Route.DEAD, Route.ACK, Route.IGNORED], dtype=np.int8)
    assert oversize.over_limit(routes, key, value, headers, LIMITS) == [0]


def test_a_result_too_large_for_the_output_topic_is_dead_lettered_with_its_own_value() -> None:
    big, small = routed(
        [{"value": b"in", "offset": 3}, {"value": b"ok"}],
        lambda m: m.value * 3_000 if m.value == b"in" else m.value,
    )
    assert (big["route"], big["reason"], big["value"], big["key"]) == (Route.DEAD, "too-large", b"in", b"k")
    assert big["by_name"][h.ERROR_CLASS] == b"RecordTooLarge"
    size = record_size(1, 6_000, [])
    assert (
        big["by_name"][h.ERROR_MESSAGE]
        == (
            f"the record ({size} bytes with its headers) is larger than the max.message.bytes of topic 'out' "
            "(4000 bytes)"
        ).encode()
    )
    assert (
        big["by_name"][h.RECORD_SIZE],
        big["by_name"][h.RECORD_LIMIT],
        big["by_name"][h.RECORD_DESTINATION],
    ) == (
        str(size).encode(),
        b"4000",
        b"out",
    )
    assert big["by_name"][h.ORIGINAL_OFFSET] == b"3"
    assert big["by_name"]["team"] == b"payments"  # a dead letter's static headers
    assert (small["route"], small["value"]) == (Route.OUTPUT, b"ok")
    assert counts(big) == {"total": 2, "output": 1, "dead": 1, "dead_too_large": 1}
    assert json.loads(big["stats"])["failures"] == [["dead_letter", "too-large", "RecordTooLarge", 1]]


def test_a_retry_its_failure_headers_push_over_keeps_its_value_with_the_failure_text_cut() -> None:
    value = b"v" * 4_500

    def wordy(message: Message) -> Any:
        raise ConnectionError("down " + "x" * 1_800)

    [row] = routed([{"value": value, "headers": [("trace", b"t")]}], wordy)
    assert (row["route"], row["value"]) == (Route.RETRY, value)
    assert size_of(row) <= LIMITS.retry.bytes
    assert row["by_name"][h.ERROR_MESSAGE].startswith(b"down xxx")
    assert row["by_name"][h.ERROR_MESSAGE].endswith(
        b"...(truncated from 1805 bytes to fit the record's limit)"
    )
    assert row["by_name"][h.ERROR_STACKTRACE].endswith(b"x\n")  # the end of a trace is kept
    assert row["by_name"]["trace"] == b"t"


def test_a_retry_that_does_not_fit_its_topic_but_fits_the_dead_letters_goes_there_whole() -> None:
    value = b"v" * 10_000
    [row] = routed([{"value": value}], fail)
    assert (row["route"], row["reason"], row["value"]) == (Route.DEAD, "too-large", value)
    assert row["by_name"][h.ERROR_CLASS] == b"ConnectionError"  # the processor's own failure
    assert row["by_name"][h.ATTEMPT] == b"1"
    assert row["by_name"][h.RECORD_DESTINATION] == b"retry"
    assert h.DELIVER_AT not in row["by_name"]


def test_a_record_too_large_for_the_dead_letter_topic_too_is_a_bounded_stub() -> None:
    value = bytes(range(256)) * 100
    own = [("trace", b"t"), ("big", b"b" * 30_000)]
    [row] = routed([{"key": b"K", "value": value, "headers": own}], lambda m: m.value)
    assert (row["route"], row["reason"], row["key"], row["value"]) == (Route.DEAD, "too-large", b"K", None)
    names = row["by_name"]
    assert names[h.VALUE_OMITTED] == b"true"
    assert names[h.VALUE_SIZE] == b"25600"
    assert names[h.VALUE_DIGEST] == f"sha256:{hashlib.sha256(value).hexdigest()}".encode()
    assert names[h.HEADERS_OMITTED] == b"2"  # its own headers did not fit a stub
    assert "trace" not in names
    assert size_of(row) <= oversize.STUB_MAX_BYTES


def test_a_stub_leaves_out_a_long_key_by_digest_and_keeps_small_own_headers() -> None:
    key = b"k" * 5_000
    [row] = routed([{"key": key, "value": b"x" * 30_000, "headers": [("trace", b"t")]}], fail)
    assert (row["route"], row["reason"], row["key"], row["value"]) == (Route.DEAD, "too-large", None, None)
    names = row["by_name"]
    assert (names[h.KEY_OMITTED], names[h.KEY_SIZE]) == (b"true", b"5000")
    assert names[h.KEY_DIGEST] == f"sha256:{hashlib.sha256(key).hexdigest()}".encode()
    assert names["trace"] == b"t"


def test_with_a_table_the_stub_s_value_is_handed_on_for_it() -> None:
    settings = dataclasses.replace(FITTED, table=True)
    value = b"x" * 30_000
    out = route_batch(
        batch([{"value": value}, {"value": b"ok"}]), settings, lambda m: m.value, now_ms=lambda: NOW
    )
    assert out.schema.names[-2:] == ["table_value", "stats"]
    assert out.column("table_value").to_pylist() == [value, None]
    assert out.column("value").to_pylist() == [None, b"ok"]


def test_under_ignore_a_record_too_large_is_counted_not_written_and_under_stop_it_stops() -> None:
    [row] = routed(
        [{"value": b"x" * 5_000}],
        lambda m: m.value,
        settings_for({**STACKED, "spec.deadLetter.strategy": "ignore"}, limits=LIMITS),
    )
    assert (row["route"], row["reason"]) == (Route.IGNORED, "too-large")
    with pytest.raises(EngineError, match=r"DLQ-STOP: .* failed \(too-large\): RecordTooLarge"):
        routed(
            [{"value": b"x" * 5_000}],
            lambda m: m.value,
            settings_for({**STACKED, "spec.deadLetter.strategy": "stop"}, limits=LIMITS),
        )


def test_arrow_mode_fits_records_the_same_way() -> None:
    settings = dataclasses.replace(FITTED, mode="arrow")

    def upper(given: pa.RecordBatch) -> pa.Array:
        return pa.array(
            [v * 3_000 if v == b"in" else v for v in given.column("value").to_pylist()], pa.binary()
        )

    big, small = routed([{"value": b"in", "offset": 8}, {"value": b"ok"}], upper, settings)
    assert (big["route"], big["reason"], big["value"]) == (Route.DEAD, "too-large", b"in")
    assert big["by_name"][h.ORIGINAL_OFFSET] == b"8"
    assert (small["route"], small["value"]) == (Route.OUTPUT, b"ok")


def test_ordered_a_head_retry_dead_lettered_as_too_large_releases_or_blocks_its_key() -> None:
    retry = {
        "key": b"a",
        "value": b"v" * 10_000,
        "topic": SETTINGS.retry_topic,
        "headers": [("dlq.attempt", b"1"), ("dlq.original.partition", b"0"), ("dlq.original.offset", b"4")],
    }
    ordered = settings_for({**STACKED, **KEYED}, limits=LIMITS)
    out = routed([retry], fail, ordered)
    assert [(r["route"], r["reason"]) for r in out] == [(Route.DEAD, "too-large"), (Route.CONTROL, "release")]
    blocking = settings_for({**STACKED, **KEYED, "spec.ordering.onDeadLetter": "block"}, limits=LIMITS)
    out = routed([retry], fail, blocking)
    assert [(r["route"], r["reason"]) for r in out] == [(Route.DEAD, "too-large"), (Route.CONTROL, "block")]


def test_a_dead_letter_too_large_for_its_topic_becomes_a_too_large_stub() -> None:
    [row] = routed([{"value": b"v" * 30_000}], lambda m: (_ for _ in ()).throw(Terminate("no")))
    assert (row["route"], row["reason"], row["value"]) == (Route.DEAD, "too-large", None)
    assert (row["by_name"][h.REASON], row["by_name"][h.ERROR_CLASS]) == (
        b"too-large",
        b"dlq_engine.model.processor_api.Terminate",
    )
    assert counts(row) == {"total": 1, "dead": 1, "dead_too_large": 1}


def test_a_dead_letter_its_headers_push_over_keeps_its_reason() -> None:
    [row] = routed([{"value": b"v" * 19_000}], lambda m: (_ for _ in ()).throw(Terminate("x" * 1_500)))
    assert (row["route"], row["reason"], len(row["value"])) == (Route.DEAD, "terminated", 19_000)
    assert size_of(row) <= LIMITS.dead_letter.bytes
