"""``kubectl_complete-dlq``'s choices, from kubectl dlq's own parser (what kubectl runs through
its plugin completion: tests/integration/test_kubectl_dlq.py), and the scan's progress line."""

from __future__ import annotations

import io

import pytest

from spark_dlq_operator.kubectl_dlq.cli import build_parser
from spark_dlq_operator.kubectl_dlq.plugin import COMPLETE_DEFAULT, COMPLETE_NO_FILES, completions
from spark_dlq_operator.kubectl_dlq.progress import LARGE_SCAN, Progress


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        pytest.param([""], (["ls", "redrive", "show", "stats"], COMPLETE_NO_FILES), id="commands"),
        pytest.param(["--kubeconfig", "k", "s"], (["show", "stats"], COMPLETE_NO_FILES), id="after-a-flag"),
        pytest.param(["ls", "-o", ""], (["table", "wide", "json", "yaml"], COMPLETE_NO_FILES), id="output"),
        pytest.param(["show", "-o", "y"], (["yaml"], COMPLETE_NO_FILES), id="output-partial"),
        pytest.param(["ls", "--reason", "e"], (["exhausted"], COMPLETE_NO_FILES), id="reason"),
        pytest.param(["redrive", "--to", ""], (["source", "retry", "topic:"], COMPLETE_NO_FILES), id="to"),
        pytest.param(["stats", "-f", ""], ([], COMPLETE_DEFAULT), id="file"),
        pytest.param(["stats", "--kafka-config", "./"], ([], COMPLETE_DEFAULT), id="kafka-config"),
        pytest.param(["stats", "--since", ""], ([], COMPLETE_NO_FILES), id="free-value"),
        pytest.param(["show", "--policy", "p", ""], ([], COMPLETE_NO_FILES), id="position"),
    ],
)
def test_completions(words: list[str], expected: tuple[list[str], int]) -> None:
    assert completions(build_parser(), words[:-1], words[-1]) == expected


def test_flags_of_the_command_being_typed() -> None:
    choices, directive = completions(build_parser(), ["stats"], "--a")
    assert (choices, directive) == (["--after", "--all-namespaces"], COMPLETE_NO_FILES)
    assert "--execute" not in completions(build_parser(), ["stats"], "--")[0]
    assert "--execute" in completions(build_parser(), ["redrive"], "--")[0]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_throttled_and_cleared() -> None:
    now = [0.0]
    stream = Terminal()
    progress = Progress(stream, label="reading t", clock=lambda: now[0])
    total = LARGE_SCAN * 2
    progress(500, total)
    progress(1000, total)  # too soon: not shown
    now[0] = 1.0
    progress(20_000, total)
    progress(total, total)  # the end is always shown
    progress.close()
    assert stream.getvalue().split("\r") == [
        "",
        f"reading t: 500 of {total:,} records (1%)\x1b[K",
        f"reading t: 20,000 of {total:,} records (50%)\x1b[K",
        f"reading t: {total:,} of {total:,} records (100%)\x1b[K",
        "\x1b[K",
    ]


@pytest.mark.parametrize(
    ("stream", "total"),
    [
        pytest.param(io.StringIO(), LARGE_SCAN * 10, id="a-pipe"),
        pytest.param(Terminal(), LARGE_SCAN - 1, id="a-short-scan"),
    ],
)
def test_no_progress_for_a_pipe_or_a_short_scan(stream: io.StringIO, total: int) -> None:
    progress = Progress(stream, label="reading t")
    progress(total, total)
    progress.close()
    assert stream.getvalue() == ""
