"""The engine's command line, as the operator writes it into a SparkApplication's ``arguments``.

The engine parses these arguments (``dlq_engine.cli``) in another process, from another image,
so the flags are a contract between the two: each command is a dataclass whose fields are the
options it is given, and ``engine_arguments`` is the one function that turns one into the
argument list (a field ``x_y`` is the flag ``--x-y``). tests/unit/test_engine_command.py parses
what it returns with the engine's own parser and gets every field back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Run:
    """``dlq-engine run``: a policy's routing job."""

    #: The mounted ``policy.yaml``.
    file: str
    checkpoint: str
    #: ``NAMESPACE/NAME`` of the policy's Lease, where the driver reports its heartbeat.
    heartbeat_lease: str
    #: The hash of the ``policy.yaml`` the operator wrote: the engine refuses another file.
    config_hash: str


@dataclass(frozen=True, slots=True)
class Redrive:
    """``dlq-engine redrive``: a redrive's batch job."""

    #: The mounted ``redrive.yaml``.
    file: str
    #: The mounted ``policy.yaml`` of the policy it redrives for.
    policy: str
    checkpoint: str
    #: Where the driver writes its final status (the operator reads it from the pod).
    status_file: str


EngineCommand = Run | Redrive

_SUBCOMMANDS: Final[dict[type[EngineCommand], str]] = {Run: "run", Redrive: "redrive"}
#: Flags other than ``--<field>``.
_SHORT: Final = {"file": "-f"}


def engine_arguments(command: EngineCommand) -> list[str]:
    """``dlq-engine``'s arguments for ``command``: the subcommand, then each field's flag and value."""
    arguments = [_SUBCOMMANDS[type(command)]]
    for field in dataclasses.fields(command):
        flag = _SHORT.get(field.name, "--" + field.name.replace("_", "-"))
        arguments += [flag, str(getattr(command, field.name))]
    return arguments
