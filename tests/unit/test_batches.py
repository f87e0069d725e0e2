"""Routing whole Arrow batches, as the Spark job's mapInArrow does, without Spark."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from dlq_engine import Message, Retry, Terminate
from dlq_engine.model.policy import BackoffSpec
from dlq_engine.routing.batches import HEADER_TYPE, MAX_DELIVER_AT, RoutingSettings, StopPipeline, route_batch
from dlq_engine.routing.outcomes import Route

NOW = 1_800_000_000_000
SETTINGS = RoutingSettings(
    retry_topic="orders-billing-RETRY", policy="payments/orders-billing", subscription="billing",
    max_redeliver=2, backoff=BackoffSpec(type="fixed", delay_ms=1000), strategy="topic",
    include_stack=False, has_output=True, mode="message", non_retryable=frozenset({"KeyError"}),
    static_headers=(("team", "payments"),),
)


def batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    def col(name: str, default: Any) -> list[Any]:
        return [r.get(name, default) for r in rows]

    headers = [[{"key": k, "value": v} for k, v in r.get("headers", [])] for r in rows]
    return pa.RecordBatch.from_arrays(
        [pa.array(col("key", b"k"), pa.binary()), pa.array(col("value", b"v"), pa.binary()),
         pa.array(headers, HEADER_TYPE), pa.array(col("topic", "orders"), pa.string()),
         pa.array(col("partition", 0), pa.int32()), pa.array(col("offset", 0), pa.int64()),
         pa.array(col("timestamp", 1_700_000_000_000_000), pa.timestamp("us", tz="UTC"))],
        names=["key", "value", "headers", "topic", "partition", "offset", "timestamp"])


def route(rows: list[dict[str, Any]], processor: Callable[..., Any], settings: RoutingSettings = SETTINGS
          ) -> list[dict[str, Any]]:
    out = route_batch(batch(rows), settings, processor, now_ms=lambda: NOW, rand=lambda: 0.5)
    result = out.to_pylist()
    for row in result:
        row["dlq"] = {h["key"]: h["value"].decode() for h in row["dlq_headers"] or []}
    return result


def fail(message: Message) -> Any:
    raise ConnectionError("down")


def test_input_columns_pass_through_and_outcome_columns_are_added() -> None:
    rows = route([{"value": b"a", "offset": 5}], lambda m: m.value.upper())
    assert rows[0]["value"] == b"a"
    assert rows[0]["offset"] == 5
    assert rows[0]["route"] == Route.OUTPUT
    assert rows[0]["out_value"] == b"A"
    assert rows[0]["dlq_headers"] is None
    assert rows[0]["attempt"] == 0


def test_message_fields_reach_the_processor() -> None:
    seen: list[Message] = []
    route([{"key": b"K", "value": b"V", "headers": [("h", b"1"), ("h", b"2")], "partition": 2,
            "offset": 9}], lambda m: seen.append(m))
    (message,) = seen
    assert (message.key, message.value, message.topic, message.partition, message.offset) == (
        b"K", b"V", "orders", 2, 9)
    assert message.headers == {"h": b"1"}  # the first of repeated keys
    assert message.timestamp == 1_700_000_000_000
    assert message.attempt == 0


def test_a_first_failure_goes_to_retry_with_every_header() -> None:
    (row,) = route([{"value": b"x", "partition": 1, "offset": 42}], fail)
    assert row["route"] == Route.RETRY
    assert row["dlq"] == {
        "dlq.original.topic": "orders", "dlq.original.partition": "1", "dlq.original.offset": "42",
        "dlq.original.timestamp": "1700000000000", "dlq.first.failure.at": str(NOW),
        "dlq.attempt": "1", "dlq.error.class": "ConnectionError", "dlq.error.message": "down",
        "dlq.policy": "payments/orders-billing", "dlq.subscription": "billing",
        "dlq.failed.at": str(NOW), "dlq.deliver.at": str(NOW + 1000),
    }


def test_a_retry_record_keeps_its_origin_and_counts_attempts() -> None:
    carried = [("dlq.original.topic", b"orders"), ("dlq.original.partition", b"3"),
               ("dlq.original.offset", b"7"), ("dlq.original.timestamp", b"1"),
               ("dlq.first.failure.at", b"100"), ("dlq.attempt", b"2"), ("dlq.deliver.at", b"5")]
    (row,) = route([{"topic": SETTINGS.retry_topic, "offset": 99, "headers": carried}], fail)
    assert row["attempt"] == 2
    assert row["route"] == Route.DEAD
    assert row["lateness_ms"] == NOW - 5
    assert row["dlq"]["dlq.reason"] == "exhausted"
    assert row["dlq"]["dlq.attempt"] == "3"
    assert row["dlq"]["dlq.original.offset"] == "7"
    assert row["dlq"]["dlq.first.failure.at"] == "100"
    assert row["dlq"]["team"] == "payments"


@pytest.mark.parametrize(
    ("forged", "attempt"),
    [pytest.param(b"abc", 0, id="not-a-number"), pytest.param(b"-5", 0, id="negative"),
     pytest.param(b"99999999999999999999", 1_000_000, id="huge-clamped"),
     pytest.param(b"\xff\xfe", 0, id="not-utf8")],
)
def test_forged_attempt_headers_on_retry_records_are_bounded(forged: bytes, attempt: int) -> None:
    (row,) = route([{"topic": SETTINGS.retry_topic, "headers": [("dlq.attempt", forged)]}], lambda m: None)
    assert row["attempt"] == attempt


def test_attempt_headers_on_source_records_are_ignored() -> None:
    (row,) = route([{"headers": [("dlq.attempt", b"5")]}], fail)
    assert row["attempt"] == 0
    assert row["route"] == Route.RETRY


def test_retry_delay_from_the_processor_sets_deliver_at() -> None:
    (row,) = route([{}], lambda m: (_ for _ in ()).throw(Retry(delay="1m")))
    assert row["dlq"]["dlq.deliver.at"] == str(NOW + 60_000)


def test_terminate_and_listed_errors_skip_retries() -> None:
    rows = route([{"value": b"t"}, {"value": b"n"}],
                 lambda m: (_ for _ in ()).throw(Terminate("t") if m.value == b"t" else KeyError("n")))
    assert [(r["route"], r["dlq"]["dlq.reason"]) for r in rows] == [
        (Route.DEAD, "terminated"), (Route.DEAD, "non-retryable")]


def test_stop_strategy_raises_naming_the_message() -> None:
    settings = dataclasses.replace(SETTINGS, strategy="stop")
    with pytest.raises(StopPipeline) as stopped:
        route([{"offset": 3, "partition": 1}], lambda m: (_ for _ in ()).throw(Terminate("bad")), settings)
    assert str(stopped.value) == ("DLQ-STOP: strategy stop: message orders[1]@3 failed (terminated): "
                                  "dlq_engine.model.processor_api.Terminate: bad")


def test_batch_mode_gets_all_messages_once_and_a_length_mismatch_fails_them_all() -> None:
    settings = dataclasses.replace(SETTINGS, mode="batch")
    calls: list[int] = []

    def good(messages: list[Message]) -> list[object]:
        calls.append(len(messages))
        return [messages[0].value, None, Terminate("t")]

    rows = route([{"value": b"a"}, {}, {}], good, settings)
    assert calls == [3]
    assert [r["route"] for r in rows] == [Route.OUTPUT, Route.ACK, Route.DEAD]
    rows = route([{}, {}], lambda ms: [b"only one"], settings)
    assert [r["route"] for r in rows] == [Route.RETRY, Route.RETRY]
    assert rows[0]["dlq"]["dlq.error.message"] == "batch processor returned 1 outcomes for 2 messages"


@pytest.mark.parametrize(
    "deliver_at",
    [pytest.param(b"99999999999999999999999", id="beyond-int64"), pytest.param(b"-5", id="negative"),
     pytest.param(b"soon", id="not-a-number"), pytest.param(b"\xff", id="not-utf8")],
)
def test_an_unreadable_deliver_at_on_a_retry_record_gives_no_lateness(deliver_at: bytes) -> None:
    (row,) = route([{"topic": SETTINGS.retry_topic, "headers": [("dlq.deliver.at", deliver_at)]}],
                   lambda m: None)
    assert (row["route"], row["lateness_ms"]) == (Route.ACK, None)


def test_a_huge_explicit_retry_delay_is_held_to_a_representable_time() -> None:
    (row,) = route([{}], lambda m: (_ for _ in ()).throw(Retry(delay=1e30)))
    assert row["dlq"]["dlq.deliver.at"] == str(MAX_DELIVER_AT)


@pytest.mark.parametrize(
    ("returned", "message"),
    [pytest.param(None, "batch processor returned NoneType; return a list with one result or exception "
                  "per message", id="none"),
     pytest.param({"a": 1}, "batch processor returned dict; return a list with one result or exception "
                  "per message", id="dict"),
     pytest.param(b"ab", "batch processor returned bytes; return a list with one result or exception "
                  "per message", id="bytes")],
)
def test_a_batch_processor_that_returns_no_list_fails_every_message(returned: object, message: str) -> None:
    settings = dataclasses.replace(SETTINGS, mode="batch")
    rows = route([{}, {}], lambda ms: returned, settings)
    assert [(r["route"], r["dlq"]["dlq.error.message"]) for r in rows] == [(Route.RETRY, message)] * 2


def test_a_batch_processor_raising_system_exit_fails_every_message_and_unpublishable_items_fail_alone() -> None:
    settings = dataclasses.replace(SETTINGS, mode="batch")

    def exits(messages: list[Message]) -> list[object]:
        raise SystemExit(1)

    rows = route([{}, {}], exits, settings)
    assert [(r["route"], r["dlq"]["dlq.error.class"]) for r in rows] == [(Route.RETRY, "SystemExit")] * 2
    rows = route([{}, {}, {}], lambda ms: ["\udcff", {"x": float("inf")}, "fine"], settings)
    assert [r["route"] for r in rows] == [Route.RETRY, Route.RETRY, Route.OUTPUT]
    assert rows[0]["dlq"]["dlq.error.class"] == "dlq_engine.routing.outcomes.UnsupportedResult"
