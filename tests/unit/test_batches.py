"""Routing whole Arrow batches, as the Spark job's mapInArrow does, without Spark."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pytest

from dlq_engine import Message, Retry, Terminate
from dlq_engine.failures import Ending, EngineError, Failure
from dlq_engine.model.policy import BackoffSpec
from dlq_engine.processing.batches import (
    HEADER_TYPE,
    route_batch,
)
from dlq_engine.routing.outcomes import MAX_DELIVER_AT, Route, RuleLimits
from dlq_engine.routing.settings import RoutingSettings
from tests.policy_builder import policy

NOW = 1_800_000_000_000
#: The policy the tests route under (``tests.policy_builder`` paths); ``settings_for`` changes it.
POLICY: dict[str, Any] = {
    "spec.output.topic": "orders-billed",
    "spec.retry.maxRedeliverCount": 2,
    "spec.retry.backoff": {"type": "fixed", "delay": "1s"},
    "spec.retry.nonRetryableErrors": ["KeyError"],
    "spec.deadLetter.includeStackTrace": False,
    "spec.processor.timeout": "0s",  # none: every call untimed
    "spec.deadLetter.headers": {"team": "payments"},
}
#: ``source.ordering: key``.
KEYED: dict[str, Any] = {"spec.source.ordering": "key"}


def settings_for(changes: Mapping[str, Any] | None = None, **fields: Any) -> RoutingSettings:
    """The settings of ``POLICY`` with ``changes`` made to its fields, then ``fields`` of the
    settings replaced (what the query gives beside the policy: the record limits, or a mode)."""
    built = RoutingSettings.from_policy(policy({**POLICY, **(changes or {})}))
    return dataclasses.replace(built, **fields) if fields else built


SETTINGS = settings_for()


def batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    def col(name: str, default: Any) -> list[Any]:
        return [r.get(name, default) for r in rows]

    headers = [[{"key": k, "value": v} for k, v in r.get("headers", [])] for r in rows]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(col("key", b"k"), pa.binary()),
            pa.array(col("value", b"v"), pa.binary()),
            pa.array(headers, HEADER_TYPE),
            pa.array(col("topic", "orders"), pa.string()),
            pa.array(col("partition", 0), pa.int32()),
            pa.array(col("offset", 0), pa.int64()),
            pa.array(col("timestamp", 1_700_000_000_000_000), pa.timestamp("us", tz="UTC")),
        ],
        names=["key", "value", "headers", "topic", "partition", "offset", "timestamp"],
    )


def route(
    rows: list[dict[str, Any]], processor: Callable[..., Any], settings: RoutingSettings = SETTINGS
) -> list[dict[str, Any]]:
    out = route_batch(batch(rows), settings, processor, now_ms=lambda: NOW, rand=lambda: 0.5)
    result = out.to_pylist()
    for row in result:  # the headers of a retry or dead letter: its dlq.* and static headers
        row.pop("stats")  # the batch's metrics summary: tests/unit/test_routing_stats.py
        failed = row["route"] in (Route.RETRY, Route.DEAD, Route.IGNORED)
        row["dlq"] = {h["key"]: h["value"].decode() for h in row["headers"] or []} if failed else {}
    return result


def attempt_seen(rows: list[dict[str, Any]]) -> int:
    """The attempt number the processor was given for the one row."""
    seen: list[int] = []
    route(rows, lambda m: seen.append(m.attempt))
    (attempt,) = seen
    return attempt


def fail(message: Message) -> Any:
    raise ConnectionError("down")


def test_a_success_is_handed_back_as_the_record_to_write() -> None:
    rows = route(
        [{"key": b"K", "value": b"a", "offset": 5, "headers": [("h", b"1")]}], lambda m: m.value.upper()
    )
    assert rows == [
        {
            "route": Route.OUTPUT,
            "key": b"K",
            "value": b"A",
            "headers": [{"key": "h", "value": b"1"}],
            "reason": None,
            "lateness_ms": None,
            "dlq": {},
        }
    ]


def test_the_key_and_unchanged_headers_are_the_input_arrays_themselves() -> None:
    source = batch([{"headers": [("h", b"1")]}, {}])
    out = route_batch(source, SETTINGS, lambda m: m.value)
    for name in ("key", "headers"):
        assert addresses(out.column(name)) == addresses(source.column(name))
    failed = route_batch(source, SETTINGS, fail)
    assert addresses(failed.column("headers")) != addresses(source.column("headers"))


def addresses(array: pa.Array) -> list[int | None]:
    return [None if b is None else b.address for b in array.buffers()]


def test_failures_keep_their_value_and_other_headers_and_get_this_attempts_dlq_headers() -> None:
    old = [("trace", b"t1"), ("dlq.attempt", b"1"), ("dlq.error.class", b"Old"), ("dlq.deliver.at", b"5")]
    rows = route(
        [
            {"value": b"ok", "topic": SETTINGS.retry_topic, "headers": old},
            {"value": b"bad", "topic": SETTINGS.retry_topic, "headers": old},
        ],
        lambda m: m.value if m.value == b"ok" else fail(m),
    )
    success, failure = rows
    assert (success["route"], success["value"], success["headers"]) == (
        Route.OUTPUT,
        b"ok",
        [{"key": "trace", "value": b"t1"}],
    )  # no stale dlq.* header
    assert (failure["route"], failure["value"]) == (Route.RETRY, b"bad")
    names = [h["key"] for h in failure["headers"]]
    assert names[0] == "trace"
    assert names.count("dlq.attempt") == 1
    assert failure["dlq"]["dlq.attempt"] == "2"
    assert failure["dlq"]["dlq.error.class"] == "ConnectionError"


def test_a_slice_of_a_batch_is_routed_by_its_own_rows_only() -> None:
    # release_when_due hands routing slices, whose header column keeps the parent's entries.
    old = [("dlq.attempt", b"1"), ("dlq.deliver.at", b"5"), ("trace", b"t")]
    whole = batch(
        [
            {"value": b"a", "topic": SETTINGS.retry_topic, "headers": old},
            {"value": b"b", "topic": SETTINGS.retry_topic, "headers": old},
            {"value": b"c", "headers": [("h", b"1")]},
            {"value": b"d", "topic": SETTINGS.retry_topic, "headers": old},
        ]
    )
    for start, length in ((1, 2), (2, 1), (3, 1), (0, 1)):
        part = whole.slice(start, length)
        rows = route_batch(
            part, SETTINGS, lambda m: m.value if m.value != b"b" else fail(m), now_ms=lambda: NOW
        ).to_pylist()
        assert [r["key"] for r in rows] == [b"k"] * length
        for row, source in zip(rows, part.to_pylist(), strict=True):
            kept = [h for h in source["headers"] if not h["key"].startswith("dlq.")]
            assert row["headers"][: len(kept)] == kept
            if row["route"] == Route.OUTPUT:
                assert (row["value"], row["headers"]) == (source["value"], kept)
            else:
                assert row["value"] == b"b"
                assert {"key": "dlq.attempt", "value": b"2"} in row["headers"]


def test_null_headers_are_written_as_none() -> None:
    source = batch([{}, {}])
    column = pa.array([None, [{"key": "h", "value": b"1"}]], source.schema.field("headers").type)
    source = source.set_column(2, "headers", column)
    rows = route_batch(source, SETTINGS, fail, now_ms=lambda: NOW).to_pylist()
    assert [r["route"] for r in rows] == [Route.RETRY, Route.RETRY]
    assert rows[0]["headers"][0]["key"] == "dlq.original.topic"
    assert [h["key"] for h in rows[1]["headers"]][:2] == ["h", "dlq.original.topic"]


def test_message_fields_reach_the_processor() -> None:
    seen: list[Message] = []
    route(
        [{"key": b"K", "value": b"V", "headers": [("h", b"1"), ("h", b"2")], "partition": 2, "offset": 9}],
        lambda m: seen.append(m),
    )
    (message,) = seen
    assert (message.key, message.value, message.topic, message.partition, message.offset) == (
        b"K",
        b"V",
        "orders",
        2,
        9,
    )
    assert message.headers == {"h": b"1"}  # the first of repeated keys
    assert message.timestamp == 1_700_000_000_000
    assert message.attempt == 0


def test_a_first_failure_goes_to_retry_with_every_header() -> None:
    (row,) = route([{"value": b"x", "partition": 1, "offset": 42}], fail)
    assert row["route"] == Route.RETRY
    assert row["dlq"] == {
        "dlq.original.topic": "orders",
        "dlq.original.partition": "1",
        "dlq.original.offset": "42",
        "dlq.original.timestamp": "1700000000000",
        "dlq.first.failure.at": str(NOW),
        "dlq.attempt": "1",
        "dlq.error.class": "ConnectionError",
        "dlq.error.message": "down",
        "dlq.policy": "payments/orders-billing",
        "dlq.subscription": "billing",
        "dlq.failed.at": str(NOW),
        "dlq.deliver.at": str(NOW + 1000),
    }


def test_a_retry_record_keeps_its_origin_and_counts_attempts() -> None:
    carried = [
        ("dlq.original.topic", b"orders"),
        ("dlq.original.partition", b"3"),
        ("dlq.original.offset", b"7"),
        ("dlq.original.timestamp", b"1"),
        ("dlq.first.failure.at", b"100"),
        ("dlq.attempt", b"2"),
        ("dlq.deliver.at", b"5"),
    ]
    assert attempt_seen([{"topic": SETTINGS.retry_topic, "headers": carried}]) == 2
    (row,) = route([{"topic": SETTINGS.retry_topic, "offset": 99, "headers": carried}], fail)
    assert row["route"] == Route.DEAD
    assert row["lateness_ms"] == NOW - 5
    assert row["dlq"]["dlq.reason"] == "exhausted"
    assert row["dlq"]["dlq.attempt"] == "3"
    assert row["dlq"]["dlq.original.offset"] == "7"
    assert row["dlq"]["dlq.first.failure.at"] == "100"
    assert row["dlq"]["team"] == "payments"


@pytest.mark.parametrize(
    ("forged", "attempt"),
    [
        pytest.param(b"abc", 0, id="not-a-number"),
        pytest.param(b"-5", 0, id="negative"),
        pytest.param(b"99999999999999999999", 1_000_000, id="huge-clamped"),
        pytest.param(b"\xff\xfe", 0, id="not-utf8"),
    ],
)
def test_forged_attempt_headers_on_retry_records_are_bounded(forged: bytes, attempt: int) -> None:
    assert attempt_seen([{"topic": SETTINGS.retry_topic, "headers": [("dlq.attempt", forged)]}]) == attempt


def test_attempt_headers_on_source_records_are_ignored() -> None:
    assert attempt_seen([{"headers": [("dlq.attempt", b"5")]}]) == 0
    (row,) = route([{"headers": [("dlq.attempt", b"5")]}], fail)
    assert row["route"] == Route.RETRY
    assert row["dlq"]["dlq.attempt"] == "1"


def test_retry_delay_from_the_processor_sets_deliver_at() -> None:
    (row,) = route([{}], lambda m: (_ for _ in ()).throw(Retry(delay="1m")))
    assert row["dlq"]["dlq.deliver.at"] == str(NOW + 60_000)


def test_terminate_and_listed_errors_skip_retries() -> None:
    rows = route(
        [{"value": b"t"}, {"value": b"n"}],
        lambda m: (_ for _ in ()).throw(Terminate("t") if m.value == b"t" else KeyError("n")),
    )
    assert [(r["route"], r["dlq"]["dlq.reason"]) for r in rows] == [
        (Route.DEAD, "terminated"),
        (Route.DEAD, "non-retryable"),
    ]


def test_stop_strategy_raises_naming_the_message() -> None:
    settings = settings_for({"spec.deadLetter.strategy": "stop"})
    with pytest.raises(EngineError) as stopped:
        route([{"offset": 3, "partition": 1}], lambda m: (_ for _ in ()).throw(Terminate("bad")), settings)
    assert stopped.value.failure == Failure(
        Ending.STOP_STRATEGY,
        "strategy stop: message orders[1]@3 failed (terminated): dlq_engine.model.processor_api.Terminate: bad",
    )
    assert stopped.value.failure.message == (
        "dlq-engine: stopped: DLQ-STOP: strategy stop: message orders[1]@3 failed (terminated): "
        "dlq_engine.model.processor_api.Terminate: bad"
    )


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
    [
        pytest.param(b"99999999999999999999999", id="beyond-int64"),
        pytest.param(b"-5", id="negative"),
        pytest.param(b"soon", id="not-a-number"),
        pytest.param(b"\xff", id="not-utf8"),
    ],
)
def test_an_unreadable_deliver_at_on_a_retry_record_gives_no_lateness(deliver_at: bytes) -> None:
    (row,) = route(
        [{"topic": SETTINGS.retry_topic, "headers": [("dlq.deliver.at", deliver_at)]}], lambda m: None
    )
    assert (row["route"], row["lateness_ms"]) == (Route.ACK, None)


def test_a_huge_explicit_retry_delay_is_held_to_a_representable_time() -> None:
    (row,) = route([{}], lambda m: (_ for _ in ()).throw(Retry(delay=1e30)))
    assert row["dlq"]["dlq.deliver.at"] == str(MAX_DELIVER_AT)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        pytest.param(
            None,
            "batch processor returned NoneType; return a list with one result or exception per message",
            id="none",
        ),
        pytest.param(
            {"a": 1},
            "batch processor returned dict; return a list with one result or exception per message",
            id="dict",
        ),
        pytest.param(
            b"ab",
            "batch processor returned bytes; return a list with one result or exception per message",
            id="bytes",
        ),
    ],
)
def test_a_batch_processor_that_returns_no_list_fails_every_message(returned: object, message: str) -> None:
    settings = dataclasses.replace(SETTINGS, mode="batch")
    rows = route([{}, {}], lambda ms: returned, settings)
    assert [(r["route"], r["dlq"]["dlq.error.message"]) for r in rows] == [(Route.RETRY, message)] * 2


def test_a_batch_processor_raising_system_exit_fails_every_message_and_unpublishable_items_fail_alone() -> (
    None
):
    settings = dataclasses.replace(SETTINGS, mode="batch")

    def exits(messages: list[Message]) -> list[object]:
        raise SystemExit(1)

    rows = route([{}, {}], exits, settings)
    assert [(r["route"], r["dlq"]["dlq.error.class"]) for r in rows] == [(Route.RETRY, "SystemExit")] * 2
    rows = route([{}, {}, {}], lambda ms: ["\udcff", {"x": float("inf")}, "fine"], settings)
    assert [r["route"] for r in rows] == [Route.RETRY, Route.RETRY, Route.OUTPUT]
    assert rows[0]["dlq"]["dlq.error.class"] == "dlq_engine.routing.outcomes.UnsupportedResult"


# --- retry.rules ---------------------------------------------------------------------------------

RULES = settings_for(
    {
        "spec.retry.rules": [
            {
                "errors": ["TimeoutError"],
                "maxRedeliverCount": 5,
                "backoff": {"type": "fixed", "delay": "30s"},
            },
            {
                "errors": ["ConnectionError", "OSError"],
                "maxRedeliverCount": 0,
                "backoff": {"type": "fixed", "delay": "1ms"},
            },
        ]
    }
)


def raising(error: BaseException) -> Callable[[Message], Any]:
    def process(message: Message) -> Any:
        raise error

    return process


def retried(attempt: int) -> dict[str, Any]:
    return {"topic": SETTINGS.retry_topic, "headers": [("dlq.attempt", str(attempt).encode())]}


def test_a_matched_rule_sets_the_limit_the_backoff_and_names_itself() -> None:
    [row] = route([retried(3)], raising(TimeoutError("slow")), RULES)
    assert row["route"] == Route.RETRY  # the rule allows 5, the policy 2
    assert row["dlq"]["dlq.rule"] == "retry.rules[0]"
    assert int(row["dlq"]["dlq.deliver.at"]) == NOW + 30_000

    [row] = route([retried(5)], raising(TimeoutError("slow")), RULES)
    assert (row["route"], row["reason"]) == (Route.DEAD, "exhausted")
    assert row["dlq"]["dlq.rule"] == "retry.rules[0]"


def test_first_rule_wins_by_class_or_base_class() -> None:
    # ConnectionRefusedError is a ConnectionError (rule 1, limit 0): dead at once.
    [row] = route([{}], raising(ConnectionRefusedError("down")), RULES)
    assert (row["route"], row["reason"], row["dlq"]["dlq.rule"]) == (
        Route.DEAD,
        "exhausted",
        "retry.rules[1]",
    )


def test_a_failure_no_rule_names_gets_the_policy_s_settings_and_no_rule_header() -> None:
    [row] = route([retried(1)], raising(ValueError("x")), RULES)
    assert row["route"] == Route.RETRY
    assert "dlq.rule" not in row["dlq"]
    assert int(row["dlq"]["dlq.deliver.at"]) == NOW + 1000
    [row] = route([retried(2)], raising(ValueError("x")), RULES)
    assert row["route"] == Route.DEAD


def test_an_explicit_retry_delay_still_wins_over_a_rule_s_backoff() -> None:
    [row] = route(
        [{}],
        raising(Retry("later", delay="2s")),
        settings_for(
            {
                "spec.retry.rules": [
                    {
                        "errors": ["Retry"],
                        "maxRedeliverCount": 5,
                        "backoff": {"type": "fixed", "delay": "30s"},
                    }
                ]
            }
        ),
    )
    assert int(row["dlq"]["dlq.deliver.at"]) == NOW + 2000


def test_non_retryable_and_terminate_are_never_matched_by_a_rule() -> None:
    # No policy says this (the parser refuses a class both non-retryable and in a rule), but
    # routing does not rely on that.
    rule = RuleLimits(
        frozenset({"KeyError", "Terminate"}), max_redeliver=5, backoff=BackoffSpec(), budget_ms=0
    )
    settings = dataclasses.replace(
        SETTINGS, classifier=dataclasses.replace(SETTINGS.classifier, rules=(rule,))
    )
    [row] = route([{}], raising(KeyError("k")), settings)
    assert (row["route"], row["reason"]) == (Route.DEAD, "non-retryable")
    assert "dlq.rule" not in row["dlq"]
    [row] = route([{}], raising(Terminate("no")), settings)
    assert (row["route"], row["reason"]) == (Route.DEAD, "terminated")


# ---------------------------------------------------------------------------------------------
# source.ordering: key

ORDERED = settings_for(KEYED)


def test_ordered_a_keys_later_messages_are_parked_unprocessed_once_one_goes_to_retry() -> None:
    seen: list[bytes] = []

    def first_a_fails(message: Message) -> Any:
        seen.append(message.value)
        if message.value == b"a0":
            raise ConnectionError("down")
        return message.value

    rows = [
        {"key": b"a", "value": b"a0", "offset": 10},
        {"key": b"a", "value": b"a1", "offset": 11},
        {"key": b"b", "value": b"b0", "offset": 12},
        {"key": None, "value": b"n0", "offset": 13},
        {"key": b"a", "value": b"a2", "offset": 14},
    ]
    out = route_batch(batch(rows), ORDERED, first_a_fails, now_ms=lambda: NOW).to_pylist()
    assert seen == [b"a0", b"b0", b"n0"]
    assert [r["route"] for r in out] == [Route.RETRY, Route.PARKED, Route.OUTPUT, Route.OUTPUT, Route.PARKED]
    parked = {h["key"]: h["value"] for h in out[1]["headers"]}
    assert parked["dlq.control"] == b"park"
    assert (parked["dlq.original.topic"], parked["dlq.original.offset"]) == (b"orders", b"11")
    assert out[1]["value"] == b"a1"


def test_ordered_a_done_retry_writes_a_release_naming_its_source_position() -> None:
    retry = {
        "key": b"a",
        "value": b"a0",
        "topic": SETTINGS.retry_topic,
        "offset": 3,
        "headers": [("dlq.attempt", b"1"), ("dlq.original.partition", b"1"), ("dlq.original.offset", b"10")],
    }
    out = route_batch(batch([retry]), ORDERED, lambda m: m.value, now_ms=lambda: NOW).to_pylist()
    assert [(r["route"], r["key"], r["reason"], r["value"]) for r in out] == [
        (Route.OUTPUT, b"a", None, b"a0"),
        (Route.CONTROL, b"a", "release", None),
    ]
    assert {h["key"]: h["value"] for h in out[1]["headers"]} == {
        "dlq.control": b"release",
        "dlq.original.partition": b"1",
        "dlq.original.offset": b"10",
    }


def test_ordered_block_writes_a_block_record_and_parks_the_rest_of_the_key() -> None:
    settings = settings_for({**KEYED, "spec.ordering.onDeadLetter": "block"})
    rows = [{"key": b"a", "value": b"x", "offset": 4}, {"key": b"a", "value": b"y", "offset": 5}]

    def poison_x(message: Message) -> Any:
        if message.value == b"x":
            raise Terminate("poison")
        return message.value

    out = route_batch(batch(rows), settings, poison_x, now_ms=lambda: NOW).to_pylist()
    assert [(r["route"], r["reason"]) for r in out] == [
        (Route.DEAD, "terminated"),
        (Route.PARKED, None),
        (Route.CONTROL, "block"),
    ]
    counts = json.loads(out[0]["stats"])["counts"]
    assert {k: v for k, v in counts.items() if v} == {
        "total": 1,
        "dead": 1,
        "dead_terminated": 1,
        "parked": 1,
        "blocked": 1,
    }


def test_ordered_a_message_past_a_bound_is_dead_lettered_unprocessed_or_stops() -> None:
    source = batch([{"key": b"a", "value": b"v", "offset": 7}])
    noted = source.append_column("order_note", pa.array(["more than maxHeldPerKey (3)"], pa.string()))
    out = route_batch(noted, ORDERED, fail, now_ms=lambda: NOW).to_pylist()
    assert [(r["route"], r["reason"]) for r in out] == [(Route.DEAD, "ordering-overflow")]
    headers = {h["key"]: h["value"] for h in out[0]["headers"]}
    assert headers["dlq.error.class"] == b"OrderingOverflow"
    with pytest.raises(EngineError, match=r"DLQ-STOP: ordering\.onOverflow stop: .*maxHeldPerKey"):
        route_batch(
            noted, settings_for({**KEYED, "spec.ordering.onOverflow": "stop"}), fail, now_ms=lambda: NOW
        )


# --- mode: arrow ---------------------------------------------------------------------------------

ARROW = dataclasses.replace(SETTINGS, mode="arrow")


def test_arrow_mode_hands_over_the_batch_s_own_columns_once_and_writes_the_returned_array() -> None:
    source = batch(
        [
            {"key": b"K", "value": b"a", "offset": 5, "partition": 1, "headers": [("h", b"1")]},
            {"value": b"b", "topic": SETTINGS.retry_topic, "headers": [("dlq.attempt", b"1")]},
        ]
    )
    seen: list[pa.RecordBatch] = []

    def upper(given: pa.RecordBatch) -> pa.Array:
        seen.append(given)
        return pa.compute.utf8_upper(given.column("value").cast(pa.string()))

    out = route_batch(source, ARROW, upper, now_ms=lambda: NOW)
    (given,) = seen
    assert given.schema.names == [
        "key",
        "value",
        "headers",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "attempt",
    ]
    assert given.column("timestamp").to_pylist() == [1_700_000_000_000] * 2  # epoch ms, as Message
    assert given.column("attempt").to_pylist() == [0, 1]
    for name in ("key", "value", "headers"):
        assert addresses(given.column(name)) == addresses(source.column(name))
    rows = out.to_pylist()
    assert [(r["route"], r["value"]) for r in rows] == [(Route.OUTPUT, b"A"), (Route.OUTPUT, b"B")]
    assert rows[0]["headers"] == [{"key": "h", "value": b"1"}]
    assert rows[1]["headers"] == []  # the stale dlq.* header dropped, as in every mode


def test_arrow_mode_matches_message_mode_row_for_row_on_failures() -> None:
    rows = [
        {"value": b"ok"},
        {"value": b"none"},
        {"value": b"retry", "headers": [("trace", b"t")]},
        {"value": b"term"},
        {"value": b"key-error"},
        {"value": b"gone", "topic": SETTINGS.retry_topic, "headers": [("dlq.attempt", b"2")]},
    ]
    errors = {
        b"retry": ConnectionError("down"),
        b"term": Terminate("no"),
        b"key-error": KeyError("k"),
        b"gone": ConnectionError("still down"),
    }

    def one(message: Message) -> Any:
        if message.value in errors:
            raise errors[message.value]
        return None if message.value == b"none" else message.value

    def columns(given: pa.RecordBatch) -> tuple[pa.Array, dict[int, BaseException]]:
        values = given.column("value").to_pylist()
        failed = {i: errors[v] for i, v in enumerate(values) if v in errors}
        return pa.array([None if v == b"none" else v for v in values], pa.binary()), failed

    expected = route(rows, one)
    got = route(rows, columns, ARROW)
    assert [r["route"] for r in got] == [
        Route.OUTPUT,
        Route.ACK,
        Route.RETRY,
        Route.DEAD,
        Route.DEAD,
        Route.DEAD,
    ]
    for mine, theirs in zip(got, expected, strict=True):
        for header in ("dlq.error.stacktrace",):  # raised in message mode, not in arrow mode
            mine["dlq"].pop(header, None)
            theirs["dlq"].pop(header, None)
        mine["headers"] = [h for h in mine["headers"] or [] if h["key"] != "dlq.error.stacktrace"] or None
        theirs["headers"] = [h for h in theirs["headers"] or [] if h["key"] != "dlq.error.stacktrace"] or None
        assert mine == theirs


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        pytest.param(
            [b"a", b"b"],
            "arrow processor returned list; return a pyarrow array of binary or string results, one per "
            "message (null: acknowledged), or (that array, {row: exception})",
            id="list",
        ),
        pytest.param(
            pa.array([1, 2]), "arrow processor returned an array of int64; return a pyarrow", id="ints"
        ),
        pytest.param(pa.array([b"a"]), "arrow processor returned 1 results for 2 messages", id="short"),
        pytest.param(
            (pa.array([b"a", b"b"]), {5: ValueError()}),
            "arrow processor returned the error entry 5: ValueError; rows are 0..1",
            id="row-out-of-range",
        ),
        pytest.param(
            (pa.array([b"a", b"b"]), {0: "bad"}),
            "arrow processor returned the error entry 0: str; rows are 0..1",
            id="not-an-exception",
        ),
    ],
)
def test_an_arrow_processor_answer_that_cannot_be_written_fails_every_message(
    returned: object, message: str
) -> None:
    rows = route([{}, {}], lambda given: returned, ARROW)
    assert [r["route"] for r in rows] == [Route.RETRY] * 2
    assert all(r["dlq"]["dlq.error.message"].startswith(message) for r in rows)
    assert rows[0]["dlq"]["dlq.error.class"] == "dlq_engine.routing.outcomes.UnsupportedResult"


def test_an_arrow_processor_raising_fails_every_message_and_strings_and_chunks_are_written() -> None:
    def exits(given: pa.RecordBatch) -> pa.Array:
        raise SystemExit(1)

    rows = route([{}, {}], exits, ARROW)
    assert [(r["route"], r["dlq"]["dlq.error.class"]) for r in rows] == [(Route.RETRY, "SystemExit")] * 2
    chunked = pa.chunked_array([pa.array(["x"]), pa.array([None], pa.string())])
    rows = route([{}, {}], lambda given: chunked, ARROW)
    assert [(r["route"], r["value"]) for r in rows] == [(Route.OUTPUT, b"x"), (Route.ACK, None)]


def test_arrow_mode_with_ordering_parks_a_key_behind_its_retry() -> None:
    settings = dataclasses.replace(ORDERED, mode="arrow")
    rows = [
        {"key": b"a", "value": b"1", "offset": 1},
        {"key": b"a", "value": b"2", "offset": 2},
        {"key": b"b", "value": b"3", "offset": 3},
    ]

    def first_fails(given: pa.RecordBatch) -> tuple[pa.Array, dict[int, BaseException]]:
        return given.column("value"), {0: ConnectionError("down")}

    out = route_batch(batch(rows), settings, first_fails, now_ms=lambda: NOW).to_pylist()
    assert [r["route"] for r in out] == [Route.RETRY, Route.PARKED, Route.OUTPUT]
