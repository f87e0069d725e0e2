"""``kubectl dlq``'s times and time windows."""

from __future__ import annotations

import pytest

from spark_dlq_operator.kubectl_dlq import times
from spark_dlq_operator.kubectl_dlq.errors import BadInput
from spark_dlq_operator.kubectl_dlq.times import Window
from tests.unit.dead_letters import T0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-25T09:46:40Z", T0),
        ("2026-11-25T09:46:40.250Z", T0 + 250),
        ("2026-11-25T10:46:40+01:00", T0),
        ("2026-11-25T09:46:40", T0),  # no zone: UTC, as printed
        ("2026-11-25", T0 - (9 * 3600 + 46 * 60 + 40) * 1000),
    ],
)
def test_times_are_iso_8601(text: str, expected: int) -> None:
    assert times.parse_time(text, flag="--after") == expected


def test_a_bad_time_names_the_flag() -> None:
    with pytest.raises(BadInput, match=r"^--before: must be an ISO-8601 time .*'yesterday'"):
        times.parse_time("yesterday", flag="--before")


def test_since_counts_back_from_now() -> None:
    assert times.parse_window("1h30m", None, None, now_ms=T0) == Window(T0 - 5_400_000, None)
    assert times.parse_window(None, None, None, now_ms=T0) == Window()
    window = times.parse_window(None, "2026-11-25T09:00:00Z", "2026-11-25T10:00:00Z", now_ms=T0)
    assert window == Window(T0 - 2_800_000, T0 + 800_000)


@pytest.mark.parametrize(
    ("since", "after", "before", "problem"),
    [
        ("1h", "2026-11-25", None, "give --since or --after, not both"),
        ("1x", None, None, "--since: must be a duration such as 500ms"),
        ("0", None, None, "--since: must be longer than 0"),
        (None, "2026-11-26", "2026-11-25", "the range is empty: 2026-11-26T00:00:00Z is not before"),
        (None, None, "soon", "--before: must be an ISO-8601 time"),
    ],
)
def test_bad_ranges_are_refused(
    since: str | None, after: str | None, before: str | None, problem: str
) -> None:
    with pytest.raises(BadInput) as info:
        times.parse_window(since, after, before, now_ms=T0)
    assert str(info.value).startswith(problem)


def test_window_bounds_after_inclusive_before_exclusive() -> None:
    window = Window(100, 200)
    assert 100 in window
    assert 199 in window
    assert 200 not in window
    assert 99 not in window
    assert None not in window
    assert None in Window()  # an open window holds records without a time


def test_times_print_in_utc() -> None:
    assert times.format_time(T0 + 123) == "2026-11-25T09:46:40Z"
    assert times.format_time(T0 + 123, precise=True) == "2026-11-25T09:46:40.123Z"
    assert times.format_time(None) == "<none>"
