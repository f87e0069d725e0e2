"""Reading policies from YAML text, with line numbers for the person who wrote it.

``dlq-engine run -f policy.yaml`` must say which field on which line is wrong, not print a
traceback. PyYAML's composer keeps a position for every node, so the text is composed once,
a map from field path to line is built from the node tree, and each policy issue is then
reported as ``policy.yaml:14: spec.retry.backoff.jitter: must be between 0 and 1, got 1.5``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import yaml

from dlq_engine.model.policy import DeadLetterPolicy, Issue, PolicyError, parse_policy
from dlq_engine.model.redrive import DeadLetterRedrive, parse_redrive

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LocatedIssue:
    source: str
    line: int | None
    issue: Issue

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.issue}"


class PolicyFileError(ValueError):
    """A policy file that cannot be read or run; ``str()`` is one line per problem."""

    def __init__(self, problems: list[LocatedIssue]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def load_policy_text(text: str, *, source: str = "<policy>") -> DeadLetterPolicy:
    """Parse YAML text holding one DeadLetterPolicy. Raises PolicyFileError."""
    return _load_text(text, source, parse_policy)


def load_policy_file(path: str | Path) -> DeadLetterPolicy:
    """Read and parse a policy file. Raises PolicyFileError (also for a missing file)."""
    return _load_text(_read(Path(path)), str(path), parse_policy)


def load_redrive_file(path: str | Path) -> DeadLetterRedrive:
    """Read and parse a DeadLetterRedrive file. Raises PolicyFileError."""
    return _load_text(_read(Path(path)), str(path), parse_redrive)


def _load_text(text: str, source: str, parse: Callable[[object], T]) -> T:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise PolicyFileError([LocatedIssue(source, line, Issue("(yaml)", str(problem)))]) from None
    try:
        return parse(document)
    except PolicyError as error:
        lines = _line_map(node)
        raise PolicyFileError(
            [LocatedIssue(source, _line_for(issue.path, lines), issue) for issue in error.issues]
        ) from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise PolicyFileError(
            [LocatedIssue(str(path), None, Issue("(file)", error.strerror or str(error)))]
        ) from None
    except UnicodeDecodeError as error:
        raise PolicyFileError(
            [
                LocatedIssue(
                    str(path),
                    None,
                    Issue("(file)", f"is not UTF-8 text ({error.reason} at byte {error.start})"),
                )
            ]
        ) from None


def _line_map(node: yaml.Node | None, prefix: str = "") -> dict[str, int]:
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            path = f"{prefix}.{key}" if prefix else key
            lines[path] = key_node.start_mark.line + 1
            lines.update(_line_map(value_node, path))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            path = f"{prefix}[{index}]"
            lines[path] = item.start_mark.line + 1
            lines.update(_line_map(item, path))
    return lines


_INDEX = re.compile(r"\[\d+\]$")


def _line_for(path: str, lines: dict[str, int]) -> int | None:
    """The line of the field, or of its nearest written ancestor (a missing field is
    reported where its parent is)."""
    while path:
        if path in lines:
            return lines[path]
        if _INDEX.search(path):
            path = _INDEX.sub("", path)
        elif "." in path:
            path = path.rsplit(".", 1)[0]
        else:
            break
    return None
