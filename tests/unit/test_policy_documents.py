from __future__ import annotations

from pathlib import Path

import pytest

from dlq_engine.model import (
    Issue,
    LocatedIssue,
    PolicyFileError,
    load_policy_file,
    load_policy_text,
    parse_policy,
)
from tests.policy_builder import policy_document

#: A valid policy; the comment on each line is its line number, which the tests rely on.
POLICY_YAML = """\
apiVersion: sparkdlq.io/v1alpha1          # 1
kind: DeadLetterPolicy                    # 2
metadata:                                 # 3
  name: orders-billing                    # 4
  namespace: payments                     # 5
spec:                                     # 6
  source:                                 # 7
    topic: orders                         # 8
    subscription: billing                 # 9
  broker:                                 # 10
    bootstrapServers: kafka.kafka:9092    # 11
  processor:                              # 12
    entrypoint: billing.handlers:process  # 13
  retry:                                  # 14
    maxRedeliverCount: 3                  # 15
    backoff:                              # 16
      type: levels                        # 17
      jitter: 0.5                         # 18
      levels:                             # 19
        - 1s                              # 20
        - 5s                              # 21
  deadLetter:                             # 22
    headers:                              # 23
      team: billing                       # 24
"""


def _edit(old: str, new: str) -> str:
    """POLICY_YAML with the one occurrence of ``old`` replaced by ``new``."""
    assert POLICY_YAML.count(old) == 1, old
    return POLICY_YAML.replace(old, new)


def _problems(text: str) -> list[str]:
    with pytest.raises(PolicyFileError) as info:
        load_policy_text(text, source="policy.yaml")
    return [str(problem) for problem in info.value.problems]


# --------------------------------------------------------------------------------------------
# A valid file


def test_load_text_valid_policy() -> None:
    policy = load_policy_text(POLICY_YAML)
    assert (policy.name, policy.namespace) == ("orders-billing", "payments")
    assert policy.retry.max_redeliver_count == 3
    assert policy.retry.backoff.levels_ms == (1_000, 5_000)
    assert policy.dead_letter.headers == {"team": "billing"}


def test_load_text_equals_parsing_the_same_mapping() -> None:
    text = """\
apiVersion: sparkdlq.io/v1alpha1
kind: DeadLetterPolicy
metadata: {name: orders-billing, namespace: payments}
spec:
  source: {topic: orders, subscription: billing}
  broker: {bootstrapServers: "kafka.kafka:9092"}
  processor: {entrypoint: "billing.handlers:process"}
"""
    assert load_policy_text(text) == parse_policy(policy_document())


def test_load_file_valid_policy(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_YAML, encoding="utf-8")
    assert load_policy_file(path) == load_policy_text(POLICY_YAML)
    assert load_policy_file(str(path)) == load_policy_text(POLICY_YAML)


# --------------------------------------------------------------------------------------------
# Problems carry the line of the field


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "jitter: 0.5 ",
            "jitter: 1.5 ",
            "policy.yaml:18: spec.retry.backoff.jitter: must be between 0 and 1, got 1.5",
            id="jitter",
        ),
        pytest.param(
            "apiVersion: sparkdlq.io/v1alpha1 ",
            "apiVersion: v1 ",
            "policy.yaml:1: apiVersion: must be sparkdlq.io/v1alpha1, got 'v1'",
            id="api-version",
        ),
        pytest.param(
            "kind: DeadLetterPolicy ",
            "kind: Policy ",
            "policy.yaml:2: kind: must be DeadLetterPolicy, got 'Policy'",
            id="kind",
        ),
        pytest.param(
            "topic: orders ",
            "topic: [orders] ",
            "policy.yaml:8: spec.source.topic: must be a string, got a list",
            id="source-topic",
        ),
        pytest.param(
            "maxRedeliverCount: 3 ",
            "maxRedeliverCount: -3 ",
            "policy.yaml:15: spec.retry.maxRedeliverCount: must be at least 0, got -3",
            id="max-redeliver-count",
        ),
        pytest.param(
            "maxRedeliverCount: 3 ",
            "maxRedeliveryCount: 3 ",
            "policy.yaml:15: spec.retry.maxRedeliveryCount: unknown field "
            "(did you mean 'maxRedeliverCount'?)",
            id="unknown-field",
        ),
        pytest.param(
            "type: levels ",
            "type: linear ",
            "policy.yaml:17: spec.retry.backoff.type: must be one of fixed, "
            "exponential, levels, got 'linear'",
            id="enum",
        ),
        pytest.param(
            "- 5s ",
            "- soon ",
            "policy.yaml:21: spec.retry.backoff.levels[1]: must be a duration such as "
            "500ms, 1s or 2m, got 'soon'",
            id="list-item",
        ),
        pytest.param(
            "team: billing ",
            "dlq.team: billing ",
            "policy.yaml:24: spec.deadLetter.headers.dlq.team: must not start with "
            "'dlq.': those headers are written by the engine",
            id="key-with-dots",
        ),
        pytest.param(
            "entrypoint: billing.handlers:process ",
            "entrypoint: billing ",
            "policy.yaml:13: spec.processor.entrypoint: must be 'module:function', got 'billing'",
            id="entrypoint",
        ),
    ],
)
def test_line_of_the_field(old: str, new: str, expected: str) -> None:
    assert _problems(_edit(old, new)) == [expected]


