from __future__ import annotations

import math

import pytest

from dlq_engine.model import DurationError, format_ms, parse_duration_ms

DURATION_HINT = "must be a duration such as 500ms, 1s or 2m"


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        pytest.param("500ms", 500, id="milliseconds"),
        pytest.param("1s", 1_000, id="seconds"),
        pytest.param("2m", 120_000, id="minutes"),
        pytest.param("1h", 3_600_000, id="hours"),
        pytest.param("1d", 86_400_000, id="days"),
        pytest.param("10m", 600_000, id="contract-max-delay"),
        pytest.param("0s", 0, id="zero-with-unit"),
        pytest.param("0", 0, id="bare-zero"),
        pytest.param("1.5s", 1_500, id="fraction-of-second"),
        pytest.param("0.5m", 30_000, id="fraction-of-minute"),
        pytest.param("1.6ms", 2, id="fraction-of-millisecond-rounds"),
        pytest.param("  1s\t", 1_000, id="surrounding-space-ignored"),
        pytest.param("007s", 7_000, id="leading-zeros"),
    ],
)
def test_parse_duration_single_unit(text: str, expected_ms: int) -> None:
    assert parse_duration_ms(text) == expected_ms


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        pytest.param("1h30m", 5_400_000, id="hours-minutes"),
        pytest.param("1m30s", 90_000, id="minutes-seconds"),
        pytest.param("1s500ms", 1_500, id="seconds-milliseconds"),
        pytest.param("1d2h3m4s5ms", 93_784_005, id="every-unit"),
        pytest.param("1.5h30m", 7_200_000, id="fraction-in-combo"),
        pytest.param("30m1h", 5_400_000, id="any-order"),
    ],
)
def test_parse_duration_combination(text: str, expected_ms: int) -> None:
    assert parse_duration_ms(text) == expected_ms


@pytest.mark.parametrize(
    ("value", "expected_ms"),
    [
        pytest.param(5, 5_000, id="int"),
        pytest.param(0, 0, id="zero"),
        pytest.param(1.5, 1_500, id="float"),
        pytest.param(0.25, 250, id="quarter-second"),
        pytest.param(0.0004, 0, id="below-a-millisecond-rounds-to-zero"),
    ],
)
def test_parse_duration_number_is_seconds(value: float, expected_ms: int) -> None:
    assert parse_duration_ms(value) == expected_ms


def test_parse_duration_returns_int() -> None:
    assert type(parse_duration_ms("1.5s")) is int
    assert type(parse_duration_ms(1.5)) is int


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("   ", id="blank"),
        pytest.param("5", id="bare-number-string"),
        pytest.param("s", id="unit-only"),
        pytest.param("1 s", id="space-before-unit"),
        pytest.param("1h 30m", id="space-between-parts"),
        pytest.param("1S", id="upper-case-unit"),
        pytest.param("1sec", id="long-unit"),
        pytest.param("1w", id="unknown-unit"),
        pytest.param("1us", id="microseconds"),
        pytest.param("-1s", id="negative"),
        pytest.param("+1s", id="plus-sign"),
        pytest.param(".5s", id="no-leading-digit"),
        pytest.param("1.s", id="no-fraction-digit"),
        pytest.param("1s-", id="trailing-garbage"),
        pytest.param("1,5s", id="comma-decimal"),
        pytest.param("soon", id="word"),
        pytest.param("PT1S", id="iso-8601"),
    ],
)
def test_parse_duration_refuses_bad_text(text: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration_ms(text)
    assert str(info.value) == f"{DURATION_HINT}, got {text!r}"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="none"),
        pytest.param(True, id="true"),
        pytest.param(False, id="false-is-not-zero"),
        pytest.param([1], id="list"),
        pytest.param({"s": 1}, id="mapping"),
    ],
)
def test_parse_duration_refuses_other_types(value: object) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration_ms(value)
    assert str(info.value) == f"{DURATION_HINT}, got {value!r}"


@pytest.mark.parametrize(
    "value",
    [pytest.param(-1, id="int"), pytest.param(-0.5, id="float")],
)
def test_parse_duration_refuses_negative_number(value: float) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration_ms(value)
    assert str(info.value) == f"must not be negative, got {value!r}"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(math.inf, id="infinity"),
        pytest.param(-math.inf, id="minus-infinity"),
        pytest.param(math.nan, id="nan"),
    ],
)
def test_parse_duration_refuses_non_finite_number(value: float) -> None:
    # YAML's .inf and .nan: a DurationError, never an OverflowError escaping the parser.
    with pytest.raises(DurationError) as info:
        parse_duration_ms(value)
    assert str(info.value) == f"must be a finite number of seconds, got {value!r}"


def test_duration_error_is_a_value_error() -> None:
    assert issubclass(DurationError, ValueError)


@pytest.mark.parametrize(
    ("ms", "expected"),
    [
        pytest.param(0, "0s", id="zero"),
        pytest.param(1, "1ms", id="one-millisecond"),
        pytest.param(999, "999ms", id="under-a-second"),
        pytest.param(1_000, "1s", id="second"),
        pytest.param(1_500, "1s500ms", id="second-and-a-half"),
        pytest.param(60_000, "1m", id="minute"),
        pytest.param(90_000, "1m30s", id="minute-and-a-half"),
        pytest.param(600_000, "10m", id="ten-minutes"),
        pytest.param(3_600_000, "1h", id="hour"),
        pytest.param(5_400_000, "1h30m", id="hour-and-a-half"),
        pytest.param(86_400_000, "1d", id="day"),
        pytest.param(90_061_001, "1d1h1m1s1ms", id="every-unit"),
        pytest.param(172_800_000, "2d", id="two-days"),
        pytest.param(3_600_001, "1h1ms", id="gaps-skipped"),
    ],
)
def test_format_ms_shortest_exact(ms: int, expected: str) -> None:
    assert format_ms(ms) == expected


@pytest.mark.parametrize(
    "ms",
    [
        0,
        1,
        999,
        1_000,
        1_001,
        59_999,
        60_000,
        61_000,
        3_599_999,
        5_400_000,
        86_399_999,
        86_400_000,
        90_061_001,
        1_234_567_890,
    ],
)
def test_round_trip_ms_to_text_to_ms(ms: int) -> None:
    assert parse_duration_ms(format_ms(ms)) == ms


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        pytest.param("1h30m", "1h30m", id="already-canonical"),
        pytest.param("500ms", "500ms", id="milliseconds"),
        pytest.param("90m", "1h30m", id="minutes-carry-into-hours"),
        pytest.param("60s", "1m", id="seconds-carry-into-minutes"),
        pytest.param("1000ms", "1s", id="milliseconds-carry-into-seconds"),
        pytest.param("24h", "1d", id="hours-carry-into-days"),
        pytest.param("1.5s", "1s500ms", id="fraction"),
        pytest.param("30m1h", "1h30m", id="reordered"),
        pytest.param("0", "0s", id="bare-zero"),
    ],
)
def test_round_trip_text_normalises(text: str, canonical: str) -> None:
    assert format_ms(parse_duration_ms(text)) == canonical
    assert parse_duration_ms(canonical) == parse_duration_ms(text)
