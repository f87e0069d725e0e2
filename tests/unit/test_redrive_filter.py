"""The redrive filter language, checked by the model's own parser (no Spark): the corpus of
``tests/filter_corpus.py`` (the same cases run through Spark's parser in
``tests/integration/engine/test_redrive.py``), its limits, and where its answer shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.model import PolicyError
from dlq_engine.model.redrive import parse_redrive
from dlq_engine.model.redrive_filter import (
    ALLOWED_FUNCTIONS,
    CAST_TYPES,
    COLUMNS,
    FUNCTIONS,
    MAX_DEPTH,
    MAX_LENGTH,
    filter_problem,
)
from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_operator.kubectl_dlq import cli
from tests.filter_corpus import CASES, REFLECT, Case, function
from tests.policy_builder import policy_document

CRD = REPO_ROOT / "crds" / "sparkdlq.io_deadletterredrives.yaml"
REFERENCE = REPO_ROOT / "docs" / "reference.md"


@pytest.mark.parametrize("case", [case.param(name) for name, case in CASES.items()])
def test_each_filter_of_the_corpus(case: Case) -> None:
    assert filter_problem(case.text) == case.problem


def test_the_corpus_refuses_what_spark_would_allow_only_with_a_reason() -> None:
    assert all(case.problem is not None for case in CASES.values() if case.spark != "same")


@pytest.mark.parametrize(
    ("calls", "problem"),
    [
        pytest.param(MAX_DEPTH - 2, None, id="at-the-limit"),
        pytest.param(MAX_DEPTH - 1, "is nested too deeply: at most 32 levels", id="one-more"),
        pytest.param(1000, "is nested too deeply: at most 32 levels", id="far-beyond"),
    ],
)
def test_nesting_is_bounded(calls: int, problem: str | None) -> None:
    # abs(abs(...(attempts)...)) > 0: a tree of the column, `calls` calls and the comparison.
    assert filter_problem("abs(" * calls + "attempts" + ")" * calls + " > 0") == problem


def test_deep_parentheses_are_refused_before_python_s_stack_ends() -> None:
    assert (
        filter_problem("(" * 3000 + "attempts > 0" + ")" * 3000) == "is nested too deeply: at most 32 levels"
    )
    assert filter_problem("-" + " -" * 3000 + " attempts > 0") == "is nested too deeply: at most 32 levels"
    assert filter_problem("NOT " * 2000 + "attempts > 0") == "is nested too deeply: at most 32 levels"


def test_length_is_bounded_by_the_crd_s_limit() -> None:
    crd = yaml.safe_load(CRD.read_text())
    [version] = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["selection"]["properties"]["filter"]["maxLength"] == MAX_LENGTH
    text = "error_message <> '" + "x" * (MAX_LENGTH - 19) + "'"
    assert len(text) == MAX_LENGTH
    assert filter_problem(text) is None
    assert filter_problem(text + " ") == f"must be at most {MAX_LENGTH} characters long, got {MAX_LENGTH + 1}"


def test_nothing_that_reaches_outside_the_expression_is_allowed() -> None:
    outside = {
        "reflect",
        "java_method",
        "try_reflect",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "current_user",
        "current_database",
        "current_catalog",
        "current_timezone",
        "version",
        "from_protobuf",
        "to_protobuf",
        "from_avro",
        "xpath",
        "from_xml",
        "aes_decrypt",
        "raise_error",
        "assert_true",
        "uuid",
        "spark_partition_id",
    }
    assert ALLOWED_FUNCTIONS.isdisjoint(outside)
    assert sum(len(names) for names in FUNCTIONS.values()) == len(ALLOWED_FUNCTIONS)  # one home each


def _redrive(selection: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterRedrive",
        "metadata": {"name": "fix-1", "namespace": "payments"},
        "spec": {"policyRef": {"name": "orders-billing"}, "selection": selection},
    }


def test_a_redrive_with_a_refused_filter_names_the_field_and_the_function() -> None:
    with pytest.raises(PolicyError) as raised:
        parse_redrive(_redrive({"filter": f"attempts > 1 AND {REFLECT} IS NULL"}))
    assert [str(issue) for issue in raised.value.issues] == [f"spec.selection.filter: {function('reflect')}"]
    assert parse_redrive(_redrive({"filter": "attempts > 1"})).selection.filter == "attempts > 1"
    assert parse_redrive(_redrive({"filter": ""})).selection.filter == ""


def test_the_reference_lists_every_column_function_and_type() -> None:
    text = REFERENCE.read_text()
    section = text[text.index("**The dead-letter columns**") :]
    missing = [name for name in (*COLUMNS, *CAST_TYPES) if f"`{name}`" not in section]
    assert not missing, missing
    for kind, names in FUNCTIONS.items():  # the table of functions is the model's, row by row
        assert f"| {kind} | {', '.join(f'`{name}`' for name in names)} |\n" in section, kind


def test_kubectl_dlq_refuses_the_filter_before_reading_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.yaml"
    # A broker nobody listens on: the refusal comes before any connection.
    policy.write_text(yaml.safe_dump(policy_document({"spec.broker.bootstrapServers": "127.0.0.1:9"})))
    status = cli.main(["redrive", "-f", str(policy), "--filter", f"{REFLECT} IS NULL"])
    assert status == 2
    assert f"spec.selection.filter: {function('reflect')}" in capsys.readouterr().err
