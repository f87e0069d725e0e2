"""The program's name, and the expected failures of ``kubectl dlq`` and the exit status each gives: one ``error: ...`` line
on stderr, then 0 done, 1 the broker or the cluster could not be reached or refused, 2 bad input.
"""

from __future__ import annotations

from typing import Final

#: The program, as its help and its one-line errors name it.
PROG: Final = "kubectl dlq"

EXIT_OK: Final = 0
EXIT_UNREACHABLE: Final = 1
EXIT_BAD_INPUT: Final = 2


class TriageError(Exception):
    """An expected failure: its message is printed as one ``error: ...`` line, then the command
    exits with ``status``."""

    status = EXIT_UNREACHABLE


class BadInput(TriageError):
    """Something the user gave (a flag, a file, a name, a position) cannot be used."""

    status = EXIT_BAD_INPUT


class Unreachable(TriageError):
    """The broker or the cluster could not be reached, or refused what was asked."""

    status = EXIT_UNREACHABLE
