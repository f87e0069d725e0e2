"""deadLetter.headerProfiles: the same facts under Spring's, Connect's and Pulsar's header names
and encodings, on retry records and dead letters, replaced (never appended) on each attempt.

The names and encodings are checked against the real libraries in
tests/integration/engine/test_interop.py (Spring Kafka, Kafka Connect and Pulsar jars, the
pulsar-client wheel)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest

from dlq_engine.model import PolicyError, engine_config, parse_policy, to_spec
from dlq_engine.processing.batches import route_batch
from dlq_engine.routing import headers as h
from dlq_engine.routing.outcomes import Route
from dlq_engine.routing.settings import RoutingSettings
from tests.policy_builder import issues, policy_document
from tests.unit.test_batches import NOW, SETTINGS, batch, fail, settings_for

ALL = ("spark-dlq", "spring", "connect", "pulsar")
STACKED: dict[str, Any] = {"spec.deadLetter.includeStackTrace": True}
PROFILED = settings_for(STACKED, header_profiles=ALL)


def route(
    rows: list[dict[str, Any]], processor: Callable[..., Any], settings: RoutingSettings = SETTINGS
) -> list[dict[str, Any]]:
    """The routed rows with their headers as written (binary values left as they are)."""
    out = route_batch(batch(rows), settings, processor, now_ms=lambda: NOW, rand=lambda: 0.5)
    return [row for row in out.to_pylist()]


def by_name(row: dict[str, Any]) -> dict[str, bytes]:
    names = [entry["key"] for entry in row["headers"]]
    assert len(names) == len(set(names)), f"a header written twice: {names}"
    return {entry["key"]: entry["value"] for entry in row["headers"]}


def test_default_is_spark_dlq_and_written_at_its_default_it_leaves_the_hash() -> None:
    policy = parse_policy(policy_document({}))
    assert policy.dead_letter.header_profiles == ("spark-dlq",)
    assert to_spec(policy)["deadLetter"]["headerProfiles"] == ["spark-dlq"]
    assert "headerProfiles" not in engine_config(policy)["spec"]["deadLetter"]


def test_listed_profiles_are_kept_in_order_and_written_back() -> None:
    policy = parse_policy(
        policy_document({"spec.deadLetter.headerProfiles": ["pulsar", "spark-dlq", "spring"]})
    )
    assert policy.dead_letter.header_profiles == ("pulsar", "spark-dlq", "spring")
    assert to_spec(policy)["deadLetter"]["headerProfiles"] == ["pulsar", "spark-dlq", "spring"]
    assert RoutingSettings.from_policy(policy).header_profiles == ("pulsar", "spark-dlq", "spring")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            ["spark-dlq", "kafka-ui"],
            "spec.deadLetter.headerProfiles[1]: must be one of spark-dlq, spring, connect, pulsar, got 'kafka-ui'",
            id="unknown",
        ),
        pytest.param(
            ["spark-dlq", "spring", "spring"],
            "spec.deadLetter.headerProfiles[2]: 'spring' is listed twice",
            id="duplicate",
        ),
        pytest.param(
            ["spring"],
            "spec.deadLetter.headerProfiles: must include 'spark-dlq' (the engine, the redrive and the "
            "triage CLI read the dlq.* headers), got ['spring']",
            id="without-spark-dlq",
        ),
        pytest.param(
            "spring",
            "spec.deadLetter.headerProfiles: must be a list, got the string 'spring'",
            id="not-a-list",
        ),
    ],
)
def test_bad_profile_lists_are_refused_naming_the_entry(value: object, expected: str) -> None:
    found = issues(policy_document({"spec.deadLetter.headerProfiles": value}))
    assert expected in found, found
    with pytest.raises(PolicyError):
        parse_policy(policy_document({"spec.deadLetter.headerProfiles": value}))


def test_a_dead_letter_carries_every_profile_in_each_tool_s_encoding() -> None:
    settings = settings_for({**STACKED, "spec.retry.maxRedeliverCount": 0}, header_profiles=ALL)
    (row,) = route(
        [{"topic": "orders", "partition": 3, "offset": 2**40, "headers": [("trace", b"t")]}], fail, settings
    )
    assert row["route"] == Route.DEAD
    got = by_name(row)
    timestamp = 1_700_000_000_000
    assert got["trace"] == b"t"
    # Spring: text, except partition (4-byte int) and offset and timestamp (8-byte longs).
    assert got["kafka_dlt-original-topic"] == b"orders"
    assert got["kafka_dlt-original-partition"] == struct.pack(">i", 3) == b"\x00\x00\x00\x03"
    assert got["kafka_dlt-original-offset"] == struct.pack(">q", 2**40)
    assert got["kafka_dlt-original-timestamp"] == struct.pack(">q", timestamp)
    assert got["kafka_dlt-original-consumer-group"] == b"billing"
    assert got["kafka_dlt-exception-fqcn"] == b"ConnectionError"
    assert got["kafka_dlt-exception-message"] == b"down"
    assert b"ConnectionError" in got["kafka_dlt-exception-stacktrace"]
    assert not [name for name in got if name.startswith("retry_topic-")]  # only on retry records
    # Connect: every value text.
    assert got["__connect.errors.topic"] == b"orders"
    assert got["__connect.errors.partition"] == b"3"
    assert got["__connect.errors.offset"] == str(2**40).encode()
    assert got["__connect.errors.connector.name"] == b"payments/orders-billing"
    assert got["__connect.errors.exception.class.name"] == b"ConnectionError"
    assert got["__connect.errors.exception.message"] == b"down"
    assert got["__connect.errors.exception.stacktrace"] == got["dlq.error.stacktrace"]
    # Pulsar: properties, text.
    assert got["REAL_TOPIC"] == b"orders"
    assert got["ORIGIN_MESSAGE_IDY_TIME"] == got["ORIGIN_MESSAGE_ID"] == f"3:{2**40}".encode()
    assert got["RECONSUMETIMES"] == b"1"
    assert not {"DELAY_TIME", "RETRY_TOPIC"} & set(got)
    # The static headers still come after the dlq.* ones.
    assert got["team"] == b"payments"


def test_a_retry_record_carries_the_retry_headers_of_spring_and_pulsar() -> None:
    (row,) = route([{"topic": "orders", "partition": 1, "offset": 9}], fail, PROFILED)
    assert row["route"] == Route.RETRY
    got = by_name(row)
    assert got["retry_topic-attempts"] == struct.pack(">i", 1)
    # BigInteger.toByteArray(): NOW needs 41 bits, so six bytes.
    assert got["retry_topic-backoff-timestamp"] == (NOW + 1000).to_bytes(6, "big")
    assert got["retry_topic-original-timestamp"] == (1_700_000_000_000).to_bytes(6, "big")
    assert got["DELAY_TIME"] == b"1000"
    assert got["RETRY_TOPIC"] == b"orders-billing-RETRY"
    assert got["RECONSUMETIMES"] == b"1"


def test_each_attempt_replaces_the_profile_headers_of_the_last() -> None:
    (first,) = route([{"topic": "orders", "partition": 1, "offset": 9}], fail, PROFILED)
    carried = [(entry["key"], entry["value"]) for entry in first["headers"]]
    (second,) = route([{"topic": PROFILED.retry_topic, "offset": 0, "headers": carried}], fail, PROFILED)
    got = by_name(second)  # asserts that no name is written twice
    assert got["retry_topic-attempts"] == struct.pack(">i", 2)
    assert got["RECONSUMETIMES"] == b"2"
    # The origin is the first failure's, in every profile.
    assert got["kafka_dlt-original-offset"] == struct.pack(">q", 9)
    assert got["__connect.errors.offset"] == b"9"
    assert got["ORIGIN_MESSAGE_IDY_TIME"] == b"1:9"
    # A success drops every listed profile's headers, as it drops the dlq.* ones.
    (success,) = route([{"topic": PROFILED.retry_topic, "headers": carried}], lambda m: m.value, PROFILED)
    assert success["headers"] == []


def test_an_unlisted_profile_s_headers_are_left_alone() -> None:
    source = [("kafka_dlt-original-topic", b"upstream"), ("REAL_TOPIC", b"upstream")]
    (row,) = route([{"topic": "orders", "headers": source}], fail, SETTINGS)
    got = by_name(row)
    assert (got["kafka_dlt-original-topic"], got["REAL_TOPIC"]) == (b"upstream", b"upstream")


@pytest.mark.parametrize("value", [0, 1, 127, 128, 255, 256, 2**31, NOW, -1, -129])
def test_java_big_integer_matches_the_minimal_two_s_complement(value: int) -> None:
    encoded = h.java_big_integer(value)
    assert int.from_bytes(encoded, "big", signed=True) == value
    # Minimal: one byte fewer would not hold the value with its sign bit.
    assert len(encoded) == 1 or int.from_bytes(encoded[1:], "big", signed=True) != value


def test_forged_origin_headers_give_zero_in_spring_s_binary_encoding_only() -> None:
    carried = [
        ("dlq.original.topic", b"orders"),
        ("dlq.original.partition", b"99999999999"),
        ("dlq.original.offset", b"x"),
        ("dlq.attempt", b"1"),
    ]
    (row,) = route([{"topic": PROFILED.retry_topic, "headers": carried}], fail, PROFILED)
    got = by_name(row)
    assert got["kafka_dlt-original-partition"] == struct.pack(">i", 0)
    assert got["kafka_dlt-original-offset"] == struct.pack(">q", 0)
    assert (got["dlq.original.partition"], got["__connect.errors.offset"]) == (b"99999999999", b"x")


def test_readers_take_ours_then_spring_s_then_connect_s() -> None:
    spring = [
        ("kafka_dlt-original-topic", b"orders"),
        ("kafka_dlt-original-partition", struct.pack(">i", 2)),
        ("kafka_dlt-original-offset", struct.pack(">q", 41)),
        ("kafka_dlt-exception-fqcn", b"org.springframework.kafka.listener.ListenerExecutionFailedException"),
        ("kafka_dlt-exception-cause-fqcn", b"java.lang.IllegalStateException"),
    ]
    connect = [("__connect.errors.topic", b"payments"), ("__connect.errors.offset", b"7")]
    assert h.read_text(spring, h.READ_ORIGINAL_TOPIC) == "orders"
    assert h.read_number(spring, h.READ_ORIGINAL_PARTITION) == 2
    assert h.read_number(spring, h.READ_ORIGINAL_OFFSET) == 41
    assert h.read_text(spring, h.READ_ERROR_CLASS) == "java.lang.IllegalStateException"  # the cause
    assert h.read_text(connect, h.READ_ORIGINAL_TOPIC) == "payments"
    assert h.read_number(connect, h.READ_ORIGINAL_OFFSET) == 7
    assert h.read_number(connect, h.READ_ORIGINAL_PARTITION) is None
    ours_first = [("dlq.original.offset", b"3"), *spring]
    assert h.read_number(ours_first, h.READ_ORIGINAL_OFFSET) == 3
    # A Spring binary header of the wrong width is skipped, not misread.
    assert h.read_number([("kafka_dlt-original-offset", b"\x01")], h.READ_ORIGINAL_OFFSET) is None


#: What Kafka Streams' exception handlers write (KIP-1034; ExceptionHandlerUtils), beside the
#: failed record's own headers; test_interop.py reads the real library's.
STREAMS = [
    ("trace", b"t1"),
    ("__streams.errors.exception", b"org.apache.kafka.common.errors.SerializationException"),
    ("__streams.errors.message", b"Size of data received by LongDeserializer is not 8"),
    ("__streams.errors.stacktrace", b"org.apache.kafka.common.errors.SerializationException: ..."),
    ("__streams.errors.topic", b"clicks"),
    ("__streams.errors.partition", b"3"),
    ("__streams.errors.offset", b"1207"),
]
#: What a share group's broker writes (KIP-1191; ShareGroupDLQRecordHelper.headers), exactly
#: the documented headers: there is no exception class.
SHARE_GROUP = [
    ("__dlq.errors.topic", b"payments"),
    ("__dlq.errors.partition", b"1"),
    ("__dlq.errors.offset", b"88"),
    ("__dlq.errors.group", b"payment-workers"),
    ("__dlq.errors.delivery.count", b"5"),
    ("__dlq.errors.message", b"Offset delivery count exceeded the threshold."),
]


def test_readers_take_kafka_streams_and_share_group_dead_letters_too() -> None:
    assert h.read_text(STREAMS, h.READ_ORIGINAL_TOPIC) == "clicks"
    assert (
        h.read_number(STREAMS, h.READ_ORIGINAL_PARTITION),
        h.read_number(STREAMS, h.READ_ORIGINAL_OFFSET),
    ) == (
        3,
        1207,
    )
    assert h.read_text(STREAMS, h.READ_ERROR_CLASS) == "org.apache.kafka.common.errors.SerializationException"
    assert h.read_text(STREAMS, h.READ_ERROR_MESSAGE) == "Size of data received by LongDeserializer is not 8"
    assert (h.read_text(STREAMS, h.READ_ERROR_STACKTRACE) or "").startswith("org.apache.kafka")
    assert h.read_number(STREAMS, h.READ_ATTEMPT) is None

    assert h.read_text(SHARE_GROUP, h.READ_ORIGINAL_TOPIC) == "payments"
    assert h.read_number(SHARE_GROUP, h.READ_ORIGINAL_PARTITION) == 1
    assert h.read_number(SHARE_GROUP, h.READ_ORIGINAL_OFFSET) == 88
    assert h.read_text(SHARE_GROUP, h.READ_ERROR_CLASS) is None
    assert h.read_text(SHARE_GROUP, h.READ_ERROR_MESSAGE) == "Offset delivery count exceeded the threshold."
    assert h.read_number(SHARE_GROUP, h.READ_ATTEMPT) == 5
    assert h.read_text(SHARE_GROUP, h.READ_SUBSCRIPTION) == "payment-workers"


def test_a_streams_dead_letter_of_one_of_ours_keeps_our_first_origin() -> None:
    """Kafka Streams copies the failed record's headers: a record that was our dead letter keeps
    our ``dlq.original.*`` (where the message was first read) ahead of where Streams read it."""
    ours = [
        ("dlq.original.topic", b"orders"),
        ("dlq.original.offset", b"5"),
        ("dlq.original.partition", b"0"),
    ]
    assert h.read_text([*ours, *STREAMS], h.READ_ORIGINAL_TOPIC) == "orders"
    assert h.read_number([*ours, *STREAMS], h.READ_ORIGINAL_OFFSET) == 5
    # A Streams exception whose message is null leaves the header's value null: the next is read.
    assert h.read_text([("__streams.errors.message", None), *SHARE_GROUP], h.READ_ERROR_MESSAGE) == (
        "Offset delivery count exceeded the threshold."
    )
