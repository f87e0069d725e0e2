"""``dlq-engine run``'s timing options: their defaults live beside the code that uses them, an
environment variable sets them for every driver of a deployment, and a value that is not a
positive number of seconds is refused by the option's name."""

from __future__ import annotations

import pytest

from dlq_engine import cli
from dlq_engine.job.checkpoint_lock import DEFAULT_LEASE_S, DEFAULT_SETTLE_S
from dlq_engine.job.heartbeat import DEFAULT_INTERVAL_S
from dlq_engine.job.metrics import DEFAULT_PROBE_INTERVAL
from dlq_engine.job.preflight import TIMEOUT_MS

OPTIONS = [
    pytest.param(
        "--metrics-probe-interval", "SPARK_DLQ_METRICS_PROBE_INTERVAL", DEFAULT_PROBE_INTERVAL, id="probe"
    ),
    pytest.param("--checkpoint-lease", "SPARK_DLQ_CHECKPOINT_LEASE", DEFAULT_LEASE_S, id="lease"),
    pytest.param("--checkpoint-settle", "SPARK_DLQ_CHECKPOINT_SETTLE", DEFAULT_SETTLE_S, id="settle"),
    pytest.param("--heartbeat-interval", "SPARK_DLQ_HEARTBEAT_INTERVAL", DEFAULT_INTERVAL_S, id="heartbeat"),
    pytest.param("--broker-timeout", "SPARK_DLQ_BROKER_TIMEOUT", TIMEOUT_MS / 1000, id="broker-timeout"),
]


def _parsed(option: str, *argv: str) -> float:
    value = getattr(cli._parser().parse_args(["run", "-f", "p.yaml", *argv]), option[2:].replace("-", "_"))
    assert isinstance(value, float)
    return value


@pytest.mark.parametrize(("option", "variable", "default"), OPTIONS)
def test_the_default_is_the_module_s_own(
    monkeypatch: pytest.MonkeyPatch, option: str, variable: str, default: float
) -> None:
    monkeypatch.delenv(variable, raising=False)
    assert _parsed(option) == default


@pytest.mark.parametrize(("option", "variable", "default"), OPTIONS)
@pytest.mark.parametrize(
    ("env", "seconds"), [pytest.param("2", 2.0, id="whole"), pytest.param(" 0.5 ", 0.5, id="fraction")]
)
def test_the_environment_variable_sets_the_default_and_the_option_wins(
    monkeypatch: pytest.MonkeyPatch, option: str, variable: str, default: float, env: str, seconds: float
) -> None:
    monkeypatch.setenv(variable, env)
    assert _parsed(option) == seconds
    assert _parsed(option, option, "7") == 7.0


@pytest.mark.parametrize(("option", "variable", "default"), OPTIONS)
@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "soon"])
def test_what_is_not_positive_seconds_is_refused_by_name(
    capsys: pytest.CaptureFixture[str], option: str, variable: str, default: float, text: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parsed(option, option, text)
    assert exit_.value.code == 2
    assert f"argument {option}: {text!r} is not a positive number of seconds" in capsys.readouterr().err
