"""Pulsar message ids in the engine: packed into the ``offset`` column in id order, printed as
the Java client prints them, read back from its letters; and the batch limit of the Pulsar data
source, which must make progress across ledgers."""

from __future__ import annotations

import pytest

from dlq_engine.job.pulsar_source import _limited, partition_index
from dlq_engine.routing import headers as h


def test_packed_offsets_order_as_message_ids_and_print_as_the_java_client() -> None:
    ids = [(3, 0, -1), (3, 0, 5), (3, 1, -1), (3, 49_999, 999), (4, 0, -1), (2**31 - 1, 2**20 - 1, 4095)]
    packed = [h.pulsar_offset(*i) for i in ids]
    assert packed == sorted(packed)
    assert len(set(packed)) == len(packed)
    assert h.pulsar_message_id(-1, h.pulsar_offset(7, 3, -1)) == "7:3:-1"
    assert h.pulsar_message_id(2, h.pulsar_offset(7, 3, 4)) == "7:3:2:4"
    assert h.parse_pulsar_message_id("7:3:2:4") == (2, h.pulsar_offset(7, 3, 4))
    assert h.parse_pulsar_message_id("7:3:-1") == (-1, h.pulsar_offset(7, 3, -1))
    assert h.parse_pulsar_message_id("0:12") is None
    assert h.parse_pulsar_message_id("a:b:c") is None


def test_a_message_id_out_of_range_is_named() -> None:
    with pytest.raises(ValueError, match="2147483648:0:0 does not fit"):
        h.pulsar_offset(2**31, 0, 0)


def test_real_topic_is_the_full_name_of_the_partition() -> None:
    assert h.pulsar_real_topic("orders", 1) == "persistent://public/default/orders-partition-1"
    assert h.pulsar_real_topic("t/ns/orders", -1) == "persistent://t/ns/orders"
    kept = "persistent://public/default/orders-partition-0"
    assert h.pulsar_real_topic(kept, 0) == kept


def test_pulsar_headers_carry_real_message_ids() -> None:
    written = dict(
        h.failure_headers(
            origin={
                h.ORIGINAL_TOPIC: "orders",
                h.ORIGINAL_PARTITION: "1",
                h.ORIGINAL_OFFSET: str(h.pulsar_offset(12, 7, -1)),
            },
            attempt=2,
            error_class="E",
            error_message="m",
            stacktrace=None,
            policy="ns/p",
            subscription="s",
            failed_at=1_000,
            deliver_at=3_000,
            profiles=("spark-dlq", "pulsar"),
            retry_topic="orders-s-RETRY",
            pulsar_ids=True,
        )
    )
    assert written["REAL_TOPIC"] == b"persistent://public/default/orders-partition-1"
    assert written["ORIGIN_MESSAGE_ID"] == written["ORIGIN_MESSAGE_IDY_TIME"] == b"12:7:1"
    assert written["RECONSUMETIMES"] == b"2"
    assert written["DELAY_TIME"] == b"2000"


def test_partition_index_of_a_partition_topic() -> None:
    assert partition_index("persistent://public/default/orders-partition-3") == 3
    assert partition_index("persistent://public/default/orders") == -1


def test_the_batch_limit_moves_on_within_and_across_ledgers() -> None:
    # Within a ledger: at most the share past the last position.
    ends = {"p0": [5, 1000], "p1": [5, 10]}
    nexts = {("p0", (5, 100)): (5, 101), ("p1", (5, 8)): (5, 9)}
    capped = _limited({"p0": [5, 100], "p1": [5, 8]}, ends, 100, lambda name, at: nexts[(name, at)])
    assert capped == {"p0": [5, 150], "p1": [5, 10]}
    # Past a closed ledger's last entry: the next message's ledger, from that message on.
    capped = _limited({"p0": [5, 49_999]}, {"p0": [11, 40]}, 100, lambda name, at: (9, 0))
    assert capped == {"p0": [9, 99]}
    # From the earliest: from the first message.
    capped = _limited({"p0": [-1, -1]}, {"p0": [3, 500]}, 100, lambda name, at: (3, 0))
    assert capped == {"p0": [3, 99]}
