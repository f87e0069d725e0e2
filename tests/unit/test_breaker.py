"""The breaker's state machine (routing/breaker.py) on an injected clock: when it trips, how
long it stays open, what its probes decide, and what it reports."""

from __future__ import annotations

import pytest

from dlq_engine.model.breaker import CLOSED, HALF_OPEN, OPEN
from dlq_engine.model.policy import BreakerSpec
from dlq_engine.routing.breaker import Breaker, Transition

SPEC = BreakerSpec(window=20, threshold=0.5, open_ms=10_000, probes=4)


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def opened(clock: Clock, spec: BreakerSpec = SPEC) -> Breaker:
    breaker = Breaker(spec, clock=clock)
    assert breaker.record(CLOSED, spec.window, spec.window, {"ConnectionError": spec.window}) is not None
    assert breaker.state == OPEN
    return breaker


def half_open(clock: Clock, spec: BreakerSpec = SPEC) -> Breaker:
    breaker = opened(clock, spec)
    clock.advance(spec.open_ms / 1000)
    assert breaker.tick() == Transition(HALF_OPEN, "open for 10s: letting probes through")
    return breaker


# --- closed: the trip ------------------------------------------------------------------------


def test_starts_closed_and_reports_it(clock: Clock) -> None:
    breaker = Breaker(SPEC, clock=clock)
    assert breaker.state == CLOSED
    assert breaker.report() == {
        "state": "closed",
        "since": "2027-01-15T08:00:00Z",
        "reason": "",
        "opens": 0,
        "probeAt": "",
    }


def test_trips_once_the_window_is_full_and_half_of_it_failed(clock: Clock) -> None:
    breaker = Breaker(SPEC, clock=clock)
    assert breaker.record(CLOSED, 10, 10, {"ConnectionError": 10}) is None  # 10 calls: not full
    moved = breaker.record(CLOSED, 10, 0)
    assert moved == Transition(OPEN, "10 of the last 20 processor calls failed transiently (ConnectionError)")
    assert (breaker.state, breaker.opens, breaker.since) == (OPEN, 1, clock.now)


def test_does_not_trip_below_the_threshold(clock: Clock) -> None:
    breaker = Breaker(SPEC, clock=clock)
    for _ in range(10):
        assert breaker.record(CLOSED, 20, 9) is None
    assert breaker.state == CLOSED


def test_the_window_slides_and_scales_its_oldest_batch(clock: Clock) -> None:
    """Failures that left the window no longer count; a batch half in view counts half."""
    breaker = Breaker(SPEC, clock=clock)
    assert breaker.record(CLOSED, 10, 10) is None
    assert breaker.record(CLOSED, 100, 0) is None  # the failed 10 left the window
    assert breaker.record(CLOSED, 10, 4) is None  # 4 of the last 20
    assert breaker.record(CLOSED, 10, 6) == Transition(
        OPEN, "10 of the last 20 processor calls failed transiently"
    )
    breaker = Breaker(SPEC, clock=clock)
    assert breaker.record(CLOSED, 10, 10) is None
    # 25 calls in view: half of the oldest batch's 10 failures count, 5 of 20.
    assert breaker.record(CLOSED, 15, 0) is None
    assert breaker.record(CLOSED, 5, 4) is None  # 10 calls of the first are out: 0 + 0 + 4
    assert breaker.record(CLOSED, 5, 5) is None  # 9 of 20
    assert breaker.record(CLOSED, 1, 1) is not None  # 10 of 20, the 15-call batch scaled


def test_a_big_batch_trips_alone_counting_only_the_window(clock: Clock) -> None:
    breaker = Breaker(SPEC, clock=clock)
    moved = breaker.record(CLOSED, 500, 400, {"ConnectionError": 300, "TimeoutError": 100})
    assert moved is not None
    assert moved.reason == (
        "16 of the last 20 processor calls failed transiently (ConnectionError, TimeoutError)"
    )


def test_reason_names_the_three_most_frequent_classes(clock: Clock) -> None:
    breaker = Breaker(SPEC, clock=clock)
    moved = breaker.record(CLOSED, 20, 20, {"A": 1, "B": 5, "C": 5, "D": 9})
    assert moved is not None
    assert moved.reason.endswith("(D, B, C and 1 more)")


def test_batches_with_no_calls_change_nothing(clock: Clock) -> None:
    breaker = Breaker(SPEC, clock=clock)
    assert breaker.record(CLOSED, 0, 0) is None
    assert breaker.record(CLOSED, 19, 19) is None
    assert breaker.record(CLOSED, 0, 0) is None
    assert breaker.state == CLOSED


