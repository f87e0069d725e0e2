"""``dlq_engine.model.dead_letter``: the facts a reader decodes from a dead letter's headers (the
redrive job's columns read the same: tests/integration/engine/test_redrive.py)."""

from __future__ import annotations

from dlq_engine.model import headers as h
from dlq_engine.model.dead_letter import DeadLetter
from tests.unit.dead_letters import T0, letter


def test_a_dead_letter_reads_its_headers() -> None:
    dead = letter(7, partition=2, failed_at=T0 + 1)
    assert dead.position == "2/7"
    assert dead.failed_at == T0 + 1
    assert (dead.reason, dead.error_class, dead.error_message) == ("exhausted", "ValueError", "bad amount")
    assert dead.attempt == 4
    assert dead.original == "orders/2/17"
    assert dead.redrive_count is None
    redriven = letter(extra=((h.REDRIVE_COUNT, b"2"),))
    assert redriven.redrive_count == 2


def test_failure_time_falls_back_to_the_record_timestamp() -> None:
    assert letter(failed_at=None, timestamp=T0 + 9).failed_at == T0 + 9
    garbled = DeadLetter(0, 0, T0, None, None, ((h.FAILED_AT, b"soon"), (h.ATTEMPT, b"\xff")))
    assert garbled.failed_at == T0
    assert garbled.attempt is None
    assert garbled.reason is None
    assert garbled.original is None
