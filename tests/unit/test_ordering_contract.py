"""The contract between the Java ordering stage (``io.sparkdlq.engine.OrderByKey``) and the
Python that feeds it and routes what it emits (``dlq_engine.job.ordering``,
``processing.batches``), read from the Java source without a JVM: the record kinds, the columns
the stage reads by name, the report's fields, and the overflow notes routing dead-letters."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from dlq_engine.failures import Ending, EngineError
from dlq_engine.job.ordering import KIND_COLUMN, REPORT_COLUMN, REPORT_TYPE, SAMPLE, OrderKind
from dlq_engine.processing.batches import ORDER_NOTE, route_batch
from dlq_engine.routing.outcomes import Route
from tests.unit.test_batches import KEYED, NOW, ORDERED, batch, fail, settings_for

ROOT = Path(__file__).resolve().parents[2]
JAVA = (ROOT / "spark_image/jvm/src/main/java/io/sparkdlq/engine/OrderByKey.java").read_text()
CRD = ROOT / "crds/sparkdlq.io_deadletterpolicies.yaml"


def java_ints() -> dict[str, int]:
    return {name: int(value) for name, value in re.findall(r"static final int (\w+) = (\d+);", JAVA)}


def java_notes() -> list[str]:
    """The overflow notes, as the stage writes them (each value shown as 7)."""
    value = r'"\s*\+\s*[^";{}]+?\s*\+\s*"'  # "... " + an expression + " ..."
    templates = re.findall(rf'"[^"\n]*(?:{value}[^"\n]*)*"', JAVA)
    notes = [re.sub(value, "7", t).strip('"') for t in templates]
    return [note for note in notes if re.search(r"\bmax[A-Z]", note)]


def test_the_record_kinds_are_the_java_stage_s() -> None:
    java = java_ints()
    assert {kind.name: java.get(kind.name) for kind in OrderKind} == {
        kind.name: kind.value for kind in OrderKind
    }
    # Every kind the stage compares with or writes is one Python knows.
    used = set(re.findall(r"\bkind == (\w+)", JAVA)) | set(re.findall(r"values\[kindIndex\] = (\w+);", JAVA))
    assert used, "the stage's kind comparisons were not found"
    assert used <= {kind.name for kind in OrderKind}


def test_the_columns_and_the_report_are_the_java_stage_s() -> None:
    read = set(re.findall(r'schema\.fieldIndex\("(\w+)"\)', JAVA))
    assert {KIND_COLUMN, ORDER_NOTE, REPORT_COLUMN} <= read
    [report] = re.findall(r"values\[reportIndex\] = RowFactory\.create\(([^;]*)\);", JAVA)
    java_fields = [arg.strip().split(".")[-1] for arg in report.split(",")][:-1]  # the last: the sample
    python_fields = re.findall(r"(\w+): ", REPORT_TYPE)
    assert python_fields == [*java_fields, "blocked_keys"]
    assert java_ints()["SAMPLE"] == SAMPLE


def test_each_overflow_note_names_its_bound_and_routes_as_ordering_overflow() -> None:
    notes = java_notes()
    crd = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    bounds = {
        f for f in crd["properties"]["spec"]["properties"]["ordering"]["properties"] if f.startswith("max")
    }
    named = {name for note in notes for name in re.findall(r"\bmax[A-Z]\w*", note)}
    assert named == bounds, notes
    for note in notes:
        source = batch([{"key": b"a", "value": b"v", "offset": 7}])
        noted = source.append_column(ORDER_NOTE, pa.array([note], pa.string()))
        [row] = route_batch(noted, ORDERED, fail, now_ms=lambda: NOW).to_pylist()
        assert (row["route"], row["reason"]) == (Route.DEAD, "ordering-overflow")
        assert {h["key"]: h["value"] for h in row["headers"]}["dlq.error.message"] == note.encode()
        stopping = settings_for({**KEYED, "spec.ordering.onOverflow": "stop"})
        with pytest.raises(EngineError) as stopped:
            route_batch(noted, stopping, fail, now_ms=lambda: NOW)
        assert stopped.value.failure.kind is Ending.STOP_STRATEGY
        assert stopped.value.failure.line.endswith(note)