def test_threshold_one_needs_every_call_to_fail(clock: Clock) -> None:
    spec = BreakerSpec(window=5, threshold=1.0, open_ms=1000, probes=2)
    breaker = Breaker(spec, clock=clock)
    assert breaker.record(CLOSED, 5, 4) is None
    assert breaker.record(CLOSED, 5, 5) is not None


# --- open --------------------------------------------------------------------------------------


def test_stays_open_for_open_time_then_lets_probes_through(clock: Clock) -> None:
    breaker = opened(clock)
    assert breaker.probe_at == clock.now + 10
    clock.advance(9.9)
    assert breaker.tick() is None
    assert breaker.state == OPEN
    clock.advance(0.1)
    assert breaker.tick() == Transition(HALF_OPEN, "open for 10s: letting probes through")
    assert breaker.probe_at is None


def test_while_open_batches_of_another_state_are_no_evidence(clock: Clock) -> None:
    """Batches planned while closed and committed after it opened, or a replayed batch."""
    breaker = opened(clock)
    assert breaker.record(CLOSED, 50, 50) is None
    assert breaker.record(HALF_OPEN, 50, 0) is None
    assert (breaker.state, breaker.opens) == (OPEN, 1)


def test_open_report_says_why_and_when_it_probes(clock: Clock) -> None:
    breaker = opened(clock)
    assert breaker.report() == {
        "state": "open",
        "since": "2027-01-15T08:00:00Z",
        "reason": "20 of the last 20 processor calls failed transiently (ConnectionError)",
        "opens": 1,
        "probeAt": "2027-01-15T08:00:10Z",
    }


# --- half-open: the probes ---------------------------------------------------------------------


def test_probes_that_succeed_close_it(clock: Clock) -> None:
    breaker = half_open(clock)
    assert breaker.record(HALF_OPEN, 2, 0) is None  # 2 of 4 probes so far
    assert breaker.record(HALF_OPEN, 2, 1) == Transition(CLOSED, "3 of 4 probes succeeded")
    assert breaker.report()["probeAt"] == ""
    assert breaker.reason.startswith("20 of the last 20")  # why it last opened, kept


def test_probes_that_fail_open_it_again(clock: Clock) -> None:
    breaker = half_open(clock)
    moved = breaker.record(HALF_OPEN, 4, 2, {"ConnectionError": 2})
    assert moved == Transition(OPEN, "2 of 4 probes failed transiently (ConnectionError)")
    assert (breaker.opens, breaker.probe_at) == (2, clock.now + 10)


def test_a_closed_breaker_starts_a_fresh_window(clock: Clock) -> None:
    breaker = half_open(clock)
    assert breaker.record(HALF_OPEN, 4, 0) is not None
    assert breaker.record(CLOSED, 19, 19) is None  # the window is empty again: 19 < 20
    assert breaker.state == CLOSED


def test_slow_probes_decide_with_what_they_have_after_open_time(clock: Clock) -> None:
    breaker = half_open(clock)
    assert breaker.record(HALF_OPEN, 2, 2) is None
    clock.advance(10)
    assert breaker.tick() == Transition(OPEN, "2 of 2 probes failed transiently")


def test_a_lone_failing_probe_does_not_keep_it_open(clock: Clock) -> None:
    """Little traffic and one bad message: reopening needs threshold x probes failures."""
    breaker = half_open(clock)
    assert breaker.record(HALF_OPEN, 1, 1) is None
    clock.advance(10)
    assert breaker.tick() == Transition(CLOSED, "0 of 1 probes succeeded")


def test_no_probe_at_all_in_open_time_closes_it(clock: Clock) -> None:
    breaker = half_open(clock)
    clock.advance(10)
    assert breaker.tick() == Transition(CLOSED, "no probe failed")


def test_closed_batches_while_half_open_are_no_evidence(clock: Clock) -> None:
    breaker = half_open(clock)
    assert breaker.record(CLOSED, 100, 100) is None
    assert breaker.record(OPEN, 100, 100) is None
    assert breaker.state == HALF_OPEN


@pytest.mark.parametrize(
    ("threshold", "probes", "needed"),
    [(0.5, 4, 2), (0.5, 5, 3), (1.0, 10, 10), (0.01, 10, 1), (0.3, 10, 3)],
)
def test_reopen_needs_threshold_of_probes_rounded_up(threshold: float, probes: int, needed: int) -> None:
    assert Breaker(BreakerSpec(threshold=threshold, probes=probes)).reopen_failures == needed


def test_failures_beyond_calls_are_clamped(clock: Clock) -> None:
    breaker = Breaker(SPEC, clock=clock)
    assert breaker.record(CLOSED, 10, 50) is None
    assert breaker.record(CLOSED, 10, 0) is not None  # 10 of 20, not 50
