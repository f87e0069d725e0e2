"""The dead-letter table's settings without Spark running: the session's configuration, the
error a failed sink write reads as, and the columns the reference documents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlq_engine.failures import Ending, decode
from dlq_engine.job.dead_letter_table import COLUMNS
from dlq_engine.job.metrics import sink_failure
from dlq_engine.job.pipeline import sink_write_error
from dlq_engine.job.session import DEFAULT_CONF, DELTA_CONF, REQUIRED_CONF, session_conf
from tests.policy_builder import policy

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
DELTA_EXTENSION = DELTA_CONF["spark.sql.extensions"]


def test_without_a_delta_table_the_session_is_what_it_was() -> None:
    for overrides in ({}, {"spec.deadLetter.table": {"format": "parquet", "path": "/dl"}}):
        assert session_conf(policy(overrides)) == {**DEFAULT_CONF, **REQUIRED_CONF}


def test_a_delta_table_adds_delta_s_extension_and_catalog() -> None:
    conf = session_conf(policy({"spec.deadLetter.table": {"path": "/dl"}}))
    assert conf == {**DEFAULT_CONF, **REQUIRED_CONF, **DELTA_CONF}


@pytest.mark.parametrize(
    ("own", "expected"),
    [
        pytest.param("com.example.Ext", f"com.example.Ext,{DELTA_EXTENSION}", id="appended"),
        pytest.param(f" {DELTA_EXTENSION} ,com.example.Ext", f"{DELTA_EXTENSION},com.example.Ext", id="kept"),
    ],
)
def test_a_policy_s_own_extensions_are_kept(own: str, expected: str) -> None:
    conf = session_conf(
        policy(
            {"spec.deadLetter.table": {"path": "/dl"}, "spec.spark.sparkConf": {"spark.sql.extensions": own}}
        )
    )
    assert conf["spark.sql.extensions"] == expected


PY4J_TEXT = (
    "An error occurred while calling o906.save.\n"
    ": org.apache.spark.sql.delta.DeltaIOException: [DELTA_CANNOT_CREATE_LOG_PATH] Cannot create "
    "file:/data/dl/_delta_log\n\tat org.apache.spark.sql.delta.DeltaErrorsBase.x(DeltaErrors.scala:1711)\n"
)


def test_a_failed_write_reads_as_one_line_then_the_whole_error() -> None:
    error = sink_write_error(
        "the dead-letter table write of micro-batch 7 (delta at /data/dl)", RuntimeError(PY4J_TEXT)
    )
    first, rest = str(error).split("\n", 1)
    assert first == (
        "DLQ-SINK: the dead-letter table write of micro-batch 7 (delta at /data/dl) failed: "
        "org.apache.spark.sql.delta.DeltaIOException: [DELTA_CANNOT_CREATE_LOG_PATH] Cannot create "
        "file:/data/dl/_delta_log"
    )
    assert rest == PY4J_TEXT
    failure = decode(f"org.apache.spark.api.python.PythonException: {error}")
    assert failure is not None
    assert failure.kind is Ending.SINK_WRITE
    assert failure.message == f"dlq-engine: the query failed: {first.removeprefix('DLQ-SINK: ')}"


def test_a_failed_kafka_write_still_names_its_topic_for_the_metrics() -> None:
    p = policy()
    text = (
        "An error occurred while calling o1.save.\n: org.apache.kafka.common.errors.TimeoutException: "
        f"Expiring 3 record(s) for {p.dead_letter_topic}-0:120000 ms has passed\n"
    )
    error = sink_write_error("the Kafka write of micro-batch 3", RuntimeError(text))
    assert (
        str(error)
        .splitlines()[0]
        .endswith(f"Expiring 3 record(s) for {p.dead_letter_topic}-0:120000 ms has passed")
    )
    assert sink_failure(str(error), p) == "dead_letter"


def test_every_column_is_documented_in_the_reference() -> None:
    section = REFERENCE.read_text().split("### The dead-letter table", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, re.MULTILINE)
    assert [(name, kind.strip()) for name, kind in documented] == list(COLUMNS)
