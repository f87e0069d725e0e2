"""The routing task's last wait: a released retry is handed to the processor only once due."""

from __future__ import annotations

import pyarrow as pa

from dlq_engine.job.delay import lookahead, release_when_due


class FakeTime:
    def __init__(self, now_ms: float) -> None:
        self.now = now_ms / 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds


def batch(dues: list[int | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(range(len(dues)), type=pa.int64()), pa.array(dues, type=pa.int64())],
        names=["offset", "deliver_at"],
    )


def released(batches: list[pa.RecordBatch], time: FakeTime, **kw: int) -> list[tuple[float, list[int]]]:
    """(time handed on, offsets) per slice, as a consumer sees them."""
    out = []
    for piece in release_when_due(batches, clock=time.clock, sleep=time.sleep, **kw):
        out.append((round(time.now * 1000), piece.column("offset").to_pylist()))
    return out


def test_source_batches_and_due_retries_pass_untouched() -> None:
    time = FakeTime(10_000)
    source = batch([None, None, None])
    due = batch([9_000, 10_000])
    assert released([source, due], time) == [(10_000, [0, 1, 2]), (10_000, [0, 1])]
    assert time.slept == []


def test_each_record_waits_for_its_own_due_time() -> None:
    time = FakeTime(10_000)
    result = released([batch([9_500, 10_200, 10_200, 10_700, 10_650])], time)
    # Nothing is handed on before it is due; a record a little out of order is not early.
    assert result == [(10_000, [0]), (10_200, [1, 2]), (10_700, [3, 4])]
    assert time.slept == [0.2, 0.5]


def test_a_wait_is_bounded_against_clock_skew() -> None:
    time = FakeTime(0)
    assert released([batch([60_000])], time, max_wait_ms=2_000) == [(2_000, [0])]


def test_a_batch_without_the_column_passes() -> None:
    time = FakeTime(0)
    plain = pa.RecordBatch.from_arrays([pa.array([1, 2])], names=["offset"])
    assert released([plain], time) == [(0, [1, 2])]


def test_lookahead_is_one_trigger_interval_and_the_batch_cost_within_bounds() -> None:
    assert lookahead(1_000) == 1_500
    assert lookahead(4_500) == 5_000
    assert lookahead(600_000) == 5_000
    assert lookahead(0) == 500
