"""``source.ordering: key`` in one routing task: which rows wait behind their key, and the
control records the others write."""

from __future__ import annotations

import pytest

from dlq_engine.routing import headers as h
from dlq_engine.routing.key_order import KeyHold, control, park_and_release
from dlq_engine.routing.outcomes import ACKNOWLEDGE, PUBLISH, Decision, Route

RETRY = Decision(Route.RETRY, deliver_at=1, holds_key=True)
BLOCKED = Decision(Route.DEAD, "terminated", holds_key=True)
SKIPPED = Decision(Route.DEAD, "terminated")


def test_a_retry_parks_the_later_rows_of_its_key_only() -> None:
    keys = [b"a", b"b", b"a", None, b"a", b"b"]
    decisions = {0: RETRY}
    held: set[bytes] = set()
    parked, controls = park_and_release(keys, lambda i: decisions.get(i, PUBLISH), set(), held)
    assert (parked, controls, held) == ([2, 4], [], {b"a"})


def test_keys_held_by_an_earlier_batch_of_the_task_stay_held() -> None:
    parked, _ = park_and_release([b"a", b"b"], lambda i: ACKNOWLEDGE, set(), {b"a"})
    assert parked == [0]


@pytest.mark.parametrize(
    ("decision", "retried", "expected"),
    [
        pytest.param(RETRY, True, None, id="a-retry-stays-the-head"),
        pytest.param(BLOCKED, False, h.CONTROL_BLOCK, id="block-under-on-dead-letter-block"),
        pytest.param(SKIPPED, True, h.CONTROL_RELEASE, id="a-retried-dead-letter-releases"),
        pytest.param(PUBLISH, True, h.CONTROL_RELEASE, id="a-retried-success-releases"),
        pytest.param(PUBLISH, False, None, id="a-source-record-has-nothing-to-release"),
    ],
)
def test_the_control_a_decision_writes(decision: Decision, retried: bool, expected: str | None) -> None:
    assert control(decision, retried=retried) == expected


def test_a_blocked_key_holds_and_writes_block_a_null_key_never_holds() -> None:
    hold = KeyHold(set())
    hold.after(None, BLOCKED)
    hold.after(b"k", BLOCKED)
    assert (hold.parks(None), hold.parks(b"k"), hold.held) == (False, True, {b"k"})
    parked, controls = park_and_release([b"k", b"k"], lambda i: BLOCKED, {0}, set())
    assert (parked, controls) == ([1], [(0, h.CONTROL_BLOCK)])
