"""``kubectl dlq``'s command line: positions, options before or after the command, one-line
errors, every option in the reference. Reading real topics: tests/integration/test_kubectl_dlq.py
and test_kubectl_dlq_pulsar.py."""

from __future__ import annotations

import argparse

import pytest

from spark_dlq_operator.kubectl_dlq import cli
from spark_dlq_operator.kubectl_dlq.errors import BadInput


def test_positions_are_partition_slash_offset() -> None:
    assert cli.parse_position("2/1534") == (2, 1534)
    # -1: a non-partitioned Pulsar topic's, as the engine numbers it.
    assert cli.parse_position("-1/3") == (-1, 3)
    for bad in ("2", "2:1534", "-2/3", "a/b", "2/1534/1"):
        with pytest.raises(BadInput, match="PARTITION/OFFSET such as 2/1534"):
            cli.parse_position(bad)


def test_common_options_go_before_or_after_the_command() -> None:
    before = cli.parse_args(["-f", "p.yaml", "--bootstrap-servers", "b:1", "ls", "--limit", "3"])
    after = cli.parse_args(["ls", "-f", "p.yaml", "--bootstrap-servers", "b:1", "--limit", "3"])
    for args in (before, after):
        assert (args.command, args.file, args.bootstrap_servers, args.limit) == ("ls", "p.yaml", "b:1", 3)
        assert args.policy is None
        assert args.request_timeout == "10s"
    show = cli.parse_args(["show", "2/1534", "--policy", "orders", "-n", "payments", "-o", "json"])
    assert (show.position, show.policy, show.namespace, show.output) == (
        "2/1534",
        "orders",
        "payments",
        "json",
    )


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        ([], "error: the following arguments are required: COMMAND (see 'kubectl dlq --help')"),
        (
            ["ls", "--limit", "0"],
            "error: argument --limit: must be at least 1, got 0 (see 'kubectl dlq ls --help')",
        ),
        (["ls", "-o", "csv"], "error: argument -o/--output: invalid choice: 'csv'"),
        (["stats", "--bogus"], "error: unrecognized arguments: --bogus"),
        (
            ["ls", "-f", "p.yaml", "--since", "1h", "--after", "2026-11-25"],
            "error: give --since or --after, not both",
        ),
        (["show", "2-1534", "-f", "p.yaml"], "error: the position must be PARTITION/OFFSET"),
        (["stats"], "error: give the policy as -f FILE or as --policy NAME (one of them)"),
        (["stats", "-f", "p.yaml", "--policy", "p"], "error: give the policy as -f FILE or as --policy NAME"),
        (
            ["stats", "-f", "p.yaml", "--request-timeout", "soon"],
            "error: --request-timeout: must be a duration",
        ),
    ],
)
def test_bad_arguments_are_one_line_and_status_2(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        status = cli.main(argv)
    except SystemExit as exit:
        status = exit.code  # argparse's own refusals
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert captured.err.startswith(problem)
    assert captured.err.count("\n") == 1


def test_every_option_is_in_the_reference() -> None:
    from spark_dlq_devtools.paths import REPO_ROOT

    reference = (REPO_ROOT / "docs" / "reference.md").read_text()
    section = reference[reference.index("## 5. Triage: `kubectl dlq`") :]
    parser = cli.build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    options = set()
    for sub in (parser, *commands.choices.values()):
        for action in sub._actions:
            options.update(o for o in action.option_strings if o.startswith("--") and o != "--help")
    assert {"--since", "--limit", "--kafka-config", "--request-timeout"} <= options
    assert set(commands.choices) == {"stats", "ls", "show", "redrive"}
    missing = sorted(o for o in options if f"`{o}" not in section and f", `{o}" not in section)
    assert not missing, missing
    for command in commands.choices:
        assert f"kubectl dlq {command}" in section
