"""What this installed copy of spark-dlq is: its version (``--version`` of the three commands,
the ``*_build_info`` metrics) and which extra a missing module belongs to.

``pip install spark-dlq`` installs the policy model only; the engine and the operator need their
extras (``spark-dlq[engine]``, ``spark-dlq[operator]``; ``kubectl dlq`` on a Pulsar policy the
``pulsar`` extra too). A command whose extra is missing says
so in one line instead of an import traceback. The version is the distribution's, from its
metadata: ``pyproject.toml`` is the one place it is written. No import here loads Spark.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from collections.abc import Callable, Iterable
from typing import Final, Literal, NoReturn, TypeVar

DISTRIBUTION: Final = "spark-dlq"

Extra = Literal["engine", "operator", "pulsar"]

#: The top-level modules of each extra's distributions (pyproject.toml's optional-dependencies;
#: tests/unit/test_release.py keeps the two in step).
EXTRA_MODULES: Final[dict[Extra, frozenset[str]]] = {
    "engine": frozenset({"pyspark", "pyarrow", "pandas", "google", "prometheus_client", "pulsar"}),
    "operator": frozenset({"kopf", "kubernetes_asyncio", "confluent_kafka", "prometheus_client"}),
    "pulsar": frozenset({"pulsar", "_pulsar"}),
}

#: Exit status of a command whose extra is not installed.
EXIT_MISSING_EXTRA: Final = 1

T = TypeVar("T")


def version() -> str:
    """The installed distribution's version; ``unknown`` when it runs from a source tree that
    was never installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_labels() -> dict[str, str]:
    """The labels of ``spark_dlq_build_info`` and ``spark_dlq_operator_build_info``."""
    return {"version": version(), "python": platform.python_version()}


def version_line(prog: str) -> str:
    return f"{prog} {version()}"


def missing_extra(error: ModuleNotFoundError, extra: Extra, *, prog: str) -> str | None:
    """The line to print when ``error`` is a module of ``extra`` that is not installed; None when
    it is something else (a bug, to be raised as it is)."""
    name = (error.name or "").split(".")[0]
    if name not in EXTRA_MODULES[extra]:
        return None
    return f"{prog}: needs the {extra} extra ({name} is not installed): pip install '{DISTRIBUTION}[{extra}]'"


def with_extra(extra: Extra, prog: str, load: Callable[[], T]) -> T:
    """``load()``, or one line naming the extra and exit status 1 when a module of it is missing."""
    try:
        return load()
    except ModuleNotFoundError as error:
        line = missing_extra(error, extra, prog=prog)
        if line is None:
            raise
        _exit(line)


def asks_for_version(argv: Iterable[str]) -> bool:
    """``--version`` as the first argument: answered before anything of an extra is imported."""
    return next(iter(argv), None) == "--version"


def _exit(line: str) -> NoReturn:
    print(line, file=sys.stderr)
    raise SystemExit(EXIT_MISSING_EXTRA)
