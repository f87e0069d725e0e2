"""Pulsar message ids in the engine: packed into the ``offset`` column in id order, printed as
the Java client prints them, read back from its letters. (The connector packs them in Java, the
same way: tests/integration/engine/test_pulsar_strategies.py reads an offset it packed.)"""

from __future__ import annotations

import pytest

from dlq_engine.model import pulsar_ids
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


@pytest.mark.parametrize(
    "parts", [(0, 0, 0), (7, 3, 0), (2**31 - 1, 2**20 - 1, 2**12 - 1), (12, 49_999, 999)]
)
def test_a_packed_offset_unpacks_to_its_message_id(parts: tuple[int, int, int]) -> None:
    assert h.pulsar_id_parts(h.pulsar_offset(*parts)) == parts


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


def test_entry_positions_order_as_entries_and_start_before_the_first() -> None:
    positions = [
        pulsar_ids.BEFORE_FIRST_ENTRY,
        pulsar_ids.entry_position(3, 0),
        pulsar_ids.entry_position(3, 1),
        pulsar_ids.entry_position(4, 0),
    ]
    assert positions == sorted(positions)
    assert pulsar_ids.entry_position(-1, -1) == pulsar_ids.BEFORE_FIRST_ENTRY
    # A batch's messages are after their entry's position, before the next entry's.
    assert pulsar_ids.entry_position(3, 0) <= h.pulsar_offset(3, 0, 7) < pulsar_ids.entry_position(3, 1)


@pytest.mark.parametrize(
    ("positions", "layout"),
    [
        pytest.param(
            {0: pulsar_ids.entry_position(12, 40), 1: pulsar_ids.BEFORE_FIRST_ENTRY},
            {"persistent://t/ns/dlq-partition-0": [12, 40], "persistent://t/ns/dlq-partition-1": [-1, -1]},
            id="partitioned",
        ),
        pytest.param(
            {-1: pulsar_ids.entry_position(7, 0)}, {"persistent://t/ns/dlq": [7, 0]}, id="not-partitioned"
        ),
    ],
)
def test_entry_positions_in_the_connector_s_layout_and_back(
    positions: dict[int, int], layout: dict[str, list[int]]
) -> None:
    assert pulsar_ids.entry_layout("persistent://t/ns/dlq", positions) == layout
    assert pulsar_ids.entry_positions(layout) == positions