@pytest.mark.parametrize(
    ("old", "expected"),
    [
        pytest.param(
            "    subscription: billing                 # 9\n",
            "policy.yaml:7: spec.source.subscription: is required",
            id="subscription-at-source",
        ),
        pytest.param(
            "  name: orders-billing                    # 4\n",
            "policy.yaml:3: metadata.name: is required",
            id="name-at-metadata",
        ),
        pytest.param(
            "    bootstrapServers: kafka.kafka:9092    # 11\n",
            "policy.yaml:10: spec.broker.bootstrapServers: is required",
            id="bootstrap-at-broker",
        ),
        pytest.param(
            "        - 1s                              # 20\n"
            "        - 5s                              # 21\n",
            "policy.yaml:19: spec.retry.backoff.levels: must list at least one delay when type is levels",
            id="levels-null-at-levels",
        ),
    ],
)
def test_line_missing_field_at_its_parent(old: str, expected: str) -> None:
    assert _problems(_edit(old, "")) == [expected]


def test_line_missing_section_at_the_nearest_written_ancestor() -> None:
    text = _edit(
        "  processor:                              # 12\n    entrypoint: billing.handlers:process  # 13\n", ""
    )
    assert _problems(text) == ["policy.yaml:6: spec.processor.entrypoint: is required"]


def test_line_rule_on_an_unwritten_field_at_its_parent() -> None:
    # The derived retry topic is not written: reported on the `retry:` line.
    text = _edit("subscription: billing ", "subscription: bill+ing ")
    assert _problems(text) == [
        "policy.yaml:9: spec.source.subscription: may contain only letters, digits, '.', '_' "
        "and '-' (it is part of the default topic names), got 'bill+ing'",
        "policy.yaml:14: spec.retry.topic: (derived) may contain only letters, digits, '.', '_' "
        "and '-', got 'orders-bill+ing-RETRY'",
        "policy.yaml:22: spec.deadLetter.topic: (derived) may contain only letters, digits, '.', "
        "'_' and '-', got 'orders-bill+ing-DLQ'",
    ]


def test_line_absent_top_level_field_has_no_line() -> None:
    text = _edit("apiVersion: sparkdlq.io/v1alpha1          # 1\n", "")
    assert _problems(text) == ["policy.yaml: apiVersion: must be sparkdlq.io/v1alpha1, got None"]


def test_line_flow_style_mapping() -> None:
    text = """\
apiVersion: sparkdlq.io/v1alpha1
kind: DeadLetterPolicy
metadata: {name: orders-billing}
spec:
  source: {topic: orders, subscription: billing}
  broker: {bootstrapServers: "kafka:9092"}
  processor: {entrypoint: "m:f"}
  retry: {backoff: {jitter: 2}}
"""
    assert _problems(text) == ["policy.yaml:8: spec.retry.backoff.jitter: must be between 0 and 1, got 2.0"]


def test_line_several_problems_one_line_each() -> None:
    text = _edit("kind: DeadLetterPolicy ", "kind: Policy ")
    text = text.replace("jitter: 0.5 ", "jitter: 1.5 ").replace("- 5s ", "- later ")
    with pytest.raises(PolicyFileError) as info:
        load_policy_text(text, source="policy.yaml")
    assert str(info.value) == (
        "policy.yaml:2: kind: must be DeadLetterPolicy, got 'Policy'\n"
        "policy.yaml:21: spec.retry.backoff.levels[1]: must be a duration such as 500ms, 1s or "
        "2m, got 'later'\n"
        "policy.yaml:18: spec.retry.backoff.jitter: must be between 0 and 1, got 1.5"
    )
    assert [p.line for p in info.value.problems] == [2, 21, 18]
    assert [p.issue.path for p in info.value.problems] == [
        "kind",
        "spec.retry.backoff.levels[1]",
        "spec.retry.backoff.jitter",
    ]


