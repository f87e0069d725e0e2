"""Backoff: fixed, exponential (capped), levels (last repeats), jitter as a fraction."""

from __future__ import annotations

import pytest

from dlq_engine.model.policy import BackoffSpec
from dlq_engine.routing.backoff import delay_ms


@pytest.mark.parametrize(
    ("spec", "redelivery", "expected"),
    [
        pytest.param(BackoffSpec(type="fixed", delay_ms=1500), 1, 1500, id="fixed-first"),
        pytest.param(BackoffSpec(type="fixed", delay_ms=1500), 9, 1500, id="fixed-ninth"),
        pytest.param(BackoffSpec(delay_ms=1000, multiplier=2.0), 1, 1000, id="exp-first-is-delay"),
        pytest.param(BackoffSpec(delay_ms=1000, multiplier=2.0), 4, 8000, id="exp-fourth"),
        pytest.param(
            BackoffSpec(delay_ms=1000, multiplier=3.0, max_delay_ms=20_000), 4, 20_000, id="exp-capped"
        ),
        pytest.param(
            BackoffSpec(delay_ms=1000, multiplier=2.0, max_delay_ms=600_000),
            10_000,
            600_000,
            id="exp-huge-n-no-overflow",
        ),
        pytest.param(BackoffSpec(delay_ms=1000, multiplier=1.0), 5, 1000, id="exp-multiplier-one"),
        pytest.param(BackoffSpec(type="levels", levels_ms=(1000, 5000, 30_000)), 1, 1000, id="levels-first"),
        pytest.param(BackoffSpec(type="levels", levels_ms=(1000, 5000, 30_000)), 3, 30_000, id="levels-last"),
        pytest.param(
            BackoffSpec(type="levels", levels_ms=(1000, 5000, 30_000)), 7, 30_000, id="levels-repeat"
        ),
        pytest.param(BackoffSpec(type="fixed", delay_ms=1000), 0, 1000, id="zero-treated-as-first"),
    ],
)
def test_delay_without_jitter(spec: BackoffSpec, redelivery: int, expected: int) -> None:
    assert delay_ms(spec, redelivery) == expected


@pytest.mark.parametrize(("rand", "expected"), [(0.0, 800), (0.5, 1000), (0.999999, 1200)])
def test_jitter_spreads_the_delay_by_the_fraction(rand: float, expected: int) -> None:
    spec = BackoffSpec(type="fixed", delay_ms=1000, jitter=0.2)
    assert delay_ms(spec, 1, rand) == expected


def test_jitter_never_pushes_an_exponential_delay_past_max_delay() -> None:
    spec = BackoffSpec(delay_ms=1000, multiplier=2.0, max_delay_ms=4000, jitter=0.5)
    assert delay_ms(spec, 3, 0.999) == 4000
    assert delay_ms(spec, 3, 0.0) == 2000


def test_full_jitter_can_reach_zero_but_not_below() -> None:
    spec = BackoffSpec(type="fixed", delay_ms=1000, jitter=1.0)
    assert delay_ms(spec, 1, 0.0) == 0
