"""The resync's reading of a kopf peering: only the replica kopf would let work resyncs."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from spark_dlq_operator.resync import peering_allows

NOW = datetime.datetime(2026, 11, 22, 1, 0, 0, tzinfo=datetime.UTC)


def peer(priority: int, *, seconds_ago: int = 5, lifetime: int = 60) -> dict[str, Any]:
    seen = NOW - datetime.timedelta(seconds=seconds_ago)
    return {"priority": priority, "lastseen": seen.isoformat(), "lifetime": lifetime}


@pytest.mark.parametrize(
    ("peers", "allowed"),
    [
        pytest.param({"me": peer(10)}, True, id="alone"),
        pytest.param({"me": peer(10), "other": peer(5)}, True, id="highest"),
        pytest.param({"me": peer(10), "other": peer(20)}, False, id="a-higher-peer"),
        pytest.param({"me": peer(10), "other": peer(10)}, False, id="same-priority"),
        pytest.param({"me": peer(10), "other": peer(20, seconds_ago=120)}, True, id="a-dead-higher-peer"),
        pytest.param({}, True, id="not-yet-registered"),
    ],
)
def test_peering_allows(peers: dict[str, Any], allowed: bool) -> None:
    assert peering_allows(peers, priority=10, now=NOW) is allowed