# --------------------------------------------------------------------------------------------
# YAML that does not parse


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "subscription: billing ",
            "subscription: billing: x ",
            "policy.yaml:9: (yaml): mapping values are not allowed here",
            id="mapping-value-in-scalar",
        ),
        pytest.param(
            "  broker:",
            "\tbroker:",
            "policy.yaml:10: (yaml): found character '\\t' that cannot start any token",
            id="tab-indentation",
        ),
        pytest.param(
            "  deadLetter:",
            "---\n  deadLetter:",
            "policy.yaml:22: (yaml): but found another document",
            id="two-documents",
        ),
        pytest.param(
            "team: billing ",
            "team: !!python/name:os.system ",
            "policy.yaml:24: (yaml): could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/name:os.system'",
            id="unsafe-tag",
        ),
    ],
)
def test_yaml_syntax_error_one_line_with_line_number(old: str, new: str, expected: str) -> None:
    assert _problems(_edit(old, new)) == [expected]


def test_yaml_unclosed_flow_sequence() -> None:
    text = "a: [1, 2\nb: 3\n"
    assert _problems(text) == ["policy.yaml:2: (yaml): expected ',' or ']', but got ':'"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", "policy.yaml: (document): must be a mapping, got NoneType None", id="empty"),
        pytest.param(
            "# nothing\n",
            "policy.yaml: (document): must be a mapping, got NoneType None",
            id="only-a-comment",
        ),
        pytest.param("- orders\n", "policy.yaml: (document): must be a mapping, got a list", id="list"),
        pytest.param(
            "orders\n", "policy.yaml: (document): must be a mapping, got the string 'orders'", id="scalar"
        ),
    ],
)
def test_yaml_document_not_a_mapping(text: str, expected: str) -> None:
    assert _problems(text) == [expected]


# --------------------------------------------------------------------------------------------
# Errors are clean: no traceback, one line per problem


def test_error_has_no_chained_exception() -> None:
    with pytest.raises(PolicyFileError) as info:
        load_policy_text(_edit("jitter: 0.5 ", "jitter: 1.5 "))
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ is True
    assert "Traceback" not in str(info.value)


def test_error_yaml_has_no_chained_exception() -> None:
    with pytest.raises(PolicyFileError) as info:
        load_policy_text("a: [1\n")
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ is True
    assert len(str(info.value).splitlines()) == 1


def test_error_default_source_name() -> None:
    with pytest.raises(PolicyFileError) as info:
        load_policy_text(_edit("jitter: 0.5 ", "jitter: 1.5 "))
    assert str(info.value) == ("<policy>:18: spec.retry.backoff.jitter: must be between 0 and 1, got 1.5")


def test_error_is_a_value_error() -> None:
    assert issubclass(PolicyFileError, ValueError)


@pytest.mark.parametrize(
    ("located", "expected"),
    [
        pytest.param(
            LocatedIssue("policy.yaml", 9, Issue("spec.x", "is wrong")),
            "policy.yaml:9: spec.x: is wrong",
            id="with-line",
        ),
        pytest.param(
            LocatedIssue("policy.yaml", None, Issue("spec.x", "is wrong")),
            "policy.yaml: spec.x: is wrong",
            id="without-line",
        ),
    ],
)
def test_error_located_issue_text(located: LocatedIssue, expected: str) -> None:
    assert str(located) == expected


def test_error_file_problems_name_the_path(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(_edit("jitter: 0.5 ", "jitter: 1.5 "), encoding="utf-8")
    with pytest.raises(PolicyFileError) as info:
        load_policy_file(path)
    assert str(info.value) == (f"{path}:18: spec.retry.backoff.jitter: must be between 0 and 1, got 1.5")


def test_error_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    with pytest.raises(PolicyFileError) as info:
        load_policy_file(path)
    assert str(info.value) == f"{path}: (file): No such file or directory"
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ is True


def test_error_path_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError) as info:
        load_policy_file(tmp_path)
    assert str(info.value) == f"{tmp_path}: (file): Is a directory"


def test_error_file_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_bytes(b"apiVersion: \xff\xfe\n")
    with pytest.raises(PolicyFileError) as info:
        load_policy_file(path)
    assert str(info.value) == f"{path}: (file): is not UTF-8 text (invalid start byte at byte 12)"
    assert info.value.__suppress_context__ is True
