"""Why the engine ended, in one place: the kinds (``Ending``), their exit statuses and the one
line each prints on stderr, and the one error the pipeline raises (``EngineError``).

The job runner decides the ending with ``decode`` and nothing else. An ``EngineError`` raised
on a Spark worker (the ``stop`` strategy, in ``mapInArrow``) or in a ``foreachBatch`` sink (a
failed write) reaches the driver only as text, inside the ``PythonException`` or py4j error
Spark wraps it in: that crossing has no other carrier. So its text is the record, written by
``encode`` and read by ``decode`` (``tests/unit/test_failures.py`` checks the round trip,
wrapped as Spark wraps it): the first line is ``<marker> <line>``, the marker named by the
kind; the rest is the whole underlying error (the metrics read the Kafka client's exception
from it).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

from dlq_engine.exits import (
    EXIT_CHECKPOINT_LOCKED,
    EXIT_ERROR_WINDOW,
    EXIT_FAILED,
    EXIT_STOP_STRATEGY,
)


class Ending(enum.Enum):
    """Why the query ended, when it did not end cleanly. The value is the marker of the kinds
    an ``EngineError`` carries across processes (``None``: decided on the driver)."""

    #: A dead letter met the ``stop`` strategy (or ``ordering.onOverflow: stop``).
    STOP_STRATEGY = "DLQ-STOP:"
    #: A write of the table sink failed (the broker's records, or the dead-letter table).
    SINK_WRITE = "DLQ-SINK:"
    #: The error window (``spec.errorWindow``) stopped the job.
    ERROR_WINDOW = "error-window"
    #: The checkpoint's lease was lost.
    LEASE_LOST = "lease-lost"
    #: Any other error of the query.
    QUERY_FAILED = "query-failed"

    @property
    def exit_status(self) -> int:
        return _EXIT[self]

    @property
    def carried(self) -> bool:
        """Whether an ``EngineError`` carries this kind (it crosses processes as text)."""
        return self in _PRECEDENCE


_EXIT: Final = {
    Ending.STOP_STRATEGY: EXIT_STOP_STRATEGY,
    Ending.SINK_WRITE: EXIT_FAILED,
    Ending.ERROR_WINDOW: EXIT_ERROR_WINDOW,
    Ending.LEASE_LOST: EXIT_CHECKPOINT_LOCKED,
    Ending.QUERY_FAILED: EXIT_FAILED,
}


@dataclass(frozen=True)
class Failure:
    """One ending: its kind and the line that says why."""

    kind: Ending
    line: str

    @property
    def exit_status(self) -> int:
        return self.kind.exit_status

    @property
    def message(self) -> str:
        """What the engine prints on stderr for it."""
        match self.kind:
            case Ending.STOP_STRATEGY:
                return f"dlq-engine: stopped: {self.kind.value} {self.line}"
            case Ending.ERROR_WINDOW | Ending.LEASE_LOST:
                return f"dlq-engine: stopped: {self.line}"
            case Ending.SINK_WRITE | Ending.QUERY_FAILED:
                return f"dlq-engine: the query failed: {self.line}"


class EngineError(RuntimeError):
    """The error the pipeline raises to end the query: a ``Failure`` of a carried kind, then
    (after a newline) the underlying error's whole text, if any."""

    def __init__(self, failure: Failure, detail: str = "") -> None:
        if not failure.kind.carried or "\n" in failure.line:
            raise ValueError(f"not a failure an error carries (a carried kind, one line): {failure}")
        self.failure = failure
        super().__init__(encode(failure) + (f"\n{detail}" if detail else ""))

    @classmethod
    def of(cls, kind: Ending, text: str, detail: str = "") -> EngineError:
        """``text``'s first line is the failure's line; the rest goes before ``detail``."""
        line, _, rest = text.partition("\n")
        return cls(Failure(kind, line.strip()), "\n".join(part for part in (rest, detail) if part))


def encode(failure: Failure) -> str:
    """The first line of an ``EngineError``'s text."""
    return f"{failure.kind.value} {failure.line}"


#: The carried kinds, the cause first: a stop raised by the routing of a batch that a
#: ``foreachBatch`` sink was writing comes back inside that write's error.
_PRECEDENCE: Final = (Ending.STOP_STRATEGY, Ending.SINK_WRITE)
_CARRIERS: Final = tuple((kind, re.compile(re.escape(kind.value) + r" ?([^\n]*)")) for kind in _PRECEDENCE)


def decode(text: str) -> Failure | None:
    """The ``Failure`` an ``EngineError`` wrote into ``text`` (any error text that wraps it:
    Spark's ``StreamingQueryException``, a py4j error, a Python traceback); None when there is
    none. A stop wins over the failed write that carried it."""
    for kind, carrier in _CARRIERS:
        found = carrier.search(text)
        if found is not None:
            return Failure(kind, found.group(1).strip())
    return None
