"""``kubectl dlq`` as kubectl runs it: the executables ``kubectl-dlq`` (the plugin) and
``kubectl_complete-dlq`` (its shell completion, kubectl's plugin completion convention).

Both start here rather than in ``cli`` so that ``--version`` answers and a missing operator
extra is one line naming it (``cli`` imports the Kafka client). kubectl calls
``kubectl_complete-dlq`` with the words after ``kubectl dlq``, the last one being the word to
complete (empty for a new one), and shows what it prints, one choice a line, then ``:N``, a
cobra shell directive (4: no file names; 0: the shell's default, file names).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Final

from dlq_engine.model.redrive import REASONS
from dlq_engine.release import asks_for_version, version_line, with_extra

PROG: Final = "kubectl dlq"
#: cobra's ShellCompDirective values kubectl understands.
COMPLETE_DEFAULT: Final = 0
COMPLETE_NO_FILES: Final = 4
#: Options whose value is a file: the shell completes file names.
FILE_OPTIONS: Final = frozenset({"-f", "--filename", "--kubeconfig", "--kafka-config"})
#: Seconds a completion may wait for kubectl (a slow cluster must not hang the shell).
KUBECTL_TIMEOUT_S: Final = 5


def _cli() -> ModuleType:
    import importlib

    return with_extra("operator", PROG, lambda: importlib.import_module("spark_dlq_operator.kubectl_dlq.cli"))


def main(argv: Sequence[str] | None = None) -> int:
    """``kubectl-dlq``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if asks_for_version(args):
        print(version_line(PROG))
        return 0
    status: int = _cli().main(args)
    return status


def complete(argv: Sequence[str] | None = None) -> int:
    """``kubectl_complete-dlq WORDS... PARTIAL``: print the choices for PARTIAL, then a directive."""
    words = list(sys.argv[1:] if argv is None else argv) or [""]
    choices, directive = completions(_cli().build_parser(), words[:-1], words[-1])
    for choice in choices:
        print(choice)
    print(f":{directive}")
    return 0


def completions(parser: argparse.ArgumentParser, before: list[str], partial: str) -> tuple[list[str], int]:
    """What completes ``partial`` after the words ``before``, and the shell directive."""
    command, current = _command(parser, before)
    previous = before[-1] if before else ""
    option = _option(current, previous)
    if option is not None and option.nargs != 0:
        if previous in FILE_OPTIONS:
            return [], COMPLETE_DEFAULT
        return _starting(_values(option, before), partial), COMPLETE_NO_FILES
    if partial.startswith("-"):
        flags = [f for a in current._actions for f in a.option_strings if a.help != argparse.SUPPRESS]
        return _starting(sorted(set(flags)), partial), COMPLETE_NO_FILES
    if command is None:
        return _starting(sorted(_commands(parser)), partial), COMPLETE_NO_FILES
    return [], COMPLETE_NO_FILES


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _command(parser: argparse.ArgumentParser, words: list[str]) -> tuple[str | None, argparse.ArgumentParser]:
    """The command named among ``words`` (skipping options and their values), and its parser."""
    commands = _commands(parser)
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            option = _option(parser, word)
            skip = option is not None and option.nargs != 0 and "=" not in word
            continue
        if word in commands:
            return word, commands[word]
    return None, parser


def _option(parser: argparse.ArgumentParser, word: str) -> argparse.Action | None:
    name = word.split("=", 1)[0]
    for action in parser._actions:
        if name in action.option_strings:
            return action
    return None


def _values(option: argparse.Action, before: list[str]) -> list[str]:
    if option.choices is not None:
        return [str(choice) for choice in option.choices]
    dest = option.dest
    if dest == "policy":
        return _kubectl_names("deadletterpolicies.sparkdlq.io", before)
    if dest == "namespace":
        return _kubectl_names("namespaces", before, namespaced=False)
    if dest == "reason":
        return list(REASONS)
    if dest == "to":
        return ["source", "retry", "topic:"]
    return []


def _kubectl_names(resource: str, before: list[str], *, namespaced: bool = True) -> list[str]:
    """Names of ``resource`` from kubectl, with the connection flags already on the line; none
    when kubectl is missing, slow or refuses (completion never fails loudly)."""
    command = [os.environ.get("KUBECTL") or "kubectl", "get", resource, "-o", "name"]
    flags = {"--kubeconfig": "--kubeconfig", "--context": "--context"}
    if namespaced:
        flags |= {"-n": "--namespace", "--namespace": "--namespace"}
    for i, word in enumerate(before):
        name, _, value = word.partition("=")
        if name in flags and (value or i + 1 < len(before)):
            command.append(f"{flags[name]}={value or before[i + 1]}")
    command.append(f"--request-timeout={KUBECTL_TIMEOUT_S}s")
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_S + 1, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return sorted(line.rsplit("/", 1)[-1] for line in done.stdout.split() if line)


def _starting(choices: list[str], partial: str) -> list[str]:
    return [choice for choice in choices if choice.startswith(partial)]
