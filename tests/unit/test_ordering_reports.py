"""The driver's view of the ordering stage: the latest report of each group of keys."""

from __future__ import annotations

import json

from dlq_engine.job.heartbeat import Liveness
from dlq_engine.job.ordering import HeldKeys, OrderingReports


def report(group: int, seq: int, held: int, blocked: int, keys: tuple[bytes, ...] = ()) -> dict[str, object]:
    return {"group": group, "seq": seq, "held": held, "blocked": blocked, "blocked_keys": list(keys)}


def test_nothing_reported_is_nothing_held() -> None:
    assert OrderingReports().state() == HeldKeys(held=0, blocked=0, blocked_sample=())


def test_each_groups_latest_report_counts_whatever_order_they_come_in() -> None:
    reports = OrderingReports()
    reports.add([report(3, 8, 5, 1, (b"b",)), report(3, 7, 50, 9, (b"x",)), report(0, 2, 1, 1, (b"a",))])
    assert reports.state() == HeldKeys(held=6, blocked=2, blocked_sample=("a", "b"))
    reports.add([report(3, 9, 0, 0)])  # b released
    assert reports.state() == HeldKeys(held=1, blocked=1, blocked_sample=("a",))


def test_the_sample_is_bounded_and_shows_undecodable_keys() -> None:
    reports = OrderingReports()
    reports.add([report(g, 1, 1, 1, (f"k{g:02}".encode(),)) for g in range(12)])
    reports.add([report(12, 1, 1, 1, (b"\xff" + b"z" * 300,))])
    state = reports.state()
    assert (state.held, state.blocked) == (13, 13)
    assert state.blocked_sample == tuple(f"k{g:02}" for g in range(10))
    reports = OrderingReports()
    reports.add([report(0, 1, 0, 1, (b"\xff" + b"z" * 300,))])
    assert reports.state().blocked_sample == ("\ufffd" + "z" * 99,)


def test_the_heartbeat_carries_the_ordering_report() -> None:
    held = HeldKeys(held=2, blocked=1, blocked_sample=("b",))
    alive = Liveness(query_active=True, last_progress=1_795_000_000.0, batch_id=3, ordering=held.document())
    assert json.loads(alive.document(1_795_000_010.0))["ordering"] == {
        "heldMessages": 2,
        "blockedKeys": 1,
        "blockedKeySample": ["b"],
    }
    without = Liveness(query_active=True, last_progress=1_795_000_000.0, batch_id=3)
    assert "ordering" not in json.loads(without.document(1_795_000_010.0))
