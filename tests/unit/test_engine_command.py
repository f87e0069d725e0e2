"""The engine's command line as the operator writes it: the engine's own parser reads every
option back (test_render.py and test_redrive.py check the SparkApplications' lists)."""

from __future__ import annotations

import dataclasses

import pytest

from dlq_engine import cli
from spark_dlq_operator.engine_command import EngineCommand, Redrive, Run, engine_arguments

pytestmark = pytest.mark.unit

RUN = Run(
    file="/etc/spark-dlq/policy/policy.yaml",
    checkpoint="s3a://cp/dlq/payments/orders-billing",
    heartbeat_lease="payments/orders-billing-heartbeat",
    config_hash="0123abcd",
)
REDRIVE = Redrive(
    file="/etc/spark-dlq/redrive/redrive.yaml",
    policy="/etc/spark-dlq/policy/policy.yaml",
    checkpoint="/cp/payments/orders-billing/redrives/r1",
    status_file="/dev/termination-log",
)


@pytest.mark.parametrize(
    ("command", "subcommand"),
    [pytest.param(RUN, "run", id="run"), pytest.param(REDRIVE, "redrive", id="redrive")],
)
def test_the_engine_s_parser_reads_every_option_back(command: EngineCommand, subcommand: str) -> None:
    parsed = vars(cli._parser().parse_args(engine_arguments(command)))
    assert parsed["command"] == subcommand
    assert {f.name: parsed[f.name] for f in dataclasses.fields(command)} == dataclasses.asdict(command)
